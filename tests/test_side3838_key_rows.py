"""``revalidate_side``'s ``by_key[keys[p]] is row`` check without hashing the fragment's key.

With distinct plain executor keys (exact tuples of exact str / int / tuples of those), the
lookup finds ``row`` exactly when ``row`` is one of the side's rows and the fragment's key equals
``row[1]``; the C side check shows that equality item by item (rs_plain_equal) and looks up any
key it does not show equal as before. These tests call the C side check on the arguments a
replace passes, with the fragment keys or the rows edited, and compare its answer with the
Python side check's (``_fast_side_consistent``): the C check never accepts what the Python one
refuses, and accepts equal copies of the keys."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mooncake.reshard import _native
from mooncake.reshard.weight._planner import bound_contracts as bc
from test_native_revalidate_typed_snapshots import _BOUND, StrSub


def _side_args() -> list[tuple[Any, ...]]:
    """The arguments of both C side checks of ``replace(_BOUND)``."""
    real = _native.revalidate_side
    calls: list[tuple[Any, ...]] = []

    def spy(*args: Any) -> Any:
        calls.append(args)
        return real(*args)

    _native.revalidate_side = spy
    try:
        assert dataclasses.replace(_BOUND) == _BOUND
    finally:
        _native.revalidate_side = real
    assert len(calls) == 2
    return calls


_ARGS = _side_args()


def _copy(value: Any) -> Any:
    """An equal object that is not ``value`` (str, int, tuple: recursively)."""
    if type(value) is tuple:
        return tuple(_copy(item) for item in value)
    if type(value) is str:
        return "".join([value[:1], value[1:]]) if len(value) > 1 else value
    return value


def _answers(args: tuple[Any, ...]) -> tuple[Any, bool]:
    c_used: set[int] = set()
    py_used: set[int] = set()
    c_args = list(args)
    c_args[7] = c_used
    frags, keys, runtime_ids, side_of, runtime, rows, attested = args[:7]
    try:
        answer = _native.revalidate_side(*c_args)
    except TypeError:  # (an unhashable key looked up: the Python check raises it too)
        with pytest.raises(TypeError):
            bc._fast_side_consistent(
                frags, keys, runtime_ids, bc._position_list(side_of), runtime, rows, attested, py_used
            )
        return "raised", False
    python = bc._fast_side_consistent(
        frags, keys, runtime_ids, bc._position_list(side_of), runtime, rows, attested, py_used
    )
    if answer is True:
        assert python, "the C side check accepted what the Python one refuses"
        assert c_used == py_used
    return answer, python


def _positions(args: tuple[Any, ...]) -> list[int]:
    return sorted(set(bc._position_list(args[3])))


_KEY_EDITS: dict[str, Callable[[tuple[Any, ...]], Any]] = {
    "copy": _copy,
    "same": lambda key: key,
    "str-item": lambda key: key[:1] + (key[1] + "x",) + key[2:],
    "worker": lambda key: key[:-2] + (key[-2] + "x",) + key[-1:],
    "rank-item": lambda key: key[:-1] + ((key[-1][0] + 1,) + key[-1][1:],),
    "rank-last": lambda key: key[:-1] + (key[-1][:-1] + (key[-1][-1] + 1,),),
    "rank-short": lambda key: key[:-1] + (key[-1][:-1],),
    "rank-list": lambda key: key[:-1] + (list(key[-1]),),
    "rank-float": lambda key: key[:-1] + ((float(key[-1][0]),) + key[-1][1:],),
    "rank-bool": lambda key: key[:-1] + (tuple(bool(v) if v in (0, 1) else v for v in key[-1]),),
    "str-subclass": lambda key: (StrSub(key[0]),) + key[1:],
    "short": lambda key: key[:-1],
    "long": lambda key: key + ("x",),
    "list": list,
    "other-fragment": lambda key: None,  # (replaced below by another fragment's key)
}


@pytest.mark.parametrize("side", (0, 1))
@pytest.mark.parametrize("edit", sorted(_KEY_EDITS))
def test_edited_fragment_key(side: int, edit: str) -> None:
    args = _ARGS[side]
    keys = args[1]
    positions = _positions(args)
    for position in (positions[0], positions[-1]):
        edited = list(keys)
        if edit == "other-fragment":
            others = [keys[p] for p in positions if keys[p] != keys[position]]
            if not others:
                continue
            edited[position] = others[0]
        else:
            edited[position] = _KEY_EDITS[edit](keys[position])
        answer, python = _answers(args[:1] + (edited,) + args[2:])
        if edit in ("copy", "same"):
            assert answer is True and python
        elif edit in ("str-subclass", "rank-bool", "rank-float"):
            assert python == (answer is True) or answer is None  # (equal: the lookup decides)
        else:
            assert answer in (None, "raised") and not python, edit


@pytest.mark.parametrize("side", (0, 1))
def test_all_keys_copied_are_accepted(side: int) -> None:
    args = _ARGS[side]
    answer, python = _answers(args[:1] + ([_copy(key) for key in args[1]],) + args[2:])
    assert answer is True and python


@pytest.mark.parametrize("side", (0, 1))
def test_a_row_replaced_by_an_equal_copy_is_not_the_row_the_runtime_map_selects(side: int) -> None:
    # ``by_key[key]`` is then the copy, not the runtime map's row: refused by Python, never
    # accepted by C (the rows are matched by address)
    args = _ARGS[side]
    rows = args[5]
    for index in (0, len(rows) - 1):
        edited = list(rows)
        edited[index] = (rows[index][0], rows[index][1], rows[index][2])
        assert edited[index] is not rows[index]
        answer, python = _answers(args[:5] + (edited,) + args[6:])
        assert answer is None and not python


@pytest.mark.parametrize("side", (0, 1))
def test_a_row_key_copied_is_still_matched(side: int) -> None:
    # the rows hold equal copies of their keys: the fragment keys are shown equal item by item
    args = _ARGS[side]
    rows = args[5]
    runtime = dict(args[4])
    edited = []
    for row in rows:
        copy = (row[0], _copy(row[1]), row[2])
        edited.append(copy)
        for rid, found in list(runtime.items()):
            if found is row:
                runtime[rid] = copy
    answer, python = _answers(args[:4] + (runtime, edited) + args[6:])
    assert answer is True and python


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    side=st.integers(0, 1),
    edits=st.lists(st.tuples(st.integers(0, 63), st.sampled_from(sorted(_KEY_EDITS))), min_size=1, max_size=3),
)
def test_random_key_edits_never_accept_what_python_refuses(side: int, edits: list[tuple[int, str]]) -> None:
    args = _ARGS[side]
    keys = list(args[1])
    positions = _positions(args)
    for pick, edit in edits:
        position = positions[pick % len(positions)]
        if edit == "other-fragment":
            keys[position] = keys[positions[(pick + 1) % len(positions)]]
        elif type(keys[position]) is tuple and type(keys[position][-1]) is tuple and keys[position][-1]:
            keys[position] = _KEY_EDITS[edit](keys[position])  # (edits compose on exact tuples)
    _answers(args[:1] + (keys,) + args[2:])  # (asserts C True => Python True, same ``used``)

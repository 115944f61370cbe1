"""``assembly_columns`` and ``FragmentTable.pack_objects`` look every fragment's tensor id up in
the caller's ``{tensor id: position}`` dict; after 16 lookups (or 1/8 of the keys) with no step
that may run Python code they build a table from each key object's address to its value
(csrc/str_index.h) and answer the ids that are the dict's own key objects from it. The table is
dropped at every step that may run code, and not built for a dict with a key that is not an exact
str (a lookup could run that key's ``__eq__``).

Pinned here:
- the columns and the table are those of a lookup per fragment, whatever the id objects (shared,
  equal but distinct, interleaved), with or without rows, including misses (decline / KeyError)
  and out-of-range positions;
- a dict with a key that is not an exact str gets no table: every fragment's lookup runs (the
  key's ``__eq__`` runs as often as without the table, also where it collides with a key the
  fragments hold);
- code the pass runs (a rank's ``__hash__`` or ``__dict__``) that changes the dict, or a
  fragment's tensor id, is seen by the later fragments' lookups, as without the memo.
"""

from __future__ import annotations

import random
from typing import Any, Optional, Sequence

import pytest
from hypothesis import given, settings, strategies as st

from oracles import assembly_columns

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank, PlacementFragment

_RANKS = [ParallelRank(tp=t) for t in range(3)]


def _copy(text: str) -> str:
    out = "".join(list(text))
    assert out == text and (len(text) < 2 or out is not text)
    return out


def _fragments(ids: Sequence[str], ranks: Optional[Sequence[Any]] = None) -> list[Any]:
    ranks = ranks or _RANKS
    return [
        PlacementFragment(tensor_id, (i,), (1,), 2, ranks[i % len(ranks)], placement_fragment_id=f"f{i:05d}")
        for i, tensor_id in enumerate(ids)
    ]


def _tensor_of_rows(table: Any, ntensors: int) -> list[int]:
    """Each row's tensor position, from the table's per-tensor member lists."""
    rep, start, members = table.tensor_classes(list(range(ntensors)))
    out = [-1] * len(table)
    for position in range(ntensors):
        for row in members[start[position] : start[position + 1]]:
            out[row] = position
    return out


def _pack(index: dict, fragments: list[Any], rows: Optional[list[int]], ntensors: int) -> Any:
    shapes = [(1 << 20,)] * ntensors
    try:
        table, _, _ = _native.FragmentTable.pack_objects(shapes, index, fragments, rows, PlacementFragment)
    except Exception as error:  # the exact type and text are compared
        return (type(error).__name__, str(error))
    return _tensor_of_rows(table, ntensors)


def _pack_oracle(index: dict, fragments: list[Any], rows: Optional[list[int]], ntensors: int) -> Any:
    out = [-1] * len(fragments)
    for i, fragment in enumerate(fragments):
        try:
            position = index[fragment.tensor_id]
        except KeyError as error:
            return ("KeyError", str(error))
        if not 0 <= position < ntensors:
            return ("ValueError", "tensor_index out of range")
        out[i if rows is None else rows[i]] = position
    return out


_runs = st.lists(st.tuples(st.integers(0, 5), st.integers(1, 12), st.booleans()), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None)
@given(_runs, st.integers(0, 2**32), st.sampled_from(["ok", "missing", "range"]))
def test_lookups_equal_one_per_fragment(runs: list[tuple[int, int, bool]], seed: int, case: str) -> None:
    rng = random.Random(seed)
    names = [f"layers.{k}.w" for k in range(6)]
    # runs of one id object, runs of equal but distinct copies, interleaved ids
    ids: list[str] = []
    picks: list[int] = []
    for pick, length, copies in runs:
        # (names[pick] is the dict's key object: the table answers it)
        ids.extend(_copy(names[pick]) if copies else names[pick] for _ in range(length))
        picks.extend([pick] * length)
    fragments = _fragments(ids)
    order = sorted(set(picks))
    index = {names[p]: k for k, p in enumerate(order)}
    ntensors = len(index)
    if case == "missing" and ntensors > 1:
        del index[names[order[rng.randrange(ntensors)]]]
    elif case == "range":
        index[names[order[rng.randrange(ntensors)]]] = ntensors + rng.randrange(3)
    rows = list(range(len(fragments)))
    rng.shuffle(rows)
    for given_rows in (None, rows):
        assert _pack(index, fragments, given_rows, ntensors) == _pack_oracle(index, fragments, given_rows, ntensors)
    groups = {rank: g for g, rank in enumerate(_RANKS)}
    got = _native.assembly_columns(tuple(fragments), PlacementFragment, index, groups)
    if case == "ok":
        want = assembly_columns(fragments, index, groups)
        assert got == want
        assert all(a is b for a, b in zip(got[0], want[0]))  # the dict's own int objects
    elif case == "missing" and ntensors > 1 or case == "range":
        assert got is None


class _CountingKey(str):
    """A key that is not an exact str: a lookup of an equal str runs its __eq__."""

    calls = 0

    def __eq__(self, other: object) -> bool:
        _CountingKey.calls += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_no_snapshot_for_keys_that_are_not_exact_str() -> None:
    ids = ["a"] * 50 + ["b"] * 40 + ["a"] * 30
    fragments = _fragments(ids)
    index = {_CountingKey("a"): 0, "b": 1}
    wanted = sum(1 for t in ids if t == "a")  # one lookup (one __eq__) per fragment of "a"
    expected = [0] * 50 + [1] * 40 + [0] * 30
    _CountingKey.calls = 0
    assert _pack(index, fragments, None, 2) == expected
    assert _CountingKey.calls == wanted
    _CountingKey.calls = 0
    groups = {rank: g for g, rank in enumerate(_RANKS)}
    got = _native.assembly_columns(tuple(fragments), PlacementFragment, index, groups)
    assert got is not None and got[0] == expected
    assert _CountingKey.calls == wanted


class _SubDict(dict):
    pass


def test_dict_subclass() -> None:
    fragments = _fragments(["a"] * 40 + ["b"] * 40)
    index = _SubDict(a=0, b=1)
    assert _pack(index, fragments, None, 2) == [0] * 40 + [1] * 40
    groups = {rank: g for g, rank in enumerate(_RANKS)}
    assert _native.assembly_columns(tuple(fragments), PlacementFragment, index, groups)[0] == [0] * 40 + [1] * 40


class _HashingRank(ParallelRank):
    """A rank whose __hash__ (assembly_columns' group lookup) runs an action once."""

    action: Any = None

    def __hash__(self) -> int:
        action, _HashingRank.action = _HashingRank.action, None
        if action is not None:
            action()
        return ParallelRank.__hash__(self)


class _DictRank(ParallelRank):
    """A rank whose __dict__ read (pack_objects' first read of it) runs an action once."""

    action: Any = None

    @property
    def __dict__(self) -> Any:  # type: ignore[override]
        action, _DictRank.action = _DictRank.action, None
        if action is not None:
            action()
        return {name: object.__getattribute__(self, name) for name in ("dp", "tp", "pp", "ep")}


# 80 fragments: "a" x 40, "b" x 20, "a" x 20 (one id object each); the hooked rank first at
# fragment 30 (after the table was built), its action remaps the dict and gives fragment 35 the id "b"
_IDS = ["a"] * 40 + ["b"] * 20 + ["a"] * 20
_HOOKED_AT = 30
_RETARGETED = 35


_A, _B = "a", "b"  # the dict's key objects, shared by the fragments


def _hooked_fragments(hooked: Any) -> list[Any]:
    plain = ParallelRank(tp=0)
    a, b = _A, _B
    return [
        PlacementFragment(
            a if t == "a" else b, (i,), (1,), 2, hooked if i == _HOOKED_AT else plain, placement_fragment_id=f"f{i:05d}"
        )
        for i, t in enumerate(_IDS)
    ]


def _change(index: dict, fragments: list[Any]) -> Any:
    def change() -> None:
        index[_A] = 1
        index[_B] = 0
        object.__setattr__(fragments[_RETARGETED], "tensor_id", _B)

    return change


def _live(fragment_index: int) -> int:
    """The position a lookup per fragment in the live dict gives."""
    if fragment_index <= _HOOKED_AT:
        return 0  # "a" before the change
    return {"a": 1, "b": 0}["b" if fragment_index == _RETARGETED else _IDS[fragment_index]]


def test_assembly_columns_sees_changes_made_inside_the_call() -> None:
    hooked = _HashingRank(tp=1)
    fragments = _hooked_fragments(hooked)
    plain = fragments[0].rank
    _HashingRank.action = None
    groups = {plain: 0, hooked: 1}
    index = {_A: 0, _B: 1}
    assert fragments[0].tensor_id is next(iter(index))
    _HashingRank.action = _change(index, fragments)
    got = _native.assembly_columns(tuple(fragments), PlacementFragment, index, groups)
    assert _HashingRank.action is None  # it ran inside the call
    assert got is not None
    assert got[0] == [_live(i) for i in range(len(fragments))]


@pytest.mark.parametrize("with_rows", [False, True])
def test_pack_objects_sees_changes_made_inside_the_call(with_rows: bool) -> None:
    fragments = _hooked_fragments(_DictRank(tp=1))
    index = {_A: 0, _B: 1}
    rows = list(reversed(range(len(fragments)))) if with_rows else None
    _DictRank.action = _change(index, fragments)
    got = _pack(index, fragments, rows, 2)
    assert _DictRank.action is None  # it ran inside the call
    want = [_live(i) for i in range(len(fragments))]
    assert got == (want if rows is None else want[::-1])



class _CollidingKey(str):
    """A key that is not an exact str, hashing as ``"a"`` but unequal to it: a lookup of ``"a"``
    that meets it first in the dict's probe sequence runs its ``__eq__`` (Python code)."""

    calls = 0

    def __hash__(self) -> int:
        return hash("a")

    def __eq__(self, other: object) -> bool:
        _CollidingKey.calls += 1
        return False


def test_no_table_when_a_colliding_key_is_not_an_exact_str() -> None:
    """A dict whose non-str key collides with ``"a"`` (inserted first: each lookup of ``"a"``
    compares it): the table would answer ``"a"`` by address without that ``__eq__``, where a
    lookup runs it. Every fragment's lookup runs it, as without the table. Mutant (lead, session
    31): the exact-str check at the table's build removed (the count falls to the lookups made
    before the build: 19 instead of 90 with most hash seeds)."""
    ids = ["a"] * 60 + ["b"] * 40 + ["a"] * 30
    fragments = _fragments(ids)
    index = {_CollidingKey("zz"): 1, "a": 0, "b": 1}
    expected = [0] * 60 + [1] * 40 + [0] * 30
    _CollidingKey.calls = 0
    for tensor_id in ids:  # a lookup per fragment (how many compares each makes depends on the
        index[tensor_id]  # hash seed: "b" can share a probe slot too)
    wanted, _CollidingKey.calls = _CollidingKey.calls, 0
    assert wanted >= 90
    assert _pack(index, fragments, None, 2) == expected
    assert _CollidingKey.calls == wanted
    _CollidingKey.calls = 0
    groups = {rank: g for g, rank in enumerate(_RANKS)}
    got = _native.assembly_columns(tuple(fragments), PlacementFragment, index, groups)
    assert got is not None and got[0] == expected
    assert _CollidingKey.calls == wanted


def test_out_of_range_positions_after_the_table_is_built() -> None:
    """A key object whose value is out of range, looked up after the table was built: the table
    must not answer it (the pass writes a table hit's value unchecked), so the lookup decides,
    as without the table: ValueError from ``pack_objects``, a decline from ``assembly_columns``.
    Mutant (lead, session 31): the range check at the table's build removed."""
    ids = ["a"] * 40 + ["b"] * 10 + ["a"] * 10
    fragments = _fragments(ids)
    for value in (2, 3, 1 << 40):
        index = {"a": 0, "b": value}
        assert _pack(index, fragments, None, 2) == ("ValueError", "tensor_index out of range") == _pack_oracle(index, fragments, None, 2)
        groups = {rank: g for g, rank in enumerate(_RANKS)}
        assert _native.assembly_columns(tuple(fragments), PlacementFragment, index, groups) is None

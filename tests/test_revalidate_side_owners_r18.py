"""``_native.revalidate_side`` keeps the Python version's ``snapshot_owner`` (snapshot fragment id ->
snapshot) and the "every key found by an operation" count in one packed table keyed by the str's
own hash (session 18: the dict, its pair list, its identity index and the found-set held bind's
traced peak). Lookups are by equality, as the dict's were; an extra key (a snapshot no operation
of the side reaches), an unknown or non-str runtime id decline. Every answer C gives must be the
Python version's (``bound_contracts._fast_side_consistent``); where C is unsure it says None."""

from __future__ import annotations

import pickle
from typing import Any, Optional

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from test_native_revalidate import _side_tables
from test_native_revalidate_side_batched import _PLANS, _plan, _sides

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank
from mooncake.reshard.weight._planner import bound_contracts as bc
from mooncake.reshard.weight._planner.bound_contracts import RuntimeBindingAttestation
from mooncake.reshard.weight.types import PlacementFragment


def _native_side(args: tuple[Any, ...], row_of: Any = None) -> tuple[Optional[bool], set[int]]:
    used: set[int] = set()
    answer = _native.revalidate_side(
        *args, used, RuntimeBindingAttestation, ParallelRank, bc.RuntimeFragmentSnapshot, PlacementFragment, row_of
    )
    return answer, used


def _python_side(args: tuple[Any, ...]) -> tuple[Any, set[int]]:
    used: set[int] = set()
    try:
        return bc._fast_side_consistent(*args, used), used
    except Exception as error:  # the Python version's own failure: C must not accept then
        return type(error), used


def _agree(args: tuple[Any, ...], *, decided: bool) -> Optional[bool]:
    native, native_used = _native_side(args)
    python, python_used = _python_side(args)
    if native is True:
        assert python is True and native_used == python_used
    else:
        assert native is None
    if decided:  # a case C is expected to decide: it gives the Python answer
        assert native is python is True
    return native


def _copy_str(value: str) -> str:
    copied = "".join(list(value))
    assert copied == value and (len(value) < 2 or copied is not value)
    return copied


def _side_args(plan: Any, side: int, side_of: Optional[list[int]] = None,
               runtime_ids: Optional[list[Any]] = None) -> tuple[Any, ...]:
    frags, keys, ids, original, _runtime, _rows, attested = _sides(plan)[side]
    side_of = list(original) if side_of is None else side_of
    ids = list(ids) if runtime_ids is None else runtime_ids
    executors = plan.source_executors if side == 0 else plan.target_executors
    tables = _side_tables(executors, side_of, ids)
    assert tables is not None
    runtime, rows = tables
    return frags, keys, ids, side_of, runtime, rows, attested


@pytest.mark.parametrize("name", sorted(_PLANS))
@pytest.mark.parametrize("side", [0, 1])
def test_as_built_decided(name: str, side: int) -> None:
    with bc._ViewScope():
        _agree(_side_args(_PLANS[name], side), decided=True)


@pytest.mark.parametrize("side", [0, 1])
def test_runtime_ids_equal_not_identical_are_found(side: int) -> None:
    """The lookups are by equality (a dict's): runtime id objects that are equal copies of the
    snapshots' fragment ids find their entries."""
    plan = _PLANS["bound"]
    with bc._ViewScope():
        ids = [_copy_str(value) for value in _sides(plan)[side][2]]
        _agree(_side_args(plan, side, runtime_ids=ids), decided=True)


@pytest.mark.parametrize("side", [0, 1])
def test_reordered_and_repeated_operations(side: int) -> None:
    plan = _PLANS["split"]
    with bc._ViewScope():
        side_of = list(_sides(plan)[side][3])
        _agree(_side_args(plan, side, side_of=side_of[::-1]), decided=True)
        _agree(_side_args(plan, side, side_of=side_of + side_of[:5]), decided=True)


@pytest.mark.parametrize("side", [0, 1])
def test_a_fragment_no_operation_reaches_declines(side: int) -> None:
    """An executor's snapshot whose fragment no operation of the side reaches: the Python
    version's operation-id set is smaller than ``snapshot_owner`` (False); C declines (the key is
    past the table's room, or found by no operation)."""
    plan = _PLANS["bound"]
    with bc._ViewScope():
        side_of = list(_sides(plan)[side][3])
        for dropped in (side_of[0], side_of[-1], side_of[len(side_of) // 2]):
            kept = [position for position in side_of if position != dropped]
            native = _agree(_side_args(plan, side, side_of=kept), decided=False)
            assert native is None
            assert _python_side(_side_args(plan, side, side_of=kept))[0] is False


@pytest.mark.parametrize("side", [0, 1])
@pytest.mark.parametrize("odd", ["unknown", "int", "subclass"])
def test_odd_runtime_ids_decline(side: int, odd: str) -> None:
    plan = _PLANS["bound"]

    class Sub(str):
        pass

    with bc._ViewScope():
        frags, keys, ids, side_of, runtime, rows, attested = _side_args(plan, side)
        for position in (side_of[0], side_of[-1]):
            forged = list(ids)
            forged[position] = {"unknown": "no-such-fragment", "int": 7, "subclass": Sub(ids[position])}[odd]
            args = (frags, keys, forged, side_of, runtime, rows, attested)
            assert _native_side(args)[0] is None
            # the rows as built for the real ids, the row_of of revalidate_views ignored: the
            # per-fragment lookup decides (an equal str subclass is unsure in C)
            if odd != "subclass":
                assert _python_side(args)[0] is not True


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_random_operation_lists_agree(data: Any) -> None:
    """Random operation lists of a side (subsets, repeats, any order): C decides exactly when
    every executor's fragment is reached, and then as Python does."""
    plan = _PLANS["split"]
    side = data.draw(st.sampled_from([0, 1]))
    with bc._ViewScope():
        positions = sorted(set(_sides(plan)[side][3]))
        side_of = data.draw(st.lists(st.sampled_from(positions), min_size=1, max_size=3 * len(positions)))
        args = _side_args(plan, side, side_of=side_of)
        every = set(side_of) == set(positions)
        native = _agree(args, decided=every)
        if not every:
            assert native is None


def test_restored_plan_and_many_fragments() -> None:
    """A restored plan (equal snapshots, not the attested objects) past the table's first sizes."""
    plan = pickle.loads(pickle.dumps(_plan(target_tp=4, shape=(8, 64), tensors=tuple(f"x{k}" for k in range(40)))))
    with bc._ViewScope():
        for side in (0, 1):
            args = _side_args(plan, side)
            assert len(set(args[3])) >= 80
            _agree(args, decided=True)

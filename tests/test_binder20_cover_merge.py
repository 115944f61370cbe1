"""``_native.logical_target_cover`` with the placement's fragments (14 arguments) merges that tuple
with the parts' fragments instead of building tables by id and by address.

When the placement's tuple is a merge of the parts' tuples (each part's fragments in their order)
with strictly increasing ids, the ids are distinct and every operation target is found along that
order; anything else (another order, an id twice, a fragment missing or extra, more parts than
the merge takes, operations in another order, a target that is a copy) is decided by the tables
as before. The oracle: the twelve-argument call (no fragments tuple, so no merge) for the checks
and routes, and ``operations_snapshots`` over the two indexes for the snapshots answer."""

from __future__ import annotations

import random
from typing import Any, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_executor import tp_placement
from spec_helpers import field_state, forged_instance

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank, PlacementFragment, StoredFragmentSnapshot, TensorDescriptor
from mooncake.reshard.weight._planner.contracts import PlacementExecutorPlan, TransferRegion
from mooncake.reshard.weight.part import WeightPlacementPart
from mooncake.reshard.weight.planner import plan_placement_transfer

CLASSES = (TransferRegion, PlacementFragment, WeightPlacementPart, PlacementExecutorPlan, ParallelRank, TensorDescriptor)


def _world(parts: int, tensors: int) -> tuple[Any, Any, Any]:
    names = tuple(f"t{k:02d}" for k in range(tensors))
    source = tp_placement(2, prefix="s", dp=2, shape=(4, 2 * parts), tensors=names)
    target = tp_placement(parts, prefix="t", shape=(4, 2 * parts), tensors=names)
    return source, target, plan_placement_transfer(source, target)


SMALL = _world(3, 12)
WIDE = _world(40, 2)  # more parts than the merge takes


def _copy(value: Any, **changes: Any) -> Any:
    return forged_instance(type(value), {**field_state(value), **changes})


def _common(world: Any, operations: Any, parts: Any) -> tuple[Any, ...]:
    source, target, plan = world
    return (operations, parts, plan.target_executors, plan.target_tensors, target.placement_id, *CLASSES)


def _snapshots(operations: Any, target_fragments: Any, source_fragments: Any) -> Optional[bool]:
    try:
        target_index = {f.placement_fragment_id: f for f in target_fragments}
        source_index = {f.placement_fragment_id: f for f in source_fragments}
    except Exception:
        return None
    return _native.operations_snapshots(operations, TransferRegion, PlacementFragment, target_index, source_index)


def _agree(world: Any, operations: Any = None, parts: Any = None, target_fragments: Any = None) -> Any:
    """The fused answer, checked against the twelve-argument call and operations_snapshots."""
    source, target, plan = world
    operations = plan.operations if operations is None else operations
    parts = target.parts if parts is None else parts
    target_fragments = target.fragments if target_fragments is None else target_fragments
    common = _common(world, operations, parts)
    fused = _native.logical_target_cover(*common, StoredFragmentSnapshot, target_fragments, source.fragments)
    alone = _native.logical_target_cover(*common, StoredFragmentSnapshot)
    if alone is None:
        assert fused is None
        return None
    assert type(fused) is tuple and fused[0] is alone
    if fused[1] is True:
        assert _snapshots(operations, target_fragments, source.fragments) is True
    return fused


@pytest.mark.parametrize("world", [SMALL, WIDE], ids=["merged", "wide"])
def test_genuine_plan(world: Any) -> None:
    source, target, plan = world
    ids = [f.placement_fragment_id for f in target.fragments]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)  # the placement's own order
    assert _agree(world) == (True, True)


@pytest.mark.parametrize("seed", range(6))
def test_operations_in_another_order_are_found_by_address(seed: int) -> None:
    operations = list(SMALL[2].operations)
    random.Random(seed).shuffle(operations)
    assert _agree(SMALL, operations=tuple(operations)) == (True, True)


def test_a_fragment_without_operations_declines() -> None:
    plan = SMALL[2]
    target = plan.operations[len(plan.operations) // 2].target
    operations = tuple(op for op in plan.operations if op.target is not target)
    assert _agree(SMALL, operations=operations) is None


def test_an_operation_target_that_is_an_equal_copy_declines() -> None:
    for at in (0, 5, -1):
        operations = list(SMALL[2].operations)
        operations[at] = _copy(operations[at], target=_copy(operations[at].target))
        assert _agree(SMALL, operations=tuple(operations)) is None


def test_an_id_in_two_parts_declines_in_id_order() -> None:
    source, target, plan = SMALL
    first, second = target.parts[0], target.parts[1]
    clash = _copy(second.fragments[0], placement_fragment_id=first.fragments[0].placement_fragment_id)
    parts = (first, _copy(second, fragments=(clash,) + second.fragments[1:])) + target.parts[2:]
    listed = sorted((f for part in parts for f in part.fragments), key=lambda f: f.placement_fragment_id)
    assert _agree(SMALL, parts=parts, target_fragments=tuple(listed)) is None


def _second_part_replaced(new_id: str) -> tuple[tuple[Any, ...], Any]:
    """Part b's first fragment replaced by a copy with id new_id, its operations and part b's
    executor following it: (the twelve arguments, the fragments in id order)."""
    source, target, plan = SMALL
    first, second = target.parts[0], target.parts[1]
    old = second.fragments[0]
    replaced = _copy(old, placement_fragment_id=new_id)
    fragments = tuple(sorted((replaced,) + second.fragments[1:], key=lambda f: f.placement_fragment_id))
    parts = (first, _copy(second, fragments=fragments)) + target.parts[2:]
    operations = tuple(_copy(op, target=replaced) if op.target is old else op for op in plan.operations)
    executors = tuple(
        _copy(e, placement_fragment_ids=tuple(f.placement_fragment_id for f in fragments))
        if e.participant_id == second.participant_id else e
        for e in plan.target_executors
    )
    listed = tuple(sorted((f for part in parts for f in part.fragments), key=lambda f: f.placement_fragment_id))
    common = (operations, parts, executors, plan.target_tensors, target.placement_id, *CLASSES, StoredFragmentSnapshot)
    return common, listed


def test_an_id_twice_declines_when_everything_else_agrees() -> None:
    """Only the distinctness of the ids fails: one of part a's ids on part b's first fragment."""
    source, target, plan = SMALL
    common, listed = _second_part_replaced(target.parts[0].fragments[-1].placement_fragment_id)
    assert _native.logical_target_cover(*common) is None  # the tables see the id twice
    assert _native.logical_target_cover(*common, listed, source.fragments) is None
    # the same forgery with a fresh id: decided (so only the repeated id declined above)
    common, listed = _second_part_replaced(target.parts[1].fragments[0].placement_fragment_id + "-fresh")
    assert _native.logical_target_cover(*common) is True
    assert _native.logical_target_cover(*common, listed, source.fragments)[0] is True


def test_the_same_object_in_two_parts_declines_in_id_order() -> None:
    source, target, plan = SMALL
    first, second = target.parts[0], target.parts[1]
    twice = first.fragments[0]
    parts = (first, _copy(second, fragments=tuple(sorted(
        second.fragments + (twice,), key=lambda f: f.placement_fragment_id)))) + target.parts[2:]
    listed = sorted((f for part in parts for f in part.fragments), key=lambda f: f.placement_fragment_id)
    assert _agree(SMALL, parts=parts, target_fragments=tuple(listed)) is None


@pytest.mark.parametrize("kind", ["reversed", "missing", "extra", "copy", "concatenated", "swapped"])
def test_other_fragment_lists_are_decided_by_the_tables(kind: str) -> None:
    source, target, plan = SMALL
    tf = target.fragments
    listed = {
        "reversed": tf[::-1],
        "missing": tf[:-1],
        "extra": tf + tf[:1],
        "copy": tf[:-1] + (_copy(tf[-1]),),
        "concatenated": tuple(f for part in target.parts for f in part.fragments),
        "swapped": tf[1:2] + tf[:1] + tf[2:],
    }[kind]
    fused = _agree(SMALL, target_fragments=listed)
    assert fused is not None and fused[0] is True  # the checks do not depend on that tuple
    if kind in ("reversed", "concatenated", "swapped"):
        assert fused == (True, True)  # the same fragments: the same index
    else:
        assert fused == (True, False)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_forgeries_agree_with_the_unmerged_call(data: st.DataObject) -> None:
    source, target, plan = SMALL
    operations = list(plan.operations)
    parts = list(target.parts)
    listed = list(target.fragments)
    for _ in range(data.draw(st.integers(0, 3))):
        kind = data.draw(st.sampled_from(["shuffle-ops", "drop-op", "repeat-op", "swap-listed", "drop-listed",
                                          "clash", "copy-target"]))
        if kind == "shuffle-ops":
            random.Random(data.draw(st.integers(0, 99))).shuffle(operations)
        elif kind == "drop-op" and operations:
            operations.pop(data.draw(st.integers(0, len(operations) - 1)))
        elif kind == "repeat-op" and operations:
            at = data.draw(st.integers(0, len(operations) - 1))
            operations.insert(at, operations[at])
        elif kind == "swap-listed" and len(listed) > 1:
            at = data.draw(st.integers(0, len(listed) - 2))
            listed[at], listed[at + 1] = listed[at + 1], listed[at]
        elif kind == "drop-listed" and listed:
            listed.pop(data.draw(st.integers(0, len(listed) - 1)))
        elif kind == "clash":
            p = data.draw(st.integers(0, len(parts) - 2))
            a, b = parts[p], parts[p + 1]
            clash = _copy(b.fragments[0], placement_fragment_id=a.fragments[-1].placement_fragment_id)
            parts[p + 1] = _copy(b, fragments=tuple(sorted(
                (clash,) + b.fragments[1:], key=lambda f: f.placement_fragment_id)))
            listed = sorted((f for part in parts for f in part.fragments), key=lambda f: f.placement_fragment_id)
        elif kind == "copy-target" and operations:
            at = data.draw(st.integers(0, len(operations) - 1))
            operations[at] = _copy(operations[at], target=_copy(operations[at].target))
    _agree(SMALL, operations=tuple(operations), parts=tuple(parts), target_fragments=tuple(listed))

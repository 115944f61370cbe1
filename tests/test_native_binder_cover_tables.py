"""``_native.logical_target_cover``'s tables: placement fragment ids checked distinct by value (a
str table, no dict of ints), each part's ids in strictly increasing order and every executor's
ids compared item by item with them (identity, else equal exact str), fragments found by address
in an identity table holding its keys, and operation sources proven once (address table; a
source fragment whose id is unique is its own index entry). Each case decides as the Python
checks do, or declines (None) where the fast path does not decide."""

from __future__ import annotations

from typing import Any

import pytest

from memory_executor import tp_placement
from spec_helpers import field_state, forged_instance

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank, PlacementFragment, StoredFragmentSnapshot, TensorDescriptor
from mooncake.reshard.weight._planner.contracts import PlacementExecutorPlan, TransferRegion
from mooncake.reshard.weight.part import WeightPlacementPart
from mooncake.reshard.weight.planner import plan_placement_transfer

CLASSES = (TransferRegion, PlacementFragment, WeightPlacementPart, PlacementExecutorPlan, ParallelRank, TensorDescriptor)

SOURCE = tp_placement(2, prefix="s", dp=2, shape=(4, 6), tensors=tuple(f"t{k}" for k in range(6)))
TARGET = tp_placement(3, prefix="t", shape=(4, 6), tensors=tuple(f"t{k}" for k in range(6)))
PLAN = plan_placement_transfer(SOURCE, TARGET)


def _copy(value: Any, **changes: Any) -> Any:
    return forged_instance(type(value), {**field_state(value), **changes})


def _call(
    parts: Any = None, executors: Any = None, operations: Any = None, sources: Any = None, fused: bool = True
) -> Any:
    parts = TARGET.parts if parts is None else parts
    common = (
        PLAN.operations if operations is None else operations,
        parts,
        PLAN.target_executors if executors is None else executors,
        PLAN.target_tensors,
        TARGET.placement_id,
        *CLASSES,
        StoredFragmentSnapshot,
    )
    if not fused:
        return _native.logical_target_cover(*common)
    fragments = tuple(fragment for part in parts for fragment in part.fragments)
    source_fragments = SOURCE.fragments if sources is None else sources
    return _native.logical_target_cover(*common, fragments, source_fragments)


def test_genuine_plan() -> None:
    assert _call() == (True, True)
    assert _call(fused=False) is True
    assert all(len(part.fragments) > 1 for part in TARGET.parts)  # the order checks run


def test_executor_ids_equal_but_not_identical_are_accepted() -> None:
    executors = tuple(
        _copy(e, placement_fragment_ids=tuple("".join(list(i)) for i in e.placement_fragment_ids))
        for e in PLAN.target_executors
    )
    assert all(
        a is not b
        for e, g in zip(executors, PLAN.target_executors)
        for a, b in zip(e.placement_fragment_ids, g.placement_fragment_ids)
    )
    assert _call(executors=executors) == (True, True)


@pytest.mark.parametrize("kind", ["reversed", "missing", "extra", "other-part", "str-subclass", "not-a-str"])
def test_executor_ids_other_than_the_parts_sorted_ids_decline(kind: str) -> None:
    first = PLAN.target_executors[0]
    ids = first.placement_fragment_ids
    other = PLAN.target_executors[1].placement_fragment_ids

    class Sub(str):
        pass

    forged_ids = {
        "reversed": tuple(reversed(ids)),
        "missing": ids[:-1],
        "extra": ids + other[:1],
        "other-part": ids[:-1] + other[-1:],
        "str-subclass": (Sub(ids[0]),) + ids[1:],
        "not-a-str": (1 << 80,) + ids[1:],
    }[kind]
    executors = (_copy(first, placement_fragment_ids=forged_ids),) + PLAN.target_executors[1:]
    assert _call(executors=executors) is None


def test_a_part_not_in_id_order_declines() -> None:
    part = TARGET.parts[0]
    parts = (_copy(part, fragments=tuple(reversed(part.fragments))),) + TARGET.parts[1:]
    assert _call(parts=parts) is None


def test_an_id_in_two_parts_declines() -> None:
    first, second = TARGET.parts[0], TARGET.parts[1]
    clash = _copy(second.fragments[0], placement_fragment_id=first.fragments[0].placement_fragment_id)
    parts = (first, _copy(second, fragments=(clash,) + second.fragments[1:])) + TARGET.parts[2:]
    assert _call(parts=parts) is None


def test_the_same_fragment_object_twice_declines() -> None:
    first = TARGET.parts[0]
    parts = (_copy(first, fragments=first.fragments + first.fragments[:1]),) + TARGET.parts[1:]
    assert _call(parts=parts) is None


def test_an_operation_target_that_is_an_equal_copy_declines() -> None:
    ops = list(PLAN.operations)
    ops[3] = _copy(ops[3], target=_copy(ops[3].target))
    assert _call(operations=tuple(ops)) is None


def test_source_fragments_with_a_repeated_id_decide_per_operation() -> None:
    sources = SOURCE.fragments
    # a later equal-id copy wins the index: operations holding the original fail step 5's check
    twin = _copy(sources[0])
    assert _call(sources=sources + (twin,)) == (True, False)
    # the original listed last wins again: every operation's source is its index entry
    assert _call(sources=(twin,) + sources) == (True, True)


def test_a_source_not_listed_fails_the_fused_step5_only() -> None:
    used = {id(op.source) for op in PLAN.operations}
    kept = tuple(f for f in SOURCE.fragments if id(f) != id(PLAN.operations[-1].source))
    assert len(kept) < len(SOURCE.fragments) and id(PLAN.operations[-1].source) in used
    assert _call(sources=kept) == (True, False)


def test_a_source_whose_rank_is_not_plain_is_seen_on_every_operation() -> None:
    # the same forged source on several operations (the proven-source table must not hide it)
    ops = list(PLAN.operations)
    bad = _copy(ops[0].source, rank=(0, 0, 0, 0))
    for k in (1, 4, 7):
        ops[k] = _copy(ops[k], source=bad)
    routes, snapshots = _call(operations=tuple(ops))
    assert routes is False and snapshots is False
    ops = list(PLAN.operations)
    ops[-1] = _copy(ops[-1], source=bad)  # only the last one, after its original was proven
    assert _call(operations=tuple(ops)) == (False, False)
    assert _call(operations=tuple(ops), fused=False) is False

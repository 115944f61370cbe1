"""Fast paths of the logical target-coverage recheck (spec §11.6, step 2 of §12.1).

The recheck compares executor ranks and tensor descriptors identity-first and builds single-box
exact-cover inputs without a generator; these tests pin that the checks, their order and their
messages are those of the plain comparisons (equal-but-distinct values pass, forged ones fail)."""

from __future__ import annotations

import dataclasses
import random
from typing import Any, List, Optional, Sequence, Tuple

import pytest
from memory_executor import tp_placement
from spec_helpers import raises

from mooncake.reshard.weight import ParallelRank
from mooncake.reshard.weight._planner.geometry import exact_cover_failures
from mooncake.reshard.weight._planner.validation import validate_logical_target_coverage
from mooncake.reshard.weight.planner import plan_placement_transfer

_set = object.__setattr__


def _plan() -> Any:
    source = tp_placement(2, prefix="s", dp=2, shape=(4, 7))
    target = tp_placement(3, prefix="t", shape=(4, 7))
    return plan_placement_transfer(source, target)


def _replace_executor(plan: Any, index: int, **changes: Any) -> None:
    """Forge one target executor's fields (a clone, so the placement-built plan is untouched)."""
    executors = list(plan.target_executors)
    clone = object.__new__(type(executors[index]))
    clone.__dict__.update(executors[index].__dict__)
    for name, value in changes.items():
        _set(clone, name, value)
    executors[index] = clone
    _set(plan, "target_executors", tuple(executors))
    plan.__dict__.pop("_operation_views", None)


def test_equal_distinct_rank_passes() -> None:
    plan = _plan()
    rank = plan.target_executors[0].rank
    twin = ParallelRank(dp=rank.dp, tp=rank.tp, pp=rank.pp, ep=rank.ep)
    assert twin is not rank and twin == rank
    _replace_executor(plan, 0, rank=twin)
    validate_logical_target_coverage(plan)


def test_forged_rank_fails_with_the_executor_message() -> None:
    plan = _plan()
    rank = plan.target_executors[0].rank
    _replace_executor(plan, 0, rank=ParallelRank(dp=rank.dp, tp=rank.tp + 7, pp=rank.pp, ep=rank.ep))
    with raises("logical target executor differs from target placement"):
        validate_logical_target_coverage(plan)


def test_forged_fragment_ids_fail() -> None:
    plan = _plan()
    _replace_executor(plan, 0, placement_fragment_ids=("nope",))
    with raises("logical target executor fragments differ from target placement"):
        validate_logical_target_coverage(plan)


def test_target_tensor_catalog_checks() -> None:
    plan = _plan()
    tensors = plan.target_tensors
    _set(plan, "target_tensors", list(tensors))  # equal values in another sequence type pass
    validate_logical_target_coverage(plan)
    _set(plan, "target_tensors", ())
    with raises("logical target tensor catalog differs from placement"):
        validate_logical_target_coverage(plan)
    twin = dataclasses.replace(tensors[0])
    assert twin is not tensors[0]
    _set(plan, "target_tensors", (twin,) + tuple(tensors[1:]))
    validate_logical_target_coverage(plan)
    _set(plan, "target_tensors", (dataclasses.replace(tensors[0], tensor_id="other"),) + tuple(tensors[1:]))
    with raises("logical target tensor catalog differs from placement"):
        validate_logical_target_coverage(plan)


# --- exact_cover_failures: single-box rank checks against the plain any() form -----------------


def _reference(
    containers: Sequence[Tuple[Sequence[int], Sequence[int]]], boxes: Sequence[Sequence[Any]]
) -> Optional[int]:
    """exact_cover_failures with the rank test written as one any() (the previous form)."""
    for index, ((offset, shape), members) in enumerate(zip(containers, boxes)):
        rank = len(offset)
        if rank == 0 or len(shape) != rank or any(len(o) != rank or len(s) != rank for o, s in members):
            prior = _reference(containers[:index], boxes[:index]) if index else None
            return index if prior is None else prior
    return exact_cover_failures(containers, boxes) if containers else None


def test_single_box_rank_mismatches() -> None:
    assert exact_cover_failures([((0, 0), (1, 1))], [[((0,), (1,))]]) == 0
    assert exact_cover_failures([((0, 0), (1, 1))], [[((0, 0), (1,))]]) == 0
    assert exact_cover_failures([((), ())], [[((), ())]]) == 0
    assert exact_cover_failures([((0,), (2,)), ((0, 0), (1, 1))], [[], [((0,), (1,))]]) == 0
    assert exact_cover_failures([((0,), (2,)), ((0, 0), (1, 1))], [[((0,), (2,))], [((0,), (1,))]]) == 1
    assert exact_cover_failures([((0, 0), (2, 2))], [[((0, 0), (2, 2))]]) is None
    with pytest.raises(ValueError):
        exact_cover_failures([((0,), (2,))], [[((0,), (2,), (1,))]])  # a member that is not a pair


def test_exact_cover_failures_matches_reference_on_random_ranks() -> None:
    rnd = random.Random(20261129)
    for _ in range(1500):
        containers: List[Tuple[Tuple[int, ...], Tuple[int, ...]]] = []
        boxes: List[List[Tuple[Tuple[int, ...], Tuple[int, ...]]]] = []
        for _ in range(rnd.randint(0, 4)):
            rank = rnd.randint(0, 3)
            offset = tuple(rnd.randint(0, 4) for _ in range(rank))
            shape = tuple(rnd.randint(1, 3) for _ in range(rank if rnd.random() > 0.1 else rank + 1))
            containers.append((offset, shape))
            members = []
            for _ in range(rnd.choice([0, 1, 1, 1, 2, 3])):
                box_rank = rank if rnd.random() > 0.15 else max(0, rank - 1)
                members.append(
                    (tuple(rnd.randint(0, 5) for _ in range(box_rank)), tuple(rnd.randint(1, 3) for _ in range(box_rank)))
                )
            if rank and rnd.random() < 0.3:
                members = [(offset, shape)]
            boxes.append(members)
        assert exact_cover_failures(containers, boxes) == _reference(containers, boxes)

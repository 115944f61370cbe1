"""``_native.logical_target_cover``: the C accept path of the logical target self-checks (spec
§11.6, re-run by binding as §12.1 step 2).

It may only ACCEPT (every check of ``validate_logical_target_coverage`` but the per-executor
operation indices passes) or DECLINE (``None``: the Python checks decide and raise the first
failure). Tested against the Python checks as a brute-force oracle on planned plans (full and
local targets) and on forged ones, and with hostile arguments."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Callable, List, Optional, Tuple

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from layout_model import Layout, build_placement
from test_planner_oracle import placement_pairs

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank, PlacementFragment, TensorDescriptor
from mooncake.reshard.weight._planner import validation
from mooncake.reshard.weight._planner.contracts import PlacementExecutorPlan, TransferRegion
from mooncake.reshard.weight._planner.validation import _target_checks_accepted, validate_logical_target_coverage
from mooncake.reshard.weight.part import WeightPlacementPart
from mooncake.reshard.weight.planner import plan_placement_transfer, plan_placement_transfer_to_local_target

CLASSES = (TransferRegion, PlacementFragment, WeightPlacementPart, PlacementExecutorPlan, ParallelRank, TensorDescriptor)


def cover(plan: Any, **replace: Any) -> Optional[bool]:
    target = plan.target_placement
    values = {
        "operations": plan.operations,
        "parts": target.parts,
        "executors": plan.target_executors,
        "tensors": plan.target_tensors,
        "placement_id": target.placement_id,
    }
    values.update(replace)
    result: Optional[bool] = _native.logical_target_cover(*values.values(), *CLASSES)
    return result


def python_outcome(plan: Any) -> Optional[str]:
    """The Python checks alone (the accept path switched off): the oracle."""
    original = validation._target_checks_accepted
    validation._target_checks_accepted = lambda plan, target: False  # type: ignore[assignment]
    try:
        validate_logical_target_coverage(plan)
    except Exception as exc:  # noqa: BLE001 - any failure, e.g. a TypeError hashing a forged list
        return f"{type(exc).__name__}: {exc}"
    finally:
        validation._target_checks_accepted = original  # type: ignore[assignment]
    return None


def outcome(plan: Any) -> Optional[str]:
    try:
        validate_logical_target_coverage(plan)
    except Exception as exc:  # noqa: BLE001 - compared with the oracle's, whatever it is
        return f"{type(exc).__name__}: {exc}"
    return None


def _planned(pair: Tuple[Layout, Layout]) -> Tuple[Any, Any]:
    source = build_placement(pair[0])
    target = build_placement(pair[1])
    try:
        return plan_placement_transfer(source, target), target
    except ValueError:
        assume(False)
        raise


# ---------------------------------------------------------------------------------------
# Forgeries (object.__setattr__ on a fresh copy; the views stay as built)


def _set(obj: Any, name: str, value: Any) -> None:
    object.__setattr__(obj, name, value)


def drop_operation(plan: Any, i: int) -> None:
    ops = list(plan.operations)
    if ops:
        del ops[i % len(ops)]
    _set(plan, "operations", tuple(ops))


def duplicate_operation(plan: Any, i: int) -> None:
    ops = list(plan.operations)
    ops.append(ops[i % len(ops)])
    _set(plan, "operations", tuple(ops))


def equal_target_copy(plan: Any, i: int) -> None:
    ops = list(plan.operations)
    k = i % len(ops)
    op = copy.copy(ops[k])
    _set(op, "target", dataclasses.replace(op.target))
    ops[k] = op
    _set(plan, "operations", tuple(ops))


def shift_box(plan: Any, i: int) -> None:
    ops = list(plan.operations)
    k = i % len(ops)
    op = copy.copy(ops[k])
    offset = list(op.overlap_offset)
    offset[0] += 1
    _set(op, "overlap_offset", tuple(offset))
    ops[k] = op
    _set(plan, "operations", tuple(ops))


def hostile_box(plan: Any, i: int) -> None:
    ops = list(plan.operations)
    k = i % len(ops)
    op = copy.copy(ops[k])
    _set(op, "overlap_shape", tuple(op.overlap_shape[:-1]) + ((1 << 70) if i % 2 else 0,))
    ops[k] = op
    _set(plan, "operations", tuple(ops))


def drop_executor(plan: Any, i: int) -> None:
    executors = list(plan.target_executors)
    if executors:
        del executors[i % len(executors)]
    _set(plan, "target_executors", tuple(executors))


def duplicate_executor(plan: Any, i: int) -> None:
    executors = list(plan.target_executors)
    executors.append(executors[i % len(executors)])
    _set(plan, "target_executors", tuple(executors))


def equal_rank_copy(plan: Any, i: int) -> None:
    executors = list(plan.target_executors)
    k = i % len(executors)
    executor = copy.copy(executors[k])
    _set(executor, "rank", dataclasses.replace(executor.rank))
    executors[k] = executor
    _set(plan, "target_executors", tuple(executors))


def other_rank(plan: Any, i: int) -> None:
    executors = list(plan.target_executors)
    k = i % len(executors)
    executor = copy.copy(executors[k])
    _set(executor, "rank", dataclasses.replace(executor.rank, dp=executor.rank.dp + 1))
    executors[k] = executor
    _set(plan, "target_executors", tuple(executors))


def reversed_fragment_ids(plan: Any, i: int) -> None:
    executors = list(plan.target_executors)
    k = i % len(executors)
    executor = copy.copy(executors[k])
    _set(executor, "placement_fragment_ids", tuple(reversed(executor.placement_fragment_ids)))
    executors[k] = executor
    _set(plan, "target_executors", tuple(executors))


def list_fragment_ids(plan: Any, i: int) -> None:
    executors = list(plan.target_executors)
    k = i % len(executors)
    executor = copy.copy(executors[k])
    _set(executor, "placement_fragment_ids", list(executor.placement_fragment_ids))
    executors[k] = executor
    _set(plan, "target_executors", tuple(executors))


def reversed_tensors(plan: Any, i: int) -> None:
    _set(plan, "target_tensors", tuple(reversed(plan.target_tensors)))


def equal_tensor_copy(plan: Any, i: int) -> None:
    tensors = list(plan.target_tensors)
    k = i % len(tensors)
    tensors[k] = dataclasses.replace(tensors[k])
    _set(plan, "target_tensors", tuple(tensors))


def tensors_as_list(plan: Any, i: int) -> None:
    _set(plan, "target_tensors", list(plan.target_tensors))


def other_placement_id(plan: Any, i: int) -> None:
    executors = list(plan.target_executors)
    k = i % len(executors)
    executor = copy.copy(executors[k])
    _set(executor, "placement_id", executor.placement_id + "-other")
    executors[k] = executor
    _set(plan, "target_executors", tuple(executors))


FORGERIES: List[Callable[[Any, int], None]] = [
    drop_operation,
    duplicate_operation,
    equal_target_copy,
    shift_box,
    hostile_box,
    drop_executor,
    duplicate_executor,
    equal_rank_copy,
    other_rank,
    reversed_fragment_ids,
    list_fragment_ids,
    reversed_tensors,
    equal_tensor_copy,
    tensors_as_list,
    other_placement_id,
]


# ---------------------------------------------------------------------------------------
# Property tests


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(placement_pairs(), st.data())
def test_planned_plans_are_accepted_in_c(pair: Tuple[Layout, Layout], data: st.DataObject) -> None:
    plan, target = _planned(pair)
    assert cover(plan) is True
    assert _target_checks_accepted(plan, plan.target_placement)
    assert outcome(plan) is None and python_outcome(plan) is None
    parts = [part for part in target.parts if part.fragments]
    part = data.draw(st.sampled_from(parts))
    source = plan.source_placement
    local = plan_placement_transfer_to_local_target(source, target, part.participant_id)
    assert cover(local) is True
    assert outcome(local) is None and python_outcome(local) is None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(placement_pairs(), st.lists(st.tuples(st.sampled_from(FORGERIES), st.integers(0, 1000)), min_size=1, max_size=2))
def test_forged_plans_fail_first_as_the_python_checks(
    pair: Tuple[Layout, Layout], forgeries: List[Tuple[Callable[[Any, int], None], int]]
) -> None:
    plan, _target = _planned(pair)
    assume(plan.operations and plan.target_executors and plan.target_tensors)
    forged = copy.copy(plan)
    for forge, index in forgeries:
        if not (forged.operations and forged.target_executors and list(forged.target_tensors)):
            break  # an earlier forgery emptied what the next one picks from
        forge(forged, index)
    expected = python_outcome(forged)
    assert outcome(forged) == expected
    if cover(forged) and _target_checks_accepted(forged, forged.target_placement):
        assert expected is None  # an accept is never a rejection of the Python checks


# ---------------------------------------------------------------------------------------
# Hostile arguments


@pytest.fixture(scope="module")
def plan() -> Any:
    from planner_helpers import tp_placement
    from layout_model import TensorSpec

    tensor = TensorSpec("w", (8, 4))
    source = tp_placement("src", tensor, 2, 0)
    target = tp_placement("dst", tensor, 4, 0)
    return plan_placement_transfer(source, target)


def test_accepts_the_plan(plan: Any) -> None:
    assert cover(plan) is True


def test_wrong_arguments_raise_type_error(plan: Any) -> None:
    args = (plan.operations, plan.target_placement.parts, plan.target_executors, plan.target_tensors,
            plan.target_placement.placement_id)
    with pytest.raises(TypeError):
        _native.logical_target_cover(*args)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        _native.logical_target_cover(*args, *CLASSES, None)  # type: ignore[call-arg]
    for k in range(len(CLASSES)):
        for bad in (None, "TransferRegion", int):  # int: not a heap type
            classes = list(CLASSES)
            classes[k] = bad
            with pytest.raises(TypeError):
                _native.logical_target_cover(*args, *classes)


@pytest.mark.parametrize("name", ["operations", "parts", "executors", "tensors"])
@pytest.mark.parametrize("value", [None, [], {}, "x", 1 << 80])
def test_wrong_containers_decline(plan: Any, name: str, value: Any) -> None:
    assert cover(plan, **{name: value}) is None


def test_other_hostile_values_decline(plan: Any) -> None:
    assert cover(plan, placement_id=None) is None
    assert cover(plan, placement_id=plan.target_placement.placement_id + "x") is None
    assert cover(plan, executors=()) is None
    assert cover(plan, operations=()) is None
    assert cover(plan, operations=plan.operations + (object(),)) is None
    assert cover(plan, parts=plan.target_placement.parts * 2) is None  # participant ids twice
    assert cover(plan, tensors=plan.target_tensors * 2) is None


@pytest.mark.parametrize("value", [-1, 1 << 63, 1 << 80, True, 1.0, None])
def test_hostile_coordinates_decline(plan: Any, value: Any) -> None:
    op = copy.copy(plan.operations[0])
    object.__setattr__(op, "overlap_offset", (value,) + tuple(op.overlap_offset[1:]))
    assert cover(plan, operations=(op,) + plan.operations[1:]) is None
    object.__setattr__(op, "overlap_offset", plan.operations[0].overlap_offset)
    object.__setattr__(op, "overlap_shape", (value,) + tuple(op.overlap_shape[1:]))
    assert cover(plan, operations=(op,) + plan.operations[1:]) is None

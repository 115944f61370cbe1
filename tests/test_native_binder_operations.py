"""``_native.operations_snapshots`` (binding step 5) and ``_native.bound_fragment_ids`` (the
selections of step 11): C accept paths over a plan's operations.

Each either decides exactly what the Python loop decides or returns ``None`` (the loop then runs
and raises the first failure). Tested against the Python loops as oracles on planned and bound
plans, on forged source snapshots through ``bind_logical_transfer_plan`` (with the C calls on and
off), and with hostile arguments."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Optional, Tuple

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from layout_model import Layout, build_placement, build_runtime_bindings
from test_planner_oracle import placement_pairs
from spec_helpers import field_state, forged_instance

from mooncake.reshard import _native
from mooncake.reshard.weight import PlacementFragment, StoredFragmentSnapshot
from mooncake.reshard.weight._planner.binding import _part_fragment_index
from mooncake.reshard.weight.planner import (
    BoundWeightFragment,
    TransferRegion,
    bind_logical_transfer_plan,
    plan_placement_transfer,
)


def bound_python(operations: Any) -> Tuple[frozenset, frozenset]:  # type: ignore[type-arg]
    return (
        frozenset({op.source.binding.fragment_id for op in operations if isinstance(op.source, BoundWeightFragment)}),
        frozenset({op.target.binding.fragment_id for op in operations}),
    )


def bound_c(operations: Any) -> Optional[Tuple[frozenset, frozenset]]:  # type: ignore[type-arg]
    result: Optional[Tuple[frozenset, frozenset]] = _native.bound_fragment_ids(  # type: ignore[type-arg]
        operations, TransferRegion, BoundWeightFragment, StoredFragmentSnapshot
    )
    return result


def snapshots_c(plan: Any, operations: Any = None) -> Optional[bool]:
    result: Optional[bool] = _native.operations_snapshots(
        plan.operations if operations is None else operations,
        TransferRegion,
        PlacementFragment,
        _part_fragment_index(plan.target_placement),
        _part_fragment_index(plan.source_placement),
    )
    return result


def bind_outcome(plan: Any, targets: Any, sources: Any, fused: bool) -> Any:
    saved = (_native.operations_snapshots, _native.bound_fragment_ids)
    if not fused:
        _native.operations_snapshots = _native.bound_fragment_ids = lambda *args: None  # type: ignore[attr-defined]
    try:
        return bind_logical_transfer_plan(plan, targets, source_bindings=sources)
    except ValueError as exc:
        return str(exc)
    finally:
        _native.operations_snapshots, _native.bound_fragment_ids = saved  # type: ignore[attr-defined]


def _planned(pair: Tuple[Layout, Layout]) -> Tuple[Any, Any, Any]:
    source = build_placement(pair[0])
    target = build_placement(pair[1])
    try:
        plan = plan_placement_transfer(source, target)
    except ValueError:
        assume(False)
        raise
    return plan, build_runtime_bindings(target, base_address=1 << 40), build_runtime_bindings(source)


FORGERIES = ["none", "equal-source-copy", "other-source", "foreign-source", "source-object"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(placement_pairs(), st.sampled_from(FORGERIES), st.integers(0, 1000))
def test_binding_outcome_is_the_python_loops(pair: Tuple[Layout, Layout], forgery: str, index: int) -> None:
    plan, targets, sources = _planned(pair)
    assume(plan.operations)
    assert snapshots_c(plan) is True
    forged = copy.copy(plan)
    ops = list(forged.operations)
    k = index % len(ops)
    op = copy.copy(ops[k])
    if forgery == "equal-source-copy":
        object.__setattr__(op, "source", dataclasses.replace(op.source))  # equal: accepted by Python
    elif forgery == "other-source":
        other = ops[(k + 1) % len(ops)].source
        object.__setattr__(op, "source", other)
    elif forgery == "foreign-source":
        object.__setattr__(op, "source", dataclasses.replace(op.source, placement_fragment_id="elsewhere"))
    elif forgery == "source-object":
        object.__setattr__(op, "source", object())
    ops[k] = op
    object.__setattr__(forged, "operations", tuple(ops))
    if forgery in ("equal-source-copy", "foreign-source", "source-object"):
        assert snapshots_c(forged) is None  # not the placement's own object (or not in it)
    else:
        assert snapshots_c(forged) is True  # the placement's own objects (maybe another op's)
    slow = bind_outcome(forged, targets, sources, False)
    fast = bind_outcome(forged, targets, sources, True)
    assert fast == slow
    if not isinstance(fast, str):
        assert bound_c(fast.operations) == bound_python(fast.operations)


def test_bound_ids_of_a_bound_plan_and_declines() -> None:
    from layout_model import TensorSpec
    from planner_helpers import tp_placement

    source = tp_placement("src", TensorSpec("w", (8, 4)), 2, 0)
    target = tp_placement("dst", TensorSpec("w", (8, 4)), 4, 0)
    plan = bind_logical_transfer_plan(
        plan_placement_transfer(source, target),
        build_runtime_bindings(target, base_address=1 << 40),
        source_bindings=build_runtime_bindings(source),
    )
    ops = plan.operations
    assert bound_c(ops) == bound_python(ops) and bound_c(list(ops)) == bound_python(ops)
    assert bound_c(()) == (frozenset(), frozenset())
    for container in (None, iter(ops), {0: ops[0]}, "ops", 1 << 80):
        assert bound_c(container) is None
    assert bound_c(ops + (object(),)) is None

    class Region(TransferRegion):
        pass

    sub = forged_instance(Region, dict(field_state(ops[0])))
    assert bound_c((sub,)) is None
    for field, value in (("fragment_id", 7), ("fragment_id", None)):
        op = copy.copy(ops[0])
        binding = copy.copy(op.target.binding)
        object.__setattr__(binding, field, value)
        target = copy.copy(op.target)
        object.__setattr__(target, "binding", binding)
        object.__setattr__(op, "target", target)
        assert bound_c((op,)) is None
        op2 = copy.copy(ops[0])
        source = copy.copy(op2.source)
        object.__setattr__(source, "binding", binding)
        object.__setattr__(op2, "source", source)
        assert bound_c((op2,)) is None
    op = copy.copy(ops[0])
    object.__setattr__(op, "source", "not a fragment")
    assert bound_c((op,)) is None
    with pytest.raises(TypeError):
        _native.bound_fragment_ids(ops, TransferRegion, BoundWeightFragment)
    for bad in (None, "cls", int):
        with pytest.raises(TypeError):
            _native.bound_fragment_ids(ops, bad, BoundWeightFragment, StoredFragmentSnapshot)
        with pytest.raises(TypeError):
            _native.bound_fragment_ids(ops, TransferRegion, BoundWeightFragment, bad)


def test_operations_snapshots_hostile_arguments() -> None:
    from layout_model import TensorSpec
    from planner_helpers import tp_placement

    source = tp_placement("src", TensorSpec("w", (8, 4)), 2, 0)
    target = tp_placement("dst", TensorSpec("w", (8, 4)), 4, 0)
    plan = plan_placement_transfer(source, target)
    assert snapshots_c(plan) is True
    for operations in (list(plan.operations), "x", 1 << 80, plan.operations + (object(),)):
        assert snapshots_c(plan, operations) is None
    target_index = _part_fragment_index(target)
    source_index = _part_fragment_index(source)
    assert _native.operations_snapshots(None, TransferRegion, PlacementFragment, target_index, source_index) is None
    args = (plan.operations, TransferRegion, PlacementFragment)
    assert _native.operations_snapshots(*args, {}, source_index) is None
    assert _native.operations_snapshots(*args, target_index, {}) is None
    assert _native.operations_snapshots(*args, target_index, list(source_index.items())) is None
    # the indexes swapped: the targets are not the source placement's objects
    assert _native.operations_snapshots(*args, source_index, target_index) is None
    with pytest.raises(TypeError):
        _native.operations_snapshots(*args, target_index)
    for bad in (None, "cls", int):
        with pytest.raises(TypeError):
            _native.operations_snapshots(plan.operations, bad, PlacementFragment, target_index, source_index)
        with pytest.raises(TypeError):
            _native.operations_snapshots(plan.operations, TransferRegion, bad, target_index, source_index)
    # an id that is not a str
    op = copy.copy(plan.operations[0])
    fragment = copy.copy(op.target)
    object.__setattr__(fragment, "placement_fragment_id", 5)
    object.__setattr__(op, "target", fragment)
    assert snapshots_c(plan, (op,) + plan.operations[1:]) is None

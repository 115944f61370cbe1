"""``TransferPlan`` construction rules (spec §9.6, §12.4, §12.5, §12.7) and the operation views
of a bound plan (spec §11.9)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from memory_executor import HostWorld, tp_placement
from spec_helpers import raises

from mooncake.reshard.weight.planner import PlanningLimits, TransferPlan, plan_placement_transfer


@pytest.fixture()
def bound() -> Any:
    return HostWorld(tp_placement(2, prefix="s", shape=(4, 6)), tp_placement(3, prefix="t", shape=(4, 6))).bind()


def test_scalar_rules(bound: Any) -> None:
    with raises("transfer plan identifiers must not be empty"):
        dataclasses.replace(bound, resource_id="")
    with raises("transfer plan weight_generation must be non-negative"):
        dataclasses.replace(bound, weight_generation=-1)
    with raises("transfer plan weight_generation must be non-negative"):
        dataclasses.replace(bound, weight_generation=True)
    with raises("transfer plan planning_limits is invalid"):
        dataclasses.replace(bound, planning_limits=None)
    with raises("transfer plan source manifest identity is invalid"):
        dataclasses.replace(bound, source_manifest_identity="x")
    with raises("transfer plan source manifest is invalid"):
        dataclasses.replace(bound, source_manifest="x")


def test_limits(bound: Any) -> None:
    count = len(bound.operations)
    dataclasses.replace(bound, planning_limits=PlanningLimits(max_transfer_regions=count))
    with raises("transfer plan exceeds max_transfer_regions"):
        dataclasses.replace(bound, planning_limits=PlanningLimits(max_transfer_regions=count - 1))
    largest = max(op.segment_count for op in bound.operations)
    with raises("transfer plan exceeds max_segments_per_region"):
        dataclasses.replace(bound, planning_limits=PlanningLimits(max_segments_per_region=largest - 1))
    total = sum(op.segment_count for op in bound.operations)
    dataclasses.replace(bound, planning_limits=PlanningLimits(max_total_lowered_segments=total))
    with raises("transfer plan exceeds max_total_lowered_segments"):
        dataclasses.replace(bound, planning_limits=PlanningLimits(max_total_lowered_segments=total - 1))


def test_operation_types(bound: Any) -> None:
    op = bound.operations[0]
    with raises("executable transfer plan target must be runtime-bound"):
        dataclasses.replace(bound, operations=(dataclasses.replace(op, target=op.target.placement),))
    with raises("executable transfer plan source must be runtime-bound"):
        dataclasses.replace(bound, operations=(dataclasses.replace(op, source=op.source.placement),))


def test_runtime_plan_rejects_source_manifest_fields(bound: Any) -> None:
    from mooncake.reshard.weight.storage_manifest import StoredManifestIdentity

    identity = StoredManifestIdentity("ns", bound.resource_id, bound.revision, 1, "g", "g/manifest", "0" * 64)
    with raises("runtime transfer plan must not have a source manifest identity"):
        dataclasses.replace(bound, source_manifest_identity=identity)


def test_owner_on_operation_fragment_is_rejected(bound: Any) -> None:
    op = bound.operations[0]
    owned_binding = dataclasses.replace(op.target.binding, owner=object())
    forged_target = dataclasses.replace(op.target, binding=owned_binding, owner=owned_binding.owner, attestation=None)
    with raises("transfer plan target fragment retains runtime allocation owner"):
        dataclasses.replace(bound, operations=(dataclasses.replace(op, target=forged_target),) + bound.operations[1:])


def test_executor_rules(bound: Any) -> None:
    executor = bound.target_executors[0]
    with raises("target executor is missing runtime lease provenance"):
        dataclasses.replace(
            bound, target_executors=(dataclasses.replace(executor, runtime_lease_id=None),) + bound.target_executors[1:]
        )
    with raises("transfer plan has duplicate executor projection key"):
        dataclasses.replace(bound, target_executors=bound.target_executors + (executor,))
    with raises("target executor lacks runtime attestation"):
        dataclasses.replace(
            bound, target_executors=(dataclasses.replace(executor, attestation=None),) + bound.target_executors[1:]
        )
    with raises("target executor provenance differs from operations"):
        dataclasses.replace(bound, target_executors=bound.target_executors[1:])
    swapped = dataclasses.replace(executor, attestation=bound.target_executors[1].attestation)
    with raises("target executor provenance differs from attestation"):
        dataclasses.replace(bound, target_executors=(swapped,) + bound.target_executors[1:])


def test_in_place_reshard_is_rejected() -> None:
    world = HostWorld(tp_placement(1, prefix="s", shape=(4, 6)), tp_placement(1, prefix="t", shape=(4, 6)))
    src = world.source_bindings[0]
    base = world.target_bindings[0]
    fragment = src.fragments[0]
    targets = (
        dataclasses.replace(
            base,
            instance_id=src.instance_id,
            fragments=tuple(
                dataclasses.replace(
                    f,
                    worker_id=fragment.worker_id,
                    device=fragment.device,
                    address=fragment.address,
                    storage_address=fragment.storage_address,
                    storage_nbytes=fragment.storage_nbytes,
                )
                for f in base.fragments
            ),
        ),
    )
    with raises("source and target runtime storage allocations overlap in address space "):
        world.bind(targets)


def test_operation_views(bound: Any) -> None:
    seen = []
    for executor in bound.target_executors:
        indices = bound.operation_indices_for_executor(executor, "target")
        assert indices == tuple(sorted(indices)) and indices
        assert all(bound.operations[i].target.fragment_id in executor.fragment_ids for i in indices)
        seen.extend(indices)
    assert sorted(seen) == list(range(len(bound.operations)))
    with raises("invalid executor side: x"):
        bound.operation_indices_for_executor(bound.target_executors[0], "x")
    with raises("source executor is not part of this transfer plan"):
        bound.operation_indices_for_executor(bound.target_executors[0], "source")
    routes = bound.pipeline_routes
    assert [route.operation_indices for route in routes] == [tuple(range(len(bound.operations)))]
    assert bound.regions is bound.operations
    assert bound.total_bytes == 4 * 6 * 2
    assert not hasattr(TransferPlan, "execute") and not hasattr(TransferPlan, "submit")


def test_bind_applies_the_physical_check_exactly_once(monkeypatch: Any) -> None:
    from mooncake.reshard.weight._planner import bound_validation

    source = tp_placement(2, prefix="s", shape=(4, 6))
    target = tp_placement(3, prefix="t", shape=(4, 6))
    limits = PlanningLimits(max_total_lowered_segments=1234)
    world = HostWorld(source, target, logical=plan_placement_transfer(source, target, planning_limits=limits))
    calls = []
    original = bound_validation._validate_target_physical_ranges

    def counting(operations: Any, *, max_segment_checks: int = 1_000_000) -> None:
        calls.append(max_segment_checks)
        original(operations, max_segment_checks=max_segment_checks)

    monkeypatch.setattr(bound_validation, "_validate_target_physical_ranges", counting)
    plan = world.bind()
    assert calls == [1234]
    assert plan.planning_limits is world.logical.planning_limits

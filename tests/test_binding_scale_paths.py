"""Scale paths of binding and ``TransferPlan`` revalidation (issue 5, round 2): per-fragment
work done once per fragment object or attestation instead of once per operation.

Each path must give exactly the value (or the error) of the per-operation computation it
replaces; the reference computations below are that per-operation form. No timing is asserted."""

from __future__ import annotations

import dataclasses
import pickle
import random
from typing import Any, Optional

import pytest

from memory_executor import HostWorld, tp_placement
from spec_helpers import field_state, forged_copy, forged_instance

from mooncake.reshard.weight._planner import bound_validation
from mooncake.reshard.weight._planner.contracts import _bucket_of, _executor_key, _side_index, build_operation_views
from mooncake.reshard.weight._planner.fragments import BoundWeightFragment
from mooncake.reshard.weight.types import PlacementFragment


class World(HostWorld):
    """TP2 x DP2 source -> TP3 target (source fragments shared by several operations), source filled."""

    def __init__(self, source_tp: int = 2, target_tp: int = 3, shape: tuple[int, int] = (4, 7)) -> None:
        source = tp_placement(source_tp, prefix="s", dp=2, shape=shape)
        super().__init__(source, tp_placement(target_tp, prefix="t", shape=shape), fill=True, plan_first=True)


def _reference_views(operations: Any, source_executors: Any, target_executors: Any) -> tuple[Any, Any, Any]:
    """Per-operation derivation of the operation views (the form before round 2)."""
    s_logical, s_runtime, s_buckets = _side_index(source_executors)
    t_logical, t_runtime, t_buckets = _side_index(target_executors)
    routes: dict[tuple[Any, ...], list[int]] = {}
    for index, operation in enumerate(operations):
        source = operation.source
        target = operation.target
        for fragment, logical, runtime in ((source, s_logical, s_runtime), (target, t_logical, t_runtime)):
            bucket = _bucket_of(fragment, logical, runtime)
            if bucket is not None:
                bucket.append(index)
        if isinstance(source, (PlacementFragment, BoundWeightFragment)):
            source_pp: Optional[int] = source.rank.pp
            source_stage: Optional[int] = source.pipeline_stage_id
        else:
            source_pp = source_stage = None
        routes.setdefault((source_pp, source_stage, target.rank.pp, target.pipeline_stage_id), []).append(index)
    ordered = sorted(routes, key=lambda r: tuple(-1 if v is None else v for v in r))
    return (
        {k: tuple(v) for k, v in s_buckets.items()},
        {k: tuple(v) for k, v in t_buckets.items()},
        [(route, tuple(routes[route])) for route in ordered],
    )


def _views_tuple(views: Any, source_executors: Any, target_executors: Any) -> tuple[Any, Any, Any]:
    return (
        {_executor_key(e): views.indices(e, "source") for e in source_executors},
        {_executor_key(e): views.indices(e, "target") for e in target_executors},
        [
            (
                (g.source_pp, g.source_pipeline_stage_id, g.target_pp, g.target_pipeline_stage_id),
                g.operation_indices,
            )
            for g in views.pipeline_routes
        ],
    )


@pytest.mark.parametrize("seed", range(6))
def test_operation_views_equal_the_per_operation_derivation(seed: int) -> None:
    rng = random.Random(seed)
    world = World(rng.choice([1, 2, 3]), rng.choice([2, 3, 4]), (rng.randint(4, 9), rng.randint(5, 11)))
    plan = world.bind()
    for operations, sources, targets in (
        (plan.operations, plan.source_executors, plan.target_executors),
        (world.logical.operations, world.logical.source_executors, world.logical.target_executors),
    ):
        ops = list(operations) * 2  # every fragment object shared by at least two operations
        for _ in range(3):
            views = build_operation_views(tuple(ops), sources, targets)
            assert _views_tuple(views, sources, targets) == _reference_views(ops, sources, targets)
            rng.shuffle(ops)


def test_the_default_world_shares_source_fragments() -> None:
    plan = World().bind()
    assert len({id(op.source) for op in plan.operations}) < len(plan.operations)


def test_operation_views_of_a_bound_fragment_subclass_use_its_properties() -> None:
    world = World()
    plan = world.bind()

    class Renamed(BoundWeightFragment):
        @property
        def fragment_id(self) -> str:  # type: ignore[override]
            return "not-an-executor-fragment"

    ops = []
    for op in plan.operations:
        target = op.target
        forged = forged_instance(Renamed, dict(field_state(target)))
        ops.append(forged_copy(op, target=forged))  # a region is stored in its C layout
    views = build_operation_views(tuple(ops), plan.source_executors, plan.target_executors)
    expected = _reference_views(ops, plan.source_executors, plan.target_executors)
    assert _views_tuple(views, plan.source_executors, plan.target_executors) == expected
    assert all(indices == () for indices in expected[1].values())


def test_in_place_check_with_shared_sources_equals_the_per_operation_check() -> None:
    world = World()
    plan = world.bind()
    bound_validation._validate_no_in_place(plan.operations)  # accepted
    # Make one shared source's storage equal a target's storage: rejected as before.
    shared = plan.operations[-1].source
    target = plan.operations[0].target
    binding = dataclasses.replace(
        shared.binding,
        storage_address=target.binding.storage_address,
        storage_nbytes=target.binding.storage_nbytes,
        address=target.binding.storage_address,
        storage_offset_bytes=0,
        worker_id=target.binding.worker_id,
        device=target.binding.device,
    ) if shared.binding.nbytes <= target.binding.storage_nbytes else None
    if binding is None:
        pytest.skip("fragment sizes do not allow the overlap")
    forged = forged_instance(
        BoundWeightFragment, {**field_state(shared), "binding": binding, "instance_id": target.instance_id}
    )
    ops = []
    for op in plan.operations:
        ops.append(forged_copy(op, source=forged) if op.source is shared else forged_copy(op))
    with pytest.raises(ValueError, match="in-place reshard is unsupported"):
        bound_validation._validate_no_in_place(ops)


def test_revalidation_still_rejects_a_target_bound_to_another_placement() -> None:
    world = World()
    plan = world.bind()
    other = World(target_tp=4).bind()
    forged = forged_copy(plan.operations[0], target=other.operations[0].target)
    swapped = (forged,) + plan.operations[1:]
    with pytest.raises(ValueError):
        dataclasses.replace(plan, operations=swapped)


def test_round_trips_revalidate_to_equal_plans() -> None:
    world = World(3, 4, (6, 9))
    plan = world.bind()
    assert pickle.loads(pickle.dumps(plan)) == plan
    assert dataclasses.replace(plan) == plan
    assert plan.operation_indices_for_executor(plan.target_executors[0], "target")


@pytest.mark.parametrize("side", ["source", "target"])
def test_unpickled_executor_snapshots_are_compared_once_and_still_exactly(side: str) -> None:
    world = World()
    restored = pickle.loads(pickle.dumps(world.bind()))
    # Unpickled snapshots are new objects: the field-by-field comparison path runs.
    assert dataclasses.replace(restored) == restored
    executors = restored.source_executors if side == "source" else restored.target_executors
    snapshot = executors[-1].fragment_snapshots[-1]
    object.__setattr__(snapshot, "address", snapshot.address + 64)
    with pytest.raises(ValueError, match=f"{side} executor fragment provenance differs"):
        dataclasses.replace(restored)

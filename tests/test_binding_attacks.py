"""Binding attacks (spec §9, §12, §13, §15): every forged input or edited plan is rejected with
the spec's class and message; legitimate bindings execute correctly on host memory."""

from __future__ import annotations

import copy
import dataclasses
import gc
import pickle
import types
import weakref
from typing import Any, Tuple

import pytest

from memory_executor import HostMemory, HostWorld, host_bindings, stored_manifest, tp_placement
from spec_helpers import forged_copy, raises

from mooncake.reshard.weight import StoredFragmentSnapshot
from mooncake.reshard.weight._planner.binding import _build_executor_plans
from mooncake.reshard.weight._planner.bound_validation import _validate_target_physical_ranges
from mooncake.reshard.weight.planner import (
    BoundWeightFragment,
    ExecutorTransferPlan,
    RuntimeBindingAttestation,
    RuntimeBindingEvidence,
    RuntimeFragmentSnapshot,
    TransferPlan,
    bind_logical_transfer_plan,
    plan_placement_transfer_to_local_target,
    plan_stored_transfer_to_target_placement,
    resolve_executor_plan,
    resolve_executor_plans,
)


class World(HostWorld):
    """TP2 x DP2 source -> TP3 target (uneven), bound to real host memory, source filled."""

    def __init__(self, *, shared: bool = False) -> None:
        source = tp_placement(2, prefix="s", dp=2, shape=(4, 7))
        target = tp_placement(3, prefix="t", shape=(4, 7))
        super().__init__(source, target, shared_target=shared, fill=True, plan_first=True)


@pytest.fixture()
def world() -> World:
    return World()


def replace_fragment(binding: Any, index: int, **changes: Any) -> Any:
    fragments = list(binding.fragments)
    fragments[index] = dataclasses.replace(fragments[index], **changes)
    return dataclasses.replace(binding, fragments=tuple(fragments))


def with_binding(bindings: Tuple[Any, ...], index: int, binding: Any) -> Tuple[Any, ...]:
    items = list(bindings)
    items[index] = binding
    return tuple(items)


# ---------------------------------------------------------------------------------------
# Legitimate binding


def test_bind_and_execute_on_host_memory(world: World) -> None:
    plan = world.bind()
    moved, checked = world.execute_and_check(plan)
    assert moved == plan.total_bytes == 4 * 7 * 2
    assert checked == 4 * 7 * 2
    assert {executor.rank.dp for executor in plan.source_executors} == {0}
    for executor, binding in zip(plan.target_executors, world.target_bindings):
        assert executor.runtime_lease_id == binding.lease_id


def test_shared_allocation_targets_execute() -> None:
    world = World(shared=True)
    world.execute_and_check(world.bind())


def test_rebind_same_logical_plan_to_other_memory(world: World) -> None:
    world.bind()
    other = HostMemory()
    targets = host_bindings(world.target, other, prefix="other")
    world.execute_and_check(world.bind(target_bindings=targets), targets)


def test_local_target_plan_binds_with_one_target(world: World) -> None:
    participant = world.target.parts[1].participant_id
    logical = plan_placement_transfer_to_local_target(world.source, world.target, participant)
    targets = tuple(b for b in world.target_bindings if b.participant_id == participant)
    plan = world.bind(logical=logical, target_bindings=targets)
    assert len(plan.target_executors) == 1
    world.execute_and_check(plan, targets)


def test_owner_never_survives_binding() -> None:
    class Owner:
        pass

    owner = Owner()
    ref = weakref.ref(owner)
    world = World()
    targets = host_bindings(world.target, world.memory, prefix="own", owner=owner)
    plan = world.bind(target_bindings=targets)
    for executor in plan.target_executors:
        assert all(fragment.owner is None for fragment in executor.attestation.evidence.fragments)
    for op in plan.operations:
        assert op.target.owner is None and op.target.binding.owner is None
    del owner, targets
    gc.collect()
    assert ref() is None
    assert plan.operations


def test_pickle_and_copy_round_trip_every_bound_value(world: World) -> None:
    plan = world.bind()
    values = [
        plan,
        plan.operations[0],
        plan.operations[0].target,
        plan.operations[0].target.attestation,
        plan.operations[0].target.attestation.evidence,
        plan.target_executors[0],
        plan.target_executors[0].fragment_snapshots[0],
    ]
    for value in values:
        restored = pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        assert restored == value
        assert copy.copy(value) == value
        assert copy.deepcopy(value) == value
        assert isinstance(dataclasses.asdict(value), dict)
    assert dataclasses.replace(plan) == plan
    restored = pickle.loads(pickle.dumps(plan))
    assert restored.pipeline_routes == plan.pipeline_routes
    assert "_operation_views" not in plan.__getstate__()
    executor = restored.target_executors[0]
    assert restored.operation_indices_for_executor(executor, "target") == plan.operation_indices_for_executor(
        plan.target_executors[0], "target"
    )


def test_resolve_executor_plans(world: World) -> None:
    plan = world.bind()
    binding = world.target_bindings[0]
    executor = resolve_executor_plan(plan, world.target, binding, "target")
    assert executor == plan.target_executors[0]
    restored = pickle.loads(pickle.dumps(plan))
    assert resolve_executor_plans(restored, world.target, binding, "target") == (executor,)
    with raises("target executor snapshot mismatch"):
        resolve_executor_plan(plan, world.target, dataclasses.replace(binding, lease_id="rotated"), "target")
    with raises("target executor snapshot mismatch"):
        resolve_executor_plan(plan, world.target, replace_fragment(binding, 0, device="cuda:7"), "target")
    unselected = next(b for b in world.source_bindings if b.participant_id.startswith("s-d1"))
    with raises("source executor snapshot mismatch: unknown instance"):
        resolve_executor_plan(plan, world.source, unselected, "source")
    with raises("invalid executor side: middle"):
        resolve_executor_plans(plan, world.target, binding, "middle")


def test_build_executor_plans_projection(world: World) -> None:
    plan = world.bind()
    complete = _build_executor_plans((world.source,), world.source_bindings, "source")
    assert len(complete) == 4
    selected = frozenset(op.source.fragment_id for op in plan.operations)
    chosen = _build_executor_plans((world.source,), world.source_bindings, "source", selected_fragment_ids=selected)
    assert chosen == plan.source_executors
    with raises("missing selected source runtime fragment"):
        _build_executor_plans((world.source,), world.source_bindings, "source", selected_fragment_ids=selected | {"x"})
    with raises("invalid executor side: both"):
        _build_executor_plans((world.source,), world.source_bindings, "both")


# ---------------------------------------------------------------------------------------
# Forged bindings


def test_reject_look_alikes(world: World) -> None:
    with raises("logical_plan must be a LogicalTransferPlan"):
        bind_logical_transfer_plan(types.SimpleNamespace(**world.logical.__dict__), world.target_bindings)
    with raises("invalid target runtime binding input"):
        world.bind(target_bindings=(types.SimpleNamespace(**world.target_bindings[0].__dict__),))
    with raises("invalid source runtime binding input"):
        world.bind(source_bindings=(object(),))


def test_reject_wrong_digest_and_placement_id(world: World) -> None:
    forged = dataclasses.replace(world.target_bindings[0], placement_digest="0" * 64)
    with raises("placement digest and runtime binding placement digest differ"):
        world.bind(target_bindings=with_binding(world.target_bindings, 0, forged))
    forged = dataclasses.replace(world.target_bindings[0], placement_id="sha256:" + "1" * 64)
    with raises("logical plan and target placement IDs differ"):
        world.bind(target_bindings=with_binding(world.target_bindings, 0, forged))


def test_reject_participant_selection(world: World) -> None:
    with raises("logical plan and target runtime binding participants differ"):
        world.bind(target_bindings=world.target_bindings[:2])
    unknown = dataclasses.replace(
        world.target_bindings[0],
        participant_id="nobody",
        fragments=tuple(dataclasses.replace(f, fragment_id=f"nobody-{f.fragment_id}") for f in world.target_bindings[0].fragments),
    )
    with raises("logical plan and target runtime binding participants differ"):
        world.bind(target_bindings=world.target_bindings + (unknown,))
    with raises("duplicate target runtime binding participant: "):
        world.bind(target_bindings=world.target_bindings + world.target_bindings[:1])
    with raises("logical plan requires target runtime bindings"):
        world.bind(target_bindings=())
    with raises("logical plan requires source runtime bindings"):
        world.bind(source_bindings=())


def test_reject_missing_and_extra_fragments(world: World) -> None:
    binding = world.target_bindings[0]
    with raises("missing placement fragment in runtime binding: "):
        world.bind(target_bindings=with_binding(world.target_bindings, 0, dataclasses.replace(binding, fragments=())))
    extra = dataclasses.replace(binding.fragments[0], placement_fragment_id="zz-extra", fragment_id="zz-rt")
    forged = dataclasses.replace(binding, fragments=binding.fragments + (extra,))
    with raises("unknown placement fragment in runtime binding: zz-extra"):
        world.bind(target_bindings=with_binding(world.target_bindings, 0, forged))


def test_reject_fragment_geometry(world: World) -> None:
    binding = world.target_bindings[0]
    fragment = binding.fragments[0]
    with raises("runtime binding byte size does not match placement"):
        forged = replace_fragment(
            binding, 0, nbytes=fragment.nbytes - 2, storage_nbytes=fragment.storage_nbytes, local_shape=(4, 2)
        )
        world.bind(target_bindings=with_binding(world.target_bindings, 0, forged))
    with raises("runtime binding stride does not describe a canonical contiguous view"):
        forged = replace_fragment(binding, 0, strides_bytes=(2, 8))
        world.bind(target_bindings=with_binding(world.target_bindings, 0, forged))
    with raises("runtime binding itemsize does not match placement"):
        forged = replace_fragment(binding, 0, itemsize=1, strides_bytes=(3, 1))
        world.bind(target_bindings=with_binding(world.target_bindings, 0, forged))


def test_reject_addresses_and_allocations(world: World) -> None:
    fragment = world.target_bindings[0].fragments[0]
    with raises("address must be at least 1"):
        dataclasses.replace(fragment, address=0, storage_address=0)
    with raises("address range must fit in an unsigned 64-bit integer"):
        dataclasses.replace(fragment, address=2**64 - 4, storage_address=2**64 - 4, nbytes=fragment.nbytes)
    with raises("runtime address must equal storage_address plus storage_offset_bytes"):
        dataclasses.replace(fragment, storage_offset_bytes=8, storage_nbytes=fragment.nbytes + 8)
    with raises("runtime view exceeds storage allocation bounds"):
        dataclasses.replace(fragment, storage_nbytes=fragment.nbytes - 1)


def test_reject_overlapping_target_views_within_and_across_participants(world: World) -> None:
    first, second = world.target_bindings[0], world.target_bindings[1]
    a = first.fragments[0]
    # Across participants on one shared instance, worker and device.
    shared = dataclasses.replace(
        second,
        instance_id=first.instance_id,
        fragments=tuple(
            dataclasses.replace(f, worker_id=a.worker_id, address=a.address + 2, storage_address=a.address + 2)
            for f in second.fragments
        ),
    )
    with raises("runtime binding address ranges overlap: "):
        world.bind(target_bindings=with_binding(world.target_bindings, 1, shared))
    # Different devices never conflict.
    elsewhere = dataclasses.replace(
        shared, fragments=tuple(dataclasses.replace(f, device="cuda:1") for f in shared.fragments)
    )
    assert world.bind(target_bindings=with_binding(world.target_bindings, 1, elsewhere)).operations


def test_duplicate_operation_conflicts(world: World) -> None:
    plan = world.bind()
    with raises("conflicting target physical range: "):
        _validate_target_physical_ranges(plan.operations + plan.operations[:1])
    with raises("conflicting target physical range: "):
        dataclasses.replace(plan, operations=plan.operations + plan.operations[:1])


def test_physical_budget_and_argument(world: World) -> None:
    plan = world.bind()
    _validate_target_physical_ranges(plan.operations, max_segment_checks=1)
    with raises("max_segment_checks must be a positive integer"):
        _validate_target_physical_ranges(plan.operations, max_segment_checks=0)
    with raises("max_segment_checks must be a positive integer"):
        _validate_target_physical_ranges(plan.operations, max_segment_checks=True)
    # Operation 1 writes one column of a two-column target fragment: it is expanded.
    incomplete = plan.operations[1:2]
    needed = incomplete[0].segment_count
    assert needed == 4
    _validate_target_physical_ranges(incomplete, max_segment_checks=needed)
    with raises("target physical segment scan budget exceeded"):
        _validate_target_physical_ranges(incomplete, max_segment_checks=needed - 1)
    # The complete fragment next to it costs nothing.
    _validate_target_physical_ranges(plan.operations[0:3], max_segment_checks=8)
    with raises("target physical segment scan budget exceeded"):
        _validate_target_physical_ranges(plan.operations[0:2], max_segment_checks=3)


# ---------------------------------------------------------------------------------------
# Tied weights and alias scope


def _at_one_address(binding: Any) -> Any:
    """``binding`` with every fragment moved to its first fragment's address (tied weights)."""
    address = binding.fragments[0].address
    return dataclasses.replace(
        binding,
        fragments=tuple(dataclasses.replace(f, address=address, storage_address=address) for f in binding.fragments),
    )


def _tied_world(*, separate_sources: bool = False) -> HostWorld:
    world = HostWorld(
        tp_placement(1, prefix="s", tensors=("a", "b"), tied=True),
        tp_placement(1, prefix="t", tensors=("a", "b"), tied=True),
    )
    if not separate_sources:
        world.source_bindings = tuple(_at_one_address(b) for b in world.source_bindings)
    world.target_bindings = tuple(_at_one_address(b) for b in world.target_bindings)
    return world


def test_tied_weights_share_one_target_address() -> None:
    plan = _tied_world().bind()
    assert len(plan.operations) == 2
    assert plan.total_bytes == 2 * 4 * 6 * 2
    _validate_target_physical_ranges(plan.operations)


def test_alias_outside_its_group_is_rejected() -> None:
    world = _tied_world()
    plan = world.bind()
    first, second = plan.operations
    # The shared target written under another lease is outside the attested alias scope.
    other_lease = dataclasses.replace(
        second, target=dataclasses.replace(second.target, attestation=None, runtime_lease_id="other-lease")
    )
    with raises("conflicting target physical range: "):
        _validate_target_physical_ranges((first, other_lease))
    # Undeclared aliases: two untied tensors bound at one address.
    untied = HostWorld(tp_placement(1, prefix="v", tensors=("a", "b")), tp_placement(1, prefix="u", tensors=("a", "b")))
    with raises("runtime binding address ranges overlap: "):
        untied.bind((_at_one_address(untied.target_bindings[0]),))


def test_tied_targets_from_distinct_unaliased_sources_conflict() -> None:
    world = HostWorld(tp_placement(1, prefix="s", tensors=("a", "b")), tp_placement(1, prefix="t", tensors=("a", "b"), tied=True))
    with raises("conflicting target physical range: "):
        world.bind((_at_one_address(world.target_bindings[0]),))


# ---------------------------------------------------------------------------------------
# Store sources


def _stored_host_world(*, fill: bool = False) -> HostWorld:
    """A Store manifest (two row pieces in one payload) -> TP3 target on host memory."""
    target = tp_placement(3, prefix="t", shape=(4, 7))
    manifest = stored_manifest(
        target,
        (
            StoredFragmentSnapshot("stored-0", "w", (0, 0), (2, 7), "g/payload/0", 0, 28),
            StoredFragmentSnapshot("stored-1", "w", (2, 0), (2, 7), "g/payload/0", 28, 28),
        ),
    )
    return HostWorld(manifest, target, fill=fill)


def _stored_world() -> Tuple[Any, Any, Any, HostMemory]:
    """(target, manifest, target bindings, memory) of :func:`_stored_host_world`."""
    world = _stored_host_world()
    return world.target, world.source, world.target_bindings, world.memory


def test_store_source_executes_from_simulated_payloads() -> None:
    world = _stored_host_world(fill=True)
    plan = world.bind()
    assert plan.source_executors == ()
    assert plan.source_manifest_identity == world.source.manifest_identity
    world.execute_and_check(plan)


def test_store_source_attacks() -> None:
    target, manifest, targets, memory = _stored_world()
    logical = plan_stored_transfer_to_target_placement(manifest, target)
    with raises("stored source plan requires a source manifest"):
        bind_logical_transfer_plan(logical, targets)
    other = dataclasses.replace(manifest, created_at="2027-01-01T00:00:00Z")
    with raises("logical plan source manifest identity differs"):
        bind_logical_transfer_plan(logical, targets, source_manifest=other)
    with raises("logical plan has no source placements"):
        bind_logical_transfer_plan(logical, targets, source_bindings=targets, source_manifest=manifest)
    op = logical.operations[0]
    forged_op = forged_copy(op, source=forged_copy(op.source, object_key="g/payload/9"))
    forged = forged_copy(logical, operations=(forged_op,) + logical.operations[1:])
    with raises("logical plan and source manifest fragment snapshots differ"):
        bind_logical_transfer_plan(forged, targets, source_manifest=manifest)
    plan = bind_logical_transfer_plan(logical, targets, source_manifest=manifest)
    with raises("stored transfer plan requires a source manifest"):
        dataclasses.replace(plan, source_manifest=None)
    with raises("stored transfer plan requires a source manifest identity"):
        dataclasses.replace(plan, source_manifest_identity=None)
    # Coordinated edit of an operation and the derived cache is recomputed, never trusted.
    state = plan.__getstate__()
    bad_source = forged_copy(plan.operations[0].source, object_key="g/payload/9")
    bad_op = forged_copy(plan.operations[0], source=bad_source)
    state["operations"] = (bad_op,) + plan.operations[1:]
    state["source_stored_fragment_snapshots"] = (bad_source,)
    forged_plan = object.__new__(TransferPlan)
    with raises("transfer plan stored source fragment differs from committed manifest"):
        forged_plan.__setstate__(state)
    runtime_plan = World().bind()
    with raises("runtime source plan must not receive a source manifest"):
        World().bind(source_manifest=manifest)
    assert runtime_plan


# ---------------------------------------------------------------------------------------
# Leases, generations and fences


def test_stale_generation_or_lease_is_rejected(world: World) -> None:
    plan = world.bind()
    bound = plan.operations[0].target
    with raises("bound fragment runtime fence differs from attestation"):
        dataclasses.replace(bound, lease_generation=bound.lease_generation + 1)
    with raises("bound fragment runtime fence differs from attestation"):
        dataclasses.replace(bound, runtime_lease_id="stale-lease")
    with raises("bound fragment lease_generation must fit in an unsigned 64-bit integer"):
        dataclasses.replace(bound, lease_generation=2**64)
    stale = dataclasses.replace(world.target_bindings[0], generation=0)
    with raises("target executor snapshot mismatch"):
        resolve_executor_plan(plan, world.target, stale, "target")


def test_generations_are_per_participant(world: World) -> None:
    sources = tuple(dataclasses.replace(b, generation=10 + i) for i, b in enumerate(world.source_bindings))
    plan = world.bind(source_bindings=sources)
    generations = {s.lease_generation for e in plan.source_executors for s in e.fragment_snapshots}
    assert len(generations) == len(plan.source_executors)


# ---------------------------------------------------------------------------------------
# Plans edited after binding


def test_plan_edited_after_binding_via_replace(world: World) -> None:
    plan = world.bind()
    with raises("live source requires executor provenance"):
        dataclasses.replace(plan, source_executors=())
    with raises("bound plan has no target executor metadata"):
        dataclasses.replace(plan, operations=(), source_executors=(), target_executors=())
    with raises("transfer plan identity differs"):
        dataclasses.replace(plan, resource_id="X", revision="Y")
    executor = plan.source_executors[0]
    moved = dataclasses.replace(executor, worker_id="elsewhere")
    with pytest.raises(ValueError, match=r"source executor .*provenance"):
        dataclasses.replace(plan, source_executors=(moved,) + plan.source_executors[1:])
    with raises("transfer plan requires a canonical transfer operation"):
        dataclasses.replace(plan, operations=(object(),))
    with raises("transfer plan has invalid canonical executor metadata"):
        dataclasses.replace(plan, target_executors=(types.SimpleNamespace(),))
    with raises("transfer plan target placement identity differs"):
        dataclasses.replace(plan, target_placement=tp_placement(3, prefix="t", shape=(4, 7), weight_generation=2))


def test_unattested_source_rejected_before_physical_check(world: World) -> None:
    plan = world.bind()
    op = plan.operations[0]
    unattested = dataclasses.replace(op.source, attestation=None)
    forged = dataclasses.replace(op, source=unattested)
    with raises("transfer plan source fragment lacks an attested runtime binding"):
        dataclasses.replace(plan, operations=(forged,) + plan.operations[1:])


@pytest.mark.parametrize(
    "field,value",
    [
        ("fragment_id", "forged"),
        ("address", 4096),
        ("nbytes", 2),
        ("worker_id", "w-forged"),
        ("endpoint", "e-forged"),
        ("device", "d-forged"),
        ("strides_bytes", (2, 2)),
        ("storage_address", 4096),
        ("storage_nbytes", 1 << 20),
        ("storage_offset_bytes", 64),
        ("lease_generation", 99),
    ],
)
def test_tampered_executor_snapshot_fails_on_unpickling(world: World, field: str, value: Any) -> None:
    plan = world.bind()
    executor = plan.target_executors[0]
    snapshot = forged_copy(executor.fragment_snapshots[0], **{field: value})
    forged_executor = forged_copy(executor, fragment_snapshots=(snapshot,) + executor.fragment_snapshots[1:])
    forged = forged_copy(plan, target_executors=(forged_executor,) + plan.target_executors[1:])
    blob = pickle.dumps(forged)
    with pytest.raises(ValueError):
        pickle.loads(blob)


@pytest.mark.parametrize("field", ["address", "worker_id", "device", "endpoint", "storage_nbytes"])
def test_tampered_operation_fragment_fails_on_unpickling(world: World, field: str) -> None:
    plan = world.bind()
    op = plan.operations[0]
    current = getattr(op.target.binding, field)
    binding = forged_copy(op.target.binding, **{field: current + 64 if isinstance(current, int) else current + "-x"})
    forged_op = forged_copy(op, target=forged_copy(op.target, binding=binding))
    forged = forged_copy(plan, operations=(forged_op,) + plan.operations[1:])
    with pytest.raises(ValueError):
        pickle.loads(pickle.dumps(forged))


def test_reconstructed_logical_plan_with_dropped_operation(world: World) -> None:
    forged = forged_copy(world.logical, operations=world.logical.operations[:1] + world.logical.operations[2:])
    with raises("logical target fragment is not fully covered: "):
        world.bind(logical=forged)


def test_attestation_rejects_owner_evidence(world: World) -> None:
    attestation = RuntimeBindingAttestation(world.target, world.target_bindings[0])
    evidence = attestation.evidence
    forged = forged_copy(evidence, fragments=(forged_copy(evidence.fragments[0], owner=object()),))
    with raises("runtime binding evidence must not retain allocation owners"):
        attestation.__setstate__((world.target, forged))
    with raises("runtime attestation binding is invalid"):
        RuntimeBindingAttestation(world.target, evidence)
    with raises("runtime attestation placement is invalid"):
        RuntimeBindingAttestation(object(), world.target_bindings[0])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        dataclasses.replace(attestation)
    with pytest.raises(KeyError):
        attestation.binding_fragment("missing")
    assert RuntimeBindingEvidence.from_binding(world.target_bindings[0]).to_binding() == world.target_bindings[0]


def test_bound_fragment_rules(world: World) -> None:
    plan = world.bind()
    bound = plan.operations[0].target
    with raises("bound fragment placement is invalid"):
        dataclasses.replace(bound, placement=object())
    with raises("bound fragment runtime binding is invalid"):
        dataclasses.replace(bound, binding=object())
    other_target = plan.operations[-1].target
    assert other_target.placement_fragment_id != bound.placement_fragment_id
    with raises("bound fragment placement identity differs"):
        dataclasses.replace(bound, binding=other_target.binding, attestation=None)
    with raises("bound fragment instance_id must be non-empty"):
        dataclasses.replace(bound, instance_id="")
    with raises("bound fragment runtime_lease_id must be non-empty"):
        dataclasses.replace(bound, runtime_lease_id="")
    with raises("bound fragment owner differs from runtime binding"):
        dataclasses.replace(bound, owner=object())
    with raises("bound fragment runtime attestation is invalid"):
        dataclasses.replace(bound, attestation=object())
    other = plan.target_executors[-1].attestation
    with raises("bound fragment does not match its runtime binding attestation"):
        dataclasses.replace(bound, attestation=other)
    restored = pickle.loads(pickle.dumps(bound))
    assert restored == bound and restored.attestation == bound.attestation
    assert bound.fragment_id == bound.binding.fragment_id != bound.placement_fragment_id


def test_executor_plan_rules(world: World) -> None:
    plan = world.bind()
    executor = plan.target_executors[0]
    with raises("executor plan identifiers must not be empty"):
        dataclasses.replace(executor, worker_id="")
    with raises("executor plan placement digest must be SHA-256"):
        dataclasses.replace(executor, placement_digest="A" * 64)
    with raises("executor plan runtime lease ID must be non-empty"):
        dataclasses.replace(executor, runtime_lease_id="")
    with raises("executor plan has duplicate fragment IDs"):
        dataclasses.replace(executor, fragment_ids=executor.fragment_ids * 2)
    with raises("executor plan has invalid runtime fragment snapshots"):
        dataclasses.replace(executor, fragment_snapshots=(object(),))
    with raises("executor plan fragment snapshot IDs do not match"):
        dataclasses.replace(executor, fragment_ids=("other",))
    with raises("executor plan runtime attestation is invalid"):
        dataclasses.replace(executor, attestation=object())
    snapshot = executor.fragment_snapshots[0]
    assert isinstance(snapshot, RuntimeFragmentSnapshot)
    assert ExecutorTransferPlan(**{f.name: getattr(executor, f.name) for f in dataclasses.fields(executor)}) == executor
    assert isinstance(plan.operations[0].target, BoundWeightFragment)

"""Fast paths of runtime binding (issue 5): attestation on every bind (nothing remembered on a
binding or a plan), trusted evidence and bound fragments, cached executor projections, attested-snapshot comparison in ``TransferPlan``.

Each fast path must give exactly the value (or the error) of the slow path it replaces; no
timing is asserted here."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any

import pytest

from memory_executor import HostMemory, HostWorld, host_bindings, tp_placement
from spec_helpers import forged_copy, raises
from test_binding_attacks import World  # TP2 x DP2 -> TP3, source filled

from mooncake.reshard.weight import WeightRuntimeBindingManifest, validate_runtime_binding
from mooncake.reshard.weight._planner.attestation import (
    _attest,
    _binding_of,
    _evidence_from_validated,
)
from mooncake.reshard.weight._planner.binding import _build_executor_plans, _project_part
from mooncake.reshard.weight._planner.bound_contracts import _snapshot_matches, _snapshot_state
from mooncake.reshard.weight._planner.fragments import BoundWeightFragment
from mooncake.reshard.weight.planner import RuntimeBindingAttestation, RuntimeBindingEvidence, RuntimeFragmentSnapshot


@pytest.fixture()
def world() -> World:
    return World()


def _fresh(binding: WeightRuntimeBindingManifest) -> WeightRuntimeBindingManifest:
    """An equal binding, another object."""
    return dataclasses.replace(binding)


_BINDING_FIELDS = {field.name for field in dataclasses.fields(WeightRuntimeBindingManifest)}


# ---------------------------------------------------------------------------------------
# Nothing remembered: every bind attests every binding again


def test_rebinding_attests_again(world: World) -> None:
    first = world.bind()
    second = world.bind()
    assert first == second
    assert first.operations[0].target.attestation is not second.operations[0].target.attestation
    assert first.operations[0].target.attestation == second.operations[0].target.attestation
    # A fresh, equal binding set gives an equal plan with new (equal) attestations.
    fresh = world.bind(
        tuple(_fresh(b) for b in world.target_bindings),
        source_bindings=tuple(_fresh(b) for b in world.source_bindings),
    )
    assert fresh == first
    assert fresh.operations[0].target.attestation is not first.operations[0].target.attestation
    assert fresh.operations[0].target.attestation == first.operations[0].target.attestation
    moved, checked = world.execute_and_check(second)
    assert moved == second.total_bytes
    assert checked == 4 * 7 * 2


def test_attest_validates_on_every_call(world: World) -> None:
    binding = world.target_bindings[0]
    attestation = _attest(world.target, binding)
    again = _attest(world.target, binding)
    assert again == attestation and again is not attestation
    other = copy.copy(world.target)  # equal placement, another object
    assert other == world.target
    assert _attest(other, binding) == attestation
    # A different placement: the binding is validated (and rejected).
    with pytest.raises(ValueError):
        _attest(world.source, binding)
    # An in-place forgery after a successful attestation is refused by the next one.
    fragment = binding.fragments[0]
    object.__setattr__(fragment, "nbytes", fragment.nbytes + 2)
    with pytest.raises(ValueError, match="^runtime binding byte size does not match placement"):
        _attest(world.target, binding)


def test_a_forged_field_is_refused_on_a_rebind(world: World) -> None:
    world.bind()
    binding = world.target_bindings[0]
    object.__setattr__(binding, "lease_id", "")
    with raises("lease_id must be a non-empty string"):
        world.bind()


def test_forged_fragments_are_refused_on_a_rebind(world: World) -> None:
    world.bind()
    binding = world.target_bindings[0]
    fragments = list(binding.fragments)
    fragments[0] = dataclasses.replace(fragments[0], nbytes=fragments[0].nbytes + 2, storage_nbytes=1 << 30)
    object.__setattr__(binding, "fragments", tuple(fragments))
    with pytest.raises(ValueError, match="runtime binding byte size does not match placement"):
        world.bind()


def test_binding_leaves_no_private_entry_on_a_binding(world: World) -> None:
    world.bind()
    world.bind()
    for binding in world.target_bindings + world.source_bindings:
        assert set(binding.__dict__) == _BINDING_FIELDS
        for clone in (pickle.loads(pickle.dumps(binding)), copy.copy(binding), copy.deepcopy(binding)):
            assert clone == binding
            assert clone.__dict__ == binding.__dict__


def test_every_given_binding_is_still_validated(world: World) -> None:
    world.bind()
    # An unrequired but given binding that does not validate is rejected even after a
    # successful bind of the others.
    bad = dataclasses.replace(world.source_bindings[-1], revision="other")
    with raises("placement and runtime binding revision differ"):
        world.bind(source_bindings=world.source_bindings[:-1] + (bad,))


# ---------------------------------------------------------------------------------------
# Trusted evidence, bindings, bound fragments and snapshots equal the validated ones


def test_trusted_evidence_equals_from_binding(world: World) -> None:
    for binding in world.target_bindings + world.source_bindings:
        trusted = _evidence_from_validated(binding)
        assert trusted == RuntimeBindingEvidence.from_binding(binding)
        assert type(trusted.fragments) is tuple
        assert all(fragment.owner is None for fragment in trusted.fragments)
        assert _binding_of(trusted) == trusted.to_binding() == binding


def test_trusted_evidence_drops_owners(world: World) -> None:
    owner = object()
    binding = world.target_bindings[0]
    owned = dataclasses.replace(
        binding, fragments=tuple(dataclasses.replace(f, owner=owner) for f in binding.fragments)
    )
    trusted = _evidence_from_validated(owned)
    assert trusted == RuntimeBindingEvidence.from_binding(owned)
    assert all(fragment.owner is None for fragment in trusted.fragments)
    plan = world.bind((owned,) + world.target_bindings[1:])
    assert all(op.target.binding.owner is None for op in plan.operations)


def test_binding_of_forged_evidence_raises_the_constructor_messages(world: World) -> None:
    evidence = RuntimeBindingEvidence.from_binding(world.target_bindings[0])
    forged = forged_copy(evidence, generation=-1)
    with raises("generation must be at least 0"):
        _binding_of(forged)
    forged = forged_copy(evidence, placement_digest="A" * 64)
    with raises("placement_digest must be a lowercase SHA-256 digest"):
        _binding_of(forged)
    forged = forged_copy(evidence, fragments=evidence.fragments * 2)
    with raises("duplicate placement fragment in runtime binding"):
        _binding_of(forged)
    attestation = RuntimeBindingAttestation(world.target, world.target_bindings[0])
    with raises("generation must be at least 0"):
        object.__setattr__(forged, "fragments", evidence.fragments)
        object.__setattr__(forged, "generation", -1)
        attestation.__setstate__((world.target, forged))


def test_trusted_bound_fragments_pass_the_constructor(world: World) -> None:
    plan = world.bind()
    for op in plan.operations:
        for fragment in (op.source, op.target):
            rebuilt = BoundWeightFragment(
                placement=fragment.placement,
                binding=fragment.binding,
                instance_id=fragment.instance_id,
                runtime_lease_id=fragment.runtime_lease_id,
                lease_generation=fragment.lease_generation,
                owner=fragment.owner,
                attestation=fragment.attestation,
            )
            assert rebuilt == fragment and rebuilt.attestation is fragment.attestation


def test_snapshots_built_by_state_equal_the_constructor(world: World) -> None:
    plan = world.bind()
    for executor in plan.source_executors + plan.target_executors:
        for snapshot in executor.fragment_snapshots:
            built = RuntimeFragmentSnapshot(**{f.name: getattr(snapshot, f.name) for f in dataclasses.fields(snapshot)})
            state = snapshot.__getstate__()
            assert built == snapshot and built.__getstate__() == state
            assert _snapshot_matches(snapshot, dict(state))
            changed = dict(state, address=snapshot.address + 2)
            assert not _snapshot_matches(snapshot, changed)
            assert _snapshot_matches(forged_copy(snapshot, address=snapshot.address + 2), changed)
            emptied = copy.copy(snapshot)
            object.__delattr__(emptied, "device")  # an emptied field: a missing key, never equal
            assert not _snapshot_matches(emptied, dict(state))
            with pytest.raises(AttributeError):  # no instance dict: no non-field attribute to forge
                forged_copy(snapshot, _note=1)
            assert not _snapshot_matches(dataclasses.asdict(snapshot), dict(state))


def test_snapshot_state_is_in_field_order(world: World) -> None:
    plan = world.bind()
    fragment = plan.operations[0].target
    state = _snapshot_state(fragment.placement, fragment.binding, fragment.lease_generation)
    assert list(state) == [f.name for f in dataclasses.fields(RuntimeFragmentSnapshot)]
    assert RuntimeFragmentSnapshot.from_fragment(fragment) == RuntimeFragmentSnapshot(**state)


# ---------------------------------------------------------------------------------------
# Executor projections


def _slow_projection(placement: Any, bindings: Any, side: str, selected: Any = None) -> tuple[Any, ...]:
    out: list[Any] = []
    seen: set[Any] = set()
    emitted: set[str] = set()
    by_participant = {b.participant_id: b for b in bindings}
    for part in placement.parts:
        binding = by_participant.get(part.participant_id)
        if binding is None or not part.fragments:
            continue
        validate_runtime_binding(placement, binding)
        attestation = RuntimeBindingAttestation(placement, binding)
        _project_part(placement, part, binding, attestation, side, selected, seen, emitted, out)
    out.sort(key=lambda e: (e.rank.dp, e.rank.pp, e.rank.ep, e.rank.tp))
    return tuple(out)


def test_cached_projections_equal_the_slow_path(world: World) -> None:
    for _ in range(2):  # second round: every attestation and executor comes from the caches
        complete = _build_executor_plans((world.source,), world.source_bindings, "source")
        assert complete == _slow_projection(world.source, world.source_bindings, "source")
        selected_ids = frozenset(e.fragment_ids[0] for e in complete[:2])
        selected = _build_executor_plans(
            (world.source,), world.source_bindings, "source", selected_fragment_ids=selected_ids
        )
        assert selected == _slow_projection(world.source, world.source_bindings, "source", selected_ids)
        assert {i for e in selected for i in e.fragment_ids} == selected_ids
    with raises("missing selected source runtime fragment"):
        _build_executor_plans(
            (world.source,), world.source_bindings, "source", selected_fragment_ids=frozenset({"nope"})
        )


def test_partially_selected_worker_gets_a_partial_executor() -> None:
    memory = HostMemory()
    source = tp_placement(2, prefix="s", shape=(4, 8), tensors=("a", "b"))
    bindings = host_bindings(source, memory, prefix="src")
    for _ in range(2):
        complete = _build_executor_plans((source,), bindings, "source")
        assert all(len(e.fragment_ids) == 2 for e in complete)
        one = frozenset({complete[0].fragment_ids[1], complete[1].fragment_ids[0]})
        selected = _build_executor_plans((source,), bindings, "source", selected_fragment_ids=one)
        assert selected == _slow_projection(source, bindings, "source", one)
        assert [e.fragment_ids for e in selected] == [complete[0].fragment_ids[1:], complete[1].fragment_ids[:1]]
        assert selected[0].fragment_snapshots == complete[0].fragment_snapshots[1:]
        # each call attests the bindings again (nothing remembered): equal attestations
        assert selected[0].attestation == complete[0].attestation
        assert selected[0].attestation.placement is source


def test_partial_target_executor_in_a_plan_revalidates() -> None:
    source = tp_placement(2, prefix="s", shape=(4, 8), tensors=("a", "b"))
    plan = HostWorld(source, tp_placement(2, prefix="t", shape=(4, 8), tensors=("a", "b"))).bind()
    assert all(len(e.fragment_ids) == 2 for e in plan.target_executors)
    restored = pickle.loads(pickle.dumps(plan))
    assert restored == plan == dataclasses.replace(restored)
    executor = restored.target_executors[0]
    swapped = forged_copy(
        executor, fragment_snapshots=executor.fragment_snapshots[::-1], fragment_ids=executor.fragment_ids[::-1]
    )
    with pytest.raises(ValueError, match="target executor"):
        dataclasses.replace(restored, target_executors=(swapped,) + restored.target_executors[1:])


# ---------------------------------------------------------------------------------------
# TransferPlan revalidation through the attested views


def test_revalidation_detects_forged_snapshots_without_cached_objects(world: World) -> None:
    plan = world.bind()
    executor = plan.target_executors[0]
    snapshot = forged_copy(executor.fragment_snapshots[0], endpoint="forged")
    forged_executor = forged_copy(executor, fragment_snapshots=(snapshot,) + executor.fragment_snapshots[1:])
    with raises("target executor fragment provenance differs"):
        dataclasses.replace(plan, target_executors=(forged_executor,) + plan.target_executors[1:])
    # Same after a pickle round trip, where no attested snapshot object exists yet.
    restored = pickle.loads(pickle.dumps(plan))
    assert restored == plan
    snapshots = restored.target_executors[0].fragment_snapshots
    snapshot = forged_copy(snapshots[0], lease_generation=snapshots[0].lease_generation + 1)
    forged_executor = forged_copy(restored.target_executors[0], fragment_snapshots=(snapshot,) + snapshots[1:])
    with raises("target executor fragment provenance differs"):
        dataclasses.replace(restored, target_executors=(forged_executor,) + restored.target_executors[1:])


def test_revalidation_detects_a_forged_lease_generation_on_an_operation(world: World) -> None:
    plan = world.bind()
    op = plan.operations[0]
    forged_op = forged_copy(op, target=forged_copy(op.target, lease_generation=op.target.lease_generation + 5))
    with pytest.raises(ValueError, match="target executor"):
        dataclasses.replace(plan, operations=(forged_op,) + plan.operations[1:])


def test_single_region_cover_shortcut_still_checks_coverage(world: World) -> None:
    plan = world.bind()
    assert dataclasses.replace(plan) == plan
    target = tp_placement(2, prefix="t", shape=(4, 8))
    bound = HostWorld(tp_placement(2, prefix="s", shape=(4, 8)), target).bind()
    assert all(op.overlap_shape == op.target.local_shape for op in bound.operations)
    dropped = forged_copy(bound, operations=bound.operations[1:])
    with pytest.raises(ValueError):
        pickle.loads(pickle.dumps(dropped))


# ---------------------------------------------------------------------------------------
# Logical target recheck (spec §12.1 step 2) runs on every bind


def test_logical_recheck_runs_on_every_bind(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    from mooncake.reshard.weight._planner import binding as binding_module

    seen: list[Any] = []
    original = binding_module.validate_logical_target_coverage

    def spy(plan: Any) -> None:
        seen.append(plan)
        original(plan)

    monkeypatch.setattr(binding_module, "validate_logical_target_coverage", spy)
    first = world.bind()
    second = world.bind()
    assert first == second
    assert len(seen) == 2 and all(plan is world.logical for plan in seen)
    assert not hasattr(binding_module, "_RECHECKED")  # no module-wide memo of proven plans


def test_logical_recheck_runs_again_for_a_plan_forged_in_place(world: World) -> None:
    world.bind()
    object.__setattr__(world.logical, "operations", world.logical.operations[:1] + world.logical.operations[2:])
    with raises("logical target fragment is not fully covered: "):
        world.bind()


def test_logical_recheck_sees_a_nested_forgery_after_a_bind(world: World) -> None:
    world.bind()
    operation = world.logical.operations[0]
    object.__setattr__(operation, "overlap_shape", (1,) + tuple(operation.overlap_shape[1:]))
    with raises("logical target fragment is not fully covered: "):
        world.bind()


# ---------------------------------------------------------------------------------------
# No process-wide pickling change for mapping proxies


def test_mapping_proxy_pickling_is_not_changed_process_wide(world: World) -> None:
    import copyreg
    import types

    plan = world.bind()
    assert types.MappingProxyType not in copyreg.dispatch_table
    with pytest.raises(TypeError):
        pickle.dumps(types.MappingProxyType({"a": 1}))
    attestation = plan.operations[0].target.attestation
    as_dict = dataclasses.asdict(attestation)
    assert isinstance(as_dict["_placement_by_id"], types.MappingProxyType)
    assert dict(as_dict["_binding_by_id"]) == dict(attestation._binding_by_id)
    assert as_dict["_binding_by_id"] is not attestation._binding_by_id
    assert isinstance(dataclasses.asdict(plan), dict)
    assert copy.deepcopy(attestation) == attestation

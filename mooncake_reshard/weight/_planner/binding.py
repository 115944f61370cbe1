"""Runtime binding of a logical plan and executor projections (spec §12.1-§12.3).

The common case of several steps is decided by C accept paths (``_native.attest_many``,
``operations_snapshots``, ``bind_regions``, ``bound_fragment_ids``, ``project_attested``; the
logical target recheck and the §12.6 check in their own modules). Each returns the exact value
the Python code next to it would produce, or None; on None that code runs and raises the spec's
first failure in its own order.
"""

from __future__ import annotations

import sys
from operator import attrgetter
from typing import Any, Iterable, Optional, Sequence

from .._address_ranges import validate_runtime_address_ranges
from ..binding import _PYTHON_ERRORS, _binding_views, _raise_shape_failure, validate_runtime_binding
from ..placement import WeightPlacementManifest
from ..runtime import WeightRuntimeBindingManifest
from ..storage_manifest import StoredFragmentSnapshot, StoredWeightManifest, validate_weight_manifest_snapshot
from ..types import ParallelRank, PlacementFragment, TensorDescriptor
from ... import _native
from ..._collector import collector_paused
from ..._memo_proof import memo_proved
from ...contracts.fragments import RuntimeBindingFragment, _constructor_arguments
from .attestation import RuntimeBindingAttestation, RuntimeBindingEvidence
from .attestation import _attest, _attest_many, _fused_attestations
from .bound_contracts import ExecutorTransferPlan, RuntimeFragmentSnapshot, TransferPlan, _attested_snapshots
from .bound_contracts import _compact_carried
from . import bound_validation
from .bound_validation import _attestation_cache, _attestation_values
from .contracts import LogicalTransferPlan, PlacementExecutorPlan, PlanningLimits, TransferRegion, _trusted_region
from .fragments import BoundWeightFragment, _trusted_bound_fragment
from . import validation
from .exactness import exact_descriptors, exact_items, exact_placement, inert_inputs, no_monitoring_tools
from .exactness import start_watch, stop_watch, untouched
from .validation import validate_logical_target_coverage

_SIDES = ("source", "target")

# bind_regions proves the regions it builds canonical (carried to the new plan's final region
# recheck) from this many operations on (tests force it through this name).
_PROVE_MIN = 256
# From this many operations a bind call is watched (exactness.start_watch) rather than its values
# walked (exactness.inert_inputs): see _sealed.
_WATCH_MIN = 256
# Operation count from which bind hands the C heap's free pages back to the system
# (_native.trim_heap, csrc/heap.c): after bind_regions, before the new plan's revalidation and
# after it. Large passes free their scratch arrays into the C heap, where the small Python
# objects built next never reuse them; at the Kimi-class workload's 30 layers that was ~75 MiB
# of bind's peak RSS. One call costs ~0.1 ms on a small heap: below this size it would show in
# bind's time.
_TRIM_MIN_OPERATIONS = 1 << 15


# ---------------------------------------------------------------------------------------
# §12.3 executor projections


def _executor(
    instance_id: Any,
    placement_id: Any,
    participant_id: Any,
    placement_digest: Any,
    runtime_lease_id: Any,
    worker_id: Any,
    rank: Any,
    fragment_ids: tuple[Any, ...],
    fragment_snapshots: tuple[Any, ...],
    attestation: Any,
) -> ExecutorTransferPlan:
    """``ExecutorTransferPlan(...)`` of these values (tuples given as tuples). When every check of
    its ``__post_init__`` visibly holds (checked here, cheaply, in the same terms) the instance is
    built by setting its field dict; otherwise the constructor runs and raises its own message."""
    if (
        type(instance_id) is str
        and instance_id
        and type(placement_id) is str
        and placement_id
        and type(participant_id) is str
        and participant_id
        and type(worker_id) is str
        and worker_id
        and fragment_ids
        and type(placement_digest) is str
        and len(placement_digest) == 64
        and _HEX.issuperset(placement_digest)
        and type(runtime_lease_id) is str
        and runtime_lease_id
        and (len(fragment_ids) == 1 or len(set(fragment_ids)) == len(fragment_ids))
        and all([type(snapshot) is RuntimeFragmentSnapshot for snapshot in fragment_snapshots])
        and tuple([snapshot.fragment_id for snapshot in fragment_snapshots]) == fragment_ids
        and type(attestation) is RuntimeBindingAttestation
    ):
        executor: ExecutorTransferPlan = _new(ExecutorTransferPlan)
        state = executor.__dict__
        state["instance_id"] = instance_id
        state["placement_id"] = placement_id
        state["participant_id"] = participant_id
        state["placement_digest"] = placement_digest
        state["runtime_lease_id"] = runtime_lease_id
        state["worker_id"] = worker_id
        state["rank"] = rank
        state["fragment_ids"] = fragment_ids
        state["fragment_snapshots"] = fragment_snapshots
        state["attestation"] = attestation
        return executor
    return ExecutorTransferPlan(
        instance_id=instance_id,
        placement_id=placement_id,
        participant_id=participant_id,
        placement_digest=placement_digest,
        runtime_lease_id=runtime_lease_id,
        worker_id=worker_id,
        rank=rank,
        fragment_ids=fragment_ids,
        fragment_snapshots=fragment_snapshots,
        attestation=attestation,
    )


_new = object.__new__
_HEX = frozenset("0123456789abcdef")


def _attested_executors(
    placement: WeightPlacementManifest,
    part: Any,
    attestation: RuntimeBindingAttestation,
    digest: Optional[str] = None,
) -> tuple[tuple[str, tuple[RuntimeFragmentSnapshot, ...], ExecutorTransferPlan], ...]:
    """``(worker_id, snapshots, executor of all of them)`` per worker, sorted (cached on the
    attestation: every value is derived from the attested placement part and evidence)."""
    values = _attestation_values(attestation)
    key = id(part)  # int keys (not GC-tracked): id(part) for executors, ~id(part) for bound rows
    cached: Optional[tuple[tuple[str, tuple[RuntimeFragmentSnapshot, ...], ExecutorTransferPlan], ...]] = values.get(key)
    if cached is not None:
        return cached
    if digest is None:
        digest = placement.digest
    if "snapshots_by_worker" not in values:
        # The attested snapshots per worker exactly as ``_attested_snapshots`` derives them,
        # and the executors over them, in one C call (None: not decided there).
        built = _native.attested_executors(
            ExecutorTransferPlan,
            RuntimeFragmentSnapshot,
            RuntimeBindingAttestation,
            RuntimeBindingEvidence,
            RuntimeBindingFragment,
            attestation,
            placement.placement_id,
            part.participant_id,
            digest,
            part.rank,
            PlacementFragment,
        )
        if built is not None:
            values["snapshots_by_worker"] = built[0]
            values[key] = built[1]
            return built[1]  # type: ignore[no-any-return]
    evidence = attestation.evidence
    fragments = evidence.fragments
    if len(fragments) == 1:
        workers = [fragments[0].worker_id]
    else:
        workers = sorted({fragment.worker_id for fragment in fragments})
    rows = []
    for worker_id in workers:
        snapshots = _attested_snapshots(attestation, worker_id)
        if not snapshots:
            continue
        executor = _executor(
            evidence.instance_id,
            placement.placement_id,
            part.participant_id,
            digest,
            evidence.lease_id,
            worker_id,
            part.rank,
            tuple([snapshot.fragment_id for snapshot in snapshots]),
            snapshots,
            attestation,
        )
        rows.append((worker_id, snapshots, executor))
    result = tuple(rows)
    values[key] = result
    return result


# Executor (rank, worker) keys: a ParallelRank as a tagged tuple of its fields (equal exactly
# when the ranks are equal; cheaper to hash than the dataclass), anything else as itself.
_RANK_TAG = object()


def _executor_key(rank: Any, worker_id: Any) -> tuple[Any, Any]:
    if type(rank) is ParallelRank:
        return ((_RANK_TAG, rank.dp, rank.tp, rank.pp, rank.ep), worker_id)
    return (rank, worker_id)


def _project_attested_part(
    placement: WeightPlacementManifest,
    part: Any,
    binding: WeightRuntimeBindingManifest,
    attestation: RuntimeBindingAttestation,
    side: str,
    selected_fragment_ids: Optional[frozenset[str]],
    seen_keys: set[tuple[Any, ...]],
    emitted: set[str],
    out: list[ExecutorTransferPlan],
) -> None:
    """Projection of an attested part: the attestation was built from (or proven for) this
    binding, so the snapshots equal the attested ones (owners are not part of a snapshot)."""
    if attestation.placement is not placement or part is not placement._part_index().get(part.participant_id):
        _project_part(placement, part, binding, attestation, side, selected_fragment_ids, seen_keys, emitted, out)
        return
    for worker_id, all_snapshots, executor in _attested_executors(placement, part, attestation):
        if selected_fragment_ids is None or (
            type(selected_fragment_ids) is frozenset
            and selected_fragment_ids.issuperset([snapshot.fragment_id for snapshot in all_snapshots])
        ):
            snapshots = all_snapshots
        else:
            snapshots = tuple(snapshot for snapshot in all_snapshots if snapshot.fragment_id in selected_fragment_ids)
            if not snapshots:
                continue
        key = _executor_key(part.rank, worker_id)
        if key in seen_keys:
            raise ValueError(f"duplicate {side} executor rank and worker: {(part.rank, worker_id)}")
        seen_keys.add(key)
        if len(snapshots) == len(all_snapshots):
            emitted.update(executor.fragment_ids)
            out.append(executor)
            continue
        fragment_ids = tuple(snapshot.fragment_id for snapshot in snapshots)
        emitted.update(fragment_ids)
        out.append(
            _executor(
                executor.instance_id,
                executor.placement_id,
                executor.participant_id,
                executor.placement_digest,
                executor.runtime_lease_id,
                worker_id,
                executor.rank,
                fragment_ids,
                snapshots,
                attestation,
            )
        )


def _project_part(
    placement: WeightPlacementManifest,
    part: Any,
    binding: WeightRuntimeBindingManifest,
    attestation: RuntimeBindingAttestation,
    side: str,
    selected_fragment_ids: Optional[frozenset[str]],
    seen_keys: set[tuple[Any, ...]],
    emitted: set[str],
    out: list[ExecutorTransferPlan],
) -> None:
    runtime_by_pfid = {fragment.placement_fragment_id: fragment for fragment in binding.fragments}
    per_worker: dict[str, list[BoundWeightFragment]] = {}
    for placement_fragment in part.fragments:
        runtime = runtime_by_pfid[placement_fragment.placement_fragment_id]
        if selected_fragment_ids is not None and runtime.fragment_id not in selected_fragment_ids:
            continue
        bound = BoundWeightFragment(
            placement=placement_fragment,
            binding=runtime,
            instance_id=binding.instance_id,
            runtime_lease_id=binding.lease_id,
            lease_generation=binding.generation,
            owner=getattr(runtime, "owner", None),  # (an emptied owner slot: its default None)
            attestation=attestation,
        )
        per_worker.setdefault(runtime.worker_id, []).append(bound)
    digest = placement.digest
    for worker_id in sorted(per_worker):
        fragments = sorted(per_worker[worker_id], key=lambda bound: bound.binding.fragment_id)
        key = _executor_key(part.rank, worker_id)
        if key in seen_keys:
            raise ValueError(f"duplicate {side} executor rank and worker: {(part.rank, worker_id)}")
        seen_keys.add(key)
        fragment_ids = tuple(bound.binding.fragment_id for bound in fragments)
        emitted.update(fragment_ids)
        out.append(
            ExecutorTransferPlan(
                instance_id=binding.instance_id,
                placement_id=placement.placement_id,
                participant_id=part.participant_id,
                placement_digest=digest,
                runtime_lease_id=binding.lease_id,
                worker_id=worker_id,
                rank=part.rank,
                fragment_ids=fragment_ids,
                fragment_snapshots=tuple(RuntimeFragmentSnapshot.from_fragment(bound) for bound in fragments),
                attestation=attestation,
            )
        )


# (dp, pp, ep, tp) of an executor's rank, read as attributes (one C call per executor).
_EXECUTOR_ORDER = attrgetter("rank.dp", "rank.pp", "rank.ep", "rank.tp")


def _build_executor_plans_with(
    placements: Sequence[WeightPlacementManifest],
    bindings: Sequence[WeightRuntimeBindingManifest],
    side: str,
    selected_fragment_ids: Optional[frozenset[str]],
    attestations: Optional[dict[tuple[str, str], RuntimeBindingAttestation]],
    carried: Any = None,
) -> tuple[ExecutorTransferPlan, ...]:
    """(``carried``: the carrier of step 6's attested tables, see ``_carried_tables``, or None.)"""
    if side not in _SIDES:
        raise ValueError(f"invalid executor side: {side}")
    by_key: dict[tuple[str, str], WeightRuntimeBindingManifest] = {}
    for binding in bindings:
        key = (binding.placement_id, binding.participant_id)
        if key in by_key:
            raise ValueError(f"duplicate {side} runtime binding participant")
        by_key[key] = binding
    if len(placements) == 1 and type(placements[0]) is WeightPlacementManifest:
        placement = placements[0]
        if attestations is None:
            # The bindings through the fused C attestation (it never raises: it decides only valid
            # bindings of this placement's parts, whose placement id and participant it checks, and
            # leaves every other one, in any order); those it does not decide are left to the
            # loop's _attest, which raises the first failure in part order as before. A decided
            # attestation is exactly what _attest returns for that binding.
            placement_id = placement.placement_id
            ordered = tuple(by_key.values())
            fused = _fused_attestations(placement, ordered)
            if fused is not None:
                decided = {
                    (placement_id, binding.participant_id): attestation
                    for binding, attestation in zip(ordered, fused)
                    if attestation is not None
                }
                # None decided: the loop as before.
                attestations = decided or None
    if attestations is not None and len(placements) == 1 and type(placements[0]) is WeightPlacementManifest:
        placement = placements[0]
        # Every bound part on its attested single-worker path, in one C call (None: the loop
        # below decides and raises the first failure).
        projected: Optional[tuple[ExecutorTransferPlan, ...]] = _native.project_attested(
            ExecutorTransferPlan,
            RuntimeFragmentSnapshot,
            RuntimeBindingAttestation,
            RuntimeBindingEvidence,
            RuntimeBindingFragment,
            ParallelRank,
            _attestation_values,
            placement,
            placement.parts,
            placement._part_index(),
            by_key,
            attestations,
            placement.placement_id,
            placement.digest,
            selected_fragment_ids,
            PlacementFragment,
            carried,
        )
        if projected is not None:
            return projected
    out: list[ExecutorTransferPlan] = []
    seen_keys: set[tuple[Any, ...]] = set()
    emitted: set[str] = set()
    selected_set = selected_fragment_ids if type(selected_fragment_ids) is frozenset else None
    for placement in placements:
        placement_id = placement.placement_id
        part_index = placement._part_index()
        digest: Optional[str] = None
        for part in placement.parts:
            participant_id = part.participant_id
            part_key = (placement_id, participant_id)
            binding = by_key.get(part_key)
            if binding is None:
                continue
            attestation = None if attestations is None else attestations.get(part_key)
            if attestation is None:
                # validate_runtime_binding(placement, binding), then the attestation.
                attestation = _attest(placement, binding)
            if not part.fragments:
                continue
            if attestation.placement is not placement or part is not part_index.get(participant_id):
                _project_part(placement, part, binding, attestation, side, selected_fragment_ids, seen_keys, emitted, out)
                continue
            # _project_attested_part, inline: one attested executor per worker (or its selection).
            if selected_set is not None:
                evidence_fragments = attestation.evidence.fragments
                if len(evidence_fragments) == 1:
                    unselected = evidence_fragments[0].fragment_id not in selected_set
                else:
                    unselected = selected_set.isdisjoint([fragment.fragment_id for fragment in evidence_fragments])
                if unselected:
                    continue  # no attested snapshot of this part is selected (they are a subset)
            if digest is None:
                digest = placement.digest
            rows = _attested_executors(placement, part, attestation, digest)
            if len(rows) == 1:
                worker_id, all_snapshots, executor = rows[0]
                if selected_fragment_ids is not None:
                    if selected_set is None:
                        _project_attested_part(
                            placement, part, binding, attestation, side, selected_fragment_ids, seen_keys, emitted, out
                        )
                        continue
                    if len(all_snapshots) == 1:
                        if all_snapshots[0].fragment_id not in selected_set:
                            continue  # nothing selected on this worker
                        partial = False
                    else:
                        snapshot_ids = [snapshot.fragment_id for snapshot in all_snapshots]
                        if selected_set.isdisjoint(snapshot_ids):
                            continue  # nothing selected on this worker
                        partial = not selected_set.issuperset(snapshot_ids)
                    if partial:
                        _project_attested_part(
                            placement, part, binding, attestation, side, selected_fragment_ids, seen_keys, emitted, out
                        )
                        continue
                rank = part.rank  # _executor_key(part.rank, worker_id), inline
                if type(rank) is ParallelRank:
                    key: tuple[Any, Any] = ((_RANK_TAG, rank.dp, rank.tp, rank.pp, rank.ep), worker_id)
                else:
                    key = (rank, worker_id)
                if key in seen_keys:
                    raise ValueError(f"duplicate {side} executor rank and worker: {(part.rank, worker_id)}")
                seen_keys.add(key)
                emitted.update(executor.fragment_ids)
                out.append(executor)
                continue
            _project_attested_part(
                placement, part, binding, attestation, side, selected_fragment_ids, seen_keys, emitted, out
            )
    out.sort(key=_EXECUTOR_ORDER)
    if selected_fragment_ids is not None and emitted != set(selected_fragment_ids):
        raise ValueError(f"missing selected {side} runtime fragment")
    return tuple(out)


def _build_executor_plans(
    placements: Sequence[WeightPlacementManifest],
    bindings: Sequence[WeightRuntimeBindingManifest],
    side: str,
    *,
    selected_fragment_ids: Optional[frozenset[str]] = None,
) -> tuple[ExecutorTransferPlan, ...]:
    """Executor projections of ``bindings`` over ``placements`` for one side (spec §12.3).

    One ``ExecutorTransferPlan`` per (participant part, worker), sorted by (dp, pp, ep, tp);
    with ``selected_fragment_ids`` only those runtime fragments are projected, and every
    selected id must be emitted ("missing selected {side} runtime fragment").
    """
    return _build_executor_plans_with(tuple(placements), tuple(bindings), side, selected_fragment_ids, None)


# ---------------------------------------------------------------------------------------
# §12.2 resolving executor projections


def resolve_executor_plans(
    plan: TransferPlan,
    placement: WeightPlacementManifest,
    binding: WeightRuntimeBindingManifest,
    side: str,
) -> tuple[ExecutorTransferPlan, ...]:
    """Re-derive the executor projections one live binding owns and check them against the
    plan's (spec §12.2); returns the plan's matching executors."""
    # (its C steps' layout memos are trusted only while no field is shadowed: memo_proved,
    # AUDIT41, tests/test_audit4141_rules_cold_memos.py)
    try:
        return memo_proved(lambda: _resolve_executor_plans(plan, placement, binding, side))
    except _PYTHON_ERRORS:
        _raise_shape_failure((binding,))  # (F11: a damaged binding pickle)
        raise


def _resolve_executor_plans(
    plan: TransferPlan,
    placement: WeightPlacementManifest,
    binding: WeightRuntimeBindingManifest,
    side: str,
) -> tuple[ExecutorTransferPlan, ...]:
    if side == "source":
        executors = plan.source_executors
    elif side == "target":
        executors = plan.target_executors
    else:
        raise ValueError(f"invalid executor side: {side}")
    if not executors:
        raise ValueError(f"transfer plan has no {side} executor metadata")
    if (plan.resource_id, plan.revision, plan.weight_generation) != (
        getattr(placement, "resource_id", None),
        getattr(placement, "revision", None),
        getattr(placement, "weight_generation", None),
    ):
        raise ValueError(f"transfer plan identity differs from {side} placement")
    validate_runtime_binding(placement, binding)
    expected = tuple(
        executor
        for executor in executors
        if executor.instance_id == binding.instance_id and executor.participant_id == binding.participant_id
    )
    if not expected:
        raise ValueError(f"{side} executor snapshot mismatch: unknown instance")
    selected = frozenset(fragment_id for executor in expected for fragment_id in executor.fragment_ids)
    try:
        current = _build_executor_plans((placement,), (binding,), side, selected_fragment_ids=selected)
    except ValueError as exc:
        if str(exc) == f"missing selected {side} runtime fragment":
            raise ValueError(f"{side} executor snapshot mismatch") from None
        raise
    pairs = [(executor.rank, executor.worker_id) for executor in expected]
    if len(set(pairs)) != len(pairs):
        raise ValueError(f"{side} executor snapshot has duplicate rank and worker")
    if current != expected:
        raise ValueError(f"{side} executor snapshot mismatch")
    return expected


def resolve_executor_plan(
    plan: TransferPlan,
    placement: WeightPlacementManifest,
    binding: WeightRuntimeBindingManifest,
    side: str,
) -> ExecutorTransferPlan:
    """Like ``resolve_executor_plans`` but requires exactly one executor."""
    executors = resolve_executor_plans(plan, placement, binding, side)
    if len(executors) != 1:
        raise ValueError(f"{side} executor snapshot contains multiple ranks")
    return executors[0]


# ---------------------------------------------------------------------------------------
# §12.1 binding


def _tensor_map(tensors: Iterable[Any]) -> dict[str, Any]:
    mapping: dict[str, Any] = {}
    for tensor in tensors:
        if tensor.tensor_id in mapping:
            raise ValueError("logical transfer plan has duplicate tensor descriptors")
        mapping[tensor.tensor_id] = tensor
    return mapping


def _check_tensor_snapshots(
    logical_plan: LogicalTransferPlan,
    source_placement: Optional[WeightPlacementManifest],
    target_placement: WeightPlacementManifest,
    target_participants: set[Any],
    authoritative: Optional[StoredWeightManifest],
) -> None:
    """Step 4 (tensor snapshots), rule by rule: the plan's descriptors by tensor id, without
    duplicates, equal the source placement's (or the source manifest's) and those of the target
    parts whose participants the plan's target executors name (``target_participants``; all the
    placement's without any)."""
    source_tensors = _tensor_map(logical_plan.source_tensors)
    target_tensors = _tensor_map(logical_plan.target_tensors)
    if source_placement is not None:
        if source_tensors != _placement_tensors(source_placement):
            raise ValueError("logical plan and source placement tensor descriptors differ")
    elif authoritative is not None:
        if source_tensors != {tensor.tensor_id: tensor for tensor in authoritative.tensors}:
            raise ValueError("logical plan and source manifest tensor descriptors differ")
    if target_participants:
        expected_target_tensors = {
            tensor.tensor_id: tensor
            for part in target_placement.parts
            if part.participant_id in target_participants
            for tensor in part.tensors
        }
    else:
        expected_target_tensors = _placement_tensors(target_placement)
    if target_tensors != expected_target_tensors:
        raise ValueError("logical plan and target placement tensor descriptors differ")


def _tensor_snapshots_match(
    logical_plan: LogicalTransferPlan,
    source_placement: Optional[WeightPlacementManifest],
    target_placement: WeightPlacementManifest,
    target_participants: set[Any],
) -> bool:
    """Step 4 decided by identity (``_native.tensor_maps_match``): True when both comparisons of
    ``_check_tensor_snapshots`` hold, every descriptor compared being the plan's own object (the
    placements list the very descriptors the planner put in the plan); False when that is not
    decided here. For an exact plan (``_exact_plan``: exact classes, so the attribute reads below
    run no user code) with exact str participant ids (no user ``__eq__`` in the set probes); the
    dicts it would build at 10^6 fragments cost about 6 % of binding (the target parts list each
    descriptor once per participant holding it)."""
    if source_placement is None or not all([type(participant) is str for participant in target_participants]):
        return False
    if target_participants:
        groups = []
        for part in target_placement.parts:
            participant = part.participant_id
            if type(participant) is not str:
                return False
            if participant in target_participants:
                groups.append(part.tensors)
    else:
        groups = [target_placement.tensors]
    return (
        _native.tensor_maps_match(logical_plan.source_tensors, (source_placement.tensors,), TensorDescriptor) is True
        and _native.tensor_maps_match(logical_plan.target_tensors, tuple(groups), TensorDescriptor) is True
    )


def _recheck_logical_target(plan: LogicalTransferPlan) -> Optional[list[Any]]:
    """The logical target-side self-checks of spec §11.6 (step 2 of §12.1), run on every bind:
    nothing is remembered about a plan (a frozen value can be edited in place).

    Their C call is asked to decide step 5's snapshot check as well, in the same passes over
    the operations (``validation._FusedStep5``; one C call: every read observes the same
    state). Returns that request, whose answer (item 3) is True only when step 5 passes for the
    objects it read (operations, item 4; source and target placements, items 5 and 6; their
    ``fragments``, items 2 and 1), or None."""
    request = _fused_step5_request(plan)
    validation._FUSED_STEP5.request = request
    try:
        validate_logical_target_coverage(plan)
    finally:
        validation._FUSED_STEP5.request = None
    return request


def _fused_step5_request(plan: Any) -> Optional[list[Any]]:
    """The step 5 request for a plan of exact classes with a source placement (instance dicts
    read: no user code, nothing raised), else None."""
    if type(plan) is not LogicalTransferPlan:
        return None
    state = plan.__dict__
    source, target = state.get("source_placement"), state.get("target_placement")
    if type(source) is not WeightPlacementManifest or type(target) is not WeightPlacementManifest:
        return None
    target_fragments, source_fragments = target.__dict__.get("fragments"), source.__dict__.get("fragments")
    if type(target_fragments) is not tuple or type(source_fragments) is not tuple:
        return None
    return [plan, target_fragments, source_fragments, None, state.get("operations"), source, target]


def _bind_side(
    label: str,
    placement: Optional[WeightPlacementManifest],
    bindings: Any,
    required: set[Any],
    exact: Optional[list[bool]] = None,
    carry: Optional[list[Any]] = None,
) -> tuple[list[WeightRuntimeBindingManifest], dict[tuple[str, str], RuntimeBindingAttestation]]:
    """Validate one side's bindings (spec §12.1 step 6); return the kept ones and attestations.
    ``exact`` (bind's own list) gets False when a given binding or its fragments is not of the
    exact classes (their reads may run user code: see ``_sealed``). ``carry`` (bind's own list)
    gets the carrier of the attested tables step 6 built (see ``_carried_tables``)."""
    if isinstance(bindings, WeightRuntimeBindingManifest):
        raise ValueError(f"invalid {label} runtime binding input")
    try:
        given = tuple(bindings)
    except TypeError:
        raise ValueError(f"invalid {label} runtime binding input") from None
    if placement is None:
        if given:
            raise ValueError(f"logical plan has no {label} placements")
        return [], {}
    if not given:
        raise ValueError(f"logical plan requires {label} runtime bindings")
    # The loop below in one C call when it accepts (exact classes, exact str ids read from the
    # instances' own dicts: no user code runs, so the set operations decide what the loop's do);
    # None: the loop runs and raises the first failure in its order.
    given_participants: Optional[set[str]] = _native.bind_side_ids(
        WeightRuntimeBindingManifest, RuntimeBindingFragment, given
    )
    if given_participants is None:
        if exact is not None:
            exact.append(False)
        given_participants = _bind_side_ids(label, given)
    placement_id = placement.placement_id
    for binding in given:
        if binding.placement_id != placement_id:
            raise ValueError(f"logical plan and {label} placement IDs differ")
    bindable = _placement_bindable(placement)
    if not (required <= given_participants <= bindable):
        raise ValueError(f"logical plan and {label} runtime binding participants differ")
    proven = _validate_bindings_together(placement, given, carry)
    # Every given binding passed validate_runtime_binding just above (or earlier, unchanged).
    attestations = {}
    kept = []
    for binding, attestation in zip(given, proven):
        if binding.participant_id in required:
            kept.append(binding)
            if attestation is None:
                attestation = RuntimeBindingAttestation._from_validated(placement, binding)
            attestations[(placement_id, binding.participant_id)] = attestation
    return kept, attestations


def _bind_side_ids(label: str, given: tuple[Any, ...]) -> set[str]:
    """Step 6's identity checks of one side's given bindings, in order: each is a binding, no
    (placement_id, participant_id) pair twice, no runtime fragment_id twice across the side.
    Returns the participant ids."""
    seen: set[tuple[str, str]] = set()
    runtime_ids: set[str] = set()
    given_participants: set[str] = set()
    for binding in given:
        if not isinstance(binding, WeightRuntimeBindingManifest):
            raise ValueError(f"invalid {label} runtime binding input")
        participant_id = binding.participant_id
        key = (binding.placement_id, participant_id)
        if key in seen:
            raise ValueError(f"duplicate {label} runtime binding participant: {participant_id}")
        seen.add(key)
        given_participants.add(participant_id)
        for fragment in binding.fragments:
            fragment_id = fragment.fragment_id
            if fragment_id in runtime_ids:
                raise ValueError(f"duplicate {label} runtime fragment_id: {fragment_id}")
            runtime_ids.add(fragment_id)
    return given_participants


def _validate_bindings_together(
    placement: WeightPlacementManifest,
    bindings: Sequence[WeightRuntimeBindingManifest],
    carry: Optional[list[Any]] = None,
) -> list[Optional[RuntimeBindingAttestation]]:
    """Each binding alone, then the per-instance address ranges across participants (§11.8).

    Returns, per binding, its attestation (validated on this call: nothing is remembered)."""
    # validate_runtime_binding then the attestation, binding by binding.
    proven: list[Optional[RuntimeBindingAttestation]] = list(
        _attest_many(placement, bindings, None if carry is None else (RuntimeFragmentSnapshot, carry))
    )
    if len({binding.instance_id for binding in bindings}) == len(bindings):
        return proven  # one binding per instance: its ranges were checked with it
    instances: dict[str, list[WeightRuntimeBindingManifest]] = {}
    for binding in bindings:
        bucket = instances.get(binding.instance_id)
        if bucket is None:
            instances[binding.instance_id] = [binding]
        else:
            bucket.append(binding)
    for members in instances.values():
        # A single binding's instance ranges are exactly the per-binding check above.
        if len(members) > 1:
            views: list[Any] = []
            for binding in members:
                views.extend(_binding_views(placement, binding))
            validate_runtime_address_ranges(views)
    return proven


def _bound_fragments(
    label: str,
    placement: Optional[WeightPlacementManifest],
    kept: Sequence[WeightRuntimeBindingManifest],
    attestations: dict[tuple[str, str], RuntimeBindingAttestation],
    operations: Any = (),
) -> dict[str, BoundWeightFragment]:
    """Step 7 for one side: bound fragments by placement fragment id."""
    bound: dict[str, BoundWeightFragment] = {}
    if placement is None:
        return bound
    parts = placement._part_index()
    ordered = _ordered_bound_map(label, placement, parts, kept, attestations, operations)
    if ordered is not None:
        return ordered
    for binding in kept:
        attestation = attestations[(placement.placement_id, binding.participant_id)]
        part = parts[binding.participant_id]
        for fragment_id, fragment in _attested_bound_fragments(attestation, part):
            if fragment_id in bound:
                raise ValueError(f"duplicate bound {label} placement fragment: {fragment_id}")
            bound[fragment_id] = fragment
    return bound


# From this many operations on, binding allocates the bound fragments in operation order (below
# it the plan's objects fit in the CPU caches and the order does not pay for the extra call).
_ORDERED_MIN_OPERATIONS = 4096


def _ordered_bound_map(
    label: str,
    placement: WeightPlacementManifest,
    parts: Any,
    kept: Sequence[WeightRuntimeBindingManifest],
    attestations: dict[tuple[str, str], RuntimeBindingAttestation],
    operations: Any,
) -> Optional[dict[str, BoundWeightFragment]]:
    """The map the per-part loop of ``_bound_fragments`` builds from exactly the rows
    ``_attested_bound_fragments`` returns per kept binding (same keys in the same order, same
    values; its duplicate id raises the same error), built in one C call that allocates the
    bound fragments in the order the operations first name them, so the passes that follow
    ``op.target`` / ``op.source`` read them in memory order (not in participant order), and
    builds no row. None: not decided there (or rows already cached, or a plan small enough to
    stay in the CPU caches, where the extra call only costs); the caller then runs the per-part
    loop, which raises the first failure."""
    inputs = _ordered_inputs(placement, parts, kept, attestations, operations)
    if inputs is None:
        return None
    ordered = _native.bound_fragments_ordered(
        BoundWeightFragment,
        RuntimeBindingAttestation,
        TransferRegion,
        inputs[0],
        inputs[1],
        operations,
        0 if label == "target" else 1,
        True,
    )
    # Nothing is cached on the attestations (unlike the per-part path): the map is this call's.
    return ordered


def _ordered_inputs(
    placement: WeightPlacementManifest,
    parts: Any,
    kept: Sequence[WeightRuntimeBindingManifest],
    attestations: dict[tuple[str, str], RuntimeBindingAttestation],
    operations: Any,
) -> Optional[tuple[tuple[Any, ...], tuple[RuntimeBindingAttestation, ...]]]:
    """The kept bindings' (part fragments, attestations) that ``_ordered_bound_map`` hands to
    ``bound_fragments_ordered``, or None where it takes the per-part loop instead."""
    if type(operations) is not tuple or len(operations) < _ORDERED_MIN_OPERATIONS:
        return None
    placement_id = placement.placement_id
    chosen = [(attestations[(placement_id, binding.participant_id)], parts[binding.participant_id]) for binding in kept]
    values = [_attestation_values(attestation) for attestation, _ in chosen]
    if any(~id(part) in cache for (_, part), cache in zip(chosen, values)):
        return None
    return tuple(part.fragments for _, part in chosen), tuple(attestation for attestation, _ in chosen)


# From this many operations on (and on the ordered path, _ORDERED_MIN_OPERATIONS), steps 7 and 8
# are one C call (bind_regions_ordered): no bound map, no lookup by id.
_FUSED_MIN_OPERATIONS = 4096


def _fused_steps_7_8(
    target_placement: WeightPlacementManifest,
    target_kept: Sequence[WeightRuntimeBindingManifest],
    target_attestations: dict[tuple[str, str], RuntimeBindingAttestation],
    source_placement: Optional[WeightPlacementManifest],
    source_kept: Sequence[WeightRuntimeBindingManifest],
    source_attestations: dict[tuple[str, str], RuntimeBindingAttestation],
    operations: Any,
    segment_budget: Any,
    prove: bool,
) -> Any:
    """What ``bind_regions`` returns (its 11-argument form) on the maps steps 7 and 8 build with
    ``_bound_fragments`` when both sides take the ordered path, decided in one C call that builds
    no map (``bind_regions_ordered``); None when not decided there: the caller then runs steps
    7 and 8 as before, which raise their first failure."""
    if type(operations) is not tuple or len(operations) < _FUSED_MIN_OPERATIONS:
        return None
    try:
        # (the reads _bound_fragments makes before its C call, target then source; whatever
        # they raise, the steps raise again in their own order)
        target = _ordered_inputs(
            target_placement, target_placement._part_index(), target_kept, target_attestations, operations
        )
        if target is None:
            return None
        if source_placement is None:
            source: Optional[tuple[Any, Any]] = ((), ())
        else:
            source = _ordered_inputs(
                source_placement, source_placement._part_index(), source_kept, source_attestations, operations
            )
        if source is None:
            return None
    except Exception:
        return None
    return _native.bind_regions_ordered(
        TransferRegion,
        PlacementFragment,
        StoredFragmentSnapshot,
        operations,
        target[0],
        target[1],
        source[0],
        source[1],
        RuntimeBindingAttestation,
        BoundWeightFragment,
        RuntimeBindingFragment,
        segment_budget,
        True,
        prove,
    )


def _attested_bound_fragments(
    attestation: RuntimeBindingAttestation, part: Any
) -> tuple[tuple[str, BoundWeightFragment], ...]:
    """``(placement fragment id, BoundWeightFragment)`` for each fragment of ``part`` bound to
    its attested evidence fragment (spec §12.1 step 7), cached on the attestation.

    Built through the trusted path: placement fragment and evidence fragment are the
    attestation's own entries and the fences are the evidence's, which is exactly what
    ``BoundWeightFragment.__post_init__`` would verify."""
    values = _attestation_values(attestation)
    key = ~id(part)  # see _attested_executors: ~id(part) (negative) never equals an id
    rows: Optional[tuple[tuple[str, BoundWeightFragment], ...]] = values.get(key)
    if rows is None:
        # The trusted path for every fragment in one C call (None: not decided there).
        rows = _native.bound_fragments(BoundWeightFragment, RuntimeBindingAttestation, part.fragments, attestation)
        if rows is None:
            rows = _built_bound_rows(attestation, part)
        values[key] = rows
    return rows


def _built_bound_rows(
    attestation: RuntimeBindingAttestation, part: Any
) -> tuple[tuple[str, BoundWeightFragment], ...]:
    """``_attested_bound_fragments`` in Python (when the C call does not decide)."""
    evidence = attestation.evidence
    binding_by_id = attestation.__dict__["_binding_dict"]
    placement_by_id = attestation.__dict__["_placement_dict"]
    rows = []
    for placement_fragment in part.fragments:
        fragment_id = placement_fragment.placement_fragment_id
        runtime = binding_by_id[fragment_id]
        if placement_by_id.get(fragment_id) is placement_fragment:
            bound = _trusted_bound_fragment(
                placement_fragment, runtime, evidence.instance_id, evidence.lease_id, evidence.generation, attestation
            )
        else:
            bound = BoundWeightFragment(
                placement=placement_fragment,
                binding=runtime,
                instance_id=evidence.instance_id,
                runtime_lease_id=evidence.lease_id,
                lease_generation=evidence.generation,
                owner=None,
                attestation=attestation,
            )
        rows.append((fragment_id, bound))
    return tuple(rows)


# Values binding derives from a placement, derived from its current values on every call:
# nothing is kept on the placement (a nested part, fragment or tensor can be edited in place,
# and a kept value would then change an outcome).


def _placement_bindable(placement: WeightPlacementManifest) -> frozenset[Any]:
    """The participant ids of the placement's parts that have fragments."""
    return frozenset([part.participant_id for part in placement.parts if part.fragments])


def _placement_fragments(placement: WeightPlacementManifest) -> dict[str, PlacementFragment]:
    """The placement's fragments by placement fragment id."""
    return {fragment.placement_fragment_id: fragment for fragment in placement.fragments}


def _placement_tensors(placement: WeightPlacementManifest) -> dict[str, Any]:
    """The placement's tensors by tensor id."""
    return {tensor.tensor_id: tensor for tensor in placement.tensors}


def _part_fragment_index(placement: WeightPlacementManifest) -> dict[str, PlacementFragment]:
    index: dict[str, PlacementFragment] = _placement_fragments(placement)
    return index


def _bind_operations(operations: Any, bound_targets: dict[str, Any], bound_sources: dict[str, Any]) -> list[Any]:
    """Step 8 of ``bind_logical_transfer_plan``, one operation at a time (the first failure raises)."""
    result: list[Any] = []
    for op in operations:
        if not isinstance(op, TransferRegion):
            raise ValueError("logical transfer operation is not canonical")
        target = op.target
        if not isinstance(target, PlacementFragment):
            raise ValueError("logical transfer operation target is runtime-bound")
        bound_target = bound_targets.get(target.placement_fragment_id)
        if bound_target is None:
            raise ValueError(f"missing runtime binding for placement fragment: {target.placement_fragment_id}")
        source = op.source
        if isinstance(source, PlacementFragment):
            bound_source: Any = bound_sources.get(source.placement_fragment_id)
            if bound_source is None:
                raise ValueError(
                    f"missing source runtime binding for placement fragment: {source.placement_fragment_id}"
                )
        elif isinstance(source, StoredFragmentSnapshot):
            bound_source = source
        else:
            raise ValueError("logical transfer operation source is runtime-bound")
        # Same validated geometry, fragments with the same boxes and byte sizes: the region
        # invariants still hold, so the trusted path is safe (TransferPlan re-checks bounds).
        result.append(
            _trusted_region(
                op.tensor_id,
                bound_source,
                bound_target,
                op.overlap_offset,
                op.overlap_shape,
                op.source_base_offset,
                op.target_base_offset,
                op.inner_bytes,
                op.outer_loop_counts,
                op.source_strides,
                op.target_strides,
            )
        )
    return result


def bind_logical_transfer_plan(
    logical_plan: LogicalTransferPlan,
    target_bindings: Sequence[WeightRuntimeBindingManifest],
    *,
    source_bindings: Sequence[WeightRuntimeBindingManifest] = (),
    source_manifest: Optional[StoredWeightManifest] = None,
) -> TransferPlan:
    """Bind a logical plan to runtime binding snapshots and return the attested ``TransferPlan``
    (spec §12.1). Every binding given is validated; only the selected participants' bindings
    are kept, and no allocation owner survives in the result."""
    # Binding creates several long-lived, acyclic objects per operation; without the pause the
    # collector rescans the growing heap again and again (measured: ~40 % of binding at 74k
    # operations; about a quarter of that saving reappears as one later collection).
    # The C steps' layout memos are trusted only while no field is shadowed (see memo_proved;
    # a call that ran sealed to its end says so in ``sealed``, which also holds the values it
    # released from its inputs until the proof is decided, and skips the proof after it).
    sealed: list[Any] = []
    try:
        with collector_paused():
            plan = memo_proved(
                lambda: _watched_bind(logical_plan, target_bindings, source_bindings, source_manifest, sealed),
                sealed,
            )
    except _PYTHON_ERRORS:
        # The rules met a value that never ran its own checks: a default-pickled runtime binding
        # manifest (spec §13; bindings gathered from ranks by pickle) or a value forged in place.
        # The spec message of the first absent or mistyped field replaces Python's error (fuzz
        # finding F11); inputs whose fields all have their types re-raise it. Nothing on the
        # accepting path.
        failure = _bind_input_type_failure(logical_plan, target_bindings, source_bindings)
        if failure is not None:
            raise ValueError(failure) from None
        raise
    del sealed
    if len(plan.operations) >= _TRIM_MIN_OPERATIONS:
        _native.trim_heap()  # the revalidation's tables, freed by now
    return plan


# The containers whose items _logical_item_failure reads (a subclass's too, through the
# built-in class's own iteration: no user code runs).
_BUILTIN_CONTAINERS = (tuple, list, str, bytes, set, frozenset, dict)


def _logical_item_failure(state: dict[str, Any]) -> Optional[str]:
    """For a logical plan forged in place (its ``__post_init__`` never saw these values): the
    message of the first field holding an object of another class than its construction
    checks (§8.6 steps 3, 4, 6, 13; a non-region operation with bind's step 8 message). The
    items of a built-in container (or of a subclass of one, read through the built-in class's
    iteration) are read; anything else is left to the rules, and a value that is not iterable
    keeps Python's ``TypeError``, as the constructor's ``tuple()`` raises it."""
    if not isinstance(state.get("target_placement"), WeightPlacementManifest):
        return "logical transfer plan target placement is invalid"
    if not isinstance(state.get("planning_limits"), PlanningLimits):
        return "logical transfer plan planning_limits is invalid"
    source = state.get("source_placement")
    if source is not None and not isinstance(source, WeightPlacementManifest):
        return "logical transfer plan source placement is invalid"
    checks = (
        ("operations", TransferRegion, "logical transfer operation is not canonical"),
        ("source_executors", PlacementExecutorPlan, "logical transfer plan has invalid canonical executor metadata"),
        ("target_executors", PlacementExecutorPlan, "logical transfer plan has invalid canonical executor metadata"),
        ("source_tensors", TensorDescriptor, "logical transfer plan source_tensors must contain TensorDescriptor"),
        ("target_tensors", TensorDescriptor, "logical transfer plan target_tensors must contain TensorDescriptor"),
    )
    for name, cls, message in checks:
        items = state.get(name)
        base = next((kind for kind in _BUILTIN_CONTAINERS if isinstance(items, kind)), None)
        for item in () if base is None else base.__iter__(items):  # (the built-in iteration)
            if not isinstance(item, cls):
                return message
    return None


def _bind_input_type_failure(logical_plan: Any, target_bindings: Any, source_bindings: Any) -> Optional[str]:
    """The spec message of the first absent or mistyped field of bind's inputs, in bind's step
    order (the logical plan, with its placements; then the target bindings, then the source
    bindings, each with its fragments); None when there is none. Used only after a rule raised
    a Python error (read from the instances' field states: no user code runs)."""
    from .contracts import _logical_type_failure
    from .field_types import binding_shape_failure

    if isinstance(logical_plan, LogicalTransferPlan) and type(logical_plan.__dict__) is dict:
        failure = _logical_item_failure(logical_plan.__dict__) or _logical_type_failure(logical_plan)
        if failure is None and "source_manifest_identity" not in logical_plan.__dict__:
            failure = "logical transfer plan source_manifest_identity is invalid"
        if failure is not None:
            return failure
    return binding_shape_failure(target_bindings) or binding_shape_failure(source_bindings)


def _watched_bind(
    logical_plan: LogicalTransferPlan,
    target_bindings: Sequence[WeightRuntimeBindingManifest],
    source_bindings: Sequence[WeightRuntimeBindingManifest],
    source_manifest: Optional[StoredWeightManifest],
    sealed: Optional[list[Any]] = None,
) -> TransferPlan:
    watch = start_watch(_operation_count(logical_plan) >= _WATCH_MIN)  # (see _sealed)
    try:
        return _bind_logical_transfer_plan(
            logical_plan,
            target_bindings,
            source_bindings=source_bindings,
            source_manifest=source_manifest,
            watch=watch,
            sealed_out=sealed,
        )
    finally:
        stop_watch(watch)


def _no_hooks() -> bool:
    """No trace or profile function or monitoring tool is set (they run Python code at every line
    and call)."""
    return sys.gettrace() is None and sys.getprofile() is None and no_monitoring_tools()


def _operation_count(logical_plan: Any) -> int:
    """The number of operations of an exact plan whose fields are in an exact dict, else 0.
    (Reads nothing but exact objects; whatever runs before the watch starts runs before the call.)"""
    if type(logical_plan) is not LogicalTransferPlan:
        return 0
    state = logical_plan.__dict__
    operations = state.get("operations") if type(state) is dict else None
    return len(operations) if type(operations) is tuple else 0


def _exact_plan(logical_plan: Any) -> bool:
    """The logical plan, its limits, descriptors, executors and placements (with every member:
    see ``exactness.exact_placement``) of the exact classes."""
    if type(logical_plan) is not LogicalTransferPlan:
        return False
    try:  # (a forged instance may lack a field: not exact; the steps raise their own messages)
        source_placement = logical_plan.source_placement
        return (
            type(logical_plan.planning_limits) is PlanningLimits
            and exact_items(logical_plan.source_executors, PlacementExecutorPlan)
            and exact_items(logical_plan.target_executors, PlacementExecutorPlan)
            and exact_descriptors(logical_plan.source_tensors)
            and exact_descriptors(logical_plan.target_tensors)
            and exact_placement(logical_plan.target_placement)
            and (source_placement is None or exact_placement(source_placement))
        )
    except Exception:
        return False


def _sealed(
    logical_plan: Any, limits: Any, source_placement: Any, target_placement: Any, watch: Any = None
) -> bool:
    """Whether no code but this package's can have run during the bind call (called at its end;
    the caller adds: no hook set at its start; the plan's descriptors and executors, the given
    binding sequences (tuple or list), every given binding and runtime fragment, and the source
    manifest of the exact classes; step 8's regions built in C).

    The new plan's revalidation takes facts the call proved earlier (``carried``: bind_regions'
    scan and canonical proofs; ``_ViewScope(built_now=True)``: the call's own snapshots compared
    by identity; step 9's physical ranges, applied once) only then: user code that ran after the
    proof (a subclass's attribute read, a trace or profile hook) could have changed what it
    covered through the caller's frames or ``gc.get_objects()`` (tests/test_audit22_bind_carried.py).
    Otherwise every rule runs again on the new plan, as ``replace`` runs them.

    Exact classes are not enough: an exact object can hold a value whose comparison or hash is
    user code (a str subclass stored with ``object.__setattr__``, an instance dict replaced by a
    dict subclass; tests/test_audit23_sealed_gate.py). A call below ``_WATCH_MIN`` operations
    checks at its entry that every value reachable from its inputs is plain
    (``exactness.inert_inputs``; in proportion to the values, ~3 % of the contract benchmark's
    bind). A larger call is watched instead (``exactness.start_watch``: a C profile function that
    trips on the first frame of code other than the package's; a sealed call runs a few Python
    frames per part and binding, so the watch costs little however many fragments there are);
    a watch that tripped before the revalidation took the carried facts unseals the call here,
    and one that tripped during it makes the caller decide the plan again by every rule.

    The collector is paused during the call (no gc callback or finalizer runs), and the values the
    call replaces or pops from its inputs' derived state are held until it returns
    (``_held_values``): released, one held only there would run its weakref callbacks, which can
    be C code alone that no watch sees (tests/test_audit27_coverage_skip.py). Out of scope:
    another thread, a signal handler or an audit hook (``sys.addaudithook``; CPython runs them
    with profiling paused) changing the objects with ``object.__setattr__``: process-wide code
    the application installed, which could equally change them after the last check."""
    return (
        untouched(watch)
        and type(logical_plan) is LogicalTransferPlan
        and type(limits) is PlanningLimits
        and type(target_placement) is WeightPlacementManifest
        and (source_placement is None or type(source_placement) is WeightPlacementManifest)
    )


def _held_values(logical_plan: Any) -> Optional[list[Any]]:
    """The values a bind call releases from its inputs' derived state: the logical plan's
    ``_operation_views`` (``LogicalTransferPlan._views()`` replaces it) and each placement's
    ``_digest_ahead`` (popped at its first ``digest`` read). Bind holds them until it returns:
    released during the call, a value held only there would run its weakref callbacks (foreign
    code, unseen by the watch when it is C code only) after the steps proved the facts a sealed
    call carries (tests/test_audit27_coverage_skip.py). Read from the exact classes' own dicts."""
    if type(logical_plan) is not LogicalTransferPlan:
        return None
    state = logical_plan.__dict__
    held = [state.get("_operation_views")]
    for name in ("source_placement", "target_placement"):
        placement = state.get(name)
        if type(placement) is WeightPlacementManifest:
            held.append(placement.__dict__.get("_digest_ahead"))
    return held


def _recheck_runtime_fragments(
    placement: WeightPlacementManifest, bindings: Sequence[WeightRuntimeBindingManifest]
) -> None:
    """An unsealed bind call (see ``_sealed``): step 6's rules for the kept bindings, again
    (each runtime fragment's construction rules, then ``validate_runtime_binding``). Step 6
    applied them, but user code ran since and may have edited a fragment with
    ``object.__setattr__``; the plan's revalidation does not run these rules, and a pickle round
    trip, which rebuilds every fragment through its constructor and attests it again, would then
    raise. The first failure's message."""
    for binding in bindings:
        for fragment in binding.fragments:
            RuntimeBindingFragment(*_constructor_arguments(fragment))
        validate_runtime_binding(placement, binding)


# Step 6 builds the target side's attested tables (each binding's snapshots per worker, sorted)
# right after attesting it, its fragments still in the CPU caches; step 11 takes them instead of
# reading every runtime fragment again (see _carried_tables). False: step 11 builds them.
_CARRY_TABLES = True


def _carried_tables(carry: Optional[list[Any]], untouched_since: bool) -> Any:
    """The carrier of the attested tables step 6 built (``attest_many``'s; held in C memory, out
    of Python code's reach, and taken by ``project_attested`` only for the very attestation it
    was built from), when no code but this package's can have run since: ``untouched_since`` is
    the sealed call's conditions at step 11 (no hook at entry and now, the exact plan with inert
    or watched values, exact given bindings and fragments, an untripped watch). Otherwise None:
    a hook or a subclass's attribute read between steps 6 and 11 could have edited a runtime
    fragment or an attestation in place (``object.__setattr__``), and step 11 reads them as they
    are then (tests/test_attest30_carried_tables.py)."""
    if not untouched_since or not carry:
        return None
    return carry[0]


def _target_selection(selections: Any, operations: Any, untouched_since: bool) -> Optional[frozenset[str]]:
    """Step 11's target selection, the runtime fragment ids of the bound targets: step 8's set
    (``selections[1]``), else derived from the operations. None (project every attested fragment,
    no selection) when step 8 found it complete: ``bind_regions_ordered`` returns None there when
    the operations name every fragment of the target parts and each target attestation's evidence
    lists as many fragments as its part, so that the bound targets hold every evidence fragment
    of those attestations, each id an exact str (csrc/binder.c, ``bd_ordered_build``). Projecting
    without a selection then emits what projecting with that set emits, and the ~4 % of a large
    bind that building, probing and counting the set took is saved. Taken only while
    ``untouched_since`` (the sealed call's conditions at step 11, as for ``_carried_tables``): code
    that ran since could have edited an attestation's evidence in place; the set is derived then."""
    if selections is not None:
        if selections[1] is not None or untouched_since:
            return selections[1]
        derived = _native.bound_fragment_ids(operations, TransferRegion, BoundWeightFragment, StoredFragmentSnapshot)
        if derived is not None:
            return derived[1]
    return frozenset({op.target.binding.fragment_id for op in operations})


def _bind_logical_transfer_plan(
    logical_plan: LogicalTransferPlan,
    target_bindings: Sequence[WeightRuntimeBindingManifest],
    *,
    source_bindings: Sequence[WeightRuntimeBindingManifest],
    source_manifest: Optional[StoredWeightManifest],
    watch: Any = None,
    sealed_out: Optional[list[Any]] = None,
) -> TransferPlan:
    if not isinstance(logical_plan, LogicalTransferPlan):
        raise ValueError("logical_plan must be a LogicalTransferPlan")
    # Decided at entry, before anything reads the inputs (see _sealed): with no hook and every
    # object this call reads of the exact classes, no user code runs during the call.
    hooks_clear = untouched(watch)
    # Values the call would release from its inputs, held until it returns (see _held_values).
    held = _held_values(logical_plan)
    # The classes, then the values they hold (tests/test_audit23_sealed_gate.py): checked here,
    # or, in a large call, watched (see _sealed).
    exact_plan = (
        hooks_clear
        and _exact_plan(logical_plan)
        and (watch is not None or inert_inputs(logical_plan, target_bindings, source_bindings, source_manifest))
    )
    step5 = _recheck_logical_target(logical_plan)
    # Step 3: stored-source manifest.
    plan_manifest = logical_plan.source_manifest
    authoritative: Optional[StoredWeightManifest] = None
    if plan_manifest is None:
        if source_manifest is not None:
            raise ValueError("runtime source plan must not receive a source manifest")
    else:
        if source_manifest is None:
            raise ValueError("stored source plan requires a source manifest")
        authoritative = validate_weight_manifest_snapshot(source_manifest)
        if authoritative.manifest_identity != logical_plan.source_manifest_identity:
            raise ValueError("logical plan source manifest identity differs")
    source_placement = logical_plan.source_placement
    target_placement = logical_plan.target_placement
    # Step 4: tensor snapshots.
    target_participants = {executor.participant_id for executor in logical_plan.target_executors}
    if not (exact_plan and _tensor_snapshots_match(logical_plan, source_placement, target_placement, target_participants)):
        _check_tensor_snapshots(logical_plan, source_placement, target_placement, target_participants, authoritative)
    # Step 5: fragment snapshots.
    logical_plan.validate_source_manifest_snapshot()
    # Decided at step 2 in the target checks' C call (the same passes over the operations), for
    # these very objects: nothing below is read (the fragment indexes only serve the loop).
    # Only when no user code can have run since (step 4's descriptor comparisons call __eq__,
    # a subclassed plan's attribute reads, a hook: they could have changed the operations
    # meanwhile; tests/test_audit22_bind_carried.py).
    operations_checked = (
        step5 is not None
        and step5[3] is True
        and hooks_clear
        and untouched(watch)
        and exact_plan
        and source_placement is step5[5]
        and target_placement is step5[6]
        and logical_plan.operations is step5[4]
        and source_placement.__dict__.get("fragments") is step5[2]
        and target_placement.__dict__.get("fragments") is step5[1]
    )
    del step5
    if operations_checked:
        target_index: dict[str, Any] = {}
        source_index: dict[str, Any] = {}
    else:
        target_index = _part_fragment_index(target_placement)
        source_index = _part_fragment_index(source_placement) if source_placement is not None else {}
    committed = {fragment.fragment_id: fragment for fragment in authoritative.fragments} if authoritative else {}
    # ``x is not y and x != y``: the planner's operations hold the placements' own fragment
    # objects, and a validated fragment (ints, strings, tuples of them) equals itself. Those very
    # objects everywhere: decided in one C call (None: the loop below decides and raises).
    operations_checked = operations_checked or (
        source_placement is not None
        and _native.operations_snapshots(
            logical_plan.operations, TransferRegion, PlacementFragment, target_index, source_index
        )
    )
    for op in () if operations_checked else logical_plan.operations:
        target = getattr(op, "target", None)
        if not isinstance(target, PlacementFragment):
            raise ValueError("logical plan and target placement fragment snapshots differ")
        indexed = target_index.get(target.placement_fragment_id)
        if indexed is not target and indexed != target:
            raise ValueError("logical plan and target placement fragment snapshots differ")
        source = getattr(op, "source", None)
        if source_placement is not None:
            if not isinstance(source, PlacementFragment):
                raise ValueError("logical plan and source placement fragment snapshots differ")
            indexed = source_index.get(source.placement_fragment_id)
            if indexed is not source and indexed != source:
                raise ValueError("logical plan and source placement fragment snapshots differ")
        elif authoritative is not None:
            if not isinstance(source, StoredFragmentSnapshot) or committed.get(source.fragment_id) != source:
                raise ValueError("logical plan and source manifest fragment snapshots differ")
    # The step 5 maps are not read again.
    del target_index, source_index, committed
    # Step 6: bindings, target first.
    exact_bindings: list[bool] = []  # (see _sealed)
    target_carry: Optional[list[Any]] = [] if _CARRY_TABLES else None  # (see _carried_tables)
    target_kept, target_attestations = _bind_side(
        "target", target_placement, target_bindings, target_participants, exact_bindings, target_carry
    )
    source_required = {executor.participant_id for executor in logical_plan.source_executors}
    source_kept, source_attestations = _bind_side(
        "source", source_placement, source_bindings, source_required, exact_bindings
    )
    # Step 8: rebuild the operations (in one C call when every operation takes the trusted path
    # below; otherwise this loop, which raises the first failure). The same C pass derives step
    # 11's fragment id selections from the regions it builds (exactly what bound_fragment_ids
    # returns for them; None: derived at step 11). Nothing below changes the regions or their
    # fragments before step 11 reads them.
    # The same C pass also decides step 9's common case (physical_whole_targets' accept path on
    # the regions it builds, read in that call: no Python code runs between building a region
    # and reading it, so it decides what the check right after would). True: step 9 passed;
    # None: the check below runs on the regions, as before. Its budget is read here from the
    # exact classes' own dicts (no user code, nothing raised before step 8's failures) and
    # handed straight to the call; otherwise None (not decided there).
    # (selections[1] None: the target selection is complete, see _target_selection)
    selections: Optional[tuple[frozenset[str], Optional[frozenset[str]]]] = None
    physical: Optional[bool] = None
    limits = logical_plan.__dict__.get("planning_limits") if type(logical_plan) is LogicalTransferPlan else None
    segment_budget = limits.__dict__.get("max_total_lowered_segments") if type(limits) is PlanningLimits else None
    # The same pass also derives what the new plan's revalidation scan would derive from these
    # regions (carried: see revalidate_scan_carried), or None; from _PROVE_MIN operations on, it
    # also proves each region it builds canonical for the new plan's final region recheck
    # (carried: see region_check.recheck_regions; below that the proof's fixed cost exceeds
    # what it saves, and the recheck proves the regions itself).
    carried: Any = None
    # Steps 7 and 8 in one C call when both sides take the ordered path (below) and it decides
    # (an exact plan: its operations field read before step 7 runs no user code).
    bound: Optional[
        tuple[list[Any], Optional[tuple[frozenset[str], Optional[frozenset[str]]]], Optional[bool], Any]
    ] = None
    if type(logical_plan) is LogicalTransferPlan:
        logical_operations = logical_plan.operations
        bound = _fused_steps_7_8(
            target_placement,
            target_kept,
            target_attestations,
            source_placement,
            source_kept,
            source_attestations,
            logical_operations,
            segment_budget,
            type(logical_operations) is tuple and len(logical_operations) >= _PROVE_MIN,
        )
        del logical_operations
    # Every bound fragment made in this call, each from its attestation's own dict entries
    # (bind_regions_ordered; see bound_contracts._attested_by_call). The other path may take
    # bound fragments cached on an attestation by an earlier call.
    attested_now = bound is not None
    bound_targets: dict[str, BoundWeightFragment] = {}
    bound_sources: dict[str, BoundWeightFragment] = {}
    if bound is None:
        # Step 7: bound fragments.
        # Each side's bound fragments are allocated in the order the operations first use them
        # (the ordered path builds the map in C, no (id, fragment) row whose memory, freed, would
        # be reused by the objects allocated next and scatter them).
        bound_targets = _bound_fragments(
            "target", target_placement, target_kept, target_attestations, logical_plan.operations
        )
        bound_sources = _bound_fragments(
            "source", source_placement, source_kept, source_attestations, logical_plan.operations
        )
        logical_operations = logical_plan.operations
        bound = _native.bind_regions(
            TransferRegion,
            PlacementFragment,
            StoredFragmentSnapshot,
            logical_operations,
            bound_targets,
            bound_sources,
            BoundWeightFragment,
            RuntimeBindingFragment,
            segment_budget,
            True,
            type(logical_operations) is tuple and len(logical_operations) >= _PROVE_MIN,
        )
        del logical_operations
    regions_in_c = bound is not None  # (see _sealed)
    if bound is None:
        operations: list[Any] = _bind_operations(logical_plan.operations, bound_targets, bound_sources)
    else:
        operations, selections, physical = bound[:3]
        if len(bound) > 3:  # (tests may stand in a 3-item bind_regions)
            # packed now: the per-operation lists are not alive through the projections below
            carried = _compact_carried(bound[3])
    # The bound fragments are held by the operations from here on: the maps are not needed.
    del bound_targets, bound_sources, bound
    if len(operations) >= _TRIM_MIN_OPERATIONS:
        _native.trim_heap()  # bind_regions' scratch arrays and the maps: out of the peak below
    # Step 9: target physical ranges, once, with the plan's lowered-segment budget (looked up on
    # the module so the single application is observable) unless step 8's pass decided it.
    if physical is not True:
        bound_validation._validate_target_physical_ranges(
            operations, max_segment_checks=logical_plan.planning_limits.max_total_lowered_segments
        )
    # Step 10.
    if source_kept and source_placement is None:
        raise ValueError("source runtime bindings require a source placement")
    # Step 11: executor projections and the revalidating TransferPlan constructor.
    if selections is None:
        selections = _native.bound_fragment_ids(operations, TransferRegion, BoundWeightFragment, StoredFragmentSnapshot)
    if source_kept:
        assert source_placement is not None
        if selections is not None:
            source_selected = selections[0]
        else:
            source_selected = frozenset(
                {op.source.binding.fragment_id for op in operations if isinstance(op.source, BoundWeightFragment)}
            )
        source_executors = _build_executor_plans_with(
            (source_placement,), source_kept, "source", source_selected, source_attestations
        )
        del source_selected
    else:
        source_executors = ()
    # The sealed call's conditions now (see _carried_tables): what step 6 and step 8 proved of
    # the runtime fragments and attestations still holds.
    untouched_since = (
        hooks_clear
        and exact_plan
        and not exact_bindings
        and type(target_bindings) in (tuple, list)
        and untouched(watch)
    )
    target_selected = _target_selection(selections, operations, untouched_since)
    target_executors = _build_executor_plans_with(
        (target_placement,),
        target_kept,
        "target",
        target_selected,
        target_attestations,
        _carried_tables(target_carry, untouched_since),
    )
    del target_carry
    # The id selections and the region list are not read again: freed before the revalidation
    # of the new plan (bind's peak; ~4 MiB at 74k operations). tuple() of our own list runs no
    # user code, so building it first changes nothing the keyword reads below observe.
    # (_native.inert_tuple: that tuple, out of the collector when every region is (as bind
    # leaves them from 1024 operations on): the first collection after bind no longer walks it.)
    del selections, target_selected
    bound_operations = _native.inert_tuple(operations) if type(operations) is list else tuple(operations)
    del operations
    if len(bound_operations) >= _TRIM_MIN_OPERATIONS:
        _native.trim_heap()  # the projections' temporaries: out of the revalidation's peak
    sealed = (
        hooks_clear
        and exact_plan
        and regions_in_c
        and not exact_bindings
        and type(target_bindings) in (tuple, list)
        and type(source_bindings) in (tuple, list)
        and (source_manifest is None or type(source_manifest) is StoredWeightManifest)
        and _sealed(logical_plan, limits, source_placement, target_placement, watch)
    )
    if not sealed:
        carried = None
        _recheck_runtime_fragments(target_placement, target_kept)
        if source_placement is not None:
            _recheck_runtime_fragments(source_placement, source_kept)
    fields = dict(
        resource_id=logical_plan.resource_id,
        revision=logical_plan.revision,
        weight_generation=target_placement.weight_generation,
        target_placement=target_placement,
        operations=bound_operations,
        planning_limits=logical_plan.planning_limits,
        source_executors=source_executors,
        target_executors=target_executors,
        source_manifest=authoritative,
        source_manifest_identity=logical_plan.source_manifest_identity,
    )
    del source_executors, target_executors  # (bound_operations: a local the tests locate)
    if not sealed:
        return TransferPlan._from_bound_operations(None, False, **fields)
    try:
        plan: Optional[TransferPlan] = TransferPlan._from_bound_operations(
            carried, True, source_placement, attested_now, **fields
        )
    except Exception:
        if untouched(watch):
            raise
        plan = None  # (decided below)
    del carried
    if plan is None or not untouched(watch):
        # Code other than the package's ran while the revalidation took the carried facts (the
        # watch saw its frame): the plan is decided as an unsealed call decides it, by every rule
        # on the objects as they are now (tests/test_audit23_sealed_gate.py).
        _recheck_runtime_fragments(target_placement, target_kept)
        if source_placement is not None:
            _recheck_runtime_fragments(source_placement, source_kept)
        plan = TransferPlan._from_bound_operations(None, False, **fields)
    elif sealed_out is not None:
        # Sealed to the end (untouched just now; nothing but this frame's returns runs until
        # memo_proved reads it): its proof after the call is skipped. ``held`` goes with it, so
        # the values the call released stay alive until that decision (see memo_proved).
        sealed_out.append(held)
    return plan


__all__ = [
    "_build_executor_plans",
    "bind_logical_transfer_plan",
    "resolve_executor_plan",
    "resolve_executor_plans",
]

"""Logical plan validation: ``LogicalTransferPlan.__post_init__`` (spec §8.6) and the logical
self-checks of spec §11.6.

Every check here runs on each construction, ``dataclasses.replace`` and unpickling, so all of
them are linear in the plan size (dict look-ups; the exact-cover test runs in C in one call).
``validate_logical_target_coverage`` is also what ``bind_logical_transfer_plan`` re-runs; its
common case is decided in C (``_native.logical_target_cover``, which only accepts or declines:
on a decline the Python checks below run and raise the first failure).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Optional

from ... import _native
from ..part import WeightPlacementPart
from ..placement import WeightPlacementManifest
from ..storage_manifest import (
    StoredFragmentSnapshot,
    StoredWeightManifest,
    validate_weight_manifest_snapshot,
)
from ..types import ParallelRank, PlacementFragment, TensorDescriptor
from .geometry import exact_cover_failures
from .region_check import recheck_regions

if TYPE_CHECKING:
    from .contracts import LogicalTransferPlan

__all__ = [
    "validate_logical_plan",
    "validate_logical_target_coverage",
    "validate_source_manifest_snapshot",
    "validate_source_placement_snapshot",
]


def validate_logical_plan(plan: LogicalTransferPlan) -> None:
    """The ``__post_init__`` of ``LogicalTransferPlan`` (spec §8.6 steps 1-17)."""
    from .contracts import PlacementExecutorPlan, PlanningLimits, TransferRegion, build_operation_views

    setter = object.__setattr__
    for name in ("source_tensors", "target_tensors", "operations", "source_executors", "target_executors"):
        setter(plan, name, tuple(getattr(plan, name)))
    plan.__dict__.pop("_operation_views", None)
    if not plan.resource_id or not plan.revision:
        raise ValueError("logical transfer plan identifiers must not be empty")
    target = plan.target_placement
    if not isinstance(target, WeightPlacementManifest):
        raise ValueError("logical transfer plan target placement is invalid")
    limits = plan.planning_limits
    if not isinstance(limits, PlanningLimits):
        raise ValueError("logical transfer plan planning_limits is invalid")
    operations = plan.operations
    if len(operations) > limits.max_transfer_regions:
        raise ValueError("logical transfer plan exceeds max_transfer_regions")
    source = plan.source_placement
    if source is not None and not isinstance(source, WeightPlacementManifest):
        raise ValueError("logical transfer plan source placement is invalid")
    manifest = plan.source_manifest
    if manifest is not None and not isinstance(manifest, StoredWeightManifest):
        raise ValueError("logical transfer plan source manifest is invalid")
    if (source is None) == (manifest is None):
        raise ValueError("logical transfer plan requires exactly one source provenance")
    if manifest is not None:
        manifest = validate_weight_manifest_snapshot(manifest)
        setter(plan, "source_manifest", manifest)
        setter(plan, "source_manifest_identity", manifest.manifest_identity)
    else:
        setter(plan, "source_manifest_identity", None)
    for side, placement in (("source", source), ("target", target)):
        if placement is not None and (
            placement.resource_id != plan.resource_id or placement.revision != plan.revision
        ):
            raise ValueError(f"logical transfer plan {side} placement identity differs")
    if source is not None and source.weight_generation != target.weight_generation:
        raise ValueError("logical transfer plan source and target weight_generation differs")
    if manifest is not None and (
        manifest.resource_id != plan.resource_id
        or manifest.revision != plan.revision
        or manifest.weight_generation != target.weight_generation
    ):
        raise ValueError("logical transfer plan source manifest identity differs")
    placement_sourced = source is not None
    max_segments = limits.max_segments_per_region
    max_total = limits.max_total_lowered_segments
    total = 0
    for operation in operations:
        if not isinstance(operation, TransferRegion):
            raise ValueError("logical transfer plan requires a canonical transfer operation")
        if not isinstance(operation.target, PlacementFragment):
            raise ValueError("logical transfer plan target must be a placement")
        if placement_sourced:
            if not isinstance(operation.source, PlacementFragment):
                raise ValueError("logical transfer plan source must be a placement")
        elif not isinstance(operation.source, StoredFragmentSnapshot):
            raise ValueError("logical transfer plan source has no placement")
        operation.validate_bounds()
        segments = operation.segment_count
        if segments > max_segments:
            raise ValueError("logical transfer plan exceeds max_segments_per_region")
        total += segments
        if total > max_total:
            raise ValueError("logical transfer plan exceeds max_total_lowered_segments")
    for executor in plan.source_executors + plan.target_executors:
        if not isinstance(executor, PlacementExecutorPlan):
            raise ValueError("logical transfer plan has invalid canonical executor metadata")
    validate_source_manifest_snapshot(plan, manifest)
    views = build_operation_views(operations, plan.source_executors, plan.target_executors)
    setter(plan, "_operation_views", views)
    validate_logical_target_coverage(plan)
    validate_source_placement_snapshot(plan)
    # Beyond the reference: regions restored by default pickling skip their own checks, so
    # forged geometry is refused here, after every spec rule (same first failure otherwise).
    recheck_regions(operations)


def validate_source_manifest_snapshot(
    plan: LogicalTransferPlan, rebuilt: Optional[StoredWeightManifest] = None
) -> None:
    """Stored-source checks (spec §8.6 ``validate_source_manifest_snapshot``).

    ``rebuilt`` is a copy of ``plan.source_manifest`` that the caller has just revalidated
    (``__post_init__`` passes the one it built in step 8); otherwise it is rebuilt here."""
    manifest = plan.source_manifest
    identity = plan.__dict__.get("source_manifest_identity")
    if manifest is None:
        if identity is not None:
            raise ValueError("logical plan has unexpected source manifest identity")
        return
    if rebuilt is None or rebuilt is not manifest:
        rebuilt = validate_weight_manifest_snapshot(manifest)
    if rebuilt.manifest_identity != identity:
        raise ValueError("logical plan source manifest identity differs")
    expected_tensors = tuple(sorted(rebuilt.tensors, key=lambda t: t.tensor_id))
    if tuple(plan.source_tensors) != expected_tensors:
        raise ValueError("logical plan source tensor catalog differs")
    by_id = {fragment.fragment_id: fragment for fragment in rebuilt.fragments}
    for operation in plan.operations:
        source = operation.source
        if not isinstance(source, StoredFragmentSnapshot) or by_id.get(source.fragment_id) != source:
            raise ValueError("logical plan and source manifest fragment snapshots differ")


def _fragment_owners(placement: WeightPlacementManifest) -> tuple[dict[str, Any], dict[str, Any]]:
    """Maps placement fragment id -> (participant id, fragment) and participant id -> part."""
    fragments: dict[str, Any] = {}
    parts: dict[str, Any] = {}
    for part in placement.parts:
        parts[part.participant_id] = part
        for fragment in part.fragments:
            fragments[fragment.placement_fragment_id] = (part.participant_id, fragment)
    return fragments, parts


def _check_executors(
    plan: LogicalTransferPlan,
    side: str,
    placement: WeightPlacementManifest,
    executors: tuple[Any, ...],
    parts: dict[str, Any],
    *,
    tensors: Optional[dict[str, TensorDescriptor]],
) -> list[Any]:
    # ``x is not y and x != y``: a validated value (ints, strings, tuples of them) equals
    # itself, and the planner's executors and tensors share the placement's own objects.
    indices = plan._views().indices
    placement_id = placement.placement_id
    seen: set[str] = set()
    selected: list[Any] = []
    for executor in executors:
        if executor.placement_id != placement_id:
            raise ValueError(f"logical {side} executor placement differs from {side}")
        participant = executor.participant_id
        if participant in seen:
            raise ValueError(f"logical plan has duplicate {side} executor participant")
        seen.add(participant)
        part = parts.get(participant)
        if part is None:
            raise ValueError(f"logical {side} executor differs from {side} placement")
        rank = part.rank
        executor_rank = executor.rank
        if rank is not executor_rank and rank != executor_rank:
            raise ValueError(f"logical {side} executor differs from {side} placement")
        part_fragments = part.fragments
        if len(part_fragments) == 1:
            expected_ids: tuple[str, ...] = (part_fragments[0].placement_fragment_id,)
        else:
            expected_ids = tuple(sorted(fragment.placement_fragment_id for fragment in part_fragments))
        ids = executor.placement_fragment_ids
        if (ids if type(ids) is tuple else tuple(ids)) != expected_ids:
            raise ValueError(f"logical {side} executor fragments differ from {side} placement")
        if not indices(executor, side):
            raise ValueError(f"logical {side} executor operations differ from {side} placement")
        if tensors is not None:
            for tensor in part.tensors:
                known = tensors.setdefault(tensor.tensor_id, tensor)
                if known is not tensor and known != tensor:
                    raise ValueError("logical target tensor catalog differs from placement")
        selected.append(part)
    return selected


# The exact classes the C accept path of the target self-checks expects (read once: contracts
# imports this module).
_COVER_CLASSES: list[Any] = []


class _FusedStep5(threading.local):
    """Binding's request (per thread) that the target checks' C call also decide binding step
    5's snapshot check over the same operations (``binding._recheck_logical_target``): a list
    ``[plan, target fragments, source fragments, answer, operations, source, target]`` whose
    answer the call fills. Taken by the first ``_target_checks_accepted`` of that plan and
    target only."""

    request: Optional[list[Any]] = None


_FUSED_STEP5 = _FusedStep5()


def _target_checks_accepted(plan: LogicalTransferPlan, target: Any) -> bool:
    """True when every check of ``validate_logical_target_coverage`` passes, decided by
    ``_native.logical_target_cover`` (all but the per-executor operation indices) and the plan's
    operation views; False when that is not decided here (the Python checks then decide)."""
    if type(target) is not WeightPlacementManifest:
        return False
    if not _COVER_CLASSES:
        from .contracts import LogicalTransferPlan, PlacementExecutorPlan, TransferRegion

        # One slice assignment (atomic under the GIL): two threads making their first call at
        # once each store the same seven classes, never fourteen.
        _COVER_CLASSES[:] = (
            TransferRegion,
            PlacementFragment,
            WeightPlacementPart,
            PlacementExecutorPlan,
            ParallelRank,
            TensorDescriptor,
            LogicalTransferPlan,
        )
    state = plan.__dict__
    executors = state.get("target_executors")
    operations = state.get("operations")
    # Binding's step 5 (snapshots of the operations' fragments) decided in the same C call,
    # when binding asked for it for this very plan, target and operations.
    step5 = _FUSED_STEP5.request
    fused: tuple[Any, ...] = ()
    if step5 is not None and step5[0] is plan and step5[6] is target and step5[4] is operations:
        _FUSED_STEP5.request = None  # taken once
        fused = (step5[1], step5[2])
    # The same C call also decides logical_routes_plain (below) in its passes over the
    # fragments and operations (one call: every read observes the same state): True, the checks
    # passed and the routes are plain; False, the checks passed and the routes are not decided
    # there; None, the checks are not decided there. With the step 5 request: None or
    # (routes, snapshots).
    cover = _native.logical_target_cover(
        operations,
        target.parts,
        executors,
        state.get("target_tensors"),
        target.placement_id,
        *_COVER_CLASSES[:6],
        StoredFragmentSnapshot,
        *fused,
    )
    if cover is None:
        return False
    if fused:
        assert step5 is not None
        cover, step5[3] = cover
    # The per-executor operation indices (_check_executors' last check), without building the
    # plan's views when that build provably cannot fail: logical_target_cover has just proven
    # that every executor's part has an operation targeting one of its fragments and that the
    # executor lists exactly its part's fragment ids (participants and fragment ids distinct),
    # so that operation falls in this executor's bucket and every indices(executor, "target")
    # is non-empty -- provided both sides' executor keys are exact, hashable and distinct and
    # every route is plain (what building the views would otherwise raise on; cover is True).
    # Read in this call, from the plan as it is now (nothing is remembered).
    if (
        cover is True
        and type(plan) is _COVER_CLASSES[6]
        and _plain_executor_keys(executors)
        and _plain_executor_keys(state.get("source_executors"))
    ):
        return True
    # Every other check passed, so the views are read where _check_executors reads them.
    indices = plan._views().indices
    for executor in executors:
        if not indices(executor, "target"):
            return False
    return True


def _plain_executor_keys(executors: Any) -> bool:
    """True when ``_side_index`` over ``executors`` (an exact tuple of exact
    ``PlacementExecutorPlan``) builds distinct keys from exact values without user code: exact
    str ids, an exact tuple of exact str fragment ids, an exact ``ParallelRank`` of exact ints
    (read from plain instance dicts, in C: one read of each fragment id, no tuple key hashed)."""
    return _native.plain_executor_keys(executors, _COVER_CLASSES[3], ParallelRank)


def validate_logical_target_coverage(plan: LogicalTransferPlan) -> None:
    """The target-side logical self-checks of spec §11.6 (also re-run by binding)."""
    target = plan.target_placement
    if _target_checks_accepted(plan, target):
        return
    fragments, parts = _fragment_owners(target)
    operation_participants: set[str] = set()
    by_target: dict[str, list[Any]] = {}
    for operation in plan.operations:
        fragment = operation.target
        if not isinstance(fragment, PlacementFragment):
            raise ValueError("logical transfer operation target must be a placement")
        fragment_id = fragment.placement_fragment_id
        entry = fragments.get(fragment_id)
        if entry is None or (entry[1] is not fragment and entry[1] != fragment):
            raise ValueError("logical plan and target placement fragment snapshots differ")
        operation_participants.add(entry[0])
        bucket = by_target.get(fragment_id)
        if bucket is None:
            by_target[fragment_id] = [operation]
        else:
            bucket.append(operation)
    executors = plan.target_executors
    if not executors:
        raise ValueError("logical plan has no target executor metadata")
    tensors: dict[str, TensorDescriptor] = {}
    selected = _check_executors(plan, "target", target, executors, parts, tensors=tensors)
    if {executor.participant_id for executor in executors} != operation_participants:
        raise ValueError("logical target executors differ from planned operations")
    if len(tensors) == 1:
        expected_tensors: tuple[TensorDescriptor, ...] = tuple(tensors.values())
    else:
        expected_tensors = tuple(tensors[tensor_id] for tensor_id in sorted(tensors))
    target_tensors = plan.target_tensors
    if (target_tensors if type(target_tensors) is tuple else tuple(target_tensors)) != expected_tensors:
        raise ValueError("logical target tensor catalog differs from placement")
    containers: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
    boxes: list[list[tuple[tuple[int, ...], tuple[int, ...]]]] = []
    order: list[str] = []
    no_operations: tuple[Any, ...] = ()
    for part in selected:
        for fragment in part.fragments:
            fragment_id = fragment.placement_fragment_id
            containers.append((fragment.global_offset, fragment.local_shape))
            boxes.append([(op.overlap_offset, op.overlap_shape) for op in by_target.get(fragment_id, no_operations)])
            order.append(fragment_id)
    failed = exact_cover_failures(containers, boxes)
    if failed is not None:
        raise ValueError(f"logical target fragment is not fully covered: {order[failed]}")


def validate_source_placement_snapshot(plan: LogicalTransferPlan) -> None:
    """The source-side logical self-checks of spec §11.6 (placement sources only)."""
    source = plan.source_placement
    if source is None:
        return
    if tuple(plan.source_tensors) != tuple(source.tensors):
        raise ValueError("logical plan source tensor catalog differs from placement")
    executors = plan.source_executors
    if not executors:
        raise ValueError("logical plan has no source executor metadata")
    fragments, parts = _fragment_owners(source)
    operation_participants: set[str] = set()
    for operation in plan.operations:
        fragment = operation.source
        if not isinstance(fragment, PlacementFragment):
            raise ValueError("logical transfer operation source must be a placement")
        entry = fragments.get(fragment.placement_fragment_id)
        if entry is None or (entry[1] is not fragment and entry[1] != fragment):
            raise ValueError("logical plan and source placement fragment snapshots differ")
        operation_participants.add(entry[0])
    _check_executors(plan, "source", source, executors, parts, tensors=None)
    if {executor.participant_id for executor in executors} != operation_participants:
        raise ValueError("logical source executors differ from planned operations")

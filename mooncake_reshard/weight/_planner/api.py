"""The three logical planning entry points (spec §10.1-§10.3)."""

from __future__ import annotations

from typing import Any, Optional

from ... import _native
from ..._collector import collector_paused
from ..._memo_proof import memo_proved
from ...contracts.ids import ParticipantId
from ..binding import _PYTHON_ERRORS
from ..part import WeightPlacementPart
from ..placement import WeightPlacementManifest
from ..storage_manifest import StoredWeightManifest, validate_weight_manifest_snapshot
from .contracts import LogicalTransferPlan, PlanningLimits
from .core import plan_logical_transfer
from .field_types import manifest_shape_failure

__all__ = [
    "plan_placement_transfer",
    "plan_placement_transfer_to_local_target",
    "plan_stored_transfer_to_target_placement",
]


# Planning allocates one region object per overlap; with large placements alive, automatic
# collections would rescan them again and again. The shared pause is thread-safe and nests
# (the collector is restored when the last user leaves).
_gc_paused = collector_paused


# The field values of ``PlanningLimits()``, built once through its validating constructor.
_DEFAULT_LIMITS = dict(PlanningLimits().__dict__)


def _default_limits() -> PlanningLimits:
    """A fresh ``PlanningLimits()`` (every call: the plan holds it, so it is never shared),
    built from the constant defaults without re-running their validation."""
    limits: PlanningLimits = object.__new__(PlanningLimits)
    object.__setattr__(limits, "__dict__", dict(_DEFAULT_LIMITS))
    return limits


def _limits(planning_limits: Optional[PlanningLimits]) -> PlanningLimits:
    if planning_limits is None:
        return _default_limits()
    if not isinstance(planning_limits, PlanningLimits):
        raise ValueError("planning_limits must be a PlanningLimits")
    return planning_limits


def _catalog_map(catalog: Any) -> dict[str, Any]:
    """``{tensor.tensor_id: tensor for tensor in catalog}``; a tuple (every validated catalog)
    takes one C pass (``_native.catalog_map``: the same reads and stores in the same order,
    the descriptors read a few ahead)."""
    native: Optional[dict[str, Any]] = _native.catalog_map(catalog)
    if native is None:
        return {tensor.tensor_id: tensor for tensor in catalog}
    return native


def _raise_placement_shape_failure(source: Any, target: Any) -> None:
    """After a planning rule raised Python's error: ``ValueError`` with the spec message of the
    first absent or mistyped field of the placements (a placement, part, fragment or descriptor
    forged in place never ran its own checks; fuzz findings F10, F11), if any; otherwise returns
    and the caller re-raises Python's error."""
    for side, placement in (("source", source), ("target", target)):
        if isinstance(placement, WeightPlacementManifest):
            failure = manifest_shape_failure(placement, f"{side} placement")
            if failure is not None:
                raise ValueError(failure) from None


def _require_placement(value: object, side: str) -> WeightPlacementManifest:
    if not isinstance(value, WeightPlacementManifest):
        raise ValueError(f"{side} placement manifests must be WeightPlacementManifest")
    return value


def _check_identity(source: Any, target: WeightPlacementManifest) -> None:
    if source.resource_id != target.resource_id:
        raise ValueError("source and target resource_id differ")
    if source.revision != target.revision:
        raise ValueError("source and target revision differ")
    if source.weight_generation != target.weight_generation:
        raise ValueError("source and target weight_generation differ")


def _plan_from_placement(
    source: WeightPlacementManifest,
    target: WeightPlacementManifest,
    limits: PlanningLimits,
    part: Optional[WeightPlacementPart],
) -> LogicalTransferPlan:
    """The placement-sourced plan of the whole ``target``, or of its one ``part`` (local target)."""
    extra: dict[str, Any] = {}
    if part is not None:
        extra = {"target_participants": {part.participant_id}, "target_tensor_catalog": tuple(part.tensors)}
    scope = target if part is None else part
    with _gc_paused():
        return plan_logical_transfer(
            resource_id=target.resource_id,
            revision=target.revision,
            source_placement=source,
            source_manifest=None,
            target_placement=target,
            source_tensors=_catalog_map(source.tensors),
            source_fragments=source.fragments,
            target_tensors=_catalog_map(scope.tensors),
            target_fragments=scope.fragments,
            local_target=part is not None,
            planning_limits=limits,
            **extra,
        )


def plan_placement_transfer(
    source_placement: WeightPlacementManifest,
    target_placement: WeightPlacementManifest,
    *,
    planning_limits: Optional[PlanningLimits] = None,
) -> LogicalTransferPlan:
    """Plan the logical regions that turn ``source_placement`` into ``target_placement``.

    Both are complete placements of the same resource, revision and weight generation. The
    result selects one complete source DP replica per target DP rank (round robin) and lists
    every overlap as one compact strided :class:`TransferRegion`.
    """
    # (each public entry point: its C steps' layout memos trusted only while proved, _memo_proof)
    try:
        return memo_proved(lambda: _plan_placement_transfer(source_placement, target_placement, planning_limits))
    except _PYTHON_ERRORS:
        _raise_placement_shape_failure(source_placement, target_placement)
        raise


def _plan_placement_transfer(source_placement: Any, target_placement: Any, planning_limits: Any) -> LogicalTransferPlan:
    source = _require_placement(source_placement, "source")
    target = _require_placement(target_placement, "target")
    _check_identity(source, target)
    return _plan_from_placement(source, target, _limits(planning_limits), None)


def plan_placement_transfer_to_local_target(
    source_placement: WeightPlacementManifest,
    target_placement: WeightPlacementManifest,
    target_participant_id: Optional[ParticipantId] = None,
    *,
    planning_limits: Optional[PlanningLimits] = None,
) -> LogicalTransferPlan:
    """Plan only the regions one target participant needs (spec §10.2).

    With ``target_participant_id=None`` the target must have exactly one participant. The plan
    binds with that participant's target binding plus the source bindings.
    """
    try:
        return memo_proved(
            lambda: _plan_to_local_target(source_placement, target_placement, target_participant_id, planning_limits)
        )
    except _PYTHON_ERRORS:
        _raise_placement_shape_failure(source_placement, target_placement)
        raise


def _plan_to_local_target(
    source_placement: Any, target_placement: Any, target_participant_id: Any, planning_limits: Any
) -> LogicalTransferPlan:
    source = _require_placement(source_placement, "source")
    target = _require_placement(target_placement, "target")
    if target_participant_id is None:
        if target.topology.world_size != 1:
            raise ValueError("target_participant_id is required for a multi-participant target")
        target_participant_id = target.parts[0].participant_id
    part = None
    for candidate in target.parts:
        if candidate.participant_id == target_participant_id:
            part = candidate
            break
    if part is None:
        raise ValueError(f"unknown target participant: {target_participant_id}")
    _check_identity(source, target)
    return _plan_from_placement(source, target, _limits(planning_limits), part)


def plan_stored_transfer_to_target_placement(
    source_manifest: StoredWeightManifest,
    target_placement: WeightPlacementManifest,
    *,
    planning_limits: Optional[PlanningLimits] = None,
) -> LogicalTransferPlan:
    """Plan loading a committed stored snapshot into ``target_placement`` (spec §10.3).

    The plan keeps the revalidated manifest and its identity; binding later needs the same
    manifest again (``source_manifest=``).
    """
    try:
        return memo_proved(lambda: _plan_stored_transfer(source_manifest, target_placement, planning_limits))
    except _PYTHON_ERRORS:
        _raise_placement_shape_failure(None, target_placement)
        raise


def _plan_stored_transfer(source_manifest: Any, target_placement: Any, planning_limits: Any) -> LogicalTransferPlan:
    if not isinstance(source_manifest, StoredWeightManifest):
        raise ValueError("source manifest must be a StoredWeightManifest")
    target = _require_placement(target_placement, "target")
    manifest = validate_weight_manifest_snapshot(source_manifest)
    _check_identity(manifest, target)
    limits = _limits(planning_limits)
    with _gc_paused():
        return plan_logical_transfer(
            resource_id=target.resource_id,
            revision=target.revision,
            source_placement=None,
            source_manifest=manifest,
            target_placement=target,
            source_tensors=_catalog_map(manifest.tensors),
            source_fragments=manifest.fragments,
            target_tensors=_catalog_map(target.tensors),
            target_fragments=target.fragments,
            local_target=False,
            planning_limits=limits,
            source_tensor_catalog=tuple(manifest.tensors),
        )

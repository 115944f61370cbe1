"""The planning loop (spec §11.1): tensor sets, source kind, DP replica choice, candidate
groups, one C call for overlaps and region geometry, operation order, executor projections.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

from ..placement import WeightPlacementManifest
from ..storage_manifest import StoredFragmentSnapshot, StoredWeightManifest
from ..types import PlacementFragment, TensorDescriptor
from .contracts import (
    LogicalTransferPlan,
    PlacementExecutorPlan,
    PlanningLimits,
    _trusted_executor,
    _trusted_logical_plan,
    _trusted_region,
)
from .geometry import FragmentBoxes, plan_overlap_regions
from .ownership import (
    check_target_coverage,
    complete_parallel_source_replicas,
    dp_owned_source_owners,
    is_dp_owned,
    owner_kinds,
)

__all__ = ["plan_logical_transfer", "project_executors"]


def _ids(values: Any) -> str:
    return ", ".join(sorted(values))


def _compatibility_error(source: TensorDescriptor, target: TensorDescriptor) -> Optional[str]:
    tensor_id = target.tensor_id
    if source.layout_fingerprint != target.layout_fingerprint:
        return f"layout mismatch for tensor {tensor_id}"
    if (
        source.global_shape != target.global_shape
        or source.dtype != target.dtype
        or source.itemsize != target.itemsize
        or source.layer_id != target.layer_id
        or source.expert_id != target.expert_id
    ):
        return f"tensor descriptor mismatch: {tensor_id}"
    return None


def project_executors(
    placement: WeightPlacementManifest,
    used_fragment_ids: set[str],
    side: str,
    participants: Optional[set[str]] = None,
) -> tuple[PlacementExecutorPlan, ...]:
    """Executor projections of one side (spec §11.1 step 7)."""
    included: list[tuple[tuple[int, int, int, int], PlacementExecutorPlan]] = []
    ranks: set[tuple[int, int, int, int]] = set()
    placement_id = placement.placement_id
    for part in placement.parts:
        if participants is not None and part.participant_id not in participants:
            continue
        fragment_ids = [fragment.placement_fragment_id for fragment in part.fragments]
        if not fragment_ids or used_fragment_ids.isdisjoint(fragment_ids):
            continue
        rank = part.rank
        key = (rank.dp, rank.pp, rank.ep, rank.tp)
        if key in ranks:
            raise ValueError(f"duplicate {side} placement executor rank: {rank}")
        ranks.add(key)
        fragment_ids.sort()
        included.append((key, _trusted_executor(placement_id, part.participant_id, rank, tuple(fragment_ids))))
    included.sort(key=lambda item: item[0])
    return tuple(executor for _, executor in included)


def _source_order_key(fragment: Any) -> tuple[Any, ...]:
    if isinstance(fragment, StoredFragmentSnapshot):
        return (0, 0, 0, 0, fragment.object_key, fragment.fragment_id)
    rank = fragment.rank
    return (rank.dp, rank.pp, rank.ep, rank.tp, fragment.placement_fragment_id)


def _fragment_id(fragment: Any) -> str:
    if isinstance(fragment, StoredFragmentSnapshot):
        return fragment.fragment_id
    return fragment.placement_fragment_id


def plan_logical_transfer(
    *,
    resource_id: str,
    revision: str,
    source_placement: Optional[WeightPlacementManifest],
    source_manifest: Optional[StoredWeightManifest],
    target_placement: WeightPlacementManifest,
    source_tensors: dict[str, TensorDescriptor],
    source_fragments: Sequence[Any],
    target_tensors: dict[str, TensorDescriptor],
    target_fragments: Sequence[PlacementFragment],
    local_target: bool,
    planning_limits: PlanningLimits,
    target_participants: Optional[set[str]] = None,
    source_tensor_catalog: tuple[TensorDescriptor, ...] = (),
    target_tensor_catalog: tuple[TensorDescriptor, ...] = (),
) -> LogicalTransferPlan:
    """Plan one logical transfer (spec §11.1) and build the validated plan."""
    # Step 1: tensor sets.
    source_ids = set(source_tensors)
    target_ids = set(target_tensors)
    if not local_target:
        missing = source_ids - target_ids
        if missing:
            raise ValueError(f"target manifests are missing tensors: {_ids(missing)}")
        extra = target_ids - source_ids
        if extra:
            raise ValueError(f"target manifests contain unknown tensors: {_ids(extra)}")
        check_target_coverage(target_tensors, target_fragments)
    else:
        extra = target_ids - source_ids
        if extra:
            raise ValueError(f"target manifests contain unknown tensors: {_ids(extra)}")
        if not target_fragments:
            raise ValueError("local target manifest has no fragments")
        if len({fragment.rank for fragment in target_fragments}) != 1:
            raise ValueError("local target manifest must describe exactly one executor")
        covered = {fragment.tensor_id for fragment in target_fragments}
        missing = target_ids - covered
        if missing:
            raise ValueError(f"local target manifest is missing fragments: {_ids(missing)}")

    # Step 2: source kind.
    stored = bool(source_fragments) and all(isinstance(f, StoredFragmentSnapshot) for f in source_fragments)
    placed = bool(source_fragments) and all(isinstance(f, PlacementFragment) for f in source_fragments)
    if not (stored or placed):
        raise ValueError("source fragments mix placement and stored locations")

    # Step 3: DP replica selection (placement sources only).
    complete: dict[int, dict[str, Any]] = {}
    dp_owners: dict[str, Any] = {}
    complete_ranks: list[int] = []
    if placed:
        complete = complete_parallel_source_replicas(source_tensors, source_fragments)
        dp_owners = dp_owned_source_owners(source_tensors, source_fragments)
        complete_ranks = sorted(complete)

    # Targets in fragment-id order; find the first target whose tensor cannot be planned.
    targets = sorted(target_fragments, key=lambda fragment: fragment.placement_fragment_id)
    stop = len(targets)
    stop_error: Optional[str] = None
    verdicts: dict[str, Optional[str]] = {}
    for index, fragment in enumerate(targets):
        tensor_id = fragment.tensor_id
        if tensor_id not in verdicts:
            source_tensor = source_tensors.get(tensor_id)
            if source_tensor is None:
                verdicts[tensor_id] = f"missing source tensor: {tensor_id}"
            else:
                verdicts[tensor_id] = _compatibility_error(source_tensor, target_tensors[tensor_id])
        if verdicts[tensor_id] is not None:
            stop = index
            stop_error = verdicts[tensor_id]
            break

    # Cover keys needed by the targets we will process.
    routed_by_owner: dict[str, bool] = {}
    replica_count = len(complete_ranks)
    needed: dict[tuple[str, Optional[int]], int] = {}
    target_cover: list[int] = []
    for fragment in targets[:stop]:
        tensor_id = fragment.tensor_id
        by_owner = routed_by_owner.get(tensor_id)
        if by_owner is None:
            by_owner = routed_by_owner[tensor_id] = stored or is_dp_owned(source_tensors[tensor_id])
        if by_owner:
            key: tuple[str, Optional[int]] = (tensor_id, None)
        else:
            key = (tensor_id, complete_ranks[fragment.rank.dp % replica_count])
        cover = needed.get(key)
        if cover is None:
            cover = needed[key] = len(needed)
        target_cover.append(cover)
    target_cover.extend([-1] * (len(targets) - stop))

    # Step 4: candidate groups and their eligible representatives per cover.
    needed_tensors = {key[0] for key in needed}
    by_tensor: dict[str, dict[tuple[Any, Any], list[Any]]] = {}
    for fragment in source_fragments:
        tensor_id = fragment.tensor_id
        if tensor_id not in needed_tensors:
            continue
        groups = by_tensor.setdefault(tensor_id, {})
        geometry = (tuple(fragment.global_offset), tuple(fragment.local_shape))
        bucket = groups.get(geometry)
        if bucket is None:
            groups[geometry] = [fragment]
        else:
            bucket.append(fragment)
    members: list[list[Any]] = [[] for _ in needed]
    for tensor_id, groups in by_tensor.items():
        tensor = source_tensors[tensor_id]
        kinds = owner_kinds(tensor)
        dp_owner = dp_owners.get(tensor_id)
        owned = dp_owner is not None
        for group in groups.values():
            if len(group) > 1:
                group.sort(key=_source_order_key)
            if stored:
                cover = needed.get((tensor_id, None))
                if cover is not None:
                    members[cover].append(group[0])
                continue
            taken: set[int] = set()
            for fragment in group:
                rank = fragment.rank
                owner = tuple((kind, getattr(rank, kind)) for kind in kinds)
                if owned:
                    if owner != dp_owner:
                        continue
                    key = (tensor_id, None)
                else:
                    chosen = complete.get(rank.dp)
                    if chosen is None or chosen.get(tensor_id) != owner:
                        continue
                    key = (tensor_id, rank.dp)
                cover = needed.get(key)
                if cover is None or cover in taken:
                    continue
                taken.add(cover)
                members[cover].append(fragment)
                if owned:
                    break

    # Pack both sides for the kernel.
    tensor_index: dict[str, int] = {}
    tensor_ndim: list[int] = []
    tensor_itemsize: list[int] = []
    for fragment in targets:
        tensor_id = fragment.tensor_id
        if tensor_id not in tensor_index:
            tensor = target_tensors[tensor_id]
            tensor_index[tensor_id] = len(tensor_ndim)
            tensor_ndim.append(len(tensor.global_shape))
            tensor_itemsize.append(tensor.itemsize)
    source_objects: list[Any] = []
    source_boxes = FragmentBoxes()
    cover_start = [0]
    cover_members: list[int] = []
    for cover_list in members:
        for fragment in cover_list:
            cover_members.append(len(source_objects))
            source_objects.append(fragment)
            source_boxes.add(
                tensor_index[fragment.tensor_id], fragment.global_offset, fragment.local_shape, fragment.nbytes
            )
        cover_start.append(len(cover_members))
    ranks = {fid: i for i, fid in enumerate(sorted(_fragment_id(f) for f in source_objects))}
    source_order = [ranks[_fragment_id(f)] for f in source_objects]
    target_boxes = FragmentBoxes()
    for fragment in targets:
        target_boxes.add(
            tensor_index[fragment.tensor_id], fragment.global_offset, fragment.local_shape, fragment.nbytes
        )
    records = plan_overlap_regions(
        tensor_ndim=tensor_ndim,
        tensor_itemsize=tensor_itemsize,
        source=source_boxes,
        source_order=source_order,
        cover_start=cover_start,
        cover_members=cover_members,
        target=target_boxes,
        target_cover=target_cover,
        nprocess=stop,
        max_transfer_regions=planning_limits.max_transfer_regions,
        max_segments_per_region=planning_limits.max_segments_per_region,
        max_total_lowered_segments=planning_limits.max_total_lowered_segments,
        target_fragment_ids=[fragment.placement_fragment_id for fragment in targets],
    )
    if stop_error is not None:
        raise ValueError(stop_error)

    # Steps 5.8 and 6: regions (already in final order) built through the trusted path.
    operations = []
    used_sources: set[str] = set()
    used_targets: set[str] = set()
    for record in records:
        source = source_objects[record[0]]
        target = targets[record[1]]
        operations.append(
            _trusted_region(
                target.tensor_id, source, target, record[2], record[3], record[4], record[5],
                record[6], record[7], record[8], record[9],
            )
        )
        used_targets.add(target.placement_fragment_id)
        if placed:
            used_sources.add(source.placement_fragment_id)

    # Step 7: executor projections.
    target_executors = project_executors(target_placement, used_targets, "target", target_participants)
    if local_target and len(target_executors) != 1:
        raise ValueError("local target placement must describe exactly one executor")
    if source_placement is not None:
        source_executors = project_executors(source_placement, used_sources, "source")
        source_catalog = tuple(source_placement.tensors)
    else:
        source_executors = ()
        source_catalog = tuple(sorted(source_tensor_catalog, key=lambda t: t.tensor_id))
    if local_target:
        target_catalog = tuple(sorted(target_tensor_catalog, key=lambda t: t.tensor_id))
    else:
        target_catalog = tuple(target_placement.tensors)
    return _trusted_logical_plan(
        resource_id=resource_id,
        revision=revision,
        source_placement=source_placement,
        target_placement=target_placement,
        source_tensors=source_catalog,
        target_tensors=target_catalog,
        operations=tuple(operations),
        source_manifest=source_manifest,
        planning_limits=planning_limits,
        source_executors=source_executors,
        target_executors=target_executors,
    )

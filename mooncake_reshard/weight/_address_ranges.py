"""Runtime address-range validation (spec §11.8).

Within one address space ``(instance_id, worker_id, device)`` the views
``[address, address + nbytes)`` may overlap only as an exact declared alias, and the
allocations ``[storage_address, storage_address + storage_nbytes)`` may overlap only
when identical. The sweep sorts once and keeps an expiry heap of active views.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import Any

from .. import _native
from ..contracts.fragments import RuntimeBindingFragment
from .types import PlacementFragment, TensorDescriptor

__all__ = ["RuntimeView", "validate_runtime_address_ranges"]

#: (instance_id, runtime fragment, its placement fragment, the placement tensor)
RuntimeView = tuple[str, RuntimeBindingFragment, PlacementFragment, TensorDescriptor]


def _descriptor_shape(tensor: TensorDescriptor) -> tuple[Any, ...]:
    return (
        tensor.global_shape,
        tensor.dtype,
        tensor.itemsize,
        tensor.shard_dims,
        tensor.parallel_axes,
        tensor.layer_id,
        tensor.expert_id,
        tensor.layout_fingerprint,
    )


def _exact_alias(first: RuntimeView, second: RuntimeView) -> bool:
    _, runtime_a, logical_a, tensor_a = first
    _, runtime_b, logical_b, tensor_b = second
    if runtime_a.address != runtime_b.address or runtime_a.nbytes != runtime_b.nbytes:
        return False
    aliases = logical_a.aliases
    if len(aliases) < 2 or aliases != logical_b.aliases:
        return False
    if logical_a.tensor_id not in aliases or logical_b.tensor_id not in aliases:
        return False
    if (
        logical_a.global_offset != logical_b.global_offset
        or logical_a.local_shape != logical_b.local_shape
    ):
        return False
    return _descriptor_shape(tensor_a) == _descriptor_shape(tensor_b)


def validate_runtime_address_ranges(views: Iterable[RuntimeView]) -> None:
    """Reject overlapping views (unless exact declared aliases) and partially
    overlapping allocations, per address space."""
    if type(views) is list:
        if len(views) < 2:
            return  # no pair to compare
        if _native.address_ranges_clear(views, RuntimeBindingFragment):
            return  # no view overlaps another, allocations identical or disjoint: nothing to raise
    spaces: dict[tuple[str, str, str], list[RuntimeView]] = {}
    for view in views:
        runtime = view[1]
        key = (view[0], runtime.worker_id, runtime.device)
        bucket = spaces.get(key)
        if bucket is None:
            spaces[key] = [view]
        else:
            bucket.append(view)
    for space, members in spaces.items():
        if len(members) > 1:
            _check_views(space, members)
            _check_allocations(space, members)


def _check_views(space: tuple[str, str, str], members: list[RuntimeView]) -> None:
    ordered = sorted(members, key=lambda view: (view[1].address, view[1].nbytes))
    active: list[tuple[int, int, RuntimeView]] = []
    for order, view in enumerate(ordered):
        runtime = view[1]
        start = runtime.address
        while active and active[0][0] <= start:
            heapq.heappop(active)
        for _, _, other in sorted(active, key=lambda item: item[1]):
            if not _exact_alias(other, view):
                raise ValueError(
                    "runtime binding address ranges overlap: "
                    f"{other[1].fragment_id} and {runtime.fragment_id} in {space}"
                )
        heapq.heappush(active, (start + runtime.nbytes, order, view))


def _check_allocations(space: tuple[str, str, str], members: list[RuntimeView]) -> None:
    ordered = sorted(
        members, key=lambda view: (view[1].storage_address, view[1].storage_nbytes)
    )
    reach_end = -1
    reach_start = -1
    reach_id = ""
    for view in ordered:
        runtime = view[1]
        start = runtime.storage_address
        end = start + runtime.storage_nbytes
        if start == reach_start and end == reach_end:
            continue
        if start < reach_end:
            raise ValueError(
                "runtime binding storage allocation ranges overlap: "
                f"{reach_id} and {runtime.fragment_id} in {space}"
            )
        reach_start, reach_end, reach_id = start, end, runtime.fragment_id

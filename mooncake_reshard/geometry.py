"""Resource-neutral N-D box functions (spec §11.3).

Boxes are ``(offset, shape)`` pairs with half-open extents. Overlap and exact
cover are decided by the C kernels of ``mooncake.reshard._native``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from . import _native

__all__ = [
    "LogicalBox",
    "OverlapRegion",
    "box_contains",
    "boxes_exactly_cover",
    "boxes_overlap",
    "regions_exactly_cover",
]


class LogicalBox(Protocol):
    """Anything with a ``global_offset`` and a ``local_shape``."""

    @property
    def global_offset(self) -> tuple[int, ...]:
        """Box origin."""
        ...

    @property
    def local_shape(self) -> tuple[int, ...]:
        """Box extents."""
        ...


class OverlapRegion(Protocol):
    """Anything with an ``overlap_offset`` and an ``overlap_shape``."""

    @property
    def overlap_offset(self) -> tuple[int, ...]:
        """Region origin."""
        ...

    @property
    def overlap_shape(self) -> tuple[int, ...]:
        """Region extents."""
        ...


def box_contains(
    outer_offset: Sequence[int],
    outer_shape: Sequence[int],
    inner_offset: Sequence[int],
    inner_shape: Sequence[int],
) -> bool:
    """True when the inner box lies inside the outer box on every dimension."""
    if not (len(outer_offset) == len(outer_shape) == len(inner_offset) == len(inner_shape)):
        raise ValueError("zip() arguments have different lengths")
    for outer_begin, outer_extent, inner_begin, inner_extent in zip(
        outer_offset, outer_shape, inner_offset, inner_shape
    ):
        if inner_begin < outer_begin or inner_begin + inner_extent > outer_begin + outer_extent:
            return False
    return True


def boxes_overlap(boxes: Sequence[tuple[Sequence[int], Sequence[int]]]) -> bool:
    """True if two of the ``(offset, shape)`` boxes intersect on every dimension.

    Touching boxes do not overlap; fewer than two boxes never overlap. The
    general 3-D-and-up sweep fails closed with ``ValueError`` once its pairwise
    comparison budget (1,000,000) is exhausted.
    """
    items = list(boxes)
    if len(items) < 2:
        return False
    return _native.boxes_overlap([box[0] for box in items], [box[1] for box in items])


def boxes_exactly_cover(
    container_offset: Sequence[int],
    container_shape: Sequence[int],
    boxes: Sequence[tuple[Sequence[int], Sequence[int]]],
) -> bool:
    """True only if the boxes are non-empty, inside the container, sum to its volume,
    and do not overlap."""
    items = list(boxes)
    return _native.boxes_exactly_cover(
        container_offset,
        container_shape,
        [box[0] for box in items],
        [box[1] for box in items],
    )


def regions_exactly_cover(target: LogicalBox, regions: Sequence[OverlapRegion]) -> bool:
    """:func:`boxes_exactly_cover` of the target's box and the regions' overlap boxes."""
    return _native.boxes_exactly_cover(
        target.global_offset,
        target.local_shape,
        [region.overlap_offset for region in regions],
        [region.overlap_shape for region in regions],
    )

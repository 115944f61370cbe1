"""Region geometry (spec §11.7) and the bridge to the C overlap kernel (spec §11.1 steps 5-9).

``canonical_region_geometry`` re-derives the strided description of one overlap; it is what a
user-built :class:`TransferRegion` is checked against. ``plan_overlap_regions`` packs fragment
boxes into flat arrays, runs the C kernel once (overlap enumeration, exact cover, region
geometry and the planning limits) and maps its fail-closed codes to the contract's messages.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any, Optional

from ... import _native

__all__ = [
    "RegionRecord",
    "canonical_region_geometry",
    "exact_cover_failures",
    "plan_overlap_regions",
    "plan_region_objects",
    "row_major_strides",
]

# (source index, target index, overlap_offset, overlap_shape, source_base_offset,
#  target_base_offset, inner_bytes, outer_loop_counts, source_strides, target_strides,
#  segment_count)
RegionRecord = tuple[
    int, int, tuple[int, ...], tuple[int, ...], int, int, int,
    tuple[int, ...], tuple[int, ...], tuple[int, ...], int,
]

_I64_MAX = (1 << 63) - 1
_U64_MAX = (1 << 64) - 1

# kernel status codes (csrc/overlap.c)
_OV_REGIONS_LIMIT = 2
_OV_NOT_COVERED = 3
_OV_ITEMSIZE = 4
_OV_SEG_REGION = 5
_OV_SEG_TOTAL = 6
_OV_BUDGET = 7
_OV_OVERFLOW = 8


def row_major_strides(shape: Sequence[int], itemsize: int) -> tuple[int, ...]:
    """Row-major byte strides of a contiguous array of ``shape`` (last dimension ``itemsize``)."""
    strides = [0] * len(shape)
    acc = itemsize
    for d in range(len(shape) - 1, -1, -1):
        strides[d] = acc
        acc *= shape[d]
    return tuple(strides)


def canonical_region_geometry(
    source_offset: Sequence[int],
    source_shape: Sequence[int],
    target_offset: Sequence[int],
    target_shape: Sequence[int],
    overlap_offset: Sequence[int],
    overlap_shape: Sequence[int],
    itemsize: int,
) -> tuple[int, int, int, tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Derive ``(source_base, target_base, inner_bytes, outer_counts, source_strides,
    target_strides)`` of one overlap as spec §11.7 defines them."""
    ndim = len(overlap_shape)
    s_strides = row_major_strides(source_shape, itemsize)
    t_strides = row_major_strides(target_shape, itemsize)
    source_base = 0
    target_base = 0
    for d in range(ndim):
        source_base += (overlap_offset[d] - source_offset[d]) * s_strides[d]
        target_base += (overlap_offset[d] - target_offset[d]) * t_strides[d]
    inner = overlap_shape[-1] * itemsize
    suffix = ndim - 1
    for d in range(ndim - 2, -1, -1):
        if s_strides[d] == inner and t_strides[d] == inner:
            inner *= overlap_shape[d]
            suffix = d
        else:
            break
    return (
        source_base,
        target_base,
        inner,
        tuple(overlap_shape[:suffix]),
        s_strides[:suffix],
        t_strides[:suffix],
    )


def _pack_i64(values: Sequence[int], what: str) -> bytes:
    try:
        return array("q", values).tobytes()
    except OverflowError:
        raise ValueError(f"logical planner {what} must fit in a signed 64-bit integer") from None


def _pack_u64_or_zero(values: Sequence[int]) -> bytes:
    # A byte size outside u64 can never match a descriptor: 0 marks it as inconsistent.
    return array("Q", [v if 0 < v <= _U64_MAX else 0 for v in values]).tobytes()


def _limit(value: int) -> int:
    return value if value <= _I64_MAX else _I64_MAX + 1


class FragmentBoxes:
    """Flat arrays of one side's fragment boxes for the kernel."""

    __slots__ = ("tensor", "offsets", "shapes", "nbytes")

    def __init__(self) -> None:
        self.tensor: list[int] = []
        self.offsets: list[int] = []
        self.shapes: list[int] = []
        self.nbytes: list[int] = []

    def add(self, tensor_index: int, offset: Sequence[int], shape: Sequence[int], nbytes: int) -> None:
        self.tensor.append(tensor_index)
        self.offsets.extend(offset)
        self.shapes.extend(shape)
        self.nbytes.append(nbytes)


def _kernel_arguments(
    tensor_ndim: Sequence[int],
    tensor_itemsize: Sequence[int],
    source: FragmentBoxes,
    source_order: Sequence[int],
    cover_start: Sequence[int],
    cover_members: Sequence[int],
    target: FragmentBoxes,
    target_cover: Sequence[int],
    nprocess: int,
    max_transfer_regions: int,
    max_segments_per_region: int,
    max_total_lowered_segments: int,
    target_packed: Optional[tuple[bytes, bytes, bytes, bytes, bytes]],
    source_packed: Optional[tuple[bytes, bytes, bytes, bytes, bytes, bytes, bytes]],
    tensor_ndim_packed: Optional[bytes],
) -> tuple[Any, ...]:
    """The 18 packed arguments of ``_native.plan_overlaps`` (see ``plan_overlap_regions``)."""
    if target_packed is None:
        t_tensor = _pack_i64(target.tensor, "tensor indices")
        t_offsets = _pack_i64(target.offsets, "coordinates")
        t_shapes = _pack_i64(target.shapes, "coordinates")
        t_nbytes = _pack_u64_or_zero(target.nbytes)
        t_cover = _pack_i64(target_cover, "cover indices")
    else:
        t_tensor, t_cover, t_offsets, t_shapes, t_nbytes = target_packed
    # Packed in the same order as always (targets, ranks, itemsizes, sources): the first
    # value out of range reports first.
    ndim_packed = _pack_i64(tensor_ndim, "tensor ranks") if tensor_ndim_packed is None else tensor_ndim_packed
    itemsize_packed = _pack_i64(tensor_itemsize, "itemsizes")
    if source_packed is None:
        source_packed = (
            _pack_i64(source.tensor, "tensor indices"),
            _pack_i64(source.offsets, "coordinates"),
            _pack_i64(source.shapes, "coordinates"),
            _pack_u64_or_zero(source.nbytes),
            _pack_i64(source_order, "fragment order"),
            _pack_i64(cover_start, "cover indices"),
            _pack_i64(cover_members, "cover indices"),
        )
    return (
        ndim_packed,
        itemsize_packed,
        *source_packed,
        t_tensor,
        t_offsets,
        t_shapes,
        t_nbytes,
        t_cover,
        nprocess,
        _limit(max_transfer_regions),
        _limit(max_segments_per_region),
        _limit(max_total_lowered_segments),
    )


def _kernel_error(
    result: tuple[int, int, int, int],
    max_transfer_regions: int,
    max_segments_per_region: int,
    max_total_lowered_segments: int,
    target_fragment_ids: Sequence[str],
) -> ValueError:
    """The contract's error for a fail-closed kernel status."""
    code, index, a, _ = result
    if code == _OV_REGIONS_LIMIT:
        return ValueError(f"logical transfer plan exceeds max_transfer_regions: {max_transfer_regions}")
    if code == _OV_NOT_COVERED:
        return ValueError(f"target fragment is not fully covered: {target_fragment_ids[index]}")
    if code == _OV_ITEMSIZE:
        return ValueError("transfer region fragment itemsize differs from descriptor")
    if code == _OV_SEG_REGION:
        return ValueError(f"logical transfer region exceeds max_segments_per_region: {a} > {max_segments_per_region}")
    if code == _OV_SEG_TOTAL:
        return ValueError(
            f"logical transfer plan exceeds max_total_lowered_segments: {a} > {max_total_lowered_segments}"
        )
    if code == _OV_BUDGET:
        return ValueError("high-dimensional overlap budget exceeded before validation")
    if code == _OV_OVERFLOW:
        return ValueError("transfer region byte offsets must fit in an unsigned 64-bit integer")
    return ValueError(f"logical planner kernel failed with status {code}")  # pragma: no cover


def plan_overlap_regions(
    *,
    tensor_ndim: Sequence[int],
    tensor_itemsize: Sequence[int],
    source: FragmentBoxes,
    source_order: Sequence[int],
    cover_start: Sequence[int],
    cover_members: Sequence[int],
    target: FragmentBoxes,
    target_cover: Sequence[int],
    nprocess: int,
    max_transfer_regions: int,
    max_segments_per_region: int,
    max_total_lowered_segments: int,
    target_fragment_ids: Sequence[str],
    target_packed: Optional[tuple[bytes, bytes, bytes, bytes, bytes]] = None,
    source_packed: Optional[tuple[bytes, bytes, bytes, bytes, bytes, bytes, bytes]] = None,
    tensor_ndim_packed: Optional[bytes] = None,
) -> list[Any]:
    """Run the C kernel over targets ``0..nprocess`` (already in fragment-id order).

    ``target_packed`` (from ``_native.pack_targets``: tensor, cover, offsets, shapes and nbytes
    as native int64 / uint64 bytes) replaces ``target`` and ``target_cover`` when given;
    ``source_packed`` (tensor, offsets, shapes, nbytes, order, cover_start, cover_members as
    native int64 / uint64 bytes, e.g. from ``_native.select_sources``) replaces ``source``,
    ``source_order``, ``cover_start`` and ``cover_members``; ``tensor_ndim_packed`` is
    ``tensor_ndim`` already packed. The kernel range-checks every packed value again.
    Returns the region records in final operation order, or raises the contract's
    ``ValueError`` for the first fail-closed rule hit (spec §11.1 steps 5.5-9)."""
    result = _native.plan_overlaps(
        *_kernel_arguments(
            tensor_ndim, tensor_itemsize, source, source_order, cover_start, cover_members, target,
            target_cover, nprocess, max_transfer_regions, max_segments_per_region,
            max_total_lowered_segments, target_packed, source_packed, tensor_ndim_packed,
        )
    )
    if isinstance(result, list):
        return result
    raise _kernel_error(
        result, max_transfer_regions, max_segments_per_region, max_total_lowered_segments, target_fragment_ids
    )


def plan_region_objects(
    region_type: type,
    sources: list[Any],
    targets: list[Any],
    target_tensor_ids: Optional[list[Any]] = None,
    *,
    tensor_ndim: Sequence[int],
    tensor_itemsize: Sequence[int],
    source: FragmentBoxes,
    source_order: Sequence[int],
    cover_start: Sequence[int],
    cover_members: Sequence[int],
    target: FragmentBoxes,
    target_cover: Sequence[int],
    nprocess: int,
    max_transfer_regions: int,
    max_segments_per_region: int,
    max_total_lowered_segments: int,
    target_fragment_ids: Sequence[str],
    target_packed: Optional[tuple[bytes, bytes, bytes, bytes, bytes]] = None,
    source_packed: Optional[tuple[bytes, bytes, bytes, bytes, bytes, bytes, bytes]] = None,
    tensor_ndim_packed: Optional[bytes] = None,
) -> tuple[tuple[Any, ...], Sequence[int], Sequence[int]]:
    """``plan_overlap_regions`` followed by ``_native.build_regions(region_type, records,
    sources, targets)`` in one C call (``_native.plan_regions``: no intermediate records).
    ``target_tensor_ids`` (parallel to ``targets``), when given, are the targets' tensor ids
    already read by the caller.

    Returns ``(regions, used source indices, used target indices)`` (indices into ``sources``
    and ``targets``, increasing: a list, or ``range(n)`` when all n are used), or raises the same ``ValueError`` as ``plan_overlap_regions``."""
    result = _native.plan_regions(
        region_type,
        sources,
        targets,
        target_tensor_ids,
        *_kernel_arguments(
            tensor_ndim, tensor_itemsize, source, source_order, cover_start, cover_members, target,
            target_cover, nprocess, max_transfer_regions, max_segments_per_region,
            max_total_lowered_segments, target_packed, source_packed, tensor_ndim_packed,
        ),
    )
    if len(result) == 3:
        return result
    raise _kernel_error(
        result, max_transfer_regions, max_segments_per_region, max_total_lowered_segments, target_fragment_ids
    )


def exact_cover_failures(
    containers: Sequence[tuple[Sequence[int], Sequence[int]]],
    boxes: Sequence[Sequence[tuple[Sequence[int], Sequence[int]]]],
) -> Optional[int]:
    """Index of the first container not exactly covered by its boxes (spec §11.3
    ``boxes_exactly_cover``), or ``None`` when every container is covered.

    A box whose rank differs from its container's makes that container uncovered."""
    ndim: list[int] = []
    c_off: list[int] = []
    c_shape: list[int] = []
    starts: list[int] = [0]
    b_off: list[int] = []
    b_shape: list[int] = []
    total = 0
    for index, ((offset, shape), members) in enumerate(zip(containers, boxes)):
        rank = len(offset)
        if rank == 0 or len(shape) != rank:
            ranks_differ = True
        elif len(members) == 1:
            # The common single box, without a generator.
            ((box_offset, box_shape),) = members
            ranks_differ = len(box_offset) != rank or len(box_shape) != rank
        else:
            ranks_differ = any(len(o) != rank or len(s) != rank for o, s in members)
        if ranks_differ:
            # Ranks disagree, so this container cannot be covered; an earlier one may fail first.
            prior = exact_cover_failures(containers[:index], boxes[:index]) if index else None
            return index if prior is None else prior
        ndim.append(rank)
        c_off.extend(offset)
        c_shape.extend(shape)
        for o, s in members:
            b_off.extend(o)
            b_shape.extend(s)
        total += len(members)
        starts.append(total)
    first = _native.exact_cover_batch(
        _pack_i64(ndim, "ranks"),
        _pack_i64(c_off, "coordinates"),
        _pack_i64(c_shape, "coordinates"),
        _pack_i64(starts, "box indices"),
        _pack_i64(b_off, "coordinates"),
        _pack_i64(b_shape, "coordinates"),
    )
    return None if first < 0 else int(first)


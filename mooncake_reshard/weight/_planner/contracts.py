"""Logical planner value types (spec §8) and the operation-view builder (spec §11.9).

``TransferRegion`` is generic over its source and target fragment types; the public operation
names are subscripted aliases of it. ``LogicalTransferPlan`` revalidates itself on every
construction, ``dataclasses.replace`` and unpickling (spec §8.6, §11.6, §13).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Optional, TypeVar, Union

from ..._memo_proof import memo_proved
from ..._layout import layout_builder, layout_dataclass, layout_state_reader, value_base
from ...contracts.ids import ParticipantId, PlacementFragmentId, PlacementId, ResourceId, RevisionId, TensorId
from ..._shared_keys import share_field_keys
from ..placement import WeightPlacementManifest
from ..storage_manifest import (
    StoredFragmentSnapshot,
    StoredManifestIdentity,
    StoredWeightManifest,
    validate_weight_manifest_snapshot,
)
from ..types import ParallelRank, PlacementFragment, TensorDescriptor
from .fragments import BoundWeightFragment
from .geometry import canonical_region_geometry

__all__ = [
    "BoundWeightFragment",
    "ExecutableTransferOperation",
    "ExecutableTransferRegion",
    "LiveTransferOperation",
    "LogicalTransferOperation",
    "LogicalTransferPlan",
    "LogicalTransferRegion",
    "OperationViews",
    "PipelineRouteGroup",
    "PlacementExecutorPlan",
    "PlanningLimits",
    "RuntimeTensorOwner",
    "StoredLoadOperation",
    "TransferRegion",
    "build_operation_views",
]

RuntimeTensorOwner = tuple[tuple[str, int], ...]
"""Owner coordinates of a fragment, e.g. ``(("ep", 3),)`` (spec §8.1, §11.2)."""

SourceFragmentT = TypeVar("SourceFragmentT")
TargetFragmentT = TypeVar("TargetFragmentT")

_U64_MAX = (1 << 64) - 1


def _is_int(value: object) -> bool:
    return type(value) is int


def _int_tuple(value: object, name: str) -> tuple[int, ...]:
    if isinstance(value, (str, bytes, bytearray)):
        raise ValueError(f"transfer region {name} must contain integers")
    try:
        items = tuple(value)  # type: ignore[call-overload]
    except TypeError:
        raise ValueError(f"transfer region {name} must contain integers") from None
    for item in items:
        if type(item) is not int:
            raise ValueError(f"transfer region {name} must contain integers")
    return items


def _fragment_ints(fragment: Any, name: str) -> tuple[int, ...]:
    """A fragment's box field as a tuple of exact ints (the fragment's own int-tuple rule,
    spec §1.3 "{name} must contain integers": a fragment restored from a forged dict never
    ran it; fuzz finding F2)."""
    try:
        items = tuple(getattr(fragment, name))
    except (AttributeError, TypeError):
        raise ValueError(f"{name} must contain integers") from None
    for item in items:
        if type(item) is not int:
            raise ValueError(f"{name} must contain integers")
    return items


def _prod(values: tuple[int, ...]) -> int:
    result = 1
    for v in values:
        result *= v
    return result


@dataclass(frozen=True)
class PipelineRouteGroup:
    """Operations sharing one (source PP, source stage, target PP, target stage) route."""

    source_pp: Optional[int]
    source_pipeline_stage_id: Optional[int]
    target_pp: int
    target_pipeline_stage_id: Optional[int]
    operation_indices: tuple[int, ...]

    def __post_init__(self) -> None:
        if self.source_pp is not None and (not _is_int(self.source_pp) or self.source_pp < 0):
            raise ValueError("pipeline route source_pp must be non-negative")
        if not _is_int(self.target_pp) or self.target_pp < 0:
            raise ValueError("pipeline route target_pp must be non-negative")
        for name in ("source_pipeline_stage_id", "target_pipeline_stage_id"):
            value = getattr(self, name)
            if value is not None and (not _is_int(value) or value < 0):
                raise ValueError(f"pipeline route {name} must be non-negative")
        try:
            indices = tuple(self.operation_indices)
        except TypeError:
            raise ValueError("pipeline route indices must be non-negative integers") from None
        if any(not _is_int(i) or i < 0 for i in indices):
            raise ValueError("pipeline route indices must be non-negative integers")
        if len(set(indices)) != len(indices):
            raise ValueError("pipeline route has duplicate operation indices")
        object.__setattr__(self, "operation_indices", indices)


@dataclass(frozen=True)
class PlanningLimits:
    """Fail-closed budgets for planning (spec §8.3)."""

    max_transfer_regions: int = 1_000_000
    max_segments_per_region: int = 1_000_000
    max_total_lowered_segments: int = 10_000_000

    def __post_init__(self) -> None:
        for name in ("max_transfer_regions", "max_segments_per_region", "max_total_lowered_segments"):
            value = getattr(self, name)
            if not _is_int(value) or value <= 0:
                raise ValueError(f"planning limit {name} must be a positive integer")


# The field names in field order (``layout_dataclass`` checks them against the annotations; the
# C readers and builders hold their own copies, checked against the layout per call).
_REGION_LAYOUT = tuple(
    "tensor_id source target overlap_offset overlap_shape source_base_offset target_base_offset inner_bytes"
    " outer_loop_counts source_strides target_strides".split()
)

if TYPE_CHECKING:  # type checkers see a frozen generic dataclass (layout_dataclass is a dataclass transform)
    _RegionBase = object
else:
    _RegionBase = value_base("TransferRegion", _REGION_LAYOUT)


@layout_dataclass
class TransferRegion(_RegionBase, Generic[SourceFragmentT, TargetFragmentT]):
    """One source/target N-D overlap as a strided copy (spec §8.4).

    A contiguous inner run of ``inner_bytes`` repeated by nested outer loops
    (``outer_loop_counts``, outermost first) with per-side byte strides; base offsets are bytes
    from each fragment's start. The fields must equal the canonical geometry of spec §11.7.

    Stored in a C-owned layout (``mooncake_reshard/_layout.py``): the 11 fields live in the
    instance itself, in field order (no instance ``__dict__``); C readers load them directly
    (``csrc/layout.h``). The pickle state is the dict-backed dataclass's ``{field: value}``, so
    pickles are byte-equal to and interchangeable with the dict-backed class's.
    """

    __slots__ = ("__weakref__",)

    tensor_id: TensorId
    source: SourceFragmentT
    target: TargetFragmentT
    overlap_offset: tuple[int, ...]
    overlap_shape: tuple[int, ...]
    source_base_offset: int
    target_base_offset: int
    inner_bytes: int
    outer_loop_counts: tuple[int, ...]
    source_strides: tuple[int, ...]
    target_strides: tuple[int, ...]

    def __post_init__(self) -> None:
        # (getattr: revalidation re-runs this on regions restored from a forged field dict,
        # which may lack a field; an absent field is refused like a None one. Fuzz finding F2.)
        overlap_offset = _int_tuple(getattr(self, "overlap_offset", None), "overlap_offset")
        overlap_shape = _int_tuple(getattr(self, "overlap_shape", None), "overlap_shape")
        outer = _int_tuple(getattr(self, "outer_loop_counts", None), "outer_loop_counts")
        s_strides = _int_tuple(getattr(self, "source_strides", None), "source_strides")
        t_strides = _int_tuple(getattr(self, "target_strides", None), "target_strides")
        setter = object.__setattr__
        setter(self, "overlap_offset", overlap_offset)
        setter(self, "overlap_shape", overlap_shape)
        setter(self, "outer_loop_counts", outer)
        setter(self, "source_strides", s_strides)
        setter(self, "target_strides", t_strides)
        if not getattr(self, "tensor_id", None):
            raise ValueError("transfer region tensor_id must not be empty")
        source: Any = getattr(self, "source", None)
        target: Any = getattr(self, "target", None)
        if (
            getattr(source, "tensor_id", None) != self.tensor_id
            or getattr(target, "tensor_id", None) != self.tensor_id
        ):
            raise ValueError("transfer region tensor mismatch")
        s_offset = _fragment_ints(source, "global_offset")
        s_shape = _fragment_ints(source, "local_shape")
        t_offset = _fragment_ints(target, "global_offset")
        t_shape = _fragment_ints(target, "local_shape")
        ndim = len(overlap_offset)
        if ndim == 0 or len(overlap_shape) != ndim or len(s_offset) != ndim or len(t_offset) != ndim:
            raise ValueError("transfer region logical rank mismatch")
        if any(v < 0 for v in overlap_offset) or any(v <= 0 for v in overlap_shape):
            raise ValueError("transfer region logical box is invalid")
        if not _box_inside(s_offset, s_shape, overlap_offset, overlap_shape):
            raise ValueError("transfer region exceeds source logical fragment")
        if not _box_inside(t_offset, t_shape, overlap_offset, overlap_shape):
            raise ValueError("transfer region exceeds target logical fragment")
        for name in ("source_base_offset", "target_base_offset", "inner_bytes"):
            if not _is_int(getattr(self, name, None)):
                raise ValueError(f"transfer region {name} must be an integer")
        if self.source_base_offset < 0 or self.target_base_offset < 0:
            raise ValueError("transfer region base offsets must be non-negative")
        if self.inner_bytes <= 0:
            raise ValueError("transfer region inner_bytes must be positive")
        if not (len(outer) == len(s_strides) == len(t_strides)):
            raise ValueError("transfer region outer loop rank mismatch")
        if any(c <= 0 for c in outer):
            raise ValueError("transfer region outer loop counts must be positive")
        if any(s < 0 for s in s_strides) or any(s < 0 for s in t_strides):
            raise ValueError("transfer region strides must be non-negative")
        s_itemsize = _fragment_itemsize(getattr(source, "nbytes", None), s_shape)
        t_itemsize = _fragment_itemsize(getattr(target, "nbytes", None), t_shape)
        if s_itemsize != t_itemsize:
            raise ValueError("transfer region source and target itemsize differ")
        itemsize = s_itemsize
        geometry = canonical_region_geometry(
            s_offset, s_shape, t_offset, t_shape, overlap_offset, overlap_shape, itemsize
        )
        if self.inner_bytes * _prod(outer) != _prod(overlap_shape) * itemsize:
            raise ValueError("transfer region loop geometry does not match overlap")
        if self.source_base_offset != geometry[0]:
            raise ValueError("transfer region source base offset is inconsistent")
        if self.target_base_offset != geometry[1]:
            raise ValueError("transfer region target base offset is inconsistent")
        if (self.inner_bytes, outer, s_strides, t_strides) != geometry[2:]:
            raise ValueError("transfer region loop geometry is not canonical")
        for side, strides in (("source", s_strides), ("target", t_strides)):
            span = self.inner_bytes
            for count, stride in zip(reversed(outer), reversed(strides)):
                if count > 1 and stride < span:
                    raise ValueError(f"transfer region {side} strides overlap")
                span += (count - 1) * stride
        self.validate_bounds()

    @property
    def segment_count(self) -> int:
        """Number of contiguous ``inner_bytes`` runs (1 with no outer loops)."""
        return _prod(self.outer_loop_counts)

    @property
    def total_bytes(self) -> int:
        """Bytes copied by the whole region."""
        return self.inner_bytes * self.segment_count

    @property
    def source_offset(self) -> int:
        """The source base offset in bytes."""
        return self.source_base_offset

    @property
    def target_offset(self) -> int:
        """The target base offset in bytes."""
        return self.target_base_offset

    @property
    def nbytes(self) -> int:
        """Bytes of one segment (``inner_bytes``), not the region total."""
        return self.inner_bytes

    @property
    def repeat(self) -> int:
        """Number of segments (``segment_count``)."""
        return self.segment_count

    @property
    def source_stride(self) -> int:
        """The single source stride (0 without outer loops)."""
        strides: tuple[int, ...] = self.source_strides
        if len(strides) > 1:
            raise ValueError("N-D transfer region has multiple source strides")
        for stride in strides:
            return stride
        return 0

    @property
    def target_stride(self) -> int:
        """The single target stride (0 without outer loops)."""
        strides: tuple[int, ...] = self.target_strides
        if len(strides) > 1:
            raise ValueError("N-D transfer region has multiple target strides")
        for stride in strides:
            return stride
        return 0

    def validate_bounds(self) -> None:
        """Check that both sides' byte extents stay inside their fragments."""
        outer = self.outer_loop_counts
        end = self.source_base_offset + self.inner_bytes
        for count, stride in zip(outer, self.source_strides):
            end += (count - 1) * stride
        if end > self.source.nbytes:  # type: ignore[attr-defined]
            raise ValueError("transfer region exceeds source fragment")
        end = self.target_base_offset + self.inner_bytes
        for count, stride in zip(outer, self.target_strides):
            end += (count - 1) * stride
        if end > self.target.nbytes:  # type: ignore[attr-defined]
            raise ValueError("transfer region exceeds target fragment")

    def iter_segments(self, *, max_segments: int) -> Iterator[tuple[int, int, int]]:
        """Yield ``(source_offset, target_offset, inner_bytes)`` per segment, in row-major
        mixed-radix order (last outer loop fastest)."""
        if not _is_int(max_segments) or max_segments <= 0:
            raise ValueError("max_segments must be a positive integer")
        count = self.segment_count
        if count > max_segments:
            raise ValueError(f"transfer region exceeds max_segments: {count} > {max_segments}")
        outer = self.outer_loop_counts
        inner = self.inner_bytes
        if not outer:
            yield (self.source_base_offset, self.target_base_offset, inner)
            return
        s_strides = self.source_strides
        t_strides = self.target_strides
        ndim = len(outer)
        index = [0] * ndim
        s_pos = self.source_base_offset
        t_pos = self.target_base_offset
        while True:
            yield (s_pos, t_pos, inner)
            d = ndim - 1
            while d >= 0:
                index[d] += 1
                s_pos += s_strides[d]
                t_pos += t_strides[d]
                if index[d] < outer[d]:
                    break
                s_pos -= s_strides[d] * outer[d]
                t_pos -= t_strides[d] * outer[d]
                index[d] = 0
                d -= 1
            if d < 0:
                return


# Builds an exact TransferRegion from its 11 field values in field order (C, no ``__init__``:
# for values whose invariants the caller has proved).
_build_region = layout_builder(TransferRegion)
# ``{field: value}`` of a region's set fields in field order (what a dict-backed region's
# ``__dict__`` held: its pickle state), read through the layout's own member descriptors.
_region_fields_state = layout_state_reader(TransferRegion)


def _box_inside(
    outer_offset: tuple[int, ...], outer_shape: tuple[int, ...], offset: tuple[int, ...], shape: tuple[int, ...]
) -> bool:
    if len(outer_shape) != len(offset):
        return False
    for ob, oe, b, e in zip(outer_offset, outer_shape, offset, shape):
        if b < ob or b + e > ob + oe:
            return False
    return True


def _fragment_itemsize(nbytes: object, shape: tuple[int, ...]) -> int:
    volume = _prod(shape)
    if type(nbytes) is not int or volume <= 0 or nbytes % volume:
        raise ValueError("transfer region fragment byte size is invalid")
    itemsize = nbytes // volume
    if itemsize <= 0:
        raise ValueError("transfer region fragment itemsize is invalid")
    return itemsize


_new_object = object.__new__
_set_attr = object.__setattr__


def _trusted_region(
    tensor_id: str,
    source: Any,
    target: Any,
    overlap_offset: tuple[int, ...],
    overlap_shape: tuple[int, ...],
    source_base_offset: int,
    target_base_offset: int,
    inner_bytes: int,
    outer_loop_counts: tuple[int, ...],
    source_strides: tuple[int, ...],
    target_strides: tuple[int, ...],
) -> TransferRegion[Any, Any]:
    """Build a region whose invariants the planner kernel already proved (no re-validation)."""
    region: TransferRegion[Any, Any] = _build_region(
        tensor_id,
        source,
        target,
        overlap_offset,
        overlap_shape,
        source_base_offset,
        target_base_offset,
        inner_bytes,
        outer_loop_counts,
        source_strides,
        target_strides,
    )
    return region


# The validation module (it imports this one: bound on first use). A function-level
# ``from .validation import f`` runs the import machinery on every call (~1 us, one per bind
# call through validate_source_manifest_snapshot); the module's attribute is still read per
# call, so a replaced function is seen as before.
_VALIDATION_MODULE: Any = None


def _validation() -> Any:
    """The ``validation`` module of this package."""
    global _VALIDATION_MODULE
    module = _VALIDATION_MODULE
    if module is None:
        from . import validation as module

        _VALIDATION_MODULE = module
    return module


_LogicalSourceFragment = Union[PlacementFragment, StoredFragmentSnapshot]
_LogicalTargetFragment = PlacementFragment
_ExecutableSourceFragment = Union[BoundWeightFragment, StoredFragmentSnapshot]
_ExecutableTargetFragment = BoundWeightFragment

LogicalTransferOperation = TransferRegion[Union[PlacementFragment, StoredFragmentSnapshot], PlacementFragment]
ExecutableTransferOperation = TransferRegion[Union[BoundWeightFragment, StoredFragmentSnapshot], BoundWeightFragment]
LiveTransferOperation = TransferRegion[BoundWeightFragment, BoundWeightFragment]
StoredLoadOperation = TransferRegion[StoredFragmentSnapshot, BoundWeightFragment]
LogicalTransferRegion = LogicalTransferOperation
ExecutableTransferRegion = ExecutableTransferOperation


@dataclass(frozen=True)
class PlacementExecutorPlan:
    """The logical projection of one participant on one side of a plan (spec §8.5)."""

    placement_id: PlacementId
    participant_id: ParticipantId
    rank: ParallelRank
    placement_fragment_ids: tuple[PlacementFragmentId, ...]

    def __post_init__(self) -> None:
        ids = tuple(self.placement_fragment_ids)
        object.__setattr__(self, "placement_fragment_ids", ids)
        if not self.placement_id or not self.participant_id or not all(ids):
            raise ValueError("placement executor identifiers must not be empty")
        if len(set(ids)) != len(ids):
            raise ValueError("placement executor has duplicate fragment IDs")


share_field_keys(PlacementExecutorPlan)  # CPython 3.10: dicts the C core fills stay key-sharing


# --- operation views (spec §11.9) --------------------------------------------------------------


def _rank_tuple(rank: Any) -> Any:
    # A plain tuple hashes in C; equal ranks give equal tuples (other values are kept as-is).
    if isinstance(rank, ParallelRank):
        return (rank.dp, rank.tp, rank.pp, rank.ep)
    return rank


def _executor_key(executor: Any) -> tuple[Any, ...]:
    if isinstance(executor, PlacementExecutorPlan):
        return (
            executor.placement_id,
            executor.participant_id,
            _rank_tuple(executor.rank),
            executor.placement_fragment_ids,
        )
    return (
        executor.instance_id,
        executor.placement_id,
        executor.participant_id,
        executor.placement_digest,
        executor.runtime_lease_id,
        executor.worker_id,
        _rank_tuple(executor.rank),
        executor.fragment_ids,
    )


def _trusted_route(route: tuple[Any, ...], indices: tuple[int, ...]) -> PipelineRouteGroup:
    """A route group from fragment coordinates the plan already validated."""
    group: PipelineRouteGroup = _new_object(PipelineRouteGroup)
    _set_attr(
        group,
        "__dict__",
        {
            "source_pp": route[0],
            "source_pipeline_stage_id": route[1],
            "target_pp": route[2],
            "target_pipeline_stage_id": route[3],
            "operation_indices": indices,
        },
    )
    return group


def _route_value(value: Optional[int]) -> int:
    return -1 if value is None else value


class OperationViews:
    """Per-executor operation indices and pipeline routes of one plan, derived once.

    ``_deferred`` builds the same views on first use from index tables a validation has
    already derived (plain values captured at validation time, nothing re-read later)."""

    __slots__ = ("_source", "_target", "_routes", "_pending")

    def __init__(
        self,
        source: dict[tuple[Any, ...], tuple[int, ...]],
        target: dict[tuple[Any, ...], tuple[int, ...]],
        routes: tuple[PipelineRouteGroup, ...],
    ) -> None:
        self._source = source
        self._target = target
        self._routes = routes
        self._pending: Optional[tuple[Any, Any, Any]] = None

    @classmethod
    def _deferred(
        cls,
        source: dict[tuple[Any, ...], list[int]],
        target: dict[tuple[Any, ...], list[int]],
        routes: dict[tuple[Any, ...], list[int]],
    ) -> OperationViews:
        """Views built on first use from executor key -> ascending indices (both sides) and
        route -> ascending indices; the caller hands over these tables (never mutated again)."""
        views: OperationViews = _new_object(cls)
        views._pending = (source, target, routes)
        return views

    def _materialise(self) -> None:
        pending = self._pending
        if pending is not None:
            source, target, routes = pending
            # Idempotent: concurrent first uses compute equal values.
            self._source = {k: tuple(v) for k, v in source.items()}
            self._target = {k: tuple(v) for k, v in target.items()}
            self._routes = _route_groups(routes)
            self._pending = None

    @property
    def pipeline_routes(self) -> tuple[PipelineRouteGroup, ...]:
        """Routes sorted by (source pp, source stage, target pp, target stage), None as -1."""
        if self._pending is not None:
            self._materialise()
        return self._routes

    def indices(self, executor: Any, side: str) -> tuple[int, ...]:
        """Ascending operation indices whose fragment on ``side`` belongs to ``executor``."""
        if self._pending is not None:
            self._materialise()
        table = self._source if side == "source" else self._target
        return table.get(_executor_key(executor), ())


def _side_index(
    executors: tuple[Any, ...],
) -> tuple[dict[Any, list[int]], dict[Any, list[int]], dict[tuple[Any, ...], list[int]]]:
    """Fragment-id -> bucket maps (logical and runtime ids) and key -> bucket for one side.

    Each executor's key is hashed once here; operations then find their bucket through their
    fragment id alone, so the cost stays linear however many fragments an executor owns."""
    logical: dict[Any, list[int]] = {}
    runtime: dict[Any, list[int]] = {}
    buckets: dict[tuple[Any, ...], list[int]] = {}
    for executor in executors:
        key = _executor_key(executor)
        if key in buckets:
            raise ValueError("transfer plan has duplicate executor projection key")
        bucket: list[int] = []
        buckets[key] = bucket
        if isinstance(executor, PlacementExecutorPlan):
            for fragment_id in executor.placement_fragment_ids:
                logical.setdefault(fragment_id, bucket)
        else:
            for fragment_id in executor.fragment_ids:
                runtime.setdefault(fragment_id, bucket)
    return logical, runtime, buckets


def _bucket_of(fragment: Any, logical: dict[Any, list[int]], runtime: dict[Any, list[int]]) -> Optional[list[int]]:
    if isinstance(fragment, PlacementFragment):
        return logical.get(fragment.placement_fragment_id)
    if isinstance(fragment, BoundWeightFragment):
        return runtime.get(fragment.fragment_id)
    return None


# ``_native.operation_views`` and the exact classes it reads (filled on first use: the C module
# and the fragment classes are imported late to keep this module's import order).
_VIEW_CLASSES: list[Any] = []


def _view_classes() -> list[Any]:
    from ... import _native
    from ...contracts.fragments import RuntimeBindingFragment

    _VIEW_CLASSES[:] = [
        _native.operation_views,
        TransferRegion,
        PlacementFragment,
        BoundWeightFragment,
        RuntimeBindingFragment,
        ParallelRank,
        StoredFragmentSnapshot,
    ]
    return _VIEW_CLASSES


def build_operation_views(
    operations: tuple[Any, ...],
    source_executors: tuple[Any, ...],
    target_executors: tuple[Any, ...],
) -> OperationViews:
    """Derive the operation views of a logical or bound plan (spec §11.9).

    Logical executors (``PlacementExecutorPlan``) own the placement fragments listed in
    ``placement_fragment_ids``; runtime executors (``ExecutorTransferPlan``) own the bound
    fragments whose runtime ``fragment_id`` is in ``fragment_ids``; stored sources belong to no
    executor. Raises "transfer plan has duplicate executor projection key" for a repeated key.
    """
    s_logical, s_runtime, s_buckets = _side_index(source_executors)
    t_logical, t_runtime, t_buckets = _side_index(target_executors)
    if type(operations) is tuple:
        # The loop below in one C call (exact classes only); None: not decided there, and the
        # buckets it may have filled in part are derived afresh for the loop.
        views_classes = _VIEW_CLASSES or _view_classes()
        decided = views_classes[0](operations, s_logical, s_runtime, t_logical, t_runtime, *views_classes[1:])
        if decided is not None:
            return OperationViews(
                {k: tuple(v) for k, v in s_buckets.items()},
                {k: tuple(v) for k, v in t_buckets.items()},
                _route_groups(decided),
            )
        s_logical, s_runtime, s_buckets = _side_index(source_executors)
        t_logical, t_runtime, t_buckets = _side_index(target_executors)
    routes: dict[tuple[Any, ...], list[int]] = {}
    # Source fragments are shared by many operations: their bucket and route half are derived
    # once per fragment object (by ``id``; the operations keep every fragment alive meanwhile).
    source_info: dict[int, tuple[Optional[list[int]], Optional[int], Optional[int]]] = {}
    for index, operation in enumerate(operations):
        source = operation.source
        target = operation.target
        info = source_info.get(id(source))
        if info is None:
            if isinstance(source, (PlacementFragment, BoundWeightFragment)):
                info = (_bucket_of(source, s_logical, s_runtime), source.rank.pp, source.pipeline_stage_id)
            else:
                info = (_bucket_of(source, s_logical, s_runtime), None, None)
            source_info[id(source)] = info
        bucket = info[0]
        if bucket is not None:
            bucket.append(index)
        if type(target) is BoundWeightFragment:
            placement = target.placement
            bucket = t_runtime.get(target.binding.fragment_id)
        elif type(target) is PlacementFragment:
            placement = target
            bucket = t_logical.get(target.placement_fragment_id)
        else:
            placement = target
            bucket = _bucket_of(target, t_logical, t_runtime)
        if bucket is not None:
            bucket.append(index)
        route = (info[1], info[2], placement.rank.pp, placement.pipeline_stage_id)
        bucket = routes.get(route)
        if bucket is None:
            routes[route] = [index]
        else:
            bucket.append(index)
    return OperationViews(
        {k: tuple(v) for k, v in s_buckets.items()},
        {k: tuple(v) for k, v in t_buckets.items()},
        _route_groups(routes),
    )


def _route_groups(routes: dict[tuple[Any, ...], list[int]]) -> tuple[PipelineRouteGroup, ...]:
    """The route groups of ``routes`` (route -> ascending operation indices), sorted by route
    with None as -1."""
    ordered = sorted(routes, key=lambda r: tuple(_route_value(v) for v in r))
    return tuple(_trusted_route(r, tuple(routes[r])) for r in ordered)


# --- the logical plan (spec §8.6) --------------------------------------------------------------


@dataclass(frozen=True)
class LogicalTransferPlan:
    """An address-free plan of N-D region copies from one source to a target placement."""

    resource_id: ResourceId
    revision: RevisionId
    source_placement: Optional[WeightPlacementManifest]
    target_placement: WeightPlacementManifest
    source_tensors: tuple[TensorDescriptor, ...]
    target_tensors: tuple[TensorDescriptor, ...]
    operations: tuple[LogicalTransferOperation, ...]
    source_manifest: Optional[StoredWeightManifest] = None
    planning_limits: PlanningLimits = field(default_factory=PlanningLimits)
    source_executors: tuple[PlacementExecutorPlan, ...] = ()
    target_executors: tuple[PlacementExecutorPlan, ...] = ()
    source_manifest_identity: Optional[StoredManifestIdentity] = field(init=False)

    _operation_views: ClassVar[Optional[OperationViews]] = None

    def __post_init__(self) -> None:
        try:
            # (its C steps' layout memos trusted only while proved: mooncake_reshard._memo_proof)
            memo_proved(lambda: _validation().validate_logical_plan(self))
        except (TypeError, AttributeError, KeyError, IndexError):
            # The rules met a value restored from a forged field dict (spec §13: regions,
            # fragments, executors, limits are default-pickled). The spec message of the first
            # absent or mistyped field replaces Python's error (fuzz finding F2); a plan whose
            # fields all have their types re-raises it. Costs nothing on the accepting path.
            failure = _logical_type_failure(self)
            if failure is not None:
                raise ValueError(failure) from None
            raise

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_operation_views", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for key, value in state.items():
            object.__setattr__(self, key, value)
        self.__post_init__()

    @property
    def total_bytes(self) -> int:
        """Sum of ``total_bytes`` over the operations."""
        return sum(operation.total_bytes for operation in self.operations)

    @property
    def source_placement_id(self) -> Optional[PlacementId]:
        """The source placement id (``None`` for a stored source)."""
        placement = self.source_placement
        return None if placement is None else placement.placement_id

    @property
    def target_placement_id(self) -> PlacementId:
        """The target placement id."""
        return self.target_placement.placement_id

    @property
    def pipeline_routes(self) -> tuple[PipelineRouteGroup, ...]:
        """Operations grouped by PP route (spec §11.9)."""
        return self._views().pipeline_routes

    def _views(self) -> OperationViews:
        """The operation views of the plan's current values, derived on every call: a frozen plan
        can be edited in place (its operations, their fragments, its executors), and views kept
        from an earlier call would then change an outcome. The latest views are stored as
        ``_operation_views`` (never pickled) but never read back."""
        views = build_operation_views(self.operations, self.source_executors, self.target_executors)
        object.__setattr__(self, "_operation_views", views)
        return views

    def validate_source_manifest_snapshot(self) -> None:
        """Revalidate the stored source snapshot and its selected fragments (spec §8.6)."""
        _validation().validate_source_manifest_snapshot(self)

    def validate_source_placement_snapshot(self) -> None:
        """Run the source-side logical self-checks (spec §11.6)."""
        _validation().validate_source_placement_snapshot(self)

    def operation_indices_for_executor(self, executor: PlacementExecutorPlan, side: str) -> tuple[int, ...]:
        """Ascending indices of the operations whose ``side`` fragment belongs to ``executor``."""
        if side == "source":
            executors = self.source_executors
        elif side == "target":
            executors = self.target_executors
        else:
            raise ValueError(f"invalid executor side: {side}")
        if executor not in executors:
            raise ValueError(f"{side} executor is not part of this logical plan")
        return self._views().indices(executor, side)


_ABSENT_FIELD = object()
_LOGICAL_FIELDS = (
    "resource_id", "revision", "source_placement", "target_placement", "source_tensors", "target_tensors",
    "operations", "source_manifest", "planning_limits", "source_executors", "target_executors",
)
_REGION_INT_TUPLES = ("overlap_offset", "overlap_shape", "outer_loop_counts", "source_strides", "target_strides")
_REGION_INT_FIELDS = ("source_base_offset", "target_base_offset", "inner_bytes")


def _int_sequence(value: Any) -> bool:
    if type(value) is not tuple and type(value) is not list:
        return False
    return all(type(item) is int for item in value)


def _logical_type_failure(plan: Any) -> Optional[str]:
    """The spec message of the first field of a logical plan (or of its operations, their
    fragments, its executors, limits) that is absent or not of its constructed type; None
    when there is none. Used only after the rules raised a Python error."""
    from .field_types import (
        PLACEMENT_FRAGMENT_FIELDS,
        TENSOR_FIELDS,
        field_type_failure,
        manifest_shape_failure,
        typed_items_failure,
        typed_rank,
    )
    from .._field_kinds import typed_value
    from ..storage_manifest import _SNAPSHOT_TYPES, _field_type_message

    state = plan.__dict__
    for name in _LOGICAL_FIELDS:
        if name not in state:
            return "logical transfer plan identifiers must not be empty" if name in ("resource_id", "revision") else (
                f"logical transfer plan {name} is invalid"
            )
    limits = state["planning_limits"]
    if isinstance(limits, PlanningLimits):
        for name in ("max_transfer_regions", "max_segments_per_region", "max_total_lowered_segments"):
            if type(limits.__dict__.get(name)) is not int:
                return f"planning limit {name} must be a positive integer"
    operations = state["operations"]
    for op in operations if type(operations) is tuple else ():
        if not isinstance(op, TransferRegion):
            continue
        op_state = _region_fields_state(op)  # its set fields (C layout, no __dict__)
        for name in _REGION_INT_TUPLES:
            if not _int_sequence(op_state.get(name)):
                return f"transfer region {name} must contain integers"
        if not op_state.get("tensor_id"):
            return "transfer region tensor_id must not be empty"
        for name in _REGION_INT_FIELDS:
            if type(op_state.get(name)) is not int:
                return f"transfer region {name} must be an integer"
        for side in ("source", "target"):
            fragment = op_state.get(side)
            if isinstance(fragment, PlacementFragment):
                failure = field_type_failure(fragment, PLACEMENT_FRAGMENT_FIELDS)
            elif isinstance(fragment, StoredFragmentSnapshot):
                failure = next(
                    (_field_type_message(n, k, "StoredFragmentSnapshot") for n, k in _SNAPSHOT_TYPES
                     if not typed_value(fragment.__dict__.get(n, _ABSENT_FIELD), k)),
                    None,
                )
            else:
                failure = f"logical transfer plan {side} fragment is invalid"
            if failure is not None:
                return failure
    for side in ("source_executors", "target_executors"):
        executors = state[side]
        for executor in executors if type(executors) is tuple else ():
            if not isinstance(executor, PlacementExecutorPlan):
                continue
            ex_state = executor.__dict__
            ids = ex_state.get("placement_fragment_ids")
            if (
                type(ex_state.get("placement_id")) is not str
                or type(ex_state.get("participant_id")) is not str
                or type(ids) is not tuple
                or not all(type(item) is str for item in ids)
            ):
                return "placement executor identifiers must not be empty"
            if not typed_rank(ex_state.get("rank")):
                return "rank must be a ParallelRank"
    # The placements and the plan's tensor tuples, restored by default pickling too (F10): the
    # rules read their identities, parts, tensors and fragments.
    for side in ("source", "target"):
        placement = state[f"{side}_placement"]
        if isinstance(placement, WeightPlacementManifest):
            failure = manifest_shape_failure(placement, f"logical transfer plan {side} placement")
            if failure is not None:
                return failure
    for name in ("source_tensors", "target_tensors"):
        tensors = state[name]  # (another container: left to the rules, as step 1's tuple())
        failure = None if type(tensors) is not tuple else (
            typed_items_failure(tensors, f"logical transfer plan {name}", TensorDescriptor, TENSOR_FIELDS)
        )
        if failure is not None:
            return failure
    return None


def _trusted_logical_plan(
    *,
    resource_id: str,
    revision: str,
    source_placement: Optional[WeightPlacementManifest],
    target_placement: WeightPlacementManifest,
    source_tensors: tuple[TensorDescriptor, ...],
    target_tensors: tuple[TensorDescriptor, ...],
    operations: tuple[Any, ...],
    source_manifest: Optional[StoredWeightManifest],
    planning_limits: PlanningLimits,
    source_executors: tuple[PlacementExecutorPlan, ...],
    target_executors: tuple[PlacementExecutorPlan, ...],
) -> LogicalTransferPlan:
    """Build a plan the planner derived itself (no re-validation of what it proved).

    The planner builds operations from the placements' (or the rebuilt manifest's) own
    fragments, proves exact cover and every limit in the kernel, and projects executors from
    the parts (distinct ranks, so distinct executor keys); the operation views are derived on
    first use (``_views``). ``dataclasses.replace``, ``copy`` and unpickling of the result run
    the full ``__post_init__``."""
    plan: LogicalTransferPlan = _new_object(LogicalTransferPlan)
    _set_attr(
        plan,
        "__dict__",
        {
            "resource_id": resource_id,
            "revision": revision,
            "source_placement": source_placement,
            "target_placement": target_placement,
            "source_tensors": source_tensors,
            "target_tensors": target_tensors,
            "operations": operations,
            "source_manifest": source_manifest,
            "planning_limits": planning_limits,
            "source_executors": source_executors,
            "target_executors": target_executors,
            "source_manifest_identity": None if source_manifest is None else source_manifest.manifest_identity,
        },
    )
    return plan


def _revalidated_manifest(manifest: StoredWeightManifest) -> StoredWeightManifest:
    return validate_weight_manifest_snapshot(manifest)

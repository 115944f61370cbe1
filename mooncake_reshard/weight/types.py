"""Weight manifest value types: axes, ranks, descriptors, fragments (spec §4.1-§4.5)."""

from __future__ import annotations

from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Literal, Optional, TypeVar, Union

from .. import _native
from ._default_state import restore_default_state, restore_field_values
from .._layout import layout_builder, layout_dataclass, layout_state_reader, layout_storer, value_base
from ..contracts._checks import (
    I64_MAX,
    U64_MAX,
    int_tuple,
    is_item_sequence,
    item_tuple,
    normalize_aliases,
    require_int,
    require_optional_int,
    require_s64_coordinates,
    require_str,
)
from ..contracts.fragments import RuntimeBindingFragment
from ..contracts.ids import PlacementFragmentId, TensorId

_KindAxisT = TypeVar("_KindAxisT")  # ReplicatedAxis or OwnershipAxis (_restore_kind_axis)

__all__ = [
    "ParallelAxisKind",
    "SplitAxisKind",
    "ParallelRank",
    "SplitAxis",
    "ReplicatedAxis",
    "OwnershipAxis",
    "ParallelAxis",
    "TensorDescriptor",
    "PlacementFragment",
    "RuntimeBindingFragment",
    "validate_fragment_geometry",
    "canonical_strides_bytes",
    "require_sha256_digest",
    "require_manifest_items",
]

ParallelAxisKind = Literal["dp", "pp", "ep", "tp"]
SplitAxisKind = Literal["ep", "tp"]

#: Canonical axis order used for sorting everywhere: dp, pp, ep, tp.
AXIS_ORDER: dict[str, int] = {"dp": 0, "pp": 1, "ep": 2, "tp": 3}
_HEX = frozenset("0123456789abcdef")
#: Untracks a just-built exact instance from the cyclic collector when its fields are inert
#: (ints, strs, tuples of those, untracked library values): see csrc/common.h.
_untrack = _native.untrack_inert


@dataclass(frozen=True)
class ParallelRank:
    """A participant's coordinates on the four parallel axes (field order dp, tp, pp, ep)."""

    dp: int = 0
    tp: int = 0
    pp: int = 0
    ep: int = 0

    def __post_init__(self) -> None:
        state = self.__dict__
        for name in ("dp", "tp", "pp", "ep"):
            value = state[name]
            if type(value) is not int or value < 0:
                require_int(value, f"parallel rank {name}", 0)
        _untrack(self, ParallelRank)

    def __setstate__(self, state: Any) -> None:
        """Default dataclass pickling's restore (spec §13: the field dict, without
        ``__post_init__``), refusing fields of another type than the constructor stores
        (``_default_state``)."""
        restore_default_state(self, state, ParallelRank, _RANK_FIELDS, rank_fields_failure)


_RANK_FIELDS = ("dp", "tp", "pp", "ep")
_rank_values = itemgetter(*_RANK_FIELDS)


def _int_items(value: Any) -> bool:
    """True for an exact tuple of exact ints (what the constructors store for int tuples)."""
    if type(value) is not tuple:
        return False
    for item in value:
        if type(item) is not int:
            return False
    return True


def rank_fields_failure(dp: Any, tp: Any, pp: Any, ep: Any) -> Optional[str]:
    """"rank must be a ParallelRank" (the message every path gives a rank whose fields are not
    all exact ints, ``field_types``' "rank" kind) when one of a restored rank's fields is not of
    the type its constructor stores, else ``None``. The placement-graph restores refuse forged
    content of the wrong type (a float NaN, another object of the pickle, a reference cycle)
    before anything reads it: fuzz finding F5, the session 18 CI cycle."""
    for value in (dp, tp, pp, ep):
        if type(value) is not int:
            return "rank must be a ParallelRank"
    return None


_FOUR_INTS = (int, int, int, int)


def typed_rank(value: Any) -> bool:
    """True for a ``ParallelRank`` (or subclass) instance whose four fields are exact ints."""
    if type(value) is ParallelRank:  # (the common case, in C calls)
        try:
            return tuple(map(type, _rank_values(value.__dict__))) == _FOUR_INTS
        except KeyError:
            return False
    state = getattr(value, "__dict__", None) if isinstance(value, ParallelRank) else None
    return (
        type(state) is dict
        and type(state.get("dp")) is int
        and type(state.get("tp")) is int
        and type(state.get("pp")) is int
        and type(state.get("ep")) is int
    )


def _restore_parallel_rank(dp: Any, tp: Any, pp: Any, ep: Any) -> ParallelRank:
    """Unpickle a ``ParallelRank`` from an older pickle of this package (``_default_state``)."""
    rank: ParallelRank = restore_field_values(ParallelRank, _RANK_FIELDS, rank_fields_failure, (dp, tp, pp, ep))
    return rank


def _require_axis_kind(kind: object) -> None:
    require_str(kind, "parallel axis kind")
    if kind not in AXIS_ORDER:
        raise ValueError(f"unsupported parallel axis kind: {kind}")


@dataclass(frozen=True)
class SplitAxis:
    """A parallel kind (``ep`` or ``tp``) that shards one explicit logical dimension."""

    kind: SplitAxisKind
    dim: int

    def __post_init__(self) -> None:
        _require_axis_kind(self.kind)
        if self.kind not in ("ep", "tp"):
            raise ValueError(f"{self.kind} cannot use split semantics")
        require_int(self.dim, "split axis dim", 0)
        if self.kind == "ep" and self.dim != 0:
            raise ValueError("EP must split the leading logical expert dimension")
        _untrack(self, SplitAxis)

    def __setstate__(self, state: Any) -> None:
        """Default dataclass pickling's restore with typed fields (see ``ParallelRank``)."""
        restore_default_state(self, state, SplitAxis, _SPLIT_AXIS_FIELDS, axis_fields_failure)


_SPLIT_AXIS_FIELDS = ("kind", "dim")


def axis_fields_failure(kind: Any, dim: Any = 0) -> Optional[str]:
    """The field rule's message of a restored axis field of the wrong type (a split axis'
    ``dim`` too), else ``None`` (see ``rank_fields_failure``)."""
    if type(kind) is not str:
        return "parallel axis kind must be a non-empty string"
    if type(dim) is not int:
        return "split axis dim must be an integer"
    return None


def _restore_split_axis(kind: Any, dim: Any) -> SplitAxis:
    """Unpickle a ``SplitAxis`` from an older pickle of this package (``_default_state``)."""
    axis: SplitAxis = restore_field_values(SplitAxis, _SPLIT_AXIS_FIELDS, axis_fields_failure, (kind, dim))
    return axis


@dataclass(frozen=True)
class ReplicatedAxis:
    """A parallel kind whose selected ranks each hold a complete replica."""

    kind: ParallelAxisKind

    def __post_init__(self) -> None:
        _require_axis_kind(self.kind)
        _untrack(self, ReplicatedAxis)

    def __setstate__(self, state: Any) -> None:
        """Default dataclass pickling's restore with a typed kind (see ``ParallelRank``)."""
        restore_default_state(self, state, ReplicatedAxis, _KIND_AXIS_FIELDS, axis_fields_failure)


_KIND_AXIS_FIELDS = ("kind",)


def _restore_kind_axis(cls: type[_KindAxisT], kind: Any) -> _KindAxisT:
    """Unpickle an axis whose only field is ``kind`` from an older pickle of this package
    (``_default_state``)."""
    axis: _KindAxisT = restore_field_values(cls, _KIND_AXIS_FIELDS, axis_fields_failure, (kind,))
    return axis


def _restore_replicated_axis(kind: Any) -> ReplicatedAxis:
    """Unpickle a ``ReplicatedAxis`` from an older pickle of this package (``_restore_kind_axis``)."""
    return _restore_kind_axis(ReplicatedAxis, kind)


@dataclass(frozen=True)
class OwnershipAxis:
    """A parallel kind that assigns ownership without splitting a dimension."""

    kind: ParallelAxisKind

    def __post_init__(self) -> None:
        _require_axis_kind(self.kind)
        _untrack(self, OwnershipAxis)

    def __setstate__(self, state: Any) -> None:
        """Default dataclass pickling's restore with a typed kind (see ``ParallelRank``)."""
        restore_default_state(self, state, OwnershipAxis, _KIND_AXIS_FIELDS, axis_fields_failure)


def _restore_ownership_axis(kind: Any) -> OwnershipAxis:
    """Unpickle an ``OwnershipAxis`` from an older pickle of this package (``_restore_kind_axis``)."""
    return _restore_kind_axis(OwnershipAxis, kind)


ParallelAxis = Union[SplitAxis, ReplicatedAxis, OwnershipAxis]
_AXIS_TYPES = (SplitAxis, ReplicatedAxis, OwnershipAxis)


def axis_identity(axis: ParallelAxis) -> dict[str, Any]:
    """Canonical JSON object of an axis (spec §6.3)."""
    if type(axis) is SplitAxis or isinstance(axis, SplitAxis):
        return {"semantics": "split", "kind": axis.kind, "dim": axis.dim}
    if isinstance(axis, ReplicatedAxis):
        return {"semantics": "replicated", "kind": axis.kind}
    return {"semantics": "ownership", "kind": axis.kind}


@dataclass(frozen=True)
class TensorDescriptor:
    """Address-free description of one logical tensor and its parallel semantics."""

    tensor_id: TensorId
    global_shape: tuple[int, ...]
    dtype: str
    itemsize: int
    shard_dims: tuple[int, ...]
    layout_fingerprint: str
    parallel_axes: tuple[ParallelAxis, ...]
    layer_id: Optional[int] = None
    expert_id: Optional[int] = None

    def __post_init__(self) -> None:
        state = self.__dict__
        shape = int_tuple(self.global_shape, "global_shape", 1)
        if not shape:
            raise ValueError("global_shape must not be empty")
        require_str(self.tensor_id, "tensor_id")
        require_str(self.dtype, "dtype")
        require_int(self.itemsize, "itemsize", 1)
        shard_dims = int_tuple(self.shard_dims, "shard_dims", 0)
        if len(set(shard_dims)) != len(shard_dims):
            raise ValueError("shard_dims must not contain duplicates")
        if list(shard_dims) != sorted(shard_dims):
            raise ValueError("shard_dims must be sorted")
        ndim = len(shape)
        if any(dim >= ndim for dim in shard_dims):
            raise ValueError("shard_dims contains an out-of-range dimension")
        raw_axes = self.parallel_axes
        if not is_item_sequence(raw_axes):
            raise ValueError("TensorDescriptor parallel_axes must be a sequence")
        axes = tuple(raw_axes)
        for axis in axes:
            if not isinstance(axis, _AXIS_TYPES):
                raise ValueError("TensorDescriptor parallel_axes must contain explicit axis values")
        axes = tuple(sorted(axes, key=lambda axis: AXIS_ORDER.get(axis.kind, 4)))
        kinds = [axis.kind for axis in axes]
        if len(set(kinds)) != len(kinds):
            raise ValueError("parallel_axes must not contain duplicate kinds")
        split_dims = [axis.dim for axis in axes if isinstance(axis, SplitAxis)]
        if len(set(split_dims)) != len(split_dims):
            raise ValueError("split axes must not share a dimension")
        if any(dim >= ndim for dim in split_dims):
            raise ValueError("split axis dimension is out of range")
        if tuple(sorted(split_dims)) != shard_dims:
            raise ValueError("parallel axis split dimensions conflict with shard_dims")
        require_optional_int(self.layer_id, "layer_id", 0)
        require_optional_int(self.expert_id, "expert_id", 0)
        if self.expert_id is not None and any(
            isinstance(axis, SplitAxis) and axis.kind == "ep" for axis in axes
        ):
            raise ValueError("an individually allocated expert requires explicit EP ownership")
        require_str(self.layout_fingerprint, "layout_fingerprint")
        require_s64_coordinates(shape, "global_shape")
        state["global_shape"] = shape
        state["shard_dims"] = shard_dims
        state["parallel_axes"] = axes
        _untrack(self, TensorDescriptor)

    def __setstate__(self, state: Any) -> None:
        """Default dataclass pickling's restore with typed fields (see ``ParallelRank``)."""
        restore_default_state(self, state, TensorDescriptor, _TENSOR_FIELDS, tensor_fields_failure)


_TENSOR_FIELDS = (
    "tensor_id",
    "global_shape",
    "dtype",
    "itemsize",
    "shard_dims",
    "layout_fingerprint",
    "parallel_axes",
    "layer_id",
    "expert_id",
)


def tensor_fields_failure(
    tensor_id: Any,
    global_shape: Any,
    dtype: Any,
    itemsize: Any,
    shard_dims: Any,
    layout_fingerprint: Any,
    parallel_axes: Any,
    layer_id: Any,
    expert_id: Any,
) -> Optional[str]:
    """The field rule's message of the first of a restored descriptor's fields that is not of
    the type (and shape) its constructor stores: strs, an int itemsize, tuples of ints, a tuple
    of axis instances, ``None`` or an int for the optional ids; else ``None`` (see
    ``rank_fields_failure``)."""
    if not _int_items(global_shape):
        return "global_shape must contain integers"
    if type(tensor_id) is not str:
        return "tensor_id must be a non-empty string"
    if type(dtype) is not str:
        return "dtype must be a non-empty string"
    if type(itemsize) is not int:
        return "itemsize must be an integer"
    if not _int_items(shard_dims):
        return "shard_dims must contain integers"
    if type(parallel_axes) is not tuple:
        return "TensorDescriptor parallel_axes must be a sequence"
    for axis in parallel_axes:
        # (an axis restored by default pickling has not been checked by its own restore)
        state = getattr(axis, "__dict__", None) if isinstance(axis, _AXIS_TYPES) else None
        if (
            type(state) is not dict
            or type(state.get("kind")) is not str
            or (isinstance(axis, SplitAxis) and type(state.get("dim")) is not int)
        ):
            return "TensorDescriptor parallel_axes must contain explicit axis values"
    if layer_id is not None and type(layer_id) is not int:
        return "layer_id must be an integer"
    if expert_id is not None and type(expert_id) is not int:
        return "expert_id must be an integer"
    if type(layout_fingerprint) is not str:
        return "layout_fingerprint must be a non-empty string"
    return None


def _restore_tensor_descriptor(
    tensor_id: Any,
    global_shape: Any,
    dtype: Any,
    itemsize: Any,
    shard_dims: Any,
    layout_fingerprint: Any,
    parallel_axes: Any,
    layer_id: Any,
    expert_id: Any,
) -> TensorDescriptor:
    """Unpickle a ``TensorDescriptor`` from an older pickle of this package
    (``_default_state``)."""
    values = (tensor_id, global_shape, dtype, itemsize, shard_dims, layout_fingerprint, parallel_axes, layer_id, expert_id)
    tensor: TensorDescriptor = restore_field_values(TensorDescriptor, _TENSOR_FIELDS, tensor_fields_failure, values)
    return tensor


def _fragment_coordinates(
    global_offset: object, local_shape: object
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    if type(global_offset) is tuple:
        offset: tuple[Any, ...] = global_offset  # type: ignore[assignment]
        for item in offset:
            if type(item) is not int or item < 0:
                offset = int_tuple(global_offset, "global_offset", 0)
                break
    else:
        offset = int_tuple(global_offset, "global_offset", 0)
    if type(local_shape) is tuple:
        shape: tuple[Any, ...] = local_shape  # type: ignore[assignment]
        for item in shape:
            if type(item) is not int or item < 1:
                shape = int_tuple(local_shape, "local_shape", 1)
                break
    else:
        shape = int_tuple(local_shape, "local_shape", 1)
    return offset, shape


# PlacementFragment's field names in field order (``layout_dataclass`` checks them against the
# annotations; the C readers index the layout in this order: csrc/layout.h MR_PF_*).
_FRAGMENT_FIELDS = (
    "tensor_id",
    "global_offset",
    "local_shape",
    "nbytes",
    "rank",
    "pipeline_stage_id",
    "aliases",
    "placement_fragment_id",
)

if TYPE_CHECKING:  # type checkers see a frozen dataclass (layout_dataclass is a dataclass transform)
    _FragmentBase = object
else:
    _FragmentBase = value_base("PlacementFragment", _FRAGMENT_FIELDS)

# ``__init__`` stores the fields with ``_store_fragment`` (layout_storer); pickling is the layout's
# dict-format default (``_layout.py``).


@layout_dataclass(init=False)
class PlacementFragment(_FragmentBase):
    """An address-free N-D box of one tensor, assigned to one parallel rank.

    ``placement_fragment_id`` defaults to the canonical content hash (spec §6.1);
    an explicit id is kept verbatim.

    Stored in a C-owned layout (``mooncake_reshard/_layout.py``): the 8 fields live in the
    instance itself, in field order (no instance ``__dict__``); C readers load them directly
    (``csrc/layout.h``). Pickles are the same bytes as the dict-backed class's.
    """

    __slots__ = ("__weakref__",)

    tensor_id: TensorId
    global_offset: tuple[int, ...]
    local_shape: tuple[int, ...]
    nbytes: int
    rank: ParallelRank
    pipeline_stage_id: Optional[int]
    aliases: tuple[TensorId, ...]
    placement_fragment_id: PlacementFragmentId

    def __init__(
        self,
        tensor_id: TensorId,
        global_offset: tuple[int, ...],
        local_shape: tuple[int, ...],
        nbytes: int,
        rank: ParallelRank,
        pipeline_stage_id: Optional[int] = None,
        aliases: tuple[TensorId, ...] = (),
        placement_fragment_id: Optional[PlacementFragmentId] = None,
    ) -> None:
        offset, shape = _fragment_coordinates(global_offset, local_shape)
        if type(tensor_id) is not str or not tensor_id:
            raise ValueError("tensor_id must be a non-empty string")
        if type(nbytes) is not int or nbytes < 1 or nbytes > U64_MAX:
            if type(nbytes) is not int:
                raise ValueError("nbytes must be an integer")
            if nbytes < 1:
                raise ValueError("nbytes must be at least 1")
            raise ValueError("nbytes must fit in an unsigned 64-bit integer")
        if type(rank) is not ParallelRank and not isinstance(rank, ParallelRank):
            raise ValueError("rank must be a ParallelRank")
        if pipeline_stage_id is not None and (
            type(pipeline_stage_id) is not int or pipeline_stage_id < 0
        ):
            require_int(pipeline_stage_id, "pipeline_stage_id", 0)
        alias_group: tuple[Any, ...] = (
            () if type(aliases) is tuple and not aliases else normalize_aliases(aliases, tensor_id)
        )
        if placement_fragment_id is None:
            for item in offset:
                if item > I64_MAX:
                    raise ValueError("global_offset must fit in a signed 64-bit integer")
            for item in shape:
                if item > I64_MAX:
                    raise ValueError("local_shape must fit in a signed 64-bit integer")
            rank_state = rank.__dict__
            placement_fragment_id = _native.placement_fragment_id(
                tensor_id,
                offset,
                shape,
                nbytes,
                rank_state["dp"],
                rank_state["tp"],
                rank_state["pp"],
                rank_state["ep"],
                alias_group,
                pipeline_stage_id,
            )
        else:
            if type(placement_fragment_id) is not str or not placement_fragment_id:
                raise ValueError("placement_fragment_id must be a non-empty string")
            require_s64_coordinates(offset, "global_offset")
            require_s64_coordinates(shape, "local_shape")
        # the 8 slots stored in one call (what filling the dict-backed instance's __dict__ did;
        # a subclass instance too), then untracked by the collector when exactly this class and
        # every value is inert: csrc/layout.c layout_storer; global_offset and local_shape as the
        # first equal tuples seen (mooncake_reshard/_shared_tuples.py)
        _store_fragment(
            self,
            tensor_id,
            offset,
            shape,
            nbytes,
            rank,
            pipeline_stage_id,
            alias_group,
            placement_fragment_id,
        )

    @property
    def fragment_id(self) -> PlacementFragmentId:
        """Alias of :attr:`placement_fragment_id`."""
        return self.placement_fragment_id


_layout_setstate = PlacementFragment.__setstate__


def _fragment_setstate(self: PlacementFragment, state: Any) -> None:
    """Default dataclass pickling's restore (the layout's dict-format ``__setstate__``), then out
    of the cyclic garbage collector when exactly a ``PlacementFragment`` whose fields are all set
    and inert, as one the constructor built. The usual state (the 8 fields in field order) is
    stored in one C call that untracks too (``layout_storer``)."""
    if type(state) is dict and len(state) == 8 and tuple(state) == _FRAGMENT_FIELDS:
        _restore_fragment_fields(self, *state.values())
        return
    _layout_setstate(self, state)
    _untrack(self, PlacementFragment)


_fragment_setstate.__qualname__ = "PlacementFragment.__setstate__"
PlacementFragment.__setstate__ = _fragment_setstate  # type: ignore[method-assign]

# Builds an exact PlacementFragment from its 8 field values in field order, stored directly (C,
# no ``__init__``; untracked by the collector when every value is inert).
_build_fragment = layout_builder(PlacementFragment)
_store_fragment = layout_storer(PlacementFragment, shared=("global_offset", "local_shape"))
# Stores the 8 field values as they are (a restored state: no tuple sharing, which would change
# the identity structure pickle restored).
_restore_fragment_fields = layout_storer(PlacementFragment)
# ``{field: value}`` of a placement fragment's set fields in field order (what the dict-backed
# class's ``__dict__`` held), read through the layout's own member descriptors.
_fragment_fields_state = layout_state_reader(PlacementFragment)


def _restore_placement_fragment(
    tensor_id: Any,
    global_offset: Any,
    local_shape: Any,
    nbytes: Any,
    rank: Any,
    pipeline_stage_id: Any,
    aliases: Any,
    placement_fragment_id: Any,
) -> PlacementFragment:
    """Unpickle a ``PlacementFragment`` from an older pickle of this package (``_default_state``):
    its fields stored as they are, as default pickling restores them (no ``__init__``;
    untracked when every value is inert)."""
    fragment: PlacementFragment = _build_fragment(
        tensor_id, global_offset, local_shape, nbytes, rank, pipeline_stage_id, aliases, placement_fragment_id
    )
    return fragment


def validate_fragment_geometry(
    tensor: TensorDescriptor,
    *,
    fragment_id: str,
    global_offset: tuple[int, ...],
    local_shape: tuple[int, ...],
    nbytes: int,
) -> None:
    """Check a fragment box against its tensor: rank, bounds, byte size (spec §4.5)."""
    global_shape = tensor.global_shape
    ndim = len(global_shape)
    if len(global_offset) != ndim or len(local_shape) != ndim:
        raise ValueError(f"fragment rank mismatch: {fragment_id}")
    volume = 1
    for begin, extent, size in zip(global_offset, local_shape, global_shape):
        if begin + extent > size:
            raise ValueError(f"fragment is out of bounds: {fragment_id}")
        volume *= extent
    expected = volume * tensor.itemsize
    if nbytes != expected:
        raise ValueError(
            f"fragment byte size mismatch: {fragment_id}: expected {expected}, got {nbytes}"
        )


def canonical_strides_bytes(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Row-major byte strides of ``shape`` (the last dimension has stride ``itemsize``)."""
    strides = [0] * len(shape)
    stride = itemsize
    for dim in range(len(shape) - 1, -1, -1):
        strides[dim] = stride
        stride *= shape[dim]
    return tuple(strides)


def require_sha256_digest(value: object, name: str) -> None:
    """A lowercase 64-character hex SHA-256 digest."""
    require_str(value, name)
    if len(value) != 64 or not _HEX.issuperset(value):  # type: ignore[arg-type]
        raise ValueError(f"{name} must be a lowercase SHA-256 digest")


def require_manifest_items(value: object, name: str, item_type: type) -> tuple[Any, ...]:
    """Item-sequence check: a non-string sequence of ``item_type`` instances, as a tuple."""
    return item_tuple(value, name, item_type)

"""Stored manifests: committed, persistent logical snapshots of a weight generation (spec §5)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

from .. import _native
from ..contracts._checks import (
    int_tuple,
    item_tuple,
    normalize_aliases,
    require_int,
    require_s64_coordinates,
    require_str,
    require_u64,
)
from ..contracts.ids import ResourceId, RevisionId, StoredFragmentSnapshotId, TensorId
from ..contracts.manifest import ResourceKind, StoredResourceManifest
from ._canonical import tensor_object
from ._field_kinds import typed_value
from ._json import load_strict_json
from .types import (
    AXIS_ORDER,
    OwnershipAxis,
    ParallelAxis,
    ReplicatedAxis,
    SplitAxis,
    TensorDescriptor,
    validate_fragment_geometry,
)

__all__ = [
    "StoredManifestIdentity",
    "StoredFragmentSnapshot",
    "StoredWeightManifest",
    "validate_weight_manifest_snapshot",
]

_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class StoredManifestIdentity:
    """Identity of one committed stored manifest, including its content digest."""

    namespace: str
    resource_id: ResourceId
    revision: RevisionId
    weight_generation: int
    group_id: str
    manifest_key: str
    content_sha256: str

    def __post_init__(self) -> None:
        require_str(self.namespace, "namespace")
        require_str(self.resource_id, "resource_id")
        require_str(self.revision, "revision")
        require_u64(self.weight_generation, "weight_generation")
        require_str(self.group_id, "group_id")
        require_str(self.manifest_key, "manifest_key")
        require_str(self.content_sha256, "content_sha256")
        if len(self.content_sha256) != 64 or not _HEX.issuperset(self.content_sha256):
            raise ValueError("content_sha256 must be a SHA-256 hex digest")


@dataclass(frozen=True)
class StoredFragmentSnapshot:
    """One stored fragment: a logical box and its byte range inside a payload object."""

    fragment_id: StoredFragmentSnapshotId
    tensor_id: TensorId
    global_offset: tuple[int, ...]
    local_shape: tuple[int, ...]
    object_key: str
    object_offset: int
    nbytes: int
    aliases: tuple[TensorId, ...] = ()

    def __post_init__(self) -> None:
        state = self.__dict__
        offset = int_tuple(self.global_offset, "global_offset", 0)
        shape = int_tuple(self.local_shape, "local_shape", 1)
        require_str(self.fragment_id, "fragment_id")
        require_str(self.tensor_id, "tensor_id")
        require_str(self.object_key, "object_key")
        require_int(self.object_offset, "object_offset", 0)
        require_int(self.nbytes, "nbytes", 1)
        aliases = normalize_aliases(self.aliases, self.tensor_id)
        require_s64_coordinates(offset, "global_offset")
        require_s64_coordinates(shape, "local_shape")
        state["global_offset"] = offset
        state["local_shape"] = shape
        state["aliases"] = aliases


def _stored_fragment_object(fragment: StoredFragmentSnapshot) -> dict[str, Any]:
    return {
        "fragment_id": fragment.fragment_id,
        "tensor_id": fragment.tensor_id,
        "global_offset": fragment.global_offset,
        "local_shape": fragment.local_shape,
        "object_key": fragment.object_key,
        "object_offset": fragment.object_offset,
        "nbytes": fragment.nbytes,
        "aliases": fragment.aliases,
    }


def _descriptor_semantics(tensor: TensorDescriptor) -> tuple[Any, ...]:
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


_MANIFEST_KEYS = frozenset(
    (
        "resource_kind",
        "namespace",
        "resource_id",
        "revision",
        "weight_generation",
        "group_id",
        "manifest_key",
        "tensors",
        "fragments",
        "created_at",
    )
)
_TENSOR_KEYS = frozenset(
    (
        "tensor_id",
        "global_shape",
        "dtype",
        "itemsize",
        "layer_id",
        "expert_id",
        "layout_fingerprint",
        "shard_dims",
        "parallel_axes",
    )
)
_FRAGMENT_KEYS = frozenset(
    (
        "fragment_id",
        "tensor_id",
        "global_offset",
        "local_shape",
        "object_key",
        "object_offset",
        "nbytes",
        "aliases",
    )
)


def _schema(value: Any, label: str, keys: frozenset[str]) -> dict[str, Any]:
    if type(value) is not dict or value.keys() != keys:
        raise ValueError(f"{label} schema fields do not match contract")
    return value


def _stored_axis(value: Any) -> Any:
    if type(value) is not dict:
        return value
    semantics = value.get("semantics")
    require_str(semantics, "axis semantics")
    if semantics == "split":
        _schema(value, "parallel axis", frozenset(("semantics", "kind", "dim")))
    elif semantics in ("replicated", "ownership"):
        _schema(value, "parallel axis", frozenset(("semantics", "kind")))
    else:
        raise ValueError(f"unsupported parallel axis semantics: {semantics}")
    kind = value["kind"]
    require_str(kind, "parallel axis kind")
    if kind not in AXIS_ORDER:
        raise ValueError(f"unsupported parallel axis kind: {kind}")
    axis: ParallelAxis
    if semantics == "split":
        axis = SplitAxis(kind, value["dim"])
    elif semantics == "replicated":
        axis = ReplicatedAxis(kind)
    else:
        axis = OwnershipAxis(kind)
    return axis


def _stored_tensor(value: Any) -> TensorDescriptor:
    raw = _schema(value, "tensor descriptor", _TENSOR_KEYS)
    axes = raw["parallel_axes"]
    if type(axes) is list:
        axes = tuple(_stored_axis(axis) for axis in axes)
    return TensorDescriptor(
        tensor_id=raw["tensor_id"],
        global_shape=raw["global_shape"],
        dtype=raw["dtype"],
        itemsize=raw["itemsize"],
        shard_dims=raw["shard_dims"],
        layout_fingerprint=raw["layout_fingerprint"],
        parallel_axes=axes,
        layer_id=raw["layer_id"],
        expert_id=raw["expert_id"],
    )


def _stored_fragment(value: Any) -> StoredFragmentSnapshot:
    raw = _schema(value, "stored fragment", _FRAGMENT_KEYS)
    return StoredFragmentSnapshot(**raw)


@dataclass(frozen=True)
class StoredWeightManifest(StoredResourceManifest):
    """A committed stored snapshot of one weight generation; a possible plan source.

    Tensors and fragments keep their given order. ``manifest_digest`` is the
    SHA-256 of :meth:`to_json` and is recomputed on every construction.
    """

    revision: RevisionId
    weight_generation: int
    tensors: tuple[TensorDescriptor, ...]
    fragments: tuple[StoredFragmentSnapshot, ...]
    manifest_digest: str = field(init=False)

    def __post_init__(self) -> None:
        require_str(self.namespace, "namespace")
        require_str(self.resource_id, "resource_id")
        require_str(self.revision, "revision")
        require_str(self.group_id, "group_id")
        require_str(self.manifest_key, "manifest_key")
        require_str(self.created_at, "created_at")
        tensors = item_tuple(self.tensors, "StoredWeightManifest tensors", TensorDescriptor)
        fragments = item_tuple(
            self.fragments, "StoredWeightManifest fragments", StoredFragmentSnapshot
        )
        require_u64(self.weight_generation, "weight_generation")
        # Default-pickled members (spec §13) skip their own checks: every field the rules
        # below read must be present with its exact type first (a ValueError, never Python's
        # AttributeError/TypeError); values are left to the rules themselves.
        _require_typed_members(tensors, fragments)
        group_id = self.group_id
        if self.manifest_key != f"{group_id}/manifest":
            raise ValueError("manifest_key does not belong to manifest group")
        payload_prefix = f"{group_id}/payload/"
        for fragment in fragments:
            if not fragment.object_key.startswith(payload_prefix):
                raise ValueError("payload object_key does not belong to manifest group")
        catalog = _validate_stored_fragments(tensors, fragments)
        _validate_stored_aliases(catalog, fragments)
        _validate_stored_coverage(tensors, fragments)
        _validate_object_ranges(fragments)
        state: dict[str, object] = vars(self)
        state["tensors"] = tensors
        state["fragments"] = fragments
        state["manifest_digest"] = _native.sha256_hex(self.to_json().encode("utf-8"))

    @property
    def resource_kind(self) -> ResourceKind:
        """Always :attr:`ResourceKind.MODEL_WEIGHT`."""
        return ResourceKind.MODEL_WEIGHT

    @property
    def manifest_identity(self) -> StoredManifestIdentity:
        """The identity of this manifest, with ``content_sha256 = manifest_digest``."""
        return StoredManifestIdentity(
            namespace=self.namespace,
            resource_id=self.resource_id,
            revision=self.revision,
            weight_generation=self.weight_generation,
            group_id=self.group_id,
            manifest_key=self.manifest_key,
            content_sha256=self.manifest_digest,
        )

    def to_json(self) -> str:
        """Canonical document (spec §6.5): sorted keys, compact, UTF-8 (not ASCII-escaped)."""
        payload = {
            "resource_kind": "model_weight",
            "namespace": self.namespace,
            "resource_id": self.resource_id,
            "revision": self.revision,
            "weight_generation": self.weight_generation,
            "group_id": self.group_id,
            "manifest_key": self.manifest_key,
            "tensors": [tensor_object(tensor) for tensor in self.tensors],
            "fragments": [_stored_fragment_object(fragment) for fragment in self.fragments],
            "created_at": self.created_at,
        }
        return _native.canonical_json(payload, ensure_ascii=False)

    @classmethod
    def from_json(cls, value: Union[str, bytes, bytearray]) -> StoredWeightManifest:
        """Decode a stored manifest document (``str``, ``bytes`` or ``bytearray``)."""
        if not isinstance(value, (str, bytes, bytearray)):
            raise ValueError("weight manifest is not valid JSON")
        raw = load_strict_json(value, "weight manifest is not valid JSON")
        if type(raw) is not dict:
            raise ValueError("weight manifest must be a JSON object")
        return cls.from_dict(raw)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> StoredWeightManifest:
        """Build from a decoded document with exactly the canonical keys."""
        if type(raw) is not dict:
            raise ValueError("weight manifest must be a JSON object")
        _schema(raw, "weight manifest", _MANIFEST_KEYS)
        if raw["resource_kind"] != "model_weight" or type(raw["resource_kind"]) is not str:
            raise ValueError("weight manifest resource_kind must be model_weight")
        tensors = raw["tensors"]
        if type(tensors) is list:
            tensors = tuple(_stored_tensor(tensor) for tensor in tensors)
        fragments = raw["fragments"]
        if type(fragments) is list:
            fragments = tuple(_stored_fragment(fragment) for fragment in fragments)
        return cls(
            namespace=raw["namespace"],
            resource_id=raw["resource_id"],
            group_id=raw["group_id"],
            manifest_key=raw["manifest_key"],
            created_at=raw["created_at"],
            revision=raw["revision"],
            weight_generation=raw["weight_generation"],
            tensors=tensors,
            fragments=fragments,
        )

    def __getstate__(self) -> tuple[Any, ...]:
        return (
            self.namespace,
            self.resource_id,
            self.revision,
            self.weight_generation,
            self.group_id,
            self.manifest_key,
            self.tensors,
            self.fragments,
            self.created_at,
        )

    def __setstate__(self, state: object) -> None:
        if type(state) is not tuple or len(state) != 9:
            raise ValueError("StoredWeightManifest pickle state is invalid")
        names = (
            "namespace",
            "resource_id",
            "revision",
            "weight_generation",
            "group_id",
            "manifest_key",
            "tensors",
            "fragments",
            "created_at",
        )
        for name, value in zip(names, state):
            object.__setattr__(self, name, value)
        self.__post_init__()


def _validate_stored_fragments(
    tensors: tuple[TensorDescriptor, ...], fragments: tuple[StoredFragmentSnapshot, ...]
) -> dict[str, TensorDescriptor]:
    catalog: dict[str, TensorDescriptor] = {}
    for tensor in tensors:
        if tensor.tensor_id in catalog:
            raise ValueError(f"duplicate tensor_id: {tensor.tensor_id}")
        catalog[tensor.tensor_id] = tensor
    seen: set[str] = set()
    for fragment in fragments:
        if fragment.fragment_id in seen:
            raise ValueError(f"duplicate fragment_id: {fragment.fragment_id}")
        seen.add(fragment.fragment_id)
        if fragment.tensor_id not in catalog:
            raise ValueError(f"unknown tensor_id: {fragment.tensor_id}")
    for fragment in fragments:
        validate_fragment_geometry(
            catalog[fragment.tensor_id],
            fragment_id=fragment.fragment_id,
            global_offset=fragment.global_offset,
            local_shape=fragment.local_shape,
            nbytes=fragment.nbytes,
        )
    return catalog


def _validate_stored_aliases(
    catalog: dict[str, TensorDescriptor], fragments: tuple[StoredFragmentSnapshot, ...]
) -> None:
    groups: dict[tuple[Any, ...], set[str]] = {}
    for fragment in fragments:
        aliases = fragment.aliases
        if not aliases:
            continue
        for member in aliases:
            if member not in catalog:
                raise ValueError(f"stored alias references unknown tensor: {member}")
        key = (aliases, fragment.global_offset, fragment.local_shape, fragment.nbytes)
        groups.setdefault(key, set()).add(fragment.tensor_id)
    for (aliases, _offset, _shape, _nbytes), members in groups.items():
        if members != set(aliases):
            raise ValueError("stored alias group is incomplete for fragment geometry")
        semantics = {_descriptor_semantics(catalog[member]) for member in aliases}
        if len(semantics) != 1:
            raise ValueError("stored alias tensor descriptors differ")


def _validate_stored_coverage(
    tensors: tuple[TensorDescriptor, ...], fragments: tuple[StoredFragmentSnapshot, ...]
) -> None:
    seen: set[tuple[Any, ...]] = set()
    by_tensor: dict[str, list[StoredFragmentSnapshot]] = {}
    for fragment in fragments:
        key = (fragment.tensor_id, fragment.global_offset, fragment.local_shape)
        if key in seen:
            raise ValueError(f"duplicate fragment geometry: {fragment.tensor_id}")
        seen.add(key)
        by_tensor.setdefault(fragment.tensor_id, []).append(fragment)
    for tensor in tensors:
        group = by_tensor.get(tensor.tensor_id, [])
        if not group or not _native.boxes_exactly_cover(
            (0,) * len(tensor.global_shape),
            tensor.global_shape,
            [fragment.global_offset for fragment in group],
            [fragment.local_shape for fragment in group],
        ):
            raise ValueError(f"tensor is not fully covered: {tensor.tensor_id}")


def _validate_object_ranges(fragments: tuple[StoredFragmentSnapshot, ...]) -> None:
    by_object: dict[str, list[StoredFragmentSnapshot]] = {}
    for fragment in fragments:
        by_object.setdefault(fragment.object_key, []).append(fragment)
    for object_key, members in by_object.items():
        if len(members) < 2:
            continue
        members.sort(key=lambda fragment: fragment.object_offset)
        reach_end = -1
        reach_id = ""
        for fragment in members:
            if fragment.object_offset < reach_end:
                raise ValueError(
                    "stored fragment object ranges overlap: "
                    f"{reach_id} and {fragment.fragment_id} in {object_key}"
                )
            end = fragment.object_offset + fragment.nbytes
            if end > reach_end:
                reach_end, reach_id = end, fragment.fragment_id


# ``(field, kind)`` of the members' fields, in field order: ``str``, ``int``, an int tuple, a
# str tuple, an optional int, or a tuple of parallel axes.
_SNAPSHOT_TYPES = (
    ("fragment_id", "str"),
    ("tensor_id", "str"),
    ("global_offset", "ints"),
    ("local_shape", "ints"),
    ("object_key", "str"),
    ("object_offset", "int"),
    ("nbytes", "int"),
    ("aliases", "strs"),
)
_TENSOR_TYPES = (
    ("tensor_id", "str"),
    ("global_shape", "ints"),
    ("dtype", "str"),
    ("itemsize", "int"),
    ("shard_dims", "ints"),
    ("layout_fingerprint", "str"),
    ("parallel_axes", "axes"),
    ("layer_id", "optional int"),
    ("expert_id", "optional int"),
)
_MISSING = object()


def _field_type_message(name: str, kind: str, label: str) -> str:
    """The spec §1.3 message of a field whose value does not have its type."""
    if kind == "str":
        return f"{name} must be a non-empty string"
    if kind in ("int", "optional int"):
        return f"{name} must be an integer"
    if kind == "ints":
        return f"{name} must contain integers"
    if kind == "strs":
        return "aliases must contain non-empty strings"
    return f"{label} parallel_axes must contain explicit axis values"


def _require_typed_members(tensors: tuple[Any, ...], fragments: tuple[Any, ...]) -> None:
    """Every field of every tensor descriptor and stored fragment is present, with its exact
    stored type (what construction guarantees; default pickling restores any dict): else the
    §1.3 message of the first such field, tensors first."""
    for members, fields, label in ((tensors, _TENSOR_TYPES, "TensorDescriptor"),
                                   (fragments, _SNAPSHOT_TYPES, "StoredFragmentSnapshot")):
        for member in members:
            state = member.__dict__
            for name, kind in fields:
                if not typed_value(state.get(name, _MISSING), kind):
                    raise ValueError(_field_type_message(name, kind, label))


def validate_weight_manifest_snapshot(manifest: StoredWeightManifest) -> StoredWeightManifest:
    """Return a freshly constructed, fully revalidated copy of ``manifest``."""
    if not isinstance(manifest, StoredWeightManifest):
        raise ValueError("weight manifest snapshot is invalid")
    try:
        return StoredWeightManifest(
            namespace=manifest.namespace,
            resource_id=manifest.resource_id,
            group_id=manifest.group_id,
            manifest_key=manifest.manifest_key,
            created_at=manifest.created_at,
            revision=manifest.revision,
            weight_generation=manifest.weight_generation,
            tensors=manifest.tensors,
            fragments=manifest.fragments,
        )
    except (AttributeError, TypeError):
        raise ValueError("weight manifest snapshot is invalid") from None

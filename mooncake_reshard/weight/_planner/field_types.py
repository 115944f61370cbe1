"""Exact field types of values restored without their own checks (fuzz findings F2, F3, F10, F11).

Spec §13 restores placement-graph objects, regions, executors and snapshots by default
pickling, without ``__post_init__``; ``object.__new__`` plus a forged ``__dict__`` does the same
for ``dataclasses.replace``. The revalidation rules that then read such a value do arithmetic,
hashing and indexing on its fields. These helpers check that every field those rules read is
present with the exact type construction guarantees, BEFORE the rules run, and raise the spec
§1.3 message of the first field that is not (values are left to the rules themselves, so the
first failure of a value with the right types is unchanged).

Only the Python fallback paths call them (the C fast paths decline on any unexpected type),
and the public entry points that catch a Python error of their rules (F11: bind, the binding
validators and resolvers, the planners) to raise the first such message instead.
"""

from __future__ import annotations

from typing import Any, Optional

from ...contracts.fragments import RuntimeBindingFragment
from .._field_kinds import instance_state, typed_value
from ..types import PlacementFragment, TensorDescriptor

__all__ = [
    "attestable_shape_failure",
    "binding_shape_failure",
    "evidence_shape_failure",
    "manifest_shape_failure",
    "field_type_failure",
    "state_type_failure",
    "placement_shape_failure",
    "require_fields",
    "typed_items_failure",
    "typed_rank",
    "PLACEMENT_FRAGMENT_FIELDS",
    "RUNTIME_FRAGMENT_FIELDS",
    "TENSOR_FIELDS",
]

_ABSENT = object()

# ``(field, kind)`` in field order. Kinds: "str", "int", "optional int", "ints" (tuple of
# ints), "strs" (tuple of strs), "rank" (a ParallelRank with int fields), "axes" (tuple of
# parallel axes with a str kind and, for split axes, an int dim).
PLACEMENT_FRAGMENT_FIELDS = (
    ("global_offset", "ints"),
    ("local_shape", "ints"),
    ("tensor_id", "str"),
    ("nbytes", "int"),
    ("rank", "rank"),
    ("pipeline_stage_id", "optional int"),
    ("aliases", "strs"),
    ("placement_fragment_id", "str"),
)
RUNTIME_FRAGMENT_FIELDS = (
    ("placement_fragment_id", "str"),
    ("fragment_id", "str"),
    ("worker_id", "str"),
    ("endpoint", "str"),
    ("device", "str"),
    ("address", "int"),
    ("nbytes", "int"),
    ("itemsize", "int"),
    ("local_shape", "ints"),
    ("strides_bytes", "ints"),
    ("storage_address", "int"),
    ("storage_nbytes", "int"),
    ("storage_offset_bytes", "int"),
)
TENSOR_FIELDS = (
    ("global_shape", "ints"),
    ("tensor_id", "str"),
    ("dtype", "str"),
    ("itemsize", "int"),
    ("shard_dims", "ints"),
    ("parallel_axes", "axes"),
    ("layer_id", "optional int"),
    ("expert_id", "optional int"),
    ("layout_fingerprint", "str"),
)
def typed_rank(value: Any) -> bool:
    """True for a ``ParallelRank`` whose four fields are exact ints."""
    return typed_value(value, "rank")


def _message(name: str, kind: str, runtime: bool) -> str:
    label = f"runtime {name}" if runtime and name in ("itemsize", "local_shape", "strides_bytes") else name
    if kind == "str":
        return f"{label} must be a non-empty string"
    if kind in ("int", "optional int"):
        return f"{label} must be an integer"
    if kind == "ints":
        return f"{label} must be a tuple or list" if runtime else f"{label} must contain integers"
    if kind == "strs":
        return "aliases must contain non-empty strings"
    if kind == "rank":
        return "rank must be a ParallelRank"
    return "TensorDescriptor parallel_axes must contain explicit axis values"


def field_type_failure(value: Any, fields: tuple[tuple[str, str], ...]) -> Optional[str]:
    """The spec message of the first field of ``value`` that is absent or not of its exact
    type (``None`` when every field is typed)."""
    return state_type_failure(instance_state(value), fields)


def state_type_failure(state: Optional[dict[str, Any]], fields: tuple[tuple[str, str], ...]) -> Optional[str]:
    """``field_type_failure`` of a value whose field state is ``state`` (its instance dict, or
    what a C-layout value's ``__getstate__`` gives; ``None``: no state, every field absent)."""
    runtime = fields is RUNTIME_FRAGMENT_FIELDS
    for name, kind in fields:
        field_value = _ABSENT if state is None else state.get(name, _ABSENT)
        if not typed_value(field_value, kind):
            return _message(name, kind, runtime)
    return None


def require_fields(value: Any, fields: tuple[tuple[str, str], ...]) -> None:
    """Raise ``ValueError`` with ``field_type_failure(value, fields)`` when there is one."""
    failure = field_type_failure(value, fields)
    if failure is not None:
        raise ValueError(failure)


def placement_shape_failure(placement: Any, *, declared_tensors: bool = True) -> Optional[str]:
    """The first shape failure of a (default-pickled) placement that the validated-state
    routine of an attestation reads (spec §9.2 step 4 reads its parts, each part's tensors
    and fragments): ``None`` when the shape is sound. Parts must be a tuple of
    ``WeightPlacementPart`` with a str participant id, tensors and fragments tuples of
    typed descriptors and fragments, and every fragment's tensor declared by its part
    (spec §4.7 step 8: "unknown tensor_id: {tensor_id}")."""
    from ..part import WeightPlacementPart

    state = instance_state(placement)
    if state is None:
        return "runtime attestation placement is invalid"
    for name in ("resource_id", "placement_id", "revision", "placement_set_id"):
        if type(state.get(name)) is not str:
            return f"{name} must be a non-empty string"
    if type(state.get("weight_generation")) is not int:
        return "weight_generation must be an integer"
    digest = state.get("_digest_cache")
    if digest is not None and type(digest) is not str:
        return "runtime attestation placement is invalid"
    parts = state.get("parts")
    if type(parts) is not tuple:
        return "WeightPlacementManifest parts must be a sequence"
    for part in parts:
        if not isinstance(part, WeightPlacementPart):
            return "WeightPlacementManifest parts must contain WeightPlacementPart"
        part_state = instance_state(part)
        if part_state is None or type(part_state.get("participant_id")) is not str:
            return "participant_id must be a non-empty string"
        if not typed_value(part_state.get("rank"), "rank"):
            return "placement part rank must be a ParallelRank"
        tensors = part_state.get("tensors")
        if type(tensors) is not tuple:
            return "WeightPlacementPart tensors must be a sequence"
        declared = set()
        for tensor in tensors:
            if not isinstance(tensor, TensorDescriptor):
                return "WeightPlacementPart tensors must contain TensorDescriptor"
            failure = field_type_failure(tensor, TENSOR_FIELDS)
            if failure is not None:
                return failure
            declared.add(tensor.__dict__["tensor_id"])
        fragments = part_state.get("fragments")
        if type(fragments) is not tuple:
            return "WeightPlacementPart fragments must be a sequence"
        for fragment in fragments:
            if not isinstance(fragment, PlacementFragment):
                return "WeightPlacementPart fragments must contain PlacementFragment"
            failure = field_type_failure(fragment, PLACEMENT_FRAGMENT_FIELDS)
            if failure is not None:
                return failure
            tensor_id = instance_state(fragment)["tensor_id"]  # type: ignore[index]  # typed above
            if declared_tensors and tensor_id not in declared:
                return f"unknown tensor_id: {tensor_id}"
    return None


def manifest_shape_failure(placement: Any, label: str) -> Optional[str]:
    """The first shape failure of a placement restored or forged without its checks, as the
    planner's and a logical plan's rules read it (spec §8.6, §10: its identity, parts, and the
    manifest-wide ``tensors`` and ``fragments`` tuples): ``placement_shape_failure`` (a part's
    fragment naming a tensor the part does not declare: "unknown tensor_id: {id}", which the
    rules' catalog lookups meet as ``KeyError``), then both tuples typed. ``label`` names the
    placement ("logical transfer plan target placement") when it has no field state at all."""
    state = instance_state(placement)
    if state is None:
        return f"{label} is invalid"
    failure = placement_shape_failure(placement)
    if failure is not None:
        return failure
    return typed_items_failure(
        state.get("tensors"), "WeightPlacementManifest tensors", TensorDescriptor, TENSOR_FIELDS
    ) or typed_items_failure(
        state.get("fragments"), "WeightPlacementManifest fragments", PlacementFragment, PLACEMENT_FRAGMENT_FIELDS
    )


def typed_items_failure(items: Any, label: str, cls: type, fields: tuple[tuple[str, str], ...]) -> Optional[str]:
    """The item-sequence messages of ``label`` (§1.3) for ``items`` that is not a tuple of
    ``cls``, else the first field failure of an item; None when all are typed."""
    if type(items) is not tuple:
        return f"{label} must be a sequence"
    for item in items:
        if not isinstance(item, cls):
            return f"{label} must contain {cls.__name__}"
        failure = field_type_failure(item, fields)
        if failure is not None:
            return failure
    return None


_EVIDENCE_STRS = ("resource_id", "revision", "placement_id", "placement_digest", "instance_id", "participant_id", "lease_id")


def evidence_shape_failure(evidence: Any) -> Optional[str]:
    """The first shape failure of a (default-pickled) evidence that the validated-state routine
    reads before its own checks: every field present, the scalars with their exact types
    (the ``WeightRuntimeBindingManifest`` messages of spec §4.9), ``fragments`` a tuple or list
    of ``RuntimeBindingFragment`` (restored through their constructor, spec §13)."""
    state = instance_state(evidence)
    if state is None:
        return "runtime attestation evidence is invalid"
    for name in _EVIDENCE_STRS:
        if type(state.get(name)) is not str:
            return f"{name} must be a non-empty string"
    if type(state.get("generation")) is not int:
        return "generation must be an integer"
    fragments = state.get("fragments")
    if type(fragments) is not tuple and type(fragments) is not list:
        return "WeightRuntimeBindingManifest fragments must be a sequence"
    for fragment in fragments:
        if not isinstance(fragment, RuntimeBindingFragment):
            return "WeightRuntimeBindingManifest fragments must contain RuntimeBindingFragment"
        failure = field_type_failure(fragment, RUNTIME_FRAGMENT_FIELDS)
        if failure is not None:
            return failure
    return None


def binding_shape_failure(bindings: Any) -> Optional[str]:
    """The first shape failure of the ``WeightRuntimeBindingManifest`` items of ``bindings`` (a
    tuple or list; anything else, and items of other classes, are left to the rules): a binding
    has the evidence's nine fields, with the same §4.9 messages (``evidence_shape_failure``).
    For the public entry points that take bindings, after a rule raised Python's error on one
    restored by its default pickling (spec §13) or forged in place (fuzz finding F11)."""
    from ..runtime import WeightRuntimeBindingManifest

    for binding in bindings if type(bindings) in (tuple, list) else ():
        if isinstance(binding, WeightRuntimeBindingManifest):
            failure = evidence_shape_failure(binding)
            if failure is not None:
                return failure
    return None


def attestable_shape_failure(placement: Any, evidence: Any) -> Optional[str]:
    """For the validated-state routine of an attestation restored from pickled
    ``(placement, evidence)`` (spec §9.2, §13): ``None`` when steps 1-2 will reject the pair
    anyway (not instances) or when both have the shape that routine reads; otherwise the
    message of the first shape failure, the evidence first (step 3 iterates its fragments
    before step 4 reads the placement)."""
    from ..placement import WeightPlacementManifest
    from .attestation import RuntimeBindingEvidence

    if not isinstance(placement, WeightPlacementManifest) or not isinstance(evidence, RuntimeBindingEvidence):
        return None
    return evidence_shape_failure(evidence) or placement_shape_failure(placement)

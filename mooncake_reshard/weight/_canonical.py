"""Canonical JSON objects of manifest values (spec §6, §7.1).

The same objects feed the canonical ids (hashed by the C encoder) and the wire
JSON, so the two can never drift apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Optional

from .. import _native
from .topology import ParallelTopology, rank_object
from .types import (
    OwnershipAxis,
    ParallelRank,
    PlacementFragment,
    ReplicatedAxis,
    SplitAxis,
    TensorDescriptor,
    _fragment_fields_state,
    axis_identity,
)

__all__ = [
    "canonical_json_with_parts",
    "fragment_object",
    "part_object",
    "placement_wire_json",
    "rank_object",
    "tensor_object",
    "tensors_json",
    "topology_object",
]


# the exact classes the batched encodings read without running Python code (any other tensor,
# axis, fragment or rank class declines to the in-order encoding, which reads in list order)
_TENSOR_TYPES = (
    TensorDescriptor,
    SplitAxis,
    ReplicatedAxis,
    OwnershipAxis,
    PlacementFragment,
    ParallelRank,
)


def tensor_object(tensor: TensorDescriptor) -> dict[str, Any]:
    """``{tensor_id, global_shape, dtype, itemsize, shard_dims, layout_fingerprint,
    parallel_axes, layer_id, expert_id}``."""
    return {
        "tensor_id": tensor.tensor_id,
        "global_shape": tensor.global_shape,
        "dtype": tensor.dtype,
        "itemsize": tensor.itemsize,
        "shard_dims": tensor.shard_dims,
        "layout_fingerprint": tensor.layout_fingerprint,
        "parallel_axes": [axis_identity(axis) for axis in tensor.parallel_axes],
        "layer_id": tensor.layer_id,
        "expert_id": tensor.expert_id,
    }


def tensors_json(tensors: Sequence[TensorDescriptor]) -> str:
    """``canonical_json([tensor_object(t) for t in tensors])``, encoded by the C core straight
    from the descriptors (no intermediate dicts)."""
    if type(tensors) is not tuple and type(tensors) is not list:
        tensors = list(tensors)
    native: Optional[str] = _native.canonical_tensors_json(tensors, SplitAxis, ReplicatedAxis)
    if native is None:  # a parallel_axes the C pass does not iterate (not an exact tuple or list)
        return _native.canonical_json([tensor_object(tensor) for tensor in tensors])
    return native


def fragment_object(
    fragment: PlacementFragment, rank_cache: Optional[dict[int, Any]] = None
) -> dict[str, Any]:
    """Placement fragment object; ``pipeline_stage_id`` only when set.

    ``rank_cache`` (keyed by ``id(rank)``, valid for one encoding) shares rank objects.
    """
    state = _fragment_fields_state(fragment)  # its fields (C layout, no __dict__)
    rank = state["rank"]
    if rank_cache is None:
        rank_json = rank_object(rank)
    else:
        rank_json = rank_cache.get(id(rank))
        if rank_json is None:
            rank_json = rank_cache[id(rank)] = rank_object(rank)
    content = {
        "placement_fragment_id": state["placement_fragment_id"],
        "tensor_id": state["tensor_id"],
        "global_offset": state["global_offset"],
        "local_shape": state["local_shape"],
        "nbytes": state["nbytes"],
        "rank": rank_json,
        "aliases": state["aliases"],
    }
    stage = state["pipeline_stage_id"]
    if stage is not None:
        content["pipeline_stage_id"] = stage
    return content


def part_object(
    participant_id: str, rank: Any, fragments: Iterable[PlacementFragment]
) -> dict[str, Any]:
    """``{participant_id, rank, fragments}``."""
    rank_json = rank_object(rank)
    rank_cache = {id(rank): rank_json}
    return {
        "participant_id": participant_id,
        "rank": rank_json,
        "fragments": [fragment_object(fragment, rank_cache) for fragment in fragments],
    }


def topology_object(topology: ParallelTopology) -> dict[str, Any]:
    """``{tp_size, pp_size, ep_size, dp_size, topology_id, participants}``."""
    return {
        "tp_size": topology.tp_size,
        "pp_size": topology.pp_size,
        "ep_size": topology.ep_size,
        "dp_size": topology.dp_size,
        "topology_id": topology.topology_id,
        "participants": [
            {"participant_id": participant.participant_id, "rank": rank_object(participant.rank)}
            for participant in topology.participants
        ],
    }


def _part_pairs(parts: Iterable[Any]) -> list[tuple[Any, str]]:
    pairs = []
    for part in parts:
        fragments = part.fragments
        if type(fragments) is not tuple and type(fragments) is not list:
            fragments = tuple(fragments)
        tail = _native.canonical_json(
            {"participant_id": part.participant_id, "rank": rank_object(part.rank)}
        )
        pairs.append((fragments, tail))
    return pairs


def parts_json(parts: Iterable[Any]) -> str:
    """``canonical_json([part_object(p.participant_id, p.rank, p.fragments) for p in parts])``.

    Fragments are encoded by the C core straight from their state (no intermediate dicts), read
    in list order as ``part_object`` reads them (batched when every value is of the exact
    classes, which runs no Python code).
    """
    return _native.canonical_parts_json(_part_pairs(parts), types=_TENSOR_TYPES)


def canonical_json_with_parts(
    payload: dict[str, Any],
    parts: Iterable[Any],
    *,
    sha256: bool = False,
    tensors: Optional[Sequence[TensorDescriptor]] = None,
) -> str:
    """``canonical_json({**payload, "parts": [part_object(...) for part in parts]})`` (ASCII),
    or with ``sha256=True`` the hex SHA-256 of that text. With ``tensors``, the object also holds
    ``"tensors": [tensor_object(t) for t in tensors]`` (encoded in C, no dicts).

    ``payload`` must not hold "parts" (nor "tensors" when ``tensors`` is given); when every key
    of it sorts after "parts" (the placement content and wire objects), the parts text is written
    in front of it in one C buffer.
    """
    if tensors is not None:
        if _fusable(payload):
            return _fused_with_tensors(payload, parts, sha256, tensors, None)[0]
        payload = dict(payload)
        payload["tensors"] = [tensor_object(tensor) for tensor in tensors]
    if payload and all(type(key) is str and key > "parts" for key in payload):
        rest = _native.canonical_json(payload)
        return _native.canonical_parts_json(
            _part_pairs(parts),
            prefix='{"parts":',
            suffix="," + rest[1:],
            sha256=sha256,
            types=_TENSOR_TYPES,
        )
    content = dict(payload)
    content["parts"] = [
        part_object(part.participant_id, part.rank, part.fragments) for part in parts
    ]
    if sha256:
        return _native.canonical_sha256(content)
    return _native.canonical_json(content)


def _fusable(payload: dict[str, Any]) -> bool:
    return bool(payload) and all(
        type(key) is str and key > "parts" and key != "tensors" for key in payload
    )


def _middle_and_tail(payload: dict[str, Any]) -> tuple[str, str]:
    """The text between the parts list and the tensors list, and after the tensors list, of
    ``canonical_json({**payload, "parts": ..., "tensors": ...})`` (every key of ``payload``
    sorting after "parts")."""
    before = {key: value for key, value in payload.items() if key < "tensors"}
    after = {key: value for key, value in payload.items() if key > "tensors"}
    middle = ","
    if before:
        middle += _native.canonical_json(before)[1:-1] + ","
    middle += '"tensors":'
    tail = "}"
    if after:
        tail = "," + _native.canonical_json(after)[1:-1] + "}"
    return middle, tail


def _fused_with_tensors(
    payload: dict[str, Any],
    parts: Iterable[Any],
    sha256: bool,
    tensors: Sequence[TensorDescriptor],
    wire: Optional[dict[str, Any]],
) -> tuple[str, Optional[str]]:
    """``canonical_json_with_parts(payload, parts, sha256=sha256, tensors=tensors)`` for a
    ``payload`` every key of which sorts after "parts" (and is not "tensors"), and ``None``; or,
    with ``wire`` (``sha256`` set), the same and the hex SHA-256 of the canonical JSON of ``{**wire,
    "placement_id": "sha256:" + <that digest>, "parts": ..., "tensors": ...}`` over the same
    parts and tensors, the parts and tensors encoded once for both (``None`` in its place when
    the C encoder declines or ``wire`` does not have that shape: the caller encodes it later)."""
    middle = ","
    before = {key: value for key, value in payload.items() if key < "tensors"}
    if before:
        middle += _native.canonical_json(before)[1:-1] + ","
    middle += '"tensors":'
    tensor_items = tensors if type(tensors) is tuple or type(tensors) is list else list(tensors)
    try:
        after = {key: value for key, value in payload.items() if key > "tensors"}
        tail = "}"
        if after:
            tail = "," + _native.canonical_json(after)[1:-1] + "}"
        pairs = _part_pairs(parts)
    except Exception:
        tensors_json(tensor_items)  # an error of the tensors comes first, as it did
        raise
    wire_texts = None
    if wire is not None and sha256 and _fusable(wire) and all(key > "placement_id" for key in wire):
        # "placement_id" sorts first among the wire object's keys after "parts" (every key of
        # wire sorts after it), so its text from the parts on is ',"placement_id":"sha256:' +
        # the digest + '"' + the middle text of wire alone
        try:
            wire_middle, wire_tail = _middle_and_tail(wire)
        except Exception:  # not encodable here: the digest is left to placement_wire_json
            pass
        else:
            wire_texts = (',"placement_id":"sha256:', '"' + wire_middle, wire_tail)
    # The tensors list encoded by C straight after the middle text, into the same
    # buffer or digest (no text object of it, no copy); None: something unusual, then
    # the exact encoding below raises the same errors as before.
    fused = _native.canonical_parts_json(
        pairs,
        prefix='{"parts":',
        suffix=middle,
        sha256=sha256,
        tensors=tensor_items,
        after=tail,
        types=_TENSOR_TYPES,
        wire=wire_texts,
    )
    if type(fused) is tuple:
        return fused[0], fused[1]
    if fused is not None:
        return fused, None
    # one join: the tensors text can be large, copy it once; the fused form declined
    # before any read that could run Python code, the in-order encoding reads the
    # tensors, then the fragments in list order (as the dict encoding below does)
    text = "".join([middle, tensors_json(tensor_items), tail])
    return _native.canonical_parts_json(pairs, prefix='{"parts":', suffix=text, sha256=sha256), None


def content_and_wire_sha256(
    payload: dict[str, Any],
    parts: Iterable[Any],
    tensors: Sequence[TensorDescriptor],
    wire: Optional[dict[str, Any]],
) -> tuple[str, Optional[str]]:
    """``(canonical_json_with_parts(payload, parts, sha256=True, tensors=tensors), digest)``,
    ``digest`` being the hex SHA-256 of ``canonical_json_with_parts({**wire, "placement_id":
    "sha256:" + <the first>}, parts, tensors=tensors)`` (the placement's wire digest when
    ``payload`` is its content and ``wire`` its other wire fields), computed from the same
    encoding of the parts and tensors; ``None`` in its place when that is not done here."""
    if _fusable(payload):
        return _fused_with_tensors(payload, parts, True, tensors, wire)
    return canonical_json_with_parts(payload, parts, sha256=True, tensors=tensors), None


def placement_wire_json(placement: Any, *, sha256: bool = False) -> str:
    """The canonical wire JSON of a ``WeightPlacementManifest`` (spec §7.1, the text of
    ``serde.weight_placement_to_json``), or with ``sha256=True`` its hex SHA-256 (the §6.4
    digest) without building the text as a str."""
    payload: dict[str, Any] = {
        "resource_kind": "model_weight",
        "resource_id": placement.resource_id,
        "revision": placement.revision,
        "weight_generation": placement.weight_generation,
        "placement_set_id": placement.placement_set_id,
        "placement_id": placement.placement_id,
        "topology": topology_object(placement.topology),
    }
    return canonical_json_with_parts(
        payload, placement.parts, sha256=sha256, tensors=placement.tensors
    )

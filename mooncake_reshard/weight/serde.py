"""Placement JSON wire schema (spec §7): the only wire format for placements."""

from __future__ import annotations

from typing import Any, Optional

from ..contracts.ids import ParticipantId, TopologyId
from ._canonical import placement_wire_json
from ._json import load_strict_json
from .part import WeightPlacementPart
from .placement import WeightPlacementManifest
from .topology import ParallelTopology, TopologyParticipant
from .types import (
    AXIS_ORDER,
    OwnershipAxis,
    ParallelAxis,
    ParallelRank,
    PlacementFragment,
    ReplicatedAxis,
    SplitAxis,
    TensorDescriptor,
)

__all__ = ["weight_placement_from_json", "weight_placement_to_json"]

_TOP_KEYS = frozenset(
    (
        "resource_kind",
        "resource_id",
        "revision",
        "weight_generation",
        "placement_set_id",
        "placement_id",
        "topology",
        "tensors",
        "parts",
    )
)
_TOPOLOGY_KEYS = frozenset(
    ("tp_size", "pp_size", "ep_size", "dp_size", "topology_id", "participants")
)
_PARTICIPANT_KEYS = frozenset(("participant_id", "rank"))
_RANK_KEYS = frozenset(("dp", "tp", "pp", "ep"))
_TENSOR_KEYS = frozenset(
    (
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
)
_SPLIT_AXIS_KEYS = frozenset(("semantics", "kind", "dim"))
_PLAIN_AXIS_KEYS = frozenset(("semantics", "kind"))
_PART_KEYS = frozenset(("participant_id", "rank", "fragments"))
_FRAGMENT_KEYS = frozenset(
    (
        "placement_fragment_id",
        "tensor_id",
        "global_offset",
        "local_shape",
        "nbytes",
        "rank",
        "aliases",
    )
)
_STAGED_FRAGMENT_KEYS = _FRAGMENT_KEYS | {"pipeline_stage_id"}


def weight_placement_to_json(placement: WeightPlacementManifest) -> str:
    """Canonical JSON text of ``placement`` (sorted keys, compact, ASCII)."""
    if not isinstance(placement, WeightPlacementManifest):
        raise ValueError("placement must be a WeightPlacementManifest")
    # The same text the digest hashes; the tensor catalog is encoded in C without dicts.
    return placement_wire_json(placement)


def _object(value: Any, label: str, keys: frozenset[str]) -> dict[str, Any]:
    if type(value) is not dict:
        raise ValueError(f"{label} must be a JSON object")
    if value.keys() != keys:
        raise ValueError(f"{label} schema fields do not match contract")
    return value


def _list(value: Any, label: str) -> list[Any]:
    if type(value) is not list:
        raise ValueError(f"{label} must be a sequence")
    return value


def _int(value: Any, label: str, minimum: int) -> int:
    if type(value) is not int or value < minimum:
        raise ValueError(f"{label} must be an integer at least {minimum}")
    return value


def _optional_int(value: Any, label: str, minimum: int) -> Any:
    return None if value is None else _int(value, label, minimum)


def _ints(value: Any, label: str, minimum: int) -> tuple[int, ...]:
    items = _list(value, label)
    for item in items:
        if type(item) is not int or item < minimum:
            _int(item, label, minimum)
    return tuple(items)


def _str(value: Any, label: str) -> str:
    if type(value) is not str or not value:
        raise ValueError(f"{label} must be a non-empty string")
    return value


def _rank(
    value: Any, label: str, cache: Optional[dict[tuple[int, ...], ParallelRank]] = None
) -> ParallelRank:
    raw = _object(value, label, _RANK_KEYS)
    coordinates = (
        _int(raw["dp"], "rank dp", 0),
        _int(raw["tp"], "rank tp", 0),
        _int(raw["pp"], "rank pp", 0),
        _int(raw["ep"], "rank ep", 0),
    )
    if cache is None:
        return ParallelRank(*coordinates)
    rank = cache.get(coordinates)
    if rank is None:
        rank = cache[coordinates] = ParallelRank(*coordinates)
    return rank


def _topology(value: Any) -> ParallelTopology:
    # The reference's order, where the spec gives none: the participants, then the sizes, then
    # the id (what a document with several faults reports first).
    raw = _object(value, "parallel topology", _TOPOLOGY_KEYS)
    participants = []
    for index, item in enumerate(_list(raw["participants"], "parallel topology participants")):
        entry = _object(item, f"parallel topology participant {index}", _PARTICIPANT_KEYS)
        participants.append(
            TopologyParticipant(
                ParticipantId(_str(entry["participant_id"], "participant_id")),
                _rank(entry["rank"], f"parallel topology rank {index}"),
            )
        )
    sizes = {
        name: _int(raw[name], name, 1) for name in ("tp_size", "pp_size", "ep_size", "dp_size")
    }
    topology_id = _str(raw["topology_id"], "topology_id")
    return ParallelTopology(
        tp_size=sizes["tp_size"],
        pp_size=sizes["pp_size"],
        ep_size=sizes["ep_size"],
        dp_size=sizes["dp_size"],
        participants=tuple(participants),
        topology_id=TopologyId(topology_id),
    )


def _axis(value: Any, index: int) -> ParallelAxis:
    label = f"placement tensor parallel axis {index}"
    if type(value) is not dict:
        raise ValueError(f"{label} must be a JSON object")
    semantics = _str(value.get("semantics"), "axis semantics")
    if semantics == "split":
        keys = _SPLIT_AXIS_KEYS
    elif semantics in ("replicated", "ownership"):
        keys = _PLAIN_AXIS_KEYS
    else:
        raise ValueError(f"unsupported parallel axis semantics: {semantics}")
    _object(value, label, keys)
    kind = _str(value["kind"], "parallel axis kind")
    if kind not in AXIS_ORDER:
        raise ValueError(f"unsupported parallel axis kind: {kind}")
    if semantics == "split":
        if kind not in ("ep", "tp"):
            raise ValueError(f"{kind} cannot use split semantics")
        return SplitAxis(kind, _int(value["dim"], "split axis dim", 0))  # type: ignore[arg-type]
    if semantics == "replicated":
        return ReplicatedAxis(kind)  # type: ignore[arg-type]
    return OwnershipAxis(kind)  # type: ignore[arg-type]


def _tensor(value: Any, index: int) -> TensorDescriptor:
    raw = _object(value, f"placement tensor {index}", _TENSOR_KEYS)
    tensor_id = _str(raw["tensor_id"], "tensor_id")
    global_shape = _ints(raw["global_shape"], "global_shape", 1)
    dtype = _str(raw["dtype"], "dtype")
    itemsize = _int(raw["itemsize"], "itemsize", 1)
    shard_dims = _ints(raw["shard_dims"], "shard_dims", 0)
    layout_fingerprint = _str(raw["layout_fingerprint"], "layout_fingerprint")
    axes = tuple(
        _axis(item, axis_index)
        for axis_index, item in enumerate(
            _list(raw["parallel_axes"], "placement tensor parallel_axes")
        )
    )
    return TensorDescriptor(
        tensor_id=tensor_id,  # type: ignore[arg-type]
        global_shape=global_shape,
        dtype=dtype,
        itemsize=itemsize,
        shard_dims=shard_dims,
        layout_fingerprint=layout_fingerprint,
        parallel_axes=axes,
        layer_id=_optional_int(raw["layer_id"], "layer_id", 0),
        expert_id=_optional_int(raw["expert_id"], "expert_id", 0),
    )


def _fragment(
    value: Any, index: int, ranks: dict[tuple[int, ...], ParallelRank]
) -> PlacementFragment:
    if type(value) is not dict:
        raise ValueError(f"placement fragment {index} must be a JSON object")
    keys = value.keys()
    if keys != _FRAGMENT_KEYS and keys != _STAGED_FRAGMENT_KEYS:
        raise ValueError(f"placement fragment {index} has an invalid schema")
    placement_fragment_id = _str(value["placement_fragment_id"], "placement_fragment_id")
    tensor_id = _str(value["tensor_id"], "tensor_id")
    global_offset = _ints(value["global_offset"], "global_offset", 0)
    local_shape = _ints(value["local_shape"], "local_shape", 1)
    nbytes = _int(value["nbytes"], "nbytes", 1)
    rank = _rank(value["rank"], f"placement rank {index}", ranks)
    # (the stage before the aliases: the reference's order, where the spec gives none)
    stage = _optional_int(value.get("pipeline_stage_id"), "pipeline_stage_id", 0)
    aliases = tuple(_str(item, "alias") for item in _list(value["aliases"], "aliases"))
    return PlacementFragment(
        tensor_id,  # type: ignore[arg-type]
        global_offset,
        local_shape,
        nbytes,
        rank,
        stage,
        aliases,  # type: ignore[arg-type]
        placement_fragment_id,  # type: ignore[arg-type]
    )


def weight_placement_from_json(value: str) -> WeightPlacementManifest:
    """Decode and fully revalidate a placement from its canonical JSON text.

    Only the exact canonical schema is accepted: no aliases of field names, no
    extra keys, strict integers and strings, no duplicate keys, finite numbers.
    """
    if type(value) is not str:
        raise ValueError("placement manifest is not valid JSON")
    raw = _object(
        load_strict_json(value, "placement manifest is not valid JSON"),
        "placement manifest",
        _TOP_KEYS,
    )
    resource_kind = raw["resource_kind"]
    if type(resource_kind) is not str or resource_kind != "model_weight":
        raise ValueError("placement manifest resource_kind must be model_weight")
    resource_id = _str(raw["resource_id"], "resource_id")
    revision = _str(raw["revision"], "revision")
    weight_generation = _int(raw["weight_generation"], "weight_generation", 0)
    placement_set_id = _str(raw["placement_set_id"], "placement_set_id")
    placement_id = _str(raw["placement_id"], "placement_id")
    topology = _topology(raw["topology"])
    catalog: dict[str, TensorDescriptor] = {}
    for index, item in enumerate(_list(raw["tensors"], "placement tensors")):
        tensor = _tensor(item, index)
        if tensor.tensor_id in catalog:
            raise ValueError("duplicate tensor_id in placement JSON")
        catalog[tensor.tensor_id] = tensor
    # Each part is decoded and built before the next one is read, and the unknown and
    # unreferenced tensors are the first by id: the reference's order, where the spec gives
    # none (what a document with several faults reports first).
    parts = []
    referenced: set[str] = set()
    ranks: dict[tuple[int, ...], ParallelRank] = {}
    for index, item in enumerate(_list(raw["parts"], "placement parts")):
        entry = _object(item, f"placement part {index}", _PART_KEYS)
        participant_id = _str(entry["participant_id"], "participant_id")
        rank = _rank(entry["rank"], f"placement part rank {index}")
        fragments = [
            _fragment(fragment, fragment_index, ranks)
            for fragment_index, fragment in enumerate(
                _list(entry["fragments"], "placement part fragments")
            )
        ]
        tensor_ids = sorted({fragment.tensor_id for fragment in fragments})
        for tensor_id in tensor_ids:
            if tensor_id not in catalog:
                raise ValueError(f"unknown tensor_id in placement part: {tensor_id}")
        referenced.update(tensor_ids)
        parts.append(
            WeightPlacementPart(
                resource_id=resource_id,  # type: ignore[arg-type]
                revision=revision,  # type: ignore[arg-type]
                weight_generation=weight_generation,
                placement_set_id=placement_set_id,  # type: ignore[arg-type]
                topology_id=topology.topology_id,
                participant_id=participant_id,  # type: ignore[arg-type]
                rank=rank,
                tensors=tuple(catalog[tensor_id] for tensor_id in tensor_ids),
                fragments=tuple(fragments),
            )
        )
    unreferenced = sorted(set(catalog) - referenced)
    if unreferenced:
        raise ValueError(f"placement JSON contains an unreferenced tensor: {unreferenced[0]}")
    return WeightPlacementManifest(
        resource_id=resource_id,  # type: ignore[arg-type]
        revision=revision,  # type: ignore[arg-type]
        weight_generation=weight_generation,
        placement_set_id=placement_set_id,  # type: ignore[arg-type]
        topology=topology,
        parts=tuple(parts),
        placement_id=placement_id,  # type: ignore[arg-type]
    )

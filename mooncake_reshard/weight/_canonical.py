"""Canonical JSON objects of manifest values (spec §6, §7.1).

The same objects feed the canonical ids (hashed by the C encoder) and the wire
JSON, so the two can never drift apart.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Optional

from .topology import ParallelTopology, rank_object
from .types import PlacementFragment, TensorDescriptor, axis_identity

__all__ = [
    "fragment_object",
    "part_object",
    "rank_object",
    "tensor_object",
    "topology_object",
]


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


def fragment_object(
    fragment: PlacementFragment, rank_cache: Optional[dict[int, Any]] = None
) -> dict[str, Any]:
    """Placement fragment object; ``pipeline_stage_id`` only when set.

    ``rank_cache`` (keyed by ``id(rank)``, valid for one encoding) shares rank objects.
    """
    state = fragment.__dict__
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

"""``WeightPlacementManifest.from_fragments`` names the first unknown and the first unreferenced
tensor by id (spec §5 ``from_fragments`` steps 3 and 4 name no order; the released reference
sorts, and ``conformance/`` found ours naming the first in input order)."""

from __future__ import annotations

import dataclasses

import pytest

from known_answers import source_placement

from mooncake.reshard.weight import PlacementFragment, WeightPlacementManifest

CASE = "tp2_to_tp3_uneven_fp32"  # one tensor "w" over two participants


def _assemble(tensors: tuple, fragments: tuple) -> WeightPlacementManifest:
    placement = source_placement(CASE)
    return WeightPlacementManifest.from_fragments(
        resource_id=placement.resource_id, revision=placement.revision,
        weight_generation=placement.weight_generation, placement_set_id=placement.placement_set_id,
        topology=placement.topology, tensors=tensors, fragments=fragments,
    )


def _renamed(fragment: PlacementFragment, tensor_id: str) -> PlacementFragment:
    return PlacementFragment(tensor_id, fragment.global_offset, fragment.local_shape, fragment.nbytes,
                             fragment.rank, placement_fragment_id=f"{fragment.placement_fragment_id}-{tensor_id}")


def test_the_unknown_tensor_named_is_the_first_by_id() -> None:
    placement = source_placement(CASE)
    first = placement.fragments[0]
    fragments = placement.fragments + (_renamed(first, "z"), _renamed(first, "b"))
    with pytest.raises(ValueError, match=r"^unknown tensor_id: b$"):
        _assemble(placement.tensors, fragments)


def test_the_unreferenced_tensor_named_is_the_first_by_id() -> None:
    placement = source_placement(CASE)
    tensor = placement.tensors[0]
    tensors = placement.tensors + tuple(dataclasses.replace(tensor, tensor_id=name) for name in ("z", "m"))
    with pytest.raises(ValueError, match=r"^global placement contains an unreferenced tensor: m$"):
        _assemble(tensors, placement.fragments)


def test_the_placement_assembles_without_the_edits() -> None:
    placement = source_placement(CASE)
    assert _assemble(placement.tensors, placement.fragments) == placement

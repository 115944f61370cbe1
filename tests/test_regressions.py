"""Regression tests for bugs found by fuzzing (fuzz/findings/)."""

import re

import pytest

from mooncake.reshard.weight import (
    ParallelRank,
    ParallelTopology,
    PlacementFragment,
    SplitAxis,
    TensorDescriptor,
    TopologyParticipant,
    WeightPlacementManifest,
    weight_placement_from_json,
    weight_placement_to_json,
)

SPLIT_PARTICIPANT = (
    "global placement tensor is not fully covered: missing or unexpected split-axis participant for w"
)


def _tp_placement(tp_size: int) -> WeightPlacementManifest:
    tensor = TensorDescriptor(
        tensor_id="w", global_shape=(4, 4), dtype="bf16", itemsize=2, shard_dims=(0,),
        layout_fingerprint="f", parallel_axes=(SplitAxis("tp", 0),),
    )
    topology = ParallelTopology(
        tp_size=tp_size, pp_size=1, ep_size=1, dp_size=1,
        participants=(TopologyParticipant("w0", ParallelRank()),),
    )
    return WeightPlacementManifest.from_fragments(
        resource_id="m", revision="r", weight_generation=1, placement_set_id="s",
        topology=topology, tensors=(tensor,),
        fragments=(PlacementFragment("w", (0, 0), (4, 4), 32, ParallelRank()),),
    )


@pytest.mark.parametrize("tp_size", [2, 2**16 + 1, 2**62, 2**200])
def test_f1_split_axis_size_far_above_participants_is_rejected_without_enumerating(tp_size: int) -> None:
    # F1: the split-participation check built set(range(tp_size)) and hung for huge sizes.
    with pytest.raises(ValueError, match=re.escape(SPLIT_PARTICIPANT)):
        _tp_placement(tp_size)


def test_f1_huge_axis_size_from_json_is_rejected() -> None:
    wire = weight_placement_to_json(_tp_placement(1))
    forged = wire.replace('"tp_size":1', f'"tp_size":{2**62}')
    assert forged != wire
    with pytest.raises(ValueError):
        weight_placement_from_json(forged)

"""Build a small TP2 placement, assemble it, and round-trip it through canonical JSON.

Run: python examples/placement_roundtrip.py
"""

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


def main() -> None:
    tensor = TensorDescriptor(
        tensor_id="layers.0.mlp.w1",
        global_shape=(8, 4),
        dtype="bfloat16",
        itemsize=2,
        shard_dims=(0,),
        layout_fingerprint="example:bf16:v1",
        parallel_axes=(SplitAxis("tp", 0),),
        layer_id=0,
    )
    topology = ParallelTopology(
        tp_size=2,
        pp_size=1,
        ep_size=1,
        dp_size=1,
        participants=tuple(
            TopologyParticipant(f"worker-{tp}", ParallelRank(tp=tp)) for tp in range(2)
        ),
    )
    fragments = tuple(
        PlacementFragment(
            tensor_id=tensor.tensor_id,
            global_offset=(4 * tp, 0),
            local_shape=(4, 4),
            nbytes=4 * 4 * 2,
            rank=ParallelRank(tp=tp),
        )
        for tp in range(2)
    )
    placement = WeightPlacementManifest.from_fragments(
        resource_id="example-model",
        revision="step-1",
        weight_generation=1,
        placement_set_id="example-set",
        topology=topology,
        tensors=(tensor,),
        fragments=fragments,
    )
    wire = weight_placement_to_json(placement)
    restored = weight_placement_from_json(wire)
    assert restored == placement and restored.digest == placement.digest
    print(f"placement_id {placement.placement_id}")
    print(f"digest       {placement.digest}")
    print(f"json bytes   {len(wire)}")


if __name__ == "__main__":
    main()

"""F1 reproducer: hangs (and grows memory) instead of raising ValueError."""
from mooncake.reshard.weight import (
    ParallelRank, ParallelTopology, PlacementFragment, SplitAxis, TensorDescriptor, TopologyParticipant,
    WeightPlacementManifest,
)

t = TensorDescriptor(tensor_id="w", global_shape=(4, 4), dtype="bf16", itemsize=2, shard_dims=(0,),
                     layout_fingerprint="f", parallel_axes=(SplitAxis("tp", 0),))
topo = ParallelTopology(tp_size=2**62, pp_size=1, ep_size=1, dp_size=1,
                        participants=(TopologyParticipant("w0", ParallelRank()),))
try:
    WeightPlacementManifest.from_fragments(
        resource_id="m", revision="r", weight_generation=1, placement_set_id="s", topology=topo, tensors=(t,),
        fragments=(PlacementFragment("w", (0, 0), (4, 4), 32, ParallelRank()),))
except ValueError as exc:
    print("OK (fixed):", exc)

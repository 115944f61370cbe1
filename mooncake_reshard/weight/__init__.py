"""The public model-weight API of ``mooncake.reshard`` (spec §2.2).

Topology, tensor descriptors, placements, runtime bindings, placement JSON and
stored manifests; the logical planner and the runtime binder are re-exported from
``mooncake.reshard.weight.planner``.
"""

from __future__ import annotations

from .manifest import (
    OwnershipAxis,
    ParallelRank,
    ParallelTopology,
    PlacementFragment,
    ReplicatedAxis,
    RuntimeBindingFragment,
    SplitAxis,
    TensorDescriptor,
    TopologyParticipant,
    WeightPlacementManifest,
    WeightPlacementPart,
    WeightRuntimeBindingManifest,
    validate_runtime_binding,
    validate_runtime_bindings,
)
from .serde import weight_placement_from_json, weight_placement_to_json
from .storage_manifest import StoredFragmentSnapshot, StoredWeightManifest

__all__ = [
    "ParallelRank",
    "ParallelTopology",
    "PlacementFragment",
    "WeightPlacementManifest",
    "WeightPlacementPart",
    "RuntimeBindingFragment",
    "WeightRuntimeBindingManifest",
    "SplitAxis",
    "ReplicatedAxis",
    "OwnershipAxis",
    "TensorDescriptor",
    "TopologyParticipant",
    "validate_runtime_binding",
    "validate_runtime_bindings",
    "weight_placement_from_json",
    "weight_placement_to_json",
    "StoredFragmentSnapshot",
    "StoredWeightManifest",
    # --- planner names (added by the planner integration) ---
    # The 22 names of weight.planner.__all__ follow here, in the order of spec §2.2,
    # imported from .planner as the same objects.
]

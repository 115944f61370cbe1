"""Manifest-layer facade of ``mooncake.reshard.weight`` (spec §2.2, §2.3)."""

from __future__ import annotations

from ..contracts.fragments import RuntimeBindingFragment
from .binding import validate_runtime_binding, validate_runtime_bindings
from .part import WeightPlacementPart
from .placement import WeightPlacementManifest
from .runtime import WeightRuntimeBindingManifest
from .topology import ParallelTopology, TopologyParticipant
from .types import (
    OwnershipAxis,
    ParallelRank,
    PlacementFragment,
    ReplicatedAxis,
    SplitAxis,
    TensorDescriptor,
)

__all__ = [
    "ParallelRank",
    "ParallelTopology",
    "PlacementFragment",
    "TopologyParticipant",
    "WeightPlacementManifest",
    "WeightPlacementPart",
    "RuntimeBindingFragment",
    "WeightRuntimeBindingManifest",
    "SplitAxis",
    "ReplicatedAxis",
    "OwnershipAxis",
    "TensorDescriptor",
    "validate_runtime_binding",
    "validate_runtime_bindings",
]

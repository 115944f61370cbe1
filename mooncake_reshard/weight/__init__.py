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
from .planner import (
    bind_logical_transfer_plan,
    BoundWeightFragment,
    ExecutableTransferOperation,
    ExecutorTransferPlan,
    LiveTransferOperation,
    LogicalTransferOperation,
    LogicalTransferPlan,
    PipelineRouteGroup,
    PlacementExecutorPlan,
    plan_placement_transfer,
    plan_placement_transfer_to_local_target,
    plan_stored_transfer_to_target_placement,
    PlanningLimits,
    resolve_executor_plan,
    resolve_executor_plans,
    RuntimeBindingAttestation,
    RuntimeBindingEvidence,
    RuntimeFragmentSnapshot,
    RuntimeTensorOwner,
    StoredLoadOperation,
    TransferPlan,
    TransferRegion,
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
    "BoundWeightFragment",
    "ExecutableTransferOperation",
    "ExecutorTransferPlan",
    "LiveTransferOperation",
    "LogicalTransferPlan",
    "LogicalTransferOperation",
    "PipelineRouteGroup",
    "PlacementExecutorPlan",
    "PlanningLimits",
    "RuntimeFragmentSnapshot",
    "RuntimeBindingAttestation",
    "RuntimeBindingEvidence",
    "RuntimeTensorOwner",
    "StoredLoadOperation",
    "TransferPlan",
    "TransferRegion",
    "bind_logical_transfer_plan",
    "plan_placement_transfer",
    "plan_placement_transfer_to_local_target",
    "plan_stored_transfer_to_target_placement",
    "resolve_executor_plan",
    "resolve_executor_plans",
]

"""Planner facade: logical planning and runtime binding of model-weight transfers.

Every name here is the same object as the one re-exported by ``mooncake.reshard.weight``.
"""

from ._planner.attestation import RuntimeBindingAttestation, RuntimeBindingEvidence
from ._planner.binding import (
    bind_logical_transfer_plan,
    resolve_executor_plan,
    resolve_executor_plans,
)
from ._planner.bound_contracts import ExecutorTransferPlan, RuntimeFragmentSnapshot, TransferPlan
from ._planner.contracts import (
    ExecutableTransferOperation,
    LiveTransferOperation,
    LogicalTransferOperation,
    LogicalTransferPlan,
    PipelineRouteGroup,
    PlacementExecutorPlan,
    PlanningLimits,
    RuntimeTensorOwner,
    StoredLoadOperation,
    TransferRegion,
)
from ._planner.fragments import BoundWeightFragment
from ._planner.api import (
    plan_placement_transfer,
    plan_placement_transfer_to_local_target,
    plan_stored_transfer_to_target_placement,
)

__all__ = [
    "BoundWeightFragment",
    "ExecutableTransferOperation",
    "ExecutorTransferPlan",
    "LiveTransferOperation",
    "LogicalTransferPlan",
    "PlanningLimits",
    "LogicalTransferOperation",
    "PipelineRouteGroup",
    "PlacementExecutorPlan",
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

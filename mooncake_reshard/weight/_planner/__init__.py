"""Private planning and binding internals of ``mooncake.reshard.weight``.

The public names live in ``mooncake.reshard.weight.planner``; this package re-exports them
(and the two ownership helpers) lazily, so importing one submodule never drags in the rest.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, str] = {
    "BoundWeightFragment": "fragments",
    "ExecutableTransferOperation": "contracts",
    "ExecutorTransferPlan": "bound_contracts",
    "LiveTransferOperation": "contracts",
    "LogicalTransferPlan": "contracts",
    "PlanningLimits": "contracts",
    "LogicalTransferOperation": "contracts",
    "PipelineRouteGroup": "contracts",
    "PlacementExecutorPlan": "contracts",
    "RuntimeFragmentSnapshot": "bound_contracts",
    "RuntimeBindingAttestation": "attestation",
    "RuntimeBindingEvidence": "attestation",
    "StoredLoadOperation": "contracts",
    "TransferPlan": "bound_contracts",
    "TransferRegion": "contracts",
    "bind_logical_transfer_plan": "binding",
    "complete_parallel_source_replicas": "ownership",
    "parallel_tensor_owner": "ownership",
    "plan_placement_transfer": "api",
    "plan_placement_transfer_to_local_target": "api",
    "plan_stored_transfer_to_target_placement": "api",
    "resolve_executor_plan": "binding",
    "resolve_executor_plans": "binding",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))

"""Spec §16: a required field left out of a constructor is a static error."""

from mooncake.reshard.contracts import ResourceId, RevisionId, TensorId
from mooncake.reshard.weight import LogicalTransferPlan, PlanningLimits, TensorDescriptor, TransferPlan

RESOURCE = ResourceId("model")
REVISION = RevisionId("revision")

TransferPlan(  # expect-error[reportCallIssue]: Argument missing for parameter "target_placement"
    resource_id=RESOURCE,
    revision=REVISION,
    weight_generation=0,
    operations=(),
    planning_limits=PlanningLimits(),
)
LogicalTransferPlan(  # expect-error[reportCallIssue]: Argument missing for parameter "target_placement"
    resource_id=RESOURCE,
    revision=REVISION,
    source_placement=None,
    source_tensors=(),
    target_tensors=(),
    operations=(),
)
TensorDescriptor(  # expect-error[reportCallIssue]: Argument missing for parameter "layout_fingerprint"
    tensor_id=TensorId("w"),
    global_shape=(4,),
    dtype="bfloat16",
    itemsize=2,
    shard_dims=(),
    parallel_axes=(),
)

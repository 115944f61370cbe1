"""Spec §16: the ID NewTypes are distinct; one cannot stand in for another."""

from mooncake.reshard.contracts import ParticipantId, PlacementFragmentId, PlacementId, TensorId
from mooncake.reshard.weight import (
    ParallelRank,
    PlacementExecutorPlan,
    RuntimeBindingAttestation,
    WeightPlacementManifest,
    plan_placement_transfer_to_local_target,
)

PlacementExecutorPlan(
    placement_id=TensorId("layers.0.w"),  # expect-error[reportArgumentType]: "TensorId" cannot be assigned to parameter "placement_id" of type "PlacementId"
    participant_id=ParticipantId("worker-0"),
    rank=ParallelRank(),
    placement_fragment_ids=(PlacementFragmentId("fragment-0"),),
)
PlacementExecutorPlan(
    placement_id=PlacementId("sha256:0"),
    participant_id=ParticipantId("worker-0"),
    rank=ParallelRank(),
    placement_fragment_ids=(TensorId("layers.0.w"),),  # expect-error[reportArgumentType]: "placement_fragment_ids"
)


def local_plan(source: WeightPlacementManifest, target: WeightPlacementManifest) -> None:
    plan_placement_transfer_to_local_target(source, target, PlacementId("p"))  # expect-error[reportArgumentType]: "PlacementId" cannot be assigned to parameter "target_participant_id"


def lookup(attestation: RuntimeBindingAttestation) -> None:
    attestation.binding_fragment(ParticipantId("worker-0"))  # expect-error[reportArgumentType]: "ParticipantId" cannot be assigned to parameter "placement_fragment_id" of type "PlacementFragmentId"

"""Keyword-only constructors and parameters, frozen values and read-only properties."""

from mooncake.reshard.contracts import ParticipantId
from mooncake.reshard.weight import (
    ParallelRank,
    ParallelTopology,
    PlanningLimits,
    TopologyParticipant,
    WeightPlacementManifest,
    plan_placement_transfer,
)

PARTICIPANTS = (TopologyParticipant(ParticipantId("worker-0"), ParallelRank()),)
ParallelTopology(1, 1, 1, 1, PARTICIPANTS)  # expect-error[reportCallIssue]: Expected 0 positional arguments
ParallelTopology(tp_size=1, pp_size=1, ep_size=1, dp_size=1, participants=PARTICIPANTS)


def plan(source: WeightPlacementManifest, target: WeightPlacementManifest) -> None:
    plan_placement_transfer(source, target, PlanningLimits())  # expect-error[reportCallIssue]: Expected 2 positional arguments
    plan_placement_transfer(source, target, planning_limits=PlanningLimits())


def mutate(rank: ParallelRank, placement: WeightPlacementManifest) -> None:
    rank.tp = 1  # expect-error[reportAttributeAccessIssue]: "tp"
    placement.digest = "0" * 64  # expect-error[reportAttributeAccessIssue]: "digest"

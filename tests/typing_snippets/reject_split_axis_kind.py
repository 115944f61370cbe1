"""Spec §16: axis kinds are Literal types, so a wrong kind is a static error."""

from mooncake.reshard.weight import OwnershipAxis, ReplicatedAxis, SplitAxis

SplitAxis(kind="pp", dim=0)  # expect-error[reportArgumentType]: "kind" of type "SplitAxisKind"
SplitAxis("dp", 0)  # expect-error[reportArgumentType]: "kind" of type "SplitAxisKind"
ReplicatedAxis("cp")  # expect-error[reportArgumentType]: "kind" of type "ParallelAxisKind"
OwnershipAxis(kind="expert")  # expect-error[reportArgumentType]: "kind" of type "ParallelAxisKind"

SplitAxis(kind="ep", dim=0)
SplitAxis("tp", 1)
ReplicatedAxis("dp")
OwnershipAxis(kind="pp")

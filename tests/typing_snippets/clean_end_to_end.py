# pyright: strict
"""A correct program over the public API: it must type-check with no diagnostics.

``tests/test_static_typing.py`` runs pyright over this file in strict mode (every
``reveal_type`` must match the expect-type comment on its line) and then executes it, so it
is also checked to be a real, working use of the package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mooncake.reshard import ResourceKind
from mooncake.reshard.contracts import (
    LeaseId,
    ParticipantId,
    PlacementSetId,
    ResourceId,
    RevisionId,
    RuntimeFragmentId,
    RuntimeInstanceId,
    StoredFragmentSnapshotId,
    TensorId,
)
from mooncake.reshard.geometry import boxes_exactly_cover, boxes_overlap
from mooncake.reshard.weight import (
    OwnershipAxis,
    ParallelRank,
    ParallelTopology,
    PlacementFragment,
    PlanningLimits,
    ReplicatedAxis,
    RuntimeBindingFragment,
    SplitAxis,
    StoredFragmentSnapshot,
    StoredWeightManifest,
    TensorDescriptor,
    TopologyParticipant,
    WeightPlacementManifest,
    WeightRuntimeBindingManifest,
    bind_logical_transfer_plan,
    plan_placement_transfer,
    plan_stored_transfer_to_target_placement,
    resolve_executor_plan,
    validate_runtime_bindings,
    weight_placement_from_json,
    weight_placement_to_json,
)
from mooncake.reshard.weight.storage_manifest import validate_weight_manifest_snapshot
from mooncake.reshard.weight.types import canonical_strides_bytes

RESOURCE = ResourceId("example-model")
REVISION = RevisionId("step-1")
GENERATION = 3
TENSOR = TensorDescriptor(
    tensor_id=TensorId("layers.0.mlp.w1"),
    global_shape=(8, 4),
    dtype="bfloat16",
    itemsize=2,
    shard_dims=(0,),
    layout_fingerprint="example:bf16:v1",
    parallel_axes=(ReplicatedAxis("dp"), OwnershipAxis("pp"), SplitAxis("tp", 0)),
    layer_id=0,
)


def tp_placement(tp_size: int, placement_set: str) -> WeightPlacementManifest:
    """Split TENSOR along dim 0 over ``tp_size`` ranks, one participant per rank."""
    rows = TENSOR.global_shape[0] // tp_size
    participants = tuple(
        TopologyParticipant(ParticipantId(f"{placement_set}-{tp}"), ParallelRank(tp=tp))
        for tp in range(tp_size)
    )
    topology = ParallelTopology(
        tp_size=tp_size, pp_size=1, ep_size=1, dp_size=1, participants=participants
    )
    fragments = tuple(
        PlacementFragment(
            tensor_id=TENSOR.tensor_id,
            global_offset=(tp * rows, 0),
            local_shape=(rows, 4),
            nbytes=rows * 4 * TENSOR.itemsize,
            rank=ParallelRank(tp=tp),
        )
        for tp in range(tp_size)
    )
    return WeightPlacementManifest.from_fragments(
        resource_id=RESOURCE,
        revision=REVISION,
        weight_generation=GENERATION,
        placement_set_id=PlacementSetId(placement_set),
        topology=topology,
        tensors=(TENSOR,),
        fragments=fragments,
    )


def bindings_for(placement: WeightPlacementManifest, base: int) -> list[WeightRuntimeBindingManifest]:
    """One runtime binding per non-empty part, each fragment in its own allocation."""
    result: list[WeightRuntimeBindingManifest] = []
    for index, part in enumerate(placement.parts):
        fragments: list[RuntimeBindingFragment] = []
        for position, fragment in enumerate(part.fragments):
            address = base + 0x10000 * index
            fragments.append(
                RuntimeBindingFragment(
                    placement_fragment_id=fragment.placement_fragment_id,
                    fragment_id=RuntimeFragmentId(f"rt-{part.participant_id}-{position}"),
                    address=address,
                    nbytes=fragment.nbytes,
                    worker_id=f"worker-{part.participant_id}",
                    endpoint="127.0.0.1:1",
                    device="cpu",
                    itemsize=TENSOR.itemsize,
                    local_shape=fragment.local_shape,
                    strides_bytes=canonical_strides_bytes(fragment.local_shape, TENSOR.itemsize),
                    storage_address=address,
                    storage_nbytes=fragment.nbytes,
                    storage_offset_bytes=0,
                )
            )
        result.append(
            WeightRuntimeBindingManifest(
                resource_id=placement.resource_id,
                placement_id=placement.placement_id,
                placement_digest=placement.digest,
                instance_id=RuntimeInstanceId(f"instance-{part.participant_id}"),
                generation=1,
                lease_id=LeaseId(f"lease-{part.participant_id}"),
                revision=placement.revision,
                participant_id=part.participant_id,
                fragments=tuple(fragments),
            )
        )
    return result


def stored_manifest() -> StoredWeightManifest:
    """A committed stored snapshot of TENSOR in one payload object."""
    group_id = "weights/default/example-model/step-1"
    return StoredWeightManifest(
        namespace="default",
        resource_id=RESOURCE,
        group_id=group_id,
        manifest_key=f"{group_id}/manifest",
        created_at="2026-01-01T00:00:00Z",
        revision=REVISION,
        weight_generation=GENERATION,
        tensors=(TENSOR,),
        fragments=(
            StoredFragmentSnapshot(
                fragment_id=StoredFragmentSnapshotId("stored-0"),
                tensor_id=TENSOR.tensor_id,
                global_offset=(0, 0),
                local_shape=(8, 4),
                object_key=f"{group_id}/payload/0",
                object_offset=0,
                nbytes=64,
            ),
        ),
    )


def main() -> None:
    source = tp_placement(2, "source")
    target = tp_placement(1, "target")
    if TYPE_CHECKING:
        reveal_type(source.placement_id)  # expect-type: PlacementId
        reveal_type(source.digest)  # expect-type: str
        reveal_type(source.resource_kind)  # expect-type: ResourceKind
        reveal_type(source.topology.participants)  # expect-type: tuple[TopologyParticipant, ...]
        reveal_type(TENSOR.parallel_axes)  # expect-type: tuple[SplitAxis | ReplicatedAxis | OwnershipAxis, ...]
        reveal_type(weight_placement_from_json)  # expect-type: (value: str) -> WeightPlacementManifest
    assert source.resource_kind is ResourceKind.MODEL_WEIGHT
    assert weight_placement_from_json(weight_placement_to_json(source)) == source

    source_bindings = bindings_for(source, 0x100000)
    target_bindings = bindings_for(target, 0x900000)
    validate_runtime_bindings(source, source_bindings)
    validate_runtime_bindings(target, target_bindings)

    logical = plan_placement_transfer(source, target, planning_limits=PlanningLimits())
    bound = bind_logical_transfer_plan(logical, target_bindings, source_bindings=source_bindings)
    if TYPE_CHECKING:
        reveal_type(logical)  # expect-type: LogicalTransferPlan
        reveal_type(logical.operations[0].source)  # expect-type: PlacementFragment | StoredFragmentSnapshot
        reveal_type(bound)  # expect-type: TransferPlan
        reveal_type(bound.operations[0].target)  # expect-type: BoundWeightFragment
        reveal_type(bound.operations[0].target.fragment_id)  # expect-type: RuntimeFragmentId
        reveal_type(bound.source_executors)  # expect-type: tuple[ExecutorTransferPlan, ...]
    total = 0
    for operation in bound.operations:
        for _source_offset, _target_offset, length in operation.iter_segments(max_segments=100):
            total += length
    assert total == bound.total_bytes == 64

    executor = resolve_executor_plan(bound, target, target_bindings[0], "target")
    assert bound.operation_indices_for_executor(executor, "target") == (0, 1)

    stored = validate_weight_manifest_snapshot(stored_manifest())
    stored_plan = plan_stored_transfer_to_target_placement(stored, target)
    stored_bound = bind_logical_transfer_plan(stored_plan, target_bindings, source_manifest=stored)
    if TYPE_CHECKING:
        reveal_type(stored.manifest_identity.content_sha256)  # expect-type: str
        reveal_type(stored_bound.source_manifest)  # expect-type: StoredWeightManifest | None
    assert stored_bound.source_manifest_identity == stored.manifest_identity

    boxes = [((0, 0), (4, 4)), ((4, 0), (4, 4))]
    assert not boxes_overlap(boxes)
    assert boxes_exactly_cover((0, 0), (8, 4), boxes)


if __name__ == "__main__":
    main()

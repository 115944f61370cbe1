"""Planning entry points (spec §10) and the planning pipeline's fail-closed rules (spec §11.1-11.2):
one test per rejection rule, PlanningLimits boundaries (at budget passes, one below fails), DP
replica choice, DP ownership, cross-dimension reshards, stored sources."""

from __future__ import annotations

import dataclasses
import math
import pickle
from typing import Any, List

import pytest

from layout_model import Coord, FragmentSpec, TensorSpec, build_placement, build_tensor
from planner_helpers import grid_fragments, layout, own, rep, split, tp_placement
from spec_helpers import raises

from mooncake.reshard.weight.planner import (
    PlanningLimits,
    plan_placement_transfer,
    plan_placement_transfer_to_local_target,
    plan_stored_transfer_to_target_placement,
)
from mooncake.reshard.weight.storage_manifest import StoredFragmentSnapshot, StoredWeightManifest
from mooncake.reshard.weight._planner.core import plan_logical_transfer

T = TensorSpec("w", (8, 6), itemsize=2, layer_id=0)


def pair(**identity: Any):
    return tp_placement("src", T, 2, 0, **identity), tp_placement("dst", T, 3, 1)


# --- §10 entry points ------------------------------------------------------------------------


def test_entry_point_type_checks() -> None:
    source, target = pair()
    with raises("source placement manifests must be WeightPlacementManifest"):
        plan_placement_transfer(object(), object())  # type: ignore[arg-type]
    with raises("target placement manifests must be WeightPlacementManifest"):
        plan_placement_transfer(source, object())  # type: ignore[arg-type]
    with raises("source placement manifests must be WeightPlacementManifest"):
        plan_placement_transfer_to_local_target(None, target, "x")  # type: ignore[arg-type]
    with raises("target placement manifests must be WeightPlacementManifest"):
        plan_stored_transfer_to_target_placement(stored_manifest(), source.parts)  # type: ignore[arg-type]


def test_local_planner_refuses_a_target_that_is_not_a_placement() -> None:
    """docs/api.md: checked as the full planner checks it, before the participant is looked up
    (the released reference fails with an AttributeError on its first read of the target)."""
    source, target = pair()
    for value in (None, 0, target.parts[0], target.topology, {}):
        for participant in (target.parts[0].participant_id, None):
            with raises("target placement manifests must be WeightPlacementManifest"):
                plan_placement_transfer_to_local_target(source, value, participant)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [0, {}, "", 5, "x", object(), dataclasses.asdict(PlanningLimits())])
def test_planning_limits_of_another_kind_fail_closed(value: Any) -> None:
    """docs/api.md: a planning_limits neither None nor a PlanningLimits is refused, a false one
    included (the released reference takes a false value for the default limits), after the
    placement, participant and identity checks."""
    source, target = pair()
    stored, placement = stored_manifest(), target
    for plan in (
        lambda: plan_placement_transfer(source, target, planning_limits=value),
        lambda: plan_placement_transfer_to_local_target(source, target, target.parts[0].participant_id,
                                                        planning_limits=value),
        lambda: plan_stored_transfer_to_target_placement(stored, placement, planning_limits=value),
    ):
        with raises("planning_limits must be a PlanningLimits"):
            plan()
    other, _ = pair(revision="rev-2")
    with raises("source and target revision differ"):  # (the identity first)
        plan_placement_transfer(other, target, planning_limits=value)
    with raises("unknown target participant: nobody"):  # (the participant first)
        plan_placement_transfer_to_local_target(source, target, "nobody", planning_limits=value)
    assert plan_placement_transfer(source, target, planning_limits=None).planning_limits == PlanningLimits()


@pytest.mark.parametrize(
    "identity, message",
    [
        ({"resource_id": "other"}, "source and target resource_id differ"),
        ({"revision": "rev-2"}, "source and target revision differ"),
        ({"weight_generation": 9}, "source and target weight_generation differ"),
        ({"resource_id": "other", "revision": "rev-2"}, "source and target resource_id differ"),
    ],
)
def test_identity_checks_in_order(identity, message) -> None:
    source, target = pair(**identity)
    with raises(message):
        plan_placement_transfer(source, target)
    with raises(message):
        plan_placement_transfer_to_local_target(source, target, target.parts[0].participant_id)


def test_stored_identity_checks() -> None:
    target = tp_placement("dst", T, 3, 1, weight_generation=9)
    with raises("source and target weight_generation differ"):
        plan_stored_transfer_to_target_placement(stored_manifest(generation=10), target)
    with raises("source and target revision differ"):
        plan_stored_transfer_to_target_placement(stored_manifest(revision="rev-2", generation=9), target)


def test_local_target_participant_resolution() -> None:
    source, target = pair()
    with raises("target_participant_id is required for a multi-participant target"):
        plan_placement_transfer_to_local_target(source, target)
    with raises("unknown target participant: ghost"):
        plan_placement_transfer_to_local_target(source, target, "ghost")
    single = tp_placement("dst", T, 1, 1)
    plan = plan_placement_transfer_to_local_target(source, single)
    assert [e.participant_id for e in plan.target_executors] == [single.parts[0].participant_id]


def test_local_target_without_fragments() -> None:
    source = tp_placement("src", T, 2, 0)
    spec = TensorSpec(**{**T.__dict__, "axes": (own("tp"),)})
    frags = [FragmentSpec("w", (0, 0), (8, 6), Coord(tp=0))]
    target = build_placement(layout("dst", (2, 1, 1, 1), [spec], frags))
    empty = [p for p in target.parts if not p.fragments][0]
    with raises("local target manifest has no fragments"):
        plan_placement_transfer_to_local_target(source, target, empty.participant_id)


def test_planning_limits_argument() -> None:
    source, target = pair()
    plan = plan_placement_transfer(source, target, planning_limits=None)
    assert plan.planning_limits == PlanningLimits()
    with pytest.raises(ValueError):
        plan_placement_transfer(source, target, planning_limits=object())  # type: ignore[arg-type]


# --- §11.1 step 1: tensor sets ------------------------------------------------------------------


def two_tensor_placement(name: str, ids: List[str], fingerprint: str = "fp", dtype: str = "bfloat16") -> Any:
    tensors = [TensorSpec(i, (4,), dtype=dtype, layout_fingerprint=fingerprint) for i in ids]
    frags = [FragmentSpec(t.tensor_id, (0,), (4,), Coord()) for t in tensors]
    return build_placement(layout(name, (1, 1, 1, 1), tensors, frags))


def test_tensor_set_rules() -> None:
    ab = two_tensor_placement("src", ["a", "b"])
    a = two_tensor_placement("dst", ["a"])
    abc = two_tensor_placement("dst", ["a", "b", "c", "d"])
    with raises("target manifests are missing tensors: b"):
        plan_placement_transfer(ab, a)
    with raises("target manifests are missing tensors: a, b"):
        plan_placement_transfer(ab, two_tensor_placement("dst", ["z"]))
    with raises("target manifests contain unknown tensors: c, d"):
        plan_placement_transfer(ab, abc)
    with raises("target manifests contain unknown tensors: c, d"):
        plan_placement_transfer_to_local_target(ab, abc, abc.parts[0].participant_id)
    # a local target may use a subset of the source tensors
    plan = plan_placement_transfer_to_local_target(ab, a, a.parts[0].participant_id)
    assert {op.tensor_id for op in plan.operations} == {"a"}
    assert plan.source_tensors == ab.tensors


def test_compatibility_rules() -> None:
    source = two_tensor_placement("src", ["a", "b"])
    with raises("layout mismatch for tensor a"):
        plan_placement_transfer(source, two_tensor_placement("dst", ["a", "b"], fingerprint="other"))
    with raises("tensor descriptor mismatch: a"):
        plan_placement_transfer(source, two_tensor_placement("dst", ["a", "b"], dtype="float16"))
    for change in ({"global_shape": (4, 1)}, {"layer_id": 3}, {"expert_id": 1}, {"itemsize": 4}):
        spec = TensorSpec(**{**T.__dict__, **change})
        frags = grid_fragments(spec, [Coord()], {}, {})
        other = build_placement(layout("dst", (1, 1, 1, 1), [spec], frags))
        with raises("tensor descriptor mismatch: w"):
            plan_placement_transfer(tp_placement("src", T, 1, 0), other)


def test_shard_dims_and_axes_may_differ() -> None:
    source = tp_placement("src", T, 2, 0)
    target = tp_placement("dst", T, 2, 1)
    plan = plan_placement_transfer(source, target)
    assert len(plan.operations) == 4


# --- §11.2 coverage and replica choice -----------------------------------------------------------


def test_target_not_fully_covered_per_dp() -> None:
    # PP-replicated target whose replicas are segmented differently: collapsing identical
    # geometry leaves overlapping boxes, so the owner group does not exactly cover.
    spec = TensorSpec(**{**T.__dict__, "axes": (rep("pp"),)})
    frags = [
        FragmentSpec("w", (0, 0), (4, 6), Coord(pp=0)),
        FragmentSpec("w", (4, 0), (4, 6), Coord(pp=0)),
        FragmentSpec("w", (0, 0), (8, 6), Coord(pp=1)),
    ]
    target = build_placement(layout("dst", (1, 2, 1, 1), [spec], frags))
    with raises("target tensor is not fully covered: w: dp=0"):
        plan_placement_transfer(tp_placement("src", T, 1, 0), target)
    # the same layout as a source has no complete DP replica
    with raises("source manifests have no complete DP replica; tensors are not fully covered"):
        plan_placement_transfer(target, tp_placement("dst", T, 1, 0))


def dp_owned_placement(name: str, owners: List[int], dp: int = 2, segmented_tp: bool = False) -> Any:
    spec = TensorSpec(**{**T.__dict__, "axes": (own("dp"), rep("tp"))})
    frags = []
    tp = 2
    for d in owners:
        for t in range(tp):
            if segmented_tp and t == 1:
                frags.append(FragmentSpec("w", (0, 0), (4, 6), Coord(dp=d, tp=t)))
                frags.append(FragmentSpec("w", (4, 0), (4, 6), Coord(dp=d, tp=t)))
            else:
                frags.append(FragmentSpec("w", (0, 0), (8, 6), Coord(dp=d, tp=t)))
    return build_placement(layout(name, (tp, 1, 1, dp), [spec], frags))


def test_dp_owned_rules() -> None:
    target = tp_placement("dst", T, 1, 0)
    plan = plan_placement_transfer(dp_owned_placement("src", [1]), target)
    assert {op.source.rank.dp for op in plan.operations} == {1}
    with raises("DP-owned source tensor has ambiguous declared owners: w"):
        plan_placement_transfer(dp_owned_placement("src", [0, 1]), target)
    with raises("DP-owned source tensor has no complete declared owner: w"):
        plan_placement_transfer(dp_owned_placement("src", [0], segmented_tp=True), target)
    with raises("target tensor is not fully covered by its DP owner: w"):
        plan_placement_transfer(tp_placement("src", T, 1, 0), dp_owned_placement("dst", [0], segmented_tp=True))
    # a DP-owned target tensor routes through the single source owner regardless of target dp
    plan = plan_placement_transfer(dp_owned_placement("src", [1]), dp_owned_placement("dst", [0, 1]))
    assert {op.source.rank.dp for op in plan.operations} == {1}
    assert {op.target.rank.dp for op in plan.operations} == {0, 1}


def test_round_robin_replica_choice() -> None:
    source = tp_placement("src", T, 2, 0, dp=2)
    target = tp_placement("dst", T, 1, 0, dp=3)
    plan = plan_placement_transfer(source, target)
    pairs = {(op.target.rank.dp, op.source.rank.dp) for op in plan.operations}
    assert pairs == {(0, 0), (1, 1), (2, 0)}
    local = plan_placement_transfer_to_local_target(
        source, target, [p.participant_id for p in target.parts if p.rank.dp == 1][0])
    assert {op.source.rank.dp for op in local.operations} == {1}
    # only the selected replica appears in the executor projection
    single = plan_placement_transfer(source, tp_placement("dst", T, 4, 1))
    assert {e.rank.dp for e in single.source_executors} == {0}
    assert len(single.source_executors) == 2


def test_incomplete_replica_is_skipped() -> None:
    # dp 0 is segmented inconsistently across its TP replicas; dp 1 is complete
    spec = TensorSpec(**{**T.__dict__, "axes": (rep("dp"), rep("tp"))})
    frags = [
        FragmentSpec("w", (0, 0), (8, 6), Coord(dp=0, tp=0)),
        FragmentSpec("w", (0, 0), (4, 6), Coord(dp=0, tp=1)),
        FragmentSpec("w", (4, 0), (4, 6), Coord(dp=0, tp=1)),
        FragmentSpec("w", (0, 0), (8, 6), Coord(dp=1, tp=0)),
        FragmentSpec("w", (0, 0), (8, 6), Coord(dp=1, tp=1)),
    ]
    source = build_placement(layout("src", (2, 1, 1, 2), [spec], frags))
    plan = plan_placement_transfer(source, tp_placement("dst", T, 1, 0, dp=2))
    assert {op.source.rank.dp for op in plan.operations} == {1}


def test_minimum_owner_and_pp_routes() -> None:
    # complete replicas on two PP owners: the minimum owner (pp 0) is chosen
    spec = TensorSpec(**{**T.__dict__, "axes": (own("pp"), split("tp", 1))})
    ranks = [Coord(pp=p, tp=t) for p in range(2) for t in range(2)]
    frags = grid_fragments(spec, ranks, {"tp": 1}, {"tp": 2}, stage=True)
    source = build_placement(layout("src", (2, 2, 1, 1), [spec], frags))
    tspec = TensorSpec(**{**T.__dict__, "axes": (own("pp"),)})
    target = build_placement(layout("dst", (1, 2, 1, 1), [tspec], [FragmentSpec("w", (0, 0), (8, 6), Coord(pp=1), pipeline_stage_id=5)]))
    plan = plan_placement_transfer(source, target)
    assert {op.source.rank.pp for op in plan.operations} == {0}
    routes = plan.pipeline_routes
    assert [(r.source_pp, r.source_pipeline_stage_id, r.target_pp, r.target_pipeline_stage_id) for r in routes] == [(0, 0, 1, 5)]
    assert routes[0].operation_indices == tuple(range(len(plan.operations)))


def test_grouped_experts_to_tp_on_dim_2_limits() -> None:
    # EP8 split on dim 0 -> TP8 split on dim 2: 8x8 fragments, 64 operations of 8192 segments
    spec_s = TensorSpec("experts", (8, 8192, 16), itemsize=2, axes=(split("ep", 0),))
    spec_t = TensorSpec("experts", (8, 8192, 16), itemsize=2, axes=(split("tp", 2),))
    source = build_placement(layout("src", (1, 1, 8, 1), [spec_s],
                                    grid_fragments(spec_s, [Coord(ep=e) for e in range(8)], {"ep": 0}, {"ep": 8})))
    target = build_placement(layout("dst", (8, 1, 1, 1), [spec_t],
                                    grid_fragments(spec_t, [Coord(tp=t) for t in range(8)], {"tp": 2}, {"tp": 8})))
    plan = plan_placement_transfer(source, target)
    assert len(plan.operations) == 64
    assert {op.segment_count for op in plan.operations} == {8192}
    with raises("logical transfer plan exceeds max_transfer_regions: 63"):
        plan_placement_transfer(source, target, planning_limits=PlanningLimits(max_transfer_regions=63))
    assert len(plan_placement_transfer(source, target, planning_limits=PlanningLimits(max_transfer_regions=64)).operations) == 64
    with raises("logical transfer region exceeds max_segments_per_region: 8192 > 8191"):
        plan_placement_transfer(source, target, planning_limits=PlanningLimits(max_segments_per_region=8191))
    plan_placement_transfer(source, target, planning_limits=PlanningLimits(max_segments_per_region=8192))
    total = 64 * 8192
    with raises(f"logical transfer plan exceeds max_total_lowered_segments: {total} > {total - 1}"):
        plan_placement_transfer(source, target, planning_limits=PlanningLimits(max_total_lowered_segments=total - 1))
    plan_placement_transfer(source, target, planning_limits=PlanningLimits(max_total_lowered_segments=total))
    # the running total fires at the first region past the budget
    with raises("logical transfer plan exceeds max_total_lowered_segments: 16384 > 10000"):
        plan_placement_transfer(source, target, planning_limits=PlanningLimits(max_total_lowered_segments=10000))


def test_region_limit_fires_before_materialising() -> None:
    # 100 x 100 target grid against a 100 x 100 source grid shifted by one: a budget of 10
    # regions must fail at once (the C kernel counts before any object is built).
    spec_s = TensorSpec("w", (1000, 1000), itemsize=1, axes=(split("tp", 0),))
    spec_t = TensorSpec("w", (1000, 1000), itemsize=1, axes=(split("tp", 1),))
    source = build_placement(layout("src", (100, 1, 1, 1), [spec_s],
                                    grid_fragments(spec_s, [Coord(tp=t) for t in range(100)], {"tp": 0}, {"tp": 100})))
    target = build_placement(layout("dst", (100, 1, 1, 1), [spec_t],
                                    grid_fragments(spec_t, [Coord(tp=t) for t in range(100)], {"tp": 1}, {"tp": 100})))
    with raises("logical transfer plan exceeds max_transfer_regions: 10"):
        plan_placement_transfer(source, target, planning_limits=PlanningLimits(max_transfer_regions=10))
    plan = plan_placement_transfer(source, target, planning_limits=PlanningLimits(max_transfer_regions=10_000))
    assert len(plan.operations) == 10_000


def test_operation_order() -> None:
    source = tp_placement("src", T, 3, 1)
    target = tp_placement("dst", T, 2, 0)
    plan = plan_placement_transfer(source, target)
    keys = [(op.target.placement_fragment_id, op.target_base_offset, op.source.placement_fragment_id,
             op.source_base_offset) for op in plan.operations]
    assert keys == sorted(keys)


# --- stored sources ------------------------------------------------------------------------------


def stored_manifest(*, generation: int = 1, revision: str = "rev-1", pieces: int = 2, tensor: TensorSpec = T,
                    fragments: Any = None) -> StoredWeightManifest:
    group = "weights/default/model/" + revision
    if fragments is None:
        rows = tensor.global_shape[0] // pieces
        fragments = [
            StoredFragmentSnapshot(f"stored-{i}", tensor.tensor_id, (i * rows, 0), (rows, tensor.global_shape[1]),
                                   f"{group}/payload/{i}", 0, rows * tensor.global_shape[1] * tensor.itemsize)
            for i in range(pieces)
        ]
    return StoredWeightManifest(
        namespace="default", resource_id="model", group_id=group, manifest_key=f"{group}/manifest",
        created_at="2026-01-01T00:00:00Z", revision=revision, weight_generation=generation,
        tensors=(build_tensor(tensor),), fragments=tuple(fragments),
    )


def test_stored_plan_shape_and_revalidation() -> None:
    manifest = stored_manifest()
    target = tp_placement("dst", T, 3, 1)
    plan = plan_stored_transfer_to_target_placement(manifest, target)
    assert plan.source_placement is None and plan.source_executors == ()
    assert plan.source_manifest == manifest and plan.source_manifest is not manifest
    assert plan.source_manifest_identity == manifest.manifest_identity
    assert plan.source_placement_id is None
    assert len(plan.operations) == 6
    restored = pickle.loads(pickle.dumps(plan))
    assert restored == plan
    # a forged object_key on an operation source is caught on replace
    op = plan.operations[0]
    forged = dataclasses.replace(op.source, object_key=op.source.object_key + "x")
    bad = dataclasses.replace(op, source=forged)
    with raises("logical plan and source manifest fragment snapshots differ"):
        dataclasses.replace(plan, operations=(bad,) + plan.operations[1:])
    with raises("logical plan source tensor catalog differs"):
        dataclasses.replace(plan, source_tensors=())
    with raises("logical transfer plan source has no placement"):
        dataclasses.replace(plan, operations=plan_placement_transfer(tp_placement("src", T, 2, 0), target).operations)
    with raises("logical transfer plan source manifest identity differs"):
        dataclasses.replace(plan, source_manifest=stored_manifest(revision="rev-2"))
    # a forged identity is recomputed on unpickling, never trusted
    forged_plan = pickle.loads(pickle.dumps(plan))
    object.__setattr__(forged_plan, "source_manifest_identity", None)
    assert pickle.loads(pickle.dumps(forged_plan)).source_manifest_identity == manifest.manifest_identity
    with raises("logical plan has unexpected source manifest identity"):
        live = plan_placement_transfer(tp_placement("src", T, 2, 0), target)
        object.__setattr__(live, "source_manifest_identity", manifest.manifest_identity)
        live.validate_source_manifest_snapshot()


# --- kernel-level rules reached through the planning loop ------------------------------------------


def _core(source_fragments, *, limits=None, tensors=None):
    target = tp_placement("dst", T, 2, 0)
    tensor = target.tensors[0]
    return plan_logical_transfer(
        resource_id="model", revision="rev-1", source_placement=None, source_manifest=None,
        target_placement=target, source_tensors=tensors or {"w": tensor}, source_fragments=source_fragments,
        target_tensors={"w": tensor}, target_fragments=target.fragments, local_target=False,
        planning_limits=limits or PlanningLimits(),
    )


def _stored(fid, offset, shape, nbytes=None):
    return StoredFragmentSnapshot(fid, "w", offset, shape, "g/payload/0", 0,
                                  nbytes if nbytes is not None else math.prod(shape) * 2)


def test_source_kind_rule() -> None:
    placement_fragment = tp_placement("src", T, 1, 0).fragments[0]
    with raises("source fragments mix placement and stored locations"):
        _core([placement_fragment, _stored("s", (0, 0), (8, 6))])
    with raises("source fragments mix placement and stored locations"):
        _core([])


def test_target_fragment_not_fully_covered() -> None:
    target = tp_placement("dst", T, 2, 0)
    first = sorted(f.placement_fragment_id for f in target.fragments)[0]
    with raises(f"target fragment is not fully covered: {first}"):
        _core([_stored("a", (0, 0), (2, 6)), _stored("b", (6, 0), (2, 6))])
    # overlapping sources double-cover a target
    with raises(f"target fragment is not fully covered: {first}"):
        _core([_stored("a", (0, 0), (8, 6)), _stored("b", (0, 0), (4, 3))])


def test_fragment_itemsize_differs_from_descriptor() -> None:
    with raises("transfer region fragment itemsize differs from descriptor"):
        _core([_stored("a", (0, 0), (8, 6), nbytes=8 * 6 * 4)])
    with raises("transfer region fragment itemsize differs from descriptor"):
        _core([_stored("a", (0, 0), (8, 6), nbytes=2**70)])



def test_high_rank_tensor() -> None:
    # rank 70: beyond any fixed-size array in the kernel
    rank = 70
    spec = TensorSpec("w", (4,) + (1,) * (rank - 2) + (3,), itemsize=1)
    source = tp_placement("src", spec, 2, 0)
    target = tp_placement("dst", spec, 3, rank - 1)
    plan = plan_placement_transfer(source, target)
    assert len(plan.operations) == 6
    assert dataclasses.replace(plan) == plan
    assert sum(op.total_bytes for op in plan.operations) == 12


def test_collector_state_is_restored() -> None:
    import gc

    source, target = pair()
    assert gc.isenabled()
    plan_placement_transfer(source, target)
    assert gc.isenabled()
    with raises("target_participant_id is required"):
        plan_placement_transfer_to_local_target(source, target)
    assert gc.isenabled()
    with raises("layout mismatch for tensor a"):
        plan_placement_transfer(two_tensor_placement("src", ["a"]), two_tensor_placement("dst", ["a"], fingerprint="x"))
    assert gc.isenabled()
    gc.disable()
    try:
        plan_placement_transfer(source, target)
        assert not gc.isenabled()
    finally:
        gc.enable()

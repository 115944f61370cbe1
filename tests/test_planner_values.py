"""Logical planner value types (spec §8): fields, defaults, every validation rule and message,
properties, the §11.7 worked examples, operation aliases and pickling of plans (spec §13)."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import typing
from types import SimpleNamespace

import pytest

from layout_model import Coord, FragmentSpec, TensorSpec, build_placement
from planner_helpers import layout, rep, split, tp_placement
from spec_helpers import raises

from mooncake.reshard.weight.planner import (
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
    plan_placement_transfer,
)
from mooncake.reshard.weight.types import ParallelRank, PlacementFragment
from mooncake.reshard.weight._planner import contracts


def frag(offset, shape, itemsize=2, tensor_id="t", fid=None):
    nbytes = itemsize
    for s in shape:
        nbytes *= s
    return PlacementFragment(tensor_id, offset, shape, nbytes, ParallelRank(), placement_fragment_id=fid)


def region(source, target, overlap_offset, overlap_shape, **over):
    from mooncake.reshard.weight._planner.geometry import canonical_region_geometry

    itemsize = source.nbytes // (1 if not source.local_shape else __import__("math").prod(source.local_shape))
    g = canonical_region_geometry(source.global_offset, source.local_shape, target.global_offset, target.local_shape,
                                  overlap_offset, overlap_shape, itemsize)
    kwargs = dict(tensor_id="t", source=source, target=target, overlap_offset=overlap_offset,
                  overlap_shape=overlap_shape, source_base_offset=g[0], target_base_offset=g[1], inner_bytes=g[2],
                  outer_loop_counts=g[3], source_strides=g[4], target_strides=g[5])
    kwargs.update(over)
    return TransferRegion(**kwargs)


# --- §8.1 aliases --------------------------------------------------------------------------------


def test_operation_aliases_are_subscripted_transfer_region() -> None:
    for alias in (LogicalTransferOperation, ExecutableTransferOperation, LiveTransferOperation, StoredLoadOperation):
        assert typing.get_origin(alias) is TransferRegion
        with pytest.raises(TypeError):
            isinstance(object(), alias)  # noqa: B015
    assert contracts.LogicalTransferRegion is LogicalTransferOperation
    assert contracts.ExecutableTransferRegion is ExecutableTransferOperation
    assert type(RuntimeTensorOwner) is type(tuple[int])
    assert RuntimeTensorOwner == tuple[tuple[str, int], ...]
    s, t = frag((0,), (4,)), frag((0,), (4,))
    made = LogicalTransferOperation("t", s, t, (0,), (4,), 0, 0, 8, (), (), ())
    assert type(made) is TransferRegion
    assert len(typing.get_args(LogicalTransferOperation)) == 2


# --- §8.2 PipelineRouteGroup ---------------------------------------------------------------------


def test_pipeline_route_group_rules() -> None:
    assert [f.name for f in dataclasses.fields(PipelineRouteGroup)] == [
        "source_pp", "source_pipeline_stage_id", "target_pp", "target_pipeline_stage_id", "operation_indices"]
    group = PipelineRouteGroup(None, None, 0, None, [2, 0])
    assert group.operation_indices == (2, 0)
    with raises("pipeline route source_pp must be non-negative"):
        PipelineRouteGroup(-1, None, 0, None, ())
    with raises("pipeline route source_pp must be non-negative"):
        PipelineRouteGroup(True, None, 0, None, ())
    with raises("pipeline route target_pp must be non-negative"):
        PipelineRouteGroup(None, None, None, None, ())
    with raises("pipeline route source_pipeline_stage_id must be non-negative"):
        PipelineRouteGroup(0, -2, 0, None, ())
    with raises("pipeline route target_pipeline_stage_id must be non-negative"):
        PipelineRouteGroup(0, None, 0, 1.0, ())
    with raises("pipeline route indices must be non-negative integers"):
        PipelineRouteGroup(0, None, 0, None, (0, -1))
    with raises("pipeline route indices must be non-negative integers"):
        PipelineRouteGroup(0, None, 0, None, (False,))
    with raises("pipeline route has duplicate operation indices"):
        PipelineRouteGroup(0, None, 0, None, (1, 1))


# --- §8.3 PlanningLimits -------------------------------------------------------------------------


def test_planning_limits_defaults_and_rules() -> None:
    limits = PlanningLimits()
    assert (limits.max_transfer_regions, limits.max_segments_per_region, limits.max_total_lowered_segments) == (
        1_000_000, 1_000_000, 10_000_000)
    assert [f.name for f in dataclasses.fields(PlanningLimits)] == [
        "max_transfer_regions", "max_segments_per_region", "max_total_lowered_segments"]
    for name in ("max_transfer_regions", "max_segments_per_region", "max_total_lowered_segments"):
        for bad in (0, -1, True, 1.0, "1"):
            with raises(f"planning limit {name} must be a positive integer"):
                PlanningLimits(**{name: bad})
    assert PlanningLimits(1, 1, 1).max_total_lowered_segments == 1
    assert dataclasses.replace(limits, max_total_lowered_segments=5).max_total_lowered_segments == 5


# --- §8.5 PlacementExecutorPlan ------------------------------------------------------------------


def test_placement_executor_plan_rules() -> None:
    plan = PlacementExecutorPlan("p", "w", ParallelRank(), ["a", "b"])
    assert plan.placement_fragment_ids == ("a", "b")
    for args in (("", "w", ParallelRank(), ("a",)), ("p", "", ParallelRank(), ("a",)), ("p", "w", ParallelRank(), ("a", ""))):
        with raises("placement executor identifiers must not be empty"):
            PlacementExecutorPlan(*args)
    with raises("placement executor has duplicate fragment IDs"):
        PlacementExecutorPlan("p", "w", ParallelRank(), ("a", "a"))
    assert "operation_indices" not in {f.name for f in dataclasses.fields(PlacementExecutorPlan)}


# --- §8.4 TransferRegion -------------------------------------------------------------------------


def test_transfer_region_fields() -> None:
    assert [f.name for f in dataclasses.fields(TransferRegion)] == [
        "tensor_id", "source", "target", "overlap_offset", "overlap_shape", "source_base_offset",
        "target_base_offset", "inner_bytes", "outer_loop_counts", "source_strides", "target_strides"]


@pytest.mark.parametrize(
    "src, tgt, ov, expect",
    [
        # A
        (((1, 0, 0), (2, 6, 8)), ((0, 2, 0), (4, 3, 8)), ((1, 2, 0), (2, 3, 8)),
         (32, 48, 48, (2,), (96,), (48,), [(32, 48, 48), (128, 96, 48)])),
        # B
        (((1, 0, 0), (2, 6, 8)), ((0, 0, 4), (4, 6, 4)), ((1, 0, 4), (2, 6, 4)),
         (8, 48, 8, (2, 6), (96, 16), (48, 8), None)),
        # C
        (((0, 0), (2, 4)), ((0, 0), (2, 2)), ((0, 0), (2, 2)), (0, 0, 4, (2,), (8,), (4,), [(0, 0, 4), (8, 4, 4)])),
    ],
)
def test_worked_examples(src, tgt, ov, expect) -> None:
    s = frag(*src)
    t = frag(*tgt)
    r = region(s, t, *ov)
    sb, tb, inner, outer, ss, ts, segments = expect
    assert (r.source_base_offset, r.target_base_offset, r.inner_bytes, r.outer_loop_counts,
            r.source_strides, r.target_strides) == (sb, tb, inner, outer, ss, ts)
    got = list(r.iter_segments(max_segments=1000))
    if segments is not None:
        assert got == segments
    else:
        assert len(got) == 12 == r.segment_count
        assert got[:2] == [(8, 48, 8), (24, 56, 8)]
        assert got[6] == (104, 96, 8)
    assert r.total_bytes == r.inner_bytes * r.segment_count
    assert r.nbytes == r.inner_bytes and r.repeat == r.segment_count
    assert r.source_offset == sb and r.target_offset == tb


def test_worked_example_c_and_d_strides() -> None:
    r = region(frag((0, 0), (2, 4)), frag((0, 0), (2, 2)), (0, 0), (2, 2))
    assert (r.repeat, r.source_stride, r.target_stride) == (2, 8, 4)
    d = region(frag((0, 0), (4096, 1024)), frag((0, 0), (4096, 512)), (0, 0), (4096, 512))
    assert (d.inner_bytes, d.outer_loop_counts, d.source_strides, d.target_strides, d.segment_count) == (
        1024, (4096,), (2048,), (1024,), 4096)
    one = region(frag((0,), (8,)), frag((2,), (4,)), (2,), (4,))
    assert one.segment_count == 1 and one.source_stride == 0 and one.target_stride == 0
    assert list(one.iter_segments(max_segments=1)) == [(4, 0, 8)]
    b = region(frag((1, 0, 0), (2, 6, 8)), frag((0, 0, 4), (4, 6, 4)), (1, 0, 4), (2, 6, 4))
    with raises("N-D transfer region has multiple source strides"):
        b.source_stride
    with raises("N-D transfer region has multiple target strides"):
        b.target_stride


def test_benchmark_style_one_column_regions_are_canonical() -> None:
    rows = 16
    s = frag((0, 0), (rows, 8))
    t = frag((0, 0), (rows, 4))
    whole = region(s, t, (0, 0), (rows, 4))
    for c in range(4):
        one = dataclasses.replace(whole, overlap_offset=(0, c), overlap_shape=(rows, 1), source_base_offset=c * 2,
                                  target_base_offset=c * 2, inner_bytes=2, outer_loop_counts=(rows,),
                                  source_strides=(16,), target_strides=(8,))
        assert one.segment_count == rows


def test_iter_segments_rules() -> None:
    r = region(frag((0, 0), (2, 4)), frag((0, 0), (2, 2)), (0, 0), (2, 2))
    for bad in (0, -1, True, 2.0):
        with raises("max_segments must be a positive integer"):
            list(r.iter_segments(max_segments=bad))
    with raises("transfer region exceeds max_segments: 2 > 1"):
        list(r.iter_segments(max_segments=1))
    gen = r.iter_segments(max_segments=0)  # checks run when iteration starts
    with raises("max_segments must be a positive integer"):
        next(gen)
    assert list(r.iter_segments(max_segments=2)) == [(0, 0, 4), (8, 4, 4)]


def test_transfer_region_refuses_a_side_that_is_not_a_fragment() -> None:
    """docs/api.md (TransferRegion): a source or target without a fragment's fields is a
    ValueError with the message of the first check that reads the missing field (the released
    reference raises that read's AttributeError)."""
    s = frag((0, 0), (2, 4))
    good = region(s, frag((0, 0), (2, 2)), (0, 0), (2, 2))
    for side in ("source", "target"):
        for value in (None, 0, "x", ()):
            with raises("transfer region tensor mismatch"):
                dataclasses.replace(good, **{side: value})
    named = SimpleNamespace(tensor_id=s.tensor_id)  # (a tensor id, nothing else)
    with raises("global_offset must contain integers"):
        dataclasses.replace(good, source=named)
    boxed = SimpleNamespace(tensor_id=s.tensor_id, global_offset=s.global_offset, local_shape=s.local_shape)
    with raises("transfer region fragment byte size is invalid"):  # (no nbytes)
        dataclasses.replace(good, source=boxed)


def test_transfer_region_rules_in_order() -> None:
    s = frag((0, 0), (2, 4))
    t = frag((0, 0), (2, 2))
    good = region(s, t, (0, 0), (2, 2))
    assert dataclasses.replace(good, overlap_offset=[0, 0], outer_loop_counts=iter([2])).overlap_offset == (0, 0)
    for name in ("overlap_offset", "overlap_shape", "outer_loop_counts", "source_strides", "target_strides"):
        for bad in ("ab", b"", bytearray(), 5, (1, True), (1.0,)):
            with raises(f"transfer region {name} must contain integers"):
                dataclasses.replace(good, **{name: bad})
    with raises("transfer region tensor_id must not be empty"):
        dataclasses.replace(good, tensor_id="")
    with raises("transfer region tensor mismatch"):
        dataclasses.replace(good, tensor_id="other")
    with raises("transfer region tensor mismatch"):
        dataclasses.replace(good, source=frag((0, 0), (2, 4), tensor_id="x"))
    with raises("transfer region logical rank mismatch"):
        dataclasses.replace(good, overlap_offset=(), overlap_shape=())
    with raises("transfer region logical rank mismatch"):
        dataclasses.replace(good, overlap_offset=(0,), overlap_shape=(2,))
    with raises("transfer region logical rank mismatch"):
        dataclasses.replace(good, overlap_shape=(2, 2, 1))
    with raises("transfer region logical box is invalid"):
        dataclasses.replace(good, overlap_offset=(-1, 0))
    with raises("transfer region logical box is invalid"):
        dataclasses.replace(good, overlap_shape=(0, 2))
    with raises("transfer region exceeds source logical fragment"):
        dataclasses.replace(good, source=frag((0, 1), (2, 3)))
    with raises("transfer region exceeds target logical fragment"):
        dataclasses.replace(good, overlap_shape=(2, 3))
    for name in ("source_base_offset", "target_base_offset", "inner_bytes"):
        with raises(f"transfer region {name} must be an integer"):
            dataclasses.replace(good, **{name: 1.0})
    with raises("transfer region base offsets must be non-negative"):
        dataclasses.replace(good, source_base_offset=-1)
    with raises("transfer region base offsets must be non-negative"):
        dataclasses.replace(good, target_base_offset=-8)
    with raises("transfer region inner_bytes must be positive"):
        dataclasses.replace(good, inner_bytes=0)
    with raises("transfer region outer loop rank mismatch"):
        dataclasses.replace(good, source_strides=())
    with raises("transfer region outer loop counts must be positive"):
        dataclasses.replace(good, outer_loop_counts=(0,))
    with raises("transfer region strides must be non-negative"):
        dataclasses.replace(good, target_strides=(-4,))
    odd = PlacementFragment("t", (0, 0), (2, 4), 17, ParallelRank(), placement_fragment_id="odd")
    with raises("transfer region fragment byte size is invalid"):
        dataclasses.replace(good, source=odd)
    with raises("transfer region source and target itemsize differ"):
        dataclasses.replace(good, source=frag((0, 0), (2, 4), itemsize=4))
    with raises("transfer region loop geometry does not match overlap"):
        dataclasses.replace(good, inner_bytes=8)
    with raises("transfer region source base offset is inconsistent"):
        dataclasses.replace(good, source_base_offset=2)
    with raises("transfer region target base offset is inconsistent"):
        dataclasses.replace(good, target_base_offset=2)
    # same total bytes, not canonical: one 8-byte run instead of 2 x 4
    flat = region(frag((0,), (8,)), frag((0,), (8,)), (0,), (8,))
    with raises("transfer region loop geometry is not canonical"):
        dataclasses.replace(flat, inner_bytes=8, outer_loop_counts=(2,), source_strides=(8,), target_strides=(8,))
    with raises("transfer region loop geometry is not canonical"):
        dataclasses.replace(good, outer_loop_counts=(1, 2), source_strides=(0, 8), target_strides=(0, 4))


def test_transfer_region_stride_overlap_and_bounds() -> None:
    # A source fragment whose byte size is smaller than its stride span is caught by validate_bounds.
    s = frag((0, 0), (2, 4))
    t = frag((0, 0), (2, 2))
    good = region(s, t, (0, 0), (2, 2))
    object.__setattr__(good, "source_base_offset", 10)
    with raises("transfer region exceeds source fragment"):
        good.validate_bounds()
    good2 = region(s, t, (0, 0), (2, 2))
    object.__setattr__(good2, "target_base_offset", 6)
    with raises("transfer region exceeds target fragment"):
        good2.validate_bounds()


def test_transfer_region_is_frozen_and_pickles() -> None:
    r = region(frag((0, 0), (2, 4)), frag((0, 0), (2, 2)), (0, 0), (2, 2))
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.inner_bytes = 1  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(r)) == r
    assert copy.copy(r) == r
    assert dataclasses.asdict(r)["inner_bytes"] == 4


# --- §8.6 LogicalTransferPlan ------------------------------------------------------------------


TENSOR = TensorSpec("w", (8, 6), itemsize=2, layer_id=0)


def simple_plan(**over):
    source = tp_placement("src", TENSOR, 2, 0, dp=2)
    target = tp_placement("dst", TENSOR, 3, 1)
    return plan_placement_transfer(source, target, **over)


def test_logical_plan_fields_and_flags() -> None:
    fields = dataclasses.fields(LogicalTransferPlan)
    assert [f.name for f in fields] == [
        "resource_id", "revision", "source_placement", "target_placement", "source_tensors", "target_tensors",
        "operations", "source_manifest", "planning_limits", "source_executors", "target_executors",
        "source_manifest_identity"]
    assert not fields[-1].init
    plan = simple_plan()
    assert plan.source_manifest_identity is None
    assert plan.total_bytes == 8 * 6 * 2
    assert plan.source_placement_id == plan.source_placement.placement_id
    assert plan.target_placement_id == plan.target_placement.placement_id
    assert {e.rank.dp for e in plan.source_executors} == {0}
    assert len(plan.source_executors) == 2 and len(plan.target_executors) == 3
    assert dataclasses.asdict(plan)["resource_id"] == "model"
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.operations = ()  # type: ignore[misc]
    with pytest.raises(TypeError):
        LogicalTransferPlan(pipeline_routes=(), **{})  # type: ignore[call-arg]


def test_operation_indices_for_executor() -> None:
    plan = simple_plan()
    seen = []
    for executor in plan.target_executors:
        indices = plan.operation_indices_for_executor(executor, "target")
        assert list(indices) == sorted(indices)
        assert all(plan.operations[i].target.placement_fragment_id in executor.placement_fragment_ids for i in indices)
        seen.extend(indices)
    assert sorted(seen) == list(range(len(plan.operations)))
    seen = []
    for executor in plan.source_executors:
        seen.extend(plan.operation_indices_for_executor(executor, "source"))
    assert sorted(seen) == list(range(len(plan.operations)))
    with raises("invalid executor side: middle"):
        plan.operation_indices_for_executor(plan.target_executors[0], "middle")
    with raises("source executor is not part of this logical plan"):
        plan.operation_indices_for_executor(plan.target_executors[0], "source")
    other = dataclasses.replace(plan.target_executors[0], participant_id="nobody")
    with raises("target executor is not part of this logical plan"):
        plan.operation_indices_for_executor(other, "target")


def test_pickle_state_excludes_views_and_revalidates() -> None:
    plan = simple_plan()
    routes = plan.pipeline_routes  # planner-built plans derive their views on first use
    assert "_operation_views" in plan.__dict__
    state = plan.__getstate__()
    assert "_operation_views" not in state
    assert routes
    restored = pickle.loads(pickle.dumps(plan))
    assert restored == plan and restored.pipeline_routes == plan.pipeline_routes
    forged = copy.copy(plan)
    ops = list(forged.operations)
    ops.pop()
    object.__setattr__(forged, "operations", tuple(ops))
    with raises("logical target fragment is not fully covered"):
        pickle.loads(pickle.dumps(forged))
    forged = copy.copy(plan)
    object.__setattr__(forged, "source_executors", ())
    with raises("logical plan has no source executor metadata"):
        pickle.loads(pickle.dumps(forged))


def test_replace_rules_of_post_init() -> None:
    plan = simple_plan()
    with raises("logical transfer plan identifiers must not be empty"):
        dataclasses.replace(plan, resource_id="")
    with raises("logical transfer plan identifiers must not be empty"):
        dataclasses.replace(plan, revision="")
    with raises("logical transfer plan target placement is invalid"):
        dataclasses.replace(plan, target_placement=None)
    with raises("logical transfer plan planning_limits is invalid"):
        dataclasses.replace(plan, planning_limits=None)
    with raises("logical transfer plan exceeds max_transfer_regions"):
        dataclasses.replace(plan, planning_limits=PlanningLimits(max_transfer_regions=len(plan.operations) - 1))
    dataclasses.replace(plan, planning_limits=PlanningLimits(max_transfer_regions=len(plan.operations)))
    with raises("logical transfer plan source placement is invalid"):
        dataclasses.replace(plan, source_placement="x")
    with raises("logical transfer plan source manifest is invalid"):
        dataclasses.replace(plan, source_manifest="x")
    with raises("logical transfer plan requires exactly one source provenance"):
        dataclasses.replace(plan, source_placement=None)
    with raises("logical transfer plan source placement identity differs"):
        dataclasses.replace(plan, source_placement=tp_placement("src", TENSOR, 2, 0, resource_id="other"))
    with raises("logical transfer plan target placement identity differs"):
        dataclasses.replace(plan, target_placement=tp_placement("dst", TENSOR, 3, 1, revision="r2"))
    with raises("logical transfer plan source and target weight_generation differs"):
        dataclasses.replace(plan, source_placement=tp_placement("src", TENSOR, 2, 0, weight_generation=2))
    ops = plan.operations
    with raises("logical transfer plan requires a canonical transfer operation"):
        dataclasses.replace(plan, operations=ops[:1] + (object(),) + ops[2:])
    max_seg = max(op.segment_count for op in ops)
    with raises("logical transfer plan exceeds max_segments_per_region"):
        dataclasses.replace(plan, planning_limits=PlanningLimits(max_segments_per_region=max_seg - 1))
    total = sum(op.segment_count for op in ops)
    with raises("logical transfer plan exceeds max_total_lowered_segments"):
        dataclasses.replace(plan, planning_limits=PlanningLimits(max_total_lowered_segments=total - 1))
    dataclasses.replace(plan, planning_limits=PlanningLimits(max_total_lowered_segments=total))
    with raises("logical transfer plan has invalid canonical executor metadata"):
        dataclasses.replace(plan, target_executors=plan.target_executors + (object(),))
    with raises("logical plan has no target executor metadata"):
        dataclasses.replace(plan, target_executors=())
    with raises("logical plan has no source executor metadata"):
        dataclasses.replace(plan, source_executors=())
    with raises("logical plan source tensor catalog differs from placement"):
        dataclasses.replace(plan, source_tensors=())
    with raises("logical target tensor catalog differs from placement"):
        dataclasses.replace(plan, target_tensors=())
    with raises("logical target fragment is not fully covered: "):
        dataclasses.replace(plan, operations=ops[1:])
    with raises("transfer plan has duplicate executor projection key"):
        dataclasses.replace(plan, target_executors=plan.target_executors + plan.target_executors[:1])


def test_target_side_self_checks() -> None:
    plan = simple_plan()
    ops = plan.operations
    e0 = plan.target_executors[0]
    with raises("logical transfer plan target must be a placement"):
        _swap_target(plan)
    forged_target = PlacementFragment(ops[0].target.tensor_id, ops[0].target.global_offset, ops[0].target.local_shape,
                                      ops[0].target.nbytes, ParallelRank(tp=0), pipeline_stage_id=3,
                                      placement_fragment_id=ops[0].target.placement_fragment_id)
    with raises("logical plan and target placement fragment snapshots differ"):
        dataclasses.replace(plan, operations=(dataclasses.replace(ops[0], target=forged_target),) + ops[1:])
    with raises("logical target executor placement differs from target"):
        dataclasses.replace(plan, target_executors=(dataclasses.replace(e0, placement_id="sha256:x"),) + plan.target_executors[1:])
    with raises("logical plan has duplicate target executor participant"):
        dataclasses.replace(plan, target_executors=plan.target_executors + (dataclasses.replace(e0, placement_fragment_ids=("zz",)),))
    with raises("logical target executor differs from target placement"):
        dataclasses.replace(plan, target_executors=(dataclasses.replace(e0, rank=ParallelRank(tp=2)),) + plan.target_executors[1:])
    with raises("logical target executor differs from target placement"):
        dataclasses.replace(plan, target_executors=(dataclasses.replace(e0, participant_id="ghost"),) + plan.target_executors[1:])
    with raises("logical target executor fragments differ from target placement"):
        dataclasses.replace(plan, target_executors=(dataclasses.replace(e0, placement_fragment_ids=("zz",)),) + plan.target_executors[1:])
    with raises("logical target executors differ from planned operations"):
        dataclasses.replace(plan, target_executors=plan.target_executors[1:])


def _swap_target(plan):
    ops = plan.operations
    bad = copy.copy(ops[0])
    object.__setattr__(bad, "target", "not a fragment")
    return dataclasses.replace(plan, operations=(bad,) + ops[1:])


def test_source_side_self_checks() -> None:
    plan = simple_plan()
    ops = plan.operations
    e0 = plan.source_executors[0]
    src = ops[0].source
    forged = PlacementFragment(src.tensor_id, src.global_offset, src.local_shape, src.nbytes, ParallelRank(tp=1),
                               placement_fragment_id=src.placement_fragment_id)
    bad = copy.copy(ops[0])
    object.__setattr__(bad, "source", forged)
    with raises("logical plan and source placement fragment snapshots differ"):
        dataclasses.replace(plan, operations=(bad,) + ops[1:])
    with raises("logical source executor placement differs from source"):
        dataclasses.replace(plan, source_executors=(dataclasses.replace(e0, placement_id="sha256:x"),) + plan.source_executors[1:])
    with raises("logical plan has duplicate source executor participant"):
        dataclasses.replace(plan, source_executors=plan.source_executors + (dataclasses.replace(e0, placement_fragment_ids=("zz",)),))
    with raises("logical source executor differs from source placement"):
        dataclasses.replace(plan, source_executors=(dataclasses.replace(e0, rank=ParallelRank(tp=1, dp=1)),) + plan.source_executors[1:])
    with raises("logical source executor fragments differ from source placement"):
        dataclasses.replace(plan, source_executors=(dataclasses.replace(e0, placement_fragment_ids=("zz",)),) + plan.source_executors[1:])
    # an unselected replica listed as executor has no operation
    parts = [p for p in plan.source_placement.parts if p.rank.dp == 1]
    extra = PlacementExecutorPlan(plan.source_placement.placement_id, parts[0].participant_id, parts[0].rank,
                                  tuple(sorted(f.placement_fragment_id for f in parts[0].fragments)))
    with raises("logical source executor operations differ from source placement"):
        dataclasses.replace(plan, source_executors=plan.source_executors + (extra,))
    with raises("logical source executors differ from planned operations"):
        dataclasses.replace(plan, source_executors=plan.source_executors[1:])

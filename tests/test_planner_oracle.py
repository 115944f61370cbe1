"""Execution oracle for the logical planner (spec §11.1, §11.2, §11.7).

Hypothesis draws a pair of placements of the same tensors (1-D..4-D, itemsizes 1/2/4/8) over all
four axes: uneven TP splits on any dimension, grouped experts (EP split on dim 0), independent
experts (EP ownership), DP replicas or DP owners, PP owners, storage segmentation, single-replica
selections. The oracle fills every source fragment from a random global tensor, applies the plan's
regions with byte copies (``iter_segments``), and checks that each target fragment holds exactly
its slice with every byte written once. It also checks the DP replica choice (round robin over
complete replicas, minimum owner), that every region equals its canonically re-validated copy,
that local plans are the per-participant restriction of the full plan, and determinism.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
from typing import Any, Dict, List, Optional, Sequence, Tuple

from hypothesis import given, strategies as st

from layout_model import KINDS, AxisSpec, Coord, FragmentSpec, Layout, TensorSpec, build_placement, build_tensor
from strategies import axis_sizes, participants_for, segmented_boxes, uneven_cuts

from mooncake.reshard.weight.planner import (
    plan_placement_transfer,
    plan_placement_transfer_to_local_target,
    plan_stored_transfer_to_target_placement,
)
from mooncake.reshard.weight.storage_manifest import StoredFragmentSnapshot, StoredWeightManifest

Draw = Any
DTYPES = [("int8", 1), ("bfloat16", 2), ("float32", 4), ("float64", 8)]


# ---------------------------------------------------------------------------------------------
# strategies


@st.composite
def base_tensors(draw: Draw, max_tensors: int = 3, max_ndim: int = 4) -> List[TensorSpec]:
    """Tensor identities shared by both sides (axes are drawn per side)."""
    count = draw(st.integers(1, max_tensors))
    names = draw(st.lists(st.sampled_from(["embed", "layers.0.qkv", "layers.1.o", "experts.w1", "norm", "lm_head"]),
                          min_size=count, max_size=count, unique=True))
    out = []
    for name in names:
        ndim = draw(st.integers(1, max_ndim))
        top = 6 if ndim <= 2 else 4
        shape = tuple(draw(st.integers(1, top)) for _ in range(ndim))
        dtype, itemsize = draw(st.sampled_from(DTYPES))
        out.append(TensorSpec(
            tensor_id=name, global_shape=shape, dtype=dtype, itemsize=itemsize,
            layer_id=draw(st.none() | st.integers(0, 3)),
            expert_id=draw(st.none() | st.integers(0, 7)),
        ))
    return out


@st.composite
def side_tensor(draw: Draw, sizes: Tuple[int, int, int, int], participants: Sequence[Tuple[str, Coord]],
                base: TensorSpec, single_dp_owner: bool) -> Tuple[TensorSpec, List[FragmentSpec]]:
    """Axes and a complete fragment set of ``base`` on one side."""
    tp, pp, ep, dp = sizes
    size = {"tp": tp, "pp": pp, "ep": ep, "dp": dp}
    shape = base.global_shape
    ndim = len(shape)
    options = {
        "dp": ["replicated", "ownership"],
        "pp": ["ownership", "replicated"],
        "ep": ["split", "ownership", "replicated"],
        "tp": ["split", "replicated", "ownership"],
    }
    choice: Dict[str, str] = {}
    split_dim: Dict[str, int] = {}
    for kind in KINDS:
        opts = list(options[kind])
        if kind == "ep" and (base.expert_id is not None or shape[0] < ep):
            opts.remove("split")
        if kind == "tp":
            free = [d for d in range(ndim) if shape[d] >= tp and d not in split_dim.values()]
            if not free:
                opts.remove("split")
        if size[kind] == 1:
            opts.append("none")
        choice[kind] = draw(st.sampled_from(opts))
        if choice[kind] == "split":
            if kind == "ep":
                split_dim["ep"] = 0
            else:
                split_dim["tp"] = draw(st.sampled_from(
                    [d for d in range(ndim) if shape[d] >= tp and d not in split_dim.values()]))
    axes = []
    for kind in KINDS:
        if choice[kind] == "split":
            axes.append(AxisSpec("split", kind, split_dim[kind]))
        elif choice[kind] in ("replicated", "ownership"):
            axes.append(AxisSpec(choice[kind], kind))
    tensor = dataclasses.replace(base, axes=tuple(draw(st.permutations(axes))))
    own = tensor.kinds("ownership")
    split_kinds = [k for k in KINDS if k in split_dim]
    pieces = {k: uneven_cuts(draw, shape[split_dim[k]], size[k]) for k in split_kinds}
    owners = sorted({tuple(c.get(k) for k in own) for _, c in participants})
    most = 1 if (single_dp_owner and "dp" in own) else min(2, len(owners))
    chosen = draw(st.lists(st.sampled_from(owners), min_size=1, max_size=most, unique=True))
    fragments = []
    # One storage segmentation per distinct box: replicas of a box must be segmented alike,
    # because owner groups collapse identical geometry only (spec 11.2).
    segmentation: Dict[Any, List[Any]] = {}
    for _, c in participants:
        if tuple(c.get(k) for k in own) not in chosen:
            continue
        offset = [0] * ndim
        extent = list(shape)
        for k in split_kinds:
            begin, end = pieces[k][c.get(k)]
            offset[split_dim[k]] = begin
            extent[split_dim[k]] = end - begin
        box = (tuple(offset), tuple(extent))
        if box not in segmentation:
            segmentation[box] = segmented_boxes(draw, box[0], box[1], depth=2)
        for box_offset, box_shape in segmentation[box]:
            fragments.append(FragmentSpec(tensor_id=tensor.tensor_id, offset=box_offset, shape=box_shape, rank=c))
    return tensor, fragments


@st.composite
def side_layout(draw: Draw, bases: Sequence[TensorSpec], name: str, source: bool) -> Layout:
    sizes = draw(axis_sizes(max_size=3, max_world=8))
    participants = draw(participants_for(sizes))
    tensors = []
    fragments: List[FragmentSpec] = []
    for base in bases:
        tensor, frs = draw(side_tensor(sizes, participants, base, single_dp_owner=source))
        tensors.append(tensor)
        fragments.extend(frs)
    if draw(st.booleans()):
        fragments = [dataclasses.replace(f, pipeline_stage_id=f.rank.pp) for f in fragments]
    fragments = [dataclasses.replace(f, fragment_id=f"{name}-{i:03d}") for i, f in enumerate(fragments)]
    order = draw(st.permutations(range(len(fragments))))
    return Layout(
        sizes=sizes,
        participants=participants,
        tensors=tuple(tensors),
        fragments=tuple(fragments[i] for i in order),
        placement_set_id=name,
    )


@st.composite
def placement_pairs(draw: Draw) -> Tuple[Layout, Layout]:
    bases = draw(base_tensors())
    return draw(side_layout(bases, "src", True)), draw(side_layout(bases, "dst", False))


# ---------------------------------------------------------------------------------------------
# the oracle


def _global_data(tensors: Sequence[Any], seed: int) -> Dict[str, bytes]:
    rng = random.Random(seed)
    return {t.tensor_id: rng.randbytes(math.prod(t.global_shape) * t.itemsize) for t in tensors}


def _box_bytes(data: bytes, global_shape: Sequence[int], itemsize: int,
               offset: Sequence[int], shape: Sequence[int]) -> bytes:
    strides = [itemsize] * len(global_shape)
    for d in range(len(global_shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * global_shape[d + 1]
    run = shape[-1] * itemsize
    out = bytearray()
    for index in itertools.product(*(range(o, o + s) for o, s in zip(offset[:-1], shape[:-1]))):
        start = sum(i * st_ for i, st_ in zip(index, strides)) + offset[-1] * itemsize
        out += data[start:start + run]
    return bytes(out)


def _fragment_key(fragment: Any) -> str:
    return fragment.fragment_id if isinstance(fragment, StoredFragmentSnapshot) else fragment.placement_fragment_id


def execute_and_check(plan: Any, source_fragments: Sequence[Any], source_tensors: Sequence[Any],
                      target_fragments: Sequence[Any], target_tensors: Sequence[Any], seed: int) -> None:
    """Byte-copy the plan between real buffers and check every target fragment."""
    tensors = {t.tensor_id: t for t in source_tensors}
    data = _global_data(source_tensors, seed)
    source_buffers = {
        _fragment_key(f): _box_bytes(data[f.tensor_id], tensors[f.tensor_id].global_shape,
                                     tensors[f.tensor_id].itemsize, f.global_offset, f.local_shape)
        for f in source_fragments
    }
    target_buffers = {f.placement_fragment_id: bytearray(f.nbytes) for f in target_fragments}
    writes = {f.placement_fragment_id: [0] * f.nbytes for f in target_fragments}
    for op in plan.operations:
        src = source_buffers[_fragment_key(op.source)]
        dst = target_buffers[op.target.placement_fragment_id]
        count = writes[op.target.placement_fragment_id]
        for s, t, n in op.iter_segments(max_segments=1 << 40):
            assert 0 <= s and s + n <= len(src)
            assert 0 <= t and t + n <= len(dst)
            dst[t:t + n] = src[s:s + n]
            for i in range(t, t + n):
                count[i] += 1
    target_tensor = {t.tensor_id: t for t in target_tensors}
    for f in target_fragments:
        t = target_tensor[f.tensor_id]
        expected = _box_bytes(data[f.tensor_id], t.global_shape, t.itemsize, f.global_offset, f.local_shape)
        assert bytes(target_buffers[f.placement_fragment_id]) == expected, f.placement_fragment_id
        assert set(writes[f.placement_fragment_id]) == {1}, f.placement_fragment_id


def _cells(offset: Sequence[int], shape: Sequence[int]) -> set:
    return set(itertools.product(*(range(o, o + s) for o, s in zip(offset, shape))))


def _covers(tensor: Any, fragments: Sequence[Any]) -> bool:
    """Collapsed geometry exactly covers the tensor (cell oracle)."""
    boxes = {(tuple(f.global_offset), tuple(f.local_shape)) for f in fragments}
    total = sum(math.prod(s) for _, s in boxes)
    cells = set()
    for o, s in boxes:
        cells |= _cells(o, s)
    return total == math.prod(tensor.global_shape) and cells == _cells((0,) * len(tensor.global_shape), tensor.global_shape)


def _owner(tensor: Any, rank: Any) -> Tuple[Tuple[str, int], ...]:
    kinds = [a.kind for a in tensor.parallel_axes if type(a).__name__ == "OwnershipAxis"]
    return tuple((k, getattr(rank, k)) for k in kinds)


def _dp_owned(tensor: Any) -> bool:
    return any(type(a).__name__ == "OwnershipAxis" and a.kind == "dp" for a in tensor.parallel_axes)


def check_replica_choice(plan: Any, source: Any) -> None:
    """Spec §11.2: round robin over complete DP replicas, minimum owner, unique DP owner."""
    tensors = {t.tensor_id: t for t in source.tensors}
    dp_ranks = sorted({f.rank.dp for f in source.fragments})
    complete: Dict[int, Dict[str, Any]] = {}
    for dp in dp_ranks:
        chosen: Dict[str, Any] = {}
        ok = True
        for tid, tensor in tensors.items():
            if _dp_owned(tensor):
                continue
            groups: Dict[Any, List[Any]] = {}
            for f in source.fragments:
                if f.tensor_id == tid and f.rank.dp == dp:
                    groups.setdefault(_owner(tensor, f.rank), []).append(f)
            if not groups or not all(_covers(tensor, g) for g in groups.values()):
                ok = False
                break
            chosen[tid] = min(groups)
        if ok:
            complete[dp] = chosen
    ranks = sorted(complete)
    for op in plan.operations:
        tensor = tensors[op.tensor_id]
        owner = _owner(tensor, op.source.rank)
        if _dp_owned(tensor):
            groups = {}
            for f in source.fragments:
                if f.tensor_id == op.tensor_id:
                    groups.setdefault(_owner(tensor, f.rank), []).append(f)
            complete_owners = [o for o, g in groups.items() if _covers(tensor, g)]
            assert complete_owners == [owner]
        else:
            expected_dp = ranks[op.target.rank.dp % len(ranks)]
            assert op.source.rank.dp == expected_dp
            assert owner == complete[expected_dp][op.tensor_id]


def check_regions_canonical(plan: Any) -> None:
    for op in plan.operations:
        assert dataclasses.replace(op) == op  # the public constructor re-derives the same geometry


@given(placement_pairs(), st.integers(0, 2**32))
def test_plan_moves_every_byte_exactly_once(pair: Tuple[Layout, Layout], seed: int) -> None:
    src_layout, dst_layout = pair
    source = build_placement(src_layout)
    target = build_placement(dst_layout)
    plan = plan_placement_transfer(source, target)
    execute_and_check(plan, source.fragments, source.tensors, target.fragments, target.tensors, seed)
    check_replica_choice(plan, source)
    check_regions_canonical(plan)
    assert dataclasses.replace(plan) == plan  # the full __post_init__ accepts the planner's output
    assert plan.total_bytes == sum(f.nbytes for f in target.fragments)
    assert plan_placement_transfer(source, target) == plan  # deterministic
    # reversed inventory order gives equal placements and an identical plan
    assert plan_placement_transfer(build_placement(src_layout, reverse=True), build_placement(dst_layout, reverse=True)) == plan


@given(placement_pairs(), st.data())
def test_local_plan_is_the_participant_restriction(pair: Tuple[Layout, Layout], data: st.DataObject) -> None:
    src_layout, dst_layout = pair
    source = build_placement(src_layout)
    target = build_placement(dst_layout)
    full = plan_placement_transfer(source, target)
    parts = [p for p in target.parts if p.fragments]
    part = data.draw(st.sampled_from(parts))
    local = plan_placement_transfer_to_local_target(source, target, part.participant_id)
    mine = {f.placement_fragment_id for f in part.fragments}
    assert local.operations == tuple(op for op in full.operations if op.target.placement_fragment_id in mine)
    assert [e.participant_id for e in local.target_executors] == [part.participant_id]
    assert local.target_tensors == tuple(sorted(part.tensors, key=lambda t: t.tensor_id))
    assert local.source_tensors == source.tensors
    assert dataclasses.replace(local) == local
    execute_and_check(local, source.fragments, source.tensors, part.fragments, part.tensors, 7)


@st.composite
def stored_pairs(draw: Draw) -> Tuple[Any, Layout]:
    bases = draw(base_tensors(max_tensors=2))
    target = draw(side_layout(bases, "dst", False))
    group = "weights/default/model/rev-1"
    fragments = []
    for base in bases:
        cuts = [uneven_cuts(draw, e, draw(st.integers(1, min(e, 3)))) for e in base.global_shape]
        for cell in itertools.product(*cuts):
            offset = tuple(b for b, _ in cell)
            shape = tuple(e - b for b, e in cell)
            index = len(fragments)
            fragments.append(StoredFragmentSnapshot(
                fragment_id=f"stored-{draw(st.integers(0, 99)):02d}-{index}",
                tensor_id=base.tensor_id, global_offset=offset, local_shape=shape,
                object_key=f"{group}/payload/{index % 2}", object_offset=index * 4096,
                nbytes=math.prod(shape) * base.itemsize,
            ))
    tensors = [build_tensor(dataclasses.replace(t)) for t in target.tensors]
    manifest = StoredWeightManifest(
        namespace="default", resource_id=target.resource_id, group_id=group,
        manifest_key=f"{group}/manifest", created_at="2026-01-01T00:00:00Z",
        revision=target.revision, weight_generation=target.weight_generation,
        tensors=tuple(draw(st.permutations(tensors))), fragments=tuple(draw(st.permutations(fragments))),
    )
    return manifest, target


@given(stored_pairs(), st.integers(0, 2**32))
def test_stored_plan_moves_every_byte_exactly_once(pair: Tuple[Any, Layout], seed: int) -> None:
    manifest, dst_layout = pair
    target = build_placement(dst_layout)
    plan = plan_stored_transfer_to_target_placement(manifest, target)
    assert plan.source_placement is None and plan.source_executors == ()
    assert plan.source_manifest == manifest
    assert plan.source_manifest_identity == manifest.manifest_identity
    assert plan.source_tensors == tuple(sorted(manifest.tensors, key=lambda t: t.tensor_id))
    execute_and_check(plan, manifest.fragments, manifest.tensors, target.fragments, target.tensors, seed)
    check_regions_canonical(plan)
    assert dataclasses.replace(plan) == plan
    assert all(route.source_pp is None and route.source_pipeline_stage_id is None for route in plan.pipeline_routes)

"""The overlap kernel's one-member cover path (csrc/overlap.c, ``single``).

A cover holding one source fragment is served without building its index. The differential: the
same problem with a decoy source fragment added to every cover, placed far beyond every target
(it can never overlap one), takes the indexed path and must give exactly the same regions, the
same error and the same reporting target; so must the decoy placed first in the cover. Ranks
above the grid limit (64), not-covered targets, partial and empty overlaps, byte-size mismatches
and every planning limit are drawn.
"""

from __future__ import annotations

import math
from typing import Any, Optional

from hypothesis import given, settings, strategies as st
from spec_helpers import field_state

from mooncake.reshard import _native
from mooncake.reshard.weight._planner.geometry import FragmentBoxes, plan_overlap_regions, plan_region_objects

FAR = 1 << 40  # decoy offset: beyond every drawn target


def _boxes(items: list[tuple[int, tuple[int, ...], tuple[int, ...], int]]) -> FragmentBoxes:
    boxes = FragmentBoxes()
    for tensor, offset, shape, nbytes in items:
        boxes.add(tensor, offset, shape, nbytes)
    return boxes


def _run(problem: dict[str, Any], decoy: Optional[str]) -> Any:
    """``plan_overlap_regions`` of the problem; with ``decoy`` ("last"/"first") every cover also
    holds a far-away fragment of its tensor (appended after the real sources, so their indices
    are unchanged)."""
    sources = list(problem["sources"])
    covers: list[list[int]] = [list(members) for members in problem["covers"]]
    order = list(problem["order"])
    if decoy is not None:
        for members in covers:
            tensor = sources[members[0]][0]
            nd = problem["ndim"][tensor]
            shape = (1,) * nd
            sources.append((tensor, (FAR,) + (0,) * (nd - 1), shape, problem["itemsize"][tensor]))
            order.append(len(order))
            index = len(sources) - 1
            if decoy == "last":
                members.append(index)
            else:
                members.insert(0, index)
    start = [0]
    flat: list[int] = []
    for members in covers:
        flat.extend(members)
        start.append(len(flat))
    targets = problem["targets"]
    try:
        return plan_overlap_regions(
            tensor_ndim=problem["ndim"],
            tensor_itemsize=problem["itemsize"],
            source=_boxes(sources),
            source_order=order,
            cover_start=start,
            cover_members=flat,
            target=_boxes([t[:4] for t in targets]),
            target_cover=[t[4] for t in targets],
            nprocess=len(targets),
            max_transfer_regions=problem["limits"][0],
            max_segments_per_region=problem["limits"][1],
            max_total_lowered_segments=problem["limits"][2],
            target_fragment_ids=[f"t{i}" for i in range(len(targets))],
        )
    except ValueError as exc:
        return ("error", str(exc))


@st.composite
def problems(draw: Any) -> dict[str, Any]:
    ntensors = draw(st.integers(1, 3))
    ndim = [draw(st.sampled_from([1, 2, 3, 65])) for _ in range(ntensors)]
    itemsize = [draw(st.sampled_from([1, 2, 4])) for _ in range(ntensors)]
    sources = []
    covers = []
    for tensor in range(ntensors):
        for _ in range(draw(st.integers(1, 2))):  # covers of this tensor, one member each
            nd = ndim[tensor]
            offset = tuple(draw(st.integers(0, 4)) if d < 3 else 0 for d in range(nd))
            shape = tuple(draw(st.integers(1, 5)) if d < 3 else 1 for d in range(nd))
            nbytes = math.prod(shape) * itemsize[tensor]
            if draw(st.integers(0, 15)) == 0:
                nbytes += 1  # byte size differs from the box
            covers.append([len(sources)])
            sources.append((tensor, offset, shape, nbytes))
    targets = []
    for _ in range(draw(st.integers(1, 8))):
        cover = draw(st.integers(-1 if draw(st.integers(0, 9)) == 0 else 0, len(covers) - 1))
        tensor = sources[covers[cover][0]][0] if cover >= 0 else draw(st.integers(0, ntensors - 1))
        nd = ndim[tensor]
        if cover >= 0 and draw(st.booleans()):  # a box inside the cover's source: covered
            s_off, s_shape = sources[covers[cover][0]][1:3]
            offset = []
            shape = []
            for d in range(nd):
                lo = draw(st.integers(0, s_shape[d] - 1))
                hi = draw(st.integers(lo + 1, s_shape[d]))
                offset.append(s_off[d] + lo)
                shape.append(hi - lo)
        else:  # anywhere: partial, empty or no overlap
            offset = [draw(st.integers(0, 6)) if d < 3 else draw(st.sampled_from([0, 0, 1])) for d in range(nd)]
            shape = [draw(st.integers(1, 5)) if d < 3 else 1 for d in range(nd)]
        nbytes = math.prod(shape) * itemsize[tensor]
        targets.append((tensor, tuple(offset), tuple(shape), nbytes, cover))
    limits = (
        draw(st.sampled_from([1, 2, 5, 1 << 20])),
        draw(st.sampled_from([1, 3, 1 << 20])),
        draw(st.sampled_from([2, 10, 1 << 20])),
    )
    order = list(range(len(sources)))
    order.reverse()
    return {
        "ndim": ndim,
        "itemsize": itemsize,
        "sources": sources,
        "covers": covers,
        "order": order,
        "targets": targets,
        "limits": limits,
    }


@settings(max_examples=400, deadline=None)
@given(problems())
def test_single_member_cover_matches_indexed_cover(problem: dict[str, Any]) -> None:
    single = _run(problem, None)
    assert single == _run(problem, "last")
    assert single == _run(problem, "first")


def test_single_member_cover_outcomes() -> None:
    """Known outcomes: inside (one region), partial (not covered), disjoint (not covered)."""
    base = {
        "ndim": [2],
        "itemsize": [2],
        "sources": [(0, (0, 0), (4, 4), 32)],
        "covers": [[0]],
        "order": [0],
        "limits": (1 << 20, 1 << 20, 1 << 20),
    }
    inside = _run({**base, "targets": [(0, (1, 0), (2, 4), 16, 0)]}, None)
    assert inside == [(0, 0, (1, 0), (2, 4), 8, 0, 16, (), (), (), 1)]
    for box in (((2, 2), (4, 4)), ((8, 8), (1, 1))):
        assert _run({**base, "targets": [(0, *box, 2 * math.prod(box[1]), 0)]}, None) == (
            "error",
            "target fragment is not fully covered: t0",
        )


def test_plan_regions_single_member_cover_objects() -> None:
    """``plan_regions`` over one-member covers builds the same objects as the records say."""

    class Region:
        pass

    sources = ["s0", "s1"]
    targets = ["t0", "t1", "t2"]
    kernel = dict(
        tensor_ndim=[1],
        tensor_itemsize=[4],
        source=_boxes([(0, (0,), (4,), 16), (0, (4,), (4,), 16)]),
        source_order=[0, 1],
        cover_start=[0, 1, 2],
        cover_members=[0, 1],
        target=_boxes([(0, (0,), (2,), 8), (0, (5,), (3,), 12), (0, (2,), (2,), 8)]),
        target_cover=[0, 1, 0],
        nprocess=3,
        max_transfer_regions=100,
        max_segments_per_region=100,
        max_total_lowered_segments=100,
        target_fragment_ids=targets,
    )
    regions, used_sources, used_targets = plan_region_objects(Region, sources, targets, ["w", "w", "w"], **kernel)
    assert list(used_sources) == [0, 1] and list(used_targets) == [0, 1, 2]
    assert used_targets == range(3)  # every target used: range(n), no int object per index
    assert [(r.source, r.target, r.overlap_offset, r.source_base_offset) for r in regions] == [
        ("s0", "t0", (0,), 0),
        ("s1", "t1", (5,), 4),
        ("s0", "t2", (2,), 8),
    ]
    records = plan_overlap_regions(**kernel)
    assert [(r[0], r[1], r[2], r[4]) for r in records] == [(0, 0, (0,), 0), (1, 1, (5,), 4), (0, 2, (2,), 8)]
    assert callable(_native.plan_regions)


def test_bulk_regions_fill_their_shared_dicts_in_field_order() -> None:
    """From 1,024 regions on, plan_regions fills each region's materialized dict directly: the
    same fields, in field order, key-sharing (as small as the per-field stores make it), out of
    the collector; equal to the records."""
    import gc
    import sys

    from mooncake.reshard.weight._planner.contracts import TransferRegion

    fields = [
        "tensor_id", "source", "target", "overlap_offset", "overlap_shape", "source_base_offset",
        "target_base_offset", "inner_bytes", "outer_loop_counts", "source_strides", "target_strides",
    ]
    n = 1100
    sources = [f"s{i}" for i in range(n)]
    targets = [f"t{i}" for i in range(n)]
    kernel = dict(
        tensor_ndim=[2],
        tensor_itemsize=[2],
        source=_boxes([(0, (i, 0), (1, 8), 16) for i in range(n)]),
        source_order=list(range(n)),
        cover_start=list(range(n + 1)),
        cover_members=list(range(n)),
        target=_boxes([(0, (i, 2), (1, 4), 8) for i in range(n)]),
        target_cover=list(range(n)),
        nprocess=n,
        max_transfer_regions=1 << 20,
        max_segments_per_region=1 << 20,
        max_total_lowered_segments=1 << 20,
        target_fragment_ids=targets,
    )
    regions, _, _ = plan_region_objects(TransferRegion, sources, targets, ["w"] * n, **kernel)
    records = plan_overlap_regions(**kernel)
    assert len(regions) == len(records) == n
    for region, record in zip(regions, records):
        assert list(field_state(region)) == fields
        assert (region.source, region.target) == (sources[record[0]], targets[record[1]])
        assert (region.overlap_offset, region.overlap_shape, region.source_base_offset) == record[2:5]
        assert (region.target_base_offset, region.inner_bytes, region.outer_loop_counts) == record[5:8]
        assert (region.source_strides, region.target_strides) == record[8:10]
        assert not gc.is_tracked(region) and not hasattr(region, "__dict__")  # its C layout
    # as small as a region whose fields object.__setattr__ stored in field order
    probe = object.__new__(TransferRegion)
    for name in fields:
        object.__setattr__(probe, name, getattr(regions[0], name))
    assert sys.getsizeof(regions[5]) == sys.getsizeof(probe)

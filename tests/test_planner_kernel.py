"""The overlap kernel (csrc/overlap.c) against brute-force oracles: exact cover (grid and sweep
paths, the 3-D+ comparison budget), and planning over non-grid (brick) source covers."""

from __future__ import annotations

import dataclasses
import itertools
import math
import sys
from typing import Any, List, Sequence, Tuple

import pytest
from hypothesis import given, strategies as st

from layout_model import TensorSpec
from planner_helpers import tp_placement
from spec_helpers import raises

from mooncake.reshard import _native
from mooncake.reshard.weight.planner import plan_stored_transfer_to_target_placement
from mooncake.reshard.weight.storage_manifest import StoredFragmentSnapshot, StoredWeightManifest
from mooncake.reshard.weight._planner.geometry import exact_cover_failures

Box = Tuple[Tuple[int, ...], Tuple[int, ...]]


def cells(offset: Sequence[int], shape: Sequence[int]) -> List[Tuple[int, ...]]:
    return list(itertools.product(*(range(o, o + s) for o, s in zip(offset, shape))))


def oracle_cover(container: Box, boxes: Sequence[Box]) -> bool:
    if not boxes:
        return False
    seen: List[Tuple[int, ...]] = []
    for offset, shape in boxes:
        seen.extend(cells(offset, shape))
    return sorted(seen) == sorted(cells(*container))


@st.composite
def guillotine(draw: Any, offset: Tuple[int, ...], shape: Tuple[int, ...], depth: int) -> List[Box]:
    dims = [d for d, s in enumerate(shape) if s >= 2]
    if depth == 0 or not dims or draw(st.integers(0, 4)) == 0:
        return [(offset, shape)]
    d = draw(st.sampled_from(dims))
    cut = draw(st.integers(1, shape[d] - 1))
    first = shape[:d] + (cut,) + shape[d + 1:]
    second_offset = offset[:d] + (offset[d] + cut,) + offset[d + 1:]
    second = shape[:d] + (shape[d] - cut,) + shape[d + 1:]
    return draw(guillotine(offset, first, depth - 1)) + draw(guillotine(second_offset, second, depth - 1))


@st.composite
def cover_cases(draw: Any) -> Tuple[Box, List[Box]]:
    ndim = draw(st.integers(1, 4))
    shape = tuple(draw(st.integers(1, 5)) for _ in range(ndim))
    origin = tuple(draw(st.integers(0, 3)) for _ in range(ndim))
    boxes = draw(guillotine(origin, shape, 5))
    mutation = draw(st.sampled_from(["none", "drop", "duplicate", "grow", "shift", "swap"]))
    if mutation == "drop" and boxes:
        boxes.pop(draw(st.integers(0, len(boxes) - 1)))
    elif mutation == "duplicate":
        boxes.append(boxes[draw(st.integers(0, len(boxes) - 1))])
    elif mutation in ("grow", "shift"):
        i = draw(st.integers(0, len(boxes) - 1))
        d = draw(st.integers(0, ndim - 1))
        offset, extent = list(boxes[i][0]), list(boxes[i][1])
        if mutation == "grow":
            extent[d] += 1
        else:
            offset[d] = max(0, offset[d] + draw(st.sampled_from([-1, 1])))
        boxes[i] = (tuple(offset), tuple(extent))
    elif mutation == "swap" and len(boxes) >= 2:
        # replace two boxes by one spanning both on one dimension (overlap or gap appears)
        a, b = boxes[0], boxes[1]
        lo = tuple(min(x, y) for x, y in zip(a[0], b[0]))
        hi = tuple(max(x + s, y + t) for x, s, y, t in zip(a[0], a[1], b[0], b[1]))
        boxes = [(lo, tuple(h - l for l, h in zip(lo, hi)))] + boxes[2:]
    return (origin, shape), boxes


@given(st.lists(cover_cases(), min_size=1, max_size=4))
def test_exact_cover_batch_matches_cell_oracle(cases: List[Tuple[Box, List[Box]]]) -> None:
    containers = [c for c, _ in cases]
    boxes = [b for _, b in cases]
    verdicts = [oracle_cover(c, b) for c, b in cases]
    expected = next((i for i, ok in enumerate(verdicts) if not ok), None)
    assert exact_cover_failures(containers, boxes) == expected


def test_exact_cover_rank_mismatch_and_empty() -> None:
    assert exact_cover_failures([((0,), (2,))], [[]]) == 0
    assert exact_cover_failures([((0,), (2,)), ((0, 0), (1, 1))], [[((0,), (2,))], [((0,), (1,))]]) == 1
    assert exact_cover_failures([], []) is None


def _staircase(k: int, ndim: int) -> Tuple[Box, List[Box]]:
    # Disjoint boxes whose sweep dimension (dim 0, most distinct intervals) overlaps heavily:
    # row i holds [i, k) and [0, i) on dim 0. Not a grid, so the sweep path runs.
    tail = (0,) * (ndim - 2)
    ones = (1,) * (ndim - 2)
    boxes: List[Box] = []
    for i in range(k):
        boxes.append(((i, i) + tail, (k - i, 1) + ones))
        if i:
            boxes.append(((0, i) + tail, (i, 1) + ones))
    return ((0,) * ndim, (k, k) + ones), boxes


def test_high_dimensional_budget_fails_closed() -> None:
    container, boxes = _staircase(1500, 3)
    with raises("high-dimensional overlap budget exceeded before validation"):
        exact_cover_failures([container], [boxes])
    # the same layout in 2-D has no budget, and is an exact cover
    container, boxes = _staircase(1500, 2)
    assert exact_cover_failures([container], [boxes]) is None
    small, small_boxes = _staircase(40, 3)
    assert exact_cover_failures([small], [small_boxes]) is None


def test_kernel_rejects_malformed_packed_input() -> None:
    with pytest.raises(ValueError):
        _native.exact_cover_batch(b"\x01" + b"\x00" * 7, b"", b"", b"\x00" * 16, b"", b"")
    with pytest.raises(TypeError):
        _native.exact_cover_batch("x", b"", b"", b"", b"", b"")


# --- planning over a brick (non-grid) source cover -----------------------------------------------


@given(st.data())
def test_brick_cover_planning_matches_cells(data: st.DataObject) -> None:
    rows = data.draw(st.integers(2, 9))
    cols = data.draw(st.integers(2, 9))
    itemsize = data.draw(st.sampled_from([1, 2, 4, 8]))
    spec = TensorSpec("w", (rows, cols), itemsize=itemsize)
    dim = data.draw(st.integers(0, 1))
    target = tp_placement("dst", spec, data.draw(st.integers(1, min(spec.global_shape[dim], 4))), dim)
    pieces = data.draw(guillotine((0, 0), (rows, cols), 6))
    group = "weights/default/model/rev-1"
    sources = [
        StoredFragmentSnapshot(f"s{i:02d}", "w", o, s, f"{group}/payload/{i}", 0, math.prod(s) * itemsize)
        for i, (o, s) in enumerate(pieces)
    ]
    manifest = StoredWeightManifest(
        namespace="default", resource_id="model", group_id=group, manifest_key=f"{group}/manifest",
        created_at="2026-01-01T00:00:00Z", revision="rev-1", weight_generation=1,
        tensors=tuple(target.tensors), fragments=tuple(sources),
    )
    plan = plan_stored_transfer_to_target_placement(manifest, target)
    assert dataclasses.replace(plan) == plan
    by_target: dict = {}
    for op in plan.operations:
        assert dataclasses.replace(op) == op  # canonical geometry
        src = op.source
        overlap = set(cells(op.overlap_offset, op.overlap_shape))
        assert overlap <= set(cells(src.global_offset, src.local_shape))
        by_target.setdefault(op.target.placement_fragment_id, []).extend(overlap)
    for fragment in target.fragments:
        box = set(cells(fragment.global_offset, fragment.local_shape))
        assert sorted(by_target[fragment.placement_fragment_id]) == sorted(box)
        # every source piece that intersects the target appears exactly once
        expected = sorted(s.fragment_id for s in sources if set(cells(s.global_offset, s.local_shape)) & box)
        mine = sorted(op.source.fragment_id for op in plan.operations if op.target == fragment)
        assert mine == expected


# --- the kernel's packed inputs, read in place ---------------------------------------------------

_KERNEL_ARRAYS = (
    "tensor ndim", "tensor itemsize", "fragment tensors", "fragment offsets", "fragment shapes",
    "fragment nbytes", "fragment order", "cover starts", "cover members", "fragment tensors",
    "fragment offsets", "fragment shapes", "fragment nbytes", "target covers",
)


def _kernel_call(monkeypatch: pytest.MonkeyPatch) -> Tuple[Any, ...]:
    """plan_overlaps' 18 arguments as the planner passes them (captured from plan_regions) for
    TP2 -> TP4 of one (8, 6) tensor."""
    from mooncake.reshard.weight import plan_placement_transfer

    captured: List[Tuple[Any, ...]] = []
    real = _native.plan_regions

    def spy(*args: Any) -> Any:
        captured.append(args)
        return real(*args)

    monkeypatch.setattr(_native, "plan_regions", spy)
    spec = TensorSpec("w", (8, 6), itemsize=2)
    plan_placement_transfer(tp_placement("src", spec, 2, 0), tp_placement("dst", spec, 4, 1))
    (args,) = captured
    return args[4:]


def test_kernel_reads_packed_arrays_and_names_a_malformed_one(monkeypatch: pytest.MonkeyPatch) -> None:
    args = _kernel_call(monkeypatch)
    arrays = [i for i, value in enumerate(args) if isinstance(value, bytes)]
    assert len(arrays) == len(_KERNEL_ARRAYS) == 14
    expected = _native.plan_overlaps(*args)
    assert isinstance(expected, list) and len(expected) == 8  # each of the 4 targets meets both sources
    # fresh bytes objects held by nothing but the call's argument tuple: the same regions
    assert _native.plan_overlaps(*(bytes(bytearray(v)) if isinstance(v, bytes) else v for v in args)) == expected
    for i, name in zip(arrays, _KERNEL_ARRAYS):
        for bad, error, message in ((bytearray(args[i]), TypeError, f"{name} must be bytes"),
                                    (args[i] + b"\x00", ValueError, f"{name} has a partial 64-bit element")):
            changed = args[:i] + (bad,) + args[i + 1:]
            with pytest.raises(error, match=f"^{message}$"):
                _native.plan_overlaps(*changed)
    assert _native.plan_overlaps(*args) == expected


def test_exact_cover_batch_names_a_malformed_array() -> None:
    one = (1).to_bytes(8, sys.byteorder)  # native int64
    zero = bytes(8)
    args = (one, zero, one, zero + one, zero, one)  # one 1-D container [0, 1) covered by one box
    assert _native.exact_cover_batch(*args) == -1
    names = ("container ndim", "container offsets", "container shapes", "box starts", "box offsets", "box shapes")
    for i, name in enumerate(names):
        with pytest.raises(TypeError, match=f"^{name} must be bytes$"):
            _native.exact_cover_batch(*args[:i], bytearray(args[i]), *args[i + 1:])
        with pytest.raises(ValueError, match=f"^{name} has a partial 64-bit element$"):
            _native.exact_cover_batch(*args[:i], args[i] + b"\x00", *args[i + 1:])

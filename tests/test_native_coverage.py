"""Differential tests of the C box-geometry kernels against brute-force cell oracles."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mooncake.reshard import _native

import oracles  # tests/oracles.py: cell-enumeration oracles (spec 11.3)

Vec = tuple[int, ...]
Box = tuple[Vec, Vec]
BUDGET = "high-dimensional overlap budget exceeded before validation"


def oracle_boxes_overlap(offsets: list[tuple[int, ...]], shapes: list[tuple[int, ...]]) -> bool:
    return oracles.boxes_overlap(list(zip(offsets, shapes)))


def oracle_boxes_exactly_cover(
    c_off: tuple[int, ...], c_shape: tuple[int, ...], offsets: list[tuple[int, ...]], shapes: list[tuple[int, ...]]
) -> bool:
    return oracles.boxes_exactly_cover(c_off, c_shape, list(zip(offsets, shapes)))


def split_boxes(boxes: list[Box]) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]]]:
    return [b[0] for b in boxes], [b[1] for b in boxes]


@st.composite
def random_boxes(draw: st.DrawFn, max_dim: int = 4) -> tuple[int, list[Box]]:
    d = draw(st.integers(1, max_dim))
    side = 6 if d <= 2 else 4
    n = draw(st.integers(0, 30))
    boxes = []
    for _ in range(n):
        off = tuple(draw(st.integers(-2, side)) for _ in range(d))
        shp = tuple(draw(st.integers(0, 4)) for _ in range(d))
        boxes.append((off, shp))
    return d, boxes


def _cuts(draw: st.DrawFn, lo: int, hi: int) -> list[int]:
    if hi - lo <= 1:
        return [lo, hi]
    inner = draw(st.lists(st.integers(lo + 1, hi - 1), min_size=min(2, hi - lo - 1), max_size=6, unique=True))
    return [lo, *sorted(inner), hi]


@st.composite
def grid_boxes(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...], list[Box]]:
    """Cells of a regular grid over a container, with cells dropped and duplicated."""
    d = draw(st.integers(1, 4))
    c_off = tuple(draw(st.integers(-3, 3)) for _ in range(d))
    c_shape = tuple(draw(st.integers(2, (20, 8, 5, 3)[d - 1])) for _ in range(d))
    cuts = [_cuts(draw, o, o + s) for o, s in zip(c_off, c_shape)]
    cells: list[Box] = []
    for idx in itertools.product(*(range(len(c) - 1) for c in cuts)):
        off = tuple(cuts[k][i] for k, i in enumerate(idx))
        shp = tuple(cuts[k][i + 1] - cuts[k][i] for k, i in enumerate(idx))
        cells.append((off, shp))
    mode = draw(st.sampled_from(["exact", "drop", "dup", "shift"]))
    if mode == "drop" and len(cells) > 1:
        del cells[draw(st.integers(0, len(cells) - 1))]
    elif mode == "dup":
        cells.append(cells[draw(st.integers(0, len(cells) - 1))])
    elif mode == "shift":
        i = draw(st.integers(0, len(cells) - 1))
        off, shp = cells[i]
        cells[i] = ((off[0] + draw(st.sampled_from([-1, 1])), *off[1:]), shp)
    order = draw(st.permutations(range(len(cells))))
    return c_off, c_shape, [cells[i] for i in order]


@st.composite
def guillotine_boxes(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...], list[Box]]:
    """Recursive splits of a container: an exact, usually non-grid, cover (then maybe perturbed)."""
    d = draw(st.integers(2, 4))
    c_off = tuple(draw(st.integers(-2, 2)) for _ in range(d))
    c_shape = tuple(draw(st.integers(2, 10 if d == 2 else 5)) for _ in range(d))
    boxes: list[Box] = []

    def split(off: tuple[int, ...], shp: tuple[int, ...], depth: int) -> None:
        dims = [k for k in range(d) if shp[k] > 1]
        if depth == 0 or not dims or draw(st.integers(0, 9)) == 0:
            boxes.append((off, shp))
            return
        k = draw(st.sampled_from(dims))
        cut = draw(st.integers(1, shp[k] - 1))
        split(off, shp[:k] + (cut,) + shp[k + 1 :], depth - 1)
        split(off[:k] + (off[k] + cut,) + off[k + 1 :], shp[:k] + (shp[k] - cut,) + shp[k + 1 :], depth - 1)

    split(c_off, c_shape, 7)
    mode = draw(st.sampled_from(["exact", "exact", "drop", "dup", "grow"]))
    if mode == "drop" and len(boxes) > 1:
        del boxes[draw(st.integers(0, len(boxes) - 1))]
    elif mode == "dup":
        boxes.append(boxes[draw(st.integers(0, len(boxes) - 1))])
    elif mode == "grow":
        i = draw(st.integers(0, len(boxes) - 1))
        off, shp = boxes[i]
        k = draw(st.integers(0, d - 1))
        boxes[i] = (off, shp[:k] + (shp[k] + 1,) + shp[k + 1 :])
    order = draw(st.permutations(range(len(boxes))))
    return c_off, c_shape, [boxes[i] for i in order]


def _perturb(draw: st.DrawFn, boxes: list[Box]) -> list[Box]:
    mode = draw(st.sampled_from(["exact", "exact", "drop", "dup", "grow", "shift"]))
    d = len(boxes[0][0])
    i = draw(st.integers(0, len(boxes) - 1))
    off, shp = boxes[i]
    k = draw(st.integers(0, d - 1))
    if mode == "drop":
        del boxes[i]
    elif mode == "dup":
        boxes.append(boxes[i])
    elif mode == "grow":
        boxes[i] = (off, shp[:k] + (shp[k] + 1,) + shp[k + 1 :])
    elif mode == "shift":
        boxes[i] = (off[:k] + (off[k] + draw(st.sampled_from([-1, 1])),) + off[k + 1 :], shp)
    order = draw(st.permutations(range(len(boxes))))
    return [boxes[j] for j in order]


@st.composite
def big_guillotine(draw: st.DrawFn) -> tuple[Vec, Vec, list[Box]]:
    """Guillotine partitions with more than 16 boxes (past the small pairwise path)."""
    d = draw(st.integers(2, 4))
    c_shape = {2: (24, 24), 3: (8, 8, 6), 4: (5, 5, 4, 3)}[d]
    c_off = tuple(draw(st.integers(-3, 3)) for _ in range(d))
    boxes: list[Box] = [(c_off, c_shape)]
    target = draw(st.integers(18, 60))  # 18: a "drop" perturbation still leaves more than 16
    while len(boxes) < target:
        splittable = [j for j, (_, shp) in enumerate(boxes) if max(shp) > 1]
        if not splittable:
            break
        j = draw(st.sampled_from(splittable))
        off, shp = boxes.pop(j)
        k = draw(st.sampled_from([m for m in range(d) if shp[m] > 1]))
        cut = draw(st.integers(1, shp[k] - 1))
        boxes.append((off, shp[:k] + (cut,) + shp[k + 1 :]))
        boxes.append((off[:k] + (off[k] + cut,) + off[k + 1 :], shp[:k] + (shp[k] - cut,) + shp[k + 1 :]))
    return c_off, c_shape, _perturb(draw, boxes)


@st.composite
def big_grid(draw: st.DrawFn) -> tuple[Vec, Vec, list[Box]]:
    """Regular grids with more than 16 cells."""
    d = draw(st.integers(2, 4))
    c_shape = {2: (12, 12), 3: (6, 6, 6), 4: (4, 4, 4, 4)}[d]
    min_cuts = {2: 4, 3: 2, 4: 2}[d]
    c_off = tuple(draw(st.integers(-3, 3)) for _ in range(d))
    cuts = []
    for o, sz in zip(c_off, c_shape):
        inner = draw(st.lists(st.integers(o + 1, o + sz - 1), min_size=min_cuts, max_size=sz - 1, unique=True))
        cuts.append([o, *sorted(inner), o + sz])
    boxes: list[Box] = []
    for idx in itertools.product(*(range(len(c) - 1) for c in cuts)):
        boxes.append(
            (tuple(cuts[k][i] for k, i in enumerate(idx)), tuple(cuts[k][i + 1] - cuts[k][i] for k, i in enumerate(idx)))
        )
    return c_off, c_shape, _perturb(draw, boxes)


@settings(max_examples=200)
@given(st.one_of(big_guillotine(), big_grid()))
def test_large_structured_layouts_match_oracle(case: tuple[Vec, Vec, list[Box]]) -> None:
    c_off, c_shape, boxes = case
    assert len(boxes) > 16
    offsets, shapes = split_boxes(boxes)
    assert _native.boxes_overlap(offsets, shapes) == oracle_boxes_overlap(offsets, shapes)
    assert _native.boxes_exactly_cover(c_off, c_shape, offsets, shapes) == oracle_boxes_exactly_cover(
        c_off, c_shape, offsets, shapes
    )


@settings(max_examples=250)
@given(random_boxes())
def test_overlap_random_matches_oracle(case: tuple[int, list[Box]]) -> None:
    _, boxes = case
    offsets, shapes = split_boxes(boxes)
    assert _native.boxes_overlap(offsets, shapes) == oracle_boxes_overlap(offsets, shapes)


@settings(max_examples=250)
@given(random_boxes(), st.data())
def test_exactly_cover_random_matches_oracle(case: tuple[int, list[Box]], data: st.DataObject) -> None:
    d, boxes = case
    c_off = tuple(data.draw(st.integers(-2, 2)) for _ in range(d))
    c_shape = tuple(data.draw(st.integers(0, 5)) for _ in range(d))
    offsets, shapes = split_boxes(boxes)
    expected = oracle_boxes_exactly_cover(c_off, c_shape, offsets, shapes)
    assert _native.boxes_exactly_cover(c_off, c_shape, offsets, shapes) == expected


@settings(max_examples=200)
@given(st.one_of(grid_boxes(), guillotine_boxes()))
def test_structured_layouts_match_oracle(case: tuple[tuple[int, ...], tuple[int, ...], list[Box]]) -> None:
    c_off, c_shape, boxes = case
    offsets, shapes = split_boxes(boxes)
    assert _native.boxes_overlap(offsets, shapes) == oracle_boxes_overlap(offsets, shapes)
    assert _native.boxes_exactly_cover(c_off, c_shape, offsets, shapes) == oracle_boxes_exactly_cover(
        c_off, c_shape, offsets, shapes
    )
    # lists instead of tuples, and keywords
    assert _native.boxes_exactly_cover(
        container_offset=list(c_off),
        container_shape=list(c_shape),
        offsets=[list(o) for o in offsets],
        shapes=[list(s) for s in shapes],
    ) == oracle_boxes_exactly_cover(c_off, c_shape, offsets, shapes)


def test_basic_semantics() -> None:
    assert _native.boxes_overlap([], []) is False
    assert _native.boxes_overlap([(0, 0)], [(5, 5)]) is False
    assert _native.boxes_overlap([(0, 0), (2, 0)], [(2, 2), (2, 2)]) is False  # touching
    assert _native.boxes_overlap([(0, 0), (1, 1)], [(2, 2), (2, 2)]) is True
    assert _native.boxes_overlap([(0,), (0,)], [(0,), (0,)]) is False  # empty boxes
    assert _native.boxes_overlap([(), ()], [(), ()]) is True  # 0-D points coincide
    assert _native.boxes_exactly_cover((0, 0), (4, 4), [], []) is False
    assert _native.boxes_exactly_cover((0, 0), (4, 4), [(0, 0), (2, 0)], [(2, 4), (2, 4)]) is True
    assert _native.boxes_exactly_cover((0, 0), (4, 4), [(0, 0), (0, 0)], [(4, 4), (4, 4)]) is False
    assert _native.boxes_exactly_cover((), (), [()], [()]) is True
    assert _native.boxes_exactly_cover((1,), (3,), [(1,), (2,)], [(1,), (2,)]) is True


def test_int64_range_and_errors() -> None:
    big = 2**63
    lo = -(2**63)
    assert _native.boxes_overlap([(lo,), (0,)], [(5,), (big - 1,)]) is False
    assert _native.boxes_exactly_cover((lo,), (big - 1,), [(lo,)], [(big - 1,)]) is True
    for bad_off, bad_shape in [((big,), (1,)), ((lo - 1,), (1,)), ((0,), (big,))]:
        with pytest.raises(ValueError, match="must fit in a signed 64-bit integer"):
            _native.boxes_overlap([bad_off, (0,)], [bad_shape, (1,)])
        with pytest.raises(ValueError, match="must fit in a signed 64-bit integer"):
            _native.boxes_exactly_cover((0,), (1,), [bad_off], [bad_shape])
    with pytest.raises(ValueError, match="must fit in a signed 64-bit integer"):
        _native.boxes_exactly_cover((big,), (1,), [(0,)], [(1,)])
    # offset + shape beyond int64: an error for overlap, "not covered" for cover
    with pytest.raises(ValueError, match="box end must fit in a signed 64-bit integer"):
        _native.boxes_overlap([(big - 1,), (0,)], [(2,), (1,)])
    assert _native.boxes_exactly_cover((0,), (4,), [(big - 1,)], [(2,)]) is False
    assert _native.boxes_exactly_cover((big - 1,), (2,), [(big - 1,)], [(1,)]) is False
    # volume overflow (beyond 128 bits) means not covered
    huge = (2**62,) * 3
    assert _native.boxes_exactly_cover((0, 0, 0), huge, [(0, 0, 0)], [huge]) is False


def test_shape_and_type_errors() -> None:
    with pytest.raises(ValueError, match="zip\\(\\) arguments have different lengths"):
        _native.boxes_overlap([(0, 0), (0,)], [(1, 1), (1,)])
    with pytest.raises(ValueError, match="zip\\(\\) arguments have different lengths"):
        _native.boxes_overlap([(0, 0), (0, 0)], [(1, 1), (1,)])
    with pytest.raises(ValueError, match="zip\\(\\) arguments have different lengths"):
        _native.boxes_exactly_cover((0,), (2, 2), [(0, 0)], [(2, 2)])
    with pytest.raises(ValueError, match="offsets and shapes must have the same length"):
        _native.boxes_overlap([(0,), (1,)], [(1,)])
    with pytest.raises(ValueError, match="box shape must not be negative"):
        _native.boxes_overlap([(0,), (1,)], [(-1,), (1,)])
    with pytest.raises(TypeError):
        _native.boxes_overlap([(0.5,), (1,)], [(1,), (1,)])
    with pytest.raises(TypeError):
        _native.boxes_overlap([(0,), "a"], [(1,), (1,)])
    with pytest.raises(TypeError):
        _native.boxes_overlap({(0,)}, [(1,)])  # type: ignore[arg-type]

    class Idx:
        def __init__(self, v: int) -> None:
            self.v = v

        def __index__(self) -> int:
            return self.v

    class Boom:
        def __index__(self) -> int:
            raise RuntimeError("boom")

    assert _native.boxes_overlap([(Idx(0),), (Idx(1),)], [(Idx(2),), (1,)]) is True
    with pytest.raises(RuntimeError, match="boom"):
        _native.boxes_overlap([(Boom(),), (0,)], [(1,), (1,)])


def _budget_case(n: int) -> tuple[list[tuple[int, int, int]], list[tuple[int, int, int]]]:
    # dim 0: distinct, mutually overlapping extents (non-grid, all active at once);
    # dim 1: disjoint unit extents, so no two boxes overlap; n(n-1)/2 comparisons.
    offsets = [(i, i, 0) for i in range(n)]
    shapes = [(4000, 1, 1) for _ in range(n)]
    return offsets, shapes


def _budget_cover(n: int) -> tuple[tuple[int, int, int], list[tuple[int, int, int]], list[tuple[int, int, int]]]:
    """``_budget_case(n)`` plus fillers that make the boxes an exact cover of the returned container shape."""
    offsets, shapes = _budget_case(n)
    for j in range(n):
        if j > 0:
            offsets.append((0, j, 0))
            shapes.append((j, 1, 1))
        if j < n - 1:
            offsets.append((j + 4000, j, 0))
            shapes.append((n - 1 - j, 1, 1))
    return (4000 + n - 1, n, 1), offsets, shapes


def test_budget_on_adversarial_3d_non_grid() -> None:
    offsets, shapes = _budget_case(1414)  # 998,991 comparisons: within budget
    assert _native.boxes_overlap(offsets, shapes) is False
    offsets, shapes = _budget_case(1415)  # 1,000,405 comparisons: over budget
    with pytest.raises(ValueError, match=f"^{BUDGET}$"):
        _native.boxes_overlap(offsets, shapes)
    # the same boxes plus fillers form an exact cover: the cover check reaches the sweep
    container, offsets, shapes = _budget_cover(1415)
    with pytest.raises(ValueError, match=f"^{BUDGET}$"):
        _native.boxes_exactly_cover((0, 0, 0), container, offsets, shapes)
    container, offsets, shapes = _budget_cover(40)
    assert _native.boxes_exactly_cover((0, 0, 0), container, offsets, shapes) is True
    # an early overlap is found before the budget runs out
    offsets, shapes = _budget_case(3000)
    offsets[1] = (1, 0, 0)
    assert _native.boxes_overlap(offsets, shapes) is True


def test_2d_non_grid_is_exact_without_budget() -> None:
    # 3000 staircase boxes, all mutually overlapping on dim 0, disjoint on dim 1.
    n = 3000
    offsets = [(i, i) for i in range(n)]
    shapes = [(5000, 1) for _ in range(n)]
    assert _native.boxes_overlap(offsets, shapes) is False
    shapes[-1] = (5000, 2)
    offsets[0] = (0, n)
    assert _native.boxes_overlap(offsets, shapes) is True


@pytest.mark.parametrize("dup", [False, True])
def test_large_3d_grid(dup: bool) -> None:
    side = 60
    cells = [(i * 2, j * 3, k) for i in range(side) for j in range(side) for k in range(side)]
    rng = random.Random(7)
    rng.shuffle(cells)
    shapes = [(2, 3, 1)] * len(cells)
    if dup:
        cells.append(cells[12345])
        shapes = [*shapes, (2, 3, 1)]
    assert _native.boxes_overlap(cells, shapes) is dup
    assert _native.boxes_exactly_cover((0, 0, 0), (2 * side, 3 * side, side), cells, shapes) is not dup


def test_large_1d() -> None:
    n = 200_000
    offsets = [(2 * i,) for i in range(n)]
    shapes = [(2,)] * n
    assert _native.boxes_exactly_cover((0,), (2 * n,), offsets, shapes) is True
    shapes = [*shapes[:-1], (3,)]
    assert _native.boxes_overlap(offsets, shapes) is False
    offsets[5] = (9,)
    assert _native.boxes_overlap(offsets, shapes) is True


def test_repeated_calls_keep_refcounts() -> None:
    import sys

    offsets = [(0, 0), (2, 0), (0, 2)]
    shapes = [(2, 2), (2, 2), (2, 2)]
    bad = [(0, 0), (2**63, 0)]
    refs = [sys.getrefcount(x) for x in (offsets, shapes, bad, offsets[0], shapes[0])]
    for _ in range(500):
        _native.boxes_overlap(offsets, shapes)
        _native.boxes_exactly_cover((0, 0), (4, 4), offsets, shapes)
        with pytest.raises(ValueError):
            _native.boxes_overlap(bad, shapes[:2])
    assert [sys.getrefcount(x) for x in (offsets, shapes, bad, offsets[0], shapes[0])] == refs

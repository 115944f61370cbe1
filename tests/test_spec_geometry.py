"""Spec 11.3: the public N-D box functions of ``mooncake.reshard.geometry`` against the
cell-enumeration oracle."""

from __future__ import annotations

import typing
from types import SimpleNamespace
from typing import List, Tuple

import pytest
from hypothesis import given, strategies as st

import oracles
from mooncake.reshard import geometry
from mooncake.reshard.geometry import box_contains, boxes_exactly_cover, boxes_overlap, regions_exactly_cover
from spec_helpers import raises

Box = Tuple[Tuple[int, ...], Tuple[int, ...]]


def test_protocols() -> None:
    for proto, props in ((geometry.LogicalBox, ("global_offset", "local_shape")), (geometry.OverlapRegion, ("overlap_offset", "overlap_shape"))):
        assert getattr(proto, "_is_protocol", False) and typing.Protocol in proto.__mro__
        for name in props:
            assert isinstance(proto.__dict__[name], property) and proto.__dict__[name].fset is None


def test_box_contains() -> None:
    assert box_contains((0, 0), (4, 4), (1, 1), (3, 3))
    assert box_contains((0, 0), (4, 4), (0, 0), (4, 4))
    assert not box_contains((0, 0), (4, 4), (1, 1), (4, 3))
    assert not box_contains((2,), (2,), (1,), (1,))
    for args in (((0,), (4, 4), (0, 0), (1, 1)), ((0, 0), (4, 4), (0,), (1, 1)), ((0, 0), (4, 4), (0, 0), (1, 1, 1))):
        with raises("zip() arguments have different lengths"):
            box_contains(*args)


def test_boxes_overlap_basics() -> None:
    assert boxes_overlap([]) is False
    assert boxes_overlap([((0, 0), (4, 4))]) is False
    assert boxes_overlap([((0,), (2,)), ((2,), (2,))]) is False  # touching is not overlap
    assert boxes_overlap([((0,), (3,)), ((2,), (2,))]) is True
    assert boxes_overlap([((0, 0), (2, 2)), ((2, 2), (2, 2))]) is False  # corner contact
    assert boxes_overlap([((0, 0), (2, 2)), ((1, 1), (2, 2))]) is True
    assert boxes_overlap([((0, 0, 0), (2, 2, 2)), ((0, 0, 2), (2, 2, 2))]) is False
    assert boxes_overlap([((0, 0, 0), (2, 2, 2)), ((1, 1, 1), (1, 1, 1))]) is True
    assert boxes_overlap([((0, 0, 0, 0), (1, 1, 1, 1)), ((0, 0, 0, 0), (1, 1, 1, 1))]) is True


def test_boxes_exactly_cover_basics() -> None:
    assert boxes_exactly_cover((0, 0), (4, 4), []) is False
    assert boxes_exactly_cover((0, 0), (4, 4), [((0, 0), (4, 4))]) is True
    assert boxes_exactly_cover((1, 1), (2, 2), [((1, 1), (1, 2)), ((2, 1), (1, 2))]) is True
    assert boxes_exactly_cover((0, 0), (4, 4), [((0, 0), (2, 4)), ((1, 0), (3, 4))]) is False  # overlap + overhang
    assert boxes_exactly_cover((0,), (4,), [((0,), (2,)), ((1,), (2,))]) is False  # sum 4, but overlap and gap
    assert boxes_exactly_cover((0,), (4,), [((0,), (2,)), ((2,), (3,))]) is False  # outside the container


def test_regions_exactly_cover() -> None:
    target = SimpleNamespace(global_offset=(0, 2), local_shape=(2, 2))
    regions = [SimpleNamespace(overlap_offset=(0, 2), overlap_shape=(1, 2)), SimpleNamespace(overlap_offset=(1, 2), overlap_shape=(1, 2))]
    assert regions_exactly_cover(target, regions) is True
    assert regions_exactly_cover(target, regions[:1]) is False
    assert regions_exactly_cover(target, []) is False


def test_empty_boxes_lengths_and_points() -> None:
    """Where docs/api.md says the released reference answers otherwise (conformance/ compares
    the rest): an empty box (a zero extent) overlaps nothing, in every dimension count; 0-D boxes
    are one point, so two of them overlap; the lengths are checked before any comparison."""
    for ndim in (1, 2, 3):
        outer = ((0,) * ndim, (4,) * ndim)
        empty = ((1,) * ndim, (1,) * (ndim - 1) + (0,))
        assert boxes_overlap([outer, empty]) is False
        assert boxes_overlap([empty, outer]) is False
        assert boxes_exactly_cover(outer[0], outer[1], [empty, outer]) is True
    assert boxes_overlap([((), ()), ((), ())]) is True
    assert boxes_exactly_cover((), (), [((), ())]) is True
    assert boxes_exactly_cover((), (), [((), ()), ((), ())]) is False
    with raises("zip() arguments have different lengths"):  # (its first dimension fails already)
        box_contains((5, 0), (1, 1), (0,), (1,))
    with raises("zip() arguments have different lengths"):  # (its first box lies outside)
        boxes_exactly_cover((0,), (1,), [((5,), (1,)), ((0, 0), (1, 1))])
    with raises("box shape must not be negative"):
        boxes_overlap([((0,), (2,)), ((1,), (-1,))])


def test_high_dimensional_budget_fails_closed() -> None:
    # 1600 pairwise-disjoint 3-D boxes (separated on dims 1 and 2) that all overlap on dim 0, the
    # dimension with the most distinct extents: the reference's sweep compares ~1.28M pairs and
    # must raise once 1,000,000 comparisons have been made (spec 11.3, 15).
    n, m = 1600, 40
    boxes = [((k, k // m, k % m), (n, 1, 1)) for k in range(n)]
    with raises("high-dimensional overlap budget exceeded before validation"):
        boxes_overlap(boxes)
    # well inside the budget: exact answer
    small = [((k, k // 10, k % 10), (100, 1, 1)) for k in range(100)]
    assert boxes_overlap(small) is False
    assert boxes_overlap(small + [((5, 0, 5), (1, 1, 1))]) is True


@st.composite
def box_lists(draw: st.DrawFn, min_size: int = 0) -> Tuple[int, List[Box]]:
    """Boxes of one dimension count, 0-D and zero extents included (docs/api.md: an empty box
    has no cell and overlaps nothing; 0-D boxes share the one point of their space)."""
    ndim = draw(st.integers(0, 4))
    limit = 6 if ndim <= 2 else 4
    low = 0 if draw(st.integers(0, 3)) == 0 else 1  # (a quarter of the lists may have zero extents)
    boxes = []
    for _ in range(draw(st.integers(min_size, 7))):
        offset = tuple(draw(st.integers(0, limit - 1)) for _ in range(ndim))
        shape = tuple(draw(st.integers(low, limit - o)) for o in offset)
        boxes.append((offset, shape))
    return ndim, boxes


@given(box_lists())
def test_boxes_overlap_matches_oracle(data: Tuple[int, List[Box]]) -> None:
    _, boxes = data
    assert boxes_overlap(boxes) is oracles.boxes_overlap(boxes)


@st.composite
def tilings(draw: st.DrawFn) -> Tuple[Tuple[int, ...], Tuple[int, ...], List[Box]]:
    """A container and an exact tiling of it (recursive cuts), possibly perturbed."""
    ndim = draw(st.integers(1, 4))
    offset = tuple(draw(st.integers(0, 3)) for _ in range(ndim))
    shape = tuple(draw(st.integers(1, 4 if ndim <= 2 else 3)) for _ in range(ndim))
    boxes: List[Box] = [(offset, shape)]
    for _ in range(draw(st.integers(0, 5))):
        i = draw(st.integers(0, len(boxes) - 1))
        o, s = boxes[i]
        dims = [d for d in range(ndim) if s[d] > 1]
        if not dims:
            continue
        d = draw(st.sampled_from(dims))
        c = draw(st.integers(1, s[d] - 1))
        boxes[i:i + 1] = [(o, s[:d] + (c,) + s[d + 1:]), (o[:d] + (o[d] + c,) + o[d + 1:], s[:d] + (s[d] - c,) + s[d + 1:])]
    action = draw(st.sampled_from(["none", "drop", "duplicate", "grow", "shift"]))
    if action == "drop" and boxes:
        boxes.pop(draw(st.integers(0, len(boxes) - 1)))
    elif action == "duplicate":
        boxes.append(boxes[draw(st.integers(0, len(boxes) - 1))])
    elif action in ("grow", "shift"):
        i = draw(st.integers(0, len(boxes) - 1))
        o, s = boxes[i]
        d = draw(st.integers(0, ndim - 1))
        if action == "grow":
            boxes[i] = (o, s[:d] + (s[d] + 1,) + s[d + 1:])
        else:
            boxes[i] = (o[:d] + (o[d] + 1,) + o[d + 1:], s)
    return offset, shape, boxes


@given(tilings())
def test_boxes_exactly_cover_matches_oracle(data: Tuple[Tuple[int, ...], Tuple[int, ...], List[Box]]) -> None:
    offset, shape, boxes = data
    assert boxes_exactly_cover(offset, shape, boxes) is oracles.boxes_exactly_cover(offset, shape, boxes)


@given(box_lists(min_size=1))
def test_boxes_exactly_cover_random_lists_match_oracle(data: Tuple[int, List[Box]]) -> None:
    ndim, boxes = data
    container = ((0,) * ndim, (6 if ndim <= 2 else 4,) * ndim)
    assert boxes_exactly_cover(container[0], container[1], boxes) is oracles.boxes_exactly_cover(container[0], container[1], boxes)

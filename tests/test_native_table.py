"""Differential tests of the packed FragmentTable against straightforward Python references."""

from __future__ import annotations

import gc
import itertools
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import oracles  # tests/oracles.py: cell-enumeration oracles (spec 11.3)
from test_native_coverage import big_grid, big_guillotine
from mooncake.reshard import _native

Vec = tuple[int, ...]
Rank = tuple[int, int, int, int]
AXES = ("dp", "tp", "pp", "ep")


class Layout:
    def __init__(self, tensor_shapes: list[Vec]) -> None:
        self.tensor_shapes = tensor_shapes
        self.tensor_index: list[int] = []
        self.offsets: list[Vec] = []
        self.shapes: list[Vec] = []
        self.ranks: list[Rank] = []
        self.nbytes: list[int] = []

    def add(self, t: int, off: Vec, shp: Vec, rank: Rank) -> None:
        self.tensor_index.append(t)
        self.offsets.append(off)
        self.shapes.append(shp)
        self.ranks.append(rank)
        self.nbytes.append(max(1, len(self.offsets)))

    def pack(self) -> _native.FragmentTable:
        return _native.pack_fragments(
            self.tensor_shapes, self.tensor_index, self.offsets, self.shapes, self.ranks, self.nbytes
        )

    def __len__(self) -> int:
        return len(self.offsets)


def ref_duplicate(lay: Layout) -> int:
    seen = set()
    for i in range(len(lay)):
        key = (lay.tensor_index[i], lay.ranks[i], lay.offsets[i], lay.shapes[i])
        if key in seen:
            return i
        seen.add(key)
    return -1


def _groups(lay: Layout, key) -> dict[object, list[int]]:  # type: ignore[no-untyped-def]
    groups: dict[object, list[int]] = {}
    for i in range(len(lay)):
        groups.setdefault(key(i), []).append(i)
    return groups


def ref_overlapping_rank_group(lay: Layout) -> int:
    for members in _groups(lay, lambda i: (lay.tensor_index[i], lay.ranks[i])).values():
        if oracles.boxes_overlap([(lay.offsets[i], lay.shapes[i]) for i in members]):
            return members[0]
    return -1


def _covers(lay: Layout, members: list[int], collapse: bool) -> bool:
    t = lay.tensor_index[members[0]]
    boxes = [(lay.offsets[i], lay.shapes[i]) for i in members]
    if collapse:
        boxes = list(dict.fromkeys(boxes))
    shape = lay.tensor_shapes[t]
    return oracles.boxes_exactly_cover((0,) * len(shape), shape, boxes)


def ref_uncovered_group(lay: Layout, axes: tuple[str, ...], collapse: bool) -> int:
    pick = [AXES.index(a) for a in axes]
    groups = _groups(lay, lambda i: (lay.tensor_index[i], *(lay.ranks[i][p] for p in pick)))
    for members in groups.values():
        if not _covers(lay, members, collapse):
            return members[0]
    return -1


def ref_first_uncovered_group(lay: Layout, group_of: list[int], collapse: bool) -> int:
    groups = _groups(lay, lambda i: group_of[i])
    for gid in sorted(g for g in groups if isinstance(g, int) and g >= 0):
        if not _covers(lay, groups[gid], collapse):
            return gid
    return -1


def _grid_cover(draw: st.DrawFn, shape: Vec) -> list[tuple[Vec, Vec]]:
    cuts = []
    for s in shape:
        inner = draw(st.lists(st.integers(1, s - 1), max_size=2, unique=True)) if s > 1 else []
        cuts.append([0, *sorted(inner), s])
    boxes = []
    for idx in itertools.product(*(range(len(c) - 1) for c in cuts)):
        boxes.append(
            (tuple(cuts[k][i] for k, i in enumerate(idx)), tuple(cuts[k][i + 1] - cuts[k][i] for k, i in enumerate(idx)))
        )
    return boxes


@st.composite
def layouts(draw: st.DrawFn) -> Layout:
    ntensors = draw(st.integers(1, 3))
    shapes = [tuple(draw(st.integers(1, 4)) for _ in range(draw(st.integers(1, 3)))) for _ in range(ntensors)]
    lay = Layout(shapes)
    rank_pool = [(dp, tp, 0, ep) for dp in range(2) for tp in range(2) for ep in range(2)]
    for t, shape in enumerate(shapes):
        for rank in draw(st.lists(st.sampled_from(rank_pool), min_size=1, max_size=3, unique=True)):
            boxes = _grid_cover(draw, shape)
            mode = draw(st.sampled_from(["exact", "exact", "drop", "dup", "full", "shift"]))
            if mode == "drop" and len(boxes) > 1:
                boxes.pop(draw(st.integers(0, len(boxes) - 1)))
            elif mode == "dup":
                boxes.append(boxes[draw(st.integers(0, len(boxes) - 1))])
            elif mode == "full":
                boxes = [((0,) * len(shape), shape)]
            elif mode == "shift":
                off, shp = boxes[0]
                boxes[0] = ((off[0] + 1, *off[1:]), shp)
            for off, shp in boxes:
                lay.add(t, off, shp, rank)
    # shuffle fragment order
    perm = draw(st.permutations(range(len(lay))))
    out = Layout(shapes)
    for i in perm:
        out.add(lay.tensor_index[i], lay.offsets[i], lay.shapes[i], lay.ranks[i])
    return out


@settings(max_examples=300)
@given(layouts(), st.data())
def test_table_matches_references(lay: Layout, data: st.DataObject) -> None:
    table = lay.pack()
    assert len(table) == len(lay)
    assert table.total_nbytes() == sum(lay.nbytes)
    assert table.duplicate_logical_fragment() == ref_duplicate(lay)
    assert table.overlapping_rank_group() == ref_overlapping_rank_group(lay)
    axes = tuple(data.draw(st.lists(st.sampled_from(AXES), unique=True, max_size=4)))
    collapse = data.draw(st.booleans())
    assert table.uncovered_group(axes, collapse) == ref_uncovered_group(lay, axes, collapse)
    assert table.uncovered_group(axes=list(axes), collapse=collapse) == ref_uncovered_group(lay, axes, collapse)
    # caller-given groups: per tensor, a random id map (some fragments excluded)
    ids_per_tensor = [data.draw(st.integers(0, 5)) for _ in lay.tensor_shapes]
    group_of = [
        -1 if data.draw(st.integers(0, 9)) == 0 else ids_per_tensor[t] * 10 + r[1]
        for t, r in zip(lay.tensor_index, lay.ranks)
    ]
    # groups must not mix tensors: make ids tensor-unique
    group_of = [g if g < 0 else g * 4 + t for g, t in zip(group_of, lay.tensor_index)]
    assert table.first_uncovered_group(group_of, collapse) == ref_first_uncovered_group(lay, group_of, collapse)


def test_duplicate_reports_first_repeat_in_input_order() -> None:
    lay = Layout([(4,)])
    lay.add(0, (0,), (2,), (0, 0, 0, 0))
    lay.add(0, (2,), (2,), (0, 0, 0, 0))
    lay.add(0, (2,), (2,), (0, 1, 0, 0))  # other rank: not a duplicate
    lay.add(0, (2,), (2,), (0, 0, 0, 0))  # first repeat
    lay.add(0, (0,), (2,), (0, 0, 0, 0))
    assert lay.pack().duplicate_logical_fragment() == 3


def test_collapse_counts_tp_replicas_once() -> None:
    lay = Layout([(4, 4)])
    lay.add(0, (0, 0), (4, 4), (0, 0, 0, 0))
    lay.add(0, (0, 0), (4, 4), (0, 1, 0, 0))
    table = lay.pack()
    assert table.uncovered_group((), False) == 0
    assert table.uncovered_group((), True) == -1
    assert table.uncovered_group(("tp",)) == -1
    assert table.first_uncovered_group([0, 0], collapse=True) == -1
    assert table.first_uncovered_group([0, 0]) == 0
    assert table.first_uncovered_group([-1, -1]) == -1


def test_mixed_dimensions_and_errors() -> None:
    lay = Layout([(4,), (2, 2)])
    lay.add(0, (0,), (4,), (0, 0, 0, 0))
    lay.add(1, (0, 0), (2, 2), (0, 0, 0, 0))
    table = lay.pack()
    assert table.uncovered_group(()) == -1
    assert table.overlapping_rank_group() == -1
    with pytest.raises(ValueError, match="a coverage group must hold fragments of one tensor"):
        table.first_uncovered_group([0, 0])
    bad = Layout([(4,)])
    bad.add(0, (0,), (2,), (0, 0, 0, 0))
    bad.add(0, (0, 0), (2, 2), (0, 0, 0, 0))
    t = bad.pack()
    with pytest.raises(ValueError, match="zip"):
        t.overlapping_rank_group()
    with pytest.raises(ValueError, match="zip"):
        t.uncovered_group(())
    assert t.duplicate_logical_fragment() == -1
    with pytest.raises(ValueError, match="axes must name distinct kinds"):
        table.uncovered_group(("cp",))
    with pytest.raises(ValueError, match="axes must name distinct kinds"):
        table.uncovered_group(("tp", "tp"))
    with pytest.raises(ValueError, match="group_of must have one entry per fragment"):
        table.first_uncovered_group([0])


@pytest.mark.parametrize(
    "args, exc, match",
    [
        (([(4,)], [1], [(0,)], [(1,)], [(0, 0, 0, 0)], [1]), ValueError, "tensor_index out of range"),
        (([(4,)], [0], [(0,)], [(1,)], [(0, 0, 0)], [1]), ValueError, "zip"),
        (([(4,)], [0], [(0,)], [(1, 1)], [(0, 0, 0, 0)], [1]), ValueError, "zip"),
        (([(4,)], [0], [(2**63,)], [(1,)], [(0, 0, 0, 0)], [1]), ValueError, "signed 64-bit"),
        (([(4,)], [0], [(2**63 - 1,)], [(1,)], [(0, 0, 0, 0)], [1]), ValueError, "fragment end must fit"),
        (([(4,)], [0], [(0,)], [(-1,)], [(0, 0, 0, 0)], [1]), ValueError, "shapes must be at least 0"),
        (([(4,)], [0], [(0,)], [(1,)], [(0, 0, 0, 0)], [2**64]), ValueError, "unsigned 64-bit"),
        (([(4,)], [0], [(0,)], [(1,)], [(0, 0, 0, 0)], [1, 2]), ValueError, "same length"),
        (([(4,)], [0], [(0.5,)], [(1,)], [(0, 0, 0, 0)], [1]), TypeError, "integer"),
        (([(4,)], [0], "x", [(1,)], [(0, 0, 0, 0)], [1]), TypeError, "offsets must be a sequence"),
    ],
)
def test_pack_errors(args: tuple[object, ...], exc: type[Exception], match: str) -> None:
    with pytest.raises(exc, match=match):
        _native.pack_fragments(*args)


def test_type_flags_and_lifecycle() -> None:
    with pytest.raises(TypeError):
        _native.FragmentTable()
    assert _native.FragmentTable.__module__ == "mooncake.reshard._native"
    with pytest.raises(TypeError):
        _native.FragmentTable.extra = 1  # type: ignore[attr-defined]
    empty = _native.pack_fragments([], [], [], [], [], [])
    assert len(empty) == 0
    assert empty.duplicate_logical_fragment() == -1
    assert empty.overlapping_rank_group() == -1
    assert empty.uncovered_group(()) == -1
    assert empty.first_uncovered_group([]) == -1
    assert empty.total_nbytes() == 0
    big = _native.pack_fragments([(1,)], [0, 0], [(0,), (0,)], [(1,), (1,)], [(0,) * 4, (1, 0, 0, 0)], [2**64 - 1] * 2)
    assert big.total_nbytes() == 2 * (2**64 - 1)
    shapes = [(4, 4)]
    before = sys.getrefcount(shapes)
    for _ in range(200):
        t = _native.pack_fragments(shapes, [0], [(0, 0)], [(4, 4)], [(0, 0, 0, 0)], [32])
        t.uncovered_group(("dp",), True)
        del t
    gc.collect()
    assert sys.getrefcount(shapes) == before


def test_large_grouped_layout() -> None:
    # 200 tensors x 8 TP ranks x 2 DP replicas of a 3-D tensor split on dim 1
    shapes = [(4, 64, 8)] * 200
    lay = Layout(shapes)
    for t in range(200):
        for dp in range(2):
            for tp in range(8):
                lay.add(t, (0, tp * 8, 0), (4, 8, 8), (dp, tp, 0, 0))
    table = lay.pack()
    assert table.duplicate_logical_fragment() == -1
    assert table.overlapping_rank_group() == -1
    assert table.uncovered_group(("dp",)) == -1
    assert table.uncovered_group(()) == 0  # both DP replicas together overlap
    assert table.uncovered_group(("tp",)) == 0  # one shard alone does not cover


@st.composite
def big_group_layouts(draw: st.DrawFn) -> Layout:
    """Groups of more than 16 boxes (grid, 2-D sweep and 3-D+ sweep paths) on tensors of
    different dimension counts, so the table's row stride exceeds most groups' ndim."""
    cases = draw(st.lists(st.one_of(big_guillotine(), big_grid()), min_size=1, max_size=3))
    shapes: list[Vec] = [(3, 2, 2, 2, 2)]  # 5-D tensor: stride 5
    lay = Layout(shapes)
    lay.add(0, (0, 0, 0, 0, 0), (3, 2, 2, 2, 2), (0, 0, 0, 0))
    for c_off, c_shape, boxes in cases:
        shapes.append(c_shape)
        t = len(shapes) - 1
        for off, shp in boxes:
            lay.add(t, tuple(o - c for o, c in zip(off, c_off)), shp, (0, draw(st.integers(0, 1)), 0, 0))
    perm = draw(st.permutations(range(len(lay))))
    out = Layout(shapes)
    for i in perm:
        out.add(lay.tensor_index[i], lay.offsets[i], lay.shapes[i], lay.ranks[i])
    return out


@settings(max_examples=150)
@given(big_group_layouts(), st.booleans())
def test_table_large_groups_match_references(lay: Layout, collapse: bool) -> None:
    table = lay.pack()
    assert table.duplicate_logical_fragment() == ref_duplicate(lay)
    assert table.overlapping_rank_group() == ref_overlapping_rank_group(lay)
    for axes in ((), ("tp",), ("dp", "ep")):
        assert table.uncovered_group(axes, collapse) == ref_uncovered_group(lay, axes, collapse)
    group_of = list(lay.tensor_index)
    assert table.first_uncovered_group(group_of, collapse) == ref_first_uncovered_group(lay, group_of, collapse)

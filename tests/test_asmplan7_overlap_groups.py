"""FragmentTable.overlapping_rank_group reads a group's boxes from the table itself (session 27).

It used to copy every row's box, in group order, into a private table before checking the groups;
a group of one fragment (the usual case: one fragment per tensor and rank) has no pair to check, so
the check now reads only the boxes of larger groups, straight from the table through the sort's
order (the same boxes in the same order). These differential tests hold the result to the rule
written out in Python: the first group (in first-appearance order of its first fragment) whose
boxes overlap, or whose fragments disagree in rank (an error, raised when that group comes first),
over tables where groups of one dominate, mixed with groups past the kernel's pairwise size."""

from __future__ import annotations

from typing import Union

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import oracles
from test_native_table import Layout


def _reference(lay: Layout) -> Union[int, str]:
    groups: dict[object, list[int]] = {}
    for i in range(len(lay)):
        groups.setdefault((lay.tensor_index[i], lay.ranks[i]), []).append(i)
    for members in groups.values():
        if len({len(lay.offsets[i]) for i in members}) > 1:
            return "error"
        if oracles.boxes_overlap([(lay.offsets[i], lay.shapes[i]) for i in members]):
            return members[0]
    return -1


def _outcome(lay: Layout) -> Union[int, str]:
    table = lay.pack()
    try:
        return table.overlapping_rank_group()
    except ValueError:
        return "error"


@st.composite
def singleton_heavy(draw: st.DrawFn) -> Layout:
    shapes = [(6,), (3, 4), (2, 2, 3)]
    lay = Layout(shapes)
    for _ in range(draw(st.integers(1, 60))):  # groups of one: one fragment per (tensor, rank)
        t = draw(st.integers(0, len(shapes) - 1))
        rank = (draw(st.integers(0, 40)), draw(st.integers(0, 3)), 0, 0)
        shape = shapes[t]
        lay.add(t, (0,) * len(shape), shape, rank)
    for _ in range(draw(st.integers(0, 3))):  # a larger group, past 16 boxes or not
        t = draw(st.integers(0, len(shapes) - 1))
        rank = (100 + draw(st.integers(0, 2)), 0, 0, 0)
        count = draw(st.sampled_from([2, 5, 17, 30]))
        base = shapes[t]
        for k in range(count):
            # cells of a 1 x ... strip along the first axis: disjoint unless a step repeats
            step = draw(st.integers(0, 40)) if draw(st.integers(0, 9)) == 0 else k
            off = (step,) + (0,) * (len(base) - 1)
            shp = (1,) + tuple(base[1:])
            if draw(st.integers(0, 19)) == 0:  # a fragment of another rank in the group
                off, shp = off + (0,), shp + (1,)
            lay.add(t, off, shp, rank)
    perm = draw(st.permutations(range(len(lay))))
    out = Layout(shapes)
    for i in perm:
        out.add(lay.tensor_index[i], lay.offsets[i], lay.shapes[i], lay.ranks[i])
    return out


@settings(max_examples=300, deadline=None)
@given(singleton_heavy())
def test_singleton_heavy_tables_match_the_rule(lay: Layout) -> None:
    assert _outcome(lay) == _reference(lay)


@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_one_overlapping_pair_among_many_singletons(where: str) -> None:
    lay = Layout([(8, 4)])
    for dp in range(5000):
        lay.add(0, (0, 0), (8, 4), (dp, 0, 0, 0))
    at = {"first": 0, "middle": 2500, "last": 4999}[where]
    lay.add(0, (4, 0), (4, 4), (at, 0, 0, 0))  # overlaps row `at`'s full box
    assert _outcome(lay) == _reference(lay) == at
    lay2 = Layout([(8, 4)])
    for dp in range(5000):
        lay2.add(0, (0, 0), (8, 4), (dp, 0, 0, 0))
    lay2.add(0, (0,), (8,), (at, 0, 0, 0))  # a rank disagreement in that group
    assert _outcome(lay2) == _reference(lay2) == "error"

"""FragmentTable group checks that copy the groups' rows in group order (session 18): the
reported group (the first that fails or errs, in first-appearance order; or in increasing
caller-given id) and the error precedence against a brute-force oracle, on layouts with many
groups in shuffled row order, failing and erring groups at any position."""

from __future__ import annotations

import random
from typing import Callable, Optional

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import oracles  # tests/oracles.py: cell-enumeration oracles (spec 11.3)
from test_native_table import AXES, Layout

Outcome = tuple[str, int]  # ("row"/"key", index or -1) or ("zip"/"mixed", -1)


def _members_outcome(lay: Layout, members: list[int], kind: str, collapse: bool) -> Optional[str]:
    """"fail", "zip", "mixed" or None (passes) for one group, in the C rule order."""
    if kind == "overlap":
        d = len(lay.offsets[members[0]])
        if any(len(lay.offsets[i]) != d for i in members):
            return "zip"
        return "fail" if oracles.boxes_overlap([(lay.offsets[i], lay.shapes[i]) for i in members]) else None
    t = lay.tensor_index[members[0]]
    shape = lay.tensor_shapes[t]
    for i in members:
        if lay.tensor_index[i] != t:
            return "mixed"
        if len(lay.offsets[i]) != len(shape):
            return "zip"
    boxes = [(lay.offsets[i], lay.shapes[i]) for i in members]
    if collapse:
        boxes = list(dict.fromkeys(boxes))
    return None if oracles.boxes_exactly_cover((0,) * len(shape), shape, boxes) else "fail"


def ref_first(lay: Layout, key: Callable[[int], object], kind: str, collapse: bool) -> Outcome:
    groups: dict[object, list[int]] = {}
    for i in range(len(lay)):
        groups.setdefault(key(i), []).append(i)
    for members in groups.values():  # first-appearance order
        outcome = _members_outcome(lay, members, kind, collapse)
        if outcome == "fail":
            return ("row", members[0])
        if outcome is not None:
            return (outcome, -1)
    return ("row", -1)


def ref_first_by_id(lay: Layout, group_of: list[int], collapse: bool) -> Outcome:
    groups: dict[int, list[int]] = {}
    for i, g in enumerate(group_of):
        if g >= 0:
            groups.setdefault(g, []).append(i)
    for g in sorted(groups):
        outcome = _members_outcome(lay, groups[g], "cover", collapse)
        if outcome == "fail":
            return ("key", g)
        if outcome is not None:
            return (outcome, -1)
    return ("key", -1)


def _outcome(call: Callable[[], int], label: str) -> Outcome:
    try:
        return (label, call())
    except ValueError as exc:
        message = str(exc)
        if "zip" in message:
            return ("zip", -1)
        if "one tensor" in message:
            return ("mixed", -1)
        raise


def _layout(rng: random.Random, ntensors: int, bad: float) -> Layout:
    shapes = [tuple(rng.randint(1, 4) for _ in range(rng.randint(1, 3))) for _ in range(ntensors)]
    lay = Layout(shapes)
    for t, shape in enumerate(shapes):
        for dp in range(rng.randint(1, 2)):
            for tp in range(rng.randint(1, 2)):
                # a TP shard pair splitting dim 0 when it can, else replicas
                if shape[0] > 1 and rng.random() < 0.5:
                    cut = rng.randint(1, shape[0] - 1)
                    boxes = [((0,) + (0,) * (len(shape) - 1), (cut, *shape[1:])),
                             ((cut,) + (0,) * (len(shape) - 1), (shape[0] - cut, *shape[1:]))]
                else:
                    boxes = [((0,) * len(shape), shape)]
                if rng.random() < bad:
                    damage = rng.choice(["drop", "dup", "ndim", "shift"])
                    if damage == "drop" and len(boxes) > 1:
                        boxes.pop()
                    elif damage == "dup":
                        boxes.append(boxes[0])
                    elif damage == "ndim":
                        boxes.append(((0,) * (len(shape) + 1), (1,) * (len(shape) + 1)))
                    elif damage == "shift":
                        off, shp = boxes[-1]
                        boxes[-1] = ((off[0] + 1, *off[1:]), shp)
                for off, shp in boxes:
                    lay.add(t, off, shp, (dp, tp, 0, 0))
    perm = list(range(len(lay)))
    rng.shuffle(perm)
    out = Layout(shapes)
    for i in perm:
        out.add(lay.tensor_index[i], lay.offsets[i], lay.shapes[i], lay.ranks[i])
    return out


def _check(lay: Layout, rng: random.Random) -> None:
    table = lay.pack()
    rank_key = lambda i: (lay.tensor_index[i], lay.ranks[i])  # noqa: E731
    assert _outcome(table.overlapping_rank_group, "row") == ref_first(lay, rank_key, "overlap", False)
    for axes in ((), ("dp",), ("tp",), ("dp", "tp"), ("ep", "tp", "dp")):
        pick = [AXES.index(a) for a in axes]
        key = lambda i: (lay.tensor_index[i], *(lay.ranks[i][p] for p in pick))  # noqa: E731
        for collapse in (False, True):
            got = _outcome(lambda: table.uncovered_group(axes, collapse), "row")
            assert got == ref_first(lay, key, "cover", collapse), (axes, collapse)
    # caller-given ids: per tensor a random id (some mixing tensors, some excluded)
    ids = [rng.randint(0, 3 * len(lay.tensor_shapes)) for _ in lay.tensor_shapes]
    group_of = [-1 if rng.random() < 0.1 else ids[t] for t in lay.tensor_index]
    for collapse in (False, True):
        got = _outcome(lambda: table.first_uncovered_group(group_of, collapse), "key")
        assert got == ref_first_by_id(lay, group_of, collapse)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 40), st.sampled_from([0.0, 0.02, 0.1, 0.5]))
def test_group_checks_match_the_oracle(seed: int, ntensors: int, bad: float) -> None:
    rng = random.Random(seed)
    _check(_layout(rng, ntensors, bad), rng)


@pytest.mark.parametrize("seed", range(6))
def test_group_checks_many_groups(seed: int) -> None:
    # hundreds of groups and thousands of rows: many prefetch distances, a failing or erring
    # group anywhere in the shuffled row order
    rng = random.Random(1000 + seed)
    _check(_layout(rng, 600, [0.0, 0.001, 0.003, 0.01, 0.05, 0.2][seed]), rng)


def test_the_first_failing_group_in_row_order_wins_over_an_earlier_key() -> None:
    # tensor 1's group fails at row 0, tensor 0's at row 1: row order, not tensor order, decides;
    # an erring group (mixed dimension counts) reported only when it comes first
    lay = Layout([(4,), (4,)])
    lay.add(1, (0,), (2,), (0, 0, 0, 0))
    lay.add(0, (0,), (3,), (0, 0, 0, 0))
    lay.add(0, (0, 0), (1, 1), (0, 0, 0, 1))
    table = lay.pack()
    assert table.uncovered_group(("ep",)) == 0
    lay2 = Layout([(4,), (4,)])
    lay2.add(0, (0, 0), (1, 1), (0, 0, 0, 1))
    lay2.add(1, (0,), (2,), (0, 0, 0, 0))
    with pytest.raises(ValueError, match="zip"):
        lay2.pack().uncovered_group(("ep",))

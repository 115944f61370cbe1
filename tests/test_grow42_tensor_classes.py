"""GROW42: FragmentTable.tensor_classes' representatives and tensor_class_checks (the form
_coverage's check reads: the first tensor without fragments and, before it, each representative
with its fragments), against an oracle: rep[t] is the first tensor u <= t of t's class with the
same non-empty multiset of (rank, offset, shape) rows (the hashes never collide here), else t."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings, strategies as st

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank, PlacementFragment

Row = tuple[tuple[int, ...], tuple[int, ...], tuple[int, int, int, int]]


def _table(ntensors: int, rows: list[tuple[int, Row]]) -> Any:
    shapes = [(8, 8)] * ntensors
    fragments = [
        PlacementFragment(f"t{t}", offset, shape, 2 * shape[0] * shape[1], ParallelRank(*rank))
        for t, (offset, shape, rank) in rows
    ]
    index = {f"t{t}": t for t in range(ntensors)}
    return _native.FragmentTable.pack_objects(shapes, index, fragments)[0]


def _oracle(ntensors: int, rows: list[tuple[int, Row]], classes: list[int]) -> tuple[list[int], list[list[int]]]:
    groups = [[i for i, (t, _) in enumerate(rows) if t == u] for u in range(ntensors)]
    problems = [sorted(rows[i][1] for i in group) for group in groups]
    rep = []
    for u in range(ntensors):
        same = [w for w in range(u + 1) if groups[w] and classes[w] == classes[u] and problems[w] == problems[u]]
        rep.append(same[0] if groups[u] else u)
    return rep, groups


def _checks_from(rep: list[int], start: list[int], members: list[int]) -> tuple[int, list[tuple[int, list[int]]]]:
    ntensors = len(rep)
    empty = next((u for u in range(ntensors) if start[u] == start[u + 1]), -1)
    end = ntensors if empty < 0 else empty
    return empty, [(u, members[start[u] : start[u + 1]]) for u in range(end) if rep[u] == u]


def _assert_classes(ntensors: int, rows: list[tuple[int, Row]], classes: list[int]) -> None:
    table = _table(ntensors, rows)
    rep, start, members = table.tensor_classes(classes)
    want_rep, groups = _oracle(ntensors, rows, classes)
    assert [members[start[u] : start[u + 1]] for u in range(ntensors)] == groups
    assert rep == want_rep
    assert table.tensor_class_checks(classes) == _checks_from(rep, start, members)


def _pool(width: int) -> list[Row]:
    # boxes of an (8, 8) tensor on a few ranks: rows of width 8 // width, split by tp
    return [((o, 0), (8 // width, 8), (0, tp, 0, ep)) for o in range(0, 8, 8 // width) for tp in range(2) for ep in range(2)]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_classes_and_checks_match_the_oracle(data: st.DataObject) -> None:
    ntensors = data.draw(st.integers(1, 12))
    classes = [data.draw(st.integers(0, 2)) for _ in range(ntensors)]
    pool = _pool(data.draw(st.sampled_from([1, 2, 4])))
    # a few problems shared by many tensors (runs of equal hashes), some tensors empty,
    # repeated rows inside a tensor
    problems = data.draw(st.lists(st.lists(st.sampled_from(pool), max_size=5), min_size=1, max_size=3))
    rows: list[tuple[int, Row]] = []
    for t in range(ntensors):
        choice = data.draw(st.integers(-1, len(problems) - 1))
        picked = data.draw(st.lists(st.sampled_from(pool), max_size=4)) if choice < 0 else problems[choice]
        rows.extend((t, row) for row in picked)
    rows = data.draw(st.permutations(rows))
    _assert_classes(ntensors, rows, classes)


def test_many_tensors_sharing_problems_in_scattered_rows() -> None:
    rng = random.Random(42)
    pool = _pool(4)
    problems = [rng.sample(pool, 4) for _ in range(3)] + [rng.sample(pool, 6)]
    for ntensors, spoil in ((3000, 0), (3000, 5), (500, 1)):
        classes = [rng.randrange(2) for _ in range(ntensors)]
        rows: list[tuple[int, Row]] = []
        for t in range(ntensors):
            picked = list(problems[rng.randrange(len(problems))])
            if spoil and rng.randrange(50) == 0:  # a tensor differing in one row from its kind
                picked[0] = pool[(pool.index(picked[0]) + 1) % len(pool)]
            rows.extend((t, row) for row in picked)
        rng.shuffle(rows)
        _assert_classes(ntensors, rows, classes)
        # an empty tensor in the middle: the checks stop before it
        kept = [(t, row) for t, row in rows if t != ntensors // 2]
        _assert_classes(ntensors, kept, classes)


def test_wide_tensors_take_the_sorted_branch() -> None:
    # more than 32 fragments a tensor: the hash order comes from one radix sort of every row
    rng = random.Random(7)
    pool = [((o, 0), (1, 8), (dp, 0, 0, 0)) for o in range(8) for dp in range(6)]
    problems = [rng.sample(pool, 40), rng.sample(pool, 40)]
    ntensors = 60
    classes = [0] * ntensors
    rows = [(t, row) for t in range(ntensors) for row in problems[t % 3 == 0]]
    rng.shuffle(rows)
    _assert_classes(ntensors, rows, classes)

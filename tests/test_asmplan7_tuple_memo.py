"""Assembly remembers what it read from the offset and shape tuples a placement's fragments share
(session 27).

A placement's fragments share a few offset and shape tuple objects. canonical_parts_json keeps the
canonical text of an exact tuple of exact ints, and FragmentTable.pack_objects its int64 values
(per lower bound: offsets and shapes are checked against different ones), by the tuple's address in
a small direct-mapped table for the call, holding the tuple. Such a tuple cannot change, so what
was read once is what any later read gives. These tests compare both against the exact encodings
and the column packing, with tuples shared over many fragments, more distinct tuples than the
tables have slots (evictions), equal but distinct tuples, int subclasses (bool: not remembered),
texts longer than a slot holds, and one tuple read as an offset (accepted) and as a shape (refused)."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from test_canonical_batched import _TYPES6, _big_placement, _exact_parts

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank, PlacementFragment
from mooncake.reshard.weight import _canonical as canonical


def _set(fragment: Any, name: str, value: Any) -> None:
    object.__setattr__(fragment, name, value)


def _check_texts(pairs: list[Any]) -> None:
    exact = _exact_parts(pairs)
    for types in ({"types": _TYPES6}, {}):
        assert _native.canonical_parts_json(pairs, **types) == exact
        assert _native.canonical_parts_json(pairs, sha256=True, **types) == _native.sha256_hex(exact.encode())


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(0, 2**31), st.booleans())
def test_parts_text_with_shared_tuples(pool_size: int, seed: int, fresh: bool) -> None:
    rng = random.Random(seed)
    placement = _big_placement(9, 5, 2)
    pairs = canonical._part_pairs(placement.parts)
    # a pool of tuple objects, some equal to each other, of several lengths and magnitudes
    pool: list[tuple[int, ...]] = []
    for k in range(pool_size):
        width = rng.choice([1, 2, 3, 8])
        big = rng.choice([1, 10**6, 10**18, -(10**18)])
        pool.append(tuple(rng.randrange(-3, 4) * big + k for _ in range(width)))
    pool.append((True, 0))  # an int subclass item: encoded as JSON true, never remembered
    pool.append(tuple(range(40)))  # a text longer than a slot holds
    for fragments, _ in pairs:
        for fragment in fragments:
            for name in ("global_offset", "local_shape"):
                value = rng.choice(pool)
                _set(fragment, name, tuple(list(value)) if fresh and rng.random() < 0.3 else value)
    _check_texts(pairs)


def test_parts_text_same_tuple_as_offset_and_shape() -> None:
    placement = _big_placement(3, 2, 1)
    pairs = canonical._part_pairs(placement.parts)
    shared = (4, 3)
    for fragments, _ in pairs:
        for fragment in fragments:
            _set(fragment, "global_offset", shared)
            _set(fragment, "local_shape", shared)
    _check_texts(pairs)


# ---- pack_objects ---------------------------------------------------------------------------


def _columns_reference(fragments: list[Any], shapes: list[tuple[int, ...]], index: dict[str, int]) -> Any:
    return _native.pack_fragments(
        shapes,
        [index[f.tensor_id] for f in fragments],
        [f.global_offset for f in fragments],
        [f.local_shape for f in fragments],
        [(f.rank.dp, f.rank.tp, f.rank.pp, f.rank.ep) for f in fragments],
        [f.nbytes for f in fragments],
    )


def _same_table(table: Any, reference: Any, ntensors: int) -> None:
    for axes in ((), ("dp",), ("dp", "tp"), ("dp", "tp", "pp", "ep")):
        for collapse in (False, True):
            assert table.uncovered_group(axes, collapse) == reference.uncovered_group(axes, collapse)
    assert table.duplicate_logical_fragment() == reference.duplicate_logical_fragment()
    assert table.overlapping_rank_group() == reference.overlapping_rank_group()
    assert table.tensor_classes(list(range(ntensors))) == reference.tensor_classes(list(range(ntensors)))
    assert table.total_nbytes() == reference.total_nbytes()


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 30), st.integers(0, 2**31), st.booleans())
def test_pack_objects_with_shared_tuples(rows_per_tensor: int, seed: int, rows_given: bool) -> None:
    rng = random.Random(seed)
    ntensors = rng.randrange(1, 25)
    shapes = [(rows_per_tensor, rng.randrange(1, 4)) for _ in range(ntensors)]
    index = {f"t{k}": k for k in range(ntensors)}
    ranks = [ParallelRank(dp=d, tp=t) for d in range(2) for t in range(2)]
    offsets: dict[tuple[int, int], tuple[int, int]] = {}
    fragments = []
    for k, (rows, cols) in enumerate(shapes):
        shape_obj = (1, cols) if rng.random() < 0.8 else tuple([1, cols])
        for rank in ranks:
            for r in range(rows):
                # offsets shared between tensors (one object per (row, column) pair), or fresh
                offset = offsets.setdefault((r, 0), (r, 0)) if rng.random() < 0.9 else (r, 0)
                shape = shape_obj if rng.random() < 0.9 else (1, cols)
                if rng.random() < 0.05:
                    offset = (r, False)  # a bool item: read as 0, never remembered
                fragments.append(PlacementFragment(f"t{k}", (r, 0), (1, cols), 2 * cols, rank))
                _set(fragments[-1], "global_offset", offset)
                _set(fragments[-1], "local_shape", shape)
    if rng.random() < 0.5 and len(fragments) > 1:  # a wrong box somewhere: coverage must see it
        victim = fragments[rng.randrange(len(fragments))]
        _set(victim, "global_offset", (victim.global_offset[0], 1))
    rng.shuffle(fragments)
    rows = None
    if rows_given:
        rows = list(range(len(fragments)))
        rng.shuffle(rows)
        ordered = [None] * len(fragments)
        for i, r in enumerate(rows):
            ordered[r] = fragments[i]
    table, _, _ = _native.FragmentTable.pack_objects(shapes, index, fragments, rows)
    reference = _columns_reference(ordered if rows_given else fragments, shapes, index)
    _same_table(table, reference, ntensors)


def test_one_tuple_as_offset_then_as_shape() -> None:
    rank = ParallelRank(dp=0)
    shared = (-1, 0)
    first = PlacementFragment("a", (0, 0), (1, 1), 2, rank)
    second = PlacementFragment("a", (1, 0), (1, 1), 2, rank)
    _set(first, "global_offset", shared)  # an offset may be negative here (the table reads it)
    _set(second, "local_shape", shared)  # a shape may not: the remembered offset read must not pass it
    for order in ([first, second], [second, first]):
        with pytest.raises(ValueError, match="shapes must be at least 0"):
            _native.FragmentTable.pack_objects([(4, 4)], {"a": 0}, order, None)
    _native.FragmentTable.pack_objects([(4, 4)], {"a": 0}, [first, copy.copy(first)], None)


def test_many_distinct_tuples_evict() -> None:
    rank = ParallelRank(dp=0)
    fragments = []
    for r in range(200):
        fragments.append(PlacementFragment("a", (r, 0), (1, 2), 4, rank))
    # 200 distinct offset objects, each met twice, far apart (the table has 16 slots)
    twins = [PlacementFragment("b", f.global_offset, f.local_shape, 4, rank) for f in fragments]
    everything = fragments + twins
    table, _, _ = _native.FragmentTable.pack_objects([(200, 2), (200, 2)], {"a": 0, "b": 1}, everything, None)
    reference = _columns_reference(everything, [(200, 2), (200, 2)], {"a": 0, "b": 1})
    _same_table(table, reference, 2)
    assert table.uncovered_group(()) == -1


class _Id(str):
    pass


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31))
def test_parts_text_with_shared_tensor_ids(seed: int) -> None:
    """The last exact str tensor id's text is remembered too (consecutive fragments share it)."""
    rng = random.Random(seed)
    placement = _big_placement(9, 5, 2)
    pairs = canonical._part_pairs(placement.parts)
    pool: list[str] = ["a", "layer.0.w\u00e9", "q\"uote\\", "\ud800lone", "x" * 300, "\U0001f600", _Id("sub")]
    current = rng.choice(pool)
    for fragments, _ in pairs:
        for fragment in fragments:
            if rng.random() < 0.3:
                current = rng.choice(pool)
            value = current if rng.random() < 0.8 else "".join(list(current))  # equal, maybe distinct
            _set(fragment, "tensor_id", value)
    _check_texts(pairs)

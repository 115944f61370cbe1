"""``plan_regions`` shares the region values it builds (session 57: its table grows as values come).

A plan's regions repeat a few offsets, shapes, byte counts and strides, so ``plan_regions``
builds each distinct value once and hands the same object to every region that has it. Its
table holds at most ``limit / 2`` values, ``limit`` being the least power of two, at least 64,
whose half is at least the plan's region count (at most 2**18); values beyond that are built
fresh. Since session 57 the table starts at 1,024 slots and grows by four up to ``limit`` (the
values of most plans then stay in the near caches).

These tests plan layouts whose regions hold from a few to several thousand distinct values, so
the table grows zero to several times and sometimes fills, and check (1) the regions against the
two-step oracle (records, then ``build_regions``) field by field, and (2) which values are
shared, against a model of the rule: the fields are interned in the order ``overlap_offset``,
``overlap_shape``, ``source_base_offset``, ``target_base_offset``, ``inner_bytes`` and, for
regions with a strided suffix, ``outer_loop_counts``, ``source_strides``, ``target_strides``;
a value is keyed by its kind (int64 tuple, uint64 tuple or int) and its items; the first
``limit / 2`` distinct keys are kept, and a value whose key is kept is that key's first object.
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layout_model import AxisSpec, Coord, FragmentSpec, Layout, TensorSpec, build_placement, full_participants
from spec_helpers import field_state
from test_plan_speed_native import _plan_with, _two_step

from mooncake.reshard.weight._planner import core
from mooncake.reshard.weight.planner import plan_placement_transfer

_INTERNED = (
    ("overlap_offset", "i64"),
    ("overlap_shape", "i64"),
    ("source_base_offset", "int"),
    ("target_base_offset", "int"),
    ("inner_bytes", "int"),
)
_SUFFIX = (("outer_loop_counts", "i64"), ("source_strides", "u64"), ("target_strides", "u64"))
_SMALL_INTS = range(-5, 257)  # CPython's cached ints: the same object whoever builds them


def _split_layout(lengths: List[int], width: int, tp: int) -> Layout:
    """One (length, width) tensor per entry, split on dim 0 into ``tp`` pieces of length // tp
    rows each, the last taking the rest (one DP replica)."""
    tensors = []
    fragments = []
    for k, length in enumerate(lengths):
        tid = f"t{k:05d}"
        tensors.append(TensorSpec(tid, (length, width), (AxisSpec("split", "tp", 0),)))
        step = length // tp
        for r in range(tp):
            begin = r * step
            end = length if r == tp - 1 else begin + step
            fragments.append(FragmentSpec(tid, (begin, 0), (end - begin, width), Coord(tp=r)))
    return Layout((tp, 1, 1, 1), full_participants(tp, 1, 1, 1), tuple(tensors), tuple(fragments))


def _limit(regions: int) -> int:
    limit = 64
    while limit < (1 << 18) and limit // 2 < regions:
        limit *= 2
    return limit


def _check_sharing(operations: Tuple[Any, ...]) -> Tuple[int, int]:
    """Check each interned field against the model; returns (distinct keys, kept keys)."""
    kept_max = _limit(len(operations)) // 2
    first: Dict[Tuple[Any, ...], Any] = {}
    kept_ids = set()  # (the operations hold every kept object: their ids stay theirs)
    distinct = set()
    for op in operations:
        fields = list(_INTERNED)
        if op.outer_loop_counts:  # suffix == 0: the shared empty tuple, not interned
            fields += list(_SUFFIX)
        for name, kind in fields:
            value = getattr(op, name)
            if kind != "int" and len(value) == 0:
                continue  # n == 0: built fresh (the empty tuple singleton)
            key = (kind, value if kind == "int" else tuple(value))
            distinct.add(key)
            if key in first:
                assert value is first[key], (name, value)
            elif len(first) < kept_max:
                first[key] = value
                kept_ids.add(id(value))
            elif not (kind == "int" and value in _SMALL_INTS):
                # past the limit: a fresh object, none of the kept ones
                assert id(value) not in kept_ids, (name, value)
    return len(distinct), len(first)


@settings(max_examples=12, deadline=None)
@given(
    st.integers(1, 900),
    st.integers(1, 3),
    st.sampled_from([(2, 3), (3, 2), (4, 6), (5, 3)]),
    st.integers(0, 2**31),
)
def test_region_values_match_the_oracle_and_the_sharing_rule(tensors: int, width: int, tps: Tuple[int, int], seed: int) -> None:
    lengths = [12 + ((seed >> (k % 24)) % 97) * 6 + k for k in range(tensors)]  # many distinct shapes
    source = build_placement(_split_layout(lengths, width, tps[0]))
    target = build_placement(_split_layout(lengths, width, tps[1]))
    got, native_calls = _plan_with(core.plan_region_objects, lambda: plan_placement_transfer(source, target))
    expected, _ = _plan_with(_two_step, lambda: plan_placement_transfer(source, target))
    assert got == expected
    assert got[0] == "ok"
    (regions, _used_s, _used_t), = native_calls
    assert [field_state(r) for r in regions] == [field_state(op) for op in expected[1].operations]
    _check_sharing(regions)


def test_table_grows_past_its_first_size_and_fills() -> None:
    """Regions with more distinct values than the first table's half (512) and than the limit's
    half: sharing holds across growth, and the values past the limit are fresh."""
    lengths = [40 + 7 * k for k in range(1500)]
    source = build_placement(_split_layout(lengths, 1, 2))
    target = build_placement(_split_layout(lengths, 1, 3))
    plan = plan_placement_transfer(source, target)
    distinct, kept = _check_sharing(plan.operations)
    assert kept > 4 * 512  # grown at least twice
    assert distinct > kept  # and filled: some values built fresh
    assert kept == _limit(len(plan.operations)) // 2


@pytest.mark.parametrize("tensors", [1, 30])
def test_few_distinct_values_are_all_shared(tensors: int) -> None:
    lengths = [600] * tensors
    source = build_placement(_split_layout(lengths, 4, 2))
    target = build_placement(_split_layout(lengths, 4, 3))
    plan = plan_placement_transfer(source, target)
    distinct, kept = _check_sharing(plan.operations)
    assert distinct == kept
    shapes = {id(op.overlap_shape) for op in plan.operations}
    assert len(shapes) == len({op.overlap_shape for op in plan.operations})

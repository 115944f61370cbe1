"""sorted_groups untracks the sorted tuple and each group's tuple (from the collector) exactly
when every item it holds is inert: an object without collector support, or an untracked object
that is not a dict (a tracked tuple is not). The tuples' contents are those of the Python
oracle (a stable sort by key, then split by group), whatever the tracking."""

from __future__ import annotations

import gc
import sys
from typing import Any

import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank, PlacementFragment


class _Tracked:
    """A plain instance: tracked by the collector."""


def _item(kind: int, tag: int) -> Any:
    if kind == 0:
        return PlacementFragment(  # built inert: untracked
            tensor_id=f"t{tag}", global_offset=(0,), local_shape=(1,), nbytes=2, rank=ParallelRank()
        )
    if kind == 1:
        return tag  # no collector support
    if kind == 2:
        return _Tracked()
    if kind == 3:
        return {"tag": tag}  # a dict is never inert
    if kind == 4:
        return (tag, [tag])  # a tracked tuple
    return f"s{tag}"


def _inert(value: Any) -> bool:
    if type(value) in (int, str):
        return True
    return not gc.is_tracked(value) and type(value) is not dict


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.text(alphabet="ab\u00e9", max_size=4), st.integers(0, 3), st.integers(0, 5)), max_size=40),
    st.integers(1, 4),
    st.booleans(),
)
def test_tracking_and_contents_against_the_oracle(
    rows: list[tuple[str, int, int]], extra_groups: int, as_tuple: bool
) -> None:
    ngroups = max([g for _, g, _ in rows], default=0) + extra_groups
    items = [_item(kind, index) for index, (_, _, kind) in enumerate(rows)]
    keys = [key for key, _, _ in rows]
    group_of = [group for _, group, _ in rows]
    extra = [index * 10 for index in range(len(rows))]
    inert_before = [_inert(item) for item in items]
    # the items as a list, or as an exact tuple (read in place: the same result)
    result = _native.sorted_groups(tuple(items) if as_tuple else items, keys, group_of, ngroups, extra)
    ordered, positions, by_group, extra_by_group = result
    order = sorted(range(len(rows)), key=keys.__getitem__)
    assert list(ordered) == [items[i] for i in order]
    assert all(ordered[positions[i]] is items[i] for i in range(len(rows)))
    for g in range(ngroups):
        members = [i for i in order if group_of[i] == g]
        assert list(by_group[g]) == [items[i] for i in members]
        assert list(extra_by_group[g]) == [extra[i] for i in members]
        if members:
            assert gc.is_tracked(by_group[g]) is not all(inert_before[i] for i in members), g
    if rows:
        assert gc.is_tracked(ordered) is not all(inert_before)
    # the items themselves are left as they were
    assert [_inert(item) for item in items] == inert_before


def test_placement_fragments_come_back_untracked() -> None:
    fragments = [_item(0, index) for index in range(50)]
    assert not any(gc.is_tracked(f) for f in fragments)
    ordered, _, by_group, _ = _native.sorted_groups(
        fragments, [f"k{99 - i}" for i in range(50)], [i % 3 for i in range(50)], 3, list(range(50))
    )
    assert not gc.is_tracked(ordered)
    assert not any(gc.is_tracked(group) for group in by_group)
    tracked = _Tracked()
    ordered, _, by_group, _ = _native.sorted_groups(
        fragments + [tracked], [f"k{i}" for i in range(51)], [0] * 50 + [2], 3, list(range(51))
    )
    assert gc.is_tracked(ordered) and gc.is_tracked(by_group[2])
    assert not gc.is_tracked(by_group[0])


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.text(alphabet="abc", max_size=3), st.integers(0, 4), st.integers(0, 12)), max_size=60),
    st.integers(1, 3),
)
def test_distinct_extras_against_the_oracle(rows: list[tuple[str, int, int]], extra_groups: int) -> None:
    """With distinct, group g's extras are sorted(set(extras of its items)); the rest as without."""
    ngroups = max([g for _, g, _ in rows], default=0) + extra_groups
    items = [object() for _ in rows]
    keys = [key for key, _, _ in rows]
    group_of = [group for _, group, _ in rows]
    extra = [value for _, _, value in rows]
    plain = _native.sorted_groups(items, keys, group_of, ngroups, extra)
    result = _native.sorted_groups(items, keys, group_of, ngroups, extra, True)
    assert result[0] == plain[0] and result[1] == plain[1] and result[2] == plain[2]
    expected = [tuple(sorted({extra[i] for i in range(len(rows)) if group_of[i] == g})) for g in range(ngroups)]
    assert result[3] == expected
    assert all(type(group) is tuple for group in result[3])


def test_distinct_declines_on_other_extras() -> None:
    items = [object(), object(), object()]
    keys = ["b", "a", "c"]
    for bad in ([1, -1, 2], [1, 2**31, 0], [1, True, 2], [1, 2.0, 3], [1, "2", 3]):
        assert _native.sorted_groups(items, keys, [0, 1, 0], 2, bad, True) is None
        assert _native.sorted_groups(items, keys, [0, 1, 0], 2, bad) is not None
    assert _native.sorted_groups(items, keys, [0, 1, 0], 2, [5, 2**31 - 1, 5], True)[3] == [(5,), (2**31 - 1,)]


class _TupleSubclass(tuple):
    pass


def test_items_a_list_or_an_exact_tuple() -> None:
    """Items are a list (a subclass too) or an exact tuple; anything else is a TypeError."""
    keys, group_of, extra = ["b", "a"], [0, 0], [1, 2]
    a, b = object(), object()
    for items in ([a, b], (a, b), type("L", (list,), {})([a, b])):
        ordered, positions, by_group, _ = _native.sorted_groups(items, keys, group_of, 1, extra)
        assert ordered == (b, a) and list(positions) == [1, 0] and by_group == [(b, a)]
    for items in (_TupleSubclass((a, b)), iter([a, b]), {a: 1, b: 2}):
        with pytest.raises(TypeError, match="items must be a list or a tuple"):
            _native.sorted_groups(items, keys, group_of, 1, extra)


def test_the_keys_references_are_released() -> None:
    """The keys are held while the sort runs without the GIL, and released after it: also when
    the call declines on a key that is not an exact str part way through."""
    keys = ["".join(("key", str(i))) for i in range(100)]  # (fresh objects: their own counts)
    before = [sys.getrefcount(key) for key in keys]
    items = tuple(object() for _ in keys)
    assert _native.sorted_groups(items, keys, [0] * 100, 1, list(range(100))) is not None
    assert [sys.getrefcount(key) for key in keys] == before
    declined = keys[:50] + [b"bytes"] + keys[51:]
    assert _native.sorted_groups(items, declined, [0] * 100, 1, list(range(100))) is None
    del declined
    assert [sys.getrefcount(key) for key in keys] == before

"""``project_executors`` on parts whose fragments are an exact tuple (issue 5, session 16).

With the fragment class, such a part's ids are read in address order into a C array (no private
list of the fragments) and, when their 16-byte heads (or, on equal heads, the strings) show them
in order, moved into the executor's tuple without being touched again; otherwise sorted as
before. Every outcome (executors, their sorted ids, errors, the ids' reference counts) must be
that of the in-order reads (no fragment class) and of the Python rules."""

from __future__ import annotations

import gc
import sys
from typing import Any, List, Tuple

from hypothesis import given, settings
from hypothesis import strategies as st

from spec_helpers import field_state, store_state

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank, PlacementExecutorPlan, PlacementFragment


def _fragment(fid: Any, rank: ParallelRank) -> PlacementFragment:
    made = PlacementFragment(tensor_id="w", global_offset=(0,), local_shape=(4,), nbytes=8, rank=rank,
                             placement_fragment_id="x")
    state = dict(field_state(made))
    state["placement_fragment_id"] = fid  # as it is (the class checks its own ids)
    clone = object.__new__(PlacementFragment)
    store_state(clone, replace=True, state=state)
    return clone


class _Part:
    def __init__(self, participant: str, rank: ParallelRank, fragments: Any) -> None:
        self.participant_id = participant
        self.rank = rank
        self.fragments = fragments


_PREFIX = "sha256:" + "ab" * 8  # longer than a head: ids that differ only past 16 bytes


@st.composite
def _ids(draw: Any) -> List[Any]:
    stems = st.one_of(
        st.integers(0, 60).map(lambda k: f"{_PREFIX}{k:03d}"),
        st.integers(0, 60).map(lambda k: f"f{k:02d}"),
        st.sampled_from(["é-non-ascii", "\udcff-surrogate", "", "f1"]),
    )
    ids = draw(st.lists(stems, min_size=1, max_size=30))
    if draw(st.booleans()):
        ids = sorted(ids)
    return ids


@st.composite
def _parts(draw: Any) -> Tuple[List[_Part], List[Any]]:
    parts = []
    every: List[Any] = []
    for p in range(draw(st.integers(1, 4))):
        rank = ParallelRank(tp=p, dp=draw(st.integers(0, 1)))
        ids = draw(_ids())
        every.extend(ids)
        fragments = [_fragment(fid, rank) for fid in ids]
        container = tuple(fragments) if draw(st.integers(0, 4)) else list(fragments)
        parts.append(_Part(f"p{p}", rank, container))
    return parts, every


def _outcome(parts: List[_Part], used: Any, *extra: Any) -> Any:
    try:
        pairs = _native.project_executors(PlacementExecutorPlan, "sha256:" + "0" * 64, tuple(parts), used, None, *extra)
    except (TypeError, AttributeError) as exc:
        return (type(exc).__name__, str(exc))
    if pairs is None:  # an id not an exact str (AUDIT5 F4): the Python form decides
        assert any(type(f.placement_fragment_id) is not str for part in parts for f in part.fragments) or any(
            type(fid) is not str for fid in list(used)
        )
        return ("declined",)
    return [(key, field_state(executor)) for key, executor in pairs]


def _python(parts: List[_Part], used: set) -> Any:
    out = []
    for part in parts:
        ids = [f.placement_fragment_id for f in part.fragments]
        if not ids or used.isdisjoint(ids):
            continue
        rank = part.rank
        out.append(((rank.dp, rank.pp, rank.ep, rank.tp), sorted(ids)))
    return out


@settings(max_examples=300, deadline=None)
@given(_parts(), st.data())
def test_tuple_parts_equal_the_in_order_reads_and_the_rules(case: Tuple[List[_Part], List[Any]], data: Any) -> None:
    parts, every = case
    chosen = data.draw(st.lists(st.sampled_from(every), max_size=5)) if every else []
    for used in (set(chosen), list(chosen), set(every), {"nope"}):
        counts = [sys.getrefcount(fid) for fid in every]
        plain = _outcome(parts, used)
        fast = _outcome(parts, used, PlacementFragment)
        assert fast == plain
        if isinstance(plain, list):
            assert [(key, list(state["placement_fragment_ids"])) for key, state in plain] == _python(parts, set(used))
        del plain, fast
        assert [sys.getrefcount(fid) for fid in every] == counts  # nothing kept, nothing lost


def test_ids_in_order_share_the_objects_and_others_are_sorted() -> None:
    rank = ParallelRank(tp=1)
    ids = [f"{_PREFIX}{k:03d}" for k in range(40)]
    for order in (ids, list(reversed(ids)), ids[:20] + ids[20:][::-1]):
        part = _Part("p", rank, tuple(_fragment(fid, rank) for fid in order))
        pairs = _native.project_executors(PlacementExecutorPlan, "x", (part,), {ids[0]}, None, PlacementFragment)
        stored = pairs[0][1].placement_fragment_ids
        assert list(stored) == ids and all(a is b for a, b in zip(stored, ids))
    # an id that is not a str: the in-order path decides (sorting mixed types fails the same way)
    part = _Part("p", rank, tuple(_fragment(fid, rank) for fid in ["b", 3, "a"]))
    assert _outcome([part], {"a"}, PlacementFragment) == _outcome([part], {"a"})


def test_the_ids_tuple_is_out_of_the_collector() -> None:
    """Exact str ids only: the tuple is untracked when made, in order or sorted (session 59), so
    the executor's inert check stops at it; the ids themselves are the same objects."""
    rank = ParallelRank(tp=1)
    ids = [f"{_PREFIX}{k:03d}" for k in range(40)]
    enabled = gc.isenabled()
    gc.disable()  # (a collection would untrack a tuple of strs itself)
    try:
        for order in (ids, list(reversed(ids))):
            part = _Part("p", rank, tuple(_fragment(fid, rank) for fid in order))
            pairs = _native.project_executors(PlacementExecutorPlan, "x", (part,), {ids[0]}, None, PlacementFragment)
            stored = pairs[0][1].placement_fragment_ids
            assert list(stored) == ids and not gc.is_tracked(stored)
            # without the fragment class (the in-order reads): the same executor
            plain = _native.project_executors(PlacementExecutorPlan, "x", (part,), {ids[0]}, None)
            assert list(plain[0][1].placement_fragment_ids) == ids
    finally:
        if enabled:
            gc.enable()

"""The planner's address-order passes remember the ranks they read (session 29, PLAN9;
csrc/rank_memo.h).

``fragment_columns`` (rank.dp), ``owner_minimums`` (dp and the owner kinds) and ``select_sources``'
pre-read (dp, tp, pp, ep) visit the fragments in address order, where the fragments of a few
shared ranks come interleaved: each keeps every rank it read with the values read, and gives them
again without a read while no step since could have run Python code. A rank's first check may
make its instance dict (CPython keeps a fresh instance's attributes inline until ``__dict__`` is
asked for), and that allocation may run the collector, whose callbacks are Python code: such a step
starts a new epoch, and a rank read before it is read again. The collector test below changes a
rank already read from a callback run at another rank's first check; the values after it must be
the new ones (a memo that trusted its first read returns the old ones).

The offset and shape tuples are remembered too (exact tuples of exact ints only: they cannot
change); equal tuples that are distinct objects, int subclasses and tuples of other lengths must
give what the reads give."""

from __future__ import annotations

import gc
import sys
from array import array
from typing import Any, Callable, List, Optional, Tuple

import pytest

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank, PlacementFragment

from collector_hooks import collector_armed


THRESHOLDS = 41


def _dictless_rank(**values: int) -> ParallelRank:
    """A rank whose attributes are still inline: its first ``__dict__`` read makes the dict (an
    allocation of a collected object)."""
    rank = object.__new__(ParallelRank)
    for name in ("dp", "tp", "pp", "ep"):
        object.__setattr__(rank, name, values.get(name, 0))
    return rank


def _has_dict(obj: Any) -> bool:
    return any(type(x) is dict for x in gc.get_referents(obj))


def _fragments(n: int, rank: Any) -> List[PlacementFragment]:
    return [
        PlacementFragment(tensor_id=f"t{i}", global_offset=(4 * i,), local_shape=(4,), nbytes=16, rank=rank,
                          placement_fragment_id=f"f{i:03d}")
        for i in range(n)
    ]


def _collector_runs(target: Any, call: Callable[[List[PlacementFragment]], Any],
                    read: Callable[[Any, List[PlacementFragment]], List[Any]],
                    name: str, old: int, start: int, seen: Callable[[int], Any] = lambda v: v) -> None:
    """For collector thresholds 1..40: n fragments of rank A (name = old), three of them (at the
    address quarters) of dict-less ranks B (name = old); a collector callback run inside the call
    (target, a _native function) while some B has no dict sets A's name to start + k (k-th time).
    read(result, fragments) gives what each fragment's rank was read as (seen(value) for a
    value). Every read after the last B in address order must be of the last value set; at some
    threshold the callback must run at a B's first read with A read before it (A read as old
    first, as new last), else the test proves nothing."""
    seen_between = False
    for threshold in range(1, THRESHOLDS):
        n = 24
        a = ParallelRank(**{name: old})
        fragments = _fragments(n, a)
        order = sorted(range(n), key=lambda i: id(fragments[i]))
        bs = [_dictless_rank(**{name: old}) for _ in range(3)]
        b_pos = [(k + 1) * n // 4 for k in range(3)]
        for b, pos in zip(bs, b_pos):
            object.__setattr__(fragments[order[pos]], "rank", b)
        assert not any(_has_dict(b) for b in bs)
        inside = [False]
        set_values: List[int] = []

        def callback(phase: str, info: Any) -> None:
            if phase == "start" and inside[0] and not all(_has_dict(b) for b in bs):
                set_values.append(start + len(set_values))
                vars(a)[name] = set_values[-1]

        def profile(frame: Any, event: str, arg: Any) -> None:
            if arg is target and event == "c_call":
                inside[0] = True
            elif arg is target and event in ("c_return", "c_exception"):
                inside[0] = False

        with collector_armed(threshold, callback, profile):  # a B's dict is a fresh allocation
            result = call(fragments)
        values = read(result, fragments)
        a_values = [values[i] for i in order if fragments[i].rank is a]
        after = [values[i] for i in order[b_pos[-1] + 1:]]
        if set_values:
            assert after == [seen(set_values[-1])] * len(after), (threshold, set_values, a_values)
        else:
            assert a_values == [seen(old)] * len(a_values)
        if set_values and a_values[0] == seen(old) and a_values[-1] != seen(old):
            seen_between = True
    assert seen_between  # the callback ran at a B's first read, with A read before it


def _fragment_columns(fragments: List[PlacementFragment]) -> Any:
    return _native.fragment_columns(fragments, PlacementFragment, ParallelRank)


# (CPython 3.10 makes every instance dict at construction: no first read allocates one, so the
# collector cannot run there and these worlds cannot be built)
_INLINE_ATTRIBUTES = pytest.mark.skipif(
    sys.version_info < (3, 11), reason="attributes kept inline until __dict__ is asked for: CPython 3.11+"
)


@_INLINE_ATTRIBUTES
def test_fragment_columns_rereads_a_rank_after_the_collector_ran() -> None:
    def read(result: Any, fragments: List[PlacementFragment]) -> List[Any]:
        assert result[4] is not None  # the address pass decided
        return list(result[2])

    _collector_runs(_native.fragment_columns, _fragment_columns, read, "dp", 1, 101)


def _owner_minimums(fragments: List[PlacementFragment]) -> Any:
    return _native.owner_minimums(fragments, ("tp",), PlacementFragment, ParallelRank, False)


@_INLINE_ATTRIBUTES
def test_owner_minimums_rereads_a_rank_after_the_collector_ran() -> None:
    def read(result: Any, fragments: List[PlacementFragment]) -> List[Any]:
        dps = {tid: dp for tid, dp in result}  # one fragment per tensor id
        return [dps[f.tensor_id] for f in fragments]

    _collector_runs(_native.owner_minimums, _owner_minimums, read, "dp", 1, 101)


def _q(values: List[int]) -> bytes:
    return array("q", values).tobytes()


def _select_sources(fragments: List[PlacementFragment]) -> Any:
    """A tensor per fragment, one complete replica at dp 0 whose chosen owner is tp 1."""
    n = len(fragments)
    tids = [f"t{i}" for i in range(n)]
    return _native.select_sources(fragments, {t: i for i, t in enumerate(tids)}, _q([1] * n), [("tp",)] * n,
                                  [None] * n, [{t: (("tp", 1),) for t in tids}], _q([0]),
                                  _q([2 * i for i in range(n)]), PlacementFragment, ParallelRank)


@_INLINE_ATTRIBUTES
def test_select_sources_rereads_a_rank_after_the_collector_ran() -> None:
    def read(result: Any, fragments: List[PlacementFragment]) -> List[Any]:
        chosen = {id(f) for f in result[0]}
        return [1 if id(f) in chosen else 2 for f in fragments]  # eligible: read with tp 1

    # A's tp set to 2, 3, ... from the callback on: not eligible (seen as 2)
    _collector_runs(_native.select_sources, _select_sources, read, "tp", 1, 2, lambda v: 1 if v == 1 else 2)


# ---- the memo against the reads ------------------------------------------------------------


class _Int(int):
    pass


def _mixed(n: int, nranks: int) -> Tuple[List[PlacementFragment], List[Any]]:
    """n fragments over nranks ranks (interleaved, several with equal values), sharing offset and
    shape tuples, with equal-but-distinct tuples, an int subclass and other lengths mixed in."""
    ranks = [ParallelRank(dp=k % 5, tp=k % 3, pp=k % 2, ep=k % 7) for k in range(nranks)]
    shared_shape = (4, 8)
    offsets = [(0, 0), (4, 0), (8, 0)]
    fragments = []
    for i in range(n):
        if i % 11 == 5:
            offset: Tuple[int, ...] = (4 * (i % 3), 0)  # equal to a shared one, another object
        else:
            offset = offsets[i % 3]
        shape = shared_shape if i % 13 else (4, 8)
        fragments.append(PlacementFragment(tensor_id=f"t{i % 17}", global_offset=offset, local_shape=shape,
                                           nbytes=128, rank=ranks[(i * 7) % nranks],
                                           placement_fragment_id=f"f{i:05d}"))
    return fragments, ranks


def _geometry(fragments: List[PlacementFragment]) -> Tuple[bytes, bytes, bytes, bytes]:
    ndim = [len(f.global_offset) for f in fragments]
    offsets = [v for f in fragments for v in f.global_offset]
    shapes = [v for f in fragments for v in f.local_shape]
    return _q(ndim), _q(offsets), _q(shapes), array("Q", [f.nbytes for f in fragments]).tobytes()


@pytest.mark.parametrize("nranks", [1, 3, 64, 200])
def test_fragment_columns_equals_the_reads(nranks: int) -> None:
    fragments, _ = _mixed(600, nranks)
    for container in (list, tuple):
        got = _native.fragment_columns(container(fragments), PlacementFragment, ParallelRank)
        assert got[:4] == _native.fragment_columns(container(fragments))
        assert got[2] == [f.rank.dp for f in fragments]
        assert got[4] == _geometry(fragments)


def test_fragment_columns_tuples_read_as_given() -> None:
    fragments, _ = _mixed(60, 4)
    object.__setattr__(fragments[7], "global_offset", (_Int(4), 0))  # an int subclass: read, not kept
    object.__setattr__(fragments[9], "global_offset", (fragments[9].global_offset[0], 0))  # another object
    got = _native.fragment_columns(fragments, PlacementFragment, ParallelRank)
    assert got[4] == _geometry(fragments)
    # a 3-D shape: no geometry
    object.__setattr__(fragments[20], "local_shape", (4, 8, 1))
    assert _native.fragment_columns(fragments, PlacementFragment, ParallelRank)[4] is None
    object.__setattr__(fragments[20], "local_shape", (4, 8))
    # a tuple read (and kept) as a 2-D shape, met again later in address order beside 3-D offsets
    order = sorted(fragments, key=id)
    shape = (4, 8)
    object.__setattr__(order[3], "local_shape", shape)
    object.__setattr__(order[40], "local_shape", shape)
    object.__setattr__(order[40], "global_offset", (0, 0, 0))
    assert _native.fragment_columns(fragments, PlacementFragment, ParallelRank)[4] is None
    object.__setattr__(order[40], "local_shape", (4, 8, 1))
    assert _native.fragment_columns(fragments, PlacementFragment, ParallelRank)[4] == _geometry(fragments)
    # a coordinate out of int64 after the same tuple was read
    object.__setattr__(fragments[30], "global_offset", (2**63, 0))
    assert _native.fragment_columns(fragments, PlacementFragment, ParallelRank)[4] is None


@pytest.mark.parametrize("nranks", [1, 3, 64, 200])
def test_owner_minimums_equals_the_reads(nranks: int) -> None:
    fragments, _ = _mixed(600, nranks)
    kinds = ("tp", "pp", "ep")
    expected: dict = {}
    for f in fragments:
        key = (f.tensor_id, f.rank.dp)
        value = tuple(getattr(f.rank, kind) for kind in kinds)
        if key not in expected or value < expected[key]:
            expected[key] = value
    for container in (list, tuple):
        got = _native.owner_minimums(container(fragments), kinds, PlacementFragment, ParallelRank, False)
        assert got == expected and list(got) == list(expected)


def test_owner_minimums_rank_changed_between_calls() -> None:
    """The memo is the pass's own: a rank changed between two calls is read again."""
    fragments, ranks = _mixed(200, 8)
    first = _native.owner_minimums(fragments, ("tp",), PlacementFragment, ParallelRank, False)
    vars(ranks[3])["dp"] = 40
    second = _native.owner_minimums(fragments, ("tp",), PlacementFragment, ParallelRank, False)
    assert first != second and any(dp == 40 for _, dp in second)
    columns = _native.fragment_columns(fragments, PlacementFragment, ParallelRank)
    assert columns[2] == [f.rank.dp for f in fragments]


@pytest.mark.parametrize("nranks", [1, 3, 64, 200])
def test_select_sources_equals_the_in_order_path(nranks: int) -> None:
    n = 400
    ranks = [ParallelRank(dp=0, tp=k % 3, pp=k % 2, ep=0) for k in range(nranks)]
    shape = (4,)
    fragments = [PlacementFragment(tensor_id=f"t{i % 40}", global_offset=(4 * (i // 40),), local_shape=shape,
                                   nbytes=16, rank=ranks[(i * 7) % nranks], placement_fragment_id=f"f{i:05d}")
                 for i in range(n)]
    tids = [f"t{i}" for i in range(40)]
    args = ({t: i for i, t in enumerate(tids)}, _q([1] * 40), [("tp",)] * 40, [None] * 40,
            [{t: (("tp", 1),) for t in tids}], _q([0]), _q([2 * i for i in range(40)]))
    for container in (list, tuple):
        fast = _native.select_sources(container(fragments), *args, PlacementFragment, ParallelRank)
        plain = _native.select_sources(container(fragments), *args)
        assert fast is not None and plain is not None
        assert [f.placement_fragment_id for f in fast[0]] == [f.placement_fragment_id for f in plain[0]]
        assert fast[1:] == plain[1:]

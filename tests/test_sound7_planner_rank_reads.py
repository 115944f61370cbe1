"""The planner's address-order passes read a rank only from a plain instance dict (session 27,
SOUND7; ASMPLAN7's open item, the sites after owner_minimums).

``fragment_columns``' address pass and ``select_sources``' pre-read visit the fragments in address
order and hold them borrowed (from the caller's list, the call's tuple or a private copy). Each
reads ``rank.dp`` (and tp, pp, ep) by a generic attribute read when the rank's instance dict holds
a key that is not an exact str. A str-subclass key with the hash of ``"dp"`` ahead of ``"dp"`` in
the probe order then runs its ``__eq__`` inside the pass: Python code that can change a rank the
pass already read (out of the rules' list order: another result) or clear the list the pass
borrows its fragments from (a use after free; ASan). Both passes now decline such a rank before
reading it, and the in-order path (which holds what it reads) decides as the rules do."""

from __future__ import annotations

import gc
from array import array
from typing import Any, Callable, Optional

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank, PlacementFragment

CALLS: list[str] = []
HOOK: list[Callable[[], None]] = []


class _Key(str):
    __hash__ = str.__hash__

    def __eq__(self, other: object) -> bool:
        CALLS.append(str(other))
        for hook in HOOK:
            hook()
        return False


def _plant(rank: Any, name: str = "dp") -> None:
    """A _Key(name) ahead of name in the probe order of rank's instance dict."""
    state = rank.__dict__
    saved = dict(state)
    state.clear()
    state[_Key(name)] = -1
    state.update(saved)


def _fragment(tid: str, fid: str, rank: Any) -> Any:
    return PlacementFragment(tensor_id=tid, global_offset=(0,), local_shape=(4,), nbytes=8, rank=rank,
                             placement_fragment_id=fid)


def _pair(tid: str = "w") -> tuple[Any, Any]:
    """Two fragments (each with its own rank), the first at the higher address: list order is
    then the reverse of the passes' address order."""
    a = _fragment(tid, "a", ParallelRank(dp=0, tp=0))
    b = _fragment(tid, "b", ParallelRank(dp=0, tp=0))
    high, low = (a, b) if id(a) > id(b) else (b, a)
    object.__setattr__(high, "placement_fragment_id", "a")  # ids in list order
    object.__setattr__(low, "placement_fragment_id", "b")
    return high, low


# ---- fragment_columns ----------------------------------------------------------------------


def _rules_columns(fragments: Any) -> tuple[list[Any], list[Any], list[Any]]:
    """What fragment_columns' caller reads without it (core.plan_logical_transfer's else branch)."""
    return (
        [f.placement_fragment_id for f in fragments],
        [f.tensor_id for f in fragments],
        [f.rank.dp for f in fragments],
    )


def test_fragment_columns_reads_a_planted_rank_in_list_order() -> None:
    for container in (list, tuple):
        high, low = _pair()
        _plant(high.rank)
        victim = low.rank

        def bump() -> None:
            victim.__dict__["dp"] = 7  # the rules read it after the planted rank

        HOOK[:] = [bump]
        try:
            CALLS.clear()
            expected = _rules_columns([high, low])
            by_rules = list(CALLS)
            victim.__dict__["dp"] = 0
            CALLS.clear()
            got = _native.fragment_columns(container([high, low]), PlacementFragment, ParallelRank)
        finally:
            HOOK.clear()
        assert by_rules and set(by_rules) == {"dp"} and expected[2] == [0, 7]  # (how often: the probe order)
        assert CALLS == by_rules
        assert list(got[:3]) == list(expected)


def test_fragment_columns_survives_a_cleared_list() -> None:
    """The planted key's code clears the caller's list and the pass's private copy (found
    through the collector): the in-order loop holds the fragment it reads."""
    high, low = _pair()
    _plant(low.rank)  # read first in address order: the higher fragment is freed under the pass
    fragments = [high, low]
    mine = [id(high), id(low)]  # (addresses only: the lists must be the last to hold them)
    del high, low

    def clear() -> None:
        HOOK.clear()
        for obj in gc.get_objects():  # the caller's list and the pass's copy, no other test's
            if type(obj) is list and len(obj) == 2 and [id(x) for x in obj] == mine:
                obj.clear()

    HOOK[:] = [clear]
    try:
        got = _native.fragment_columns(fragments, PlacementFragment, ParallelRank)
    finally:
        HOOK.clear()
    assert got[0] == ["a", "b"] and got[2] == [0, 0] and got[4] is None  # in list order, held


def test_fragment_columns_plain_ranks_keep_the_address_pass() -> None:
    high, low = _pair()
    got = _native.fragment_columns([high, low], PlacementFragment, ParallelRank)
    assert got[4] is not None  # the geometry: the address pass ran
    assert list(got[:3]) == list(_rules_columns([high, low]))


# ---- select_sources --------------------------------------------------------------------------


def _q(values: list[int]) -> bytes:
    return array("q", values).tobytes()


def _select(fragments: Any, typed: bool) -> Optional[Any]:
    """One tensor "w", one complete replica at dp 0 whose chosen owner is tp 1."""
    extra = (PlacementFragment, ParallelRank) if typed else ()
    return _native.select_sources(fragments, {"w": 0}, _q([1]), [("tp",)], [None], [{"w": (("tp", 1),)}], _q([0]),
                                  _q([0]), *extra)


def test_select_sources_reads_a_planted_rank_in_list_order() -> None:
    for container in (list, tuple):
        results = []
        for typed in (False, True):
            high, low = _pair()
            _plant(high.rank)
            victim = low.rank

            def bump() -> None:
                victim.__dict__["tp"] = 1  # eligible only when read after the planted rank

            HOOK[:] = [bump]
            try:
                CALLS.clear()
                got = _select(container([high, low]), typed)
            finally:
                HOOK.clear()
            results.append((list(CALLS), None if got is None else ([f.placement_fragment_id for f in got[0]], got[1:7], got[7])))
        (plain_calls, plain), (fast_calls, fast) = results
        assert plain_calls and set(plain_calls) == {"dp"}  # (how often: the dict's probe order)
        assert fast_calls == plain_calls  # the typed call read the planted rank as the in-order path
        assert plain is not None and plain[0] == ["b"]  # the in-order path: the victim read after the hook
        assert fast == plain


def test_select_sources_survives_a_cleared_list() -> None:
    """The planted key's code clears the caller's list the pre-read borrows its fragments from."""
    high, low = _pair()
    _plant(low.rank)  # read first in address order: the higher fragment is freed under the pass
    fragments = [high, low]
    del high, low

    def clear() -> None:
        HOOK.clear()
        fragments.clear()

    HOOK[:] = [clear]
    try:
        got = _select(fragments, True)
    finally:
        HOOK.clear()
    # the generic path re-reads the size: the rank read cleared the list, nothing is eligible
    assert got is not None and got[0] == []


def test_select_sources_plain_ranks_keep_the_pre_read() -> None:
    high, low = _pair()
    object.__setattr__(low, "rank", ParallelRank(dp=0, tp=1))
    for container in (list, tuple):
        fast = _select(container([high, low]), True)
        plain = _select(container([high, low]), False)
        assert fast is not None and [f.placement_fragment_id for f in fast[0]] == ["b"]
        assert fast[1:] == plain[1:]

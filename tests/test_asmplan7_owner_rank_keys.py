"""owner_minimums' address-order pass reads a rank's attributes only from a plain instance dict
(session 27; SOUND6's open item for the planner's attribute reads, plain_dict.h).

The pass keeps borrowed references while it reads: the fragments by address, each row's tensor
id (the fragment holds it). A rank whose instance dict holds a str-subclass key with the hash of
"dp" (ahead of "dp" in the probe order) would run that key's __eq__ inside the pass at the read of
rank.dp: Python code that could drop a fragment's tensor id while a row still points at it. The
pass now declines such a rank (None, nothing run) and the caller's Python form decides, which
reads the attributes in list order as the rules do."""

from __future__ import annotations

from typing import Any

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank, PlacementFragment
from mooncake.reshard.weight._planner.ownership import _owner_minimums

CALLS: list[str] = []


class _Key(str):
    __hash__ = str.__hash__

    def __eq__(self, other: object) -> bool:
        CALLS.append(str(other))
        return False


def _fragments() -> list[Any]:
    ranks = [ParallelRank(dp=d, tp=t) for d in range(2) for t in range(3)]
    return [
        PlacementFragment(f"t{k}", (0,), (4,), 8, rank)
        for k in range(5)
        for rank in ranks
    ]


def _plant(rank: Any) -> None:
    """A _Key('dp') ahead of 'dp' in the probe order of rank's instance dict."""
    state = rank.__dict__
    saved = dict(state)
    state.clear()
    state[_Key("dp")] = -1
    state.update(saved)


def test_planted_rank_key_declines_without_running_it() -> None:
    fragments = _fragments()
    expected = _owner_minimums(fragments, ("tp",))
    _plant(fragments[7].rank)
    CALLS.clear()
    assert _owner_minimums(fragments, ("tp",)) == expected  # the rules read rank.dp: its __eq__ runs
    by_rules = list(CALLS)
    assert by_rules  # the planted key is on the probe path of "dp"
    for grouped in (True, False):
        for container in (list, tuple):
            CALLS.clear()
            got = _native.owner_minimums(container(fragments), ("tp",), PlacementFragment, ParallelRank, grouped)
            # the address-order pass declined without reading the rank (no __eq__ out of order);
            # the in-order loop then read every fragment as the rules do, and decided the same
            assert CALLS == by_rules
            assert got == expected


def test_plain_ranks_still_take_the_pass() -> None:
    fragments = _fragments()
    got = _native.owner_minimums(fragments, ("tp",), PlacementFragment, ParallelRank, False)
    assert got == _owner_minimums(fragments, ("tp",))
    grouped = _native.owner_minimums(fragments, ("tp",), PlacementFragment, ParallelRank, True)
    assert type(grouped) is tuple and grouped[1] == len(got)

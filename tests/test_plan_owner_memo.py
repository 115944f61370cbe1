"""``owner_minimums(..., grouped=True)`` remembers the owner of recent least values (issue 5,
session 16): a key whose least values equal those of a remembered owner takes that owner without
building a values tuple. Many keys over few or many distinct owners (colliding memo slots, no owner
kinds, values up to the int64 end) must give the Python form's map, in the plain map's order, with
one owner object per distinct values."""

from __future__ import annotations

from typing import Any, List, Tuple

from hypothesis import given, settings
from hypothesis import strategies as st

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank, PlacementFragment
from mooncake.reshard.weight._planner import ownership

_I64 = (1 << 63) - 1


def _fragment(tensor_id: str, rank: ParallelRank) -> PlacementFragment:
    return PlacementFragment(tensor_id, (0,), (4,), 8, rank)


_VALUES = st.one_of(st.integers(0, 3), st.sampled_from([_I64, _I64 - 1, 1 << 40]))


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 80), st.integers(0, 2), _VALUES, _VALUES, _VALUES), min_size=1, max_size=300),
    st.lists(st.sampled_from(["tp", "pp", "ep"]), unique=True, max_size=3).map(tuple),
)
def test_memo_gives_the_python_map_and_shared_owners(rows: List[Tuple[Any, ...]], kinds: Tuple[str, ...]) -> None:
    fragments = tuple(
        _fragment(f"layers.{t}.w", ParallelRank(dp=dp, tp=tp, pp=pp, ep=ep)) for t, dp, tp, pp, ep in rows
    )
    got = _native.owner_minimums(fragments, kinds, PlacementFragment, ParallelRank, True)
    assert type(got) is tuple
    by_dp, count = got
    plain = _native.owner_minimums(fragments, kinds, PlacementFragment, ParallelRank)
    want_by_dp, want_count = ownership._group_minimums(plain, kinds)
    assert count == want_count
    assert [(dp, list(c.items())) for dp, c in by_dp.items()] == [(dp, list(c.items())) for dp, c in want_by_dp.items()]
    assert (by_dp, count) == ownership._group_minimums(ownership._owner_minimums(fragments, kinds), kinds)
    owners = [owner for chosen in by_dp.values() for owner in chosen.values()]
    assert len({id(o) for o in owners}) == len(set(owners))  # one object per distinct owner
    for owner in owners:
        assert type(owner) is tuple and all(type(pair) is tuple and len(pair) == 2 for pair in owner)
        assert tuple(kind for kind, _ in owner) == kinds

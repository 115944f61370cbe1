"""``_native.owner_minimums(..., grouped=True)`` (csrc/planobj.c ``om_grouped``) against the Python
form ``ownership._group_minimums(ownership._owner_minimums(...))``: same dps, tensor ids and owners,
in the same order, the same key count; and the plain map wherever the fast path declines."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, strategies as st

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank, PlacementFragment
from mooncake.reshard.weight._planner import ownership

AXES = ("dp", "tp", "pp", "ep")


def _fragment(tensor_id: str, rank: ParallelRank) -> PlacementFragment:
    return PlacementFragment(tensor_id, (0,), (4,), 8, rank)


fragments_st = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c", "layers.0.w", "layers.1.w"]),
        st.integers(0, 2),
        st.integers(0, 3),
        st.integers(0, 1),
        st.integers(0, 3),
    ),
    max_size=40,
)
kinds_st = st.lists(st.sampled_from(["tp", "pp", "ep"]), unique=True, max_size=3).map(tuple)


def _expected(fragments: Any, kinds: tuple[str, ...]) -> tuple[Any, int]:
    return ownership._group_minimums(ownership._owner_minimums(fragments, kinds), kinds)


def _ordered(by_dp: dict[Any, dict[Any, Any]]) -> list[Any]:
    return [(dp, list(chosen.items())) for dp, chosen in by_dp.items()]


@given(fragments_st, kinds_st, st.booleans())
def test_grouped_equals_python_form(rows: list[tuple[Any, ...]], kinds: tuple[str, ...], as_tuple: bool) -> None:
    fragments: Any = [_fragment(t, ParallelRank(dp=dp, tp=tp, pp=pp, ep=ep)) for t, dp, tp, pp, ep in rows]
    if as_tuple:
        fragments = tuple(fragments)
    got = _native.owner_minimums(fragments, kinds, PlacementFragment, ParallelRank, True)
    assert type(got) is tuple
    by_dp, count = got
    # the order the planner had: the C map (first appearance) grouped in Python
    plain = _native.owner_minimums(fragments, kinds, PlacementFragment, ParallelRank)
    want_by_dp, want_count = ownership._group_minimums(plain, kinds)
    assert count == want_count
    assert _ordered(by_dp) == _ordered(want_by_dp)
    # the values of the Python form (its set-ordered pass differs in order only)
    python_by_dp, python_count = _expected(fragments, kinds)
    assert (by_dp, count) == (python_by_dp, python_count)
    # one owner tuple per distinct least values, as the Python form shares them
    owners = [owner for chosen in by_dp.values() for owner in chosen.values()]
    assert len({id(o) for o in owners}) == len(set(owners))
    # without grouped: the plain map, unchanged
    assert _native.owner_minimums(fragments, kinds, PlacementFragment, ParallelRank) == ownership._owner_minimums(
        fragments, kinds
    )


def test_declined_inputs_return_the_plain_map() -> None:
    plain = _fragment("w", ParallelRank(dp=0, tp=1))
    big = _fragment("w", ParallelRank(dp=0, tp=1))
    object.__setattr__(big.rank, "tp", 1 << 70)  # beyond int64: the exact path compares it

    class SubFragment(PlacementFragment):
        pass

    sub = SubFragment("w", (0,), (4,), 8, ParallelRank(dp=1, tp=0))
    for fragments in ([plain, big], [plain, sub]):
        got = _native.owner_minimums(fragments, ("tp",), PlacementFragment, ParallelRank, True)
        assert type(got) is dict
        assert got == ownership._owner_minimums(fragments, ("tp",))
    # no types: the in-order path, plain map
    assert type(_native.owner_minimums([plain], ("tp",), None, None, True)) is dict


def test_grouped_bad_arguments() -> None:
    frag = _fragment("w", ParallelRank(dp=0, tp=1))
    with pytest.raises(TypeError):
        _native.owner_minimums([frag], ("tp",), PlacementFragment, ParallelRank, True, 1)  # type: ignore[call-arg]
    got = _native.owner_minimums([frag], ("tp",), PlacementFragment, ParallelRank, 0)
    assert got == {("w", 0): (1,)}
    assert _native.owner_minimums([], ("tp",), PlacementFragment, ParallelRank, True) == ({}, 0)


def test_complete_replicas_unchanged_through_both_forms(monkeypatch: pytest.MonkeyPatch) -> None:
    """complete_parallel_source_replicas gives the same answer whether the C pass groups or not."""
    from planner_helpers import tp_placement
    from layout_model import TensorSpec

    spec = TensorSpec("w", (8, 4))
    placement = tp_placement("src", spec, 2, 0, dp=2)
    tensors = {t.tensor_id: t for t in placement.tensors}
    fast = ownership.complete_parallel_source_replicas(tensors, placement.fragments, placement)

    real = _native.owner_minimums

    def ungrouped(fragments: Any, kinds: Any, *rest: Any) -> Any:
        return real(fragments, kinds, *rest[:2])

    class Ungrouped:
        owner_minimums = staticmethod(ungrouped)

        def __getattr__(self, name: str) -> Any:
            return getattr(_native, name)

    monkeypatch.setattr(ownership, "_native", Ungrouped())
    slow = ownership.complete_parallel_source_replicas(tensors, placement.fragments, placement)
    assert fast == slow and list(fast) == list(slow)
    assert [list(v.items()) for v in fast.values()] == [list(v.items()) for v in slow.values()]

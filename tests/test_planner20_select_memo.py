"""select_sources' pre-read (and owner_minimums' address-order pass) keeps the last rank object it read (and its coordinates), the
replica pass the last chosen owner it decoded (over the last kinds), and the tensor map tells a
key met on a fragment (an exact str) from a seeded ``tensor_index`` key (session 20). Shared
rank and owner objects, equal-but-distinct copies, and an unusual one right after a remembered
one must decide exactly as the plain in-order reads (the call without the classes)."""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_plan_speed_select_state import _args, _both, _made, _rank_with_state

from spec_helpers import field_state, store_state

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank, PlacementFragment
from mooncake.reshard.weight._planner import ownership


def _with_rank(fragment: Any, rank: Any) -> Any:
    clone = object.__new__(PlacementFragment)
    state = dict(field_state(fragment))
    state["rank"] = rank
    store_state(clone, replace=True, state=state)
    return clone


_FORGED = [1.0, 1 << 70, None, "0", True]


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 120),
    st.integers(0, 10**6),
    st.lists(st.sampled_from(["shared", "copy", "forged"]), min_size=1, max_size=120),
    st.sampled_from(_FORGED),
    st.sampled_from(["dp", "tp", "pp", "ep"]),
)
def test_shared_copied_and_forged_ranks(count: int, seed: int, kinds: List[str], value: Any, axis: str) -> None:
    made = _made(count, seed)
    shared = ParallelRank(dp=1, tp=1)
    fragments = []
    for fragment, kind in zip(made, kinds * (count // len(kinds) + 1)):
        if kind == "shared":
            rank = shared
        elif kind == "copy":
            rank = ParallelRank(dp=1, tp=1)
        else:
            rank = _rank_with_state({**field_state(shared), axis: value})
        fragments.append(_with_rank(fragment, rank))
    for args in (_args(), _args((("tp",),) * 4)):
        _both(fragments, args)
        _both(tuple(fragments), args)


@pytest.mark.parametrize("position", [0, 1, 3])
@pytest.mark.parametrize(
    "forged",
    [(("tp", 1.0),), (("tp", 1), ("pp", 0)), (("pp", 1),), ("tp", 1), ((b"tp", 1),), (("tp", 1 << 70),)],
)
def test_shared_owner_then_an_unusual_one(position: int, forged: Any) -> None:
    made = _made(200, 3)
    args = list(_args((("tp",),) * 4))
    owner = (("tp", 1),)
    chosen: Dict[str, Any] = {f"t{t}": owner for t in range(4)}
    chosen[f"t{position}"] = forged
    args[4] = [dict(chosen), {f"t{t}": owner for t in range(4)}]
    assert _both(made, tuple(args)) == ("ok", None)  # the unusual owner declines
    args[4] = args[4][::-1]
    _both(tuple(made), tuple(args))


def test_same_owner_object_over_other_kinds() -> None:
    # one owner object chosen for tensors of different kinds: decoded per kinds (t1 and t3
    # have kinds ("pp",), under which ("tp", 1) does not fit: declines, as plain)
    made = _made(200, 4)
    args = list(_args((("tp",), ("pp",), ("tp",), ("pp",))))
    owner = (("tp", 1),)
    args[4] = [{f"t{t}": owner for t in range(4)} for _ in range(2)]
    assert _both(made, tuple(args)) == ("ok", None)
    other = (("pp", 1),)
    args[4] = [{f"t{t}": (owner if t % 2 == 0 else other) for t in range(4)} for _ in range(2)]
    result = _both(made, tuple(args))
    assert result[0] == "ok" and result[1] is not None


def test_seeded_keys_that_no_fragment_shares() -> None:
    # tensor_index's keys are other objects than the fragments' ids (seeded, never met on a
    # fragment): the chosen dicts keyed by them, by the fragments' objects, or by str subclasses
    class Name(str):
        pass

    made = _made(200, 5)
    args = list(_args((("tp",),) * 4))
    index_keys = ["".join(list(f"t{t}")) for t in range(4)]
    args[0] = {key: t for t, key in enumerate(index_keys)}
    owner = (("tp", 1),)
    for keyed in (index_keys, [f"t{t}" for t in range(4)], [Name(f"t{t}") for t in range(4)]):
        args[4] = [{key: owner for key in keyed} for _ in range(2)]
        _both(made, tuple(args))
        _both(tuple(made), tuple(args))
    args[0] = {Name(f"t{t}"): t for t in range(4)}
    args[4] = [{f"t{t}": owner for t in range(4)} for _ in range(2)]
    _both(made, tuple(args))


def _minimums(fragments: Any, kinds: Tuple[str, ...]) -> Any:
    """owner_minimums' address-order path (types given, grouped) and its plain in-order form,
    each as (outcome, value); the grouped one in the plain form's terms."""

    def outcome(*extra: Any) -> Any:
        try:
            return ("ok", _native.owner_minimums(fragments, kinds, *extra))
        except (AttributeError, TypeError) as exc:
            return (type(exc).__name__, str(exc))

    return outcome(PlacementFragment, ParallelRank, True), outcome()


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 6), st.sampled_from(["shared", "other", "copy", "forged"])), min_size=1, max_size=150
    ),
    st.sampled_from(_FORGED),
    st.sampled_from(["dp", "tp", "pp", "ep"]),
    st.lists(st.sampled_from(["tp", "pp", "ep"]), unique=True, max_size=3).map(tuple),
    st.booleans(),
)
def test_owner_minimums_over_shared_copied_and_forged_ranks(
    rows: List[Tuple[int, str]], value: Any, axis: str, kinds: Tuple[str, ...], as_tuple: bool
) -> None:
    shared = ParallelRank(dp=1, tp=1, pp=0, ep=2)
    other = ParallelRank(dp=0, tp=0, pp=1, ep=1)
    forged = _rank_with_state({**field_state(shared), axis: value})
    fragments: Any = []
    for t, kind in rows:
        rank = {"shared": shared, "other": other, "forged": forged}.get(kind) or ParallelRank(dp=1, tp=1, pp=0, ep=2)
        fragments.append(PlacementFragment(f"layers.{t}.w", (0,), (4,), 8, ParallelRank()))
        fragments[-1] = _with_rank(fragments[-1], rank)
    if as_tuple:
        fragments = tuple(fragments)
    grouped, plain = _minimums(fragments, kinds)
    if plain == ("ok", None):  # a forged value not of its exact kind: no C path decides it (AUDIT5 F4)
        assert grouped == plain
        return
    if plain[0] != "ok":  # a forged value the comparison rejects: the same error either way
        assert grouped == plain
        return
    if type(grouped[1]) is tuple:  # the address-order path took every fragment
        assert grouped[1] == ownership._group_minimums(plain[1], kinds)
        assert all(type(value) is int for owner in plain[1].values() for value in owner)
    else:  # declined (a forged value it does not take): the plain map
        assert grouped[1] == plain[1]
    assert plain[1] == ownership._owner_minimums(fragments, kinds)


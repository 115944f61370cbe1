"""select_sources' address-order pre-read takes each fragment's fields (and its rank's dp, tp,
pp, ep) from one scan of the state dict, matching the interned field names by identity, and
prefetches the rows, position slots and picks of later fragments. A field the scan does not meet,
and every field of a state holding a key that is not an exact str, is read as an attribute, so
the result is exactly the plain in-order reads' (the call without the classes) whatever the
states hold: equal-but-not-interned keys, int keys, extra, reordered or missing entries, forged
values, subclasses."""

from __future__ import annotations

import random
from array import array
from typing import Any, List, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spec_helpers import field_state, store_state

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank, PlacementFragment


def _q(values: List[int]) -> bytes:
    return array("q", values).tobytes()


_NT = 5  # tensors t0..t4; t4 is not needed


def _args(kinds: Tuple[Tuple[str, ...], ...] = ((),) * 4) -> Tuple[Any, ...]:
    # Four needed tensors t0..t3 (2-D), complete replicas of dp 0 and dp 1; the owners chosen
    # by each replica follow `kinds` (tp=1 where "tp" is a kind).
    owner = tuple(tuple((k, 1 if k == "tp" else 0) for k in ks) for ks in kinds)
    slots = [{f"t{t}": owner[t] for t in range(4)} for _ in range(2)]
    keys = [t * 3 + s for t in range(4) for s in range(2)]
    return (
        {f"t{t}": t for t in range(4)},
        _q([2] * 4),
        list(kinds),
        [None] * 4,
        slots,
        _q([0, 1]),
        _q(keys),
    )


def _made(count: int, seed: int = 0) -> List[Any]:
    rnd = random.Random(seed)
    ranks = [ParallelRank(dp=d, tp=t) for d in range(3) for t in range(2)]
    out = []
    for i in range(count):
        out.append(
            PlacementFragment(
                tensor_id=f"t{rnd.randrange(_NT)}",
                global_offset=(4 * rnd.randrange(6), 0),
                local_shape=(4, 8),
                nbytes=64,
                rank=rnd.choice(ranks),
                placement_fragment_id=f"f{rnd.randrange(count)}",  # ties and repeats
            )
        )
    return out


def _both(fragments: Any, args: Tuple[Any, ...]) -> Any:
    def outcome(*extra: Any) -> Any:
        try:
            return ("ok", _native.select_sources(fragments, *args, *extra))
        except (AttributeError, TypeError) as exc:
            return (type(exc).__name__, str(exc))

    plain = outcome()
    fast = outcome(PlacementFragment, ParallelRank)
    assert fast == plain
    if plain[0] == "ok" and plain[1] is not None:
        assert all(a is b for a, b in zip(fast[1][0], plain[1][0]))
        assert all(a is b for a, b in zip(fast[1][7], plain[1][7]))
    return plain


def _with_state(state: dict, cls: type = PlacementFragment) -> Any:
    clone = object.__new__(cls)
    store_state(clone, replace=True, state=state)
    return clone


def _rank_with_state(state: dict, cls: type = ParallelRank) -> Any:
    return _with_state(state, cls)


def _not_interned(name: str) -> str:
    key = "".join(list(name))
    assert key == name and key is not name
    return key


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 400), st.integers(0, 10**6), st.sampled_from([((),) * 4, (("tp",),) * 4,
                                                                     (("tp",), (), ("tp",), ())]))
def test_many_fragments_equal_the_plain_reads(count: int, seed: int, kinds: Any) -> None:
    made = _made(count, seed)
    args = _args(kinds)
    result = _both(made, args)
    assert result[0] == "ok" and result[1] is not None
    _both(tuple(reversed(made)), args)


FIELDS = ("tensor_id", "rank", "global_offset", "local_shape", "nbytes", "placement_fragment_id")


@pytest.mark.parametrize("name", FIELDS)
@pytest.mark.parametrize("position", [0, 7, 39])
def test_unusual_fragment_states(name: str, position: int) -> None:
    made = _made(40, 1)
    args = _args()
    base = made[position]
    state = dict(field_state(base))
    variants = [
        # every key equal but not the interned name: all read as attributes
        {_not_interned(k): v for k, v in state.items()},
        # this field under an equal, non-interned key only
        {(_not_interned(k) if k == name else k): v for k, v in state.items()},
        {**state, 1: "x"},  # an int key: every field read as an attribute
        {**state, "_cache": object()},  # an extra str key
        dict(reversed(list(state.items()))),
        {k: v for k, v in state.items() if k != name},  # missing: AttributeError, as plain
    ]
    for variant in variants:
        _both(made[:position] + [_with_state(variant)] + made[position + 1:], args)


@pytest.mark.parametrize(
    "value",
    [(1 << 63, 0), (4,), [0, 0], 8.0, -3, 1 << 70, 5, "t4", None, True],
)
@pytest.mark.parametrize("name", FIELDS)
def test_forged_values_through_the_scan(value: Any, name: str) -> None:
    made = _made(40, 2)
    args = _args((("tp",),) * 4)
    for position in (0, 17, 39):
        forged = _with_state({**field_state(made[position]), name: value})
        _both(made[:position] + [forged] + made[position + 1:], args)


@pytest.mark.parametrize("axis", ["dp", "tp", "pp", "ep"])
def test_unusual_rank_states(axis: str) -> None:
    made = _made(40, 3)
    args = _args((("tp",), ("tp",), (), ("tp",)))
    rank_state = dict(ParallelRank(dp=1, tp=1).__dict__)

    class SubRank(ParallelRank):
        pass

    ranks = [
        _rank_with_state({(_not_interned(k) if k == axis else k): v for k, v in rank_state.items()}),
        _rank_with_state({**rank_state, 7: 0}),
        _rank_with_state({**rank_state, "extra": 1}),
        _rank_with_state({**rank_state, axis: 1 << 64}),
        _rank_with_state({**rank_state, axis: -(1 << 70)}),
        _rank_with_state({**rank_state, axis: 1.0}),
        _rank_with_state({**rank_state, axis: True}),
        _rank_with_state({k: v for k, v in rank_state.items() if k != axis}),
        _rank_with_state(rank_state, SubRank),
    ]
    for rank in ranks:
        for position in (0, 20, 39):
            forged = _with_state({**field_state(made[position]), "rank": rank})
            _both(made[:position] + [forged] + made[position + 1:], args)


def test_subclassed_fragments_and_equal_keys_everywhere() -> None:
    class Sub(PlacementFragment):
        pass

    made = _made(60, 4)
    args = _args()
    _both(made[:30] + [_with_state(dict(field_state(made[30])), Sub)] + made[31:], args)
    # every fragment's state under equal, non-interned keys: same as plain
    rebuilt = [_with_state({_not_interned(k): v for k, v in field_state(f).items()}) for f in made]
    _both(rebuilt, args)
    # a state scan that meets the rank's fields under non-interned keys on every fragment
    ranks = {}
    for f in made:
        if f.rank not in ranks:
            ranks[f.rank] = _rank_with_state({_not_interned(k): v for k, v in field_state(f.rank).items()})
    _both([_with_state({**field_state(f), "rank": ranks[f.rank]}) for f in made], args)


def test_fields_read_from_the_state_are_the_very_objects() -> None:
    made = _made(50, 5)
    args = _args()
    result = _native.select_sources(made, *args, PlacementFragment, ParallelRank)
    assert result is not None and result[0]
    for obj, fid in zip(result[0], result[7]):
        assert fid is field_state(obj)["placement_fragment_id"]

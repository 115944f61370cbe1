"""``select_sources``' pre-read loop finds each fragment's cover a few fragments ahead (issue 5,
session 32): the cover found ahead is kept for that fragment's turn, and the coordinates, tensor
ndim, position row and pick slot of later fragments are asked for as hints.

The kept cover must be the one found at its turn. Lists long enough for every look-ahead
distance (4, 8, 16, 24) and their ends, with unneeded tensors, ranks outside every complete
replica, routed and replica tensors and repeated geometries interleaved, must give the plain
path's selection (no types: no pre-read, every cover found at its turn) and the Python rules'
(``_placed_members``)."""

from __future__ import annotations

import random
from typing import Any, Dict, List, Optional, Tuple

import pytest

from mooncake.reshard.weight import ParallelRank, PlacementFragment
from test_plan_select_identity import _call, _python_selection, _q

_RANKS = [ParallelRank(dp=d, tp=t) for d in range(4) for t in range(2)]


def _case(count: int, seed: int, ntensors: int = 12) -> Dict[str, Any]:
    rnd = random.Random(seed)
    names = [f"tensor.{k:03d}" for k in range(ntensors + 3)]  # the last three are never needed
    needed = names[:ntensors]
    owned = [rnd.randrange(4) == 0 for _ in needed]  # DP-owned (routed) tensors
    kinds: List[Tuple[str, ...]] = [("dp",) if o else rnd.choice([(), ("tp",)]) for o in owned]
    dp_owners: List[Optional[Tuple[Tuple[str, int], ...]]] = [
        (("dp", rnd.randrange(4)),) if o else None for o in owned
    ]
    replica_dps = [0, 2] if rnd.random() < 0.5 else [1, 2, 3]  # dp 1 or 0 is no complete replica
    slots: List[Dict[str, Any]] = []
    for _ in replica_dps:
        chosen: Dict[str, Any] = {}
        for t, name in enumerate(needed):
            if rnd.randrange(8) == 0:
                continue  # no chosen owner here
            chosen[name] = tuple((kind, rnd.randrange(2)) for kind in kinds[t])
        slots.append(chosen)
    nslots = len(replica_dps) + 1
    cover_keys = [
        t * nslots + s
        for t in range(ntensors)
        for s in range(nslots)
        if (s == nslots - 1) == owned[t] and rnd.randrange(6) != 0
    ]
    rnd.shuffle(cover_keys)
    fragments = [
        PlacementFragment(
            tensor_id=rnd.choice(names),
            global_offset=(4 * rnd.randrange(3), 8 * rnd.randrange(2)),
            local_shape=(4, 8),
            nbytes=128,
            rank=rnd.choice(_RANKS),
            placement_fragment_id=f"f{rnd.randrange(count):05d}",  # ties and repeats
        )
        for _ in range(count)
    ]
    return dict(
        fragments=tuple(fragments) if seed % 2 else fragments,
        tensor_index={name: t for t, name in enumerate(needed)},
        ndim=_q([2] * ntensors),
        kinds=kinds,
        dp_owners=dp_owners,
        slots=slots,
        replica_dps=replica_dps,
        cover_keys=cover_keys,
        names=needed,
    )


def _check(case: Dict[str, Any]) -> None:
    plain = _call(case, typed=False)
    fast = _call(case, typed=True)
    assert plain is not None and fast is not None
    assert len(fast[0]) == len(plain[0]) and all(a is b for a, b in zip(fast[0], plain[0]))
    assert fast[1:7] == plain[1:7]
    assert all(a is b for a, b in zip(fast[7], plain[7]))
    expected = _python_selection(case)
    assert len(expected) == len(plain[0]) and all(a is b for a, b in zip(plain[0], expected))


@pytest.mark.parametrize("count", [1, 3, 4, 5, 8, 9, 16, 17, 24, 25, 26, 31, 64, 257, 2000])
@pytest.mark.parametrize("seed", range(4))
def test_look_ahead_equals_the_plain_path_and_the_python_rules(count: int, seed: int) -> None:
    _check(_case(count, seed))


@pytest.mark.parametrize("seed", range(6))
def test_many_tensors_few_repeats(seed: int) -> None:
    # mostly distinct geometries and tensors: covers and position rows far apart
    _check(_case(3000, 100 + seed, ntensors=400))


def test_the_selection_is_not_empty() -> None:
    # (the cases above choose something: a check of the harness, not of the pass)
    case = _case(2000, 7)
    assert len(_call(case, typed=True)[0]) > 0

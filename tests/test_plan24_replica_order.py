"""``select_sources`` applies the complete replicas' chosen owners in tensor order (session 24).

The pre-read path gathers the chosen dicts' entries in each dict's order, finds each key's tensor
by object, sorts the entries by (tensor, slot) and only then decodes the owners. Here the dicts
are large enough for the radix sort (more than 32 entries), in orders unrelated to the tensor
index, with several replicas, keys met by object, equal keys held by other objects, keys of
tensors no fragment has, tensors without a chosen owner and owners that do not fit: the typed
path must give what the plain path gives (every value looked up by value) and, where the owners
fit, the Python selection (``_placed_members``)."""

from __future__ import annotations

import random
from typing import Any, Dict, List, Optional, Tuple

import pytest

from mooncake.reshard.weight import ParallelRank, PlacementFragment
from test_plan_select_identity import _call, _copy, _fits, _python_selection, _q


def _case(seed: int, ntensors: int, replicas: List[int], unfit: bool) -> Dict[str, Any]:
    rng = random.Random(seed)
    names = [f"layer.{k}.w" for k in range(ntensors + 3)]  # the last three are never needed
    needed = names[:ntensors]
    source_obj = {name: (name if rng.random() < 0.7 else _copy(name)) for name in names}
    tensor_index = {name: t for t, name in enumerate(needed)}
    kinds_of: List[Tuple[str, ...]] = [rng.choice([("tp",), ("tp", "ep"), ()]) for _ in needed]
    dp_owners: List[Optional[Tuple[Tuple[str, int], ...]]] = []
    for t in range(ntensors):
        if rng.random() < 0.1:
            kinds_of[t] = ("dp",)
            dp_owners.append((("dp", rng.choice(replicas)),))
        else:
            dp_owners.append(None)
    slots: List[Dict[str, Any]] = []
    for _ in replicas:
        chosen: Dict[str, Any] = {}
        order = list(names)
        rng.shuffle(order)
        for name in order:
            if rng.random() < 0.1:
                continue  # no chosen owner here
            key = rng.choice([source_obj[name], name, _copy(name)])
            t = needed.index(name) if name in needed else None
            kinds = kinds_of[t] if t is not None else ("tp",)
            chosen[key] = tuple((kind, rng.randint(0, 1)) for kind in kinds)
        if unfit and chosen:
            victim = rng.choice(list(chosen))
            chosen[victim] = (("tp", 1.5),)
        slots.append(chosen)
    nslots = len(replicas) + 1
    cover_keys = [
        t * nslots + s
        for t in range(ntensors)
        for s in range(nslots)
        if (s == nslots - 1) == (dp_owners[t] is not None) and rng.random() < 0.9
    ]
    rng.shuffle(cover_keys)
    ranks = [ParallelRank(dp=d, tp=p, ep=e) for d in range(max(replicas) + 1) for p in range(2) for e in range(2)]
    fragments = [
        PlacementFragment(
            tensor_id=source_obj[rng.choice(names)],
            global_offset=(4 * rng.randint(0, 1), 0),
            local_shape=(4, 8),
            nbytes=128,
            rank=rng.choice(ranks),
            placement_fragment_id=f"f{i:05d}",
        )
        for i in range(ntensors * 6)
    ]
    return dict(
        fragments=tuple(fragments),
        tensor_index=tensor_index,
        ndim=_q([2] * ntensors),
        kinds=kinds_of,
        dp_owners=dp_owners,
        slots=slots,
        replica_dps=replicas,
        cover_keys=cover_keys,
        names=needed,
    )


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("replicas", [[0], [0, 1], [0, 2, 3]])
@pytest.mark.parametrize("unfit", [False, True])
def test_many_entries_in_other_orders(seed: int, replicas: List[int], unfit: bool) -> None:
    case = _case(seed, 80, replicas, unfit)
    assert sum(map(len, case["slots"])) > 32  # the radix sort, not the insertion sort
    plain = _call(case, typed=False)
    fast = _call(case, typed=True)
    assert (fast is None) == (plain is None)
    if unfit:
        # an owner that does not fit is met unless its tensor is routed, unknown or uncovered;
        # either way both paths decide alike (checked above)
        if plain is None:
            return
    assert plain is not None
    assert len(fast[0]) == len(plain[0]) and all(a is b for a, b in zip(fast[0], plain[0]))
    assert fast[1:7] == plain[1:7]
    assert all(a is b for a, b in zip(fast[7], plain[7]))
    if _fits(case):
        expected = _python_selection(case)
        assert len(expected) == len(plain[0]) and all(a is b for a, b in zip(plain[0], expected))
        assert len(expected) > 0


def test_a_tensor_index_value_that_does_not_fit_declines_before_the_pre_read() -> None:
    case = _case(1, 40, [0, 1], False)
    assert _call(case, typed=True) is not None
    for bad in (1.0, -1, 40, "x"):
        index = dict(case["tensor_index"])
        index[case["names"][3]] = bad
        forged = dict(case, tensor_index=index)
        assert _call(forged, typed=False) is None and _call(forged, typed=True) is None
    index = dict(case["tensor_index"])
    index[case["names"][3]] = 2  # two keys of one index
    forged = dict(case, tensor_index=index)
    assert _call(forged, typed=False) is None and _call(forged, typed=True) is None

"""pack_targets numbers covers by a compact array indexed by key when the key range
(tensors x (replicas + 1)) is small, else by a hash table, and looks tensor ids up through a
pointer table grown as distinct id objects come: same packing, same cover ids and keys in
order of first appearance as the documented oracle, on both cover forms and with many distinct
tensor-id objects (growth), with and without the caller's columns."""

from __future__ import annotations

import random
from array import array
from typing import Any

import pytest

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank, PlacementFragment


def _oracle(fragments: list[Any], tensor_index: dict, ndim: list[int], routed: list[int], replicas: int) -> Any:
    tensor, cover, offsets, shapes, nbytes, keys = [], [], [], [], [], []
    ids: dict[int, int] = {}
    for f in fragments:
        t = tensor_index[f.tensor_id]
        slot = replicas if routed[t] else f.rank.dp % replicas
        key = t * (replicas + 1) + slot
        if key not in ids:
            ids[key] = len(keys)
            keys.append(key)
        tensor.append(t)
        cover.append(ids[key])
        offsets.extend(f.global_offset[: ndim[t]])
        shapes.extend(f.local_shape[: ndim[t]])
        nbytes.append(f.nbytes)
    packed = [array("q", column).tobytes() for column in (tensor, cover, offsets, shapes, nbytes)]
    return (*packed, keys)


def _case(tensors: int, per_tensor: int, dps: int, seed: int, copies: bool) -> tuple[list[Any], dict, list, list]:
    rnd = random.Random(seed)
    ranks = [ParallelRank(dp=d, tp=t) for d in range(dps) for t in range(per_tensor)]
    fragments = []
    for t in range(tensors):
        tid = f"t.{t}"
        for r in ranks:
            # with copies, every fragment carries its own (equal) tensor-id object
            own = "".join(list(tid)) if copies else tid
            fragments.append(
                PlacementFragment(tensor_id=own, global_offset=(r.tp, 0), local_shape=(1, 3), nbytes=6, rank=r)
            )
    rnd.shuffle(fragments)
    tensor_index = {f"t.{t}": t for t in range(tensors)}
    ndim = [2] * tensors
    routed = [rnd.randrange(2) for _ in range(tensors)]
    return fragments, tensor_index, ndim, routed


@pytest.mark.parametrize("copies", [False, True])
@pytest.mark.parametrize("replicas", [1, 2, 3, 50])
def test_pack_targets_equals_the_oracle(replicas: int, copies: bool) -> None:
    # 300 tensors x 4 fragments: replicas 50 makes the key range exceed the array bound (hash form)
    fragments, tensor_index, ndim, routed = _case(300, 2, 2, replicas, copies)
    want = _oracle(fragments, tensor_index, ndim, routed, replicas)
    nd = array("q", ndim).tobytes()
    rt = array("q", routed).tobytes()
    assert _native.pack_targets(fragments, tensor_index, nd, rt, replicas) == want
    tids = [f.tensor_id for f in fragments]
    dps = [f.rank.dp for f in fragments]
    assert _native.pack_targets(fragments, tensor_index, nd, rt, replicas, tids, dps) == want
    columns = _native.fragment_columns(fragments, PlacementFragment, ParallelRank)
    assert columns[4] is not None
    assert _native.pack_targets(fragments, tensor_index, nd, rt, replicas, tids, dps, columns[4]) == want


def test_pack_targets_unknown_tensor_declines() -> None:
    fragments, tensor_index, ndim, routed = _case(20, 2, 2, 7, True)
    del tensor_index["t.3"]
    remap = {tid: i for i, tid in enumerate(tensor_index)}
    got = _native.pack_targets(
        fragments, remap, array("q", ndim[:19]).tobytes(), array("q", routed[:19]).tobytes(), 2
    )
    assert got is None

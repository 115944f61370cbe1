"""``_native.tensor_columns`` reads the three maps by position (csrc/planobj.c ``tc_by_position``)
only when that is provably what looking each id up finds: exact dicts of exactly the ids'
count whose entry i has the key ``ids[i]`` (or an exact str equal to it), every id an exact str.
Anything else (a str-subclass key or id, a dict subclass, another order, an extra or a missing
key) is looked up as before. These tests compare the call with the Python loop it stands for,
and show with a key whose ``__eq__`` counts its calls that a forged key sends the call back to
the lookups (the position read never compares keys by Python code)."""

from __future__ import annotations

import gc
import random
from typing import Any, List, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layout_model import Layout, build_placement
from test_planner_oracle import placement_pairs

from mooncake.reshard import _native
from mooncake.reshard.weight._planner import core, ownership


def _oracle(ids: List[Any], sources: Any, targets: Any, signatures: Any) -> Any:
    """The Python loop ``tensor_columns`` stands for (dict lookups by key, as the C call
    makes them: ``dict.__getitem__`` / ``dict.get`` of the base class)."""
    ndims: List[int] = []
    itemsizes: List[Any] = []
    routed: List[bool] = []
    for i, tid in enumerate(ids):
        target = dict.__getitem__(targets, tid)
        source = dict.get(sources, tid)
        if source is None or core._compatibility_error(source, target) is not None:
            return ndims, itemsizes, routed, i
        ndims.append(len(target.global_shape))
        itemsizes.append(target.itemsize)
        routed.append(bool(dict.__getitem__(signatures, tid)[1]))
    return ndims, itemsizes, routed, len(ids)


def _decided(ids: List[Any], sources: Any, targets: Any, signatures: Any) -> Any:
    """What the planner decides: the C call, then its Python loop from the call's stop (the call
    also stops at the first id it does not decide without Python code: AUDIT5 F4)."""
    ndims, itemsizes, routed, stop = _native.tensor_columns(ids, sources, targets, signatures)
    rest = _oracle(ids[stop:], sources, targets, signatures)
    return ndims + rest[0], itemsizes + rest[1], routed + rest[2], stop + rest[3]


class _Desc:
    def __init__(self, **fields: Any) -> None:
        base = dict(tensor_id="x", layout_fingerprint="l", global_shape=(2, 3), dtype="f", itemsize=2, layer_id=None, expert_id=None)
        base.update(fields)
        self.__dict__.update(base)


class _CountingStr(str):
    """A str subclass key: equal to the exact str of its value, with counted comparisons."""

    calls = 0

    def __eq__(self, other: object) -> bool:
        type(self).calls += 1
        return str.__eq__(self, other)

    def __hash__(self) -> int:
        return str.__hash__(self)


def _maps(count: int) -> Tuple[List[str], dict, dict, dict]:
    ids = [f"t.{i}" for i in range(count)]
    descs = [_Desc(itemsize=1 + i % 3, global_shape=(2,) * (1 + i % 2)) for i in range(count)]
    sources = dict(zip(ids, descs))
    targets = dict(zip(ids, descs))
    signatures = {tid: ((), i % 2 == 0) for i, tid in enumerate(ids)}
    return ids, sources, targets, signatures


@settings(max_examples=60, deadline=None)
@given(placement_pairs(), st.randoms(use_true_random=False))
def test_by_position_equals_the_lookups(pair: Tuple[Layout, Layout], rnd: random.Random) -> None:
    """Catalog order (read by position) and a shuffled order (looked up) give the loop's
    columns; so do source keys that are other str objects of the same values."""
    source = build_placement(pair[0])
    target = build_placement(pair[1])
    sources = {t.tensor_id: t for t in source.tensors}
    targets = {t.tensor_id: t for t in target.tensors}
    signatures = ownership.tensor_signatures(sources)
    ids = list(targets)
    assert _native.tensor_columns(ids, sources, targets, signatures) == _oracle(ids, sources, targets, signatures)
    shuffled = list(ids)
    rnd.shuffle(shuffled)
    assert _native.tensor_columns(shuffled, sources, targets, signatures) == _oracle(
        shuffled, sources, targets, signatures
    )
    copies = {"".join(list(k)): v for k, v in sources.items()}  # equal keys, other objects
    assert _native.tensor_columns(ids, copies, targets, signatures) == _oracle(ids, copies, targets, signatures)


def test_a_str_subclass_key_is_looked_up() -> None:
    """A str-subclass key equal to its id (in any of the three maps, or as the id itself):
    not read by position, and not looked up in C either (its ``__eq__`` would run inside the
    pass: AUDIT5 F4): the call stops there and the Python loop decides, as before."""
    for where in ("sources", "targets", "signatures", "ids"):
        ids, sources, targets, signatures = _maps(40)
        forged = _CountingStr(ids[17])
        if where == "ids":
            ids[17] = forged
        else:
            victim = {"sources": sources, "targets": targets, "signatures": signatures}[where]
            rebuilt = {(forged if k == forged else k): v for k, v in victim.items()}
            victim.clear()
            victim.update(rebuilt)
        expected = _oracle(ids, sources, targets, signatures)
        _CountingStr.calls = 0
        stop = _native.tensor_columns(ids, sources, targets, signatures)[3]
        assert _CountingStr.calls == 0, where  # no comparison by Python code inside the call
        assert stop <= 17, where
        assert _decided(ids, sources, targets, signatures) == expected, where


def test_a_hash_colliding_foreign_key_is_looked_up() -> None:
    """An extra non-str key that claims equality with every id (and shares a hash): the map
    has another count of entries, so every id is looked up (and may find the forgery, as the
    loop does)."""

    class _Liar:
        def __init__(self, h: int) -> None:
            self.h = h

        def __hash__(self) -> int:
            return self.h

        def __eq__(self, other: object) -> bool:
            return True

    ids, sources, targets, signatures = _maps(30)
    other = _Desc(itemsize=7)
    sources[_Liar(hash(ids[3]))] = other
    assert _native.tensor_columns(ids, sources, targets, signatures) == _oracle(ids, sources, targets, signatures)
    # the same count of entries: one real key swapped for the liar
    ids, sources, targets, signatures = _maps(30)
    del sources[ids[29]]
    sources[_Liar(hash(ids[5]))] = other
    assert _native.tensor_columns(ids, sources, targets, signatures) == _oracle(ids, sources, targets, signatures)


def test_dict_subclasses_order_and_missing_keys_are_looked_up() -> None:
    class _Sub(dict):
        def __getitem__(self, key: Any) -> Any:  # never called: the C call reads the base dict
            raise AssertionError("called")

    ids, sources, targets, signatures = _maps(25)
    for maps in (
        (_Sub(sources), targets, signatures),
        (sources, _Sub(targets), signatures),
        (sources, targets, _Sub(signatures)),
    ):
        assert _decided(ids, *maps) == _oracle(ids, *maps)
    # another order of one map's entries
    reordered = dict(reversed(list(sources.items())))
    assert _native.tensor_columns(ids, reordered, targets, signatures) == _oracle(ids, reordered, targets, signatures)
    # a differing source descriptor stops the pass at its tensor (by position too)
    broken = dict(sources)
    broken[ids[11]] = _Desc(dtype="other")
    assert _native.tensor_columns(ids, broken, targets, signatures)[3] == 11
    # a missing source: stop; a missing target or signature: KeyError, as the loop
    missing = dict(sources)
    del missing[ids[8]]
    assert _native.tensor_columns(ids, missing, targets, signatures) == _oracle(ids, missing, targets, signatures)
    no_target = dict(targets)
    del no_target[ids[8]]
    with pytest.raises(KeyError):
        _native.tensor_columns(ids, sources, no_target, signatures)
    no_signature = dict(signatures)
    del no_signature[ids[8]]
    with pytest.raises(KeyError):
        _native.tensor_columns(ids, sources, targets, no_signature)
    # repeated ids cannot match a map's distinct keys by position: looked up
    twice = ids[:5] + ids[:5]
    small = {k: sources[k] for k in ids[:5]}
    assert _native.tensor_columns(twice, small, small, signatures) == _oracle(twice, small, small, signatures)


def test_maps_changed_during_the_pass_stay_safe() -> None:
    """A descriptor whose attribute read empties the maps (reached through the collector) in
    the middle of a pass read by position: the values were read at the start and are held, so
    the call completes on them (no freed object is used) and returns the columns of the maps
    as they were when it started."""
    ids, sources, targets, signatures = _maps(50)
    snapshot = (dict(sources), dict(targets), dict(signatures))

    live = {id(sources), id(targets), id(signatures)}  # addresses only: found again by the collector

    class _Hostile:
        def __init__(self) -> None:
            self.__dict__.update(_Desc().__dict__)

        def __getattribute__(self, name: str) -> Any:
            if name == "dtype":
                for obj in gc.get_objects():
                    if id(obj) in live:
                        obj.clear()
                gc.collect()
            return object.__getattribute__(self, name)

    hostile = _Hostile()
    sources[ids[10]] = hostile
    targets[ids[10]] = hostile
    snapshot[0][ids[10]] = hostile
    snapshot[1][ids[10]] = hostile
    got = _native.tensor_columns(ids, sources, targets, signatures)
    assert not sources and not targets and not signatures  # the hostile read ran
    assert got == _oracle(ids, *snapshot)
    assert got[3] == len(ids)

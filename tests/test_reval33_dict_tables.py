"""``revalidate_fragments`` finds an attested dict's item for a fragment whose cursor missed
(``rf_cursor_item``) in an identity table of that dict's items (``rf_table_item``: key object ->
value, built in one walk after 64 cursor misses in a dict of at least 1024 keys; its slots
prefetched a few fragments ahead), and probes the dict by hash only when the table does not hold
the fragment's very key object. Whatever the fragment order and whatever was edited in the dicts
before the call, or by a view call inside it (``rf_enter_all``: the tables are dropped and built
again), the pass decides exactly as with the probe: it agrees with the reference loop, and
declines every item that is not the fragment's own placement or binding object."""

from __future__ import annotations

import random
import sys
from typing import Any

import pytest
from test_native_revalidate import _FRAGMENT_TYPES, _fragments_reference, _identity, _scan
from test_reval28_dict_cursor import _agree, _another_object_declines, _both, _dicts, _in_dict_order, _plan

from mooncake.reshard import _native
from mooncake.reshard.weight._planner import bound_contracts as bc

_TABLE_MIN_KEYS = 1024  # rf_table_item's RF_TABLE_MIN_KEYS
_TABLE_MISSES = 64  # RF_TABLE_MISSES


@pytest.fixture(scope="module")
def large() -> tuple[Any, list[Any]]:
    """4 attestations of 1100 items per dict (4400 distinct fragments)."""
    plan = _plan(tensors=1100)
    frags = list(_scan(plan.operations)[0])
    sizes = {id(_dicts(f)[0]): len(_dicts(f)[0]) for f in frags}
    assert min(sizes.values()) >= _TABLE_MIN_KEYS
    return plan, frags


def _shuffled(frags: list[Any], seed: int = 33) -> list[Any]:
    frags = list(frags)
    random.Random(seed).shuffle(frags)
    assert _in_dict_order(frags) < len(frags) // 50  # the cursor misses: the tables decide
    return frags


@pytest.mark.parametrize("order", ["shuffled", "reversed", "interleaved", "repeated", "half"])
def test_any_fragment_order_agrees_with_the_reference(large: Any, order: str) -> None:
    plan, frags = large
    if order == "shuffled":
        frags = _shuffled(frags)
    elif order == "reversed":
        frags = frags[::-1]
    elif order == "interleaved":
        frags = frags[::2] + frags[1::2]
    elif order == "repeated":  # fragments met again after their dict's table was built
        shuffled = _shuffled(frags)
        frags = shuffled + shuffled[:500]
    elif order == "half":  # in order first (cursor), then shuffled (table), then in order again
        frags = frags[:1000] + _shuffled(frags[1000:3000]) + frags[3000:]
    native, reference = _agree(plan, frags)
    assert native is not None and reference is not None


@pytest.mark.parametrize("side", [0, 1])
@pytest.mark.parametrize("where", ["early", "late"])
def test_another_object_at_a_tabled_key_declines(large: Any, side: int, where: str) -> None:
    """A shuffled fragment's item (met before or after its dict's table is built) holds another
    fragment's placement or binding, or an equal copy of its own: declined, as the probe's
    identity check declines it."""
    plan, frags = large
    frags = _shuffled(frags)
    _another_object_declines(plan, frags, frags[10 if where == "early" else len(frags) - 3], side)


def test_equal_keys_that_are_other_objects_are_probed(large: Any) -> None:
    """Both dicts rebuilt with equal str keys that are other objects: the tables hold none of the
    fragments' key objects, the probe decides, and the call agrees with the reference."""
    plan, frags = large
    frags = _shuffled(frags)
    states = {id(f.attestation): f.attestation.__dict__ for f in frags}
    saved = {key: (state["_placement_dict"], state["_binding_dict"]) for key, state in states.items()}
    try:
        for state in states.values():
            for name in ("_placement_dict", "_binding_dict"):
                state[name] = {"".join([k[:1], k[1:]]): v for k, v in state[name].items()}
        native, reference = _agree(plan, frags)
        assert native is not None and reference is not None
        for key, state in states.items():
            state["_placement_dict"], state["_binding_dict"] = saved[key]
        # one key object of one dict only is another object: still found by the probe
        fragment = frags[-1]
        pfid = fragment.placement.placement_fragment_id
        placement_dict = _dicts(fragment)[0]
        value = placement_dict.pop(pfid)
        placement_dict["".join([pfid[:1], pfid[1:]])] = value
        try:
            native, reference = _agree(plan, frags)
            assert native is not None and reference is not None
        finally:
            del placement_dict[pfid]
            placement_dict[pfid] = value
    finally:
        for key, state in states.items():
            state["_placement_dict"], state["_binding_dict"] = saved[key]


def test_an_item_removed_declines(large: Any) -> None:
    plan, frags = large
    frags = _shuffled(frags)
    fragment = frags[len(frags) - 5]
    pfid = fragment.placement.placement_fragment_id
    for side in (0, 1):
        d = _dicts(fragment)[side]
        value = d.pop(pfid)
        try:
            native, reference = _both(plan, frags)
            assert native is None and reference is None
        finally:
            d[pfid] = value
    native, reference = _agree(plan, frags)
    assert native is not None


def _first_of_each(frags: list[Any]) -> list[Any]:
    """Attestations in their first fragment's order."""
    seen: dict[int, Any] = {}
    for f in frags:
        seen.setdefault(id(f.attestation), f.attestation)
    return list(seen.values())


@pytest.mark.parametrize("side", [0, 1])
def test_a_dict_edited_by_a_view_call_after_its_table_was_built(large: Any, side: int) -> None:
    """The first attestation's fragments come first, shuffled (its tables are built), then a
    fragment of an attestation whose view needs a call (``rf_enter_all``); that call puts another
    object at the key of a fragment of the first attestation that comes later. The tables built
    before the call are dropped: the pass declines, as the reference does on the edited dict."""
    plan, frags = large
    first, second = _first_of_each(frags)[:2]
    mine = _shuffled([f for f in frags if f.attestation is first])
    theirs = [f for f in frags if f.attestation is second]
    victim = mine[-1]
    ordered = mine[:-200] + theirs + mine[-200:]
    pfid = victim.placement.placement_fragment_id
    d = _dicts(victim)[side]
    own = d[pfid]
    other = next(f for f in mine if f is not victim)
    replacement = (other.placement, other.binding)[side]
    calls: list[Any] = []

    def view_of(attestation: Any) -> Any:
        calls.append(attestation)
        if attestation is second:
            d[pfid] = replacement
        return bc._attested_view(attestation)

    cached = second.__dict__.pop(bc._VIEW_KEY, None)
    try:
        with bc._ViewScope():
            native = _native.revalidate_fragments(ordered, *_FRAGMENT_TYPES, _identity(plan), view_of)
            assert second in calls  # (the call ran inside the pass)
            reference = _fragments_reference(ordered, _identity(plan))
        assert native is None and reference is None
        d[pfid] = own
        with bc._ViewScope():
            native, reference = _agree(plan, ordered)
        assert native is not None
    finally:
        d[pfid] = own
        if cached is not None:
            second.__dict__[bc._VIEW_KEY] = cached


def test_repeated_calls_agree_and_hold_nothing(large: Any) -> None:
    """Tables do not outlive their call (no reference kept: the dicts' refcounts are unchanged)."""
    plan, frags = large
    frags = _shuffled(frags, seed=7)
    dicts = _dicts(frags[0])
    _agree(plan, frags)  # (views cached on the attestations by a first call hold the dicts)
    before = [sys.getrefcount(d) for d in dicts]
    values = list(dicts[0].values())[:50]
    counts = [sys.getrefcount(v) for v in values]
    for _ in range(3):
        native, _reference = _agree(plan, frags)
        assert native is not None
        del native, _reference
    assert [sys.getrefcount(d) for d in dicts] == before
    assert [sys.getrefcount(v) for v in values] == counts


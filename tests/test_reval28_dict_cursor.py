"""``revalidate_fragments`` reads each attestation's ``_placement_dict`` / ``_binding_dict`` item
for a fragment through a per-dict cursor (``rf_cursor_item``: the item after the last one found,
taken when its key is the fragment's very placement fragment id object) before probing by hash.
Whatever order the fragments come in, and whatever was edited in the dicts before the call, the
pass decides exactly as with the probe: it agrees with the reference loop, and declines every
item that is not the fragment's own placement or binding object."""

from __future__ import annotations

import copy
import random
import sys
from typing import Any

import pytest
from test_native_revalidate import _bound_plan, _fragments_reference, _identity, _native_fragments, _scan

from mooncake.reshard.weight._planner import bound_contracts as bc


def _plan(tensors: int = 80) -> Any:
    """About 320 distinct fragments; the scan lists them in their attestations' dict order for
    the most part (checked by ``_in_dict_order``), so the cursor is what finds their items."""
    plan = _bound_plan(target_tp=2, shape=(8, 8), tensors=tuple(f"t{i:02d}" for i in range(tensors)))
    for op in plan.operations:
        for fragment in (op.source, op.target):
            object.__setattr__(fragment.binding, "worker_id", sys.intern(fragment.binding.worker_id))
    return plan


def _dicts(fragment: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    state = fragment.attestation.__dict__
    return state["_placement_dict"], state["_binding_dict"]


def _in_dict_order(frags: list[Any]) -> int:
    """How many fragments come right after the previous fragment of their attestation in its
    ``_placement_dict`` order, with the dict's very key object (cursor hits)."""
    cursor: dict[int, int] = {}
    hits = 0
    for fragment in frags:
        placement_dict = _dicts(fragment)[0]
        keys = list(placement_dict)
        at = cursor.get(id(placement_dict), 0)
        if at < len(keys) and keys[at] is fragment.placement.placement_fragment_id:
            hits += 1
            cursor[id(placement_dict)] = at + 1
    return hits


def _both(plan: Any, frags: list[Any]) -> tuple[Any, Any]:
    with bc._ViewScope():
        return _native_fragments(frags, _identity(plan)), _fragments_reference(frags, _identity(plan))


def _agree(plan: Any, frags: list[Any]) -> Any:
    native, reference = _both(plan, frags)
    if native is not None:
        assert reference is not None
        assert native[:3] == reference[:3]
    return native, reference


@pytest.fixture
def plan_frags() -> tuple[Any, list[Any]]:
    plan = _plan()
    frags = list(_scan(plan.operations)[0])
    assert len(frags) >= 256
    assert _in_dict_order(frags) >= len(frags) // 2  # the cursor path is the common one here
    return plan, frags


@pytest.mark.parametrize("order", ["scan", "reversed", "shuffled", "interleaved", "repeated"])
def test_any_fragment_order_agrees_with_the_reference(plan_frags: Any, order: str) -> None:
    plan, frags = plan_frags
    if order == "reversed":
        frags = frags[::-1]
    elif order == "shuffled":
        random.Random(28).shuffle(frags)
    elif order == "interleaved":
        frags = frags[::2] + frags[1::2]
    elif order == "repeated":  # a fragment twice: its second read finds the cursor past it
        frags = frags[:40] + frags[10:20] + frags[40:]
    native, reference = _agree(plan, frags)
    assert native is not None and reference is not None


@pytest.mark.parametrize("side", [0, 1])
@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_another_object_at_the_cursor_declines(plan_frags: Any, side: int, where: str) -> None:
    """The item the cursor reads (the fragment's own key, in place: the dict order is unchanged)
    holds another fragment's placement or binding, or an equal copy of its own: declined, as the
    probe's identity check declines it (the reference refuses the other fragment's object)."""
    plan, frags = plan_frags
    index = {"first": 0, "middle": len(frags) // 2, "last": len(frags) - 1}[where]
    _another_object_declines(plan, frags, frags[index], side, in_place=True)


def _another_object_declines(plan: Any, frags: list[Any], fragment: Any, side: int, in_place: bool = False) -> None:
    """Another fragment's placement or binding at the fragment's key of one of its dicts, then an
    equal copy of its own: both declined (the reference refuses the first, accepts the second);
    its own object put back: the call agrees with the reference."""
    pfid = fragment.placement.placement_fragment_id
    dicts = _dicts(fragment)
    own = dicts[side][pfid]
    other = next(f for f in frags if f.placement.placement_fragment_id != pfid and _dicts(f) == dicts)
    try:
        dicts[side][pfid] = (other.placement, other.binding)[side]
        if in_place:
            assert list(dicts[side]).index(pfid) == list(dicts[1 - side]).index(pfid)  # (still in place)
        native, reference = _both(plan, frags)
        assert native is None and reference is None
        equal = copy.copy(own)
        assert equal is not own and equal == own
        dicts[side][pfid] = equal
        native, reference = _both(plan, frags)
        assert native is None  # an equal object is not the fragment's own: declined
        assert reference is not None  # (the reference compares with ==)
        dicts[side][pfid] = own
        native, reference = _agree(plan, frags)
        assert native is not None
    finally:
        dicts[side][pfid] = own


def test_equal_keys_that_are_other_objects_are_probed(plan_frags: Any) -> None:
    """Both dicts rebuilt with equal str keys that are other objects (the cursor never finds the
    fragment's very key object): the probe decides, and the call agrees with the reference."""
    plan, frags = plan_frags
    states = {id(f.attestation): f.attestation.__dict__ for f in frags}
    saved = {key: (state["_placement_dict"], state["_binding_dict"]) for key, state in states.items()}
    try:
        for state in states.values():
            for name in ("_placement_dict", "_binding_dict"):
                rebuilt = {"".join([k[:1], k[1:]]): v for k, v in state[name].items()}
                assert all(a is not b for a, b in zip(rebuilt, state[name]))
                state[name] = rebuilt
        assert _in_dict_order(frags) == 0
        native, reference = _agree(plan, frags)
        assert native is not None and reference is not None
    finally:
        for key, state in states.items():
            state["_placement_dict"], state["_binding_dict"] = saved[key]


def test_items_moved_or_removed_before_the_call(plan_frags: Any) -> None:
    """Items deleted and put back (now last: holes in the dict's entries, another order), then one
    removed from one dict: the moved ones are still found, the removed one declines."""
    plan, frags = plan_frags
    fragment = frags[len(frags) // 3]
    dicts = _dicts(fragment)
    moved = [f.placement.placement_fragment_id for f in frags if _dicts(f) == dicts][::3]
    saved = [dict(d) for d in dicts]
    try:
        for pfid in moved:
            for d in dicts:
                d[pfid] = d.pop(pfid)
        native, reference = _agree(plan, frags)
        assert native is not None and reference is not None
        pfid = fragment.placement.placement_fragment_id
        for side in (0, 1):
            value = dicts[side].pop(pfid)
            native, reference = _both(plan, frags)
            assert native is None and reference is None
            dicts[side][pfid] = value
    finally:
        for d, items in zip(dicts, saved):
            d.clear()
            d.update(items)


def test_a_dict_edited_between_two_calls_is_read_again(plan_frags: Any) -> None:
    """No cursor outlives its call: a call after an edit of the item a previous call found
    declines."""
    plan, frags = plan_frags
    native, _ = _agree(plan, frags)
    assert native is not None
    fragment = frags[5]
    pfid = fragment.placement.placement_fragment_id
    placement_dict = _dicts(fragment)[0]
    own = placement_dict[pfid]
    other = next(f for f in frags if f.placement.placement_fragment_id != pfid)
    try:
        placement_dict[pfid] = other.placement
        native, reference = _both(plan, frags)
        assert native is None and reference is None
    finally:
        placement_dict[pfid] = own

"""``_native.revalidate_fragments`` shares one executor key tuple, rank tuple and route tuple
between the fragments whose tuples are built from the very same objects (instead of one
allocation per fragment): the lists are equal to the reference loop's, equal items are one
object, and every value is still read for every fragment on every call (an in-place edit between
two calls, or of one fragment of an executor, is seen)."""

from __future__ import annotations

import sys
from typing import Any

from test_native_revalidate import _bound_plan, _fragments_reference, _identity, _native_fragments, _scan

from mooncake.reshard.weight import ParallelRank
from mooncake.reshard.weight._planner import bound_contracts as bc


def _both(plan: Any, frags: list[Any]) -> tuple[Any, Any]:
    with bc._ViewScope():
        return _native_fragments(frags, _identity(plan)), _fragments_reference(frags, _identity(plan))


def _plan(tensors: int = 80) -> Any:
    """``tensors`` fragments per part (80: about 320 distinct fragments, past the size from which
    tuples are shared); the runtime fragments of one worker hold one worker_id str object (as
    adapters building bindings at scale do), so their key tuples are built from the same objects
    (replaced in place by an equal str: the plan is as valid as before)."""
    plan = _bound_plan(target_tp=2, shape=(8, 8), tensors=tuple(f"t{i:02d}" for i in range(tensors)))
    for op in plan.operations:
        for fragment in (op.source, op.target):
            binding = fragment.binding
            object.__setattr__(binding, "worker_id", sys.intern(binding.worker_id))
    return plan


def test_keys_and_routes_equal_the_reference_and_are_shared() -> None:
    plan = _plan()
    frags = _scan(plan.operations)[0]
    assert len(frags) >= 256
    native, reference = _both(plan, frags)
    assert native is not None and reference is not None
    assert native[:3] == reference[:3]
    for items in (native[0], native[1]):  # keys, routes: one object per distinct value
        objects: dict[Any, int] = {}
        for item in items:
            assert objects.setdefault(item, id(item)) == id(item)
        assert len(objects) < len(items)
    rank_tuples = {key[-1] for key in native[0]}
    assert len({id(key[-1]) for key in native[0]}) == len(rank_tuples)


def test_small_plans_share_nothing_and_agree() -> None:
    plan = _plan(tensors=5)
    frags = _scan(plan.operations)[0]
    assert len(frags) < 256
    native, reference = _both(plan, frags)
    assert native is not None and reference is not None
    assert native[:3] == reference[:3]
    assert len({id(key) for key in native[0]}) == len(native[0])


def test_in_place_rank_edits_are_read_on_every_call_and_every_fragment() -> None:
    plan = _plan()
    frags = _scan(plan.operations)[0]
    before, _ = _both(plan, frags)
    # Give one fragment (one whose key another fragment shares) a rank of its own, edited in place.
    index = next(i for i in range(1, len(frags)) if any(before[0][i] is key for key in before[0][:i]))
    placement = frags[index].placement
    original = placement.rank
    forged = object.__new__(ParallelRank)
    forged.__dict__.update(original.__dict__)
    object.__setattr__(placement, "rank", forged)
    try:
        object.__setattr__(forged, "dp", original.dp + 7)
        native, reference = _both(plan, frags)
        if native is not None:  # (the attested placement differs now: the call may decline)
            assert reference is not None and native[:3] == reference[:3]
        # The same objects, a rank field replaced by an equal int: equal keys again.
        object.__setattr__(forged, "dp", int(str(original.dp)))
        native, reference = _both(plan, frags)
        assert native is not None and reference is not None
        assert native[:3] == reference[:3]
    finally:
        object.__setattr__(placement, "rank", original)
    after, _ = _both(plan, frags)
    assert after[:3] == before[:3]

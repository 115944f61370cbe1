"""Step 4 of spec §11.1 (candidate groups and their representatives) for placement sources:
the one-pass selection ``core._placed_members`` picks exactly what the spec-shaped
``core._members_exact`` picks (same fragment objects, same order per cover) on random placement
pairs and on every known-answer case, and the planner really uses it."""

from __future__ import annotations

from typing import Any, Callable, List, Tuple

from hypothesis import given, settings

import known_answers
from layout_model import Layout, build_placement
from test_planner_oracle import placement_pairs

from mooncake.reshard.weight._planner import core
from mooncake.reshard.weight.planner import plan_placement_transfer, plan_placement_transfer_to_local_target


def _outcome(call: Callable[[], Any]) -> Any:
    try:
        return ("ok", call())
    except ValueError as exc:
        return ("error", str(exc))


def _same_members(fast: Callable[..., None], covers: Any, inventory: Any, rest: Tuple[Any, ...]) -> List[List[Any]]:
    """``fast`` and ``core._members_exact`` fill one member list per cover with the very same
    fragment objects in the same order from ``inventory``; returns the fast members."""
    exact_members: List[List[Any]] = [[] for _ in covers]
    fast_members: List[List[Any]] = [[] for _ in covers]
    core._members_exact(exact_members, inventory, *rest)
    fast(fast_members, inventory, *rest)
    assert [[id(f) for f in cover] for cover in fast_members] == [[id(f) for f in cover] for cover in exact_members]
    return fast_members


def _compare(plan: Callable[[], Any]) -> int:
    """Run ``plan`` with the fast selection (recording its inputs), check that the exact
    selection picks identical members from those inputs and that a plan built with the exact
    selection is equal; returns how often the fast selection ran."""
    calls: List[Tuple[Any, ...]] = []
    fast = core._placed_members
    native = core._select_placed_native
    with_native = _outcome(plan)  # the planner's C selection (tests/test_plan_speed_native.py)

    def spy(*args: Any) -> None:
        calls.append(args)
        fast(*args)

    # The Python one-pass selection runs when the C selection declines (returns None).
    core._select_placed_native = lambda *args: None
    core._placed_members = spy
    try:
        got = _outcome(plan)
    finally:
        core._placed_members = fast
        core._select_placed_native = native
    assert got == with_native
    for args in calls:
        _same_members(fast, args[0], args[1], args[2:])
        # Any inventory order (the minimum key wins, groups in first-occurrence order).
        for order in (list(reversed(args[1])), sorted(args[1], key=lambda f: f.placement_fragment_id)):
            fast_members = _same_members(fast, args[0], order, args[2:])
        assert any(fast_members) or not args[4]
    core._placed_members = core._members_exact
    core._select_placed_native = lambda *args: None
    try:
        expected = _outcome(plan)
    finally:
        core._placed_members = fast
        core._select_placed_native = native
    assert got == expected
    return len(calls)


@settings(max_examples=150, deadline=None)
@given(placement_pairs())
def test_one_pass_selection_equals_the_exact_selection(pair: Tuple[Layout, Layout]) -> None:
    source = build_placement(pair[0])
    target = build_placement(pair[1])
    assert _compare(lambda: plan_placement_transfer(source, target)) == 1
    participant = target.parts[0].participant_id
    _compare(lambda: plan_placement_transfer_to_local_target(source, target, participant))


def test_one_pass_selection_on_the_known_answer_cases() -> None:
    ran = 0
    for name in known_answers.placement_case_names():
        source, target = known_answers.source_placement(name), known_answers.target_placement(name)
        ran += _compare(lambda: plan_placement_transfer(source, target))
    assert ran > 0



def test_planning_pauses_the_collector_through_the_shared_pause() -> None:
    import gc

    from mooncake.reshard._collector import collector_paused

    name = known_answers.case_names()[0]
    source = known_answers.source_placement(name)
    target = known_answers.target_placement(name)
    seen: List[bool] = []
    fast = core._placed_members

    def spy(*args: Any) -> None:
        seen.append(gc.isenabled())
        fast(*args)

    enabled = gc.isenabled()
    gc.enable()
    native = core._select_placed_native
    core._select_placed_native = lambda *args: None  # the Python selection runs (and is spied)
    core._placed_members = spy
    try:
        plan_placement_transfer(source, target)
        assert seen == [False] and gc.isenabled()
        with collector_paused():  # nested inside another user: stays paused afterwards
            plan_placement_transfer(source, target)
            assert not gc.isenabled()
        assert seen == [False, False] and gc.isenabled()
    finally:
        core._placed_members = fast
        core._select_placed_native = native
        if not enabled:
            gc.disable()

"""The planner's exact target packing (``pack_targets`` declining) and its routing per tensor
(issue 5, session 16: the routing is kept as a list in ``tensor_index`` order and turned into a map
only on this path; ``_select_placed_native`` takes one owner-kinds tuple for every tensor when they
share a signature and no per-tensor DP owner when none is DP-owned).

On random placement pairs and the known-answer cases, a plan made with ``pack_targets`` declining
(every target packed in Python) must equal the plan made with it, and both the Python selection's
(``_select_placed_native`` declining)."""

from __future__ import annotations

from typing import Any, Callable, Tuple

from hypothesis import given, settings

import known_answers
from layout_model import Layout, build_placement
from test_planner_oracle import placement_pairs

from mooncake.reshard import _native
from mooncake.reshard.weight._planner import core
from mooncake.reshard.weight.planner import plan_placement_transfer, plan_placement_transfer_to_local_target


def _outcome(call: Callable[[], Any]) -> Any:
    try:
        return ("ok", call())
    except ValueError as exc:
        return ("error", str(exc))


def _with(call: Callable[[], Any], *, pack: bool, select: bool) -> Any:
    real_pack, real_select = _native.pack_targets, core._select_placed_native
    if not pack:
        _native.pack_targets = lambda *args: None  # type: ignore[assignment]
    if not select:
        core._select_placed_native = lambda *args: None  # type: ignore[assignment]
    try:
        return _outcome(call)
    finally:
        _native.pack_targets = real_pack  # type: ignore[assignment]
        core._select_placed_native = real_select


def _same(call: Callable[[], Any]) -> None:
    fast = _with(call, pack=True, select=True)
    assert _with(call, pack=False, select=True) == fast
    assert _with(call, pack=True, select=False) == fast
    assert _with(call, pack=False, select=False) == fast


@settings(max_examples=100, deadline=None)
@given(placement_pairs())
def test_exact_packing_and_selection_equal_the_fast_paths(pair: Tuple[Layout, Layout]) -> None:
    source = build_placement(pair[0])
    target = build_placement(pair[1])
    _same(lambda: plan_placement_transfer(source, target))
    participant = target.parts[0].participant_id
    _same(lambda: plan_placement_transfer_to_local_target(source, target, participant))


def test_exact_packing_on_the_known_answer_cases() -> None:
    names = known_answers.placement_case_names()
    assert names
    for name in names:
        source, target = known_answers.source_placement(name), known_answers.target_placement(name)
        _same(lambda: plan_placement_transfer(source, target))

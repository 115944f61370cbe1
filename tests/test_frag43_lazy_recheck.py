"""FRAG43: ``revalidate_fragments`` checks the attested dicts again after ``rf_enter_all``'s view
calls lazily (``rf_side_plain``): a dict is walked before its first probe (only from its cursor on
when every read since the calls was an in-order hit) and, when no probe needed it, at the end of
the pass; no longer all of them right after the calls.

A key planted at a later attestation's view call (inside ``rf_enter_all``) in an earlier or the
same attestation's dicts, at the start, the middle or past the end of the dict's walk: the pass
still declines (the rules decide, accepting the equal plan) and no native code calls the planted
key's ``__eq__``. A key planted past the end of an in-order dict is met by no cursor and no probe:
only the end-of-pass check finds it (a version without that check accepts: the decline assertion
fails there).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import native_watch
from forge_helpers import profiled_outcome
from test_reval32_attested_walks import Recorded
from test_sound26_view_callout_keys import ViewCallOf, _attestations, _plan

from mooncake.reshard.weight._planner import bound_contracts


def _with_key_at(mapping: dict[str, Any], position: int) -> dict[str, Any]:
    """``mapping``'s items with a Recorded key inserted at walk position ``position`` (past the end
    when ``position == len(mapping)``), hashing as the key at that position (the last key for
    past the end)."""
    items = list(mapping.items())
    result: dict[Any, Any] = {}
    for index, (key, value) in enumerate(items):
        if index == position:
            result[Recorded(f"{key}~planted")] = None
        result[key] = value
    if position == len(items):
        result[Recorded(f"{items[-1][0]}~planted")] = None
    return result


def _run(pair: tuple[int, int] | None, field: str, where: str) -> tuple[Any, Any, list[Any], list[bool]]:
    plan, _memory = _plan()
    attestations = _attestations(plan)
    assert len(attestations) == 4  # (the setup: two workers per side)
    for attestation in attestations:  # no current cached view: the pass calls view_of
        vars(attestation).pop("_attested_view", None)
    planted: list[bool] = []
    predicate = None
    if pair is not None:
        earlier, later = attestations[pair[0]], attestations[pair[1]]
        predicate = ViewCallOf(plan, later)
        mapping = vars(earlier)[field]
        size = len(mapping)
        position = {"start": 0, "middle": size // 2, "end": size}[where]
        items = _with_key_at(mapping, position)
    verdicts: list[Any] = []
    original = bound_contracts._fast_revalidate_live

    def recording(*args: Any, **kwargs: Any) -> Any:
        verdict = original(*args, **kwargs)
        verdicts.append(verdict)
        return verdict

    watch = native_watch.NativeWatch()

    def hook(frame: Any, event: str, arg: Any) -> None:
        watch(frame, event, arg)
        if predicate is not None and predicate(frame, event, arg) and not planted:
            planted.append(True)
            mapping.clear()
            mapping.update(items)

    native_watch._ACTIVE.append(watch)
    bound_contracts._fast_revalidate_live = recording
    try:
        result = profiled_outcome(hook, lambda: dataclasses.replace(plan))
    finally:
        bound_contracts._fast_revalidate_live = original
        native_watch._ACTIVE.pop()
    return plan, result, verdicts, planted, watch.hits


def test_the_unplanted_pass_is_accepted_by_the_fast_path() -> None:
    plan, result, verdicts, _planted, hits = _run(None, "_placement_dict", "start")
    assert verdicts == [True]  # (the setup: the fast path decides this plan)
    assert hits == []
    assert not isinstance(result, tuple) and result == plan


# (a, b): planted in attestation a's dict at b's view call; b's call is made inside rf_enter_all
# (the pass's first view call is made before it: b >= 1 in build order is enough for every a)
_PAIRS = [(0, 1), (0, 3), (1, 1), (2, 3), (3, 3), (3, 1)]


@pytest.mark.parametrize("where", ["start", "middle", "end"])
@pytest.mark.parametrize("field", ["_placement_dict", "_binding_dict"])
@pytest.mark.parametrize("pair", _PAIRS, ids=[f"{a}-at-{b}" for a, b in _PAIRS])
def test_a_key_planted_inside_enter_all_declines_the_pass(pair: tuple[int, int], field: str, where: str) -> None:
    plan, result, verdicts, planted, hits = _run(pair, field, where)
    if not planted:
        pytest.skip("the pass made this view call before rf_enter_all")  # (build order: ViewCallOf)
    assert hits == []  # no native probe met the planted key
    assert verdicts == [False]  # the fast path declined: the rules decided
    assert not isinstance(result, tuple) and result == plan

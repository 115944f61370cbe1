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
from test_reval32_attested_walks import _watched_index, _with_foreign_key
from test_sound26_view_callout_keys import ViewCallOf, _attestations, _plan

from mooncake.reshard.weight._planner import bound_contracts


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
        items = _with_foreign_key(mapping, position)
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


# -- ai_build (attested_index, and the views the pass builds): its placement dict checked in the
# walk its loop makes (cursor hits), the rest before the first probe or when the loop ends ------

from hypothesis import given, settings, strategies as st  # noqa: E402

from test_reval32_attested_walks import _plan as _sized_plan  # noqa: E402
from test_native_revalidate_fastpaths import _forged_attestation, _index, _reference  # noqa: E402


def _in_order_attestation() -> Any:
    """An attestation whose evidence lists each fragment once, in its placement dict's order
    (every read of the index's loop a cursor hit)."""
    attestation = max(_attestations(_sized_plan(12)), key=lambda a: len(a.evidence.fragments))
    order = {key: k for k, key in enumerate(attestation._placement_dict)}
    fragments = tuple(sorted(attestation.evidence.fragments, key=lambda f: order[f.placement_fragment_id]))
    assert len(fragments) >= 9 and len(set(f.placement_fragment_id for f in fragments)) == len(fragments)
    return _forged_attestation(attestation, fragments=fragments)


@pytest.mark.parametrize("extra", [0, 1, 5])
def test_index_of_an_in_order_attestation_declines_a_foreign_key_anywhere(extra: int) -> None:
    """Past the end of the evidence's ids (``extra`` unrelated keys after them): no cursor hit and
    no probe meets the key; only the check when the loop ends does (a build without it accepts)."""
    attestation = _in_order_attestation()
    base = dict(attestation._placement_dict)
    for k in range(extra):
        base[f"extra-{k}"] = None
    plain = _forged_attestation(attestation, placement_dict=base)
    assert _index(plain) == _reference(plain)  # (the setup: plain, accepted)
    for position in range(len(base) + 1):
        forged = _forged_attestation(attestation, placement_dict=_with_foreign_key(base, position))
        result, hits = _watched_index(forged)
        assert result is None, position
        assert hits == [], position


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_index_equals_the_reference_in_any_order(data: st.DataObject) -> None:
    """Evidence ids in any order, repeated or dropped, some entries None, unrelated keys
    anywhere; plain dicts (the index equals the reference) and a foreign key (None)."""
    attestation = _in_order_attestation()
    fragments = list(attestation.evidence.fragments)
    chosen = data.draw(st.lists(st.sampled_from(fragments), min_size=1, max_size=2 * len(fragments)))
    items = list(attestation._placement_dict.items())
    nones = data.draw(st.sets(st.integers(0, len(items) - 1)))
    mapping: dict[Any, Any] = {}
    for k, (key, value) in enumerate(items):
        if data.draw(st.booleans()) and len(mapping) % 3 == 0:
            mapping[f"unrelated-{k}"] = object()
        mapping[key] = None if k in nones else value
    foreign = data.draw(st.one_of(st.none(), st.integers(0, len(mapping))))
    if foreign is not None:
        mapping = _with_foreign_key(mapping, foreign)
    forged = _forged_attestation(attestation, fragments=tuple(chosen), placement_dict=mapping)
    result, hits = _watched_index(forged)
    assert hits == []
    if foreign is not None:
        assert result is None
    else:
        assert result == _reference(forged)

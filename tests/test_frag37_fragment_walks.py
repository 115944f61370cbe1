"""FRAG37 (session 37): ``_native.revalidate_fragments``

- takes an attestation's fields (placement, _placement_dict, _binding_dict, _attested_view,
  evidence) and a rank's (dp, tp, pp, ep) in the walk that checks the instance dict
  (plain_dict.h pd_instance_values), by identity with the interned field name, and looks up any
  name not met by identity;
- checks the identity of a placement shared by several attestations once per window in which no
  Python code ran (rf_proved): a view call (Python code) empties it, so a placement changed by a
  view call is checked again for every attestation whose entry is made after it.

The call is captured from a real ``dataclasses.replace`` of a bound plan (8 fragments, 4
attestations, 2 placements) and repeated on edited state. Oracles: the same edit under the
interned key (the lookup the pass made before); for the view-call window, a model of the
pass's order (entries made in fragment order, the first view call allowed while no entry
exists, then every remaining attestation's at once), each entry checking its placement's
identity when it is made -- what the pass did before FRAG37 for every attestation.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

from hypothesis import given, settings
from hypothesis import strategies as st

from forge_helpers import CollidingKey, rekeyed_answers
from forge_helpers import rekey_dict as _rekey
from forge_helpers import restore_dict as _restore
from forge_helpers import sized_world

from mooncake.reshard import _native
from mooncake.reshard.weight import bind_logical_transfer_plan

# revalidate_fragments' positional arguments
_FRAGMENTS, _VIEW_OF, _VIEWS = 0, 7, 11


def _captured() -> tuple[Any, tuple[Any, ...]]:
    """A bound plan and the arguments of the revalidate_fragments call its replace() makes."""
    logical, targets, sources, _memory = sized_world(2)
    plan = bind_logical_transfer_plan(logical, targets, source_bindings=sources)
    seen: list[tuple[Any, ...]] = []
    real = _native.revalidate_fragments

    def spy(*args: Any) -> Any:
        seen.append(args)
        return real(*args)

    _native.revalidate_fragments = spy
    try:
        # (the first views only mark their attestation; the cache is kept from the second on)
        for _ in range(3):
            dataclasses.replace(plan)
    finally:
        _native.revalidate_fragments = real
    assert seen, "the fast path calls revalidate_fragments"
    return plan, seen[-1]


def _outcome(args: tuple[Any, ...]) -> Any:
    try:
        result = _native.revalidate_fragments(*args)
    except Exception as error:  # noqa: BLE001 -- the outcome is compared, whatever it is
        return ("raised", type(error).__name__, str(error))
    if result is None:
        return None
    keys, routes, runtime_ids, attested = result
    return ("ok", keys, routes, runtime_ids, sorted(attested))


def _attestations(args: tuple[Any, ...]) -> list[Any]:
    seen: dict[int, Any] = {}
    for fragment in args[_FRAGMENTS]:
        seen.setdefault(id(fragment.attestation), fragment.attestation)
    return list(seen.values())


def _objects(args: tuple[Any, ...]) -> dict[str, tuple[Any, str, Any]]:
    """Objects whose instance dict the walk reads: (object, a read field, a wrong value)."""
    first, last = _attestations(args)[0], _attestations(args)[-1]
    fragment = args[_FRAGMENTS][0]
    return {
        "attestation-placement": (first, "placement", None),
        "attestation-placement-dict": (first, "_placement_dict", []),
        "attestation-binding-dict": (last, "_binding_dict", []),
        "attestation-view": (first, "_attested_view", ()),
        "attestation-evidence": (last, "evidence", None),
        "rank": (fragment.placement.rank, "tp", "0"),
        "rank-dp": (fragment.placement.rank, "ep", None),
    }


def test_fresh_keys_are_found():
    _plan, args = _captured()
    expected = _outcome(args)
    assert expected is not None and expected[0] == "ok"
    for name, (obj, _field, _wrong) in _objects(args).items():
        items = _rekey(obj, True)
        try:
            assert _outcome(args) == expected, name
        finally:
            _restore(obj, items)
    assert _outcome(args) == expected


def test_wrong_value_under_fresh_key_as_under_interned():
    _plan, args = _captured()
    expected = _outcome(args)
    for name, (obj, field, wrong) in _objects(args).items():
        answers = rekeyed_answers(obj, lambda: _outcome(args), edit=(field, wrong))
        assert answers[0] == answers[1], (name, answers)
        if name != "attestation-view":  # (a cache entry not the view's: rebuilt by view_of)
            assert answers[0] != expected, name
    assert _outcome(args) == expected


def test_colliding_key_runs_no_code_and_agrees_with_interned():
    _plan, args = _captured()
    expected = _outcome(args)
    for name, (obj, field, _wrong) in _objects(args).items():
        answers = rekeyed_answers(obj, lambda: _outcome(args), planted=CollidingKey(field))
        assert answers[0] == answers[1], (name, answers)
        assert answers[0] != expected, name
    assert _outcome(args) == expected


def test_shared_placement_forged_declines_for_every_attestation():
    _plan, args = _captured()
    attestations = _attestations(args)
    placements = {id(a.placement): a.placement for a in attestations}
    assert len(placements) < len(attestations), "attestations share a placement"
    for placement in placements.values():
        for field in ("resource_id", "revision", "weight_generation"):
            state = placement.__dict__
            saved = state[field]
            state[field] = saved + 1 if field == "weight_generation" else saved + "-forged"
            try:
                assert _outcome(args) is None, field
            finally:
                state[field] = saved
    assert _outcome(args) is not None


def _expected_decline(args: tuple[Any, ...], order: list[int], forger: Optional[Any], target: Any) -> bool:
    """Model of the pass before FRAG37: True when it declines. Its entries are made in the order
    the attestations first appear in the fragments (``order``), before any view call and then
    all at once (rf_enter_all), each checking its placement's identity before its own view call.
    The view call of ``forger`` (or None: no call forged) forged ``target``'s identity: every
    entry made after the forger's with that placement is refused."""
    first: list[Any] = []
    for k in order:
        attestation = args[_FRAGMENTS][k].attestation
        if all(attestation is not seen for seen in first):
            first.append(attestation)
    if forger is None:
        return False
    # AUDIT38: the identities are checked once every view call has run (rf_identities), so a
    # placement forged by any view call is refused, even when every entry with it was made
    # before the forging call (the pass used to accept that state, which the rules refuse:
    # tests/test_audit3838_fragment_reads.py)
    return any(a.placement is target for a in first)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_view_call_between_attestations_sharing_a_placement(data):
    _plan, args = _captured()
    attestations = _attestations(args)
    placements = list({id(a.placement): a.placement for a in attestations}.values())
    n = len(args[_FRAGMENTS])
    order = data.draw(st.permutations(range(n)))
    stale = data.draw(st.sets(st.sampled_from(range(len(attestations)))))
    target = data.draw(st.sampled_from(placements))
    at_call = data.draw(st.integers(0, len(attestations) - 1))
    real_view_of = args[_VIEW_OF]
    saved = target.__dict__["revision"]
    calls: list[Any] = []
    forger: list[Any] = []

    def view_of(attestation: Any) -> Any:
        # Python code run by the pass's view call: forges another placement's identity (its
        # own view is then built from unforged state)
        if len(calls) == at_call and attestation.placement is not target:
            target.__dict__["revision"] = saved + "-forged"
            forger.append(attestation)
        calls.append(attestation)
        return real_view_of(attestation)

    call = list(args)
    call[_FRAGMENTS] = [args[_FRAGMENTS][k] for k in order]
    call[_VIEW_OF] = view_of
    call[_VIEWS] = None
    for k in stale:
        attestations[k].__dict__.pop("_attested_view", None)
    try:
        got = _outcome(tuple(call))
    finally:
        target.__dict__["revision"] = saved
    if _expected_decline(args, order, forger[0] if forger else None, target):
        assert got is None, (order, stale, at_call)
    else:
        assert got is not None and got[0] == "ok", (order, stale, at_call, got)


def _fresh_str(text: str) -> str:
    made = "".join(list(text))
    assert made == text and made is not text
    return made


def _edited_by_view_call(revision: Any) -> tuple[Any, list[Any], Any]:
    """The pinned case: attestation A (placement P) entered first with its exact cached view,
    then B (placement Q), whose view is not cached, calls view_of, which sets P's revision to
    ``revision(saved)``; C (placement P, cached view) is entered after. Returns (the outcome, the
    attestations view_of was called for, (a, b, c)); P restored."""
    _plan, args = _captured()
    attestations = _attestations(args)
    a = attestations[0]
    b = next(x for x in attestations if x.placement is not a.placement)
    c = next(x for x in attestations if x is not a and x.placement is a.placement)
    assert a.__dict__["_attested_view"][4][1] is c.__dict__["_attested_view"][4][1]  # (shared)
    fragments = args[_FRAGMENTS]

    def rank(k: int) -> int:
        return next((r for r, x in enumerate((a, b, c)) if x is fragments[k].attestation), 3)

    target = a.placement
    saved = target.__dict__["revision"]
    real_view_of = args[_VIEW_OF]
    calls: list[Any] = []

    def view_of(attestation: Any) -> Any:
        calls.append(attestation)
        if attestation is b:
            target.__dict__["revision"] = revision(saved)
        return real_view_of(attestation)

    call = list(args)
    call[_FRAGMENTS] = [fragments[k] for k in sorted(range(len(fragments)), key=rank)]
    call[_VIEW_OF] = view_of
    call[_VIEWS] = None
    b.__dict__.pop("_attested_view", None)
    try:
        got = _outcome(tuple(call))
    finally:
        target.__dict__["revision"] = saved
    return got, calls, (a, b, c)


def test_view_call_forging_a_proved_placement_declines_later_entries():
    # C's placement identity, proved for A in this call, is read again after B's view call
    got, calls, (a, b, _c) = _edited_by_view_call(lambda saved: saved + "-forged")
    assert got is None
    # (A's cached view is exact: no call. AUDIT38: the identities are checked once every view
    # call has run, so C's view, stale with P edited, is called for before C is refused)
    assert calls[:1] == [b] and a not in calls, calls


def test_view_call_editing_a_shared_dep_rebuilds_later_views():
    # the deps pair of P, found unchanged for A in this call (rf_proved keeps it), is walked
    # again for C after B's view call edited P in place (an equal value, another object: the
    # identity still holds): C's cached view is stale and C calls for its view
    got, calls, (_a, b, c) = _edited_by_view_call(_fresh_str)
    assert got is not None and got[0] == "ok"
    assert calls[:2] == [b, c], calls


def test_no_reference_kept_or_lost():
    # rf_proved holds its placements during the call only (a lost or kept reference would show
    # in the placements' reference counts after repeated calls, with and without view calls)
    import sys

    _plan, args = _captured()
    attestations = _attestations(args)
    placements = list({id(a.placement): a.placement for a in attestations}.values())
    call = list(args)
    call[_VIEWS] = None
    for stale in (False, True):
        counts = []
        for _ in range(6):
            if stale:
                attestations[-1].__dict__.pop("_attested_view", None)
            assert _outcome(tuple(call)) is not None
            counts.append([sys.getrefcount(p) for p in placements])
        # (the first rebuilt views settle the caches)
        assert counts[2:] == [counts[2]] * 4, counts


def test_view_deps_share_a_placement_snapshot_while_unchanged():
    from mooncake.reshard.weight._planner import bound_contracts as bc

    _plan, args = _captured()
    attestations = _attestations(args)
    a = attestations[0]
    c = next(x for x in attestations if x is not a and x.placement is a.placement)
    placement = a.placement
    # outside a revalidation: nothing shared
    first, second = bc._view_deps(a), bc._view_deps(c)
    assert first is not None and second is not None
    assert first[0] is second[0] is placement and first[1] is not second[1] and first[1] == second[1]
    with bc._ViewScope():
        first, second = bc._view_deps(a), bc._view_deps(c)
        assert first is not None and second is not None
        assert first[1] is second[1] and first[3] is second[3]  # the placement and its parts dict
        saved = placement.__dict__["revision"]
        placement.__dict__["revision"] = _fresh_str(saved)
        try:
            third = bc._view_deps(c)
            assert third is not None and third[1] is not first[1]
            assert not _native.deps_unchanged(first[:2]) and _native.deps_unchanged(third[:2])
            assert third[3] is first[3]  # (the parts dict itself unchanged)
        finally:
            placement.__dict__["revision"] = saved
    assert bc._VIEW_STATE.snapshots is None

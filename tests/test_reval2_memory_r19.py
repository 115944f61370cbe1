"""Session 19, round 2 (bind's peak memory, the revalidation's share).

The attested views built inside the revalidation of a plan binding has just built (binding's
snapshot objects given) keep ``attested_pfids`` as a tuple of the distinct ids in ``(hash, text)``
order instead of a set (``bc._compact_pfids``; read only by ``revalidate_side``'s membership test,
which searches it by hash). Both forms must decide alike on every plan and mutation, a tuple
missing an id or holding one more must decide as the equal set would, a key that is not an exact
str declines with the tuple. ``revalidate_side`` visits the distinct fragments in position order
(no array of them) and ``revalidate_spaces`` reads the fragments list in place: the same
decisions, and a list emptied by a value's own attribute read is an error, not a crash.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mooncake.reshard import _native
from mooncake.reshard.contracts.fragments import RuntimeBindingFragment
from mooncake.reshard.weight import ExecutorTransferPlan, ParallelRank
from mooncake.reshard.weight._planner import bound_contracts as bc
from mooncake.reshard.weight._planner.bound_contracts import (
    PlacementFragment as _PF,
    RuntimeBindingAttestation,
    RuntimeBindingEvidence,
    RuntimeFragmentSnapshot,
)
from mooncake.reshard.weight.placement import WeightPlacementManifest

from test_native_revalidate import (
    _MUTATIONS,
    _PLANS,
    _identity,
    _mutated,
    _native_fragments,
    _record_fast_path,
    _scan,
)

_VIEW_ARGS = (RuntimeBindingAttestation, RuntimeBindingEvidence, RuntimeBindingFragment, WeightPlacementManifest)


def _call(function: Any, *args: Any) -> Any:
    try:
        return function(*args)
    except Exception as error:  # the fast path declines on any exception
        return type(error)


def _attestations(plan: Any) -> list[Any]:
    found: dict[int, Any] = {}
    for op in plan.operations:
        for fragment in (op.source, op.target):
            found[id(fragment.attestation)] = fragment.attestation
    return list(found.values())


def _objects(attestation: Any) -> Any:
    cache = attestation.__dict__.get("_derived_cache")
    return None if type(cache) is not tuple or len(cache) != 3 else cache[2].get("snapshots_by_worker")


def _sorted_views(plan: Any) -> list[tuple[Any, Any, Any, Any]]:
    """``(attestation, objects, attested_index, attested_view)`` for each attestation of ``plan``
    that carries binding's snapshot objects, after checking that the view's attested ids are the
    index's ids as a tuple sorted by ``(hash, text)``, which is ``bc._compact_pfids``' order."""
    found = []
    for attestation in _attestations(plan):
        objects = _objects(attestation)
        if objects is None:
            continue
        index = _native.attested_index(*_VIEW_ARGS[:3], attestation)
        built = _native.attested_view(bc._AttestedView, attestation, *_VIEW_ARGS, objects)
        assert index is not None and built is not None
        assert type(built.attested_pfids) is tuple
        assert list(built.attested_pfids) == sorted(index[0], key=lambda text: (hash(text), text))
        assert built.attested_pfids == bc._compact_pfids(index[0])
        found.append((attestation, objects, index, built))
    return found


def test_compact_pfids_form() -> None:
    texts = {f"pf-{i}" for i in range(300)}
    compact = bc._compact_pfids(texts)
    assert type(compact) is tuple and set(compact) == texts and len(compact) == len(texts)
    assert list(compact) == sorted(texts, key=lambda text: (hash(text), text))
    assert bc._compact_pfids(set()) == ()
    odd = {"a", 1}
    assert bc._compact_pfids(odd) is odd  # not all exact str: the set is kept

    class Text(str):
        pass

    with_subclass = {"a", Text("b")}
    assert bc._compact_pfids(with_subclass) is with_subclass
    as_dict = {"a": 1}
    assert bc._compact_pfids(as_dict) is as_dict


@pytest.mark.parametrize("name", sorted(_PLANS))
def test_c_view_with_objects_keeps_the_compact_ids(name: str) -> None:
    given = 0
    for attestation in _attestations(_PLANS[name]):
        objects = _objects(attestation)
        if objects is None:
            continue
        given += 1
        index = _native.attested_index(*_VIEW_ARGS[:3], attestation)
        assert index is not None and type(index[0]) is set  # the public kernel keeps its set
        built = _native.attested_view(bc._AttestedView, attestation, *_VIEW_ARGS, objects)
        assert built is not None
        assert built.attested_pfids == bc._compact_pfids(index[0])
        assert set(built.attested_pfids) == index[0]
        assert bc._AttestedView(attestation, objects).attested_pfids == built.attested_pfids
        # without objects: the expected dict, as before
        plain = _native.attested_view(bc._AttestedView, attestation, *_VIEW_ARGS)
        assert plain is None or type(plain.attested_pfids) is dict
    if not name.startswith("unpickled"):
        assert given


def _with_pfids(attested: dict[int, Any], form: Any) -> dict[int, Any]:
    """A copy of ``attested`` whose views carry ``form(view.attested_pfids)``."""
    out = {}
    for key, (pdict, bdict, view) in attested.items():
        copy = object.__new__(bc._AttestedView)
        for slot in bc._AttestedView.__slots__:
            try:
                object.__setattr__(copy, slot, getattr(view, slot))
            except AttributeError:
                pass
        object.__setattr__(copy, "attested_pfids", form(view.attested_pfids))
        out[key] = (pdict, bdict, copy)
    return out


def _sides(plan: Any, forms: list[Any], after_fragments: Any = None) -> list[Any]:
    """revalidate_side's answers (and the used ids) on both sides with the built-now views'
    ``attested_pfids`` in each of ``forms`` (``after_fragments()``, when given, runs once
    revalidate_fragments has passed, before the views and sides)."""
    answers: list[Any] = []
    with bc._ViewScope(built_now=True):
        scanned = _scan(plan.operations)
        if scanned is None:
            return answers
        frags, source_of, target_of, _boxes = scanned
        checked = _native_fragments(frags, _identity(plan))
        if checked is None:
            return answers
        keys, routes_half, runtime_ids, attested = checked
        if after_fragments is not None:
            after_fragments()
        row_of: list[Any] = []
        views = _call(
            _native.revalidate_views, plan.source_executors, plan.target_executors, runtime_ids, routes_half,
            source_of, target_of, ParallelRank, ExecutorTransferPlan, row_of,
        )
        if not isinstance(views, tuple):
            return answers
        s_runtime, s_rows, _s, t_runtime, t_rows, _t, _r = views
        s_row_of, t_row_of = row_of or (None, None)
        for form in forms:
            table = _with_pfids(attested, form)
            used: set[int] = set()
            result = []
            for side_of, runtime, rows, side_row_of in (
                (source_of, s_runtime, s_rows, s_row_of),
                (target_of, t_runtime, t_rows, t_row_of),
            ):
                result.append(_call(
                    _native.revalidate_side, frags, keys, runtime_ids, side_of, runtime, rows, table, used,
                    RuntimeBindingAttestation, ParallelRank, RuntimeFragmentSnapshot, _PF, side_row_of,
                ))
            answers.append((result, sorted(used)))
    return answers


def _as_set(pfids: Any) -> Any:
    return set(pfids) if type(pfids) in (tuple, dict) else pfids


def _as_tuple(pfids: Any) -> Any:
    return bc._compact_pfids(set(pfids)) if type(pfids) in (tuple, set, dict) else pfids


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(sorted(_PLANS)),
    choices=st.lists(st.integers(0, len(_MUTATIONS) - 1), min_size=0, max_size=2),
    data=st.data(),
)
def test_compact_and_set_ids_decide_alike(name: str, choices: list[int], data: Any) -> None:
    mutated = _mutated(name, choices, data)
    if mutated is None:  # a mutation that does not apply to the plan it was given
        return
    plan = mutated
    answers = _sides(plan, [_as_set, _as_tuple])
    if answers:
        assert answers[0] == answers[1]


@pytest.mark.parametrize("name", ["split", "plain", "shared", "tied"])
def test_compact_ids_missing_extra_or_odd_keys(name: str) -> None:
    plan = _PLANS[name]
    answers = _sides(plan, [_as_set, _as_tuple])
    assert answers and answers[0] == answers[1] and answers[0][0] == [True, True]

    def drop_first(pfids: Any) -> Any:  # one attested id missing: as the smaller set decides
        return _as_tuple(pfids)[1:]

    def drop_first_set(pfids: Any) -> Any:
        return set(drop_first(pfids))

    def extra(pfids: Any) -> Any:  # one id more (not any fragment's): changes nothing
        return bc._compact_pfids(set(pfids) | {"not-a-fragment"})

    def odd_items(pfids: Any) -> Any:  # an item that is not an exact str: unsure (declines)
        return tuple(1 for _ in pfids)

    missing, missing_set, more, odd = (
        answer[0] for answer in _sides(plan, [drop_first, drop_first_set, extra, odd_items])
    )
    assert missing == missing_set and None in missing
    assert more == [True, True]
    assert None in odd


def test_compact_ids_decline_a_str_subclass_pfid() -> None:
    """With the tuple, a placement fragment id that is a str subclass (equal to the attested one)
    is not taken as attested: revalidate_side declines (the set's membership would find it)."""
    plan = _PLANS["split"]

    class Text(str):
        pass

    placement = plan.operations[0].target.placement
    pfid = placement.placement_fragment_id
    # (set after revalidate_fragments: since session 25 that pass declines a str-subclass id
    # itself, before it probes the attestation's dicts with it)
    try:
        with_set, with_tuple = (
            answer[0]
            for answer in _sides(
                plan, [_as_set, _as_tuple], lambda: object.__setattr__(placement, "placement_fragment_id", Text(pfid))
            )
        )
        assert type(placement.placement_fragment_id) is Text
    finally:
        object.__setattr__(placement, "placement_fragment_id", pfid)
    assert type(placement.placement_fragment_id) is str
    assert with_tuple[1] is None
    assert with_set[1] in (True, None)


def test_spaces_list_emptied_during_a_read_is_an_error() -> None:
    """revalidate_spaces reads the fragments list in place: a binding whose attribute read empties
    the list makes the next read an IndexError (the caller's decline), never a stale item."""
    plan = _PLANS["split"]
    frags, source_of, target_of, _boxes = _scan(plan.operations)
    frags = list(frags)
    real = frags[0].binding

    class Emptying:
        def __getattr__(self, name: str) -> Any:
            frags.clear()
            return getattr(real, name)

    fragment = frags[0]
    object.__setattr__(fragment, "binding", Emptying())
    try:
        result = _call(_native.revalidate_spaces, frags, source_of, target_of, plan.operations, True,
                       RuntimeBindingFragment, _PF)
    finally:
        object.__setattr__(fragment, "binding", real)
    assert result in (IndexError, False)
    assert frags == []


def test_object_tables_dropped_between_sides(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path drops each built-now view's by-pfid table of snapshot objects once a side is
    checked (the target side rebuilds what it needs), and still accepts the bind call's plan; a
    dropped table is rebuilt equal on demand, views without objects are left alone."""
    from test_native_revalidate import _bound_plan

    seen: list[list[Any]] = []
    side = _native.revalidate_side

    def spy(*args: Any) -> Any:
        attested = args[6]
        seen.append([entry[2]._objects_by_pfid for entry in attested.values()])
        result = side(*args)
        seen.append([entry[2]._objects_by_pfid for entry in attested.values()])
        return result

    results = _record_fast_path(monkeypatch)

    monkeypatch.setattr(bc._native, "revalidate_side", spy)
    # (a sealed bind skips the pass when bound_contracts._sealed_side_holds: made false here, the
    # call is still sealed and its views carry the snapshot objects)
    monkeypatch.setattr(bc, "_sealed_side_holds", lambda target, source: False)
    # small plans (the contract benchmark's) keep them: nothing worth freeing
    _bound_plan(target_tp=4, shape=(4, 8))
    assert results == [True] and len(seen) == 4
    assert any(table for table in seen[2]) and [t is not None for t in seen[2]] == [t is not None for t in seen[1]]
    # large plans (threshold lowered) drop them
    monkeypatch.setattr(bc, "_COMPACT_MIN", 0)
    seen.clear()
    results.clear()
    _bound_plan(target_tp=4, shape=(4, 8))
    assert results == [True]
    assert len(seen) == 4
    assert all(table is None for table in seen[0]) and any(table for table in seen[1])  # source side built some
    assert all(table is None for table in seen[2])  # dropped before the target side
    assert any(table for table in seen[3])

    for attestation in _attestations(_PLANS["split"]):
        objects = _objects(attestation)
        if objects is None:
            continue
        view = _native.attested_view(bc._AttestedView, attestation, *_VIEW_ARGS, objects)
        plain = _native.attested_view(bc._AttestedView, attestation, *_VIEW_ARGS)
        table = dict(view.object_by_pfid())
        assert table
        other = plain.object_by_pfid()
        bc._drop_object_tables({1: (None, None, view), 2: (None, None, plain), 3: "odd"})
        assert view._objects_by_pfid is None and plain._objects_by_pfid is other
        assert view.object_by_pfid() == table


def test_many_attestations_grow_the_entry_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """revalidate_fragments' attestation table starts small and grows as attestations come (it
    was sized for the fragments): a plan of more attestations than its first size gives the
    reference's keys, routes, runtime ids and entries, and its bind is accepted by the fast
    path."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import _workloads as w

    from mooncake.reshard.weight import bind_logical_transfer_plan, plan_placement_transfer
    from mooncake.reshard.weight._planner.contracts import PlanningLimits
    from test_native_revalidate import _fragments_agree

    results = _record_fast_path(monkeypatch)

    inputs = w.independent_experts(layers=1, experts=48)
    source, target = w.assemble(inputs.source), w.assemble(inputs.target)
    logical = plan_placement_transfer(source, target, planning_limits=PlanningLimits())
    plan = bind_logical_transfer_plan(
        logical, w.bindings(target, prefix="dst", window=4096), source_bindings=w.bindings(source, prefix="src", window=0)
    )
    assert results == [True]
    assert len(_attestations(plan)) > 16
    _fragments_agree(plan)
    with bc._ViewScope():
        frags = _scan(plan.operations)[0]
        checked = _native_fragments(frags, _identity(plan))
        assert checked is not None and len(checked[3]) == len(_attestations(plan))

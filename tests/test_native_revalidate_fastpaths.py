"""Speed paths of the TransferPlan revalidation kernels (issue 5, round 9) against their
generic forms: each shortcut must decide exactly what the generic comparison decides, and
hostile inputs must be refused or declined, never crash."""

from __future__ import annotations

import abc
import pickle
from typing import Any

import pytest
from forge_helpers import outcome
from spec_helpers import field_state, forged_instance

from mooncake.reshard import _native
from mooncake.reshard.contracts.fragments import RuntimeBindingFragment
from mooncake.reshard.weight import ParallelRank
from mooncake.reshard.weight._planner.attestation import RuntimeBindingAttestation, RuntimeBindingEvidence
from mooncake.reshard.weight._planner import bound_contracts as bc

from test_native_revalidate import _PLANS, _coverage_tables


def _forged_rank(**state: Any) -> ParallelRank:
    rank: ParallelRank = object.__new__(ParallelRank)
    rank.__dict__.update(state)
    return rank


class _RankSubclass(ParallelRank):
    pass


def _rank_variants(rank: ParallelRank) -> list[Any]:
    state = dict(rank.__dict__)
    bumped = dict(state, ep=state["ep"] + 1)
    return [
        rank,
        ParallelRank(**state),  # equal, not identical
        ParallelRank(**bumped),  # differs in the last field
        _forged_rank(**dict(state, dp=float(state["dp"]))),  # equal value, not an exact int
        _forged_rank(**dict(state, dp=float("nan"))),  # never equal
        _forged_rank(**dict(state, tp=2**80)),  # beyond int64
        _forged_rank(**{k: v for k, v in state.items() if k != "pp"}),  # a field missing: class default
        _forged_rank(**dict(state, extra=1)),  # an extra attribute (not a field)
        _RankSubclass(**state),
        (state["dp"], state["tp"], state["pp"], state["ep"]),
        None,
    ]


@pytest.mark.parametrize("name", ["split", "unpickled-split"])
def test_coverage_rank_shortcut_decides_like_the_generic_comparison(name: str) -> None:
    tables = _coverage_tables(_PLANS[name])
    assert tables is not None
    placement, frags, target_of, boxes, rows, attested, used = tables
    assert _native.revalidate_coverage(*tables, ParallelRank) is True
    assert _native.revalidate_coverage(*tables, None) is True
    for variant in _rank_variants(rows[0][0]["rank"]):
        estate = dict(rows[0][0])
        estate["rank"] = variant
        forged_rows = [(estate, rows[0][1], rows[0][2])] + rows[1:]
        forged = (placement, frags, target_of, boxes, forged_rows, attested, set(used) | {id(estate)})
        generic = _native.revalidate_coverage(*forged)
        assert _native.revalidate_coverage(*forged, ParallelRank) is generic, variant
        assert generic is (True if bc._fast_target_coverage(*forged) else None), variant


def test_coverage_rank_type_hostile() -> None:
    tables = _coverage_tables(_PLANS["split"])
    assert tables is not None
    for bad in (1, "ParallelRank", ParallelRank(), object()):
        with pytest.raises(TypeError):
            _native.revalidate_coverage(*tables, bad)
    with pytest.raises(TypeError):
        _native.revalidate_coverage(*tables, ParallelRank, None, None)
    # Another type: every rank goes through the generic comparison.
    assert _native.revalidate_coverage(*tables, int) is True


# ---------------------------------------------------------------------------------------
# _native.attested_index (the cheap part of an attested view) against its Python reference

_INDEX_TYPES = (RuntimeBindingAttestation, RuntimeBindingEvidence, RuntimeBindingFragment)


def _index(attestation: Any) -> Any:
    return _native.attested_index(*_INDEX_TYPES, attestation)


def _reference(attestation: Any) -> Any:
    state = attestation.__dict__
    return bc._python_attested_index(state["_placement_dict"], state["evidence"])


def _attestations() -> list[Any]:
    found: dict[int, Any] = {}
    for plan in _PLANS.values():
        for op in plan.operations:
            for fragment in (op.source, op.target):
                found.setdefault(id(fragment.attestation), fragment.attestation)
    return list(found.values())


def _forged_attestation(attestation: Any, *, fragments: Any = None, placement_dict: Any = None) -> Any:
    evidence = attestation.evidence
    if fragments is not None:
        evidence = object.__new__(RuntimeBindingEvidence)
        evidence.__dict__.update(attestation.evidence.__dict__, fragments=fragments)
    forged = object.__new__(RuntimeBindingAttestation)
    forged.__dict__.update(attestation.__dict__, evidence=evidence)
    if placement_dict is not None:
        forged.__dict__["_placement_dict"] = placement_dict
    return forged


def _spread(fragment: Any, index: int, count: int) -> Any:
    return forged_instance(  # (per field: its C layout has no __dict__)
        RuntimeBindingFragment,
        {**field_state(fragment), "worker_id": f"w{index % 2}", "fragment_id": f"rt-{count - index:03d}"},
    )


def test_attested_index_equals_the_reference() -> None:
    attestations = _attestations()
    assert len(attestations) > 4
    for attestation in attestations:
        built = _index(attestation)
        assert built is not None
        assert built == _reference(attestation)
        pfids, ids_by_worker, evidence_ids, complete = built
        assert complete is True and evidence_ids is ids_by_worker
        # The same decisions as the rows kernel (the eager view).
        rows = _native.attested_rows(*_INDEX_TYPES, attestation)
        assert rows is not None and set(rows[0]) == pfids and rows[2] == ids_by_worker
        # Several workers, ids out of order; then a missing placement entry (incomplete).
        fragments = attestation.evidence.fragments * 3
        fragments = tuple(_spread(f, i, len(fragments)) for i, f in enumerate(fragments))
        spread = _forged_attestation(attestation, fragments=fragments)
        assert _index(spread) == _reference(spread)
        assert _index(spread)[1] == _native.attested_rows(*_INDEX_TYPES, spread)[2]
        missing = fragments[0].placement_fragment_id
        partial = {k: v for k, v in attestation._placement_dict.items() if k != missing}
        incomplete = _forged_attestation(attestation, fragments=fragments, placement_dict=partial)
        built = _index(incomplete)
        assert built == _reference(incomplete)
        assert built[3] is False and missing not in built[0]
        assert sum(map(len, built[2].values())) == len(fragments)


def test_attested_index_declines_and_hostile_inputs() -> None:
    attestation = _attestations()[0]
    fragment = attestation.evidence.fragments[0]
    assert _native.attested_index(*_INDEX_TYPES, object()) is None
    assert _native.attested_index(*_INDEX_TYPES, attestation.evidence) is None
    for fragments in (list(attestation.evidence.fragments), (object(),), ("x",)):
        forged = _forged_attestation(attestation, fragments=fragments)
        assert _index(forged) is None, fragments
    # Ids that are not exact str: the kernel declines, the reference decides.
    for name, value in (("fragment_id", 7), ("worker_id", None), ("placement_fragment_id", 2**70)):
        odd = forged_instance(RuntimeBindingFragment, {**field_state(fragment), name: value})
        forged = _forged_attestation(attestation, fragments=(odd,))
        assert _index(forged) is None, name
        _reference(forged)  # decidable in Python
    # A placement dict that is not an exact dict; an attestation without its state.
    assert _index(_forged_attestation(attestation, placement_dict=dict(attestation._placement_dict).items())) is None
    bare = object.__new__(RuntimeBindingAttestation)
    assert _index(bare) is None
    # Wrong argument types.
    for bad in ((1, *_INDEX_TYPES[1:]), (_INDEX_TYPES[0], "x", _INDEX_TYPES[2])):
        with pytest.raises(TypeError):
            _native.attested_index(*bad, attestation)
    with pytest.raises(TypeError):
        _native.attested_index(*_INDEX_TYPES)
    # An entry that is None counts as missing (``placement_dict.get(pfid) is None``).
    nulled = dict(attestation._placement_dict)
    nulled[fragment.placement_fragment_id] = None
    built = _index(_forged_attestation(attestation, placement_dict=nulled))
    assert built is not None and built == _reference(_forged_attestation(attestation, placement_dict=nulled))
    assert fragment.placement_fragment_id not in built[0] and built[3] is False
    # A placement dict without the entries: nothing attested, every id is evidence only.
    built = _index(_forged_attestation(attestation, placement_dict={}))
    assert built is not None and built == _reference(_forged_attestation(attestation, placement_dict={}))
    assert built[0] == set() and built[1] == {} and built[3] is False


def test_views_never_use_binding_snapshot_objects() -> None:
    """A view never takes the snapshot objects binding cached on its attestation (they could
    have been edited in place since): its rows are derived eagerly from the current values."""
    plan = _PLANS["plain"]
    for candidate in (plan, pickle.loads(pickle.dumps(plan))):
        for op in candidate.operations:
            for attestation in (op.target.attestation, op.source.attestation):
                state = attestation.__dict__
                for view in (bc._AttestedView(attestation), bc._attested_view(attestation)):
                    assert view.objects_by_worker is None and view._rows is not None
                    eager = bc._python_attested_rows(state, state["evidence"], state["evidence"].generation)
                    assert view.expected_by_pfid == eager[0]
                    assert view.rows_by_worker == eager[1]
                    assert view.attested_pfids is view._rows[0]


# ---------------------------------------------------------------------------------------
# revalidate_views with executor_type (the exact-class check of every executor)


def test_views_executor_type() -> None:
    from test_native_revalidate import _forge, _identity, _native_fragments, _scan

    plan = _PLANS["plain"]
    frags, source_of, target_of, _ = _scan(plan.operations)
    _keys, halves, runtime_ids, _attested = _native_fragments(frags, _identity(plan))
    args: list[Any] = [plan.source_executors, plan.target_executors, runtime_ids, halves, source_of, target_of,
                       ParallelRank]
    plain = _native.revalidate_views(*args)
    assert plain is not None
    typed = _native.revalidate_views(*args, bc.ExecutorTransferPlan)
    assert typed is not None and repr(typed) == repr(plain)
    assert _native.revalidate_views(*args, None) is not None

    class Sub(bc.ExecutorTransferPlan):
        pass

    executor = plan.target_executors[-1]
    sub = object.__new__(Sub)
    sub.__dict__.update(executor.__dict__)
    for side in (0, 1):
        hostile = list(args)
        hostile[side] = hostile[side][:-1] + (sub,)
        assert _native.revalidate_views(*hostile) is not None  # no class check without the type
        assert _native.revalidate_views(*hostile, bc.ExecutorTransferPlan) is None
        hostile[side] = (object(),) + hostile[side]
        assert _native.revalidate_views(*hostile, bc.ExecutorTransferPlan) is None  # declined before any read
    for bad in (1, "ExecutorTransferPlan", executor):
        with pytest.raises(TypeError):
            _native.revalidate_views(*args, bad)
    with pytest.raises(TypeError):  # row_of: a list or None (None: not built)
        _native.revalidate_views(*args, bc.ExecutorTransferPlan, ())
    assert _native.revalidate_views(*args, bc.ExecutorTransferPlan, None) is not None
    # The fast path refuses a plan with a subclass executor; the rules decide it.
    forged = _forge(plan, target_executors=plan.target_executors[:-1] + (sub,))
    assert bc._fast_revalidate_live(
        _forge(forged), forged.operations, forged.source_executors, forged.target_executors,
        forged.planning_limits, True,
    ) is False


def _drop_views(plan: Any) -> list[Any]:
    attestations = {}
    for op in plan.operations:
        for fragment in (op.source, op.target):
            attestations[id(fragment.attestation)] = fragment.attestation
    for attestation in attestations.values():
        attestation.__dict__.pop("_attested_view", None)
    return list(attestations.values())


@pytest.mark.parametrize("name", sorted(_PLANS))
def test_objects_by_pfid_built_in_c_equal_the_method(name: str) -> None:
    """revalidate_side builds a view's snapshot-object table in C (when the view has none yet):
    the same table as ``_AttestedView.object_by_pfid``, cached on the view (kept on the
    attestation only as the exact cache entry of ``bc._attested_view``)."""
    from test_native_revalidate import _forge

    plan = _PLANS[name]
    attestations = _drop_views(plan)
    candidate = _forge(plan)
    with bc._ViewScope():
        assert bc._fast_revalidate_live(
            candidate, plan.operations, plan.source_executors, plan.target_executors, plan.planning_limits, True
        )
        scope = bc._VIEW_STATE.scope
        assert scope is not None
        views = {key: entry[1] for key, entry in scope.items()}
    assert bc._VIEW_STATE.scope is None
    for attestation in attestations:
        view = views[id(attestation)]
        kept = attestation.__dict__["_attested_view"]  # a first view: only marked (see _VIEW_KEY)
        assert kept == ()
        assert view._objects_by_pfid is not None
        reference = bc._AttestedView(attestation)
        assert reference._objects_by_pfid is None
        expected = reference.object_by_pfid()
        assert view._objects_by_pfid == expected
        assert all(view._objects_by_pfid[key] is value for key, value in expected.items())


def test_objects_by_pfid_odd_tables_use_the_method() -> None:
    """A view whose snapshot table is not an exact dict of exact tuples: the method decides
    (its errors make the fast path decline); the fast path never accepts what the rules reject."""
    from test_native_revalidate import _forge

    plan = _PLANS["plain"]
    for odd in ({"w": ["x"]}, {}, None):
        attestations = _drop_views(plan)
        with bc._ViewScope():  # the views the fast path below uses
            views = [bc._attested_view(attestation) for attestation in attestations]
            for view in views:
                view.objects_by_worker = odd
            fast = bc._fast_revalidate(
                _forge(plan), plan.operations, plan.source_executors, plan.target_executors, plan.planning_limits, True
            )
        try:
            _forge(plan)._revalidate_rules(
                plan.operations, plan.source_executors, plan.target_executors, plan.planning_limits, True
            )
            slow = True
        except Exception:
            slow = False
        assert slow or not fast, odd
        if odd == {"w": ["x"]}:
            assert fast is False
        _drop_views(plan)


# ---------------------------------------------------------------------------------------
# attested_view: the _AttestedView constructor in C

_VIEW_ARGS = (RuntimeBindingAttestation, RuntimeBindingEvidence, RuntimeBindingFragment)


def _view_c(attestation: Any) -> Any:
    from mooncake.reshard.weight.placement import WeightPlacementManifest

    return _native.attested_view(bc._AttestedView, attestation, *_VIEW_ARGS, WeightPlacementManifest)


def _slots(view: Any) -> dict[str, Any]:
    values = {name: getattr(view, name) for name in bc._AttestedView.__slots__ if name != "_rows"}
    values["rows"] = view.rows()
    return values


@pytest.mark.parametrize("name", sorted(_PLANS))
def test_attested_view_in_c_equals_the_constructor(name: str) -> None:
    for attestation in _drop_views(_PLANS[name]):
        built = _view_c(attestation)
        assert built is not None
        assert "_attested_view" not in attestation.__dict__  # never kept on the attestation
        assert type(built) is bc._AttestedView
        reference = bc._AttestedView(attestation)
        assert (built._rows is None) is (reference._rows is None)
        assert _slots(built) == _slots(reference)
        assert built.placement is attestation.placement and built.evidence is attestation.evidence
        again = bc._attested_view(attestation)  # outside a revalidation: built again
        assert again is not built and _slots(again) == _slots(built)
        with bc._ViewScope():
            assert bc._attested_view(attestation) is bc._attested_view(attestation)
    _drop_views(_PLANS[name])


def test_attested_view_declines_and_hostile_inputs() -> None:
    plan = _PLANS["plain"]
    attestation = _drop_views(plan)[0]
    fragment = attestation.evidence.fragments[0]
    assert _view_c(object()) is None
    # Incomplete evidence (a fragment without its placement entry): the constructor decides.
    fragments = attestation.evidence.fragments
    partial = {k: v for k, v in attestation._placement_dict.items() if k != fragment.placement_fragment_id}
    for forged in (
        _forged_attestation(attestation, placement_dict=partial),
        _forged_attestation(attestation, fragments=list(fragments)),
        _forged_attestation(attestation, placement_dict=list(partial.items())),
    ):
        forged.__dict__.pop("_attested_view", None)
        forged.__dict__.pop("_derived_cache", None)
        assert _view_c(forged) is None
        assert "_attested_view" not in forged.__dict__
    missing = _forged_attestation(attestation)
    del missing.__dict__["_placement_dict"]
    assert _view_c(missing) is None
    # Binding's derived cache is never read (an odd one changes nothing).
    odd_cache = _forged_attestation(attestation)
    odd_cache.__dict__["_derived_cache"] = (attestation.placement, attestation.evidence, [])
    odd_view = _view_c(odd_cache)
    assert odd_view is not None and _slots(odd_view) == _slots(bc._AttestedView(odd_cache))
    # A placement whose digest property raises: the error propagates (as from the constructor).
    broken = _forged_attestation(attestation)
    placement = object.__new__(type(attestation.placement))
    placement.__dict__.update(attestation.placement.__dict__)
    placement.__dict__.pop("_digest", None)
    broken.__dict__["placement"] = placement
    try:
        expected = bc._AttestedView(broken).key_base
    except Exception as exc:  # noqa: BLE001 - the constructor's own error
        with pytest.raises(type(exc)):
            _view_c(broken)
    else:
        assert _view_c(broken).key_base == expected
    for bad in ((1, attestation, *_VIEW_ARGS, int), (bc._AttestedView, attestation, 1, *_VIEW_ARGS[1:], int)):
        with pytest.raises(TypeError):
            _native.attested_view(*bad)
    with pytest.raises(TypeError):
        _native.attested_view(bc._AttestedView, attestation, *_VIEW_ARGS)
    # revalidate_fragments: view_type and evidence_type come together.
    from test_native_revalidate import _FRAGMENT_TYPES, _identity, _scan

    frags = _scan(plan.operations)[0]
    with pytest.raises(TypeError):
        _native.revalidate_fragments(frags, *_FRAGMENT_TYPES, _identity(plan), bc._attested_view, bc._AttestedView)
    with pytest.raises(TypeError):
        _native.revalidate_fragments(frags, *_FRAGMENT_TYPES, _identity(plan), bc._attested_view, 1, 2)
    assert _native.revalidate_fragments(
        frags, *_FRAGMENT_TYPES, _identity(plan), bc._attested_view, bc._AttestedView, RuntimeBindingEvidence
    ) is not None
    _drop_views(plan)


def test_attested_view_allocates_as_object_new() -> None:
    """The view is allocated by ``object.__new__(view_type)`` itself (the builtin fetched once at
    module init): a class it refuses raises its TypeError, with its message, and a class whose
    own ``__new__`` / ``__init__`` would run is still allocated without them."""
    attestation = _drop_views(_PLANS["plain"])[0]
    from mooncake.reshard.weight.placement import WeightPlacementManifest

    class Abstract(bc._AttestedView, abc.ABC):
        __slots__ = ()

        @abc.abstractmethod
        def must(self) -> None: ...

    calls: list[str] = []

    class Hooked(bc._AttestedView):
        __slots__ = ()

        def __new__(cls, *args: Any) -> Any:
            calls.append("new")
            return super().__new__(cls)

        def __init__(self, *args: Any) -> None:
            calls.append("init")

    for refused in (int, Abstract):
        expected = outcome(lambda: object.__new__(refused))
        assert expected[0] == "TypeError"
        got = outcome(lambda: _native.attested_view(refused, attestation, *_VIEW_ARGS, WeightPlacementManifest))
        assert got == expected
    hooked = _native.attested_view(Hooked, attestation, *_VIEW_ARGS, WeightPlacementManifest)
    assert type(hooked) is Hooked and calls == []
    assert _slots(hooked) == _slots(_view_c(attestation))
    _drop_views(_PLANS["plain"])


@pytest.mark.parametrize("name", sorted(_PLANS))
def test_attested_view_in_c_with_given_objects_equals_the_constructor(name: str) -> None:
    """With binding's snapshot objects given (only inside the revalidation of a plan binding has
    just built), the C view equals the constructor's; without them no object is ever taken from
    the attestation."""
    from mooncake.reshard.weight.placement import WeightPlacementManifest

    given = 0
    for attestation in _drop_views(_PLANS[name]):
        cache = attestation.__dict__.get("_derived_cache")
        objects = None if cache is None else cache[2].get("snapshots_by_worker")
        if objects is None:
            continue
        given += 1
        built = _native.attested_view(bc._AttestedView, attestation, *_VIEW_ARGS, WeightPlacementManifest, objects)
        reference = bc._AttestedView(attestation, objects)
        assert built is not None and built.objects_by_worker is objects and built._rows is None
        assert _slots(built) == _slots(reference)
        assert _view_c(attestation).objects_by_worker is None
        for odd in ({"w": ["x"]}, 1 << 80, "x"):
            odd_view = _native.attested_view(bc._AttestedView, attestation, *_VIEW_ARGS, WeightPlacementManifest, odd)
            assert odd_view is None or odd_view.objects_by_worker is odd
        with pytest.raises(TypeError):
            _native.attested_view(bc._AttestedView, attestation, *_VIEW_ARGS, WeightPlacementManifest, None, None)
    if name.startswith("unpickled"):
        assert given == 0  # fresh attestations of a restored plan carry no binding objects
    # Outside the revalidation of a just-built plan, _attested_view never uses those objects.
    for attestation in _drop_views(_PLANS[name]):
        assert bc._attested_view(attestation).objects_by_worker is None
        with bc._ViewScope():
            assert bc._attested_view(attestation).objects_by_worker is None


def test_only_a_just_built_plan_uses_binding_objects(monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    from memory_executor import HostMemory, host_bindings, tp_placement

    from mooncake.reshard.weight.planner import bind_logical_transfer_plan, plan_placement_transfer

    views: list[Any] = []
    attested_view = bc._attested_view

    def spy_view(attestation: Any) -> Any:
        view = attested_view(attestation)
        views.append(view)
        return view

    monkeypatch.setattr(bc, "_attested_view", spy_view)
    memory = HostMemory()
    source = tp_placement(2, prefix="s", shape=(4, 8))
    target = tp_placement(2, prefix="t", shape=(4, 8))
    plan = bind_logical_transfer_plan(
        plan_placement_transfer(source, target),
        host_bindings(target, memory, prefix="dst"),
        source_bindings=host_bindings(source, memory, prefix="src"),
    )
    assert views and all(view.objects_by_worker is not None for view in views)  # built in this call
    views.clear()
    dataclasses.replace(plan)
    assert views and all(view.objects_by_worker is None for view in views)  # could be edited since

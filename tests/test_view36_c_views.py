"""``revalidate_fragments``' views in C (VIEW36): with ``views`` the pass runs the common paths
of ``bound_contracts._attested_view`` itself (the scope entry, a first view without a recorded
``_attested_view``, a view with binding's snapshot objects) and calls the wrapper, or its end
``_attested_view_end``, for anything else.

Oracle: the same pass with ``views=None``, where every view goes through the Python wrapper.
Both run on equal fresh plans prepared alike (hypothesis draws what is planted on each
attestation, its placement and the revalidation scope); the results, the views, the scope, the
``held`` list, the ``_attested_view`` records and any error must agree."""

from __future__ import annotations

import pickle
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forge_helpers import outcome
from test_native_revalidate import _FRAGMENT_TYPES, _bound_plan, _identity, _scan
from test_sound26_view_callout_keys import _attestations

from mooncake.reshard import _native
from mooncake.reshard.weight import WeightPlacementPart
from mooncake.reshard.weight._planner import bound_contracts as bc
from mooncake.reshard.weight._planner.attestation import RuntimeBindingEvidence

_MISSING = object()
_SENTINEL = object()  # a value planted where the code only moves it (held, a scope entry)


class Odd(str):
    """A str subclass key: dicts holding one are not plain (their probes could run its __eq__)."""

    __slots__ = ()


def _set_view_key(value: Any) -> Callable[[Any, dict[Any, Any]], None]:
    def plant(attestation: Any, scope: dict[Any, Any]) -> None:
        vars(attestation)["_attested_view"] = value

    return plant


def _empty_deps_record(attestation: Any, scope: dict[Any, Any]) -> None:
    state = vars(attestation)
    state["_attested_view"] = (_SENTINEL, state["evidence"], state["placement"], state["_placement_dict"], ())


def _derived(make: Callable[[Any], Any]) -> Callable[[Any, dict[Any, Any]], None]:
    def plant(attestation: Any, scope: dict[Any, Any]) -> None:
        vars(attestation)["_derived_cache"] = make(vars(attestation))

    return plant


def _scope_entry(make: Callable[[Any], Any]) -> Callable[[Any, dict[Any, Any]], None]:
    def plant(attestation: Any, scope: dict[Any, Any]) -> None:
        scope[id(attestation)] = make(attestation)

    return plant


def _digest_ahead(attestation: Any, scope: dict[Any, Any]) -> None:
    vars(vars(attestation)["placement"])["_digest_ahead"] = _SENTINEL


def _no_part_index(attestation: Any, scope: dict[Any, Any]) -> None:
    vars(vars(attestation)["placement"]).pop("_parts_by_participant", None)


def _odd_placement_key(attestation: Any, scope: dict[Any, Any]) -> None:
    vars(vars(attestation)["placement"])[Odd("_odd")] = 1


def _odd_attestation_key(attestation: Any, scope: dict[Any, Any]) -> None:
    vars(attestation)[Odd("_odd")] = 1


def _odd_scope_key(attestation: Any, scope: dict[Any, Any]) -> None:
    scope[Odd("odd")] = None


def _no_derived(attestation: Any, scope: dict[Any, Any]) -> None:
    vars(attestation).pop("_derived_cache", None)


def _keep(attestation: Any, scope: dict[Any, Any]) -> None:
    pass


# Each edits one attestation (or the scope on its behalf) before the pass.
_PLANTS: list[Callable[[Any, dict[Any, Any]], None]] = [
    _keep,
    _set_view_key(()),
    _set_view_key(None),
    _set_view_key("junk"),
    _empty_deps_record,
    _derived(lambda s: (s["placement"], s["evidence"], {"snapshots_by_worker": {}})),
    _derived(lambda s: (s["placement"], s["evidence"], {1: 2, "snapshots_by_worker": None})),
    _derived(lambda s: (s["placement"], s["evidence"], {Odd("snapshots_by_worker"): {}})),
    _derived(lambda s: (s["placement"], s["evidence"], [])),
    _derived(lambda s: (None, s["evidence"], {"snapshots_by_worker": {}})),
    _derived(lambda s: (s["placement"], s["evidence"], {"snapshots_by_worker": {}}, 4)),
    _no_derived,
    _scope_entry(lambda a: (a, _SENTINEL)),
    _scope_entry(lambda a: (a, _SENTINEL, 3)),
    _scope_entry(lambda a: ("another", _SENTINEL)),
    _scope_entry(lambda a: None),
    _odd_scope_key,
    _digest_ahead,
    _no_part_index,
    _odd_placement_key,
    _odd_attestation_key,
]

_PLAN_KINDS = ["bound", "unpickled"]
_PAYLOAD = pickle.dumps(_bound_plan(), protocol=pickle.HIGHEST_PROTOCOL)


def _saved_states(plan: Any) -> list[tuple[dict[Any, Any], dict[Any, Any]]]:
    """Every instance dict a run edits (the attestations' and their placements'), with a copy."""
    states: list[tuple[dict[Any, Any], dict[Any, Any]]] = []
    for attestation in _attestations(plan):
        for obj in (attestation, vars(attestation)["placement"]):
            if all(vars(obj) is not state for state, _copy in states):
                states.append((vars(obj), dict(vars(obj))))
    return states


# One plan per kind (both runs of a comparison read the same objects, addresses included), put
# back in its first state before each run.
_KIND_PLANS = {"bound": _bound_plan(), "unpickled": pickle.loads(_PAYLOAD)}
_KIND_STATES = {kind: _saved_states(plan) for kind, plan in _KIND_PLANS.items()}


def _fresh(kind: str) -> Any:
    for state, saved in _KIND_STATES[kind]:
        state.clear()
        state.update(saved)
    return _KIND_PLANS[kind]


def _slots(view: Any, order: dict[int, int]) -> Any:
    """A view as comparable values: the objects it holds by identity (their attestation's
    index), everything else by value; a value that is no view by identity."""
    if type(view) is not bc._AttestedView:
        return ("object", view if view is _SENTINEL else type(view).__name__)
    values = []
    for name in bc._AttestedView.__slots__:
        value = getattr(view, name, _MISSING)
        if name in ("placement", "evidence", "_placement_dict", "objects_by_worker"):
            values.append((name, id(value)))
        else:
            values.append((name, value))
    return ("view", tuple(values))


def _identities(plan: Any) -> dict[int, str]:
    """Every object a run may record, named by where it sits in the plan (so two equal plans'
    objects compare by name)."""
    names: dict[int, str] = {}
    for k, attestation in enumerate(_attestations(plan)):
        state = vars(attestation)
        names[id(attestation)] = f"a{k}"
        for key in ("placement", "evidence", "_placement_dict"):
            names[id(state[key])] = f"a{k}.{key}"
        derived = state.get("_derived_cache")
        if type(derived) is tuple and len(derived) == 3 and type(derived[2]) is dict:
            objects = derived[2].get("snapshots_by_worker", _MISSING)
            if objects is not _MISSING:
                names.setdefault(id(objects), f"a{k}.objects")
    return names


def _named(value: Any, names: dict[int, str]) -> Any:
    if id(value) in names:
        return names[id(value)]
    if type(value) is tuple:
        return tuple(_named(item, names) for item in value)
    if type(value) is bc._AttestedView:
        return tuple(
            (name, _named(getattr(value, name, _MISSING), names)) for name in bc._AttestedView.__slots__
        )
    if value is _SENTINEL or value is None or value is _MISSING:
        return repr(value) if value is not _SENTINEL else "SENTINEL"
    if type(value) in (str, int, bool, float):
        return value
    return ("value", type(value).__name__, value if type(value) in (dict, list) else None)


def _run(kind: str, plants: list[int], built_now: bool, use_c: bool) -> Any:
    """The pass over a fresh plan with the drawn plants, through the C paths or the wrapper;
    everything it leaves, as comparable values."""
    plan = _fresh(kind)
    attestations = _attestations(plan)
    frags = _scan(plan.operations)[0]
    names = _identities(plan)
    for attestation in attestations:
        vars(attestation).pop("_attested_view", None)
    views = (bc._VIEW_STATE, WeightPlacementPart, bc._attested_view_end) if use_c else None
    with bc._ViewScope(built_now):
        scope = bc._VIEW_STATE.scope
        held = bc._VIEW_STATE.held
        for attestation, plant in zip(attestations, plants):
            _PLANTS[plant](attestation, scope)
        names = {**_identities(plan), **names}
        result = outcome(
            lambda: _native.revalidate_fragments(
                frags, *_FRAGMENT_TYPES, _identity(plan), bc._attested_view, bc._AttestedView,
                RuntimeBindingEvidence, True, views
            )
        )
        scope_after = sorted(
            (names.get(key, "?") if type(key) is int else repr(key), _named(entry, names)) for key, entry in scope.items()
        )
        held_after = [_named(value, names) for value in held]
    if type(result) is tuple and len(result) == 4 and type(result[3]) is dict:
        keys, routes, runtime_ids, attested = result
        result = (
            keys,
            routes,
            runtime_ids,
            sorted((names.get(key, "?"), _named(entry, names)) for key, entry in attested.items()),
        )
    records = []
    for attestation in attestations:
        record = vars(attestation).get("_attested_view", _MISSING)
        if type(record) is tuple and len(record) == 5:
            record = (_named(record[:4], names), type(record[4]).__name__, len(record[4]))
        else:
            record = _named(record, names)
        records.append(record)
    return result, scope_after, held_after, records


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(_PLAN_KINDS),
    built_now=st.booleans(),
    plants=st.lists(st.integers(0, len(_PLANTS) - 1), min_size=4, max_size=12),
)
def test_c_views_match_the_wrapper(kind: str, built_now: bool, plants: list[int]) -> None:
    assert _run(kind, plants, built_now, True) == _run(kind, plants, built_now, False)


@pytest.mark.parametrize("kind", _PLAN_KINDS)
@pytest.mark.parametrize("built_now", [False, True])
@pytest.mark.parametrize("plant", range(len(_PLANTS)))
def test_each_plant_matches_the_wrapper(kind: str, built_now: bool, plant: int) -> None:
    plants = [plant] * 12
    assert _run(kind, plants, built_now, True) == _run(kind, plants, built_now, False)


def test_common_paths_call_no_python_wrapper(monkeypatch: pytest.MonkeyPatch) -> None:
    """The paths moved to C run no ``_attested_view`` frame: a first view (no record), a view
    with binding's snapshot objects, the scope entry."""
    calls: list[Any] = []
    wrapper = bc._attested_view

    def counted(attestation: Any) -> Any:
        calls.append(attestation)
        return wrapper(attestation)

    for kind, built_now in (("unpickled", False), ("bound", True)):
        plan = _fresh(kind)
        for attestation in _attestations(plan):
            vars(attestation).pop("_attested_view", None)
        frags = _scan(plan.operations)[0]
        with bc._ViewScope(built_now):
            result = _native.revalidate_fragments(
                frags, *_FRAGMENT_TYPES, _identity(plan), counted, bc._AttestedView, RuntimeBindingEvidence, True,
                (bc._VIEW_STATE, WeightPlacementPart, bc._attested_view_end),
            )
            assert result is not None
            assert len(bc._VIEW_STATE.scope) == len(_attestations(plan))
        assert calls == []
        if built_now:
            assert all(entry[2].objects_by_worker is not None for entry in result[3].values())
        else:
            assert all(vars(a).get("_attested_view") == () for a in _attestations(plan))


def test_views_argument_is_checked() -> None:
    plan = _fresh("unpickled")
    frags = _scan(plan.operations)[0]
    args = (frags, *_FRAGMENT_TYPES, _identity(plan), bc._attested_view)
    good = (bc._VIEW_STATE, WeightPlacementPart, bc._attested_view_end)
    for bad in [(), good[:2], good + (None,), [*good], (bc._VIEW_STATE, None, bc._attested_view_end),
                (bc._VIEW_STATE, WeightPlacementPart, None)]:
        with pytest.raises(TypeError, match="views must be"):
            _native.revalidate_fragments(*args, bc._AttestedView, RuntimeBindingEvidence, True, bad)
    with pytest.raises(TypeError, match="views must be"):  # views without a view_type
        _native.revalidate_fragments(*args, None, None, True, good)
    with bc._ViewScope():
        assert _native.revalidate_fragments(*args, bc._AttestedView, RuntimeBindingEvidence, True, good) is not None

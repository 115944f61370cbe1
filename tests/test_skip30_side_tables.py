"""A sealed bind call whose §12.4 check is proven (``bound_contracts._sealed_side_holds``, decided
before the fast revalidation's passes since session 30) does not build what only that check
(``revalidate_side``) reads: ``revalidate_fragments``' provenance keys (``want_keys=False``),
``revalidate_views``' ``row_of`` (None) and its runtime maps (``side_tables=False``: each operation
goes to the executor listing its runtime id object, which is the executor listing its id because
bind's step 6 refuses a runtime fragment id listed twice on a side). Every check of both passes
is the same.

Checked here: which calls build the tables (spies, admitted in watched calls); the two passes
with and without them decide alike and build the same plan tables (every plan and mutation of
test_native_revalidate); inputs edited before the call (runtime ids repeated on a side, equal
copies of ids, and SKIP9's rank and index forgeries) give the same outcome sealed and unsealed, at
4 operations (inert inputs) and 400 (watched)."""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forge_helpers import maybe_profiled, outcome, sized_world
from test_native_revalidate import _MUTATIONS, _PLANS, _identity, _mutated, _scan
from test_reval_memory_r19 import _unpacked
from test_skip27_sealed_coverage import _views
from test_skip29_sealed_side import FORGERIES as SKIP29_FORGERIES, _part_index_swapped
from watched import no_hooks, spy_on

from mooncake.reshard import _native
from mooncake.reshard.weight import ExecutorTransferPlan, ParallelRank, bind_logical_transfer_plan
from mooncake.reshard.weight._planner import bound_contracts as bc
from mooncake.reshard.weight._planner import exactness
from mooncake.reshard.weight._planner.bound_contracts import TransferPlan, _sealed_side_holds

from test_native_revalidate import _FRAGMENT_TYPES


def _spied(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    """Per call of the two passes: whether it was asked for the side tables and whether it built
    them; per side-pass call its result; the carried scan (a sealed call's mark)."""
    exactness.code_watch()
    seen: dict[str, list[Any]] = {"fragments": [], "views": [], "side": [], "carried": []}

    def fragments(args: tuple[Any, ...], result: Any) -> None:
        if result is not None:
            seen["fragments"].append((bool(args[10] if len(args) > 10 else True), result[0] is not None))

    def views(args: tuple[Any, ...], result: Any) -> None:
        if result is not None:
            wanted = args[10] if len(args) > 10 else True
            seen["views"].append((bool(wanted), args[8] is not None, result[0] is not None, result[3] is not None))

    spy_on(monkeypatch, _native, "revalidate_fragments", fragments)
    spy_on(monkeypatch, _native, "revalidate_views", views)
    spy_on(monkeypatch, _native, "revalidate_side", lambda args, result: seen["side"].append(result))
    spy_on(monkeypatch, _native, "revalidate_scan_carried", lambda args, result: seen["carried"].append(result is not None))
    return seen


def _bind(logical: Any, targets: Any, sources: Any) -> Any:
    return bind_logical_transfer_plan(logical, targets, source_bindings=sources)


SIZES = pytest.mark.parametrize("tensors", [2, 200], ids=["4ops", "400ops"])
BUILT = (True, True)
NOT_BUILT = (False, False)


@SIZES
def test_sealed_binds_build_no_side_tables(monkeypatch: pytest.MonkeyPatch, tensors: int) -> None:
    no_hooks()
    logical, targets, sources, _memory = sized_world(tensors)
    seen = _spied(monkeypatch)
    plan = _bind(logical, targets, sources)
    assert seen == {
        "fragments": [NOT_BUILT],
        "views": [(False, False, False, False)],
        "side": [],
        "carried": [True],
    }
    # the same inputs, unsealed (a profile hook): every table built, the side pass run
    again = maybe_profiled(True, lambda: _bind(logical, targets, sources))
    assert seen["fragments"][1:] == [BUILT] and seen["views"][1:] == [(True, True, True, True)]
    assert seen["side"] == [True, True]
    assert again == plan
    assert _views(again) == _views(plan)
    # every other constructor builds them too
    for make in (
        lambda: dataclasses.replace(plan),
        lambda: pickle.loads(pickle.dumps(plan, protocol=pickle.HIGHEST_PROTOCOL)),
    ):
        before = len(seen["fragments"])
        copy = make()
        assert copy == plan and _views(copy) == _views(plan)
        assert seen["fragments"][before:] == [BUILT]


@SIZES
def test_a_sealed_call_whose_precondition_fails_builds_them(monkeypatch: pytest.MonkeyPatch, tensors: int) -> None:
    no_hooks()
    logical, targets, sources, memory = sized_world(tensors)
    targets, sources = _part_index_swapped("source")(logical, targets, sources, memory)
    assert not _sealed_side_holds(logical.target_placement, logical.source_placement)
    seen = _spied(monkeypatch)
    plan = _bind(logical, targets, sources)
    assert seen["carried"] == [True]  # sealed
    assert seen["fragments"] == [BUILT] and seen["views"] == [(True, True, True, True)]
    assert seen["side"] == [True, True]
    monkeypatch.undo()
    assert plan == maybe_profiled(True, lambda: _bind(logical, targets, sources))


# -- the two passes with and without the side tables --------------------------------------------


def _fragments(frags: Any, identity: Any, want_keys: bool) -> Any:
    try:
        return _native.revalidate_fragments(
            frags, *_FRAGMENT_TYPES, identity, bc._attested_view, None, None, want_keys
        )
    except Exception as error:
        return type(error)


def _views_call(plan: Any, runtime_ids: Any, halves: Any, positions: Any, packed: bool, side_tables: bool) -> Any:
    row_of: Any = [] if side_tables else None
    try:
        return _native.revalidate_views(
            plan.source_executors, plan.target_executors, runtime_ids, halves, *positions, ParallelRank,
            ExecutorTransferPlan, row_of, packed, side_tables,
        )
    except Exception as error:
        return type(error)


def _tables(views: Any) -> Any:
    if not isinstance(views, tuple):
        return views
    s_runtime, s_rows, s_table, t_runtime, t_rows, t_table, routes = views
    return (
        [(key, bool(bucket)) for _e, key, bucket in s_rows],
        [(key, bool(bucket)) for _e, key, bucket in t_rows],
        _unpacked(s_table), _unpacked(t_table), _unpacked(routes),
    )


def _both_ways(plan: Any, copy_ids: bool = False) -> Any:
    """Both passes with and without the side tables on ``plan``'s own revalidation inputs (with
    ``copy_ids``, every runtime id an equal copy of the executors' objects)."""
    with bc._ViewScope():
        scanned = _scan(plan.operations)
        if scanned is None:
            return None
        frags, source_of, target_of, _boxes = scanned
        identity = _identity(plan)
        with_keys, without = _fragments(frags, identity, True), _fragments(frags, identity, False)
        if not isinstance(with_keys, tuple):
            assert without == with_keys
            return with_keys
        assert type(without) is tuple and without[0] is None and type(with_keys[0]) is list
        assert without[1:3] == with_keys[1:3] and without[3].keys() == with_keys[3].keys()
        _keys, halves, runtime_ids, _attested = with_keys
        if copy_ids:
            runtime_ids = ["".join(list(i)) if type(i) is str else i for i in runtime_ids]
        answers = []
        for packed in (False, True):
            for positions in ((source_of, target_of), bc._packed_positions(source_of, target_of)):
                full = _views_call(plan, runtime_ids, halves, positions, packed, True)
                lean = _views_call(plan, runtime_ids, halves, positions, packed, False)
                if isinstance(lean, tuple):
                    assert lean[0] is None and lean[3] is None
                    assert _tables(lean) == _tables(full)
                elif isinstance(full, tuple):
                    assert lean is None  # assigned by address only: anything else declines
                else:
                    assert lean == full
                answers.append((_tables(full), _tables(lean)))
        return answers[0]


def test_both_ways_on_every_plan() -> None:
    for name in sorted(_PLANS):
        _both_ways(_PLANS[name])
    # the genuine plans: assigned by address, the lean tables built
    answer = _both_ways(_PLANS["split"])
    assert isinstance(answer[1], tuple) and answer[0] == answer[1]
    # equal copies of the runtime ids: the full pass assigns them by value, the lean one declines
    answer = _both_ways(_PLANS["split"], copy_ids=True)
    assert isinstance(answer[0], tuple) and answer[1] is None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(sorted(_PLANS)),
    choices=st.lists(st.integers(0, len(_MUTATIONS) - 1), min_size=0, max_size=2),
    data=st.data(),
)
def test_both_ways_on_mutated_plans(name: str, choices: list[int], data: Any) -> None:
    mutated = _mutated(name, choices, data)
    if mutated is not None:
        _both_ways(mutated)


def test_argument_types() -> None:
    plan = _PLANS["split"]
    with bc._ViewScope():
        frags, source_of, target_of, _boxes = _scan(plan.operations)
        _keys, halves, runtime_ids, _attested = _native.revalidate_fragments(
            frags, *_FRAGMENT_TYPES, _identity(plan), bc._attested_view
        )
        args = (plan.source_executors, plan.target_executors, runtime_ids, halves, source_of, target_of, ParallelRank,
                ExecutorTransferPlan)
        assert _native.revalidate_views(*args, None) is not None  # row_of None
        with pytest.raises(TypeError):  # row_of: a list or None
            _native.revalidate_views(*args, ())
        with pytest.raises(TypeError):  # one argument too many
            _native.revalidate_views(*args, None, False, False, None)
        with pytest.raises(TypeError):  # one argument too many
            _native.revalidate_fragments(frags, *_FRAGMENT_TYPES, _identity(plan), bc._attested_view, None, None,
                                         False, None, False, None)


# -- inputs edited before the call ----------------------------------------------------------------


def _edit(name: str, edit: Callable[[Any], None]) -> Callable[[str], Callable[..., Any]]:
    def for_side(side: str) -> Callable[..., Any]:
        def forge(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
            edit(targets if side == "target" else sources)
            return targets, sources

        forge.__name__ = f"{side}_{name}"
        return forge

    return for_side


def _set(obj: Any, name: str, value: Any) -> None:
    object.__setattr__(obj, name, value)


def _copy(text: str) -> str:
    return "".join(list(text))  # an equal str, another object


def _listed_twice_across(bindings: Any) -> None:
    """A runtime fragment id of one binding given to a fragment of another (the same object)."""
    _set(bindings[1].fragments[0], "fragment_id", bindings[0].fragments[0].fragment_id)


def _listed_twice_across_copy(bindings: Any) -> None:
    _set(bindings[1].fragments[-1], "fragment_id", _copy(bindings[0].fragments[-1].fragment_id))


def _listed_twice_within(bindings: Any) -> None:
    first, second = bindings[0].fragments[:2]
    _set(second, "fragment_id", first.fragment_id)


def _id_equal_copy(bindings: Any) -> None:
    """Every runtime fragment id an equal copy (another object): the plan binds, the ids the
    operations and the executors read are the same objects again (the same fragments)."""
    for binding in bindings:
        for fragment in binding.fragments:
            _set(fragment, "fragment_id", _copy(fragment.fragment_id))


def _ids_rotated(bindings: Any) -> None:
    """The ids of a binding's fragments rotated by one: each still listed once on the side."""
    fragments = bindings[0].fragments
    ids = [fragment.fragment_id for fragment in fragments]
    for fragment, fragment_id in zip(fragments, ids[1:] + ids[:1]):
        _set(fragment, "fragment_id", fragment_id)


def _id_of_other_side(bindings: Any) -> None:
    """A runtime id taken by a fragment of the other side too is allowed (ids are per side)."""
    _set(bindings[0].fragments[0], "fragment_id", "shared-runtime-id")


EDITS = [
    _edit("listed_twice_across", _listed_twice_across),
    _edit("listed_twice_across_copy", _listed_twice_across_copy),
    _edit("listed_twice_within", _listed_twice_within),
    _edit("id_equal_copy", _id_equal_copy),
    _edit("ids_rotated", _ids_rotated),
    _edit("id_of_other_side", _id_of_other_side),
]
FORGERIES = [edit(side) for edit in EDITS for side in ("target", "source")]
REFUSED = {f"{side}_{name}" for side in ("target", "source") for name in
           ("listed_twice_across", "listed_twice_across_copy", "listed_twice_within")}


@SIZES
@pytest.mark.parametrize("forge", FORGERIES + SKIP29_FORGERIES, ids=lambda f: f.__name__)
def test_forged_inputs_fail_alike_sealed_and_unsealed(
    monkeypatch: pytest.MonkeyPatch, tensors: int, forge: Callable[..., Any]
) -> None:
    """Sealed (the side tables not built when the precondition holds) against unsealed (every
    rule): the same outcome; plans with the same views; the tables built exactly when the
    precondition fails."""
    no_hooks()
    logical, targets, sources, memory = sized_world(tensors)
    targets, sources = forge(logical, targets, sources, memory)
    seen = _spied(monkeypatch)
    sealed = outcome(lambda: _bind(logical, targets, sources))
    monkeypatch.undo()
    holds = _sealed_side_holds(logical.target_placement, logical.source_placement)
    unsealed = maybe_profiled(True, lambda: outcome(lambda: _bind(logical, targets, sources)))
    assert sealed == unsealed
    if type(sealed) is TransferPlan:
        assert _views(sealed) == _views(unsealed)
        assert seen["carried"] == [True]
        assert seen["fragments"] == [NOT_BUILT if holds else BUILT]
        assert [entry[0] for entry in seen["views"]] == [not holds]
    if forge.__name__ in REFUSED:
        assert type(sealed) is tuple and "duplicate" in sealed[1] and "runtime fragment_id" in sealed[1]

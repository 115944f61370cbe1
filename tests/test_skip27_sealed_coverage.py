"""A sealed bind call's revalidation does not run §12.7's pass (``revalidate_coverage``) when the
target placement's part index is its parts (``bound_contracts._sealed_coverage_holds``): bind's
steps and the passes before it already proved every rule of §12.7 on these very objects. Every
other path runs it as before: an unsealed bind (a hook, a subclassed input, a tripped watch),
``replace()``, direct construction, pickle restore, and a sealed call whose part index differs.

Checked here: which calls skip it (spying on the ``_native`` pass, admitted in watched calls);
sealed plans equal unsealed ones (operation and executor views, pickling, equality, hashing) on
generated worlds; forged inputs give the same first error sealed and unsealed."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any, Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forge_helpers import maybe_profiled, outcome, sized_world
from memory_executor import HostWorld
from test_binding_hypothesis import layouts
from test_skip27_final_guards import _part_index_extra_fragment
from watched import admit_in_watched_calls, no_hooks

from mooncake.reshard import _native
from mooncake.reshard.weight import bind_logical_transfer_plan
from mooncake.reshard.weight._planner import exactness
from mooncake.reshard.weight._planner.bound_contracts import TransferPlan, _sealed_coverage_holds
from mooncake.reshard.weight._planner.contracts import LogicalTransferPlan


def _spied(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    """Spies on the coverage pass and the carried scan (a sealed call's mark), admitted in watched
    calls (the package's code collected first: a spy installed while it is first collected
    would be admitted by its file)."""
    exactness.code_watch()
    seen: dict[str, list[Any]] = {"coverage": [], "carried": []}
    real_coverage, real_carried = _native.revalidate_coverage, _native.revalidate_scan_carried
    real_rule = TransferPlan._validate_bound_target_coverage

    def coverage_spy(*args: Any) -> Any:
        result = real_coverage(*args)
        seen["coverage"].append(result)
        return result

    def carried_spy(*args: Any) -> Any:
        result = real_carried(*args)
        seen["carried"].append(result is not None)
        return result

    def rule_spy(self: Any, *args: Any) -> Any:  # the rule-by-rule path's §12.7
        seen["coverage"].append("rule")
        return real_rule(self, *args)

    admit_in_watched_calls(monkeypatch, coverage_spy, carried_spy, rule_spy)
    monkeypatch.setattr(_native, "revalidate_coverage", coverage_spy)
    monkeypatch.setattr(_native, "revalidate_scan_carried", carried_spy)
    monkeypatch.setattr(TransferPlan, "_validate_bound_target_coverage", rule_spy)
    return seen


def _bind(logical: Any, targets: Any, sources: Any) -> Any:
    return bind_logical_transfer_plan(logical, targets, source_bindings=sources)


SIZES = pytest.mark.parametrize("tensors", [2, 200], ids=["4ops", "400ops"])


@SIZES
def test_sealed_binds_skip_the_coverage_pass(monkeypatch: pytest.MonkeyPatch, tensors: int) -> None:
    no_hooks()
    logical, targets, sources, _memory = sized_world(tensors)
    seen = _spied(monkeypatch)
    plan = _bind(logical, targets, sources)
    assert seen == {"coverage": [], "carried": [True]}
    # the same inputs, unsealed (a profile hook): the pass runs and accepts, the same plan
    again = maybe_profiled(True, lambda: _bind(logical, targets, sources))
    assert seen == {"coverage": [True], "carried": [True]}  # (no carried scan: unsealed)
    assert again == plan


def _plan_subclass(logical: Any, targets: Any, sources: Any) -> tuple[Any, Any, Any]:
    sub = type("SubLogicalTransferPlan", (LogicalTransferPlan,), {})
    hooked = copy.copy(logical)
    object.__setattr__(hooked, "__class__", sub)
    return hooked, targets, sources


def _loud_resource_id(logical: Any, targets: Any, sources: Any) -> tuple[Any, Any, Any]:
    """A value whose comparison is user code: a small call is not inert, a large one trips."""

    class Loud(str):
        def __eq__(self, other: object) -> bool:
            return str.__eq__(self, other)

        __hash__ = str.__hash__

    object.__setattr__(logical, "resource_id", Loud(logical.resource_id))
    return logical, targets, sources


@SIZES
@pytest.mark.parametrize("unseal", [_plan_subclass, _loud_resource_id], ids=lambda f: f.__name__.lstrip("_"))
def test_unsealed_binds_run_the_coverage_pass(
    monkeypatch: pytest.MonkeyPatch, tensors: int, unseal: Callable[..., Any]
) -> None:
    no_hooks()
    logical, targets, sources, _memory = sized_world(tensors)
    expected = _bind(logical, targets, sources)
    seen = _spied(monkeypatch)
    plan = _bind(*unseal(logical, targets, sources))
    # §12.7 decided: by the pass (True), or by the rules (the fast path declined a str subclass)
    assert seen["coverage"] and seen["coverage"][-1] in (True, "rule")
    assert plan.operations == expected.operations
    assert plan.target_executors == expected.target_executors
    assert plan.source_executors == expected.source_executors


def test_a_profile_hook_runs_the_coverage_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    logical, targets, sources, _memory = sized_world(2)
    seen = _spied(monkeypatch)
    maybe_profiled(True, lambda: _bind(logical, targets, sources))
    assert seen == {"coverage": [True], "carried": []}


@SIZES
def test_every_other_constructor_runs_the_coverage_pass(monkeypatch: pytest.MonkeyPatch, tensors: int) -> None:
    logical, targets, sources, _memory = sized_world(tensors)
    plan = _bind(logical, targets, sources)
    seen = _spied(monkeypatch)
    copies = {
        "replace": lambda: dataclasses.replace(plan),
        "construction": lambda: TransferPlan(
            **{field.name: getattr(plan, field.name) for field in dataclasses.fields(plan) if field.init}
        ),
        "pickle": lambda: pickle.loads(pickle.dumps(plan, protocol=pickle.HIGHEST_PROTOCOL)),
    }
    for name, make in copies.items():
        before = len(seen["coverage"])
        assert make() == plan, name
        assert seen["coverage"][before:] == [True], name


def test_a_sealed_call_whose_part_index_differs_runs_the_coverage_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    no_hooks()
    logical, targets, sources, _memory = sized_world(2)
    placement = logical.target_placement
    # an equal index of other part objects (copies): the argument needs these very parts
    index = placement._part_index()
    for participant_id, part in list(index.items()):
        index[participant_id] = copy.copy(part)
    seen = _spied(monkeypatch)
    got = outcome(lambda: _bind(logical, targets, sources))
    monkeypatch.undo()
    assert seen["carried"] == [True] and seen["coverage"] == [True]
    assert got == maybe_profiled(True, lambda: outcome(lambda: _bind(logical, targets, sources)))


def test_sealed_coverage_holds_only_for_the_parts_own_index() -> None:
    logical, _targets, _sources, _memory = sized_world(2)
    placement = logical.target_placement
    placement._part_index()
    assert _sealed_coverage_holds(placement)
    parts = placement.parts
    state = placement.__dict__

    def holds_with(index: Any) -> bool:
        saved = state["_parts_by_participant"]
        state["_parts_by_participant"] = index
        try:
            return _sealed_coverage_holds(placement)
        finally:
            state["_parts_by_participant"] = saved

    own = {part.participant_id: part for part in parts}
    assert holds_with(dict(own))  # an equal dict of the very parts
    assert not holds_with(None)
    assert not holds_with({k: v for k, v in list(own.items())[1:]})  # a part missing
    assert not holds_with({**own, "other": parts[0]})  # one more key
    assert not holds_with({k: copy.copy(v) for k, v in own.items()})  # other objects
    first = parts[0].participant_id
    assert not holds_with({**own, first: parts[1]})  # another part under an id
    assert not holds_with(type("D", (dict,), {})(own))  # a dict subclass

    class Key(str):
        pass

    assert not holds_with({Key(k) if k == first else k: v for k, v in own.items()})  # an inexact key
    # two parts with one participant id (the index can hold only one)
    saved_parts = parts
    twin = copy.copy(parts[1])
    object.__setattr__(twin, "participant_id", first)
    object.__setattr__(placement, "parts", (parts[0], twin) + tuple(parts[2:]))
    try:
        assert not holds_with({first: parts[0], **{p.participant_id: p for p in parts[2:]}})
    finally:
        object.__setattr__(placement, "parts", saved_parts)
    assert _sealed_coverage_holds(placement)


def _forge_fragment_box(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
    fragment = logical.target_placement.parts[0].fragments[0]
    object.__setattr__(fragment, "local_shape", tuple(extent + 1 for extent in fragment.local_shape))
    return targets, sources


def _forge_fragment_offset(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
    fragment = logical.target_placement.parts[0].fragments[0]
    object.__setattr__(fragment, "global_offset", tuple(offset + 1 for offset in fragment.global_offset))
    return targets, sources


def _forge_duplicate_participant(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
    parts = logical.target_placement.parts
    object.__setattr__(parts[1], "participant_id", parts[0].participant_id)
    return targets, sources


def _forge_part_listed_twice(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
    placement = logical.target_placement
    object.__setattr__(placement, "parts", placement.parts + (placement.parts[0],))
    return targets, sources


def _forge_operation_dropped(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
    object.__setattr__(logical, "operations", logical.operations[1:])
    return targets, sources


def _forge_unwritten_zero_extent(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
    """A target fragment made empty (and its runtime fragment), its operations dropped."""
    part = logical.target_placement.parts[0]
    fragment = part.fragments[0]
    shape = (0,) + tuple(fragment.local_shape[1:])
    object.__setattr__(fragment, "local_shape", shape)
    object.__setattr__(logical, "operations", tuple(op for op in logical.operations if op.target is not fragment))
    binding = next(binding for binding in targets if binding.participant_id == part.participant_id)
    runtime = next(r for r in binding.fragments if r.placement_fragment_id == fragment.placement_fragment_id)
    object.__setattr__(runtime, "local_shape", shape)
    return targets, sources


def _forge_target_executor_dropped(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
    object.__setattr__(logical, "target_executors", logical.target_executors[1:])
    return targets, sources


FORGERIES = [
    _part_index_extra_fragment,
    _forge_fragment_box,
    _forge_fragment_offset,
    _forge_duplicate_participant,
    _forge_part_listed_twice,
    _forge_operation_dropped,
    _forge_unwritten_zero_extent,
    _forge_target_executor_dropped,
]


@SIZES
@pytest.mark.parametrize("forge", FORGERIES, ids=lambda f: f.__name__.lstrip("_"))
def test_forged_inputs_fail_alike_sealed_and_unsealed(tensors: int, forge: Callable[..., Any]) -> None:
    """Inputs edited before the call against §12.7's rules: the sealed call (which may skip the
    pass) fails with the unsealed call's first message (every rule)."""
    no_hooks()
    outcomes = []
    for profiled in (False, True):
        logical, targets, sources, memory = sized_world(tensors)
        targets, sources = forge(logical, targets, sources, memory)
        outcomes.append(maybe_profiled(profiled, lambda: outcome(lambda: _bind(logical, targets, sources))))
    sealed, unsealed = outcomes
    assert type(unsealed) is tuple, "the forgery is refused by the rules"
    assert sealed == unsealed


def _views(plan: Any) -> tuple[Any, ...]:
    """What the plan derives: executor views, routes, total bytes."""
    return (
        tuple(plan.operation_indices_for_executor(executor, "source") for executor in plan.source_executors),
        tuple(plan.operation_indices_for_executor(executor, "target") for executor in plan.target_executors),
        plan.pipeline_routes,
        plan.total_bytes,
        plan.source_stored_fragment_snapshots,
    )


def _hash_or_error(plan: Any) -> Any:
    try:
        return hash(plan)
    except TypeError as exc:
        return str(exc)


@settings(deadline=None, max_examples=40)
@given(layouts(), st.booleans())
def test_sealed_plans_equal_unsealed_ones(layout: tuple[Any, ...], pickled_first: bool) -> None:
    no_hooks()
    source, target, shared_source, shared_target = layout
    world = HostWorld(source, target, fill=True, shared_source=shared_source, shared_target=shared_target)
    sealed = world.bind()
    unsealed = maybe_profiled(True, world.bind)
    assert sealed == unsealed
    assert _hash_or_error(sealed) == _hash_or_error(unsealed)
    if pickled_first:  # the views built after a round trip, and before it
        restored = pickle.loads(pickle.dumps(sealed, protocol=pickle.HIGHEST_PROTOCOL))
        assert _views(restored) == _views(unsealed)
    assert _views(sealed) == _views(unsealed)
    assert pickle.loads(pickle.dumps(sealed, protocol=pickle.HIGHEST_PROTOCOL)) == unsealed
    assert dataclasses.replace(sealed) == unsealed
    assert world.execute_and_check(sealed)[0] == sealed.total_bytes


def test_sealed_plans_equal_unsealed_ones_at_size() -> None:
    no_hooks()
    logical, targets, sources, _memory = sized_world(200)
    sealed = _bind(logical, targets, sources)
    unsealed = maybe_profiled(True, lambda: _bind(logical, targets, sources))
    assert sealed == unsealed
    assert _views(sealed) == _views(unsealed)
    assert pickle.loads(pickle.dumps(sealed, protocol=pickle.HIGHEST_PROTOCOL)) == unsealed

"""A sealed bind call's revalidation does not run §12.4's pass (``revalidate_side``, both sides)
when both placements' part indexes are their parts and every part's fragments carry the part's
rank (``bound_contracts._sealed_side_holds``; the rank check is ``_native.part_ranks_exact``):
bind's steps then prove every rule of §12.4 on these very objects. Its one output (``used``) is
read by §12.7 only, skipped under a precondition the side check's includes. Every other path runs
it as before: an unsealed bind (a hook, a subclassed input), ``replace()``, direct construction,
pickle restore, and a sealed call whose precondition fails.

Checked here: which calls skip it (spying on the ``_native`` pass and its Python fallback,
admitted in watched calls); the precondition's unit cases; inputs edited before the call (ranks of
fragments, parts, their rank objects, part indexes, bindings, ...) give the same outcome sealed
and unsealed, at 4 operations (inert inputs) and 400 (watched); sealed plans equal unsealed ones
on generated worlds."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from types import SimpleNamespace
from typing import Any, Callable

import pytest
from hypothesis import given, settings

from forge_helpers import maybe_profiled, outcome, sized_world
from memory_executor import HostWorld
from test_binding_hypothesis import layouts
from test_skip27_sealed_coverage import _loud_resource_id, _plan_subclass, _views
from watched import admit_in_watched_calls, no_hooks, spy_on

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank, PlacementFragment, bind_logical_transfer_plan
from mooncake.reshard.weight._planner import bound_contracts, exactness
from mooncake.reshard.weight._planner.bound_contracts import TransferPlan, _sealed_side_holds
from mooncake.reshard.weight.part import WeightPlacementPart


def _spied(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    """Spies on the side pass, its Python fallback, the rules' §12.4 and the carried scan (a sealed
    call's mark), admitted in watched calls (the package's code collected first)."""
    exactness.code_watch()
    seen: dict[str, list[Any]] = {"side": [], "carried": []}
    spy_on(monkeypatch, _native, "revalidate_side", lambda args, result: seen["side"].append(result))
    spy_on(monkeypatch, bound_contracts, "_fast_side_consistent", lambda args, result: seen["side"].append(("python", result)))
    spy_on(monkeypatch, _native, "revalidate_scan_carried", lambda args, result: seen["carried"].append(result is not None))
    real_rule = TransferPlan._validate_executor_consistency

    def rule_spy(self: Any, *args: Any) -> Any:
        seen["side"].append("rule")  # (before it runs: also when it refuses)
        return real_rule(self, *args)

    admit_in_watched_calls(monkeypatch, rule_spy)
    monkeypatch.setattr(TransferPlan, "_validate_executor_consistency", rule_spy)
    return seen


def _bind(logical: Any, targets: Any, sources: Any) -> Any:
    return bind_logical_transfer_plan(logical, targets, source_bindings=sources)


SIZES = pytest.mark.parametrize("tensors", [2, 200], ids=["4ops", "400ops"])


@SIZES
def test_sealed_binds_skip_the_side_pass(monkeypatch: pytest.MonkeyPatch, tensors: int) -> None:
    no_hooks()
    logical, targets, sources, _memory = sized_world(tensors)
    seen = _spied(monkeypatch)
    plan = _bind(logical, targets, sources)
    assert seen == {"side": [], "carried": [True]}
    # the same inputs, unsealed (a profile hook): the pass runs on both sides and accepts
    again = maybe_profiled(True, lambda: _bind(logical, targets, sources))
    assert seen == {"side": [True, True], "carried": [True]}
    assert again == plan
    assert _views(again) == _views(plan)


@SIZES
@pytest.mark.parametrize("unseal", [_plan_subclass, _loud_resource_id], ids=lambda f: f.__name__.lstrip("_"))
def test_unsealed_binds_run_the_side_pass(
    monkeypatch: pytest.MonkeyPatch, tensors: int, unseal: Callable[..., Any]
) -> None:
    no_hooks()
    logical, targets, sources, _memory = sized_world(tensors)
    expected = _bind(logical, targets, sources)
    seen = _spied(monkeypatch)
    plan = _bind(*unseal(logical, targets, sources))
    # §12.4 decided: by the pass on both sides, or by the rules (the fast path declined; a
    # watched call whose watch tripped decides a second time, unsealed)
    assert seen["side"] in ([True, True], ["rule", "rule"], ["rule", "rule", "rule", "rule"])
    assert plan == expected


@SIZES
def test_every_other_constructor_runs_the_side_pass(monkeypatch: pytest.MonkeyPatch, tensors: int) -> None:
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
        before = len(seen["side"])
        assert make() == plan, name
        assert seen["side"][before:] == [True, True], name


def _unselected_fragment_rank(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
    """A fragment of the unselected source replica given another part's rank: nothing bound reads
    it (the plan binds), but the precondition reads every part."""
    placement = logical.source_placement
    selected = {executor.participant_id for executor in logical.source_executors}
    others = [part for part in placement.parts if part.participant_id not in selected]
    object.__setattr__(others[0].fragments[0], "rank", others[1].rank)
    return targets, sources


def _part_index_swapped(side: str) -> Callable[..., Any]:
    """The placement's cached part index names part 1 under part 0's id and back (``_part_index``
    ignores it: the plan binds; the precondition needs the cache to be the parts)."""

    def forge(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
        placement = logical.target_placement if side == "target" else logical.source_placement
        index = placement._part_index()
        first, second = placement.parts[0], placement.parts[1]
        index[first.participant_id], index[second.participant_id] = second, first
        return targets, sources

    forge.__name__ = f"{side}_part_index_swapped"
    return forge


@SIZES
@pytest.mark.parametrize(
    "forge",
    [_unselected_fragment_rank, _part_index_swapped("target"), _part_index_swapped("source")],
    ids=lambda f: f.__name__.lstrip("_"),
)
def test_a_sealed_call_whose_precondition_fails_runs_the_side_pass(
    monkeypatch: pytest.MonkeyPatch, tensors: int, forge: Callable[..., Any]
) -> None:
    no_hooks()
    logical, targets, sources, memory = sized_world(tensors)
    targets, sources = forge(logical, targets, sources, memory)
    assert not _sealed_side_holds(logical.target_placement, logical.source_placement)
    expected = maybe_profiled(True, lambda: outcome(lambda: _bind(logical, targets, sources)))
    seen = _spied(monkeypatch)
    got = outcome(lambda: _bind(logical, targets, sources))
    monkeypatch.undo()
    assert seen == {"side": [True, True], "carried": [True]}
    assert type(got) is TransferPlan and got == expected


def _ranks_hold(parts: Any) -> bool:
    return bool(_native.part_ranks_exact(parts, WeightPlacementPart, PlacementFragment, ParallelRank))


def test_part_ranks_exact() -> None:
    logical, _targets, _sources, _memory = sized_world(2)
    placement = logical.target_placement
    parts = placement.parts
    assert _ranks_hold(parts) and _ranks_hold(logical.source_placement.parts) and _ranks_hold(())
    part, fragment = parts[0], parts[0].fragments[0]
    own = fragment.rank

    def holds_with_rank(rank: Any) -> bool:
        object.__setattr__(fragment, "rank", rank)
        try:
            return _ranks_hold(parts)
        finally:
            object.__setattr__(fragment, "rank", own)

    assert holds_with_rank(part.rank)  # the object itself
    assert holds_with_rank(copy.copy(part.rank))  # an equal exact rank of exact ints
    assert not holds_with_rank(parts[1].rank)  # another part's
    assert not holds_with_rank(dataclasses.replace(part.rank, tp=part.rank.tp + 5))
    flagged = copy.copy(part.rank)
    object.__setattr__(flagged, "dp", bool(flagged.dp))  # equal to the int, not an exact int
    assert not holds_with_rank(flagged)
    loud = copy.copy(part.rank)
    object.__setattr__(loud, "__class__", type("R", (ParallelRank,), {}))  # a subclass
    assert not holds_with_rank(loud)
    assert not holds_with_rank((part.rank.dp, part.rank.tp, part.rank.pp, part.rank.ep))
    assert not holds_with_rank(None)
    # the part's own rank of another class, its fragments not a tuple, a fragment of another class
    saved = part.rank
    object.__setattr__(part, "rank", loud)
    try:
        assert not _ranks_hold(parts)
    finally:
        object.__setattr__(part, "rank", saved)
    fragments = part.fragments
    object.__setattr__(part, "fragments", list(fragments))
    try:
        assert not _ranks_hold(parts)
    finally:
        object.__setattr__(part, "fragments", fragments)
    odd = SimpleNamespace(**{name: getattr(fragment, name) for name in ("rank", "placement_fragment_id")})
    object.__setattr__(part, "fragments", (odd,) + fragments[1:])
    try:
        assert not _ranks_hold(parts)
    finally:
        object.__setattr__(part, "fragments", fragments)
    assert not _ranks_hold(list(parts))  # not an exact tuple
    assert not _ranks_hold((object(),))  # not a part
    sub_part = copy.copy(part)
    object.__setattr__(sub_part, "__class__", type("P", (WeightPlacementPart,), {}))
    assert not _ranks_hold((sub_part,))
    assert _ranks_hold(parts)
    with pytest.raises(TypeError):
        _native.part_ranks_exact(parts, WeightPlacementPart, PlacementFragment)
    with pytest.raises(TypeError):
        _native.part_ranks_exact(parts, WeightPlacementPart, PlacementFragment, "not a class")


def test_sealed_side_holds_needs_both_placements() -> None:
    logical, _targets, _sources, _memory = sized_world(2)
    target, source = logical.target_placement, logical.source_placement
    for placement in (target, source):
        placement._part_index()
    assert _sealed_side_holds(target, source)
    assert not _sealed_side_holds(target, None)  # (a stored source: the fast path declines first)
    assert not _sealed_side_holds(None, source)
    for placement in (target, source):
        fragment = placement.parts[1].fragments[0]
        own = fragment.rank
        object.__setattr__(fragment, "rank", placement.parts[0].rank)
        try:
            assert not _sealed_side_holds(target, source)
        finally:
            object.__setattr__(fragment, "rank", own)
        state = placement.__dict__
        index = state["_parts_by_participant"]
        state["_parts_by_participant"] = {key: copy.copy(part) for key, part in index.items()}
        try:
            assert not _sealed_side_holds(target, source)
        finally:
            state["_parts_by_participant"] = index
    assert _sealed_side_holds(target, source)


# -- inputs edited before the call -------------------------------------------------------------


def _placement_of(logical: Any, side: str) -> Any:
    return logical.target_placement if side == "target" else logical.source_placement


def _bindings_of(targets: Any, sources: Any, side: str) -> Any:
    return targets if side == "target" else sources


def _edit(name: str, edit: Callable[[Any, Any, Any], None]) -> Callable[[str], Callable[..., Any]]:
    """A forgery per side: ``edit(placement, bindings, logical)``, in place."""

    def for_side(side: str) -> Callable[..., Any]:
        def forge(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
            edit(_placement_of(logical, side), _bindings_of(targets, sources, side), logical)
            return targets, sources

        forge.__name__ = f"{side}_{name}"
        return forge

    return for_side


def _set(obj: Any, name: str, value: Any) -> None:
    object.__setattr__(obj, name, value)


def _own_rank_edited(placement: Any, bindings: Any, logical: Any) -> None:
    fragment = placement.parts[0].fragments[0]
    rank = copy.copy(fragment.rank)
    _set(rank, "tp", 7)
    _set(fragment, "rank", rank)


def _all_fragments_moved(placement: Any, bindings: Any, logical: Any) -> None:
    for fragment in placement.parts[0].fragments:
        _set(fragment, "rank", placement.parts[1].rank)


def _part_rank_with_fragments(placement: Any, bindings: Any, logical: Any) -> None:
    rank = dataclasses.replace(placement.parts[0].rank, tp=7)
    _set(placement.parts[0], "rank", rank)
    for fragment in placement.parts[0].fragments:
        _set(fragment, "rank", rank)


def _ranks_swapped(placement: Any, bindings: Any, logical: Any) -> None:
    first, second = placement.parts[0], placement.parts[1]
    a, b = first.rank, second.rank
    _set(first, "rank", b)
    _set(second, "rank", a)
    for fragment in first.fragments:
        _set(fragment, "rank", b)
    for fragment in second.fragments:
        _set(fragment, "rank", a)


def _part_fragment_copy(placement: Any, bindings: Any, logical: Any) -> None:
    part = placement.parts[0]
    fragment = copy.copy(part.fragments[0])
    _set(fragment, "rank", placement.parts[1].rank)
    _set(part, "fragments", (fragment,) + tuple(part.fragments[1:]))


def _operation_fragment_rank(placement: Any, bindings: Any, logical: Any) -> None:
    op = logical.operations[0]
    fragment = op.target if placement is logical.target_placement else op.source
    _set(fragment, "rank", next(part.rank for part in placement.parts if part.rank != fragment.rank))


def _part_index_rank_copy(placement: Any, bindings: Any, logical: Any) -> None:
    part = placement.parts[0]
    forged = copy.copy(part)
    _set(forged, "rank", placement.parts[1].rank)
    placement._part_index()[part.participant_id] = forged


def _runtime_worker(placement: Any, bindings: Any, logical: Any) -> None:
    fragment = bindings[0].fragments[0]
    _set(fragment, "worker_id", fragment.worker_id + "-other")


def _runtime_ids_swapped(placement: Any, bindings: Any, logical: Any) -> None:
    first, second = bindings[0].fragments[:2]
    a, b = first.fragment_id, second.fragment_id
    _set(first, "fragment_id", b)
    _set(second, "fragment_id", a)


def _lease_removed(placement: Any, bindings: Any, logical: Any) -> None:
    _set(bindings[0], "lease_id", None)


def _generation_flag(placement: Any, bindings: Any, logical: Any) -> None:
    _set(bindings[0], "generation", True)


def _participant_renamed(placement: Any, bindings: Any, logical: Any) -> None:
    _set(placement.parts[0], "participant_id", placement.parts[0].participant_id + "-x")


def _parts_reversed(placement: Any, bindings: Any, logical: Any) -> None:
    _set(placement, "parts", tuple(reversed(placement.parts)))


def _digest_replaced(placement: Any, bindings: Any, logical: Any) -> None:
    placement.digest
    state = placement.__dict__
    for key, value in list(state.items()):
        if "digest" in key and type(value) is str and len(value) == 64:
            state[key] = "0" * 64


def _stage_moved(placement: Any, bindings: Any, logical: Any) -> None:
    _set(placement.parts[0].fragments[0], "pipeline_stage_id", 3)


EDITS = [
    _edit("fragment_rank", lambda p, b, l: _set(p.parts[0].fragments[0], "rank", p.parts[1].rank)),
    _edit(
        "fragment_rank_equal_copy", lambda p, b, l: _set(p.parts[0].fragments[0], "rank", copy.copy(p.parts[0].rank))
    ),
    _edit("fragment_own_rank_edited", _own_rank_edited),
    _edit("all_fragments_moved", _all_fragments_moved),
    _edit("part_rank", lambda p, b, l: _set(p.parts[0], "rank", p.parts[1].rank)),
    _edit("part_rank_with_fragments", _part_rank_with_fragments),
    _edit("rank_object_edited", lambda p, b, l: _set(p.parts[0].rank, "tp", 7)),
    _edit("ranks_swapped", _ranks_swapped),
    _edit("part_fragment_copy", _part_fragment_copy),
    _edit("operation_fragment_rank", _operation_fragment_rank),
    _edit("part_index_rank_copy", _part_index_rank_copy),
    _edit("topology_rank", lambda p, b, l: _set(p.topology.participants[0], "rank", p.topology.participants[1].rank)),
    _edit("runtime_worker", _runtime_worker),
    _edit("runtime_ids_swapped", _runtime_ids_swapped),
    _edit("lease_removed", _lease_removed),
    _edit("generation_flag", _generation_flag),
    _edit("participant_renamed", _participant_renamed),
    _edit("parts_reversed", _parts_reversed),
    _edit("digest_replaced", _digest_replaced),
    _edit("stage_moved", _stage_moved),
]
FORGERIES = [edit(side) for edit in EDITS for side in ("target", "source")]
# (rank edits of bound fragments: refused by §12.4 only, so the precondition must refuse them)
REFUSED_BY_SIDE_ONLY = {
    "target_fragment_rank",
    "source_fragment_rank",
    "target_fragment_own_rank_edited",
    "source_fragment_own_rank_edited",
    "target_all_fragments_moved",
    "source_all_fragments_moved",
    "source_part_rank",
    "source_part_fragment_copy",
    "target_operation_fragment_rank",
    "source_operation_fragment_rank",
}


@SIZES
@pytest.mark.parametrize("forge", FORGERIES, ids=lambda f: f.__name__)
def test_forged_inputs_fail_alike_sealed_and_unsealed(
    monkeypatch: pytest.MonkeyPatch, tensors: int, forge: Callable[..., Any]
) -> None:
    """Inputs edited before the call: the sealed call (which may skip the pass) has the unsealed
    call's outcome (every rule), and the ones only §12.4 refuses are kept out of the skip."""
    no_hooks()
    logical, targets, sources, memory = sized_world(tensors)
    targets, sources = forge(logical, targets, sources, memory)
    seen = _spied(monkeypatch)
    sealed = outcome(lambda: _bind(logical, targets, sources))
    monkeypatch.undo()
    # (after the call: its first _part_index() read fills an empty index cache)
    holds = _sealed_side_holds(logical.target_placement, logical.source_placement)
    # the same inputs, every rule (a profile hook)
    unsealed = maybe_profiled(True, lambda: outcome(lambda: _bind(logical, targets, sources)))
    assert sealed == unsealed
    if type(sealed) is TransferPlan:
        assert _views(sealed) == _views(unsealed)
        # sealed, and the pass skipped exactly when the precondition held
        assert seen["carried"] == [True]
        assert seen["side"] == ([] if holds else [True, True])
    if forge.__name__ in REFUSED_BY_SIDE_ONLY:
        assert type(unsealed) is tuple and "executor provenance differs from operations" in unsealed[1]
        assert not holds


_SIDE_CALLS: list[Any] = []


def _counted_side(*args: Any) -> Any:
    result = _REAL_SIDE(*args)
    _SIDE_CALLS.append(result)
    return result


_REAL_SIDE = _native.revalidate_side


@settings(deadline=None, max_examples=30)
@given(layouts())
def test_sealed_plans_equal_unsealed_ones(layout: tuple[Any, ...]) -> None:
    no_hooks()
    source, target, shared_source, shared_target = layout
    world = HostWorld(source, target, fill=True, shared_source=shared_source, shared_target=shared_target)
    # (a live source: the pass would run in this sealed call but for the skip)
    live = not world.stored
    _SIDE_CALLS.clear()
    exactness.code_watch()
    saved = exactness._EXTRA_CODES
    exactness._EXTRA_CODES = saved + (_counted_side.__code__,)
    _native.revalidate_side = _counted_side
    try:
        sealed = world.bind()
    finally:
        _native.revalidate_side = _REAL_SIDE
        exactness._EXTRA_CODES = saved
    if live:
        assert _SIDE_CALLS == ([] if _sealed_side_holds(world.target, world.source) else [True, True])
    unsealed = maybe_profiled(True, world.bind)
    assert sealed == unsealed
    assert _views(sealed) == _views(unsealed)
    assert dataclasses.replace(sealed) == unsealed
    assert world.execute_and_check(sealed)[0] == sealed.total_bytes

"""Step 11's target selection, complete (session 53).

``bind_regions_ordered`` (steps 7 and 8 in one C call) returns the target selection as None when
the operations name every fragment of the target parts and each target attestation's evidence
lists as many fragments as its part: the bound targets then hold every evidence fragment of those
attestations, so the frozenset of their ids is the ids of every evidence fragment, and projecting
the target executors without a selection emits what projecting with it emits. Bind takes the None
only while the sealed call's conditions hold at step 11 (``binding._target_selection``); otherwise
it derives the set.

Checked here:
- the C call against an oracle: None exactly when the two conditions hold (operations dropped so
  that a fragment is unnamed, an evidence longer than its part, or not a tuple: the frozenset the
  three calls return), and a target id that is not an exact str leaves the selections undecided;
- projecting with None equals projecting with the set, at the C call;
- whole binds: a sealed call projects its targets without a selection and binds the plan the
  derived set binds; an unsealed call derives the set; an evidence edited between step 8 and step
  11 binds what the unfused path binds, and a mutant that takes the None regardless of the seal
  binds otherwise (so that test can fail).
"""

from __future__ import annotations

import copy
import sys
from typing import Any, Callable

import pytest

from test_bindpass27_fused import _assert_same, _evidence_ids, _fused, _targets_complete, _three_calls
from test_native_binder_ordered import _world
from watched import admit_in_watched_calls, no_hooks

from mooncake.reshard import _native
from mooncake.reshard.weight import bind_logical_transfer_plan
from mooncake.reshard.weight._planner import binding as binding_module
from mooncake.reshard.weight._planner.bound_contracts import ExecutorTransferPlan, RuntimeFragmentSnapshot
from mooncake.reshard.weight._planner.attestation import RuntimeBindingAttestation, RuntimeBindingEvidence
from mooncake.reshard.weight._planner.bound_validation import _attestation_values
from mooncake.reshard.weight._planner.fragments import BoundWeightFragment
from mooncake.reshard.weight.planner import TransferRegion
from mooncake.reshard.weight.storage_manifest import StoredFragmentSnapshot
from mooncake.reshard.contracts.fragments import RuntimeBindingFragment
from mooncake.reshard.weight.types import ParallelRank, PlacementFragment


# ---------------------------------------------------------------------------------------------
# the C call


def test_complete_targets_give_no_selection() -> None:
    world = _world()
    ops = world.logical.operations
    target, source = world.side(0), world.side(1)
    assert _targets_complete(ops, target)
    new = _assert_same(ops, target, source)
    selections = new[1]
    assert type(selections[0]) is frozenset and selections[1] is None
    old = _three_calls(ops, target, source)
    assert old[1][1] == _evidence_ids(target) and old[1][0] == selections[0]


def test_an_unnamed_target_fragment_keeps_the_set() -> None:
    world = _world()
    ops = world.logical.operations
    target, source = world.side(0), world.side(1)
    dropped = target[0][0][0]  # the first target part's first fragment: no operation names it
    kept = tuple(op for op in ops if op.target is not dropped)
    assert len(kept) < len(ops) and not _targets_complete(kept, target)
    new = _assert_same(kept, target, source)
    assert type(new[1][1]) is frozenset
    assert new[1][1] == _evidence_ids(target) - {target[1][0].binding_fragment(dropped.placement_fragment_id).fragment_id}


def _with_evidence_fragments(target: Any, make: Callable[[tuple[Any, ...]], Any]) -> Any:
    """The side with its first attestation's evidence fragments replaced (in place) by
    ``make(fragments)``; the attestation's id maps are left as they are."""
    evidence = target[1][0].evidence
    object.__setattr__(evidence, "fragments", make(evidence.fragments))
    return target


@pytest.mark.parametrize(
    "make",
    [
        lambda fragments: fragments + (copy.copy(fragments[-1]),),  # one more than the part
        lambda fragments: fragments + fragments[:1],  # a fragment twice
        lambda fragments: list(fragments),  # the same fragments, not a tuple
        lambda fragments: fragments[1:],  # one fewer
    ],
    ids=["longer", "repeated", "list", "shorter"],
)
def test_an_evidence_not_listing_its_part_keeps_the_set(make: Callable[[tuple[Any, ...]], Any]) -> None:
    world = _world()
    ops = world.logical.operations
    target = _with_evidence_fragments(world.side(0), make)
    new = _assert_same(ops, target, world.side(1))
    assert new is not None and type(new[1][1]) is frozenset


class _Id(str):
    pass


def test_a_target_id_not_an_exact_str_leaves_the_selections_undecided() -> None:
    world = _world()
    ops = world.logical.operations
    target, source = world.side(0), world.side(1)
    fragment = target[1][0].evidence.fragments[0]
    object.__setattr__(fragment, "fragment_id", _Id(fragment.fragment_id))
    new = _assert_same(ops, target, source)
    assert new is not None and new[1] is None


def _project(placement: Any, bindings: Any, attestations: Any, selected: Any) -> Any:
    by_key = {(b.placement_id, b.participant_id): b for b in bindings}
    atts = {(b.placement_id, b.participant_id): a for b, a in zip(bindings, attestations)}
    return _native.project_attested(
        ExecutorTransferPlan, RuntimeFragmentSnapshot, RuntimeBindingAttestation, RuntimeBindingEvidence,
        RuntimeBindingFragment, ParallelRank, _attestation_values, placement, placement.parts,
        placement._part_index(), by_key, atts, placement.placement_id, placement.digest, selected,
        PlacementFragment, None,
    )


def test_projecting_without_the_selection_emits_what_the_set_emits() -> None:
    world = _world()
    target = world.side(0)
    new = _fused(world.logical.operations, target, world.side(1))
    assert new[1][1] is None
    unselected = _project(world.target, world.target_bindings, target[1], None)
    for attestation in target[1]:
        _attestation_values(attestation).clear()
    selected = _project(world.target, world.target_bindings, target[1], _evidence_ids(target))
    assert unselected is not None and selected is not None
    assert unselected == selected
    assert [e.fragment_snapshots for e in unselected] == [e.fragment_snapshots for e in selected]


# ---------------------------------------------------------------------------------------------
# whole binds


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, tuple) or isinstance(b, tuple):  # (exception class, message)
        return a == b
    return (
        a == b
        and a.target_executors == b.target_executors
        and [e.fragment_snapshots for e in a.target_executors] == [e.fragment_snapshots for e in b.target_executors]
    )


def _bind(world: Any, monkeypatch: pytest.MonkeyPatch, fused: bool, selected: list[Any]) -> Any:
    """Bind ``world`` with the fused path forced on or off, recording the selection each
    ``project_attested`` call gets (the target side's is the last)."""
    real = _native.project_attested

    def spy(*args: Any) -> Any:
        selected.append(args[14])
        return real(*args)

    admit_in_watched_calls(monkeypatch, spy)
    monkeypatch.setattr(_native, "project_attested", spy)
    monkeypatch.setattr(binding_module, "_ORDERED_MIN_OPERATIONS", 0)
    monkeypatch.setattr(binding_module, "_FUSED_MIN_OPERATIONS", 0 if fused else 1 << 60)
    try:
        return bind_logical_transfer_plan(world.logical, world.target_bindings, source_bindings=world.source_bindings)
    except Exception as exc:
        return (type(exc).__name__, str(exc))


def test_a_sealed_bind_projects_its_targets_without_a_selection(monkeypatch: pytest.MonkeyPatch) -> None:
    no_hooks()
    world = _world()
    selected: list[Any] = []
    fused = _bind(world, monkeypatch, True, selected)
    assert selected and selected[-1] is None
    assert type(selected[0]) is frozenset  # (the source side: a part of the sources)
    selected.clear()
    plain = _bind(world, monkeypatch, False, selected)
    assert selected and type(selected[-1]) is frozenset
    assert not isinstance(fused, tuple) and _same(fused, plain)


def test_an_unsealed_bind_derives_the_set(monkeypatch: pytest.MonkeyPatch) -> None:
    no_hooks()
    world = _world()
    selected: list[Any] = []
    sys.setprofile(lambda frame, event, arg: None)
    try:
        fused = _bind(world, monkeypatch, True, selected)
    finally:
        sys.setprofile(None)
    assert selected and type(selected[-1]) is frozenset
    assert selected[-1] == frozenset(f.fragment_id for b in world.target_bindings for f in b.fragments)
    assert not isinstance(fused, tuple)


def _extra_evidence_fragment(bind_locals: dict[str, Any]) -> None:
    """A target attestation's evidence gets one more runtime fragment (a renamed copy)."""
    evidence = next(iter(bind_locals["target_attestations"].values())).evidence
    extra = copy.copy(evidence.fragments[-1])
    object.__setattr__(extra, "fragment_id", extra.fragment_id + "-extra")
    object.__setattr__(evidence, "fragments", evidence.fragments + (extra,))


def _bind_edited(world: Any, monkeypatch: pytest.MonkeyPatch, fused: bool) -> Any:
    """Bind with a profile hook that edits an evidence at the source side's projection (after
    step 8, before the target side's)."""
    state = {"done": False}

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_name == "_build_executor_plans_with" and not state["done"]:
            state["done"] = True
            _extra_evidence_fragment(frame.f_back.f_locals)

    selected: list[Any] = []
    sys.setprofile(hook)
    try:
        outcome = _bind(world, monkeypatch, fused, selected)
    finally:
        sys.setprofile(None)
    assert state["done"]
    return outcome


def _mutant_target_selection(selections: Any, operations: Any, untouched_since: bool) -> Any:
    if selections is not None and selections[1] is None:
        return None  # ignores the seal
    return binding_module._REAL_TARGET_SELECTION(selections, operations, untouched_since)  # type: ignore[attr-defined]


def test_an_evidence_edited_after_step_8_binds_as_the_unfused_path(monkeypatch: pytest.MonkeyPatch) -> None:
    no_hooks()
    fused = _bind_edited(_world(), monkeypatch, True)
    plain = _bind_edited(_world(), monkeypatch, False)
    assert _same(fused, plain), (fused, plain)
    # The mutant projects the edited evidence whole, and binds otherwise.
    monkeypatch.setattr(binding_module, "_REAL_TARGET_SELECTION", binding_module._target_selection, raising=False)
    monkeypatch.setattr(binding_module, "_target_selection", _mutant_target_selection)
    mutant = _bind_edited(_world(), monkeypatch, True)
    assert not _same(mutant, plain), (mutant, plain)

"""Step 6's attested tables carried to step 11 (session 30).

``attest_many`` with a snapshot class builds, right after each attestation, the table
``attested_executors`` would build from it at step 11 (the evidence snapshots per worker, sorted)
and returns them in a carrier: a capsule holding them in C memory. ``project_attested`` takes a
table from it only for the very attestation it was built from, with the same classes. What the
carrier cannot know is whether a runtime fragment or the attestation changed in between: bind
passes it at step 11 only when no code but the package's can have run since step 6
(``binding._carried_tables``: the sealed call's conditions, checked at step 11).

Checked here:
- the C units: the carrier's tables equal what ``attested_executors`` builds; ``project_attested``
  with the carrier returns what it returns without; a carrier of other attestations, or built
  with other classes, is not used; the carrier exposes nothing to the collector;
- a runtime fragment edited in place between steps 6 and 11, by code that runs there (a plan
  subclass's attribute read, a subclassed source binding's, a profile hook), gives the outcome
  bind gives with carrying off (the rule-by-rule path, which reads the fragments at step 11),
  at 4 operations (inert inputs) and 400 (watched);
- a mutant ``_carried_tables`` that ignores the seal binds a different outcome for some of those
  edits (so the tests above can fail);
- sealed calls take the carrier and bind the same plan as with carrying off.
"""

from __future__ import annotations

import copy
import gc
import sys
from typing import Any, Callable

import pytest

from forge_helpers import first_target_runtime_fragment, outcome, sized_world
from test_native_binder_attest_many import CLASSES
from watched import admit_in_watched_calls, no_hooks

from mooncake.reshard import _native
from mooncake.reshard.weight import bind_logical_transfer_plan
from mooncake.reshard.weight import WeightRuntimeBindingManifest
from mooncake.reshard.weight._planner import binding as binding_module
from mooncake.reshard.weight._planner import exactness
from mooncake.reshard.weight._planner.attestation import (
    RuntimeBindingAttestation,
    RuntimeBindingEvidence,
    _fused_attestations,
)
from mooncake.reshard.weight._planner.bound_contracts import ExecutorTransferPlan, RuntimeFragmentSnapshot
from mooncake.reshard.weight._planner.contracts import LogicalTransferPlan
from mooncake.reshard.contracts.fragments import RuntimeBindingFragment
from mooncake.reshard.weight.types import ParallelRank, PlacementFragment
from mooncake.reshard.weight._planner.bound_validation import _attestation_values

SIZES = pytest.mark.parametrize("tensors", [2, 200], ids=["4ops", "400ops"])


# ---------------------------------------------------------------------------------------------
# C units


def _attest_with_carrier(placement: Any, bindings: tuple[Any, ...], snap_cls: Any = RuntimeFragmentSnapshot) -> Any:
    return _native.attest_many(
        *CLASSES,
        placement,
        placement._part_index(),
        bindings,
        placement.resource_id,
        placement.placement_id,
        placement.digest,
        placement.revision,
        snap_cls,
    )


def _project(placement: Any, bindings: tuple[Any, ...], attestations: list[Any], carried: Any) -> Any:
    by_key = {(b.placement_id, b.participant_id): b for b in bindings}
    atts = {(b.placement_id, b.participant_id): a for b, a in zip(bindings, attestations)}
    return _native.project_attested(
        ExecutorTransferPlan,
        RuntimeFragmentSnapshot,
        RuntimeBindingAttestation,
        RuntimeBindingEvidence,
        RuntimeBindingFragment,
        ParallelRank,
        _attestation_values,
        placement,
        placement.parts,
        placement._part_index(),
        by_key,
        atts,
        placement.placement_id,
        placement.digest,
        None,
        PlacementFragment,
        carried,
    )


def _target(tensors: int) -> tuple[Any, tuple[Any, ...]]:
    logical, targets, _sources, _memory = sized_world(tensors)
    return logical.target_placement, tuple(targets)


def _fresh(bindings: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(copy.copy(binding) for binding in bindings)


@SIZES
def test_the_carrier_holds_what_attested_executors_builds(tensors: int) -> None:
    placement, bindings = _target(tensors)
    result = _attest_with_carrier(placement, bindings)
    assert type(result) is tuple and len(result) == 2
    attestations, carrier = result
    assert all(type(a) is RuntimeBindingAttestation for a in attestations)
    # without the class: the plain list, as before
    assert type(_native.attest_many(*CLASSES, placement, placement._part_index(), bindings, placement.resource_id,
                                    placement.placement_id, placement.digest, placement.revision)) is list
    # with the carrier and without it (other attestations of the same bindings: nothing cached)
    again = _native.attest_many(*CLASSES, placement, placement._part_index(), bindings, placement.resource_id,
                                placement.placement_id, placement.digest, placement.revision)
    carried = _project(placement, bindings, attestations, carrier)
    built = _project(placement, bindings, again, None)
    assert carried is not None and built is not None
    assert carried == built
    for executor, other in zip(carried, built):
        assert executor.fragment_snapshots == other.fragment_snapshots
    # the carried path cached the carrier's table itself; the built one a table of its own
    for attestation in attestations:
        assert "snapshots_by_worker" in _attestation_values(attestation)


@SIZES
def test_a_carrier_of_other_attestations_or_classes_is_not_used(tensors: int) -> None:
    placement, bindings = _target(tensors)
    _, carrier = _attest_with_carrier(placement, bindings)
    # edited after that carrier was built: a table taken from it would be stale
    edited = _fresh(bindings)
    fragment = edited[0].fragments[0]
    fragments = tuple(copy.copy(f) for f in edited[0].fragments)
    object.__setattr__(edited[0], "fragments", fragments)
    attestations = _native.attest_many(*CLASSES, placement, placement._part_index(), edited, placement.resource_id,
                                       placement.placement_id, placement.digest, placement.revision)
    assert all(a is not None for a in attestations)
    expected = _project(placement, edited, attestations, None)
    for a in attestations:
        _attestation_values(a).clear()
    assert _project(placement, edited, attestations, carrier) == expected
    # the carrier's own attestations, asked with another snapshot class: not used (built anew)
    del fragment

    class OtherSnapshot(RuntimeFragmentSnapshot):
        pass

    own, other_carrier = _attest_with_carrier(placement, bindings, OtherSnapshot)
    projected = _project(placement, bindings, own, other_carrier)
    assert projected is not None
    for executor in projected:
        assert all(type(s) is RuntimeFragmentSnapshot for s in executor.fragment_snapshots)


def test_the_carrier_exposes_nothing() -> None:
    placement, bindings = _target(2)
    attestations, carrier = _attest_with_carrier(placement, bindings)
    assert not gc.is_tracked(carrier)
    assert gc.get_referents(carrier) == []
    assert not any(obj is carrier for obj in gc.get_objects())
    assert not hasattr(carrier, "__dict__")
    with pytest.raises((TypeError, ValueError)):
        _project(placement, bindings, attestations, object())


def test_the_carrier_is_a_snapshot_of_step_6() -> None:
    """Why bind passes it only when nothing can have run since: a fragment edited after
    attest_many is read as it was by the carried path, as it is by the built one."""
    placement, bindings = _target(2)
    bindings = tuple(copy.copy(b) for b in bindings)
    attestations, carrier = _attest_with_carrier(placement, bindings)
    fragment = attestations[0].evidence.fragments[0]
    object.__setattr__(fragment, "endpoint", fragment.endpoint + "-moved")
    carried = _project(placement, bindings, attestations, carrier)
    for a in attestations:
        _attestation_values(a).clear()
    built = _project(placement, bindings, attestations, None)
    endpoints = {s.endpoint for e in carried for s in e.fragment_snapshots}
    assert fragment.endpoint not in endpoints
    assert fragment.endpoint in {s.endpoint for e in built for s in e.fragment_snapshots}


# ---------------------------------------------------------------------------------------------
# bind: edits between steps 6 and 11


Forge = Callable[[dict[str, Any]], None]


def _bind_locals() -> dict[str, Any]:
    frame = sys._getframe(1)
    while frame is not None and "target_attestations" not in frame.f_locals:
        frame = frame.f_back
    assert frame is not None
    return frame.f_locals


def _endpoint_moved(local: dict[str, Any]) -> None:
    fragment = first_target_runtime_fragment(local)
    object.__setattr__(fragment, "endpoint", fragment.endpoint + "-moved")


def _worker_renamed(local: dict[str, Any]) -> None:
    fragment = first_target_runtime_fragment(local)
    object.__setattr__(fragment, "worker_id", fragment.worker_id + "-2")


def _id_renamed(local: dict[str, Any]) -> None:
    fragment = first_target_runtime_fragment(local)
    object.__setattr__(fragment, "fragment_id", fragment.fragment_id + "-renamed")


def _device_changed(local: dict[str, Any]) -> None:
    fragment = first_target_runtime_fragment(local)
    object.__setattr__(fragment, "device", "cuda:7")


def _evidence_swapped(local: dict[str, Any]) -> None:
    """The attestation's evidence fragments replaced by edited copies (the attestation itself
    edited in place)."""
    attestation = next(iter(local["target_attestations"].values()))
    evidence = attestation.evidence
    fragments = tuple(copy.copy(f) for f in evidence.fragments)
    object.__setattr__(fragments[0], "endpoint", fragments[0].endpoint + "-copy")
    object.__setattr__(evidence, "fragments", fragments)


FORGES = [_endpoint_moved, _worker_renamed, _id_renamed, _device_changed, _evidence_swapped]


def _plan_channel(logical: Any, targets: Any, sources: Any, forge: Forge) -> tuple[Any, Any, Any, dict[str, bool]]:
    """A plan subclass whose ``source_executors`` read (right after step 6's target side) runs
    ``forge`` once on bind's locals."""
    state = {"done": False}

    class Hooked(LogicalTransferPlan):
        def __getattribute__(self, name: str) -> Any:
            if name == "source_executors" and not state["done"]:
                try:
                    local = _bind_locals()
                except AssertionError:
                    local = None
                if local is not None:
                    state["done"] = True
                    forge(local)
            return object.__getattribute__(self, name)

    plan = copy.copy(logical)
    object.__setattr__(plan, "__class__", Hooked)
    return plan, targets, sources, state


def _source_channel(logical: Any, targets: Any, sources: Any, forge: Forge) -> tuple[Any, Any, Any, dict[str, bool]]:
    """A subclassed source binding whose attribute reads at step 6's source side (after the
    target side was attested) run ``forge`` once on bind's locals."""
    state = {"done": False}

    class Hooked(WeightRuntimeBindingManifest):
        def __getattribute__(self, name: str) -> Any:
            if not state["done"]:
                try:
                    local = _bind_locals()
                except AssertionError:
                    local = None
                if local is not None:
                    state["done"] = True
                    forge(local)
            return object.__getattribute__(self, name)

    hooked = []
    for binding in sources:
        copied = copy.copy(binding)
        object.__setattr__(copied, "__class__", Hooked)
        hooked.append(copied)
    return logical, targets, hooked, state


def _profile_channel(logical: Any, targets: Any, sources: Any, forge: Forge) -> tuple[Any, Any, Any, dict[str, bool]]:
    """Marker: a profile hook that runs ``forge`` at the call of ``_fused_steps_7_8`` (step 7)."""
    return logical, targets, sources, {"done": False, "profile": True}


CHANNELS = [_plan_channel, _source_channel, _profile_channel]


_WORLDS: dict[int, Any] = {}


def _copied(bindings: Any) -> list[Any]:
    """Copies of the bindings with copies of their runtime fragments (the edits stay in them)."""
    out = []
    for binding in bindings:
        copied = copy.copy(binding)
        object.__setattr__(copied, "fragments", tuple(copy.copy(f) for f in binding.fragments))
        out.append(copied)
    return out


def _bind_forged(tensors: int, channel: Any, forge: Forge, carry: bool) -> Any:
    """One world per size (its memory addresses are in the plan), fresh copies per call."""
    if tensors not in _WORLDS:
        _WORLDS[tensors] = sized_world(tensors)
    logical, targets, sources, _memory = _WORLDS[tensors]
    logical, targets, sources, state = channel(logical, _copied(targets), _copied(sources), forge)
    previous_carry = binding_module._CARRY_TABLES
    binding_module._CARRY_TABLES = carry
    previous_profile = sys.getprofile()
    if state.get("profile"):

        def hook(frame: Any, event: str, arg: Any) -> None:
            if event == "call" and frame.f_code.co_name == "_fused_steps_7_8" and not state["done"]:
                state["done"] = True
                forge(frame.f_back.f_locals)

        sys.setprofile(hook)
    try:
        result = outcome(lambda: bind_logical_transfer_plan(logical, targets, source_bindings=sources))
    finally:
        sys.setprofile(previous_profile)
        binding_module._CARRY_TABLES = previous_carry
    assert state["done"]
    return result


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, tuple) and isinstance(b, tuple):  # (exception class, message)
        return a == b
    if isinstance(a, tuple) or isinstance(b, tuple):
        return False
    return (
        a == b
        and a.target_executors == b.target_executors
        and [e.fragment_snapshots for e in a.target_executors] == [e.fragment_snapshots for e in b.target_executors]
    )


@SIZES
@pytest.mark.parametrize("channel", CHANNELS, ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize("forge", FORGES, ids=lambda f: f.__name__.strip("_"))
def test_an_edit_between_steps_6_and_11_binds_as_the_rules(tensors: int, channel: Any, forge: Forge) -> None:
    no_hooks()
    on = _bind_forged(tensors, channel, forge, True)
    off = _bind_forged(tensors, channel, forge, False)
    assert _same(on, off), (on, off)


def _mutant_carried_tables(carry: Any, untouched_since: bool) -> Any:
    return carry[0] if carry else None  # ignores the seal


@SIZES
def test_a_carrier_passed_regardless_of_the_seal_binds_otherwise(
    monkeypatch: pytest.MonkeyPatch, tensors: int
) -> None:
    """The mutant: the edits above then bind a different outcome for some (the tests can fail)."""
    no_hooks()
    monkeypatch.setattr(binding_module, "_carried_tables", _mutant_carried_tables)
    differ = [
        (channel.__name__, forge.__name__)
        for channel in CHANNELS
        for forge in FORGES
        if not _same(_bind_forged(tensors, channel, forge, True), _bind_forged(tensors, channel, forge, False))
    ]
    assert len(differ) == len(CHANNELS) * len(FORGES), differ


# ---------------------------------------------------------------------------------------------
# sealed calls take the carrier


@SIZES
def test_sealed_calls_take_the_carrier_and_bind_the_same_plan(
    monkeypatch: pytest.MonkeyPatch, tensors: int
) -> None:
    no_hooks()
    logical, targets, sources, _memory = sized_world(tensors)
    exactness.code_watch()
    seen: list[bool] = []
    real = _native.project_attested

    def spy(*args: Any) -> Any:
        seen.append(len(args) == 17 and args[16] is not None)
        return real(*args)

    admit_in_watched_calls(monkeypatch, spy)
    monkeypatch.setattr(_native, "project_attested", spy)
    on = bind_logical_transfer_plan(logical, targets, source_bindings=sources)
    assert seen and seen[-1] is True  # the target side's call (the last) got the carrier
    monkeypatch.setattr(binding_module, "_CARRY_TABLES", False)
    seen.clear()
    off = bind_logical_transfer_plan(logical, targets, source_bindings=sources)
    assert seen and not any(seen)
    assert _same(on, off)
    # an unsealed call (a no-op profile hook): no carrier
    seen.clear()
    monkeypatch.setattr(binding_module, "_CARRY_TABLES", True)
    sys.setprofile(lambda frame, event, arg: None)
    try:
        again = bind_logical_transfer_plan(logical, targets, source_bindings=sources)
    finally:
        sys.setprofile(None)
    assert not any(seen)
    assert _same(again, on)


def test_fused_attestations_appends_the_carrier() -> None:
    placement, bindings = _target(2)
    carry: list[Any] = []
    fused = _fused_attestations(placement, bindings, (RuntimeFragmentSnapshot, carry))
    assert type(fused) is list and len(carry) == 1
    assert _fused_attestations(placement, bindings) is not None

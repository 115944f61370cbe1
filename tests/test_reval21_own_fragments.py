"""``own=True`` of ``revalidate_fragments`` and ``revalidate_side``: the revalidation of the plan
a bind call has just built skips what that call's step 7 proved when it built the bound
fragments from exactly its attestations' entries: the attested-entry comparison (each
fragment's placement and binding against its attestation's ``_placement_dict`` /
``_binding_dict`` entries for its placement fragment id; revalidate_fragments), and per side
that the fragment's placement fragment id is attested and its lease generation is the
evidence's (revalidate_side).

Only the bind path passes it, and only for the carried fragments (``revalidate_scan_carried``
accepted them); the constructor, ``replace`` and pickle restore compare every entry again. With
or without it the results are the same (equal plans, byte-equal pickles), and a fragment whose
entries differ is still refused outside bind."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any

import pytest

from test_native_revalidate import _fragments_reference, _identity, _native_fragments, _scan
from test_native_revalidate_carried import _outcome, _world
from test_native_revalidate_fragments_once import _PLANS

from mooncake.reshard import _native
from mooncake.reshard.weight import TransferPlan
from mooncake.reshard.weight._planner import bound_contracts as bc


# (name, position of ``own`` among the arguments)
_OWN_AT = (("revalidate_fragments", 10), ("revalidate_side", 13))


def _own_flags(monkeypatch: pytest.MonkeyPatch, force: Any = None) -> list[Any]:
    """Records each revalidate_fragments / revalidate_side call's ``(name, own)`` (own False when
    not passed); with ``force`` (a bool) passes that instead."""
    seen: list[Any] = []
    for name, at in _OWN_AT:
        original = getattr(_native, name)

        def spy(*args: Any, _original: Any = original, _name: str = name, _at: int = at) -> Any:
            seen.append((_name, bool(args[_at]) if len(args) > _at else False))
            if force is not None:
                args = args[:_at] + (force,)
            return _original(*args)

        monkeypatch.setattr(bc._native, name, spy)
    return seen


_BOUND = [("revalidate_fragments", True), ("revalidate_side", True), ("revalidate_side", True)]


@pytest.mark.parametrize("name", ["bound", "split"])
def test_own_returns_what_the_full_comparison_returns(name: str) -> None:
    plan = _PLANS[name]
    scanned = _scan(plan.operations)
    assert scanned is not None
    frags = scanned[0]
    with bc._ViewScope():
        full = _native_fragments(frags, _identity(plan))
        own = _native.revalidate_fragments(
            frags, *_fragment_types(), _identity(plan), bc._attested_view, None, None, True
        )
        reference = _fragments_reference(frags, _identity(plan))
    assert full is not None and own is not None
    assert own[:3] == full[:3] == reference[:3]
    assert own[3].keys() == full[3].keys()
    for key, entry in own[3].items():
        assert all(a is b for a, b in zip(entry, full[3][key]))


def _fragment_types() -> tuple[Any, ...]:
    from test_native_revalidate import _FRAGMENT_TYPES

    return tuple(_FRAGMENT_TYPES)


def test_own_still_checks_the_rest() -> None:
    """``own`` skips only the entry comparison: an owner, a forged lease or an inexact class
    still declines."""
    plan = _PLANS["bound"]
    for forge in ("runtime_lease_id", "instance_id"):
        scanned = _scan(plan.operations)
        frags = list(scanned[0])
        fragment = frags[3]
        clone = copy.copy(fragment)
        object.__setattr__(clone, forge, "forged")
        frags[3] = clone
        with bc._ViewScope():
            got = _native.revalidate_fragments(
                frags, *_fragment_types(), _identity(plan), bc._attested_view, None, None, True
            )
        assert got is None, forge


def test_entries_are_compared_without_own() -> None:
    """A bound fragment holding another fragment's binding: the full comparison declines it (and
    the plan's constructor refuses it); ``own`` would not look, so only bind may pass it."""
    plan = _PLANS["bound"]
    scanned = _scan(plan.operations)
    frags = list(scanned[0])
    first, other = frags[0], next(f for f in frags[1:] if f.attestation is frags[0].attestation)
    clone = copy.copy(first)
    object.__setattr__(clone, "binding", other.binding)
    frags[0] = clone
    with bc._ViewScope():
        assert _native_fragments(frags, _identity(plan)) is None


def test_only_bind_passes_own(monkeypatch: pytest.MonkeyPatch) -> None:
    logical, targets, sources = _world()
    with monkeypatch.context() as patch:
        seen = _own_flags(patch)
        plan = _outcome(logical, targets, sources)
        assert isinstance(plan, TransferPlan)
        assert seen == _BOUND
    with monkeypatch.context() as patch:
        seen = _own_flags(patch)
        assert dataclasses.replace(plan) == plan
        values = {f.name: getattr(plan, f.name) for f in dataclasses.fields(plan) if f.init}
        assert TransferPlan(**values) == plan
        for protocol in (4, 5):
            assert pickle.loads(pickle.dumps(plan, protocol=protocol)) == plan
        assert copy.deepcopy(plan) == plan
        assert len(seen) == 5 * 3 and not any(own for _, own in seen)


@pytest.mark.parametrize("whole_targets", [True, False])
def test_binding_with_and_without_own_agrees(monkeypatch: pytest.MonkeyPatch, whole_targets: bool) -> None:
    logical, targets, sources = _world(whole_targets)
    with monkeypatch.context() as patch:
        seen = _own_flags(patch)
        own = _outcome(logical, targets, sources)
        assert seen == _BOUND
    with monkeypatch.context() as patch:
        _own_flags(patch, force=False)
        full = _outcome(logical, targets, sources)
    assert isinstance(own, TransferPlan) and own == full
    assert own.target_executors == full.target_executors and own.source_executors == full.source_executors
    for protocol in (2, 4, 5):
        assert pickle.dumps(own, protocol=protocol) == pickle.dumps(full, protocol=protocol)


def _side_args(plan: TransferPlan) -> list[tuple[Any, ...]]:
    from test_native_revalidate_side_batched import _sides

    return _sides(plan)


def _side(args: tuple[Any, ...], own: bool) -> Any:
    from mooncake.reshard.weight import ParallelRank
    from mooncake.reshard.weight._planner.bound_contracts import RuntimeBindingAttestation
    from mooncake.reshard.weight.types import PlacementFragment

    return _native.revalidate_side(
        *args, set(), RuntimeBindingAttestation, ParallelRank, bc.RuntimeFragmentSnapshot, PlacementFragment,
        None, own,
    )


@pytest.mark.parametrize("name", ["bound", "split"])
def test_own_side_decides_as_the_full_side(name: str) -> None:
    with bc._ViewScope():
        for args in _side_args(_PLANS[name]):
            assert _side(args, False) is True
            assert _side(args, True) is True


@pytest.mark.parametrize("field, value", [("lease_generation", 12345), ("lease_generation", True)])
def test_side_generation_is_checked_without_own(field: str, value: Any) -> None:
    """A fragment whose lease generation is not the evidence's: the full side check declines
    (the constructor refuses the plan); ``own`` does not look (bind's step 7 set it)."""
    with bc._ViewScope():
        args = _side_args(_PLANS["bound"])[1]
        frags = list(args[0])
        position = next(p for p in range(len(frags)) if p in set(args[3]))
        forged = copy.copy(frags[position])
        object.__setattr__(forged, field, value)
        frags[position] = forged
        forged_args = (frags,) + args[1:]
        assert _side(forged_args, False) is None
        assert _side(forged_args, True) is True


def test_side_own_argument_is_a_bool() -> None:
    with bc._ViewScope():
        args = _side_args(_PLANS["bound"])[0]
        assert _side(args, 0) is True
        with pytest.raises(TypeError):
            _native.revalidate_side(*args, set(), object, object, object, None, None, True, 1)

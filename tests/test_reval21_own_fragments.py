"""``revalidate_fragments(..., own=True)``: the revalidation of the plan a bind call has just
built skips the attested-entry comparison (each fragment's placement and binding against its
attestation's ``_placement_dict`` / ``_binding_dict`` entries for its placement fragment id),
which that call's step 7 proved when it built the bound fragments from exactly those entries.

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


def _own_flags(monkeypatch: pytest.MonkeyPatch, force: Any = None) -> list[Any]:
    """Records each revalidate_fragments call's ``own`` (False when not passed); with ``force``
    (a bool) passes that instead."""
    seen: list[Any] = []
    original = _native.revalidate_fragments

    def spy(*args: Any) -> Any:
        own = bool(args[10]) if len(args) > 10 else False
        seen.append(own)
        if force is not None:
            args = args[:10] + (force,)
        return original(*args)

    monkeypatch.setattr(bc._native, "revalidate_fragments", spy)
    return seen


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
        assert seen == [True]
    with monkeypatch.context() as patch:
        seen = _own_flags(patch)
        assert dataclasses.replace(plan) == plan
        values = {f.name: getattr(plan, f.name) for f in dataclasses.fields(plan) if f.init}
        assert TransferPlan(**values) == plan
        for protocol in (4, 5):
            assert pickle.loads(pickle.dumps(plan, protocol=protocol)) == plan
        assert copy.deepcopy(plan) == plan
        assert seen and not any(seen)


@pytest.mark.parametrize("whole_targets", [True, False])
def test_binding_with_and_without_own_agrees(monkeypatch: pytest.MonkeyPatch, whole_targets: bool) -> None:
    logical, targets, sources = _world(whole_targets)
    with monkeypatch.context() as patch:
        seen = _own_flags(patch)
        own = _outcome(logical, targets, sources)
        assert seen == [True]
    with monkeypatch.context() as patch:
        _own_flags(patch, force=False)
        full = _outcome(logical, targets, sources)
    assert isinstance(own, TransferPlan) and own == full
    assert own.target_executors == full.target_executors and own.source_executors == full.source_executors
    for protocol in (2, 4, 5):
        assert pickle.dumps(own, protocol=protocol) == pickle.dumps(full, protocol=protocol)

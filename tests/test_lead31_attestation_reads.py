"""``revalidate_side``'s attestation memo and a property planted on the attestation class (session
31, lead; session 29's open item).

In a large plan (``row_of`` given: 4096+ fragment positions) ``revalidate_side`` keeps each
attestation's ``placement`` in a memo for the rest of the call when reading it ran no Python
code. It used to take that from the attestation's exact class alone; the package's class holds
no descriptor under ``placement`` (``tests/test_lead30_class_fields.py``), but one can be planted
on it at run time, and an unsealed revalidation (``replace()``, restore) would then run it once
per attestation and answer each later read from the memo, where the rules run it at each read.
The pass now checks the class once per call (``rs_attestation_inert``: metaclass type, the
generic attribute lookup, no descriptor under ``placement`` in the MRO) and reads a non-inert
class's attestations as it reads a foreign class's: each read runs the attribute.

Mutant checked by hand: ``rs_attestation_inert`` returning 1 (the property runs once per
attestation: the per-fragment count below fails).
"""

from __future__ import annotations

from typing import Any

import pytest

from test_native_revalidate import _bound_plan
from watched import admit_in_watched_calls

from mooncake.reshard.weight._planner import bound_contracts as bc
from mooncake.reshard.weight._planner.bound_contracts import RuntimeBindingAttestation


def _recorded_large_side_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """The argument tuples of a large bind's two ``revalidate_side`` calls (row_of given)."""
    calls: list[tuple[Any, ...]] = []
    real = bc._native.revalidate_side

    def record(*args: Any) -> Any:
        calls.append(tuple(list(a) if type(a) is list else a for a in args))  # the caller empties its lists
        return real(*args)

    with monkeypatch.context() as patch:
        patch.setattr(bc._native, "revalidate_side", record)
        admit_in_watched_calls(patch, record)  # (the bind stays sealed: one revalidation)
        patch.setattr(bc, "_sealed_side_holds", lambda target, source: False)  # (the pass runs)
        _bound_plan(tensors=tuple(f"tensor-{i:04d}" for i in range(380)), target_tp=9, shape=(4, 18))
    assert len(calls) == 2
    return calls


def test_a_placement_property_runs_at_every_read_of_a_large_side(monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[int] = []

    def placement(attestation: Any) -> Any:
        reads.append(id(attestation))
        return attestation.__dict__["placement"]

    for args in _recorded_large_side_calls(monkeypatch):
        assert len(args[0]) >= 4096 and type(args[12]) is list  # row_of given: the memos serve
        positions = set(bc._position_list(args[3]))
        attestations = {id(getattr(args[0][p], "attestation")) for p in positions}
        assert len(attestations) * 4 < len(positions)  # (a memo would answer most reads)
        for entry in args[6].values():  # (the object tables were dropped after the real call)
            entry[2]._objects_by_pfid = None
        reads.clear()
        with monkeypatch.context() as patch:
            patch.setattr(RuntimeBindingAttestation, "placement", property(placement), raising=False)
            answer = bc._native.revalidate_side(*(args[:7] + (set(),) + args[8:]))
        assert answer is True  # (the property returns the instance's own placement)
        assert len(reads) >= len(positions)  # each fragment's read ran it: none answered from the memo
        assert set(reads) == attestations


class _Planting(str):
    """A str equal to its value whose ``==`` (run by ``by_key``'s lookup of a key tuple holding
    it, inside the pass) plants ``property`` as ``RuntimeBindingAttestation.placement`` once."""

    __slots__ = ()
    planted: list[Any] = []

    def __eq__(self, other: object) -> bool:
        if _Planting.planted and not _Planting.planted[-1]:
            setattr(RuntimeBindingAttestation, "placement", _Planting.planted[0])
            _Planting.planted.append(True)
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_a_property_planted_inside_the_pass_is_seen_after_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The class is checked again after a point where code may have run (a key lookup that was
    not pure): the property a key's ``==`` plants half-way through the call runs at every read
    after it. Mutant checked by hand: the check kept for the whole call (the reads after the
    planting answered from the memo: once per attestation)."""
    reads: list[int] = []

    def placement(attestation: Any) -> Any:
        reads.append(id(attestation))
        return attestation.__dict__["placement"]

    for args in _recorded_large_side_calls(monkeypatch):
        positions = sorted(set(bc._position_list(args[3])))
        keys = list(args[1])
        at = positions[len(positions) // 2]  # (the memo has served the reads before it)
        keys[at] = tuple(_Planting(item) if k == 0 else item for k, item in enumerate(keys[at]))
        for entry in args[6].values():
            entry[2]._objects_by_pfid = None
        reads.clear()
        _Planting.planted = [property(placement), False]
        try:
            answer = bc._native.revalidate_side(*(args[:1] + (keys,) + args[2:7] + (set(),) + args[8:]))
        finally:
            if "placement" in RuntimeBindingAttestation.__dict__:
                delattr(RuntimeBindingAttestation, "placement")
        assert _Planting.planted[-1] is True  # planted inside the pass
        assert answer is True
        after = [p for p in positions if p >= at]
        assert len(reads) >= len(after)  # each read after the planting ran it


def test_the_memo_serves_the_package_class() -> None:
    """The package's own class is inert: no descriptor under ``placement`` anywhere in its MRO,
    metaclass type, the generic attribute lookup (what lets the memo serve a plain revalidation)."""
    assert type(RuntimeBindingAttestation) is type
    assert RuntimeBindingAttestation.__getattribute__ is object.__getattribute__
    assert not hasattr(RuntimeBindingAttestation, "__getattr__")
    for cls in RuntimeBindingAttestation.__mro__:
        held = cls.__dict__.get("placement")
        assert held is None or not hasattr(type(held), "__get__")

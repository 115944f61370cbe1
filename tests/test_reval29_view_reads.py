"""Session 29 (REVAL9): ``revalidate_side``'s view reads, and the object table it builds.

``rs_fragment`` checks each view table plain (exact str keys) before probing it, and again after
any point where Python code may have run (``code_epoch``, AUDIT8). A view field read used to count
as such a point always; it now counts only when it may run code: a view of a class whose fields
are ``__slots__`` slots read and written by the generic attribute lookup (``rs_view_inert``: the
``_AttestedView`` class) runs none, and an object table the pass builds itself from binding's
snapshot objects (``rs_objects_by_pfid``) with no code run holds exact str keys only, so it is
not walked again. That is what removed the repeated walks of each view's object table at Kimi
scale. These tests pin the other side: where a view read does run code (a property or a
``__getattribute__`` put on the class, as a hook could), the tables are checked again before
their next probe, and a table the pass built is checked again once code has run after it.
``rs_objects_by_pfid`` also checks each snapshot's placement fragment id is an exact str before
hashing it: a str subclass's ``__hash__`` no longer runs inside the pass.

Each forgery case fails with the mutant it names (checked by hand on this branch's C).
"""

from __future__ import annotations

import copy
import dataclasses
import sys
from typing import Any, Callable

import pytest

from mooncake.reshard import _native
from mooncake.reshard.contracts.fragments import RuntimeBindingFragment  # noqa: F401  (import order)
from mooncake.reshard.weight import ExecutorTransferPlan, ParallelRank
from mooncake.reshard.weight._planner import bound_contracts as bc
from mooncake.reshard.weight._planner.bound_contracts import (
    PlacementFragment as _PF,
    RuntimeBindingAttestation,
    RuntimeFragmentSnapshot,
)

from test_audit28_side_view_tables import _planted_dict, _run
from test_native_revalidate import _bound_plan, _identity, _native_fragments, _scan
from test_reval2_memory_r19 import _call
from test_sound25_plain_dicts import Colliding, _plan, _ruled, _same
from watched import admit_in_watched_calls

_SLOT = bc._AttestedView.__dict__["generation"]  # the member descriptor of the slot


class _Reads:
    """Plants, at the first read of a view's generation after ``after`` views were read, colliding
    keys in the ``attested_pfids`` dicts of the views read before (tables the pass already checked
    and probed, whose views have fragments left)."""

    def __init__(self, after: int = 1) -> None:
        self.views: list[Any] = []
        self.after = after
        self.planted = 0

    def read(self, view: Any, depth: int = 1) -> Any:
        # (counted only when a C pass of the fast revalidation reads it: its caller's frame is
        # _fast_revalidate_live's; Python code reads views too)
        if sys._getframe(depth).f_code.co_name == "_fast_revalidate_live" and all(seen is not view for seen in self.views):
            if len(self.views) == self.after and not self.planted:
                for seen in self.views:
                    if type(seen.attested_pfids) is dict and seen.attested_pfids:
                        _planted_dict(seen.attested_pfids)
                        self.planted += 1
            self.views.append(view)
        return _SLOT.__get__(view, type(view))

    @staticmethod
    def write(view: Any, value: Any) -> None:
        _SLOT.__set__(view, value)


def _replace_outcome(
    monkeypatch: pytest.MonkeyPatch, install: Callable[[pytest.MonkeyPatch, _Reads], None], planted: bool = True
) -> None:
    plan = _plan()
    expected = _ruled(lambda: dataclasses.replace(plan), monkeypatch)
    reads = _Reads()
    with monkeypatch.context() as patch:
        install(patch, reads)
        result, watch = _run(lambda view: 0, lambda: dataclasses.replace(plan))
    assert (reads.planted > 0) == planted  # keys were planted in tables probed before
    assert watch.hits == []  # no planted key's __eq__ ran inside a pass
    _same(result, expected)


def test_a_property_on_the_view_class_counts_as_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """``_AttestedView.generation`` made a property (a class edit a hook can make): its read runs
    Python code, so the tables are checked again. Mutant: rs_slot_attr taking any class attribute
    for a slot (4 probes inside revalidate_side)."""

    def install(patch: pytest.MonkeyPatch, reads: _Reads) -> None:
        patch.setattr(bc._AttestedView, "generation", property(reads.read, reads.write))

    _replace_outcome(monkeypatch, install)


def test_a_getattribute_on_the_view_class_counts_as_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``__getattribute__`` put on ``_AttestedView``: every field read runs it. Mutant:
    rs_view_inert not checking the class's attribute lookup slot."""

    def install(patch: pytest.MonkeyPatch, reads: _Reads) -> None:
        def getattribute(view: Any, name: str) -> Any:
            if name == "generation":
                return reads.read(view, 2)
            return object.__getattribute__(view, name)

        patch.setattr(bc._AttestedView, "__getattribute__", getattribute)

    # AUDIT38: revalidate_fragments now declines first (a view's key_base is read only on a class
    # with the generic lookup: rf_inert), so no pass runs the class's code; the outcome is still
    # the rules'
    _replace_outcome(monkeypatch, install, planted=False)


class _PlantInBuilt(int):
    """A view's generation whose ``==`` (run by rs_fragment, after the view's object table was
    built and marked plain, before the table's probe) plants a colliding key for every attested
    id in that table."""

    def __eq__(self, other: object) -> bool:
        if not self.planted:
            table = self.view._objects_by_pfid
            if type(table) is dict:
                for pfid in list(self.view.attested_pfids):
                    table[Colliding(f"{pfid}~planted")] = None
                self.planted = 1
        return int(self) == other

    __hash__ = int.__hash__


def test_a_built_table_is_checked_again_after_code_ran(monkeypatch: pytest.MonkeyPatch) -> None:
    """The object table the pass built (plain when made, not walked) is walked again once Python
    code has run (a non-int generation's ``__eq__``). Mutant: rs_view_plain trusting a built
    table's mark whatever the epoch."""
    plan = _plan()
    swapped: list[_PlantInBuilt] = []

    def swap(view: Any) -> int:
        if type(view.attested_pfids) is not dict or not view.attested_pfids:
            return 0
        generation = _PlantInBuilt(view.generation)
        generation.view = view
        generation.planted = 0
        view.generation = generation
        swapped.append(generation)
        return 1

    result, watch = _run(swap, lambda: dataclasses.replace(plan))
    assert watch.planted > 0
    assert any(generation.planted for generation in swapped)
    assert watch.hits == []
    _same(result, _ruled(lambda: dataclasses.replace(plan), monkeypatch))


# -- the object table's ids are exact str before they are hashed --------------------------------


class _Hashed(str):
    """A placement fragment id that records its hash calls."""

    calls: list[str] = []

    def __hash__(self) -> int:
        _Hashed.calls.append(str(self))
        return str.__hash__(self)

    def __eq__(self, other: object) -> bool:
        return str.__eq__(self, other)


def _views_with(attested: dict[int, Any], extra: Callable[[Any], Any]) -> dict[int, Any]:
    """A copy of ``attested`` whose views (with binding's objects) hold one more group of snapshot
    objects, ``extra(view)`` (a worker no executor names), and no object table yet."""
    out = {}
    for key, (pdict, bdict, view) in attested.items():
        clone = object.__new__(bc._AttestedView)
        for slot in bc._AttestedView.__slots__:
            try:
                object.__setattr__(clone, slot, getattr(view, slot))
            except AttributeError:
                pass
        objects = view.objects_by_worker
        if type(objects) is dict and objects:
            object.__setattr__(clone, "objects_by_worker", {**objects, "zz-extra-worker": extra(view)})
        object.__setattr__(clone, "_objects_by_pfid", None)
        out[key] = (pdict, bdict, clone)
    return out


def _side_answers(plan: Any, extra: Callable[[Any], Any]) -> tuple[list[Any], dict[int, Any]]:
    """revalidate_side's answers on both sides with the built-now views given ``extra``."""
    with bc._ViewScope(built_now=True):
        frags, source_of, target_of, _boxes = _scan(plan.operations)
        keys, routes_half, runtime_ids, attested = _native_fragments(frags, _identity(plan))
        row_of: list[Any] = []
        views = _native.revalidate_views(
            plan.source_executors, plan.target_executors, runtime_ids, routes_half, source_of, target_of,
            ParallelRank, ExecutorTransferPlan, row_of,
        )
        s_runtime, s_rows, _s, t_runtime, t_rows, _t, _r = views
        s_row_of, t_row_of = row_of or (None, None)
        table = _views_with(attested, extra)
        used: set[int] = set()
        answers = [
            _call(
                _native.revalidate_side, frags, keys, runtime_ids, side_of, runtime, rows, table, used,
                RuntimeBindingAttestation, ParallelRank, RuntimeFragmentSnapshot, _PF, side_row_of,
            )
            for side_of, runtime, rows, side_row_of in (
                (source_of, s_runtime, s_rows, s_row_of),
                (target_of, t_runtime, t_rows, t_row_of),
            )
        ]
    return answers, table


def _snapshot_copy(view: Any, pfid_class: type) -> tuple[Any, ...]:
    snapshot = copy.copy(next(iter(view.objects_by_worker.values()))[0])
    object.__setattr__(snapshot, "placement_fragment_id", pfid_class("zz-unattested-pfid"))
    return (snapshot,)


def test_object_table_ids_are_exact_str_before_hashing() -> None:
    """A snapshot whose placement fragment id is a str subclass in a view's objects: the pass
    declines without hashing it (on main's C its ``__hash__`` ran in the table insertion, then
    the table was declined). With an exact str there the same views are accepted, so the table
    is built in both runs."""
    plan = _bound_plan(target_tp=4, shape=(4, 8))  # (a fresh plan: its attestations keep binding's objects)
    answers, table = _side_answers(plan, lambda view: _snapshot_copy(view, str))
    assert answers == [True, True]
    assert any("zz-unattested-pfid" in (view._objects_by_pfid or {}) for _p, _b, view in table.values())
    _Hashed.calls = []
    answers, table = _side_answers(plan, lambda view: _snapshot_copy(view, _Hashed))
    assert _Hashed.calls == []
    assert answers[0] is None
    # the cache is left unbuilt where the pass declined (the rules decide)
    assert all(view._objects_by_pfid is None for _p, _b, view in table.values())


class _Probed(str):
    """A key hashing as the str before its ``~``, recording each ``==`` it runs."""

    calls: list[str] = []

    def __hash__(self) -> int:
        return hash(str.split(self, "~")[0])

    def __eq__(self, other: object) -> bool:
        _Probed.calls.append(str(self))
        return False

    __ne__ = str.__ne__


def test_a_setattr_on_the_view_class_counts_as_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``__setattr__`` put on ``_AttestedView`` runs when the pass stores the object table it
    built in the view's cache: code that can plant keys in that very table, so the table is not
    taken as plain (it is walked, and declined). Mutant: rs_view_inert not checking the class's
    attribute assignment slot (the planted keys' ``__eq__`` runs in the probes)."""
    plan = _bound_plan(target_tp=4, shape=(4, 8))
    planted: list[int] = []

    def setattr_hook(view: Any, name: str, value: Any) -> None:
        if name == "_objects_by_pfid" and type(value) is dict and value:
            items = list(value.items())
            value.clear()
            for pfid, snapshot in items:  # each in front of its id: a probe compares it first
                value[_Probed(f"{pfid}~planted")] = None
                value[pfid] = snapshot
            planted.append(len(value))
            _Probed.calls.clear()  # (the insertions above compare them with the keys there)
        object.__setattr__(view, name, value)

    _Probed.calls = []
    with monkeypatch.context() as patch:
        patch.setattr(bc._AttestedView, "__setattr__", setattr_hook)
        answers, _table = _side_answers(plan, lambda view: _snapshot_copy(view, str))
    assert planted
    assert _Probed.calls == []
    assert answers[0] is None


# -- revalidate_side's loop memos, on a plan with row_of (4096+ fragment positions) ----------------


def test_large_recorded_sides_are_decided_again_with_the_memos(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first loop's key and attestation memos (rs_memo) serve only when revalidate_views gave
    ``row_of`` (4096+ fragment positions): a large bind's recorded side calls, made again, accept
    (each attestation's placement found through the memo after its first read). Mutant: a memo
    returning the object instead of its value (the target side declines)."""
    calls: list[tuple[tuple[Any, ...], Any]] = []
    real = _native.revalidate_side

    def record(*args: Any) -> Any:
        kept = tuple(list(a) if type(a) is list else a for a in args)  # the caller empties its lists
        result = real(*args)
        calls.append((kept, result))
        return result

    monkeypatch.setattr(bc._native, "revalidate_side", record)
    admit_in_watched_calls(monkeypatch, record)  # (the bind stays sealed: one revalidation)
    # (a sealed bind skips the pass when bound_contracts._sealed_side_holds: made false here, the
    # call is still sealed and its views carry the snapshot objects)
    monkeypatch.setattr(bc, "_sealed_side_holds", lambda target, source: False)
    # (9 target participants: more attestations than revalidate_side's ``active`` table takes
    # placements, so a memo giving a wrong placement declines the target side)
    _bound_plan(tensors=tuple(f"tensor-{i:04d}" for i in range(380)), target_tp=9, shape=(4, 18))
    monkeypatch.setattr(bc._native, "revalidate_side", real)
    assert len(calls) == 2
    for args, result in calls:
        assert len(args[0]) >= 4096 and type(args[12]) is list and len(args[12]) == len(args[0])  # row_of given
        assert result is True
        views = [entry[2] for entry in args[6].values()]
        for view in views:  # (the object tables were dropped after the real call: built again)
            view._objects_by_pfid = None
        assert real(*(args[:7] + (set(),) + args[8:])) is True

"""AUDIT39 (the COV38 note): the fast revalidation compares ParallelRank objects field by field
(rc_rank_differs in revalidate_coverage, rs_rank_key, rw_rank_tuple) where the rules use the
class's ``==`` / ``!=`` / ``hash``. A patched ``ParallelRank.__eq__`` (or a planted ``__ne__``)
made the rules refuse a plan (``bound target executor differs from target placement``) that the
fast path accepted. The per-call proof (``_native.fields_unshadowed``) now also requires
ParallelRank's own ``__eq__`` and ``__hash__`` to be the imported ones and no ``__ne__`` of its
own; else the rules decide."""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any, Callable

import pytest

from forge_helpers import outcome, sized_world

from mooncake.reshard.weight import ParallelRank, bind_logical_transfer_plan
from mooncake.reshard.weight._planner import bound_contracts as bc


def _world() -> Any:
    return sized_world(2)


def _plan() -> Any:
    logical, targets, sources, _memory = _world()
    return bind_logical_transfer_plan(logical, targets, source_bindings=sources)


def _fields_eq(self: Any, other: Any) -> Any:
    if type(other) is not type(self):
        return NotImplemented
    return all(self.__dict__[name] == other.__dict__[name] for name in ("dp", "tp", "pp", "ep"))


PATCHES = {
    "eq-never": ("__eq__", lambda self, other: False),
    "ne-always": ("__ne__", lambda self, other: True),
    "eq-fields": ("__eq__", _fields_eq),  # equal decisions: accepted both ways
    "hash-constant": ("__hash__", lambda self: 7),  # equal decisions too
}


def _calls(stage: str) -> Callable[[], Any]:
    if stage == "bind":
        logical, targets, sources, _memory = _world()
        return lambda: bind_logical_transfer_plan(logical, targets, source_bindings=sources)
    plan = _plan()
    if stage == "replace":
        return lambda: dataclasses.replace(plan)
    payload = pickle.dumps(plan)
    return lambda: pickle.loads(payload)


def _plain(result: Any) -> Any:
    return result if isinstance(result, tuple) else "accepted"


@pytest.mark.parametrize("stage", ("replace", "restore", "bind"))
@pytest.mark.parametrize("patch", sorted(PATCHES))
def test_a_patched_rank_equality_decides_as_the_rules(patch, stage):
    name, method = PATCHES[patch]
    call = _calls(stage)
    had, own = name in ParallelRank.__dict__, ParallelRank.__dict__.get(name)
    setattr(ParallelRank, name, method)
    try:
        real = bc._fast_revalidate_live
        bc._fast_revalidate_live = lambda *args, **kwargs: False
        try:
            rules = _plain(outcome(call))
        finally:
            bc._fast_revalidate_live = real
        fast = _plain(outcome(call))
    finally:
        if had:
            setattr(ParallelRank, name, own)
        else:
            delattr(ParallelRank, name)
    assert fast == rules
    if patch in ("eq-never", "ne-always"):
        assert rules == ("ValueError", "bound target executor differs from target placement")
    dataclasses.replace(_plan())


def test_the_rank_pins_hold_for_the_imported_class():
    assert bc._native.fields_unshadowed(bc._STATE_FIELDS) is True
    (spec,) = [spec for spec in bc._STATE_FIELDS if len(spec) == 4]
    assert spec[0] is ParallelRank and dict(spec[2]) == {
        "__eq__": ParallelRank.__dict__["__eq__"], "__hash__": ParallelRank.__dict__["__hash__"]
    }
    for bad in ((ParallelRank, (), (("__eq__", None),), ()), (ParallelRank, (), (), ("__eq__",)), (ParallelRank, (), 1, ())):
        assert bc._native.fields_unshadowed((bad,)) is False

"""Foreign code inside the fast revalidation's C passes through field *values* (AUDIT5, session 25).

csrc/plain_dict.h (SOUND5, ``c2c1695``) closed the instance-dict *key* channel. The C passes still
compare, hash and iterate field *values* they have not proven exact: a str, int or tuple subclass
stored in a package object's field (``object.__setattr__``; frozen dataclasses do not stop it)
has its ``__eq__`` / ``__hash__`` run by ``PyObject_RichCompare`` / ``PyDict_GetItem`` /
``PyDict_SetItem`` inside ``revalidate_fragments`` (the placements' identity, placement fragment
ids), ``revalidate_views`` (executors' fragment ids, runtime fragment ids), ``attested_view``
(evidence participant ids), ``revalidate_spaces`` and ``revalidate_coverage`` (regions'
``overlap_offset`` / ``overlap_shape`` and their items). ``revalidate_shapes``, which declines most
of these kinds, runs *after* ``revalidate_fragments`` and ``revalidate_views``, and never reads the
regions' boxes. Nothing gates ``dataclasses.replace()`` (nor direct construction, nor an unsealed
bind), so that code runs while the passes hold borrowed references and take their decisions.

Each case plants one such value and records a dunder called directly by a ``_native`` function
running under ``_fast_revalidate_live`` (same watch as tests/test_sound25_plain_dicts.py). Strict
xfails until the passes decline non-exact values before comparing or hashing them (or the
unsealed entry paths walk the graph with ``_native.inert_graph`` first).
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any, Callable

import pytest

import native_watch
from native_watch import ForeignInt, ForeignStr, ForeignTuple, native_hits

from forge_helpers import outcome, sized_world

from mooncake.reshard import _native
from mooncake.reshard.weight import TransferPlan, bind_logical_transfer_plan

def _plan() -> Any:
    logical, targets, sources, _memory = sized_world(2)
    return bind_logical_transfer_plan(logical, targets, source_bindings=sources)


def _op(plan: Any) -> Any:
    return plan.operations[0]


def _item(cls: type, index: int) -> Callable[[Any], Any]:
    return lambda value: type(value)(cls(item) if at == index else item for at, item in enumerate(value))


# (what to reach from the plan, field, how to make the value foreign, the pass it runs in)
_CASES: dict[str, tuple[Callable[[Any], Any], str, Callable[[Any], Any], str]] = {
    "plan.resource_id": (lambda plan: plan, "resource_id", ForeignStr, "revalidate_fragments"),
    "plan.revision": (lambda plan: plan, "revision", ForeignStr, "revalidate_fragments"),
    "attested placement.resource_id": (
        lambda plan: _op(plan).target.attestation.placement, "resource_id", ForeignStr, "revalidate_fragments"),
    "attested placement.weight_generation": (
        lambda plan: _op(plan).target.attestation.placement, "weight_generation", ForeignInt, "revalidate_fragments"),
    "placement fragment.placement_fragment_id": (
        lambda plan: _op(plan).target.placement, "placement_fragment_id", ForeignStr, "revalidate_fragments"),
    "executor.fragment_ids[0]": (
        lambda plan: plan.target_executors[0], "fragment_ids", _item(ForeignStr, 0), "revalidate_views"),
    "runtime fragment.fragment_id": (
        lambda plan: _op(plan).target.binding, "fragment_id", ForeignStr, "revalidate_views"),
    "evidence.participant_id": (
        lambda plan: _op(plan).target.attestation.evidence, "participant_id", ForeignStr, "attested_view"),
    "region.overlap_offset": (lambda plan: _op(plan), "overlap_offset", ForeignTuple, "revalidate_spaces"),
    "region.overlap_offset[0]": (lambda plan: _op(plan), "overlap_offset", _item(ForeignInt, 0), "revalidate_spaces"),
    "region.overlap_shape": (lambda plan: _op(plan), "overlap_shape", ForeignTuple, "revalidate_spaces"),
    "region.overlap_shape[1]": (lambda plan: _op(plan), "overlap_shape", _item(ForeignInt, 1), "revalidate_spaces"),
}


def _hits(call: Callable[[], Any]) -> list[str]:
    return native_hits(call, under="_fast_revalidate_live")


def _planted(case: str) -> Any:
    reach, field, make, _pass = _CASES[case]
    plan = _plan()
    obj = reach(plan)
    object.__setattr__(obj, field, make(getattr(obj, field)))
    return plan


def test_the_watch_sees_a_foreign_dunder_called_by_a_pass() -> None:
    """The watch itself: a ForeignStr compared by a C function it follows is recorded, the same
    value compared by Python code is not."""
    watch = native_watch.NativeWatch()
    native_watch._ACTIVE.append(watch)
    try:
        watch.stack.append((_native.revalidate_scan, sys._getframe()))
        assert ForeignStr("a") in {"a": 1}  # (a dict probe made by C code on behalf of this frame)
        expected = ["str.__hash__ in revalidate_scan", "str.__eq__ in revalidate_scan"]
        assert watch.hits == expected

        def python_compare() -> bool:
            return ForeignStr("a") == "a"

        assert python_compare()
        assert watch.hits == expected
    finally:
        native_watch._ACTIVE.pop()


def test_an_exact_plan_runs_no_foreign_code() -> None:
    assert _hits(lambda: dataclasses.replace(_plan())) == []


# Cases closed since (regression tests now): the commit that closed each.
_LEAD = "lead r25 (revalidate.c: exact identity values in rf_identity, exact-str placement fragment id before the " \
    "attested dicts' probes, exact int-tuple boxes in revalidate_scan)"
_FIXED = {
    "evidence.participant_id": "7528fe1 (attested_view: exact-str participant)",
    "attested placement.resource_id": _LEAD,
    "attested placement.weight_generation": _LEAD,
    "placement fragment.placement_fragment_id": _LEAD,
    "plan.resource_id": _LEAD,
    "plan.revision": _LEAD,
    "region.overlap_offset": _LEAD,
    "region.overlap_offset[0]": _LEAD,
    "region.overlap_shape": _LEAD,
    "region.overlap_shape[1]": _LEAD,
    "executor.fragment_ids[0]": "lead r25 (revalidate_views: an executor's fragment_ids exact strs before its view key is hashed)",
    "runtime fragment.fragment_id": "lead r25 (revalidate_fragments: an exact-str runtime fragment id before it keys the views' maps)",
}
_OPEN = pytest.mark.xfail(strict=True, raises=AssertionError, reason="AUDIT5 F1: a C pass of the fast revalidation "
                          "compares or hashes a field value it has not proven exact (str/int/tuple subclass): its "
                          "dunder runs inside the pass")


@pytest.mark.parametrize(
    "case", [pytest.param(case, marks=() if case in _FIXED else _OPEN) for case in sorted(_CASES)]
)
def test_replace_runs_no_foreign_code_inside_a_pass(case: str) -> None:
    plan = _planted(case)
    assert _hits(lambda: dataclasses.replace(plan)) == []


def _marked(cases: list[str], reason: str) -> list[Any]:
    """``cases`` as parameters, the open ones (not in ``_FIXED``) strict xfails for ``reason``."""
    mark = pytest.mark.xfail(strict=True, raises=AssertionError, reason=reason)
    return [pytest.param(case, marks=() if case in _FIXED else mark) for case in cases]


_SOME = ["plan.resource_id", "executor.fragment_ids[0]", "region.overlap_offset"]


@pytest.mark.parametrize("case", _marked(_SOME, "AUDIT5 F1: the same channels through direct TransferPlan(...) construction"))
def test_construction_runs_no_foreign_code_inside_a_pass(case: str) -> None:
    plan = _planted(case)

    def construct() -> Any:
        return TransferPlan(**{f.name: getattr(plan, f.name) for f in dataclasses.fields(plan) if f.init})

    assert _hits(construct) == []


def _bind_inputs(field: str, make: Callable[[Any], Any], which: str) -> Any:
    logical, targets, sources, _memory = sized_world(2)
    obj = logical if which == "logical" else logical.operations[0]
    object.__setattr__(obj, field, make(getattr(obj, field)))
    return logical, targets, sources


# (closed by the lead's r25 fixes: the logical plan's resource_id, the region boxes)
@pytest.mark.parametrize(
    ("which", "field", "make"),
    [("logical", "resource_id", ForeignStr), ("region", "overlap_offset", ForeignTuple),
     ("region", "overlap_shape", _item(ForeignInt, 0))],
)
def test_unsealed_bind_runs_no_foreign_code_inside_a_pass(which: str, field: str, make: Any) -> None:
    logical, targets, sources = _bind_inputs(field, make, which)
    assert _hits(lambda: bind_logical_transfer_plan(logical, targets, source_bindings=sources)) == []


@pytest.mark.parametrize("case", _marked(_SOME, "AUDIT5 F1: the same channels through pickle restore (the foreign "
                                          "values survive pickling; the restore's revalidation runs the fast path)"))
def test_pickle_restore_runs_no_foreign_code_inside_a_pass(case: str) -> None:
    import pickle

    data = pickle.dumps(_planted(case))
    assert _hits(lambda: pickle.loads(data)) == []

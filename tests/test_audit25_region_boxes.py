"""The fast revalidation accepts a region box the rules refuse (AUDIT5, session 25).

``revalidate_scan`` checks a region's loop tuples and ints exact but passes its ``overlap_offset``
and ``overlap_shape`` on unchecked; ``revalidate_spaces`` and ``revalidate_coverage`` only compare
them (running a subclass's ``__eq__``, tests/test_audit25_value_channels.py) and
``revalidate_shapes`` never reads them. After the fast path accepted, ``recheck_regions`` hands the
region (not provably canonical in C) to ``TransferRegion.__post_init__``, which *converts* a tuple
subclass to a tuple in place and passes. The rules (``_require_typed_region``: an exact tuple or
list of exact ints) refuse the same plan with "transfer region overlap_offset must contain
integers". So ``replace()``, direct construction and an unsealed bind return a plan where the rules
raise, and ``replace()`` edits the region shared with the plan it was given.

Closed (lead, session 25): ``rv_operation`` declines a box that is not an exact tuple of exact ints
(the rules then refuse it); these are regression tests now.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import pytest

from forge_helpers import outcome, sized_world

from mooncake.reshard.weight import TransferPlan, bind_logical_transfer_plan
from mooncake.reshard.weight._planner import bound_contracts


class BoxTuple(tuple):  # type: ignore[type-arg]
    """A tuple subclass with no behaviour of its own: no foreign code needed for this finding."""

    __slots__ = ()


def _plan() -> Any:
    logical, targets, sources, _memory = sized_world(2)
    return bind_logical_transfer_plan(logical, targets, source_bindings=sources)


def _boxed(region: Any, field: str) -> None:
    object.__setattr__(region, field, BoxTuple(getattr(region, field)))


def _outcomes(make_call: Callable[[], Callable[[], Any]], monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """(the outcome with the fast path, the outcome with the rules alone), each on fresh inputs."""
    fast = outcome(make_call())
    with monkeypatch.context() as patch:
        patch.setattr(bound_contracts, "_fast_revalidate", lambda *args, **kwargs: False)
        ruled = outcome(make_call())
    return fast, ruled


_FIELDS = ["overlap_offset", "overlap_shape"]
_REASON = ("AUDIT5 F2: the fast revalidation never checks a region's overlap_offset/overlap_shape exact; "
           "recheck_regions then converts the tuple subclass in place, while the rules refuse it")


def test_the_rules_refuse_a_tuple_subclass_box(monkeypatch: pytest.MonkeyPatch) -> None:
    """The oracle the xfails below compare with (so they do not pass by both refusing)."""
    def make() -> Callable[[], Any]:
        plan = _plan()
        _boxed(plan.operations[0], "overlap_offset")
        return lambda: dataclasses.replace(plan)

    _fast, ruled = _outcomes(make, monkeypatch)
    assert ruled == ("ValueError", "transfer region overlap_offset must contain integers")


@pytest.mark.parametrize("field", _FIELDS)
def test_replace_refuses_a_tuple_subclass_box(field: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def make() -> Callable[[], Any]:
        plan = _plan()
        _boxed(plan.operations[0], field)
        return lambda: dataclasses.replace(plan)

    fast, ruled = _outcomes(make, monkeypatch)
    assert not isinstance(fast, TransferPlan)
    assert fast == ruled


def test_replace_leaves_the_given_plan_as_it_was() -> None:
    plan = _plan()
    _boxed(plan.operations[0], "overlap_offset")
    outcome(lambda: dataclasses.replace(plan))
    assert type(plan.operations[0].overlap_offset) is BoxTuple


@pytest.mark.parametrize("field", _FIELDS)
def test_construction_refuses_a_tuple_subclass_box(field: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def make() -> Callable[[], Any]:
        plan = _plan()
        _boxed(plan.operations[0], field)
        values = {f.name: getattr(plan, f.name) for f in dataclasses.fields(plan) if f.init}
        return lambda: TransferPlan(**values)

    fast, ruled = _outcomes(make, monkeypatch)
    assert not isinstance(fast, TransferPlan)
    assert fast == ruled


@pytest.mark.parametrize("field", _FIELDS)
def test_unsealed_bind_refuses_a_tuple_subclass_box(field: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The logical plan's region (a tuple subclass set after construction) unseals the bind; the
    bound plan keeps the logical regions' boxes."""

    def make() -> Callable[[], Any]:
        logical, targets, sources, _memory = sized_world(2)
        _boxed(logical.operations[0], field)
        return lambda: bind_logical_transfer_plan(logical, targets, source_bindings=sources)

    fast, ruled = _outcomes(make, monkeypatch)
    assert ruled == ("ValueError", f"transfer region {field} must contain integers")
    assert fast == ruled


@pytest.mark.parametrize("field", _FIELDS)
def test_pickle_restore_refuses_a_tuple_subclass_box(field: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import pickle

    def make() -> Callable[[], Any]:
        plan = _plan()
        _boxed(plan.operations[0], field)
        data = pickle.dumps(plan)
        return lambda: pickle.loads(data)

    fast, ruled = _outcomes(make, monkeypatch)
    assert not isinstance(ruled, TransferPlan)
    assert fast == ruled

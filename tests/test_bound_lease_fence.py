"""A bound fragment's fence fields (``instance_id``, ``runtime_lease_id``, ``lease_generation``)
forged in place inside a ``TransferPlan`` (changed with ``object.__setattr__`` or removed with
``object.__delattr__``), and pickling a plan whose bound fragment lost a field.

``copy`` (the plan's revalidation) and a pickle round trip (the constructor's checks, spec §9.3
step 6 / 9) refused a changed lease, but ``dataclasses.replace`` accepted it: the revalidation's
fast path did not read the lease, and no rule compared it with the attestation. A removed lease
was accepted by ``copy``, ``deepcopy`` and ``replace`` for the same reason; pickling a plan whose
fragment lost any field raised ``AttributeError`` from ``BoundWeightFragment.__reduce__`` (the
other forged fields: the constructor's ``ValueError`` on load). The same held for the instance id
(``replace`` accepted any value but a list) and for a generation of another type equal to the
attested one (``True`` or ``1.0`` for ``1``: the fast path and the executor rule compare with
``==``). Every path now gives the constructor's message (docs/api.md, "Beyond the reference: a
bound fragment's fence")."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any, Callable

import pytest

from layout_classes import data_module
from spec_helpers import raises

from mooncake.reshard.weight import TransferPlan
from mooncake.reshard.weight._planner.fragments import BoundWeightFragment

_maker = data_module("make_bound_pickles_r16")

_FENCE = "bound fragment runtime fence differs from attestation"
_LEASE = "bound fragment runtime_lease_id must be non-empty"
_INSTANCE = "bound fragment instance_id must be non-empty"
_GENERATION = "bound fragment lease_generation must fit in an unsigned 64-bit integer"
_GONE = object()
_FIELDS = tuple(f.name for f in dataclasses.fields(BoundWeightFragment))

# Every way a plan is constructed again from an existing one.
ROUND_TRIPS: dict[str, Callable[[Any], Any]] = {
    "replace": dataclasses.replace,
    "copy": copy.copy,
    "deepcopy": copy.deepcopy,
    **{f"pickle{protocol}": (lambda p, protocol=protocol: pickle.loads(pickle.dumps(p, protocol))) for protocol in range(6)},
}


@pytest.fixture(scope="module")
def plan() -> TransferPlan:
    return _maker.bound_plan()


def _forged(plan: TransferPlan, index: int, side: str, field: str, value: Any) -> TransferPlan:
    fragment = copy.copy(getattr(plan.operations[index], side))
    if value is _GONE:
        object.__delattr__(fragment, field)
    else:
        object.__setattr__(fragment, field, value)
    op = copy.copy(plan.operations[index])
    object.__setattr__(op, side, fragment)
    forged = copy.copy(plan)
    object.__setattr__(forged, "operations", plan.operations[:index] + (op,) + plan.operations[index + 1 :])
    return forged


# (value, message): a str lease other than the attested one is a fence failure (spec §9.3 step 9);
# anything else fails the type rule first (step 6), as in the constructor.
LEASES = [
    ("x", _FENCE),
    ("other", _FENCE),
    ("", _LEASE),
    (None, _LEASE),
    (5, _LEASE),
    (_GONE, _LEASE),
]


@pytest.mark.parametrize("trip", sorted(ROUND_TRIPS))
@pytest.mark.parametrize("side", ["target", "source"])
@pytest.mark.parametrize("last", [False, True])
@pytest.mark.parametrize("value, message", LEASES, ids=["x", "other", "empty", "None", "int", "gone"])
def test_a_forged_lease_is_refused(plan: TransferPlan, trip: str, side: str, last: bool, value: Any, message: str) -> None:
    index = len(plan.operations) - 1 if last else 0
    if value == "other":  # a real lease of the plan, of another runtime than this fragment's
        mine = getattr(plan.operations[index], side).runtime_lease_id
        value = next(
            fragment.runtime_lease_id
            for op in plan.operations
            for fragment in (op.source, op.target)
            if fragment.runtime_lease_id != mine
        )
    forged = _forged(plan, index, side, "runtime_lease_id", value)
    with raises(message):
        ROUND_TRIPS[trip](forged)


class _Str(str):
    """A str subclass (the constructor takes exact str only)."""


def _another(plan: TransferPlan, index: int, side: str, field: str) -> Any:
    """The field's value in another fragment of the plan (a real value of another runtime)."""
    mine = getattr(getattr(plan.operations[index], side), field)
    return next(
        getattr(fragment, field)
        for op in plan.operations
        for fragment in (op.source, op.target)
        if getattr(fragment, field) != mine
    )


# (value, message), as for the lease: a str other than the attested one is a fence failure, anything
# else (a str subclass equal to the attested id too) fails the type rule first.
INSTANCES = [
    ("x", _FENCE),
    ("other", _FENCE),
    ("", _INSTANCE),
    (None, _INSTANCE),
    (5, _INSTANCE),
    ("same-subclass", _INSTANCE),
    (_GONE, _INSTANCE),
]


@pytest.mark.parametrize("trip", sorted(ROUND_TRIPS))
@pytest.mark.parametrize("side", ["target", "source"])
@pytest.mark.parametrize("last", [False, True])
@pytest.mark.parametrize(
    "value, message", INSTANCES, ids=["x", "other", "empty", "None", "int", "subclass", "gone"]
)
def test_a_forged_instance_id_is_refused(
    plan: TransferPlan, trip: str, side: str, last: bool, value: Any, message: str
) -> None:
    index = len(plan.operations) - 1 if last else 0
    if value == "other":
        value = _another(plan, index, side, "instance_id")
    elif value == "same-subclass":
        value = _Str(getattr(plan.operations[index], side).instance_id)
    forged = _forged(plan, index, side, "instance_id", value)
    with raises(message):
        ROUND_TRIPS[trip](forged)


# A generation of another type equal to the attested int (it is 1 in this plan), or none: the type
# rule's message on every path.
GENERATIONS = [(True, "True"), (1.0, "float"), (_GONE, "gone"), (None, "None"), ("1", "str")]


@pytest.mark.parametrize("trip", sorted(ROUND_TRIPS))
@pytest.mark.parametrize("side", ["target", "source"])
@pytest.mark.parametrize("last", [False, True])
@pytest.mark.parametrize("value", [value for value, _ in GENERATIONS], ids=[label for _, label in GENERATIONS])
def test_a_generation_of_another_type_is_refused(plan: TransferPlan, trip: str, side: str, last: bool, value: Any) -> None:
    index = len(plan.operations) - 1 if last else 0
    assert getattr(plan.operations[index], side).lease_generation == 1
    forged = _forged(plan, index, side, "lease_generation", value)
    with raises(_GENERATION):
        ROUND_TRIPS[trip](forged)


def test_another_generation_fails_a_rule_on_every_path(plan: TransferPlan) -> None:
    # An int generation other than the attested one: the spec's executor rule refuses it first
    # when the plan is revalidated as it is (replace), the constructor's fence when the fragment is
    # rebuilt (copy, pickle): refused everywhere, with the first failing rule's message.
    forged = _forged(plan, 0, "target", "lease_generation", 5)
    for name, trip in ROUND_TRIPS.items():
        message = "target executor fragment provenance differs" if name == "replace" else _FENCE
        with raises(message):
            trip(forged)


def test_the_attested_fence_is_accepted(plan: TransferPlan) -> None:
    # equal values in other objects (a str built again, a large int equal to the generation) are
    # the attested ones: every path accepts them
    fragment = plan.operations[0].target
    for field, value in (
        ("instance_id", "".join(list(fragment.instance_id))),
        ("lease_generation", int("1")),
        ("lease_generation", (1 << 70) >> 70),
    ):
        forged = _forged(plan, 0, "target", field, value)
        for trip in ROUND_TRIPS.values():
            assert trip(forged) == plan


def test_the_attested_lease_is_accepted(plan: TransferPlan) -> None:
    # an equal lease of another str object is the attested value: every path accepts it
    lease = plan.operations[0].target.runtime_lease_id
    forged = _forged(plan, 0, "target", "runtime_lease_id", "".join(list(lease)))
    for trip in ROUND_TRIPS.values():
        assert trip(forged) == plan


# The constructor's message of a removed field (what a pickle round trip of the others gives,
# and what ``copy`` and ``replace`` give for the same plan).
REMOVED = {
    "placement": "bound fragment placement is invalid",
    "binding": "bound fragment runtime binding is invalid",
    "instance_id": "bound fragment instance_id must be non-empty",
    "runtime_lease_id": _LEASE,
    "lease_generation": "bound fragment lease_generation must fit in an unsigned 64-bit integer",
}


@pytest.mark.parametrize("protocol", range(6))
@pytest.mark.parametrize("field", sorted(REMOVED))
def test_pickling_a_plan_whose_fragment_lost_a_field(plan: TransferPlan, field: str, protocol: int) -> None:
    forged = _forged(plan, 0, "target", field, _GONE)
    with raises(REMOVED[field]):
        copy.copy(forged)
    with raises(REMOVED[field]):
        pickle.loads(pickle.dumps(forged, protocol))


@pytest.mark.parametrize("field", sorted(REMOVED))
def test_pickling_a_fragment_that_lost_a_field(plan: TransferPlan, field: str) -> None:
    fragment = copy.copy(plan.operations[0].target)
    object.__delattr__(fragment, field)
    blob = pickle.dumps(fragment)  # the missing field is written as None ...
    with raises(REMOVED[field]):  # ... which the constructor refuses on load
        pickle.loads(blob)
    assert fragment.__reduce__() == (BoundWeightFragment, tuple(
        None if name in (field, "owner") else getattr(fragment, name) for name in _FIELDS
    ))

"""AUDIT39: the AUDIT38 hole closed (tests/test_audit3838_class_descriptors.py). The fast
revalidation's C passes read the value classes' fields from instance state (C-owned layout
slots, instance dicts) where the rules read attributes; a data descriptor planted on a value
class (or on a class put into its MRO) after import made the fast path accept what the rules
refuse. ``_native.fields_unshadowed(bound_contracts._STATE_FIELDS)`` now proves per call, before
the passes and again after them, that no class of each value class's MRO (up to its layout
base) holds a field's name (layout classes: anything; dict-backed ones: a value with ``__get__``)
and that the class has the generic attribute lookup; else the rules decide.

Every case below is a (class, field, edit) whose planted property the rules refuse, checked for
``dataclasses.replace`` and for pickle restore (the property planted after the dump: the pickled
state is the stored one). Most of them were accepted by the fast path before the fix (the
exceptions, fields the passes or the Python driver already read as attributes, are
listed beside ``CASES``)."""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any, Callable

import pytest

from forge_helpers import outcome, rules_only, sized_world

from mooncake.reshard import _native
from mooncake.reshard.contracts.fragments import RuntimeBindingFragment
from mooncake.reshard.weight import ParallelRank, bind_logical_transfer_plan
from mooncake.reshard.weight._planner import bound_contracts as bc
from mooncake.reshard.weight._planner.fragments import BoundWeightFragment
from mooncake.reshard.weight.types import PlacementFragment

ExecutorTransferPlan = bc.ExecutorTransferPlan
TransferRegion = bc.TransferRegion


def _plan() -> Any:
    logical, targets, sources, _memory = sized_world(2)
    return bind_logical_transfer_plan(logical, targets, source_bindings=sources)


def _stored(cls: type, field: str) -> Callable[[Any], Any]:
    """The stored value's reader: the layout member, else the instance dict."""
    for klass in cls.__mro__:
        held = klass.__dict__.get(field)
        if type(held).__name__ == "member_descriptor":
            return lambda obj: held.__get__(obj, cls)
    return lambda obj: obj.__dict__[field]


def _next(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, tuple):
        return value[:-1] if value else ("x",)
    if value is None:
        return "x"
    return object()


def _half(value: Any) -> Any:
    return value // 2  # (a larger one is refused only when it reaches a neighbour's bytes)


def _other(_value: Any) -> Any:
    return object()


_NEXT = [
    (TransferRegion, name)
    for name in (
        "source", "target", "overlap_offset", "overlap_shape", "source_base_offset", "target_base_offset",
        "inner_bytes", "outer_loop_counts", "source_strides", "target_strides",
    )
] + [
    (BoundWeightFragment, name) for name in ("placement", "binding", "lease_generation", "owner", "attestation")
] + [
    (RuntimeBindingFragment, name) for name in ("fragment_id", "worker_id", "owner")
] + [
    (PlacementFragment, name) for name in ("rank", "placement_fragment_id", "global_offset", "tensor_id", "local_shape")
] + [
    (bc.RuntimeFragmentSnapshot, "fragment_id")
] + [
    (ExecutorTransferPlan, name)
    for name in (
        "instance_id", "placement_id", "participant_id", "placement_digest", "runtime_lease_id", "worker_id",
        "rank", "fragment_ids", "fragment_snapshots", "attestation",
    )
] + [
    (bc.TransferPlan, name) for name in ("resource_id", "revision", "weight_generation", "target_placement")
]
CASES = [(cls, field, _next) for cls, field in _NEXT] + [
    (RuntimeBindingFragment, "nbytes", _half),
    (RuntimeBindingFragment, "address", _other),
    (ParallelRank, "tp", _other),
]
# Refused by the start build too, kept as regression cases: PlacementFragment's
# placement_fragment_id, global_offset, tensor_id and local_shape (read as attributes already,
# AUDIT38), ParallelRank.tp, and TransferPlan's identity fields and target_placement under
# replace (read by Python before the passes).
STAGES = ("replace", "restore")


def _call(plan: Any, stage: str) -> Callable[[], Any]:
    if stage == "replace":
        return lambda: dataclasses.replace(plan)
    payload = pickle.dumps(plan)
    return lambda: pickle.loads(payload)


def _check(plant: Callable[[], Callable[[], None]], stage: str) -> None:
    plan = _plan()
    call = _call(plan, stage)
    undo = plant()
    try:
        rules = rules_only(call)
        fast = outcome(call)
    finally:
        undo()
    assert isinstance(rules, tuple), "the rules refuse the planted value"
    # (the class: a conflict's message may name either fragment, as the rules' own runs do)
    assert isinstance(fast, tuple) and fast[0] == rules[0], (fast, rules)
    dataclasses.replace(_plan())  # nothing left behind


def _planter(cls: type, field: str, edit: Callable[[Any], Any], on: Any = None) -> Callable[[], Callable[[], None]]:
    def plant() -> Callable[[], None]:
        target = cls if on is None else on
        stored = _stored(cls, field)
        had = field in target.__dict__
        own = target.__dict__.get(field)
        setattr(target, field, property(lambda self: edit(stored(self))))

        def undo() -> None:
            if had:
                setattr(target, field, own)
            else:
                delattr(target, field)

        return undo

    return plant


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize(
    "cls,field,edit", CASES, ids=[f"{c.__name__}.{f}-{e.__name__.strip('_')}" for c, f, e in CASES]
)
def test_a_planted_field_property_is_refused_as_by_the_rules(cls, field, edit, stage):
    _check(_planter(cls, field, edit), stage)


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("field,edit", [("worker_id", _next), ("fragment_id", _next), ("nbytes", _half)])
def test_a_property_on_a_base_put_between_the_class_and_its_layout_base(field, edit, stage):
    cls = RuntimeBindingFragment
    (layout_base,) = cls.__bases__

    def plant() -> Callable[[], None]:
        stored = _stored(cls, field)
        between = type("Between", (layout_base,), {"__slots__": (), field: property(lambda self: edit(stored(self)))})
        cls.__bases__ = (between,)

        def undo() -> None:
            cls.__bases__ = (layout_base,)

        return undo

    _check(plant, stage)


@pytest.mark.parametrize("stage", STAGES)
def test_a_planted_getattribute_is_refused_as_by_the_rules(stage):
    cls = ExecutorTransferPlan

    def getattribute(self: Any, name: str) -> Any:
        value = object.__getattribute__(self, name)
        return value + "x" if name == "worker_id" else value

    def plant() -> Callable[[], None]:
        cls.__getattribute__ = getattribute

        def undo() -> None:
            del cls.__getattribute__

        return undo

    _check(plant, stage)


def test_the_proof_holds_for_the_package_classes_and_lists_every_field():
    assert _native.fields_unshadowed(bc._STATE_FIELDS) is True
    for spec in bc._STATE_FIELDS:
        if len(spec) == 2:  # (the 4-tuples pin methods: tests/test_audit39_rank_equality.py)
            assert spec[1] == tuple(item.name for item in dataclasses.fields(spec[0]))
    # a plain value under a dict-backed field (a default: the instance dict wins) is no shadow;
    # under a layout field it is (no instance dict)
    default = ParallelRank.__dict__["tp"]
    ParallelRank.tp = 5
    try:
        assert _native.fields_unshadowed(bc._STATE_FIELDS) is True
    finally:
        ParallelRank.tp = default
    RuntimeBindingFragment.nbytes = 5
    try:
        assert _native.fields_unshadowed(bc._STATE_FIELDS) is False
    finally:
        del RuntimeBindingFragment.nbytes
    assert _native.fields_unshadowed(bc._STATE_FIELDS) is True
    for bad in (None, ((RuntimeBindingFragment,),), ((RuntimeBindingFragment, ["nbytes"]),), ((1, ()),)):
        assert _native.fields_unshadowed(bad) is False


def test_the_fast_path_still_decides_an_unplanted_plan():
    plan = _plan()
    seen = []
    real = bc._fast_revalidate_live

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(real(*args, **kwargs))
        return seen[-1]

    bc._fast_revalidate_live = spy
    try:
        dataclasses.replace(plan)
        pickle.loads(pickle.dumps(plan))
    finally:
        bc._fast_revalidate_live = real
    assert seen == [True, True]


def test_a_base_holding_a_key_that_is_not_an_exact_str_declines_without_running_it():
    """The proof walks a class dict for exact str keys once per MRO tuple; a base that holds a
    str subclass key (a class body can: setattr cannot) enters the MRO only with a new tuple."""
    calls: list[str] = []

    class Key(str):
        def __eq__(self, other: object) -> bool:
            calls.append("eq")
            return str.__eq__(self, other)

        __hash__ = str.__hash__

    cls = RuntimeBindingFragment
    (layout_base,) = cls.__bases__
    assert _native.fields_unshadowed(bc._STATE_FIELDS) is True
    cls.__bases__ = (type("Between", (layout_base,), {"__slots__": (), Key("nbytes"): 1}),)
    try:
        assert _native.fields_unshadowed(bc._STATE_FIELDS) is False
        cls.__bases__ = (type("Between", (layout_base,), {"__slots__": (), Key("other"): 1}),)
        assert _native.fields_unshadowed(bc._STATE_FIELDS) is False  # (not an exact str: declined)
    finally:
        cls.__bases__ = (layout_base,)
    assert calls == []
    assert _native.fields_unshadowed(bc._STATE_FIELDS) is True

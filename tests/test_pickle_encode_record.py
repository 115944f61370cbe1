"""``_native.encode_record`` (csrc/pickle_codec.c) against its reference ``bound_pickle._encode``:
the same five tables for every plan the record describes (also with reordered instance dicts,
shared and repeated objects), None exactly where ``_encode`` finds an object it does not describe,
and hostile arguments are refused."""

from __future__ import annotations

import copy
import pickle
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spec_helpers import forged_copy
from test_binding_attacks import World

from mooncake.reshard import _native
from mooncake.reshard.weight._planner import bound_pickle
from mooncake.reshard.weight._planner.attestation import RuntimeBindingAttestation
from mooncake.reshard.weight._planner.bound_contracts import ExecutorTransferPlan, RuntimeFragmentSnapshot
from mooncake.reshard.weight._planner.contracts import TransferRegion
from mooncake.reshard.weight._planner.fragments import BoundWeightFragment

_CLASSES = (TransferRegion, BoundWeightFragment, ExecutorTransferPlan, RuntimeFragmentSnapshot, RuntimeBindingAttestation)
_NAMES = (
    bound_pickle._REGION_FIELDS,
    bound_pickle._FRAGMENT_FIELDS,
    bound_pickle._EXECUTOR_FIELDS,
    bound_pickle._SNAPSHOT_FIELDS,
)


def _native_tables(operations: Any, sources: Any, targets: Any) -> Any:
    return _native.encode_record(operations, sources, targets, *_CLASSES, *_NAMES)


def _python_tables(operations: Any, sources: Any, targets: Any) -> Any:
    state = {name: None for name in bound_pickle._PLAN_FIELDS}
    try:
        return bound_pickle._encode(state, operations, sources, targets)[6:]
    except (bound_pickle._Irregular, KeyError):
        return None


def _same(a: Any, b: Any) -> bool:
    """Equal tables whose items are the very same objects (ints compared by value)."""
    if a is None or b is None:
        return a is b
    if len(a) != len(b):
        return False
    for left, right in zip(a, b):
        if len(left) != len(right):
            return False
        for x, y in zip(left, right):
            if not (x is y or (type(x) is int and type(y) is int and x == y)):
                return False
    return True


@pytest.fixture(scope="module")
def plan() -> Any:
    return World().bind()


def test_benchmark_like_plan_matches(plan: Any) -> None:
    args = (plan.operations, plan.source_executors, plan.target_executors)
    native = _native_tables(*args)
    assert native is not None and _same(native, _python_tables(*args))
    record = bound_pickle._compact_record(plan)
    assert record is not None and _same(record[6:], native)
    restored = pickle.loads(pickle.dumps(plan, protocol=5))
    assert _same(_native_tables(restored.operations, restored.source_executors, restored.target_executors),
                 _python_tables(restored.operations, restored.source_executors, restored.target_executors))


def _reordered(obj: Any) -> Any:
    clone = copy.copy(obj)
    items = list(clone.__dict__.items())
    clone.__dict__.clear()
    clone.__dict__.update(reversed(items))
    return clone


def _without(obj: Any, name: str) -> Any:
    clone = copy.copy(obj)
    del clone.__dict__[name]
    return clone


class _SubRegion(TransferRegion):  # type: ignore[type-arg]
    pass


def _subclassed(obj: Any, cls: type) -> Any:
    clone = object.__new__(cls)
    clone.__dict__.update(obj.__dict__)
    return clone


_OPERATION_EDITS: list[Callable[[Any], Any]] = [
    lambda op: op,
    _reordered,
    lambda op: forged_copy(op, extra=1),
    lambda op: _without(op, "inner_bytes"),
    lambda op: _subclassed(op, _SubRegion),
    lambda op: forged_copy(op, target=_reordered(op.target)),
    lambda op: forged_copy(op, target=forged_copy(op.target, owner=object())),
    lambda op: forged_copy(op, target=forged_copy(op.target, attestation=None)),
    lambda op: forged_copy(op, target=forged_copy(op.target, attestation="forged")),
    lambda op: forged_copy(op, target=_without(op.target, "instance_id")),
    lambda op: forged_copy(op, source=forged_copy(op.source, extra=2)),
    lambda op: forged_copy(op, source=op.target),
    lambda op: forged_copy(op, target=forged_copy(op.target, attestation=_without(op.target.attestation, "evidence"))),
    lambda op: forged_copy(op, target=forged_copy(op.target, attestation=_reordered(op.target.attestation))),
    lambda op: forged_copy(op, tensor_id=None, inner_bytes=2**80),
    lambda op: "not a region",
]

_EXECUTOR_EDITS: list[Callable[[Any], Any]] = [
    lambda ex: ex,
    _reordered,
    lambda ex: forged_copy(ex, extra=1),
    lambda ex: _without(ex, "worker_id"),
    lambda ex: forged_copy(ex, fragment_snapshots=list(ex.fragment_snapshots)),
    lambda ex: forged_copy(ex, fragment_snapshots=()),
    lambda ex: forged_copy(ex, fragment_snapshots=ex.fragment_snapshots * 3),
    lambda ex: forged_copy(ex, fragment_snapshots=(_reordered(ex.fragment_snapshots[0]),)),
    lambda ex: forged_copy(ex, fragment_snapshots=(forged_copy(ex.fragment_snapshots[0], extra=1),)),
    lambda ex: forged_copy(ex, fragment_snapshots=(_without(ex.fragment_snapshots[0], "address"),)),
    lambda ex: forged_copy(ex, fragment_snapshots=("snapshot",)),
    lambda ex: forged_copy(ex, attestation=None),
    lambda ex: forged_copy(ex, attestation=object()),
    lambda ex: forged_copy(ex, attestation=_reordered(ex.attestation)),
    lambda ex: forged_copy(ex, attestation=_without(ex.attestation, "placement")),
    lambda ex: 7,
]


def _apply(edit: Callable[[Any], Any], value: Any) -> Any:
    """The edited value (an edit that does not apply to an already edited value keeps it: e.g.
    copying a bound fragment whose attestation an earlier edit forged raises ValueError)."""
    try:
        return edit(value)
    except (AttributeError, IndexError, KeyError, TypeError, ValueError):
        return value


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_forged_plans_match_the_python_encoder(plan: Any, data: Any) -> None:
    operations = list(plan.operations)
    for _ in range(data.draw(st.integers(0, 3))):
        index = data.draw(st.integers(0, len(operations) - 1))
        operations[index] = _apply(data.draw(st.sampled_from(_OPERATION_EDITS)), operations[index])
    sides = []
    for executors in (plan.source_executors, plan.target_executors):
        edited = list(executors)
        for _ in range(data.draw(st.integers(0, 2))):
            index = data.draw(st.integers(0, len(edited) - 1))
            edited[index] = _apply(data.draw(st.sampled_from(_EXECUTOR_EDITS)), edited[index])
        if data.draw(st.booleans()):
            edited = edited[::-1] + edited[:1]
        sides.append(tuple(edited))
    if data.draw(st.booleans()):
        operations = operations + operations[:2]
    args = (tuple(operations), sides[0], sides[1])
    expected = _python_tables(*args)
    actual = _native_tables(*args)
    assert _same(actual, expected)


def test_non_tuples_decline_and_bad_names_raise(plan: Any) -> None:
    args = [plan.operations, plan.source_executors, plan.target_executors]
    for position in range(3):
        changed = list(args)
        changed[position] = list(changed[position])
        assert _native_tables(*changed) is None
    assert _native_tables((), (), ()) == ((), (), (), (), ())
    for position in range(4):
        names = list(_NAMES)
        for bad in (names[position][:-1], list(names[position]), names[position][:-1] + (1,), None):
            names[position] = bad
            with pytest.raises(TypeError):
                _native.encode_record(*args, *_CLASSES, *names)
    with pytest.raises(TypeError):
        _native.encode_record(*args, *_CLASSES)  # type: ignore[call-arg]


def test_record_restores_after_native_encoding(plan: Any) -> None:
    # The record built from the C tables restores to the same plan (both protocols).
    for protocol in (4, 5):
        assert pickle.loads(pickle.dumps(plan, protocol=protocol)) == plan

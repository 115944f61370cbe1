"""Facts carried from binding into the new plan's revalidation (``bind_regions`` with its tenth
argument, ``_native.revalidate_scan_carried``).

``bind_regions(..., True)`` derives, in the pass that builds the bound regions, what
``revalidate_scan`` would derive from them (the distinct fragments, each operation's positions,
boxes, per-fragment extent ends, segment counts). ``revalidate_scan_carried`` takes those facts
for the plan the same bind call builds and reads again what the adapter can edit (the budgets,
every fragment's binding and its ``nbytes``). It must return exactly what ``revalidate_scan``
returns on the same operations, or None (the full scan then decides). Binding with and without
the carried facts gives equal plans and identical first errors; only the private bind path
passes them (``TransferPlan(...)``, ``replace`` and pickle restore revalidate everything)."""

from __future__ import annotations

import copy
import math
import dataclasses
import pickle
import sys
from typing import Any, Optional, Sequence, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_executor import HostMemory, host_bindings, tp_placement
from test_binding_physical import bound, region, workloads
from test_native_binder_fused_physical import CLASSES, _logical, whole
from spec_helpers import field_state, forged_instance

from mooncake.reshard import _native
from mooncake.reshard.contracts.fragments import RuntimeBindingFragment
from mooncake.reshard.weight import TransferPlan
from mooncake.reshard.weight._planner import binding as binding_module
from mooncake.reshard.weight._planner import bound_contracts
from mooncake.reshard.weight._planner.contracts import TransferRegion
from mooncake.reshard.weight._planner.fragments import BoundWeightFragment
from mooncake.reshard.weight.planner import bind_logical_transfer_plan, plan_placement_transfer

BIG = 1 << 62


def _bind(logical: Sequence[Any], targets: Any, sources: Any) -> Optional[Tuple[Any, ...]]:
    return _native.bind_regions(
        *CLASSES, tuple(logical), targets, sources, BoundWeightFragment, RuntimeBindingFragment, 1000, True
    )


def _carried(ops: Sequence[Any]) -> Tuple[Tuple[Any, ...], Any]:
    built = _bind(*_logical(ops))
    assert built is not None
    regions, _selections, _physical, carried = built
    assert carried is not None
    return tuple(regions), carried


def _scan(operations: Tuple[Any, ...], segments: Any = BIG, total: Any = BIG) -> Any:
    return _native.revalidate_scan(operations, segments, total, TransferRegion, BoundWeightFragment)


def _scan_carried(operations: Tuple[Any, ...], carried: Any, segments: Any = BIG, total: Any = BIG) -> Any:
    return _native.revalidate_scan_carried(
        operations, carried, segments, total, BoundWeightFragment, RuntimeBindingFragment
    )


def _same_scan(got: Any, want: Any) -> None:
    assert want is not None and got is not None
    assert len(got) == len(want) == 4
    assert len(got[0]) == len(want[0]) and all(a is b for a, b in zip(got[0], want[0]))
    assert got[1] == want[1] and got[2] == want[2] and got[3] == want[3]


def _ops() -> list[Any]:
    # a tensor id of several characters: an equal copy of it can be a distinct object (one-character
    # strings are shared singletons on CPython 3.10)
    shared = bound("s", (0, 0), (4, 4), 1 << 20, tensor="t-s")
    return [
        whole("a", 4096),
        whole("b", 8192, worker="w1"),
        region(shared, (0, 0), (2, 4)),
        region(shared, (2, 0), (2, 2)),
        region(shared, (1, 1), (3, 3)),
    ]


def test_carried_scan_is_the_full_scan() -> None:
    operations, carried = _carried(_ops())
    _same_scan(_scan_carried(operations, carried), _scan(operations))
    counts = [math.prod(op.outer_loop_counts) for op in operations]  # revalidate_scan's segment counts
    assert carried[6] == max(counts) and carried[7] == sum(counts)
    # the tightest budgets pass, one less declines in both scans
    _same_scan(_scan_carried(operations, carried, max(counts), sum(counts)), _scan(operations, max(counts), sum(counts)))
    for segments, total in ((max(counts) - 1, BIG), (BIG, sum(counts) - 1), (1 << 70, sum(counts) - 1)):
        assert _scan(operations, segments, total) is None
        assert _scan_carried(operations, carried, segments, total) is None


@settings(max_examples=60, deadline=None)
@given(workloads())
def test_carried_scan_matches_on_random_regions(drawn: Any) -> None:
    ops, _budget = drawn
    built = _bind(*_logical(ops))
    assert built is not None
    regions, _selections, _physical, carried = built
    operations = tuple(regions)
    want = _scan(operations)
    if carried is None:
        return
    got = _scan_carried(operations, carried)
    if want is None:
        assert got is None
    else:
        _same_scan(got, want)


def test_edited_binding_nbytes_is_read_again() -> None:
    for nbytes in (8, 0, -1, 1 << 64, True, 64.0, "64"):
        operations, carried = _carried(_ops())
        binding = operations[2].source.binding
        object.__setattr__(binding, "nbytes", nbytes)
        assert _scan(operations) is None
        assert _scan_carried(operations, carried) is None
    operations, carried = _carried(_ops())
    object.__delattr__(operations[0].target.binding, "nbytes")
    assert _scan_carried(operations, carried) is None


def test_unusual_bindings_and_fragments_decline() -> None:
    class Binding(RuntimeBindingFragment):
        pass

    operations, carried = _carried(_ops())
    fragment = operations[1].target
    binding = fragment.binding
    forged = forged_instance(Binding, dict(field_state(binding)))
    object.__setattr__(fragment, "binding", forged)
    assert _scan_carried(operations, carried) is None
    operations, carried = _carried(_ops())
    object.__delattr__(operations[1].target, "binding")
    assert _scan_carried(operations, carried) is None
    operations, carried = _carried(_ops())
    carried[1][0] = "not a bound fragment"
    assert _scan_carried(operations, carried) is None


def test_other_operations_decline() -> None:
    operations, carried = _carried(_ops())
    assert _scan_carried(operations[::-1], carried) is None
    assert _scan_carried(operations[:-1], carried) is None
    assert _scan_carried(operations + operations[:1], carried) is None
    assert _scan_carried((copy.copy(operations[0]),) + operations[1:], carried) is None
    assert _scan_carried((), carried) is None


def test_forged_carried_facts_decline() -> None:
    operations, carried = _carried(_ops())
    n = len(operations)
    distinct = len(carried[1])
    forgeries: list[Any] = [
        carried[:7],
        carried + (0,),
        list(carried),
        carried[:1] + (tuple(carried[1]),) + carried[2:],
        carried[:5] + (bytearray(carried[5]),) + carried[6:],
        carried[:5] + (carried[5][:-1],) + carried[6:],
        carried[:5] + (carried[5] + b"\0" * 8,) + carried[6:],
        carried[:6] + (1 << 64,) + carried[7:],
        carried[:6] + (1.0,) + carried[7:],
        carried[:7] + (1 << 64,),
        carried[:7] + (True,),
        carried[:2] + (carried[2][:-1],) + carried[3:],
        carried[:4] + (carried[4] + [None],) + carried[5:],
    ]
    for bad in (-1, distinct, 1 << 64, -(1 << 64), 1.0, None, True):
        for k in (2, 3):
            positions = list(carried[k])
            positions[n - 1] = bad
            forgeries.append(carried[:k] + (positions,) + carried[k + 1 :])
    for forged in forgeries:
        if not isinstance(forged, tuple):
            with pytest.raises(TypeError):
                _scan_carried(operations, forged)
        else:
            assert _scan_carried(operations, forged) is None, forged
    # an extent end the bindings do not cover
    ends = bytearray(carried[5])
    ends[0:8] = (1 << 62).to_bytes(8, sys.byteorder)
    assert _scan_carried(operations, carried[:5] + (bytes(ends),) + carried[6:]) is None


def test_hostile_arguments() -> None:
    operations, carried = _carried(_ops())
    with pytest.raises(TypeError):
        _native.revalidate_scan_carried(list(operations), carried, BIG, BIG, BoundWeightFragment, RuntimeBindingFragment)
    with pytest.raises(TypeError):
        _native.revalidate_scan_carried(operations, carried, BIG, BIG, "cls", RuntimeBindingFragment)
    with pytest.raises(TypeError):
        _native.revalidate_scan_carried(operations, carried, BIG, BIG, BoundWeightFragment)
    for budget in (None, 1.0, "1", -1, -(1 << 70)):
        assert _scan_carried(operations, carried, budget, BIG) is None
        assert _scan_carried(operations, carried, BIG, budget) is None
    # budgets above int64 saturate (as revalidate_scan's)
    _same_scan(_scan_carried(operations, carried, 1 << 80, 1 << 80), _scan(operations, 1 << 80, 1 << 80))
    logical, targets, sources = _logical(_ops())
    for flag in (1, None, "True"):
        with pytest.raises(TypeError):
            _native.bind_regions(
                *CLASSES, logical, targets, sources, BoundWeightFragment, RuntimeBindingFragment, 1000, flag
            )
    off = _native.bind_regions(
        *CLASSES, logical, targets, sources, BoundWeightFragment, RuntimeBindingFragment, 1000, False
    )
    assert off is not None and off[3] is None
    nine = _native.bind_regions(*CLASSES, logical, targets, sources, BoundWeightFragment, RuntimeBindingFragment, 1000)
    assert len(nine) == 3 and nine[1] == off[1] and nine[2] == off[2]


def test_carry_turns_off_on_unusual_regions() -> None:
    # a region whose counts overflow int64 or whose fields are not exact ints: no carried facts
    for field, value in (("inner_bytes", 1 << 64), ("inner_bytes", True), ("outer_loop_counts", [2]),
                         ("source_base_offset", 1.0)):
        ops = _ops()
        object.__setattr__(ops[2], field, value)
        built = _bind(*_logical(ops))
        assert built is not None and built[3] is None, field


# ---------------------------------------------------------------------------------------
# Binding with and without the carried facts


def _world(whole_targets: bool = True) -> Tuple[Any, Any, Any]:
    source = tp_placement(2, prefix="s", dp=2, shape=(4, 6), tensors=("v", "w"))
    target = tp_placement(2 if whole_targets else 3, prefix="t", shape=(4, 6), tensors=("v", "w"))
    logical = plan_placement_transfer(source, target)
    memory = HostMemory()
    return logical, host_bindings(target, memory, prefix="dst"), host_bindings(source, memory, prefix="src")


def _not_carried(monkeypatch: pytest.MonkeyPatch) -> None:
    original = _native.bind_regions

    def uncarried(*args: Any) -> Any:
        return original(*args[:9], False)

    monkeypatch.setattr(binding_module._native, "bind_regions", uncarried)


def _outcome(logical: Any, targets: Any, sources: Any) -> Any:
    try:
        return bind_logical_transfer_plan(logical, targets, source_bindings=sources)
    except Exception as exc:  # the first failure, compared by type and message
        return (type(exc), str(exc))


def _calls(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    seen: list[Any] = []
    original = _native.revalidate_scan_carried

    def spy(*args: Any) -> Any:
        result = original(*args)
        seen.append(result)
        return result

    monkeypatch.setattr(bound_contracts._native, "revalidate_scan_carried", spy)
    return seen


@pytest.mark.parametrize("whole_targets", [True, False])
def test_binding_with_and_without_carried_facts_agrees(monkeypatch: pytest.MonkeyPatch, whole_targets: bool) -> None:
    logical, targets, sources = _world(whole_targets)
    with monkeypatch.context() as patch:
        seen = _calls(patch)
        carried = _outcome(logical, targets, sources)
        assert len(seen) == 1 and seen[0] is not None  # taken, and accepted
    with monkeypatch.context() as patch:
        _not_carried(patch)
        plain = _outcome(logical, targets, sources)
    assert isinstance(carried, TransferPlan) and carried == plain
    assert carried.target_executors == plain.target_executors
    assert carried.source_executors == plain.source_executors
    assert carried.pipeline_routes == plain.pipeline_routes


def test_only_bind_and_restore_take_carried_facts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Carried facts come only from the call that built the regions: bind (bind_regions) and
    pickle restore (restore_regions_carried, from the values it decoded); the constructor and
    ``replace`` are given existing regions and scan them again."""
    logical, targets, sources = _world()
    plan = bind_logical_transfer_plan(logical, targets, source_bindings=sources)
    with monkeypatch.context() as patch:
        seen = _calls(patch)
        assert dataclasses.replace(plan) == plan
        values = {f.name: getattr(plan, f.name) for f in dataclasses.fields(plan) if f.init}
        assert TransferPlan(**values) == plan
        assert seen == []
    for protocol in (4, 5):
        with monkeypatch.context() as patch:
            seen = _calls(patch)
            assert pickle.loads(pickle.dumps(plan, protocol=protocol)) == plan
            assert len(seen) == 1 and seen[0] is not None, protocol  # restore's own facts, accepted
    for duplicate in (copy.copy, copy.deepcopy):  # both restore through __reduce_ex__
        with monkeypatch.context() as patch:
            seen = _calls(patch)
            assert duplicate(plan) == plan
            assert len(seen) == 1 and seen[0] is not None, duplicate


def test_forged_bindings_give_the_same_first_error(monkeypatch: pytest.MonkeyPatch) -> None:
    forgeries = (
        ("nbytes", 8),
        ("nbytes", 1 << 70),
        ("nbytes", -1),
        ("address", -1),
        ("worker_id", ""),
    )
    for name, value in forgeries:
        outcomes = []
        for carry in (True, False):
            logical, targets, sources = _world()
            binding = targets[0].fragments[0]
            object.__setattr__(binding, name, value)
            with monkeypatch.context() as patch:
                if not carry:
                    _not_carried(patch)
                outcomes.append(_outcome(logical, targets, sources))
        assert outcomes[0] == outcomes[1], (name, value, outcomes)

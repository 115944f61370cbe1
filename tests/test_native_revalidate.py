"""TransferPlan revalidation fast path (``bound_contracts._fast_revalidate``) against the
rule-by-rule path (``TransferPlan._revalidate_rules``) as the oracle.

The fast path may decline any plan (the rule-by-rule path then decides and raises the spec's
first failure), but it must never accept a plan the rule-by-rule path rejects, and on the plans
it accepts it must derive the same operation views."""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any, Callable, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forge_helpers import bindings_sharing_instances
from memory_executor import HostMemory, host_bindings, tp_placement
from spec_helpers import field_state, forged_instance
from watched import admit_in_watched_calls

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank, PlanningLimits
from mooncake.reshard.weight._planner import bound_contracts as bc
from mooncake.reshard.weight._planner.contracts import TransferRegion
from mooncake.reshard.weight._planner.fragments import BoundWeightFragment
from mooncake.reshard.weight.planner import TransferPlan, bind_logical_transfer_plan, plan_placement_transfer


def _bound_plan(
    *,
    tied: bool = False,
    shared: bool = False,
    tensors: tuple[str, ...] = ("v", "w"),
    target_tp: int = 3,
    shape: tuple[int, int] = (4, 7),
) -> TransferPlan:
    source = tp_placement(2, prefix="s", dp=2, shape=shape, tensors=tensors, tied=tied)
    target = tp_placement(target_tp, prefix="t", shape=shape, tensors=tensors, tied=tied)
    logical = plan_placement_transfer(source, target)
    memory = HostMemory()
    source_bindings = host_bindings(source, memory, prefix="src")
    target_bindings = host_bindings(target, memory, prefix="dst", shared_allocation=shared)
    return bind_logical_transfer_plan(logical, target_bindings, source_bindings=source_bindings)


_PLANS = {
    "plain": _bound_plan(),
    "tied": _bound_plan(tied=True),
    "shared": _bound_plan(shared=True),
    "split": _bound_plan(target_tp=4, shape=(4, 8)),  # every operation writes a whole target fragment
    # Unpickled: fresh attestations, executors with equal (not identical) snapshots.
    "unpickled": pickle.loads(pickle.dumps(_bound_plan())),
    "unpickled-split": pickle.loads(pickle.dumps(_bound_plan(target_tp=4, shape=(4, 8)))),
}


def _forge(value: Any, **changes: Any) -> Any:
    """A copy of the frozen dataclass ``value`` with ``changes``, bypassing every check."""
    forged = object.__new__(type(value))
    if not hasattr(value, "__dict__"):  # stored in a C layout: forged field by field
        for name, item in {**value.__getstate__(), **changes}.items():
            object.__setattr__(forged, name, item)
        return forged
    forged.__dict__.update(value.__dict__)
    forged.__dict__.update(changes)
    return forged


def _scalars(plan: TransferPlan) -> tuple[Any, ...]:
    return (plan.operations, plan.source_executors, plan.target_executors, plan.planning_limits)


def _fast(plan: TransferPlan, physical: bool) -> tuple[bool, TransferPlan]:
    candidate = _forge(plan)
    operations, sources, targets, limits = _scalars(plan)
    try:
        accepted = bc._fast_revalidate_live(candidate, operations, sources, targets, limits, physical)
    except Exception:
        accepted = False
    return accepted, candidate


def _slow(plan: TransferPlan, physical: bool) -> tuple[bool, TransferPlan]:
    candidate = _forge(plan)
    try:
        candidate._revalidate_rules(*_scalars(plan), physical)
    except Exception:
        return False, candidate
    return True, candidate


def _views(plan: TransferPlan) -> tuple[Any, ...]:
    return (
        plan.pipeline_routes,
        tuple(plan.operation_indices_for_executor(e, "source") for e in plan.source_executors),
        tuple(plan.operation_indices_for_executor(e, "target") for e in plan.target_executors),
        plan.source_stored_fragment_snapshots,
    )


def _agree(plan: TransferPlan) -> bool:
    """The oracle relation for one (possibly forged) plan; returns the fast verdict."""
    for physical in (True, False):
        fast, fast_plan = _fast(plan, physical)
        slow, slow_plan = _slow(plan, physical)
        if fast:
            assert slow, "the fast path accepted a plan the rules reject"
            assert _views(fast_plan) == _views(slow_plan)
    return _fast(plan, True)[0]


@pytest.mark.parametrize("name", sorted(_PLANS))
def test_genuine_plans_take_the_fast_path(name: str) -> None:
    plan = _PLANS[name]
    assert _agree(plan)
    fast, fast_plan = _fast(plan, True)
    assert fast and fast_plan.__dict__["_operation_views"] is not plan.__dict__["_operation_views"]
    # Every construction path still yields an equal plan with equal views.
    for copy in (dataclasses.replace(plan), pickle.loads(pickle.dumps(plan))):
        assert copy == plan
        assert _views(copy) == _views(plan)


# ---------------------------------------------------------------------------------------
# Forgeries: each takes the plan and a chooser ``pick(n) -> index in range(n)``.

Pick = Callable[[int], int]
Mutation = Callable[[TransferPlan, Pick], TransferPlan]


def _replace_op(plan: TransferPlan, pick: Pick, make: Callable[[Any, Pick], Any]) -> TransferPlan:
    operations = list(plan.operations)
    if not operations:
        return plan
    index = pick(len(operations))
    operations[index] = make(operations[index], pick)
    return _forge(plan, operations=tuple(operations))


def _bump_int(name: str, delta: int) -> Mutation:
    return lambda plan, pick: _replace_op(plan, pick, lambda op, _: _forge(op, **{name: getattr(op, name) + delta}))


def _bump_tuple(name: str) -> Mutation:
    def make(op: Any, pick: Pick) -> Any:
        values = list(getattr(op, name))
        if values and pick(3):
            values[pick(len(values))] += (-1, 1, 7)[pick(3)]
        else:
            values.append(1 + pick(2))
        return _forge(op, **{name: tuple(values)})

    return lambda plan, pick: _replace_op(plan, pick, make)


def _other_fragment(plan: TransferPlan, pick: Pick) -> Any:
    operations = plan.operations or _PLANS["plain"].operations
    op = operations[pick(len(operations))]
    return op.source if pick(2) else op.target


def _swap_side(side: str) -> Mutation:
    def mutate(plan: TransferPlan, pick: Pick) -> TransferPlan:
        other = _other_fragment(plan, pick)
        return _replace_op(plan, pick, lambda op, _: _forge(op, **{side: other}))

    return mutate


def _swap_sides(plan: TransferPlan, pick: Pick) -> TransferPlan:
    return _replace_op(plan, pick, lambda op, _: _forge(op, source=op.target, target=op.source))


def _forge_fragment(make: Callable[[Any, TransferPlan, Pick], dict[str, Any]]) -> Mutation:
    def mutate(plan: TransferPlan, pick: Pick) -> TransferPlan:
        side = ("source", "target")[pick(2)]

        def change(op: Any, pick: Pick) -> Any:
            fragment = getattr(op, side)
            return _forge(op, **{side: _forge(fragment, **make(fragment, plan, pick))})

        return _replace_op(plan, pick, change)

    return mutate


_FRAGMENT_FORGERIES: list[Callable[[Any, TransferPlan, Pick], dict[str, Any]]] = [
    lambda f, p, k: {"owner": object()},
    lambda f, p, k: {"lease_generation": f.lease_generation + 1},
    lambda f, p, k: {"instance_id": f.instance_id + "x"},
    lambda f, p, k: {"runtime_lease_id": f.runtime_lease_id + "x"},
    lambda f, p, k: {"attestation": None},
    lambda f, p, k: {"attestation": _other_fragment(p, k).attestation},
    lambda f, p, k: {"binding": _other_fragment(p, k).binding},
    lambda f, p, k: {"placement": _other_fragment(p, k).placement},
    lambda f, p, k: {"binding": _forge(f.binding, owner=object())},
    lambda f, p, k: {"binding": _forge(f.binding, nbytes=f.binding.nbytes + (-2, 2)[k(2)])},
    lambda f, p, k: {"binding": _forge(f.binding, address=f.binding.address + 2)},
    lambda f, p, k: {"binding": _forge(f.binding, storage_address=_other_fragment(p, k).binding.storage_address)},
    lambda f, p, k: {"binding": _forge(f.binding, worker_id="elsewhere")},
    lambda f, p, k: {"binding": _forge(f.binding, device="cuda:1")},
    lambda f, p, k: {"binding": _forge(f.binding, fragment_id=_other_fragment(p, k).binding.fragment_id)},
    lambda f, p, k: {"placement": _forge(f.placement, rank=ParallelRank(tp=9))},
    lambda f, p, k: {"placement": _forge(f.placement, pipeline_stage_id=3)},
    lambda f, p, k: {"placement": _forge(f.placement, global_offset=(0, 0))},
]


def _forge_executor(make: Callable[[Any, TransferPlan, Pick], dict[str, Any]]) -> Mutation:
    def mutate(plan: TransferPlan, pick: Pick) -> TransferPlan:
        side = ("source_executors", "target_executors")[pick(2)]
        executors = list(getattr(plan, side))
        if not executors:
            return plan
        index = pick(len(executors))
        executors[index] = _forge(executors[index], **make(executors[index], plan, pick))
        return _forge(plan, **{side: tuple(executors)})

    return mutate


def _any_executor(plan: TransferPlan, pick: Pick) -> Any:
    executors = plan.source_executors + plan.target_executors or _PLANS["plain"].target_executors
    return executors[pick(len(executors))]


_EXECUTOR_FORGERIES: list[Callable[[Any, TransferPlan, Pick], dict[str, Any]]] = [
    lambda e, p, k: {"fragment_ids": e.fragment_ids[::-1], "fragment_snapshots": e.fragment_snapshots[::-1]},
    lambda e, p, k: {"fragment_ids": e.fragment_ids[1:], "fragment_snapshots": e.fragment_snapshots[1:]},
    lambda e, p, k: {"fragment_snapshots": tuple(_forge(s, address=s.address + 2) for s in e.fragment_snapshots)},
    lambda e, p, k: {"fragment_snapshots": tuple(_forge(s, lease_generation=7) for s in e.fragment_snapshots)},
    lambda e, p, k: {"rank": ParallelRank(tp=5)},
    lambda e, p, k: {"runtime_lease_id": None},
    lambda e, p, k: {"runtime_lease_id": "other-lease"},
    lambda e, p, k: {"worker_id": "elsewhere"},
    lambda e, p, k: {"instance_id": "other-instance"},
    lambda e, p, k: {"participant_id": _any_executor(p, k).participant_id},
    lambda e, p, k: {"placement_digest": "0" * 64},
    lambda e, p, k: {"attestation": None},
    lambda e, p, k: {"attestation": _any_executor(p, k).attestation},
    lambda e, p, k: dict(
        (name, getattr(_any_executor(p, k), name)) for name in ("fragment_ids", "fragment_snapshots")
    ),
    # snapshots stored in their C layout: an emptied field (the fast path reads the layout)
    lambda e, p, k: {"fragment_snapshots": tuple(_emptied(s, "device") for s in e.fragment_snapshots)},
    # equal values of another type (the rules check the exact types before comparing)
    lambda e, p, k: {"fragment_snapshots": tuple(_forge(s, address=float(s.address)) for s in e.fragment_snapshots)},
    lambda e, p, k: {"fragment_snapshots": _forge_one(e, k, lease_generation=lambda v: float(v))},
    lambda e, p, k: {"fragment_snapshots": _forge_one(e, k, nbytes=_IntSub)},
    lambda e, p, k: {"fragment_snapshots": _forge_one(e, k, device=_StrSub)},
    lambda e, p, k: {"fragment_snapshots": _forge_one(e, k, local_shape=_TupleSub)},
    lambda e, p, k: {"fragment_snapshots": _forge_one(e, k, global_offset=lambda v: (float(v[0]),) + v[1:])},
    lambda e, p, k: {"fragment_snapshots": _forge_one(e, k, strides_bytes=lambda v: v[:-1] + (_IntSub(v[-1]),))},
    lambda e, p, k: {"fragment_snapshots": _forge_one(e, k, storage_offset_bytes=lambda v: bool(v) if v in (0, 1) else v)},
]


class _IntSub(int):
    pass


class _StrSub(str):
    pass


class _TupleSub(tuple):  # type: ignore[type-arg]
    pass


def _forge_one(executor: Any, pick: Pick, **makers: Callable[[Any], Any]) -> tuple[Any, ...]:
    """The executor's snapshots with one of them (picked) forged: each named field replaced
    by ``maker(value)``."""
    snapshots = list(executor.fragment_snapshots)
    index = pick(len(snapshots))
    snapshot = snapshots[index]
    snapshots[index] = _forge(snapshot, **{name: make(getattr(snapshot, name)) for name, make in makers.items()})
    return tuple(snapshots)


def _emptied(value: Any, name: str) -> Any:
    """A copy of ``value`` whose field ``name`` is empty (``object.__delattr__``)."""
    forged = _forge(value)
    if name in forged.__getstate__():  # (already empty when forged twice)
        object.__delattr__(forged, name)
    return forged


def _edit_tuple(name: str) -> Mutation:
    def mutate(plan: TransferPlan, pick: Pick) -> TransferPlan:
        values = list(getattr(plan, name))
        if not values:
            return plan
        how = pick(4)
        index = pick(len(values))
        if how == 0:
            del values[index]
        elif how == 1:
            values.append(values[index])
        elif how == 2:
            values.reverse()
        else:
            other = "target_executors" if name == "source_executors" else "source_executors"
            donor = getattr(plan, other) if name != "operations" else plan.operations
            if not donor:
                return plan
            values[index] = donor[pick(len(donor))]
        return _forge(plan, **{name: tuple(values)})

    return mutate


def _limits(plan: TransferPlan, pick: Pick) -> TransferPlan:
    segments = [op.segment_count for op in plan.operations]
    if not segments:
        return plan
    if pick(2):
        limits = PlanningLimits(max_segments_per_region=max(max(segments) - 1, 1))
    else:
        limits = PlanningLimits(max_total_lowered_segments=max(sum(segments) - 1, 1))
    return _forge(plan, planning_limits=limits)


_MUTATIONS: list[Mutation] = [
    _bump_int("source_base_offset", 2),
    _bump_int("target_base_offset", 2),
    _bump_int("target_base_offset", 64),
    _bump_int("inner_bytes", 2),
    _bump_tuple("outer_loop_counts"),
    _bump_tuple("source_strides"),
    _bump_tuple("target_strides"),
    _bump_tuple("overlap_offset"),
    _bump_tuple("overlap_shape"),
    _swap_side("source"),
    _swap_side("target"),
    _swap_sides,
    *(_forge_fragment(make) for make in _FRAGMENT_FORGERIES),
    *(_forge_executor(make) for make in _EXECUTOR_FORGERIES),
    _edit_tuple("operations"),
    _edit_tuple("source_executors"),
    _edit_tuple("target_executors"),
    lambda plan, pick: _forge(plan, target_placement=_other_fragment(plan, pick).attestation.placement),
    _limits,
]


def _mutated(name: str, choices: list[int], data: Any) -> Optional[Any]:
    """``_PLANS[name]`` with the mutations ``choices`` applied in order, each drawing the
    positions it edits from hypothesis ``data``; None when a mutation does not apply to the plan
    it is given."""
    plan = _PLANS[name]

    def pick(n: int) -> int:
        return data.draw(st.integers(0, max(n - 1, 0))) if n > 1 else 0

    for choice in choices:
        try:
            plan = _MUTATIONS[choice](plan, pick)
        except AttributeError:
            return None
    return plan


def _record_fast_path(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """The results of every ``bound_contracts._fast_revalidate_live`` call from now on in the test."""
    results: list[bool] = []
    live = bc._fast_revalidate_live

    def record(*args: Any) -> bool:
        result = live(*args)
        results.append(result)
        return result

    monkeypatch.setattr(bc, "_fast_revalidate_live", record)
    admit_in_watched_calls(monkeypatch, record)
    return results


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(sorted(_PLANS)),
    choices=st.lists(st.integers(0, len(_MUTATIONS) - 1), min_size=1, max_size=3),
    data=st.data(),
)
def test_fast_path_never_accepts_what_the_rules_reject(name: str, choices: list[int], data: Any) -> None:
    plan = _PLANS[name]

    def pick(n: int) -> int:
        return data.draw(st.integers(0, max(n - 1, 0))) if n > 1 else 0

    for choice in choices:
        plan = _MUTATIONS[choice](plan, pick)
    _agree(plan)


@pytest.mark.parametrize("index", range(len(_MUTATIONS)))
def test_each_forgery_is_decided_like_the_rules(index: int) -> None:
    """Every forgery once with the first choices; most are rejected by both paths, and then
    ``__post_init__`` raises the rule-by-rule path's error (the spec's first failure)."""
    for name, plan in sorted(_PLANS.items()):
        forged = _MUTATIONS[index](plan, lambda n: 0 if n < 2 else 1)
        accepted = _agree(forged)
        slow, _ = _slow(forged, True)
        assert accepted == slow or not accepted
        if not slow:
            with pytest.raises(Exception) as rules:
                _forge(forged)._revalidate_rules(*_scalars(forged), True)
            with pytest.raises(type(rules.value)) as full:
                forged.__post_init__()
            assert str(full.value) == str(rules.value)


def test_in_place_storage_is_rejected_by_both_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan whose target fragments reuse the source allocations of the same address space
    (built with the §12.5 check switched off) is declined by the fast path."""
    source = tp_placement(2, prefix="s", shape=(4, 8))
    target = tp_placement(2, prefix="t", shape=(4, 8))
    memory = HostMemory()
    source_bindings = host_bindings(source, memory, prefix="src")
    target_bindings = host_bindings(target, memory, prefix="dst")
    aliased = bindings_sharing_instances(target_bindings, source_bindings, in_place=True)
    logical = plan_placement_transfer(source, target)
    with pytest.raises(ValueError, match="in-place reshard is unsupported"):
        bind_logical_transfer_plan(logical, tuple(aliased), source_bindings=source_bindings)
    with monkeypatch.context() as patch:
        patch.setattr(bc, "_fast_revalidate", lambda *args: False)
        patch.setattr(bc, "_validate_no_in_place", lambda operations: None)
        plan = bind_logical_transfer_plan(logical, tuple(aliased), source_bindings=source_bindings)
    assert not _agree(plan)
    assert _slow(plan, False)[0] is False
    with pytest.raises(ValueError, match="in-place reshard is unsupported"):
        dataclasses.replace(plan)


# ---------------------------------------------------------------------------------------
# _native.revalidate_scan: the per-operation pass, against a Python reference


def _scan_reference(operations: tuple[Any, ...], max_segments: int, max_total: int) -> Any:
    """What ``revalidate_scan`` computes, on arbitrary-precision Python ints (None: decline)."""
    position: dict[int, int] = {}
    frags: list[Any] = []
    source_of: list[int] = []
    target_of: list[int] = []
    boxes: list[Any] = []
    total = 0
    for op in operations:
        if type(op) is not TransferRegion:
            return None
        state = field_state(op)
        source, target = state["source"], state["target"]
        if type(source) is not BoundWeightFragment or type(target) is not BoundWeightFragment:
            return None
        outer, s_strides, t_strides = state["outer_loop_counts"], state["source_strides"], state["target_strides"]
        if len(s_strides) != len(outer) or len(t_strides) != len(outer):
            return None
        s_end = state["source_base_offset"] + state["inner_bytes"]
        t_end = state["target_base_offset"] + state["inner_bytes"]
        segments = 1
        for count, s_stride, t_stride in zip(outer, s_strides, t_strides):
            s_end += (count - 1) * s_stride
            t_end += (count - 1) * t_stride
            segments *= count
        if s_end > source.binding.nbytes or t_end > target.binding.nbytes or segments > max_segments:
            return None
        total += segments
        if total > max_total:
            return None
        for fragment, out in ((source, source_of), (target, target_of)):
            if id(fragment) not in position:
                position[id(fragment)] = len(frags)
                frags.append(fragment)
            out.append(position[id(fragment)])
        boxes.append((state["overlap_offset"], state["overlap_shape"]))
    return frags, source_of, target_of, boxes


def _scan(operations: Any, max_segments: Any = 10**6, max_total: Any = 10**7) -> Any:
    return _native.revalidate_scan(operations, max_segments, max_total, TransferRegion, BoundWeightFragment)


def _in_int64(value: Any) -> bool:
    return type(value) is int and -(2**63) <= value < 2**63


def _scan_agrees(operations: tuple[Any, ...], max_segments: int, max_total: int) -> None:
    native = _scan(operations, max_segments, max_total)
    reference = _scan_reference(operations, max_segments, max_total)
    if native is not None:
        assert reference is not None
        frags, source_of, target_of, boxes = native
        assert [id(f) for f in frags] == [id(f) for f in reference[0]]
        assert (source_of, target_of, boxes) == tuple(reference[1:])
    else:
        # Declines only what the reference rejects, or values outside the int64 fast range.
        values = [
            v
            for op in operations
            for v in (
                op.inner_bytes,
                op.source_base_offset,
                op.target_base_offset,
                op.source.binding.nbytes,
                op.target.binding.nbytes,
                *op.outer_loop_counts,
                *op.source_strides,
                *op.target_strides,
            )
        ]
        assert reference is None or not all(map(_in_int64, values)) or max(map(abs, values)) > 2**20


@pytest.mark.parametrize("name", sorted(_PLANS))
def test_scan_of_genuine_plans(name: str) -> None:
    plan = _PLANS[name]
    _scan_agrees(plan.operations, 10**6, 10**7)
    frags, source_of, target_of, boxes = _scan(plan.operations)
    assert len(source_of) == len(target_of) == len(boxes) == len(plan.operations)
    assert [frags[i] for i in source_of] == [op.source for op in plan.operations]
    assert _scan(()) == ([], [], [], [])


_BIG = st.sampled_from([0, 1, -1, 2, 63, 64, 2**31, 2**62, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64, 10**30])


@settings(max_examples=300, deadline=None)
@given(
    name=st.sampled_from(sorted(_PLANS)),
    index=st.integers(0, 100),
    field=st.sampled_from(
        ["inner_bytes", "source_base_offset", "target_base_offset", "outer_loop_counts", "source_strides",
         "target_strides"]
    ),
    value=_BIG,
    budget=st.sampled_from([1, 2, 4, 1000, 2**63 - 1, 2**63, 2**70]),
)
def test_scan_against_reference(name: str, index: int, field: str, value: int, budget: int) -> None:
    operations = list(_PLANS[name].operations)
    index %= len(operations)
    op = operations[index]
    current = getattr(op, field)
    if isinstance(current, tuple):
        forged = tuple(value for _ in current) if current else (value,)
        if field == "outer_loop_counts" or not current:
            changes = {"outer_loop_counts": forged, "source_strides": forged, "target_strides": forged}
        else:
            changes = {field: forged}
    else:
        changes = {field: value}
    operations[index] = _forge(op, **changes)
    _scan_agrees(tuple(operations), budget, budget)
    _scan_agrees(tuple(operations), 10**6, budget)


def test_scan_hostile_inputs() -> None:
    plan = _PLANS["plain"]
    ops = plan.operations
    # Wrong container and argument types raise TypeError.
    for bad in (list(ops), None, 3):
        with pytest.raises(TypeError):
            _native.revalidate_scan(bad, 1, 1, TransferRegion, BoundWeightFragment)
    with pytest.raises(TypeError):
        _native.revalidate_scan(ops, 1, 1, "TransferRegion", BoundWeightFragment)
    with pytest.raises(TypeError):
        _native.revalidate_scan(ops, 1, 1, TransferRegion)
    # Anything unexpected declines: budgets that are not exact positive-range ints, other
    # classes, subclasses, missing fields, non-int values, huge values, unequal loop ranks.
    for budget in (-(2**64), 1.0, "1", None, True):
        assert _scan(ops, budget, 10**7) is None
        assert _scan(ops, 10**6, budget) is None
    assert _scan(ops, 2**200, 2**200) is not None
    assert _scan(ops + (object(),)) is None
    assert _scan(ops, 10**6, 10**7) is not None

    class Region(TransferRegion):  # type: ignore[type-arg]
        pass

    sub = forged_instance(Region, dict(field_state(ops[0])))
    assert _scan((sub,)) is None
    missing = _forge(ops[0])
    object.__delattr__(missing, "target_strides")  # emptied in its C layout
    assert _scan((missing,)) is None
    for changes in (
        {"inner_bytes": 2.0},
        {"inner_bytes": True},
        {"inner_bytes": 2**64},
        {"source_base_offset": -(2**63), "inner_bytes": -1},
        {"source_strides": [1]},
        {"outer_loop_counts": (1, 1), "source_strides": (0,), "target_strides": (0, 0)},
        {"outer_loop_counts": (2**62, 4), "source_strides": (1, 1), "target_strides": (1, 1)},
        {"outer_loop_counts": ("2",), "source_strides": (1,), "target_strides": (1,)},
        {"source": object()},
        {"target": ops[0].target.placement},
    ):
        assert _scan((_forge(ops[0], **changes),)) is None, changes
    # A binding whose nbytes is missing, huge or not an int declines; a raising attribute
    # other than AttributeError propagates.
    class Raising:
        @property
        def nbytes(self) -> int:
            raise RuntimeError("boom")

    for binding in (object(), _forge(ops[0].target.binding, nbytes=2**70), _forge(ops[0].target.binding, nbytes="9")):
        assert _scan((_forge(ops[0], target=_forge(ops[0].target, binding=binding)),)) is None
    with pytest.raises(RuntimeError, match="boom"):
        _scan((_forge(ops[0], target=_forge(ops[0].target, binding=Raising())),))
    # One fragment object used on both sides of two operations is listed once.
    swapped = _forge(ops[0], source=ops[0].target)
    result = _scan((ops[0], swapped))
    reference = _scan_reference((ops[0], swapped), 10**6, 10**7)
    assert (result is None) == (reference is None)


def test_overlapping_target_ranges_are_rejected_by_both_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two target participants of one address space writing the same bytes (built with the
    §12.6 check switched off): the fast path's whole-fragment decision declines, and the
    rules report the conflict."""
    source = tp_placement(2, prefix="s", shape=(4, 8))
    target = tp_placement(2, prefix="t", shape=(4, 8))
    memory = HostMemory()
    source_bindings = host_bindings(source, memory, prefix="src")
    target_bindings = host_bindings(target, memory, prefix="dst")
    first = target_bindings[0]
    overlapping = [first]
    for binding in target_bindings[1:]:
        fragments = tuple(
            dataclasses.replace(fragment, worker_id=other.worker_id, device=other.device, address=other.address,
                                storage_address=other.address, storage_offset_bytes=0)
            for fragment, other in zip(binding.fragments, first.fragments)
        )
        overlapping.append(dataclasses.replace(binding, instance_id=first.instance_id, fragments=fragments))
    logical = plan_placement_transfer(source, target)
    with pytest.raises(ValueError):
        bind_logical_transfer_plan(logical, tuple(overlapping), source_bindings=source_bindings)
    with monkeypatch.context() as patch:
        patch.setattr(bc, "_fast_revalidate", lambda *args: False)
        patch.setattr(bc, "_validate_no_in_place", lambda operations: None)
        from mooncake.reshard.weight import _address_ranges
        from mooncake.reshard.weight._planner import bound_validation

        patch.setattr(bound_validation, "_validate_target_physical_ranges", lambda *args, **kwargs: None)
        patch.setattr(_address_ranges, "validate_runtime_address_ranges", lambda views: None)
        from mooncake.reshard.weight._planner import binding as planner_binding

        if hasattr(planner_binding, "validate_runtime_address_ranges"):  # imported by name there
            patch.setattr(planner_binding, "validate_runtime_address_ranges", lambda views: None)
        plan = bind_logical_transfer_plan(logical, tuple(overlapping), source_bindings=source_bindings)
    assert _fast(plan, True)[0] is False
    assert _slow(plan, True)[0] is False
    with pytest.raises(ValueError, match="conflicting target physical range"):
        dataclasses.replace(plan)
    # Binding skips §12.6 on its own operations (it just ran it): the rest still holds.
    assert _agree(plan) is False or _slow(plan, False)[0]


# ---------------------------------------------------------------------------------------
# _native.revalidate_fragments and _native.revalidate_side, against Python references

from mooncake.reshard.contracts.fragments import RuntimeBindingFragment  # noqa: E402
from mooncake.reshard.weight import WeightPlacementManifest  # noqa: E402
from mooncake.reshard.weight._planner.attestation import RuntimeBindingAttestation  # noqa: E402
from mooncake.reshard.weight.types import PlacementFragment  # noqa: E402

_FRAGMENT_TYPES = (PlacementFragment, RuntimeBindingFragment, RuntimeBindingAttestation, WeightPlacementManifest,
                   ParallelRank)


def _fragments_reference(frags: list[Any], identity: tuple[Any, ...]) -> Any:
    """The Python loop ``revalidate_fragments`` replaced (None: decline)."""
    keys: list[Any] = []
    routes: list[Any] = []
    runtime_ids: list[Any] = []
    attested: dict[int, Any] = {}
    for fragment in frags:
        state = field_state(fragment)
        placement, binding = state["placement"], state["binding"]
        if type(placement) is not PlacementFragment or type(binding) is not RuntimeBindingFragment:
            return None
        if state["owner"] is not None or binding.owner is not None:
            return None
        attestation = state["attestation"]
        if type(attestation) is not RuntimeBindingAttestation:
            return None
        entry = attested.get(id(attestation))
        if entry is None:
            astate = attestation.__dict__
            apl = astate["placement"]
            if type(apl) is not WeightPlacementManifest or (apl.resource_id, apl.revision,
                                                             apl.weight_generation) != identity:
                return None
            entry = attested[id(attestation)] = (astate["_placement_dict"], astate["_binding_dict"],
                                                 bc._attested_view(attestation))
        pfid = placement.placement_fragment_id
        expected_placement, expected_binding = entry[0].get(pfid), entry[1].get(pfid)
        if expected_placement is None or expected_binding is None:
            return None
        if not (expected_placement == placement and expected_binding == binding):
            return None
        rank = placement.rank
        if type(rank) is not ParallelRank:
            return None
        rank_tuple = (rank.dp, rank.tp, rank.pp, rank.ep)
        keys.append(entry[2].key_base + (binding.worker_id, rank_tuple))
        routes.append((rank.pp, placement.pipeline_stage_id))
        runtime_ids.append(binding.fragment_id)
    return keys, routes, runtime_ids, attested


def _identity(plan: TransferPlan) -> tuple[Any, ...]:
    return (plan.resource_id, plan.revision, plan.weight_generation)


def _native_fragments(frags: list[Any], identity: tuple[Any, ...]) -> Any:
    return _native.revalidate_fragments(frags, *_FRAGMENT_TYPES, identity, bc._attested_view)


def _fragments_agree(plan: TransferPlan) -> None:
    # One revalidation scope: the C call and the reference share each attestation's view.
    with bc._ViewScope():
        _fragments_agree_scoped(plan)


def _fragments_agree_scoped(plan: TransferPlan) -> None:
    scanned = _scan(plan.operations)
    if scanned is None:
        return
    frags = scanned[0]
    try:
        reference = _fragments_reference(frags, _identity(plan))
    except Exception:
        reference = None
    try:
        native = _native_fragments(frags, _identity(plan))
    except Exception:
        native = None
    if native is not None:
        assert reference is not None
        assert native[:3] == reference[:3]
        assert native[3].keys() == reference[3].keys()
        for key, entry in native[3].items():
            assert all(a is b for a, b in zip(entry, reference[3][key]))


def _side_index_reference(executors: Any) -> Any:
    """What ``revalidate_views`` computes per side before the operations are assigned."""
    runtime: dict[Any, Any] = {}
    table: dict[Any, Any] = {}
    rows: list[Any] = []
    for count, executor in enumerate(executors, 1):
        estate = executor.__dict__
        rank = estate["rank"]
        if type(rank) is not ParallelRank:
            return None
        rank_state = rank.__dict__
        fragment_ids = estate["fragment_ids"]
        key = (
            estate["instance_id"],
            estate["placement_id"],
            estate["participant_id"],
            estate["placement_digest"],
            estate["runtime_lease_id"],
            estate["worker_id"],
            (rank_state["dp"], rank_state["tp"], rank_state["pp"], rank_state["ep"]),
        )
        row = (estate, key, [])
        table[key + (fragment_ids,)] = row[2]
        if len(table) != count:
            return None
        for fragment_id in fragment_ids:
            runtime.setdefault(fragment_id, row)
        rows.append(row)
    return runtime, rows, table


def _side_tables(executors: Any, side_of: list[int], runtime_ids: list[Any]) -> Any:
    """The side index with the operation buckets filled, as ``revalidate_views`` does."""
    index = _side_index_reference(executors)
    if index is None:
        return None
    runtime, rows, _table = index
    for op_index, position in enumerate(side_of):
        row = runtime.get(runtime_ids[position])
        if row is not None:
            row[2].append(op_index)
    return runtime, rows


def _sides_agree(plan: TransferPlan) -> None:
    """C side consistency True => the Python version is True with the same ``used``."""
    with bc._ViewScope():
        _sides_agree_scoped(plan)


def _sides_agree_scoped(plan: TransferPlan) -> None:
    scanned = _scan(plan.operations)
    if scanned is None:
        return
    frags, source_of, target_of, _boxes = scanned
    try:
        checked = _native_fragments(frags, _identity(plan))
    except Exception:
        return
    if checked is None:
        return
    keys, _routes, runtime_ids, attested = checked
    for side_of, executors in ((source_of, plan.source_executors), (target_of, plan.target_executors)):
        try:
            index = _side_tables(executors, side_of, runtime_ids)
        except Exception:
            continue
        if index is None:
            continue
        runtime, rows = index
        native_used: set[int] = set()
        try:
            native = _native.revalidate_side(frags, keys, runtime_ids, side_of, runtime, rows, attested, native_used,
                                             RuntimeBindingAttestation, ParallelRank, bc.RuntimeFragmentSnapshot)
        except Exception:
            native = None
        python_used: set[int] = set()
        try:
            python = bc._fast_side_consistent(frags, keys, runtime_ids, side_of, runtime, rows, attested, python_used)
        except Exception:
            python = False
        if native is not None:
            assert native is True and python is True
            assert native_used == python_used


@pytest.mark.parametrize("name", sorted(_PLANS))
def test_fragments_and_sides_of_genuine_plans(name: str) -> None:
    plan = _PLANS[name]
    for candidate in (plan, dataclasses.replace(plan), pickle.loads(pickle.dumps(plan))):
        _fragments_agree(candidate)
        _sides_agree(candidate)
        frags = _scan(candidate.operations)[0]
        assert _native_fragments(frags, _identity(candidate)) is not None
    # Binding's plan carries the attested snapshot objects, an unpickled one equal snapshots
    # of fresh attestations: the C side decides both.
    for candidate in (plan, pickle.loads(pickle.dumps(plan))):
        frags, source_of, target_of, _ = _scan(candidate.operations)
        keys, _routes, runtime_ids, attested = _native_fragments(frags, _identity(candidate))
        for side_of, executors in ((source_of, candidate.source_executors), (target_of, candidate.target_executors)):
            runtime, rows = _side_tables(executors, side_of, runtime_ids)
            used: set[int] = set()
            assert _native.revalidate_side(frags, keys, runtime_ids, side_of, runtime, rows, attested, used,
                                           RuntimeBindingAttestation, ParallelRank, bc.RuntimeFragmentSnapshot) is True
            assert used


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(sorted(_PLANS)),
    choices=st.lists(st.integers(0, len(_MUTATIONS) - 1), min_size=1, max_size=2),
    data=st.data(),
)
def test_fragments_and_sides_against_python(name: str, choices: list[int], data: Any) -> None:
    plan = _PLANS[name]

    def pick(n: int) -> int:
        return data.draw(st.integers(0, max(n - 1, 0))) if n > 1 else 0

    for choice in choices:
        plan = _MUTATIONS[choice](plan, pick)
    _fragments_agree(plan)
    _sides_agree(plan)


def test_fragments_and_side_hostile_inputs() -> None:
    plan = _PLANS["plain"]
    frags, source_of, target_of, _ = _scan(plan.operations)
    identity = _identity(plan)
    with pytest.raises(TypeError):
        _native.revalidate_fragments(tuple(frags), *_FRAGMENT_TYPES, identity, bc._attested_view)
    with pytest.raises(TypeError):
        _native.revalidate_fragments(frags, *_FRAGMENT_TYPES, list(identity), bc._attested_view)
    with pytest.raises(TypeError):
        _native.revalidate_fragments(frags, *_FRAGMENT_TYPES, identity, 3)
    with pytest.raises(TypeError):
        _native.revalidate_fragments(frags, *_FRAGMENT_TYPES[:4], identity, bc._attested_view)
    # Values of other shapes decline; the view callable's errors propagate.
    assert _native_fragments([], identity) == ([], [], [], {})
    assert _native_fragments(frags, (identity[0], identity[1], identity[2] + 1)) is None
    assert _native_fragments(frags, ()) is None
    assert _native_fragments([_forge(frags[0], owner=1)], identity) is None
    missing = _forge(frags[0])
    object.__delattr__(missing, "attestation")  # (an emptied slot: what a missing key was)
    assert _native_fragments([missing], identity) is None
    assert _native_fragments([_forge(frags[0], attestation=None)], identity) is None
    forged_view = _forge(frags[0].attestation)
    forged_view.__dict__["_placement_dict"] = dict(forged_view.__dict__["_placement_dict"]).items()
    assert _native_fragments([_forge(frags[0], attestation=forged_view)], identity) is None

    def boom(attestation: Any) -> Any:
        raise RuntimeError("boom")

    # Without the exact cache entry of ``bc._attested_view`` (a tuple whose dependencies are all
    # unchanged) the view is the callable's: any other value found on an attestation (a bare view,
    # what an earlier version kept there) is never read, and none is written by the C call.
    for fragment in frags:
        fragment.attestation.__dict__.pop("_attested_view", None)
    with pytest.raises(RuntimeError, match="boom"):
        _native.revalidate_fragments(frags, *_FRAGMENT_TYPES, identity, boom)
    uncached = _forge(frags[0].attestation)
    uncached.__dict__.pop("_attested_view", None)
    stale = _forge(frags[0].attestation)
    stale.__dict__["_attested_view"] = kept = bc._attested_view(frags[0].attestation)
    for attestation in (uncached, stale):
        lone = [_forge(frags[0], attestation=attestation)]
        with pytest.raises(RuntimeError, match="boom"):
            _native.revalidate_fragments(lone, *_FRAGMENT_TYPES, identity, boom)

        def odd_view(attestation: Any) -> Any:
            return object()

        assert _native.revalidate_fragments(lone, *_FRAGMENT_TYPES, identity, odd_view) is None
        fresh = _native_fragments(lone, identity)
        assert fresh is not None and fresh[0] == _fragments_reference(lone, identity)[0]
    assert stale.__dict__["_attested_view"] is kept  # neither read nor replaced
    assert "_attested_view" not in uncached.__dict__
    assert all("_attested_view" not in fragment.attestation.__dict__ for fragment in frags)
    # no instance dict and not a bound fragment layout: nothing read, declined (it raised
    # AttributeError before bound fragments were stored in a C layout)
    assert _native_fragments([object()], identity) is None
    keys, _routes, runtime_ids, attested = _native_fragments(frags, identity)
    runtime, rows = _side_tables(plan.target_executors, target_of, runtime_ids)
    args = [frags, keys, runtime_ids, target_of, runtime, rows, attested, set(), RuntimeBindingAttestation,
            ParallelRank, bc.RuntimeFragmentSnapshot]
    assert _native.revalidate_side(*args) is True
    for position, bad in ((0, tuple(frags)), (4, list(runtime.items())), (7, frozenset()), (8, "type"), (10, None)):
        hostile = list(args)
        hostile[position] = bad
        with pytest.raises(TypeError):
            _native.revalidate_side(*hostile)
    for position, bad in (
        (1, keys[:-1]),
        (3, [len(frags)]),
        (3, [-1]),
        (3, [2**70]),
        (3, ["0"]),
        (4, {}),
        (5, [("not", "a row")]),
        (5, rows + rows),
        (6, {}),
    ):
        hostile = list(args)
        hostile[position] = bad
        hostile[7] = set()
        assert _native.revalidate_side(*hostile) is None, position
    unhashable = list(args)
    unhashable[1] = [[key] for key in keys]
    with pytest.raises(TypeError):
        _native.revalidate_side(*unhashable)


# ---------------------------------------------------------------------------------------
# _native.revalidate_spaces (§12.5 and the common §12.6 case), against a Python reference

_U64_MAX = (1 << 64) - 1


def _spaces_reference(frags: list[Any], source_of: list[int], target_of: list[int], boxes: list[Any],
                      check_physical: bool) -> Optional[bool]:
    sources: dict[Any, set[Any]] = {}
    for position in dict.fromkeys(source_of):
        fragment = frags[position]
        binding = fragment.binding
        sources.setdefault((fragment.instance_id, binding.worker_id, binding.device), set()).add(
            (binding.storage_address, binding.storage_nbytes)
        )
    targets: dict[Any, set[Any]] = {}
    quick = check_physical and len(set(target_of)) == len(target_of)
    extents: dict[Any, list[Any]] = {}
    for index, position in enumerate(target_of):
        fragment = frags[position]
        binding = fragment.binding
        space = (fragment.instance_id, binding.worker_id, binding.device)
        targets.setdefault(space, set()).add((binding.storage_address, binding.storage_nbytes))
        if quick:
            placement = fragment.placement
            address, nbytes = binding.address, binding.nbytes
            if (
                placement.aliases
                or boxes[index] != (placement.global_offset, placement.local_shape)
                or type(address) is not int
                or type(nbytes) is not int
                or address < 0
                or nbytes <= 0
                or address + nbytes > _U64_MAX
            ):
                quick = False
            else:
                extents.setdefault(space, []).append((address, address + nbytes))
    for space, allocations in sources.items():
        other = targets.get(space)
        if other is not None and not allocations.isdisjoint(other):
            return False
    if not check_physical:
        return True
    if quick:
        for extent in extents.values():
            extent.sort()
            for (_, end), (begin, _) in zip(extent, extent[1:]):
                if begin < end:
                    quick = False
    return True if quick else None


def _spaces_agree(plan: TransferPlan) -> None:
    scanned = _scan(plan.operations)
    if scanned is None:
        return
    frags, source_of, target_of, boxes = scanned
    for physical in (True, False):
        try:
            reference: Any = _spaces_reference(frags, source_of, target_of, boxes, physical)
        except Exception:
            reference = "error"
        try:
            native: Any = _native.revalidate_spaces(frags, source_of, target_of, boxes, physical)
        except Exception:
            native = "error"
        # The same decision (the tables come from revalidate_scan, so they are well formed).
        assert native is reference or native == reference == "error", (native, reference)
        try:  # exact bindings and placements read through their dicts: alike
            typed: Any = _native.revalidate_spaces(
                frags, source_of, target_of, boxes, physical, RuntimeBindingFragment, PlacementFragment
            )
        except Exception:
            typed = "error"
        assert typed is native or native == typed == "error", (typed, native)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(sorted(_PLANS)),
    choices=st.lists(st.integers(0, len(_MUTATIONS) - 1), min_size=1, max_size=2),
    data=st.data(),
)
def test_spaces_against_python(name: str, choices: list[int], data: Any) -> None:
    plan = _PLANS[name]

    def pick(n: int) -> int:
        return data.draw(st.integers(0, max(n - 1, 0))) if n > 1 else 0

    for choice in choices:
        plan = _MUTATIONS[choice](plan, pick)
    _spaces_agree(plan)


def test_spaces_decisions_and_hostile_inputs() -> None:
    assert _native.revalidate_spaces(*_scan(_PLANS["plain"].operations), True) is None  # partial writes
    plan = _PLANS["split"]
    frags, source_of, target_of, boxes = _scan(plan.operations)
    assert _native.revalidate_spaces(frags, source_of, target_of, boxes, True) is True
    assert _native.revalidate_spaces(frags, source_of, target_of, boxes, False) is True
    # Tied (declared-alias) targets and partial writes leave the decision to the sweep.
    tied = _scan(_PLANS["tied"].operations)
    assert _native.revalidate_spaces(*tied, True) is None
    assert _native.revalidate_spaces(*tied, False) is True
    partial = list(boxes)
    partial[0] = (partial[0][0], tuple(d + 1 for d in partial[0][1]))
    assert _native.revalidate_spaces(frags, source_of, target_of, partial, True) is None
    # One target fragment written twice, overlapping extents, unrepresentable addresses.
    assert _native.revalidate_spaces(frags, source_of, target_of[:1] * len(target_of), boxes, True) is None
    for binding_changes in ({"address": -1}, {"address": 2**64 - 1}, {"nbytes": 0}, {"address": 1.0},
                            {"address": frags[target_of[1]].binding.address}):
        forged = list(frags)
        forged[target_of[0]] = _forge(frags[target_of[0]], binding=_forge(frags[target_of[0]].binding,
                                                                          **binding_changes))
        reference = _spaces_reference(forged, source_of, target_of, boxes, True)
        assert _native.revalidate_spaces(forged, source_of, target_of, boxes, True) is reference
        assert reference is None or binding_changes == {"address": frags[target_of[1]].binding.address}
    # Source and target sharing an allocation in one address space.
    forged = list(frags)
    source = frags[source_of[0]]
    forged[target_of[0]] = _forge(frags[target_of[0]], instance_id=source.instance_id, binding=_forge(
        frags[target_of[0]].binding, worker_id=source.binding.worker_id, device=source.binding.device,
        storage_address=source.binding.storage_address, storage_nbytes=source.binding.storage_nbytes))
    assert _native.revalidate_spaces(forged, source_of, target_of, boxes, True) is False
    assert _spaces_reference(forged, source_of, target_of, boxes, True) is False
    # Malformed tables decline (False: never "no in-place overlap"); wrong container types
    # raise TypeError.
    for physical in (True, False):
        assert _native.revalidate_spaces(frags, source_of[:-1], target_of, boxes, physical) is False
        assert _native.revalidate_spaces(frags, source_of, [len(frags)] * len(target_of), boxes, physical) is False
        assert _native.revalidate_spaces(frags, source_of, [-1] * len(target_of), boxes, physical) is False
        assert _native.revalidate_spaces(frags, source_of, [2**80] * len(target_of), boxes, physical) is False
        no_binding = list(frags)
        no_binding[source_of[0]] = _forge(frags[source_of[0]])
        object.__delattr__(no_binding[source_of[0]], "binding")
        assert _native.revalidate_spaces(no_binding, source_of, target_of, boxes, physical) is False
    assert _native.revalidate_spaces([], [], [], [], True) is True
    for position in range(4):
        hostile: list[Any] = [frags, source_of, target_of, boxes, True]
        hostile[position] = tuple(hostile[position])
        with pytest.raises(TypeError):
            _native.revalidate_spaces(*hostile)
    unhashable = list(frags)
    unhashable[source_of[0]] = _forge(frags[source_of[0]], instance_id=[])
    with pytest.raises(TypeError):
        _native.revalidate_spaces(unhashable, source_of, target_of, boxes, True)


# ---------------------------------------------------------------------------------------
# _native.revalidate_coverage (§12.7), against the Python version


def _coverage_tables(plan: TransferPlan) -> Any:
    """The fast path's tables up to §12.7 (None when an earlier step declines)."""
    scanned = _scan(plan.operations)
    if scanned is None:
        return None
    frags, source_of, target_of, boxes = scanned
    checked = _native_fragments(frags, _identity(plan))
    if checked is None:
        return None
    keys, _routes, runtime_ids, attested = checked
    used: set[int] = set()
    rows = None
    for side_of, executors in ((source_of, plan.source_executors), (target_of, plan.target_executors)):
        tables = _side_tables(executors, side_of, runtime_ids)
        if tables is None:
            return None
        runtime, rows = tables
        if not bc._fast_side_consistent(frags, keys, runtime_ids, side_of, runtime, rows, attested, used):
            return None
    return plan.target_placement, frags, target_of, boxes, rows, attested, used


def _coverage_agrees(plan: TransferPlan) -> Optional[bool]:
    try:
        tables = _coverage_tables(plan)
    except Exception:
        return None
    if tables is None:
        return None
    try:
        native = _native.revalidate_coverage(*tables)
    except Exception:
        native = None
    try:  # the boxes filed by placement fragment object decide alike
        by_identity = _native.revalidate_coverage(*tables, ParallelRank, PlacementFragment)
    except Exception:
        by_identity = None
    assert by_identity is native
    try:
        python = bc._fast_target_coverage(*tables)
    except Exception:
        python = False
    if native is not None:
        assert native is True and python is True
    return native


@pytest.mark.parametrize("name", sorted(_PLANS))
def test_coverage_of_genuine_plans(name: str) -> None:
    native = _coverage_agrees(_PLANS[name])
    # Whole-fragment writes are decided in C; partial ones (exact cover) in Python.
    assert native is (True if "split" in name else None)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(sorted(_PLANS)),
    choices=st.lists(st.integers(0, len(_MUTATIONS) - 1), min_size=1, max_size=2),
    data=st.data(),
)
def test_coverage_against_python(name: str, choices: list[int], data: Any) -> None:
    plan = _PLANS[name]

    def pick(n: int) -> int:
        return data.draw(st.integers(0, max(n - 1, 0))) if n > 1 else 0

    for choice in choices:
        plan = _MUTATIONS[choice](plan, pick)
    _coverage_agrees(plan)


def test_coverage_hostile_inputs() -> None:
    tables = _coverage_tables(_PLANS["split"])
    assert tables is not None
    placement, frags, target_of, boxes, rows, attested, used = tables
    assert _native.revalidate_coverage(*tables) is True
    for position, bad in ((1, tuple(frags)), (2, tuple(target_of)), (3, None), (4, tuple(rows)), (5, []), (6, {})):
        hostile = list(tables)
        hostile[position] = bad
        with pytest.raises(TypeError):
            _native.revalidate_coverage(*hostile)
    for position, bad in (
        (0, _PLANS["plain"].target_placement),  # another placement
        (2, [len(frags)] * len(target_of)),
        (2, [-1] * len(target_of)),
        (3, boxes[:-1]),
        (3, [((0, 0), (1, 1))] * len(boxes)),  # boxes that are not the fragments
        (4, rows[:-1]),  # an executor missing
        (4, rows + rows[:1]),  # a repeated executor
        (4, [("state", "key", [])]),
        (5, {}),
        (6, set()),
    ):
        hostile = list(tables)
        hostile[position] = bad
        assert _native.revalidate_coverage(*hostile) is None, position
    with pytest.raises(AttributeError):
        _native.revalidate_coverage(object(), frags, target_of, boxes, rows, attested, used)


def test_coverage_executor_checks() -> None:
    """Each executor check of §12.7, on forged executor states that bypass §12.4: the C
    version is unsure and the Python version rejects."""
    tables = _coverage_tables(_PLANS["split"])
    assert tables is not None
    placement, frags, target_of, boxes, rows, attested, used = tables
    other = _PLANS["plain"].source_executors[0]
    for name, value in (
        ("rank", ParallelRank(tp=7)),
        ("placement_id", "elsewhere"),
        ("placement_digest", "0" * 64),
        ("instance_id", "other-instance"),
        ("runtime_lease_id", "other-lease"),
        ("participant_id", "nobody"),
        ("participant_id", rows[1][0]["participant_id"]),
        ("worker_id", rows[1][0]["worker_id"]),
        ("fragment_ids", ()),
        ("attestation", None),
        ("attestation", other.attestation),
    ):
        estate = dict(rows[0][0])
        estate[name] = value
        forged_rows = [(estate, rows[0][1], rows[0][2])] + rows[1:]
        forged_used = set(used) | {id(estate)}
        forged = (placement, frags, target_of, boxes, forged_rows, attested, forged_used)
        assert _native.revalidate_coverage(*forged) is None, name
        assert bc._fast_target_coverage(*forged) is False, name
    # An executor state owning no operation.
    assert _native.revalidate_coverage(placement, frags, target_of, boxes, rows, attested, set()) is None
    assert bc._fast_target_coverage(placement, frags, target_of, boxes, rows, attested, set()) is False


# ---------------------------------------------------------------------------------------
# _native.revalidate_views (§11.9 operation views), against a Python reference


def _views_reference(plan: TransferPlan, runtime_ids: list[Any], halves: list[Any], source_of: list[int],
                     target_of: list[int]) -> Any:
    sides = [_side_index_reference(plan.source_executors), _side_index_reference(plan.target_executors)]
    if sides[0] is None or sides[1] is None:
        return None
    (s_runtime, s_rows, s_table), (t_runtime, t_rows, t_table) = sides
    routes: dict[Any, list[int]] = {}
    for index, (s, t) in enumerate(zip(source_of, target_of)):
        for runtime, position in ((s_runtime, s), (t_runtime, t)):
            row = runtime.get(runtime_ids[position])
            if row is not None:
                row[2].append(index)
        routes.setdefault(halves[s] + halves[t], []).append(index)
    return s_runtime, s_rows, s_table, t_runtime, t_rows, t_table, routes


def _plain(value: Any) -> Any:
    """Rows with their state dicts by identity, for comparing two results."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple) and len(value) == 3 and isinstance(value[0], dict):
        return (id(value[0]), value[1], value[2])
    return value


def _views_agree(plan: TransferPlan) -> Any:
    scanned = _scan(plan.operations)
    if scanned is None:
        return None
    frags, source_of, target_of, _ = scanned
    try:
        checked = _native_fragments(frags, _identity(plan))
    except Exception:
        return None
    if checked is None:
        return None
    _keys, halves, runtime_ids, _attested = checked
    try:
        reference = _views_reference(plan, runtime_ids, halves, source_of, target_of)
    except Exception:
        reference = None
    try:
        native = _native.revalidate_views(plan.source_executors, plan.target_executors, runtime_ids, halves,
                                          source_of, target_of, ParallelRank)
    except Exception:
        native = None
    if native is not None:
        assert reference is not None
        assert _plain(list(native)) == _plain(list(reference))
    return native


@pytest.mark.parametrize("name", sorted(_PLANS))
def test_views_of_genuine_plans(name: str) -> None:
    assert _views_agree(_PLANS[name]) is not None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(sorted(_PLANS)),
    choices=st.lists(st.integers(0, len(_MUTATIONS) - 1), min_size=1, max_size=2),
    data=st.data(),
)
def test_views_against_python(name: str, choices: list[int], data: Any) -> None:
    plan = _PLANS[name]

    def pick(n: int) -> int:
        return data.draw(st.integers(0, max(n - 1, 0))) if n > 1 else 0

    for choice in choices:
        plan = _MUTATIONS[choice](plan, pick)
    _views_agree(plan)


def test_views_hostile_inputs() -> None:
    plan = _PLANS["plain"]
    frags, source_of, target_of, _ = _scan(plan.operations)
    _keys, halves, runtime_ids, _attested = _native_fragments(frags, _identity(plan))
    args: list[Any] = [plan.source_executors, plan.target_executors, runtime_ids, halves, source_of, target_of,
                       ParallelRank]
    assert _native.revalidate_views(*args) is not None
    for position, bad in ((0, list(plan.source_executors)), (2, tuple(runtime_ids)), (4, None), (6, "rank")):
        hostile = list(args)
        hostile[position] = bad
        with pytest.raises(TypeError):
            _native.revalidate_views(*hostile)
    executor = plan.target_executors[0]
    missing = _forge(executor)
    del missing.__dict__["worker_id"]
    copied = list(args)
    copied[1] = (_forge(executor, rank=_forge(executor.rank)),) + plan.target_executors[1:]  # an equal rank
    assert _native.revalidate_views(*copied) is not None
    for position, bad in (
        (1, plan.target_executors + plan.target_executors[:1]),  # a repeated view key
        (1, (_forge(executor, rank=(0, 0, 0, 0)),)),  # not a ParallelRank
        (1, (missing,)),  # a missing field
        (2, runtime_ids[:-1]),
        (3, [(0,)] * len(halves)),
        (4, [len(frags)] * len(source_of)),
        (4, [-1] * len(source_of)),
        (5, target_of[:-1]),
    ):
        hostile = list(args)
        hostile[position] = bad
        assert _native.revalidate_views(*hostile) is None, position
    # fragment ids not exactly a tuple of exact str (the rules reject them): declined before hashing
    for ids in ([["x"]], [executor.fragment_ids[0]], (_StrSub(executor.fragment_ids[0]),), _TupleSub(executor.fragment_ids)):
        assert _native.revalidate_views(plan.source_executors, (_forge(executor, fragment_ids=ids),), *args[2:]) is None
    # an identifier of a str subclass, a rank value not exactly an int
    for changes in (
        {"worker_id": _StrSub(executor.worker_id)},
        {"placement_digest": _StrSub(executor.placement_digest)},
        {"rank": _forge(executor.rank, tp=float(executor.rank.tp))},
        {"rank": _forge(executor.rank, pp=_IntSub(executor.rank.pp))},
    ):
        assert _native.revalidate_views(plan.source_executors, (_forge(executor, **changes),), *args[2:]) is None
    with pytest.raises(AttributeError):  # no instance dict (the caller checks the class)
        _native.revalidate_views((object(),), *args[1:])

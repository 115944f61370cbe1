"""TransferPlan revalidation fast path (``bound_contracts._fast_revalidate``) against the
rule-by-rule path (``TransferPlan._revalidate_rules``) as the oracle.

The fast path may decline any plan (the rule-by-rule path then decides and raises the spec's
first failure), but it must never accept a plan the rule-by-rule path rejects, and on the plans
it accepts it must derive the same operation views."""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_executor import HostMemory, host_bindings, tp_placement

from mooncake.reshard.weight import ParallelRank, PlanningLimits
from mooncake.reshard.weight._planner import bound_contracts as bc
from mooncake.reshard.weight.planner import TransferPlan, bind_logical_transfer_plan, plan_placement_transfer


def _bound_plan(*, tied: bool = False, shared: bool = False, tensors: tuple[str, ...] = ("v", "w")) -> TransferPlan:
    source = tp_placement(2, prefix="s", dp=2, shape=(4, 7), tensors=tensors, tied=tied)
    target = tp_placement(3, prefix="t", shape=(4, 7), tensors=tensors, tied=tied)
    logical = plan_placement_transfer(source, target)
    memory = HostMemory()
    source_bindings = host_bindings(source, memory, prefix="src")
    target_bindings = host_bindings(target, memory, prefix="dst", shared_allocation=shared)
    return bind_logical_transfer_plan(logical, target_bindings, source_bindings=source_bindings)


_PLANS = {
    "plain": _bound_plan(),
    "tied": _bound_plan(tied=True),
    "shared": _bound_plan(shared=True),
}


def _forge(value: Any, **changes: Any) -> Any:
    """A copy of the frozen dataclass ``value`` with ``changes``, bypassing every check."""
    forged = object.__new__(type(value))
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
    op = plan.operations[pick(len(plan.operations))]
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
        index = pick(len(executors))
        executors[index] = _forge(executors[index], **make(executors[index], plan, pick))
        return _forge(plan, **{side: tuple(executors)})

    return mutate


def _any_executor(plan: TransferPlan, pick: Pick) -> Any:
    executors = plan.source_executors + plan.target_executors
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
]


def _edit_tuple(name: str) -> Mutation:
    def mutate(plan: TransferPlan, pick: Pick) -> TransferPlan:
        values = list(getattr(plan, name))
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
            values[index] = donor[pick(len(donor))]
        return _forge(plan, **{name: tuple(values)})

    return mutate


def _limits(plan: TransferPlan, pick: Pick) -> TransferPlan:
    segments = [op.segment_count for op in plan.operations]
    if pick(2):
        limits = PlanningLimits(max_segments_per_region=max(segments) - 1 or 1)
    else:
        limits = PlanningLimits(max_total_lowered_segments=sum(segments) - 1)
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
    aliased = []
    for mine, theirs in zip(target_bindings, source_bindings):
        fragments = tuple(
            dataclasses.replace(
                fragment,
                address=other.address,
                storage_address=other.storage_address,
                storage_nbytes=other.storage_nbytes,
                storage_offset_bytes=other.storage_offset_bytes,
                worker_id=other.worker_id,
                device=other.device,
            )
            for fragment, other in zip(mine.fragments, theirs.fragments)
        )
        aliased.append(dataclasses.replace(mine, instance_id=theirs.instance_id, fragments=fragments))
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

"""``revalidate_side`` gives its cache hints (staged cursors, prefetches) only from
RS_HINTED_FRAGS (256) fragments on: a smaller plan's loops skip them. Hints decide nothing, so
plans on both sides of that size are decided alike: the C side check accepts the genuine plan
and declines a plan whose fragment or executor was forged, with every fragment's check still
run (a forged fragment first, in the middle, or last); whenever the C check accepts, the Python
one (``_fast_side_consistent``) accepts the same arguments."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from memory_executor import HostMemory, host_bindings, tp_placement

from mooncake.reshard import _native
from mooncake.reshard.weight._planner import bound_contracts as bc
from mooncake.reshard.weight.planner import TransferPlan, bind_logical_transfer_plan, plan_placement_transfer
from test_native_revalidate import _forge

HINTED = 256


def _plan(n_tensors: int) -> TransferPlan:
    names = tuple(f"t{k}" for k in range(n_tensors))
    source = tp_placement(2, prefix="s", shape=(4, 6), tensors=names)
    target = tp_placement(3, prefix="t", shape=(4, 6), tensors=names)
    memory = HostMemory()
    return bind_logical_transfer_plan(
        plan_placement_transfer(source, target),
        host_bindings(target, memory, prefix="dst"),
        source_bindings=host_bindings(source, memory, prefix="src"),
    )


def _side_answers(plan: TransferPlan) -> tuple[list[Any], int]:
    """The C side checks' answers in ``replace(plan)`` (the Python fallback and the rules decide
    the result), and the number of fragments they were given."""
    real = _native.revalidate_side
    answers: list[Any] = []
    sizes: list[int] = []

    def spy(*args: Any) -> Any:
        sizes.append(len(args[0]))
        answers.append(real(*args))
        if answers[-1] is True:  # never accepted where the Python side check refuses
            frags, keys, runtime_ids, side_of, runtime, rows, attested = args[:7]
            assert bc._fast_side_consistent(
                frags, keys, runtime_ids, bc._position_list(side_of), runtime, rows, attested, set()
            )
        return answers[-1]

    _native.revalidate_side = spy
    try:
        try:
            dataclasses.replace(plan)
        except ValueError:
            pass
    finally:
        _native.revalidate_side = real
    return answers, max(sizes, default=0)


_PLANS = {"small": _plan(2), "below": _plan(30), "above": _plan(60)}


def test_the_plans_lie_on_both_sides_of_the_hinted_size() -> None:
    sizes = {name: _side_answers(plan)[1] for name, plan in _PLANS.items()}
    assert sizes["small"] < HINTED and sizes["below"] < HINTED <= sizes["above"], sizes


@pytest.mark.parametrize("name", sorted(_PLANS))
def test_genuine_plans_are_accepted_by_the_c_side_check(name: str) -> None:
    answers, _ = _side_answers(_PLANS[name])
    assert answers == [True, True]


def _forged_fragment(plan: TransferPlan, index: int, side: str, **changes: Any) -> TransferPlan:
    operations = list(plan.operations)
    op = operations[index]
    fragment = getattr(op, side)
    forged = _forge(fragment, **changes)
    # every operation of that fragment carries the forged one (the fragments stay distinct)
    for k, other in enumerate(operations):
        if getattr(other, side) is fragment:
            operations[k] = _forge(other, **{side: forged})
    return _forge(plan, operations=tuple(operations))


@pytest.mark.parametrize("name", sorted(_PLANS))
@pytest.mark.parametrize("where", ("first", "middle", "last"))
@pytest.mark.parametrize("side", ("source", "target"))
def test_a_forged_fragment_is_never_accepted(name: str, where: str, side: str) -> None:
    plan = _PLANS[name]
    index = {"first": 0, "middle": len(plan.operations) // 2, "last": len(plan.operations) - 1}[where]
    fragment = getattr(plan.operations[index], side)
    forged = _forged_fragment(plan, index, side, lease_generation=fragment.lease_generation + 1)
    answers, _ = _side_answers(forged)
    assert True not in answers[("source", "target").index(side) :][:1], answers
    with pytest.raises(ValueError):
        dataclasses.replace(forged)


@pytest.mark.parametrize("name", sorted(_PLANS))
@pytest.mark.parametrize("side", ("source_executors", "target_executors"))
def test_a_forged_executor_snapshot_is_never_accepted(name: str, side: str) -> None:
    plan = _PLANS[name]
    executors = list(getattr(plan, side))
    executor = executors[-1]
    snapshots = list(executor.fragment_snapshots)
    snapshots[-1] = _forge(snapshots[-1], address=snapshots[-1].address + 2)
    executors[-1] = _forge(executor, fragment_snapshots=tuple(snapshots))
    forged = _forge(plan, **{side: tuple(executors)})
    answers, _ = _side_answers(forged)
    at = ("source_executors", "target_executors").index(side)
    assert len(answers) <= at or answers[at] is not True, answers
    with pytest.raises(ValueError):
        dataclasses.replace(forged)

"""A sealed bind call whose §12.4 check is proven (``bound_contracts._sealed_side_holds``) and whose
two sides' executors name disjoint instances (``bound_contracts._sealed_spaces_apart``) does not
run the new plan's §12.5 pass (``_native.revalidate_spaces``): an address space is ``(instance_id,
worker_id, device)``, every operation fragment's instance id is its executor's, so no space holds
a source and a target allocation (the argument is in ``_sealed_spaces_apart``'s docstring).

Checked here: which calls run the pass (a spy, admitted in watched calls), at 4 operations (inert
inputs) and 400 (watched); the plan is the one the unsealed call builds, which runs the pass;
``replace`` and a pickle round trip run it; a sealed call whose sides share an instance runs it,
accepting separate allocations and refusing an in-place binding with the §12.5 message; and
``_sealed_spaces_apart`` itself on executors that are not exact or whose ids are not exact str."""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any

import pytest

from forge_helpers import bindings_sharing_instances, maybe_profiled, outcome, sized_world
from spec_helpers import field_state, forged_instance
from watched import no_hooks, spy_on

from mooncake.reshard import _native
from mooncake.reshard.weight import ExecutorTransferPlan, TransferPlan, bind_logical_transfer_plan
from mooncake.reshard.weight._planner import bound_contracts as bc
from mooncake.reshard.weight._planner import exactness

SIZES = pytest.mark.parametrize("tensors", [2, 200], ids=["4ops", "400ops"])
IN_PLACE = "in-place reshard is unsupported"


def _spied(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    """Per call of the §12.5 pass its result; per carried scan whether it was taken (a sealed
    call's mark)."""
    exactness.code_watch()
    seen: dict[str, list[Any]] = {"spaces": [], "carried": []}
    spy_on(monkeypatch, _native, "revalidate_spaces", lambda args, result: seen["spaces"].append(result))
    spy_on(
        monkeypatch, _native, "revalidate_scan_carried", lambda args, result: seen["carried"].append(result is not None)
    )
    return seen


def _bind(logical: Any, targets: Any, sources: Any) -> Any:
    return bind_logical_transfer_plan(logical, targets, source_bindings=sources)


@SIZES
def test_a_sealed_bind_with_instances_apart_skips_the_pass(monkeypatch: pytest.MonkeyPatch, tensors: int) -> None:
    no_hooks()
    logical, targets, sources, _memory = sized_world(tensors)
    seen = _spied(monkeypatch)
    plan = _bind(logical, targets, sources)
    assert seen == {"spaces": [], "carried": [True]}  # sealed, the pass not run
    # the same inputs, unsealed (a profile hook): the pass runs, and the plan is the same
    again = maybe_profiled(True, lambda: _bind(logical, targets, sources))
    assert seen["spaces"] == [True] and seen["carried"] == [True]
    assert again == plan
    # every other constructor runs it
    for make in (
        lambda: dataclasses.replace(plan),
        lambda: pickle.loads(pickle.dumps(plan, protocol=pickle.HIGHEST_PROTOCOL)),
    ):
        before = len(seen["spaces"])
        assert make() == plan
        assert seen["spaces"][before:] == [True]


@SIZES
def test_a_sealed_bind_whose_sides_share_an_instance_runs_the_pass(
    monkeypatch: pytest.MonkeyPatch, tensors: int
) -> None:
    no_hooks()
    logical, targets, sources, _memory = sized_world(tensors)
    shared = bindings_sharing_instances(targets, sources, in_place=False)
    assert {binding.instance_id for binding in shared} <= {binding.instance_id for binding in sources}
    seen = _spied(monkeypatch)
    plan = _bind(logical, shared, sources)
    assert seen == {"spaces": [True], "carried": [True]}  # sealed, and the pass accepted
    assert not bc._sealed_spaces_apart(plan.source_executors, plan.target_executors)
    assert maybe_profiled(True, lambda: _bind(logical, shared, sources)) == plan


@SIZES
def test_a_sealed_in_place_bind_is_refused(monkeypatch: pytest.MonkeyPatch, tensors: int) -> None:
    no_hooks()
    logical, targets, sources, _memory = sized_world(tensors)
    aliased = bindings_sharing_instances(targets, sources, in_place=True)
    seen = _spied(monkeypatch)
    refused = outcome(lambda: _bind(logical, aliased, sources))
    assert refused[0] == "ValueError" and IN_PLACE in refused[1]
    assert seen["carried"] == [True] and seen["spaces"][:1] == [False]  # sealed: the pass found it
    assert maybe_profiled(True, lambda: outcome(lambda: _bind(logical, aliased, sources))) == refused
    # the same instance id set on the given target bindings in place after their construction
    edited = bindings_sharing_instances(targets, sources, in_place=True)
    for binding, other in zip(edited, targets):
        object.__setattr__(binding, "instance_id", str(other.instance_id))
    assert isinstance(_bind(logical, edited, sources), TransferPlan)  # apart again: no shared space
    for binding, theirs in zip(edited, sources):
        object.__setattr__(binding, "instance_id", theirs.instance_id)
    assert outcome(lambda: _bind(logical, edited, sources)) == refused


class _LoudId(str):
    pass


class _Executor(ExecutorTransferPlan):
    pass


def test_spaces_apart_needs_exact_executors_and_ids() -> None:
    logical, targets, sources, _memory = sized_world(2)
    plan = _bind(logical, targets, sources)
    source, target = plan.source_executors, plan.target_executors
    assert bc._sealed_spaces_apart(source, target)
    first = target[0]

    def forged(cls: type, **changes: Any) -> Any:
        return forged_instance(cls, {**field_state(first), **changes})

    for replaced in (
        forged(ExecutorTransferPlan, instance_id=source[-1].instance_id),  # an instance on both sides
        forged(ExecutorTransferPlan, instance_id=_LoudId(first.instance_id)),  # not an exact str
        forged(ExecutorTransferPlan, instance_id=None),
        forged(_Executor),  # not an exact executor
    ):
        assert not bc._sealed_spaces_apart(source, (replaced,) + target[1:])
    # a source executor naming a target instance
    moved = forged_instance(ExecutorTransferPlan, {**field_state(source[0]), "instance_id": first.instance_id})
    assert not bc._sealed_spaces_apart((moved,) + source[1:], target)
    missing = forged(ExecutorTransferPlan)
    del missing.__dict__["instance_id"]
    assert not bc._sealed_spaces_apart(source, (missing,) + target[1:])
    assert bc._sealed_spaces_apart(source, (forged(ExecutorTransferPlan),) + target[1:])  # an equal copy

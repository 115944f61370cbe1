"""Which bind calls are sealed (``binding._sealed``): only then does the new plan's revalidation
take the facts the call proved earlier (bind_regions' carried scan, observed here through
``revalidate_scan_carried``). Exact classes and no hook: sealed (the benchmarks' path, which must
not silently lose its carried facts). Each way user code can run during the call: unsealed, and
the plan bound is the same (every rule runs again instead)."""

from __future__ import annotations

import copy
import dataclasses
import sys
from typing import Any, Callable

import pytest

from carried_scans import count_carried_scans
from forge_helpers import maybe_profiled, with_source_tensor_class, world

from mooncake.reshard.weight import WeightRuntimeBindingManifest, bind_logical_transfer_plan
from mooncake.reshard.weight.types import TensorDescriptor
from mooncake.reshard.weight._planner.contracts import LogicalTransferPlan, PlacementExecutorPlan, PlanningLimits


_world = world


def _subclass_copy(obj: Any) -> Any:
    """A copy of ``obj`` whose class is a trivial subclass of its own (same fields)."""
    cls = type(obj)
    sub = type(f"Sub{cls.__name__}", (cls,), {})
    hooked = copy.copy(obj)
    object.__setattr__(hooked, "__class__", sub)
    return hooked


def _bind_counting(monkeypatch: pytest.MonkeyPatch, logical: Any, targets: Any, sources: Any) -> tuple[Any, int]:
    return count_carried_scans(monkeypatch, lambda: bind_logical_transfer_plan(logical, targets, source_bindings=sources))


def test_exact_inputs_are_sealed(monkeypatch: pytest.MonkeyPatch) -> None:
    if sys.gettrace() is not None or sys.getprofile() is not None:
        pytest.skip("a trace or profile hook is set (coverage, a debugger): no call is sealed")
    logical, targets, sources, _memory = _world()
    _plan, carried = _bind_counting(monkeypatch, logical, targets, sources)
    assert carried == 1
    # lists are as good as tuples
    _plan, carried = _bind_counting(monkeypatch, logical, list(targets), list(sources))
    assert carried == 1


def _plan_subclass(logical: Any, targets: Any, sources: Any) -> tuple[Any, Any, Any]:
    return _subclass_copy(logical), targets, sources


def _limits_subclass(logical: Any, targets: Any, sources: Any) -> tuple[Any, Any, Any]:
    plan = copy.copy(logical)
    object.__setattr__(plan, "planning_limits", _subclass_copy(logical.planning_limits))
    return plan, targets, sources


class _Descriptor(TensorDescriptor):
    """Equal to the descriptor with the same fields (the dataclass ``__eq__`` wants one class)."""

    def __eq__(self, other: object) -> bool:
        return dataclasses.astuple(self) == dataclasses.astuple(other)  # type: ignore[arg-type]

    __hash__ = TensorDescriptor.__hash__


def _descriptor_subclass(logical: Any, targets: Any, sources: Any) -> tuple[Any, Any, Any]:
    return with_source_tensor_class(logical, _Descriptor), targets, sources


def _executor_subclass(logical: Any, targets: Any, sources: Any) -> tuple[Any, Any, Any]:
    plan = copy.copy(logical)
    object.__setattr__(plan, "source_executors", tuple(_subclass_copy(e) for e in logical.source_executors))
    return plan, targets, sources


def _binding_subclass(logical: Any, targets: Any, sources: Any) -> tuple[Any, Any, Any]:
    return logical, [_subclass_copy(b) for b in targets], sources


def _bindings_generator(logical: Any, targets: Any, sources: Any) -> tuple[Any, Any, Any]:
    return logical, targets, (binding for binding in sources)


@pytest.mark.parametrize(
    "unseal",
    [_plan_subclass, _limits_subclass, _descriptor_subclass, _executor_subclass, _binding_subclass, _bindings_generator],
    ids=lambda f: f.__name__.lstrip("_"),
)
def test_user_code_unseals_and_binds_the_same_plan(monkeypatch: pytest.MonkeyPatch, unseal: Callable[..., Any]) -> None:
    logical, targets, sources, _memory = _world()
    expected = bind_logical_transfer_plan(logical, targets, source_bindings=sources)
    plan, carried = _bind_counting(monkeypatch, *unseal(logical, targets, sources))
    assert carried == 0
    assert _bound(plan) == _bound(expected)


def _bound(plan: Any) -> tuple[Any, ...]:
    """What a bind call derived (the plan's other fields are the inputs' own values)."""
    return plan.operations, plan.source_executors, plan.target_executors


def test_a_profile_hook_unseals(monkeypatch: pytest.MonkeyPatch) -> None:
    logical, targets, sources, _memory = _world()
    expected = bind_logical_transfer_plan(logical, targets, source_bindings=sources)
    plan, carried = maybe_profiled(True, lambda: _bind_counting(monkeypatch, logical, targets, sources))
    assert carried == 0
    assert plan == expected


def test_the_subclasses_used_here_are_real_subclasses() -> None:
    logical, targets, _sources, _memory = _world()
    assert type(_subclass_copy(logical)) is not LogicalTransferPlan
    assert isinstance(_subclass_copy(logical), LogicalTransferPlan)
    assert isinstance(_subclass_copy(logical.planning_limits), PlanningLimits)
    assert isinstance(_subclass_copy(logical.source_tensors[0]), TensorDescriptor)
    assert isinstance(_subclass_copy(logical.source_executors[0]), PlacementExecutorPlan)
    assert isinstance(_subclass_copy(targets[0]), WeightRuntimeBindingManifest)
    assert dataclasses.is_dataclass(logical)

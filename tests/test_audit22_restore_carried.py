"""Audit (session 22): the facts a ``TransferPlan`` restore carries from
``_native.restore_regions_carried`` (csrc/restore_scan.c) to its revalidation's
``revalidate_scan_carried``, against foreign code that runs in between.

Between building the regions and the scan that uses the facts derived from them, the restore
(``bound_pickle._restore_transfer_plan``) runs:

- allocations with the cyclic collector running (the record format: protocols 0-4, and
  ``copy.copy`` / ``copy.deepcopy``; the packed protocol 5 restore pauses the collector), so
  ``gc.callbacks`` and the finalizers / weakref callbacks of collected garbage run there;
- attribute reads of the payload's ``planning_limits`` when it is a ``PlanningLimits`` subclass
  (``_require_typed_limits``, ``max_transfer_regions``, then ``max_segments_per_region`` right
  before ``revalidate_scan_carried``), in every format;
- ``sys.settrace`` / ``sys.setprofile`` hooks and other threads.

Every one of them reaches the new regions (the restore's frame: ``sys._getframe``). A forgery is a
hole when it is accepted, or refused with another message than the same edit of an unpickled
plan gets from ``dataclasses.replace`` (every rule, nothing carried). The audit found both
channels open (the forgeries below were strict xfails on ``dfe02e5``); since then the restore
pauses the collector throughout and takes the carried facts only with no hook and exact
``PlanningLimits`` / ``WeightPlacementManifest`` (else every rule runs, nothing carried).
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import pickle
import sys
from typing import Any, Callable

import pytest

from memory_executor import HostMemory, host_bindings, tp_placement

from mooncake.reshard.weight import TransferPlan, bind_logical_transfer_plan, plan_placement_transfer
from mooncake.reshard.weight._planner.contracts import PlanningLimits

Forge = Callable[[Any], None]


def _plan(tensors: int = 2) -> tuple[TransferPlan, HostMemory]:
    names = tuple(f"w{index:03d}" for index in range(tensors))
    source = tp_placement(2, prefix="s", dp=2, shape=(4, 6), tensors=names)
    target = tp_placement(2, prefix="t", shape=(4, 6), tensors=names)
    memory = HostMemory()
    logical = plan_placement_transfer(source, target)
    targets = host_bindings(target, memory, prefix="dst")
    sources = host_bindings(source, memory, prefix="src")
    return bind_logical_transfer_plan(logical, targets, source_bindings=sources), memory


def _outcome(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except Exception as exc:
        return (type(exc).__name__, str(exc))


def _restore_frame_operations() -> Any:
    """The regions of the restore on the stack, once it has built them (else None)."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name in ("_restore_transfer_plan", "_restore_record"):
            return frame.f_locals.get("operations")
        frame = frame.f_back
    return None


def _target_is_source(operations: Any) -> None:
    object.__setattr__(operations[0], "target", operations[0].source)


def _target_offset_beyond(operations: Any) -> None:
    object.__setattr__(operations[0], "target_base_offset", operations[0].target_base_offset + 10**6)


def _fragment_next_generation(operations: Any) -> None:
    target = operations[0].target
    object.__setattr__(target, "lease_generation", target.lease_generation + 1)


def _binding_shrunk(operations: Any) -> None:
    target = operations[0].target
    object.__setattr__(target, "binding", dataclasses.replace(target.binding, nbytes=target.binding.nbytes // 2))


def _overlap_doubled(operations: Any) -> None:
    op = operations[0]
    object.__setattr__(op, "overlap_shape", tuple(2 * extent for extent in op.overlap_shape))


def _unforged_message(plan: TransferPlan, forge: Forge) -> Any:
    restored = pickle.loads(pickle.dumps(plan, protocol=4))
    forge(restored.operations)
    return _outcome(lambda: dataclasses.replace(restored))


def _case(forge: Forge) -> Any:
    return pytest.param(forge, id=forge.__name__.lstrip("_"))


_CASES = [
    _case(_target_is_source),
    _case(_target_offset_beyond),
    _case(_fragment_next_generation),
    _case(_binding_shrunk),
    _case(_overlap_doubled),
]


def _gc_forged(load: Callable[[], Any], forge: Forge) -> tuple[Any, bool]:
    """``load()`` with a gc callback that forges the restore's regions at the first collection
    after they exist (every allocation of a tracked object collects meanwhile)."""
    state = {"done": False}

    def callback(phase: str, info: Any) -> None:
        if phase == "start" and not state["done"]:
            operations = _restore_frame_operations()
            if operations is not None:
                state["done"] = True
                forge(operations)

    threshold = gc.get_threshold()
    enabled = gc.isenabled()
    gc.callbacks.append(callback)
    gc.set_threshold(1, 1, 1)
    gc.enable()
    try:
        result = _outcome(load)
    finally:
        gc.callbacks.remove(callback)
        gc.set_threshold(*threshold)
        if not enabled:
            gc.disable()
    return result, state["done"]


@pytest.mark.parametrize("how", ["pickle4", "copy", "pickle5"])
def test_no_gc_callback_runs_during_restore_once_the_regions_exist(how):
    """The collector is paused through the whole restore (``_restore_transfer_plan``), so the gc
    channel cannot reach the regions between their scan and the revalidation (on ``dfe02e5`` it
    could for the record format: a target pointed at its source was accepted)."""
    plan, _memory = _plan()
    if how == "copy":
        load: Callable[[], Any] = lambda: copy.copy(plan)
    else:
        payload = pickle.dumps(plan, protocol=4 if how == "pickle4" else 5)
        load = lambda: pickle.loads(payload)
    result, done = _gc_forged(load, _target_is_source)
    assert not done
    assert isinstance(result, TransferPlan)


class _HookLimits(PlanningLimits):
    """Forges the restore's regions once, at the first read of a limit once they exist (today:
    ``max_transfer_regions`` in ``_revalidate_scoped``, before ``revalidate_scan_carried``)."""

    def __getattribute__(self, name: str) -> Any:
        forge = _LIMITS_HOOK.get("forge")
        if name.startswith("max_") and forge is not None:
            operations = _restore_frame_operations()
            if operations is not None:
                _LIMITS_HOOK["forge"] = None
                _LIMITS_HOOK["done"] = True
                forge(operations)
        return object.__getattribute__(self, name)


_LIMITS_HOOK: dict[str, Any] = {}


@pytest.mark.parametrize("forge", _CASES)
@pytest.mark.parametrize("protocol", [4, 5])
def test_region_edited_by_limits_subclass_during_restore_is_refused_as_unforged(forge, protocol):
    plan, _memory = _plan()
    limits = object.__new__(_HookLimits)
    for f in dataclasses.fields(PlanningLimits):
        object.__setattr__(limits, f.name, getattr(plan.planning_limits, f.name))
    hooked = dataclasses.replace(plan, planning_limits=limits)
    payload = pickle.dumps(hooked, protocol=protocol)
    assert isinstance(pickle.loads(payload), TransferPlan)  # the hook alone changes nothing
    expected = _unforged_message(plan, forge)
    assert expected[0] == "ValueError"
    _LIMITS_HOOK.update(forge=forge, done=False)
    try:
        result = _outcome(lambda: pickle.loads(payload))
    finally:
        done = _LIMITS_HOOK.get("done")
        _LIMITS_HOOK.clear()
    assert done
    assert result == expected

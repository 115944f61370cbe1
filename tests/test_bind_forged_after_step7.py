"""A bound fragment changed in place after bind's step 7 built it must still be refused.

User code can run inside ``bind_logical_transfer_plan`` after the bound fragments exist and before
the new plan's revalidation: a ``LogicalTransferPlan`` subclass's attribute reads (the keyword
arguments of ``TransferPlan._from_bound_operations``) or a subclassed adapter binding's (read at
step 11), which can reach the call's bound fragments (its frame, or ``gc.get_objects()``). The
revalidation must therefore re-derive every per-fragment rule for them: session 21 briefly let a
bind call skip three (the attested-entry comparison, the attested id, the lease generation) on
the claim that no other code reached those objects, and these forgeries were accepted (review
of 1a44bc1 / 85a42f0, reverted)."""

from __future__ import annotations

import copy
import dataclasses
import sys

import pytest

from memory_executor import HostMemory, host_bindings, tp_placement

from mooncake.reshard.weight import TransferPlan, plan_placement_transfer, bind_logical_transfer_plan
from mooncake.reshard.weight._planner.contracts import LogicalTransferPlan


def _world():
    source = tp_placement(2, prefix="s", dp=2, shape=(4, 6), tensors=("v", "w"))
    target = tp_placement(2, prefix="t", shape=(4, 6), tensors=("v", "w"))
    logical = plan_placement_transfer(source, target)
    memory = HostMemory()
    return logical, host_bindings(target, memory, prefix="dst"), host_bindings(source, memory, prefix="src")


def _forging(logical, forge):
    class Hooked(LogicalTransferPlan):
        def __getattribute__(self, name):
            if name == "source_manifest_identity":
                frame = sys._getframe(1)
                ops = frame.f_locals.get("bound_operations")
                if ops is not None and not hooked_state["done"]:
                    hooked_state["done"] = True
                    forge(ops)
            return object.__getattribute__(self, name)

    hooked_state = {"done": False}
    plan = copy.copy(logical)
    object.__setattr__(plan, "__class__", Hooked)
    return plan, hooked_state


def _outcome(logical, targets, sources):
    try:
        return bind_logical_transfer_plan(logical, targets, source_bindings=sources)
    except Exception as exc:
        return (type(exc).__name__, str(exc))


def _forge_generation(ops):
    target = ops[0].target
    object.__setattr__(target, "lease_generation", target.lease_generation + 1)


def _forge_binding(ops):
    # another memory (address and storage address shifted together: internally consistent),
    # not the attested evidence fragment; fragment id, worker, placement fragment id unchanged
    target = ops[0].target
    b = target.binding
    shift = 1 << 20
    object.__setattr__(
        target, "binding", dataclasses.replace(b, address=b.address + shift, storage_address=b.storage_address + shift)
    )


def _forge_source_generation(ops):
    for op in ops:
        source = op.source
        if hasattr(source, "lease_generation"):
            object.__setattr__(source, "lease_generation", source.lease_generation + 5)
            return
    raise AssertionError("no bound source")


@pytest.mark.parametrize(
    ("forge", "message"),
    [
        (_forge_generation, "target executor fragment provenance differs"),
        (_forge_source_generation, "source executor fragment provenance differs"),
        (_forge_binding, "transfer plan target fragment differs from attested runtime binding"),
    ],
)
def test_forged_bound_fragment_after_step7_is_refused(forge, message):
    logical, targets, sources = _world()
    plain = _outcome(logical, targets, sources)
    assert isinstance(plain, TransferPlan)  # the hook itself changes nothing
    hooked, state = _forging(logical, lambda ops: None)
    assert _outcome(hooked, targets, sources) == plain
    hooked, state = _forging(logical, forge)
    result = _outcome(hooked, targets, sources)
    assert state["done"]
    # refused by the rules, never accepted with the forged fragment
    assert result == ("ValueError", message)


def test_adapter_binding_subclass_hook_forges_generation_through_gc():
    """Same gap reached by a subclassed adapter binding (read at step 11) and gc.get_objects()."""
    import gc

    from mooncake.reshard.weight import WeightRuntimeBindingManifest
    from mooncake.reshard.weight._planner.fragments import BoundWeightFragment

    logical, targets, sources = _world()
    state = {"done": False}

    class AdapterBinding(WeightRuntimeBindingManifest):
        def __getattribute__(self, name):
            if name == "placement_id" and sys._getframe(1).f_code.co_name == "_build_executor_plans_with":
                if not state["done"]:
                    state["done"] = True
                    for o in gc.get_objects():
                        if type(o) is BoundWeightFragment and id(o) not in before:
                            object.__setattr__(o, "lease_generation", o.lease_generation + 1)
                            break
            return object.__getattribute__(self, name)

    subclassed = []
    for b in targets:
        c = copy.copy(b)
        object.__setattr__(c, "__class__", AdapterBinding)
        subclassed.append(c)
    before = {id(o) for o in gc.get_objects() if type(o) is BoundWeightFragment}  # (this call's only)
    result = _outcome(logical, subclassed, sources)
    assert state["done"]
    assert not isinstance(result, TransferPlan), "accepted a bound fragment whose lease generation is not the evidence's"

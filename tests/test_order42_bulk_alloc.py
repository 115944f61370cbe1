"""ORDER42: bind's bulk builders (``bd_ordered_build``'s bound fragments, ``bind_regions``'
regions) allocate their C-owned layout instances through ``PyObject_GC_New`` instead of the
class's ``tp_alloc`` (csrc/layout.h ``mr_layout_new_with``): the fields stored, the bytes after
them (the subclass's ``__weakref__`` slot) zeroed, and the object tracked by the collector only
when a value is not inert. The objects must be what ``PyType_GenericAlloc`` + ``mr_layout_new``
made: an empty weakref slot, the collector state the inert rule decides, the class's reference
count given back when they die, and the same plan."""

from __future__ import annotations

import gc
import sys
import weakref
from pathlib import Path
from typing import Any

import pytest

from mooncake.reshard.weight import PlanningLimits, bind_logical_transfer_plan, plan_placement_transfer
from mooncake.reshard.weight._planner.contracts import TransferRegion
from mooncake.reshard.weight._planner.fragments import BoundWeightFragment

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import _workloads as w  # noqa: E402
from test_planasm22_region_gc import _inert  # noqa: E402  (common.h's mr_gc_inert, from its comment)

_REGION_FIELDS = TransferRegion.__dataclass_fields__
_BOUND_FIELDS = BoundWeightFragment.__dataclass_fields__


def _inputs(layers: int, experts: int = 48) -> tuple[Any, Any, Any]:
    import scale  # benchmarks/scale.py (on the path above)

    inputs = w.independent_experts(layers=layers, experts=experts)
    source, target = w.assemble(inputs.source), w.assemble(inputs.target)
    logical = plan_placement_transfer(source, target, planning_limits=PlanningLimits(**scale.PLANNING_LIMITS))
    return (
        logical,
        w.bindings(target, prefix="dst", window=4096),
        w.bindings(source, prefix="src", window=0),
    )


def _bound_of(plan: Any) -> list[Any]:
    seen: dict[int, Any] = {}
    for region in plan.operations:
        for fragment in (region.source, region.target):
            if type(fragment) is BoundWeightFragment:
                seen.setdefault(id(fragment), fragment)
    return list(seen.values())


# layers=1: bind_regions over the two maps (1,152 operations); layers=4: the ordered path
# (bind_regions_ordered, 4,608): both past the bulk builders' threshold (256).
@pytest.mark.parametrize("layers", [1, 4])
def test_bulk_built_objects_are_what_tp_alloc_made(collector_off: None, layers: int) -> None:
    logical, target_bindings, source_bindings = _inputs(layers)
    plan = bind_logical_transfer_plan(logical, target_bindings, source_bindings=source_bindings)
    regions = plan.operations
    assert len(regions) >= 1024
    assert all(type(region) is TransferRegion for region in regions)
    bound = _bound_of(plan)
    assert len(bound) >= 256
    for obj, names in [(region, _REGION_FIELDS) for region in regions] + [(b, _BOUND_FIELDS) for b in bound]:
        # the weakref slot after the fields: zeroed (no weak reference yet), then usable
        assert obj.__weakref__ is None
        ref = weakref.ref(obj)
        assert ref() is obj and obj.__weakref__ is ref
        values = [getattr(obj, name) for name in names]
        if type(obj) is TransferRegion:
            # a region is untracked exactly when every value is inert (mr_layout_new's rule)
            assert gc.is_tracked(obj) == (not all(_inert(value) for value in values))
        elif not gc.is_tracked(obj):
            # a bound fragment is untracked only when its values but the attestation are inert
            assert all(_inert(value) for value in values if value is not obj.attestation)
        # the collector can walk it (tracked or not): exactly its field values
        referents = gc.get_referents(obj)
        assert all(any(value is item for item in referents) for value in values)
        del ref


@pytest.mark.parametrize("layers", [1, 4])
def test_bulk_built_objects_tracked_when_a_value_is_not(collector_off: None, layers: int) -> None:
    """A bound fragment holding a tracked (non-inert) value stays tracked, as does the region
    holding it: built untracked, they are tracked when a value is not inert (layers=1: the
    per-part path's bound fragments hold attestations that cache them, and stay tracked)."""
    logical, target_bindings, source_bindings = _inputs(layers)
    plan = bind_logical_transfer_plan(logical, target_bindings, source_bindings=source_bindings)
    bound = _bound_of(plan)
    tracked_bound = [b for b in bound if any(not _inert(getattr(b, n)) for n in _BOUND_FIELDS if n != "attestation")]
    for b in tracked_bound:
        assert gc.is_tracked(b)
    for region in plan.operations:
        if not all(_inert(getattr(region, n)) for n in _REGION_FIELDS):
            assert gc.is_tracked(region)


@pytest.mark.parametrize("layers", [1, 4])
def test_bulk_built_objects_give_back_their_class(layers: int) -> None:
    """Each instance holds a reference to its (heap) class; dropping the plan gives every one back."""
    logical, target_bindings, source_bindings = _inputs(layers)
    bind_logical_transfer_plan(logical, target_bindings, source_bindings=source_bindings)  # warm the memos
    gc.collect()
    before = (sys.getrefcount(TransferRegion), sys.getrefcount(BoundWeightFragment))
    for _ in range(3):
        plan = bind_logical_transfer_plan(logical, target_bindings, source_bindings=source_bindings)
        assert len(plan.operations) >= 1024
        del plan
        gc.collect()
    assert (sys.getrefcount(TransferRegion), sys.getrefcount(BoundWeightFragment)) == before


def test_bulk_built_plan_equals_the_rules_plan() -> None:
    """The same plan as binding through a copy of the inputs (fresh objects: the same path) and
    as each region rebuilt through the class's constructor."""
    logical, target_bindings, source_bindings = _inputs(4)
    plan = bind_logical_transfer_plan(logical, target_bindings, source_bindings=source_bindings)
    again = bind_logical_transfer_plan(logical, target_bindings, source_bindings=source_bindings)
    assert plan == again
    for region in plan.operations[:512]:
        rebuilt = TransferRegion(**{name: getattr(region, name) for name in _REGION_FIELDS})
        assert rebuilt == region and hash(rebuilt) == hash(region)

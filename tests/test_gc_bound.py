"""Bound plans and the cyclic garbage collector (issue 5, round 11b).

Placements (with their parts, topology and fragment table) and attestation evidence are
inert and untracked once built. Attestations stay tracked: the library caches values derived
from an attestation on it (executors and the per-part bound rows, both holding the
attestation), which are legitimate reference cycles; bound fragments (holding their
attestation) stay tracked where such a cache holds them (binding's per-part path, below 4096
operations); bind_regions untracks the others (their attestation's closure holds no bound
fragment) and the regions holding them. Everything the library builds is still freed once
dropped (no leak).
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import pickle
import weakref
from typing import Any, Iterator

import pytest
from memory_executor import HostWorld, tp_placement

from mooncake.reshard import _native
from mooncake.reshard.weight import PlacementFragment, WeightPlacementManifest
from mooncake.reshard.weight._planner import binding as _binding


def _world(parts: int) -> HostWorld:
    source = tp_placement(parts, prefix="s", shape=(144, 144), dim=0)
    return HostWorld(source, tp_placement(parts, prefix="t", shape=(144, 144), dim=1))


def _bind(parts: int) -> tuple[Any, Any, Any, Any, Any]:
    world = _world(parts)
    plan = world.bind()
    return world.source, world.target, world.logical, (world.source_bindings, world.target_bindings), plan


def _reaches(start: Any, goal: Any, limit: int = 200_000) -> bool:
    """True when ``goal`` is reachable from ``start`` through ``gc.get_referents``."""
    seen = {id(start)}
    stack = list(gc.get_referents(start))
    while stack and len(seen) < limit:
        obj = stack.pop()
        if obj is goal:
            return True
        if id(obj) in seen or isinstance(obj, type):
            continue
        seen.add(id(obj))
        stack.extend(gc.get_referents(obj))
    return False


def _attestations(plan: Any) -> list[Any]:
    found: dict[int, Any] = {}
    for executor in plan.source_executors + plan.target_executors:
        found[id(executor.attestation)] = executor.attestation
    return list(found.values())


def test_placement_parts_topology_and_table_are_untracked() -> None:
    source = _world(8).source
    assert type(source) is WeightPlacementManifest
    assert not gc.is_tracked(source)
    assert not gc.is_tracked(source.topology)
    assert not any(gc.is_tracked(p) for p in source.topology.participants)
    assert not any(gc.is_tracked(part) for part in source.parts)
    table = source._fragments_table()
    assert table is None or not gc.is_tracked(table)
    # lazily filled caches keep it working (a dict re-tracks itself when needed)
    assert source.digest and source._part_index()
    copied = pickle.loads(pickle.dumps(source))
    assert copied == source and copied.digest == source.digest
    assert not gc.is_tracked(copied) and not any(gc.is_tracked(part) for part in copied.parts)
    replaced = dataclasses.replace(source.parts[0])
    assert replaced == source.parts[0] and not gc.is_tracked(replaced)
    assert copy.deepcopy(source) == source


def test_untrack_table_hostile_arguments() -> None:
    assert _native.untrack_table(object()) is False
    assert _native.untrack_table(None) is False
    assert _native.untrack_table([]) is False
    with pytest.raises(TypeError):
        _native.untrack_table()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        _native.untrack_table(1, 2)  # type: ignore[call-arg]


def test_a_placement_holding_a_user_subclass_stays_tracked() -> None:
    class MyFragment(PlacementFragment):
        pass

    source = _world(4).source
    part = source.parts[0]
    first = part.fragments[0]
    mine = MyFragment(
        first.tensor_id, first.global_offset, first.local_shape, first.nbytes, first.rank,
        first.pipeline_stage_id, first.aliases, first.placement_fragment_id,
    )
    mine.note = []  # legal on a subclass instance: a possible cycle
    rebuilt = dataclasses.replace(part, fragments=(mine,) + part.fragments[1:])
    assert gc.is_tracked(rebuilt)
    placement = WeightPlacementManifest(
        resource_id=source.resource_id,
        revision=source.revision,
        weight_generation=source.weight_generation,
        placement_set_id=source.placement_set_id,
        topology=source.topology,
        parts=(rebuilt,) + source.parts[1:],
    )
    assert gc.is_tracked(placement)
    assert placement.placement_id == source.placement_id  # same logical content
    ref = weakref.ref(placement)
    mine.note.append(placement)  # a legitimate cycle through the placement: collected
    del placement, rebuilt, mine
    gc.collect()
    assert ref() is None


def test_small_plans_cache_bound_rows_in_a_cycle_through_the_attestation() -> None:
    """The per-part path caches bound fragments (holding the attestation) on the attestation:
    a legitimate cycle, so the attestation and those bound fragments stay tracked."""
    _, _, _, _, plan = _bind(8)
    assert len(plan.operations) < _binding._ORDERED_MIN_OPERATIONS
    attestation = plan.operations[0].target.attestation
    assert _reaches(attestation, attestation)
    for attestation in _attestations(plan):
        assert gc.is_tracked(attestation)
        assert not gc.is_tracked(attestation.evidence)
        assert not gc.is_tracked(attestation.placement)
    assert all(gc.is_tracked(op.target) for op in plan.operations)


def test_large_bind_untracks_bound_fragments_and_regions() -> None:
    """From 4096 operations binding's bound rows are not cached on the attestations: the bound
    fragments and regions are untracked by bind_regions; the attestations (executors cached on
    them hold them back) stay tracked, and no untracked bound fragment is reachable from one."""
    _, _, _, _, plan = _bind(72)
    operations = plan.operations
    assert len(operations) >= _binding._ORDERED_MIN_OPERATIONS
    for op in operations:
        assert not gc.is_tracked(op)
        assert not gc.is_tracked(op.target) and not gc.is_tracked(op.source)
    for attestation in _attestations(plan):
        assert gc.is_tracked(attestation)
        assert _reaches(attestation, attestation)
        assert not gc.is_tracked(attestation.evidence) and not gc.is_tracked(attestation.placement)
    bound = {id(op.target) for op in operations} | {id(op.source) for op in operations}
    for attestation in _attestations(plan)[:4]:
        seen = {id(attestation)}
        stack = list(gc.get_referents(attestation))
        while stack:
            obj = stack.pop()
            assert id(obj) not in bound
            if id(obj) in seen or isinstance(obj, type):
                continue
            seen.add(id(obj))
            stack.extend(gc.get_referents(obj))
    gc.collect()
    restored = pickle.loads(pickle.dumps(plan))
    assert restored == plan
    # restored plans too (their attestations cache no bound row)
    for op in restored.operations:
        assert not gc.is_tracked(op) and not gc.is_tracked(op.target) and not gc.is_tracked(op.source)
    for attestation in _attestations(restored):
        assert gc.is_tracked(attestation)
    assert dataclasses.replace(plan) == plan == dataclasses.replace(restored)


def test_untrack_bound_regions_hostile_arguments() -> None:
    from mooncake.reshard.weight._planner.fragments import BoundWeightFragment

    with pytest.raises(TypeError):
        _native.untrack_bound_regions([], int)  # not a heap class
    with pytest.raises(TypeError):
        _native.untrack_bound_regions([], 5)
    with pytest.raises(TypeError):
        _native.untrack_bound_regions([])  # type: ignore[call-arg]
    # anything that is not a list or tuple of regions is left alone
    junk: list[Any] = [[] for _ in range(2048)]
    assert _native.untrack_bound_regions(junk, BoundWeightFragment) is None
    assert _native.untrack_bound_regions("x" * 4096, BoundWeightFragment) is None
    assert all(gc.is_tracked(item) for item in junk)
    _, _, _, _, plan = _bind(48)
    regions = list(plan.operations)
    _native.untrack_bound_regions(regions, BoundWeightFragment)  # per-part rows cached: kept
    assert all(gc.is_tracked(op.target) for op in regions)


def test_bound_rows_cached_on_an_attestation_keep_its_bound_fragments_tracked() -> None:
    """A plan bound again from the same attestations is not the point here: binding's per-part
    path (below 4096 operations) caches its rows on the attestation, so bind_regions leaves
    those bound fragments and the regions holding them tracked."""
    _, _, _, _, plan = _bind(48)
    assert len(plan.operations) < _binding._ORDERED_MIN_OPERATIONS
    assert all(gc.is_tracked(op.target) and gc.is_tracked(op) for op in plan.operations)


def _weak_plan_parts(plan: Any) -> list[Any]:
    refs = [weakref.ref(plan), weakref.ref(plan.operations[0]), weakref.ref(plan.operations[0].target)]
    refs.extend(weakref.ref(attestation) for attestation in _attestations(plan))
    refs.extend(weakref.ref(executor) for executor in plan.source_executors)
    return refs


def _variants(plan: Any) -> Iterator[tuple[str, Any]]:
    yield "plan", plan
    yield "replace", dataclasses.replace(plan)
    yield "copy", copy.copy(plan)
    yield "pickle", pickle.loads(pickle.dumps(plan, protocol=pickle.HIGHEST_PROTOCOL))
    twice = pickle.loads(pickle.dumps(plan))
    dataclasses.replace(twice)
    dataclasses.replace(twice)  # the attested-view cache is now filled on its attestations
    yield "view-cache", twice


@pytest.mark.parametrize("parts", [8, 72])
def test_dropped_plans_are_freed(parts: int) -> None:
    gc.collect()
    source, target, logical, bindings, plan = _bind(parts)
    refs: list[Any] = []
    for _name, variant in _variants(plan):
        refs.extend(_weak_plan_parts(variant))
        del variant
    refs.append(weakref.ref(source))
    refs.append(weakref.ref(target))
    refs.append(weakref.ref(logical))
    del source, target, logical, bindings, plan, _name
    gc.collect()
    alive = [ref() for ref in refs if ref() is not None]
    assert alive == []


def test_a_plan_in_a_user_cycle_is_collected() -> None:
    """A user container holding a plan it is held by (a legitimate cycle through untracked
    regions' holders): collected."""
    gc.collect()
    _, _, _, _, plan = _bind(72)
    box: list[Any] = [plan]
    box.append(box)
    ref = weakref.ref(plan)
    region_ref = weakref.ref(plan.operations[0])
    del plan, box
    gc.collect()
    assert ref() is None and region_ref() is None

"""The attestation's id maps are out of the cyclic collector from the start when every key and
value may not be tracked (GROWTH40: ``mr_gc_untrack_atomic_dict`` in bind's attestations, the
rule CPython's collector applies itself at its first scan of a dict), and the collector still
sees whatever is put in them later (CPython tracks a dict again at the insert of a tracked
value)."""

from __future__ import annotations

import gc
import weakref
from typing import Any

from forge_helpers import sized_world

from mooncake.reshard.weight import bind_logical_transfer_plan


def _attestations(plan: Any) -> list[Any]:
    found = []
    for executor in plan.source_executors + plan.target_executors:
        attestation = executor.attestation
        if attestation is not None and all(attestation is not seen for seen in found):
            found.append(attestation)
    return found


def _bound() -> Any:
    logical, target_bindings, source_bindings, _ = sized_world(3)
    return bind_logical_transfer_plan(logical, target_bindings, source_bindings=source_bindings)


def test_bind_attestation_maps_start_untracked() -> None:
    enabled = gc.isenabled()
    gc.disable()  # no collection between bind and the checks (it would untrack them itself)
    try:
        plan = _bound()
        attestations = _attestations(plan)
        assert attestations
        for attestation in attestations:
            state = attestation.__dict__
            for name in ("_placement_dict", "_binding_dict"):
                mapping = state[name]
                assert mapping  # holds the fragments
                assert all(not gc.is_tracked(v) for v in mapping.values())
                assert not gc.is_tracked(mapping), name
    finally:
        if enabled:
            gc.enable()


def test_a_cycle_put_in_an_untracked_map_is_still_collected() -> None:
    plan = _bound()
    mapping = _attestations(plan)[0].__dict__["_placement_dict"]
    assert not gc.is_tracked(mapping)

    class Node:
        pass

    node = Node()
    node.self = node  # a cycle, reachable only through the map
    probe = weakref.ref(node)
    mapping["extra"] = node
    assert gc.is_tracked(mapping)  # CPython tracks the dict again
    del node
    gc.collect()
    assert probe() is not None  # reachable: kept
    del mapping["extra"]
    gc.collect()
    assert probe() is None  # unreachable cycle: collected

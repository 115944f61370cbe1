"""Session 28's C tables in bind's attestation passes (csrc/binder.c).

- ``attest_binding``'s fused pass (``bd_fused_views``) checks that a binding's runtime fragment
  ids are distinct with a C table of exact str by value (``bd_strtab``) instead of a set. The table
  borrows the ids from the fragments, so the pass runs with the collector off: no gc callback can
  replace an id while the table points at it.
- ``project_attested`` keeps the emitted ids in such a table (sized by the selection), holding the
  executors' ``fragment_ids`` tuples in C memory while ``attestation_values`` (Python) runs.

Each must decide exactly as before: the same attestation or executors, or None where the rule
path decides (and raises)."""

from __future__ import annotations

import dataclasses
import gc
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from spec_helpers import field_state

from layout_model import build_runtime_bindings
from test_native_binder_fused_attest import N, _decides_as_python, _forge_runtime, _fused, _same_attestation
from test_native_binder_fused_attest import _three_steps
from test_native_binder_attest_many import CLASSES
from test_native_binder_project import project, python_loop, with_c
from test_native_binder_tensor_ids import PLACEMENT

from mooncake.reshard import _native
from mooncake.reshard.weight._planner.attestation import _attest
from mooncake.reshard.weight._planner.bound_validation import _attestation_values


# --- attest_binding: the ids' distinctness -------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.integers(0, N - 1), st.integers(0, N - 1), st.booleans())
def test_a_repeated_fragment_id_anywhere_declines(first: int, second: int, same_object: bool) -> None:
    if first == second:
        second = (first + 1) % N
    bindings = build_runtime_bindings(PLACEMENT)
    earlier = bindings[0].fragments[first].fragment_id
    repeat = earlier if same_object else "".join(list(earlier))  # the object, or an equal copy
    forged = _forge_runtime(bindings, {second: {"fragment_id": repeat}})
    assert _fused(PLACEMENT, forged[0]) is None
    assert _three_steps(PLACEMENT, forged[0]) is None
    assert _decides_as_python(forged)[0] == "error"


def test_distinct_ids_with_equal_hash_buckets_are_accepted() -> None:
    # ids that differ only in their last characters (many share a table home slot's run)
    bindings = build_runtime_bindings(PLACEMENT)
    changes = {k: {"fragment_id": f"id-{k:04d}"} for k in range(N)}
    forged = _forge_runtime(bindings, changes)
    fused = _fused(PLACEMENT, forged[0])
    assert fused is not None
    _same_attestation(fused, _three_steps(PLACEMENT, forged[0]))


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize("forge", [False, True])
def test_the_collector_state_is_restored(enabled: bool, forge: bool) -> None:
    bindings = build_runtime_bindings(PLACEMENT)
    if forge:  # a repeated id: the pass declines
        bindings = _forge_runtime(bindings, {N - 1: {"fragment_id": bindings[0].fragments[0].fragment_id}})
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        result = _fused(PLACEMENT, bindings[0])
        assert gc.isenabled() is enabled
        assert (result is None) is forge
    finally:
        (gc.enable if was else gc.disable)()


def test_no_gc_callback_runs_inside_the_pass() -> None:
    """A gc callback armed for the call makes the last runtime fragment's id repeat the first's
    (an edit through object.__setattr__, which drops the id object the pass may have borrowed).
    The call's first collectable allocations are the pass's first dicts (the dict free list
    drained): with the collector on there, the callback would run at the pass's start and the pass
    would decline (the repeat). The pass runs with the collector off, so the callback runs only
    after it decided on the ids as they were (in the attestation's allocations): the attestation
    is built. (This pins that the pass runs with the collector off; its loop itself makes no
    collectable allocation on this input.)"""
    bindings = build_runtime_bindings(PLACEMENT)
    binding = bindings[0]
    fragments = binding.fragments
    first_id = fragments[0].fragment_id
    part = PLACEMENT._part_index()[binding.participant_id]
    args = (
        *CLASSES[:5], PLACEMENT, binding, part.fragments, part.tensors, PLACEMENT.resource_id,
        PLACEMENT.placement_id, PLACEMENT.digest, PLACEMENT.revision,
    )
    call = _native.attest_binding
    calls: list[str] = []
    armed = [False]

    def callback(phase: str, info: Any) -> None:
        if armed[0] and phase == "start" and not calls:
            calls.append(phase)
            object.__setattr__(fragments[-1], "fragment_id", first_id)

    was, thresholds = gc.isenabled(), gc.get_threshold()
    gc.disable()
    # the dict free list drained: the pass's first dicts are new collectable allocations
    kept = [dict(a=k) for k in range(400)]
    gc.callbacks.append(callback)
    gc.set_threshold(1, 1, 1)
    try:
        gc.collect()  # (allocation count 0)
        armed[0] = True
        gc.enable()  # nothing is allocated from here to the call's own allocations
        result = call(*args)
    finally:
        gc.disable()
        gc.callbacks.remove(callback)
        gc.set_threshold(*thresholds)
        (gc.enable if was else gc.disable)()
    assert calls  # the callback ran during the call
    del kept
    assert result is not None
    # the pass read the ids before the edit: the binding map holds the original last fragment
    assert fragments[-1] in field_state(result)["_binding_dict"].values()
    assert fragments[-1].fragment_id is first_id


# --- project_attested: the emitted ids -----------------------------------------------------


def _attestations(placement: Any, bindings: Any) -> dict[Any, Any]:
    return {(b.placement_id, b.participant_id): _attest(placement, b) for b in bindings}


def _shared_ids(bindings: Any, count: int) -> tuple[Any, ...]:
    """The bindings with the first ``count`` runtime fragment ids of the second binding equal
    (equal copies) to the first binding's: each binding alone stays valid."""
    first, second = bindings[0], bindings[1]
    fragments = list(second.fragments)
    for k in range(min(count, len(fragments), len(first.fragments))):
        fragments[k] = dataclasses.replace(fragments[k], fragment_id="".join(list(first.fragments[k].fragment_id)))
    return (first, dataclasses.replace(second, fragments=tuple(fragments))) + tuple(bindings[2:])


def _selections(bindings: Any, data: st.DataObject) -> Iterator[Any]:
    ids = sorted({f.fragment_id for b in bindings for f in b.fragments})
    yield None
    yield frozenset(ids)
    yield frozenset(ids) | {"not-a-runtime-fragment"}
    yield frozenset(ids[1:])
    yield frozenset(data.draw(st.lists(st.sampled_from(ids), unique=True)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 8), st.data())
def test_ids_shared_across_parts_decide_as_the_python_loop(count: int, data: st.DataObject) -> None:
    bindings = _shared_ids(build_runtime_bindings(PLACEMENT), count)
    kept = list(bindings)
    for selected in _selections(bindings, data):
        expected = python_loop(PLACEMENT, kept, _attestations(PLACEMENT, bindings), selected)
        direct = project(PLACEMENT, kept, _attestations(PLACEMENT, bindings), selected)
        if direct is not None:
            assert isinstance(expected, tuple) and direct == expected
        assert with_c(PLACEMENT, kept, _attestations(PLACEMENT, bindings), selected) == expected
        if selected is not None and len(selected) == len({f.fragment_id for b in bindings for f in b.fragments}):
            if "not-a-runtime-fragment" not in selected:
                assert direct is not None  # every id emitted (shared ones once): decided in C


@pytest.mark.parametrize("extra", ["zz-not-selected", "shared"])
def test_a_forged_cached_executor_decides_as_the_python_loop(extra: str) -> None:
    """Cached rows are read back (no per-id evidence check): an executor whose fragment_ids were
    edited to hold one more id (one not selected, or one of another executor's) must decline."""
    bindings = build_runtime_bindings(PLACEMENT)
    kept = list(bindings)
    attestations = _attestations(PLACEMENT, bindings)
    ids = frozenset(f.fragment_id for b in bindings for f in b.fragments)
    assert project(PLACEMENT, kept, attestations, None) is not None  # rows cached
    attestation = attestations[(bindings[0].placement_id, bindings[0].participant_id)]
    part = PLACEMENT._part_index()[bindings[0].participant_id]
    executor = _attestation_values(attestation)[id(part)][0][2]
    added = extra if extra != "shared" else bindings[1].fragments[0].fragment_id
    object.__setattr__(executor, "fragment_ids", executor.fragment_ids + (added,))
    for selected in (ids, ids | {"zz-not-selected"}):
        expected = python_loop(PLACEMENT, kept, attestations, selected)
        direct = project(PLACEMENT, kept, attestations, selected)
        if direct is not None:
            assert isinstance(expected, tuple) and direct == expected
        assert with_c(PLACEMENT, kept, attestations, selected) == expected

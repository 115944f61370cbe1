"""binder.c ``bound_fragments_ordered`` (issue 5, memory locality of binding step 7).

The kernel returns, per attested part, exactly the rows ``bound_fragments`` returns for that
part (same values, same objects, same order), or None ("not decided here": binding then runs
the per-part path). Only the allocation order of the bound fragments differs: first use along
the operations, then part order, so the passes that follow ``op.target`` / ``op.source`` read
them in memory order. The tests compare the rows and whole bound plans (every container and its
order) with the per-part path, observe the allocation order through the collector's youngest
generation, and drive the argument checks and fallbacks with hostile values."""

from __future__ import annotations

import copy
import dataclasses
import gc
import sys
from typing import Any, Optional

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_executor import HostMemory, host_bindings, tp_placement
from spec_helpers import field_state, forged_instance, store_state

from mooncake.reshard import _native
from mooncake.reshard.weight import RuntimeBindingFragment, StoredWeightManifest, WeightRuntimeBindingManifest
from mooncake.reshard.weight._planner import binding as planner_binding
from mooncake.reshard.weight._planner.attestation import RuntimeBindingAttestation
from mooncake.reshard.weight._planner.bound_validation import _attestation_values
from mooncake.reshard.weight._planner.fragments import BoundWeightFragment
from mooncake.reshard.weight.planner import (
    TransferRegion,
    bind_logical_transfer_plan,
    plan_placement_transfer,
    plan_stored_transfer_to_target_placement,
)
from mooncake.reshard.weight.serde import weight_placement_from_json

from known_answers import case_names, load_case

CASES = case_names()


def _ordered(parts: Any, attestations: Any, operations: Any, which: Any = 0) -> Any:
    return _native.bound_fragments_ordered(
        BoundWeightFragment, RuntimeBindingAttestation, TransferRegion, parts, attestations, operations, which
    )


def _per_part(part_fragments: Any, attestation: Any) -> Any:
    return _native.bound_fragments(BoundWeightFragment, RuntimeBindingAttestation, part_fragments, attestation)


class World:
    """A source and a target placement, their bindings and the logical plan between them."""

    def __init__(self, source: Any, target: Any) -> None:
        self.source = source
        self.target = target
        self.logical = plan_placement_transfer(source, target)
        memory = HostMemory()
        self.source_bindings = host_bindings(source, memory, prefix="src")
        self.target_bindings = host_bindings(target, memory, prefix="dst")

    def side(self, which: int) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        """(part fragments, fresh attestations) of every binding of one side."""
        placement, bindings = (self.target, self.target_bindings) if which == 0 else (self.source, self.source_bindings)
        index = placement._part_index()
        parts = tuple(index[binding.participant_id].fragments for binding in bindings)
        attestations = tuple(
            RuntimeBindingAttestation._from_validated(placement, dataclasses.replace(binding)) for binding in bindings
        )
        return parts, attestations


def _world() -> World:
    return World(
        tp_placement(2, prefix="s", dp=2, shape=(6, 5), tensors=("a", "b")),
        tp_placement(3, prefix="t", shape=(6, 5), dim=1, tensors=("a", "b")),
    )


def _assert_rows_equal(got: Any, expected: Any) -> None:
    assert type(got) is tuple and len(got) == len(expected)
    for (fragment_id, bound), (expected_id, reference) in zip(got, expected):
        assert fragment_id is expected_id
        assert type(bound) is BoundWeightFragment
        assert bound == reference
        assert list(field_state(bound)) == list(field_state(reference))
        for name in ("placement", "binding", "instance_id", "runtime_lease_id", "lease_generation", "owner"):
            assert getattr(bound, name) is getattr(reference, name)
        assert bound.attestation is reference.attestation


def _check_equal_to_per_part(parts: Any, attestations: Any, operations: Any, which: int) -> Any:
    result = _ordered(parts, attestations, operations, which)
    assert result is not None and type(result) is tuple and len(result) == len(parts)
    for rows, part_fragments, attestation in zip(result, parts, attestations):
        _assert_rows_equal(rows, _per_part(part_fragments, attestation))
    return result


@pytest.mark.parametrize("which", [0, 1])
def test_rows_equal_bound_fragments_per_part(which: int) -> None:
    world = _world()
    parts, attestations = world.side(which)
    _check_equal_to_per_part(parts, attestations, world.logical.operations, which)
    # Without operations, with operations of the other side, or a list (no hint): same rows.
    _check_equal_to_per_part(parts, attestations, (), which)
    _check_equal_to_per_part(parts, attestations, world.logical.operations, 1 - which)
    _check_equal_to_per_part(parts, attestations, list(world.logical.operations), which)


def _allocated_bound(run: Any) -> tuple[Any, list[Any]]:
    """run()'s result and the bound fragments it allocated, in allocation order (the youngest
    generation lists newly tracked objects in the order they were created)."""
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        result = run()
        created = [obj for obj in gc.get_objects(generation=0) if type(obj) is BoundWeightFragment]
    finally:
        if was_enabled:
            gc.enable()
    return result, created


@pytest.mark.parametrize("which", [0, 1])
def test_allocation_follows_first_use_along_the_operations(which: int) -> None:
    world = _world()
    parts, attestations = world.side(which)
    operations = world.logical.operations
    result, created = _allocated_bound(lambda: _ordered(parts, attestations, operations, which))
    by_placement = {id(bound.placement): bound for rows in result for _, bound in rows}
    expected: list[Any] = []
    for op in operations:
        bound = by_placement.get(id(getattr(op, "target" if which == 0 else "source")))
        if bound is not None and all(bound is not seen for seen in expected):
            expected.append(bound)
    used = len(expected)
    assert used > 0
    for rows in result:
        for _, bound in rows:
            if all(bound is not seen for seen in expected):
                expected.append(bound)
    assert len(created) == len(expected) == sum(len(rows) for rows in result)
    assert all(a is b for a, b in zip(created, expected))
    # The per-part kernel allocates in part order: a different order here (the plan's operations
    # visit the parts interleaved), which is the point of the kernel.
    _, per_part = _allocated_bound(lambda: [_per_part(p, a) for p, a in zip(parts, attestations)])
    part_order = [bound.placement for rows in result for _, bound in rows]
    assert [bound.placement for bound in per_part] == part_order
    assert [bound.placement for bound in created] != part_order  # this layout interleaves the parts


def test_operations_that_give_no_hint_are_skipped() -> None:
    world = _world()
    parts, attestations = world.side(0)
    ops = world.logical.operations
    first = ops[0]
    foreign = forged_instance(TransferRegion, dict(field_state(first)))
    object.__setattr__(foreign, "target", dataclasses.replace(first.target))  # equal, not the object
    fieldless = object.__new__(TransferRegion)
    odd: list[Any] = [None, 3, "x", object(), first.target, fieldless, foreign, type(first), first]
    result, created = _allocated_bound(lambda: _check_equal_to_per_part(parts, attestations, tuple(odd), 0))
    # Only the last item (a real operation) names a fragment: its bound fragment comes first.
    assert created[0].placement is first.target
    assert sum(len(rows) for rows in result) == len(created)


def test_hostile_arguments() -> None:
    world = _world()
    parts, attestations = world.side(0)
    ops = world.logical.operations
    for which in (True, 0.0, "0", None, 1 << 80):
        with pytest.raises(TypeError if not isinstance(which, int) or isinstance(which, bool) else ValueError):
            _ordered(parts, attestations, ops, which)
    for which in (2, -1, 1 << 63, -(1 << 70)):
        with pytest.raises(ValueError):
            _ordered(parts, attestations, ops, which)
    with pytest.raises(TypeError):
        _native.bound_fragments_ordered(BoundWeightFragment, RuntimeBindingAttestation, TransferRegion, parts)
    with pytest.raises(TypeError):
        _native.bound_fragments_ordered(None, RuntimeBindingAttestation, TransferRegion, parts, attestations, ops, 0)
    with pytest.raises(TypeError):
        _native.bound_fragments_ordered(BoundWeightFragment, RuntimeBindingAttestation, int, parts, attestations, ops, 0)
    # Not decided here: containers of other types or lengths, parts off the trusted path.
    assert _ordered(list(parts), attestations, ops) is None
    assert _ordered(parts, list(attestations), ops) is None
    assert _ordered(parts, attestations[:-1], ops) is None
    assert _ordered(parts[:1] + (list(parts[1]),) + parts[2:], attestations, ops) is None
    assert _ordered(parts, (object(),) + attestations[1:], ops) is None
    copied = tuple(dataclasses.replace(fragment) for fragment in parts[0])
    assert _ordered((copied,) + parts[1:], attestations, ops) is None
    _, fresh = world.side(0)
    forged = fresh[0]
    object.__setattr__(forged, "_binding_dict", {})
    assert _ordered(parts, (forged,) + fresh[1:], ops) is None
    _, fresh = world.side(0)
    object.__setattr__(fresh[1], "_placement_dict", dict(fresh[1]._placement_dict).items())
    assert _ordered(parts, fresh, ops) is None
    _, fresh = world.side(0)
    object.__delattr__(fresh[0], "evidence")
    assert _ordered(parts, fresh, ops) is None
    nameless = object.__new__(type(parts[0][0]))
    store_state(nameless, field_state(parts[0][0]))
    object.__setattr__(nameless, "placement_fragment_id", 7)
    _, fresh = world.side(0)
    assert _ordered(((nameless,) + parts[0][1:],) + parts[1:], fresh, ops) is None
    assert _ordered((), (), ops) == ()
    assert _ordered(((),), (attestations[0],), ops) == ((),)


def test_the_same_part_twice_gives_its_rows_twice() -> None:
    world = _world()
    parts, attestations = world.side(0)
    result = _check_equal_to_per_part(parts[:1] * 2, attestations[:1] * 2, world.logical.operations, 0)
    assert all(a[1] is not b[1] and a[1] == b[1] for a, b in zip(result[0], result[1]))


def test_no_reference_leaks() -> None:
    world = _world()
    parts, attestations = world.side(0)
    ops = world.logical.operations
    watched = [parts, attestations, ops, *parts[0], *attestations, attestations[0]._binding_dict]
    watched += list(attestations[0]._binding_dict.values())

    def run() -> None:
        for _ in range(3):
            _ordered(parts, attestations, ops)
            _ordered(parts, attestations[:-1], ops)
            _, fresh = world.side(0)
            object.__setattr__(fresh[-1], "_binding_dict", {})
            _ordered(parts, fresh, ops)

    run()
    gc.collect()
    before = [sys.getrefcount(item) for item in watched]
    run()
    gc.collect()
    assert [sys.getrefcount(item) for item in watched] == before


# ---------------------------------------------------------------------------------------
# Whole binds: equal to the per-part path, every container in the same order


def _structure(plan: Any) -> Any:
    """Everything order-sensitive of a bound plan, with the identities of the inputs it holds."""

    def fragment(value: Any) -> Any:
        if type(value) is not BoundWeightFragment:
            return ("stored", value)
        return (
            id(value.placement),
            id(value.binding),
            value.instance_id,
            value.runtime_lease_id,
            value.lease_generation,
            value.owner,
            id(value.attestation.evidence.fragments),
        )

    operations = [(op.tensor_id, fragment(op.source), fragment(op.target)) for op in plan.operations]
    executors = [
        (
            executor.participant_id,
            executor.worker_id,
            executor.fragment_ids,
            tuple((snapshot.placement_fragment_id, snapshot.fragment_id) for snapshot in executor.fragment_snapshots),
        )
        for executor in plan.source_executors + plan.target_executors
    ]
    return operations, executors


def _bind_both_ways(logical: Any, target_bindings: Any, **kwargs: Any) -> tuple[Any, Any]:
    calls: list[Any] = []
    real = _native.bound_fragments_ordered

    def spy(*args: Any) -> Any:
        result = real(*args)
        calls.append(result)
        return result

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_native, "bound_fragments_ordered", spy)
        patch.setattr(planner_binding, "_ORDERED_MIN_OPERATIONS", 0)
        ordered = bind_logical_transfer_plan(logical, target_bindings, **kwargs)
    assert calls and all(result is not None for result in calls)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(planner_binding, "_ordered_bound_map", lambda *args: None)
        per_part = bind_logical_transfer_plan(logical, target_bindings, **kwargs)
    assert ordered == per_part
    assert _structure(ordered) == _structure(per_part)
    return ordered, per_part


def _binding_from_json(raw: dict[str, Any]) -> WeightRuntimeBindingManifest:
    fields = dict(raw)
    fields["fragments"] = tuple(
        RuntimeBindingFragment(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in item.items()})
        for item in raw["fragments"]
    )
    return WeightRuntimeBindingManifest(**fields)


@pytest.mark.parametrize("name", CASES)
def test_known_answer_binds_equal_the_per_part_path(name: str) -> None:
    inputs = copy.deepcopy(load_case(name)["inputs"])
    target = weight_placement_from_json(inputs["target_placement_json"])
    target_bindings = tuple(_binding_from_json(raw) for raw in inputs["target_bindings"])
    if "stored_manifest_json" in inputs:
        manifest = StoredWeightManifest.from_json(inputs["stored_manifest_json"])
        logical = plan_stored_transfer_to_target_placement(manifest, target)
        _bind_both_ways(logical, target_bindings, source_manifest=manifest)
    else:
        source = weight_placement_from_json(inputs["source_placement_json"])
        logical = plan_placement_transfer(source, target)
        source_bindings = tuple(_binding_from_json(raw) for raw in inputs["source_bindings"])
        _bind_both_ways(logical, target_bindings, source_bindings=source_bindings)


@st.composite
def worlds(draw: Any) -> World:
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 6)) for _ in range(ndim))
    itemsize = draw(st.sampled_from([1, 2, 4, 8]))
    tensors = draw(st.sampled_from([("w",), ("a", "b"), ("a", "b", "c")]))

    def side(prefix: str) -> Any:
        dim = draw(st.integers(0, ndim - 1))
        tp = draw(st.integers(1, max(1, min(4, shape[dim]))))
        dp = draw(st.integers(1, 2))
        return tp_placement(tp, prefix=prefix, shape=shape, dim=dim, dp=dp, tensors=tensors, itemsize=itemsize)

    return World(side("s"), side("t"))


@settings(deadline=None, max_examples=40)
@given(worlds())
def test_random_layout_binds_equal_the_per_part_path(world: World) -> None:
    ordered, _ = _bind_both_ways(world.logical, world.target_bindings, source_bindings=world.source_bindings)
    for which in (0, 1):
        parts, attestations = world.side(which)
        _check_equal_to_per_part(parts, attestations, world.logical.operations, which)
    # The rows are cached on the plan's attestations exactly as the per-part path caches them.
    for executor in ordered.target_executors:
        part = world.target._part_index()[executor.participant_id]
        rows: Optional[Any] = _attestation_values(executor.attestation).get(~id(part))
        if rows is not None:
            assert [fragment_id for fragment_id, _ in rows] == [f.placement_fragment_id for f in part.fragments]


def test_small_plans_take_the_per_part_path() -> None:
    world = _world()
    assert len(world.logical.operations) < planner_binding._ORDERED_MIN_OPERATIONS
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_native, "bound_fragments_ordered", lambda *args: pytest.fail("called"))
        bind_logical_transfer_plan(world.logical, world.target_bindings, source_bindings=world.source_bindings)


def test_duplicate_part_raises_the_per_part_message() -> None:
    world = _world()
    placement, bindings = world.target, world.target_bindings
    kept = [bindings[0], bindings[0]]

    def outcome(patched: bool) -> str:
        attestation = RuntimeBindingAttestation._from_validated(placement, dataclasses.replace(bindings[0]))
        attestations = {(placement.placement_id, bindings[0].participant_id): attestation}
        with pytest.MonkeyPatch.context() as patch:
            if patched:
                patch.setattr(planner_binding, "_ordered_bound_map", lambda *args: None)
            with pytest.raises(ValueError) as raised:
                planner_binding._bound_fragments("target", placement, kept, attestations, world.logical.operations)
        return str(raised.value)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(planner_binding, "_ORDERED_MIN_OPERATIONS", 0)
        message = outcome(False)
    assert message.startswith("duplicate bound target placement fragment: ")
    assert message == outcome(True)

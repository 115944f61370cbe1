"""binder.c ``bind_regions_ordered``: binding steps 7 and 8 in one C call (session 27).

The call must return exactly what ``bind_regions`` returns on the two maps
``bound_fragments_ordered(..., as_map=True)`` builds (targets, then sources), with the bound
fragments allocated in the same order, or None where any of those three calls would not decide
(or the map would raise its duplicate error): binding then runs the three calls, which decide and
raise as before. No fact crosses Python code: each operation's bound fragments are found by the
operation walks and read by position within the one call. The tests compare the two forms on
random worlds (hypothesis), whole binds with the fused path forced on and off (plans and first
error messages), the allocation order, and hostile inputs (duplicate ids, copies, foreign
operations, inexact containers and classes) against the three calls' outcome."""

from __future__ import annotations

import dataclasses
import gc
from typing import Any, Optional

import pytest
from hypothesis import given, settings

from mooncake.reshard import _native
from mooncake.reshard.weight import PlacementFragment, RuntimeBindingFragment
from mooncake.reshard.weight._planner import binding as planner_binding
from mooncake.reshard.weight._planner.attestation import RuntimeBindingAttestation
from mooncake.reshard.weight._planner.fragments import BoundWeightFragment
from mooncake.reshard.weight.planner import TransferRegion, bind_logical_transfer_plan
from mooncake.reshard.weight.storage_manifest import StoredFragmentSnapshot

from test_native_binder_ordered import World, _allocated_bound, _structure, _world, worlds

_BOUND_FIELDS = ("placement", "binding", "instance_id", "runtime_lease_id", "lease_generation", "owner", "attestation")


def _three_calls(ops: Any, target: Any, source: Any, budget: Any = 1 << 40, prove: bool = True) -> Any:
    """The old steps 7 and 8: the two maps, then bind_regions (an exception: its (type, message))."""
    try:
        maps = []
        for which, (parts, attestations) in ((0, target), (1, source)):
            made = _native.bound_fragments_ordered(
                BoundWeightFragment, RuntimeBindingAttestation, TransferRegion, parts, attestations, ops, which, True
            )
            if made is None:
                return None
            maps.append(made)
        return _native.bind_regions(
            TransferRegion, PlacementFragment, StoredFragmentSnapshot, ops, maps[0], maps[1],
            BoundWeightFragment, RuntimeBindingFragment, budget, True, prove,
        )
    except ValueError as exc:
        return (ValueError, str(exc))


def _fused(ops: Any, target: Any, source: Any, budget: Any = 1 << 40, prove: bool = True) -> Any:
    return _native.bind_regions_ordered(
        TransferRegion, PlacementFragment, StoredFragmentSnapshot, ops, target[0], target[1], source[0], source[1],
        RuntimeBindingAttestation, BoundWeightFragment, RuntimeBindingFragment, budget, True, prove,
    )


def _bound_key(value: Any) -> Any:
    if type(value) is not BoundWeightFragment:
        return ("other", id(value))
    return tuple(id(getattr(value, name)) for name in _BOUND_FIELDS)


def _carried_key(carried: Any) -> Any:
    if carried is None:
        return None
    regions, fragments, *rest = carried
    return (
        len(regions),
        [_bound_key(fragment) for fragment in fragments],
        [bytes(item) if type(item) is bytes else item for item in rest[:-1]],
        None if rest[-1] is None else [id(value) for value in rest[-1]],
    )


def _result_key(result: Any) -> Any:
    """Everything a bind_regions result holds, with the identities of the inputs it holds."""
    if result is None or type(result) is tuple and len(result) == 2 and result[0] is ValueError:
        return result
    regions, selections, physical, carried = result
    rows = []
    for region in regions:
        assert type(region) is TransferRegion
        rows.append(
            tuple(
                _bound_key(getattr(region, name)) if name in ("source", "target") else id(getattr(region, name))
                for name in (
                    "tensor_id", "source", "target", "overlap_offset", "overlap_shape", "source_base_offset",
                    "target_base_offset", "inner_bytes", "outer_loop_counts", "source_strides", "target_strides",
                )
            )
        )
    return rows, selections, physical, _carried_key(carried)


def _targets_complete(ops: Any, target: Any) -> bool:
    """The oracle of the fused call's complete target selection: the operations name (by
    identity) every fragment of the target parts, and each target attestation's evidence lists as
    many fragments as its part (in a tuple)."""
    parts, attestations = target
    named = {id(op.target) for op in ops if type(op) is TransferRegion}
    return all(id(fragment) in named for fragments in parts for fragment in fragments) and all(
        type(attestation.evidence.fragments) is tuple and len(attestation.evidence.fragments) == len(fragments)
        for fragments, attestation in zip(parts, attestations)
    )


def _evidence_ids(target: Any) -> frozenset[str]:
    return frozenset(fragment.fragment_id for attestation in target[1] for fragment in attestation.evidence.fragments)


def _assert_same(ops: Any, target: Any, source: Any, **kwargs: Any) -> Any:
    """The fused call returns what the three calls return, except that a complete target selection
    (exactly when _targets_complete holds) is None, the three calls' frozenset being then the ids
    of every target evidence fragment."""
    old = _three_calls(ops, target, source, **kwargs)
    new = _fused(ops, target, source, **kwargs)
    if old is None or type(old) is tuple and old[0] is ValueError:
        assert new is None  # (binding then runs the three calls: None, or their error)
    else:
        assert new is not None
        new_key, old_key = _result_key(new), _result_key(old)
        if old_key[1] is not None:
            assert new_key[1] is not None and new_key[1][0] == old_key[1][0]
            if new_key[1][1] is None:
                assert _targets_complete(ops, target)
                assert old_key[1][1] == _evidence_ids(target)
                new_key = (new_key[0], old_key[1], *new_key[2:])
            else:
                assert not _targets_complete(ops, target)
        assert new_key == old_key
        assert new[0] == old[0]
    return new


@pytest.mark.parametrize("prove", [False, True])
@pytest.mark.parametrize("budget", [1 << 40, None, 0])
def test_equals_the_three_calls(prove: bool, budget: Any) -> None:
    world = _world()
    new = _assert_same(world.logical.operations, world.side(0), world.side(1), budget=budget, prove=prove)
    assert new is not None


@settings(deadline=None, max_examples=40)
@given(worlds())
def test_random_worlds_equal_the_three_calls(world: World) -> None:
    ops = world.logical.operations
    target, source = world.side(0), world.side(1)
    assert _assert_same(ops, target, source) is not None
    # Reversed operations (sources and targets met in another order), no operation, a list.
    _assert_same(ops[::-1], target, source)
    _assert_same((), target, source)
    assert _fused(list(ops), target, source) is None


def _bind_outcome(world: World, fused: bool, **kwargs: Any) -> Any:
    calls: list[Any] = []
    real = _native.bind_regions_ordered

    def spy(*args: Any) -> Any:
        result = real(*args)
        calls.append(result is not None)
        return result

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(planner_binding, "_ORDERED_MIN_OPERATIONS", 0)
        patch.setattr(planner_binding, "_FUSED_MIN_OPERATIONS", 0 if fused else 1 << 60)
        patch.setattr(_native, "bind_regions_ordered", spy)
        try:
            plan = bind_logical_transfer_plan(
                world.logical, world.target_bindings, source_bindings=world.source_bindings, **kwargs
            )
        except Exception as exc:
            return calls, (type(exc), str(exc))
    return calls, plan


@settings(deadline=None, max_examples=30)
@given(worlds())
def test_random_binds_equal_with_the_fused_path(world: World) -> None:
    calls, fused = _bind_outcome(world, True)
    assert calls == [True]
    none, plain = _bind_outcome(world, False)
    assert none == []
    assert fused == plain
    assert _structure(fused) == _structure(plain)


def test_small_plans_keep_the_three_calls() -> None:
    world = _world()
    assert len(world.logical.operations) < planner_binding._FUSED_MIN_OPERATIONS
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(planner_binding, "_ORDERED_MIN_OPERATIONS", 0)
        patch.setattr(_native, "bind_regions_ordered", lambda *args: pytest.fail("called"))
        bind_logical_transfer_plan(world.logical, world.target_bindings, source_bindings=world.source_bindings)


def test_allocation_order_is_the_three_calls_order() -> None:
    """The bound fragments the operations use are allocated in the same order (targets in first
    use order, then sources); the fragments no operation names (the map's others) are not made."""
    world = _world()
    ops = world.logical.operations
    target, source = world.side(0), world.side(1)
    old, old_created = _allocated_bound(lambda: _three_calls(ops, target, source))
    new, new_created = _allocated_bound(lambda: _fused(ops, target, source))
    assert old is not None and new is not None
    used = {id(op.target) for op in old[0]} | {id(op.source) for op in old[0]}
    old_order = [_bound_key(bound)[:2] for bound in old_created if id(bound) in used]
    new_order = [_bound_key(bound)[:2] for bound in new_created]
    assert new_order and new_order == old_order
    assert len({id(op.target) for op in new[0]} | {id(op.source) for op in new[0]}) == len(used)
    # (the old calls also made the fragments no operation names)
    assert len(old_created) >= len(new_created)


# ---------------------------------------------------------------------------------------
# Hostile inputs: decided as the three calls decide (None where they do not decide or raise)


def _with_part(side: Any, k: int, fragments: Any) -> Any:
    parts, attestations = side
    return parts[:k] + (fragments,) + parts[k + 1 :], attestations


@pytest.mark.parametrize("which", [0, 1])
def test_duplicate_ids_decline(which: int) -> None:
    world = _world()
    ops = world.logical.operations
    sides = [world.side(0), world.side(1)]
    parts, attestations = sides[which]
    # The same part twice: every id twice (the map raises its duplicate error).
    sides[which] = (parts + parts[:1], attestations + attestations[:1])
    old = _three_calls(ops, *sides)
    assert type(old) is tuple and old[0] is ValueError and old[1].startswith("duplicate bound ")
    assert _fused(ops, *sides) is None


@pytest.mark.parametrize("which", [0, 1])
def test_equal_copies_in_the_operations_decline(which: int) -> None:
    """An operation whose field is an equal copy of a part's fragment (found by the maps' id
    lookup, not by the walks): the fused call declines and the three calls decide."""
    world = _world()
    ops = list(world.logical.operations)
    name = "target" if which == 0 else "source"
    for at in (0, len(ops) // 2, len(ops) - 1):
        changed = list(ops)
        copy = dataclasses.replace(getattr(changed[at], name))
        changed[at] = dataclasses.replace(changed[at], **{name: copy})
        old = _three_calls(tuple(changed), world.side(0), world.side(1))
        assert old is not None  # the maps find the copy's id
        assert _fused(tuple(changed), world.side(0), world.side(1)) is None


def test_foreign_operations_and_containers_decline() -> None:
    world = _world()
    ops = world.logical.operations
    target, source = world.side(0), world.side(1)
    for bad_ops in (ops[:1] + (None,) + ops[1:], ops + (ops[0].target,)):
        assert _three_calls(bad_ops, target, source) is None
        assert _fused(bad_ops, target, source) is None
    parts, attestations = target
    for bad in ((list(parts), attestations), (parts, list(attestations)), (parts[:-1], attestations),
                (parts[:1] + (list(parts[1]),) + parts[2:], attestations),
                (parts, attestations[:1] + (object(),) + attestations[2:])):
        assert _three_calls(ops, bad, source) is None
        assert _fused(ops, bad, source) is None
        assert _fused(ops, target, bad) is None
    # a part fragment the attestation does not hold
    forged = _with_part(target, 0, (dataclasses.replace(parts[0][0]),) + parts[0][1:])
    assert _three_calls(ops, forged, source) is None
    assert _fused(ops, forged, source) is None


def test_stored_sources_and_missing_sources() -> None:
    """No source parts: operations with placement sources decline (the empty map finds none)."""
    world = _world()
    ops = world.logical.operations
    assert _three_calls(ops, world.side(0), ((), ())) is None
    assert _fused(ops, world.side(0), ((), ())) is None


def test_argument_checks() -> None:
    world = _world()
    ops = world.logical.operations
    target, source = world.side(0), world.side(1)
    with pytest.raises(TypeError):
        _native.bind_regions_ordered(TransferRegion)
    with pytest.raises(TypeError):
        _native.bind_regions_ordered(
            TransferRegion, PlacementFragment, StoredFragmentSnapshot, ops, *target, *source,
            RuntimeBindingAttestation, BoundWeightFragment, RuntimeBindingFragment, 1, 1, True,
        )
    with pytest.raises(TypeError):
        _native.bind_regions_ordered(
            TransferRegion, PlacementFragment, StoredFragmentSnapshot, ops, *target, *source,
            RuntimeBindingAttestation, 3, RuntimeBindingFragment, 1, True, True,
        )


def test_no_reference_leaks() -> None:
    import sys

    world = _world()
    ops = world.logical.operations
    target, source = world.side(0), world.side(1)
    probes = [ops[0].target, ops[0].source, target[1][0], source[1][0]]
    for _ in range(3):
        _fused(ops, target, source)
    gc.collect()
    before = [sys.getrefcount(p) for p in probes]
    for _ in range(10):
        result: Optional[Any] = _fused(ops, target, source)
        del result
        _fused(ops, (target[0] + target[0][:1], target[1] + target[1][:1]), source)  # declines
    gc.collect()
    assert [sys.getrefcount(p) for p in probes] == before


def test_collector_state_equals_the_three_calls() -> None:
    """From MR_GC_BULK_MIN (1024) operations the bound fragments are offered to the collector
    check as they are made (bind_regions offers them as it meets them): every region and bound
    fragment ends tracked or untracked exactly as with the three calls."""
    from memory_executor import tp_placement

    world = World(
        tp_placement(36, prefix="s", shape=(144, 144), dim=0), tp_placement(36, prefix="t", shape=(144, 144), dim=1)
    )
    ops = world.logical.operations
    assert len(ops) >= 1024
    target, source = world.side(0), world.side(1)
    old = _three_calls(ops, target, source)
    new = _assert_same(ops, target, source)

    def states(result: Any) -> list[tuple[bool, bool, bool]]:
        return [(gc.is_tracked(op), gc.is_tracked(op.source), gc.is_tracked(op.target)) for op in result[0]]

    assert states(new) == states(old)
    assert not any(any(state) for state in states(new))  # (this world's are all inert)
    # An attestation whose closure holds a bound fragment (rows cached on it, as the per-part path
    # caches them): its bound fragments stay tracked, as with the three calls.
    from mooncake.reshard.weight._planner.bound_validation import _attestation_values

    parts, attestations = target
    _attestation_values(attestations[0])["rows"] = (("id", old[0][0].target),)
    old = _three_calls(ops, target, source)
    new = _assert_same(ops, target, source)
    assert states(new) == states(old)
    assert any(state[2] for state in states(new)) and not all(state[2] for state in states(new))

"""binder.c ``bound_fragments_ordered(..., as_map=True)`` (issue 5, binding step 7).

With ``as_map`` the kernel returns, instead of the rows, the dict ``_planner/binding.py``
``_bound_fragments`` built from them in Python: ``{placement_fragment_id: bound}`` with the keys
inserted in part order then row order, the same bound fragments allocated in the same order, and
the first id met twice raising that loop's ``ValueError``. The tests compare the map with the
rows of the same call turned into a dict by that loop (the oracle), the allocation order with
the rows mode, drive duplicates, fallbacks and hostile ``as_map`` values, and check references."""

from __future__ import annotations

import dataclasses
import gc
import sys
from typing import Any

import pytest
from hypothesis import given, settings

from spec_helpers import field_state

from mooncake.reshard import _native
from mooncake.reshard.weight._planner import binding as planner_binding
from mooncake.reshard.weight._planner.attestation import RuntimeBindingAttestation
from mooncake.reshard.weight._planner.fragments import BoundWeightFragment
from mooncake.reshard.weight.planner import TransferRegion

from test_native_binder_ordered import World, _allocated_bound, _world, worlds

_FIELDS = ("placement", "binding", "instance_id", "runtime_lease_id", "lease_generation", "owner", "attestation")


def _call(parts: Any, attestations: Any, operations: Any, which: Any, *rest: Any) -> Any:
    return _native.bound_fragments_ordered(
        BoundWeightFragment, RuntimeBindingAttestation, TransferRegion, parts, attestations, operations, which, *rest
    )


def _oracle(rows_per_part: Any, label: str) -> dict[str, Any]:
    """The loop _bound_fragments ran over the rows before the map was built in C."""
    bound: dict[str, Any] = {}
    for rows in rows_per_part:
        for fragment_id, fragment in rows:
            if fragment_id in bound:
                raise ValueError(f"duplicate bound {label} placement fragment: {fragment_id}")
            bound[fragment_id] = fragment
    return bound


def _assert_map_equals(got: Any, expected: dict[str, Any]) -> None:
    assert type(got) is dict
    assert list(got) == list(expected)
    for (key, bound), (expected_key, reference) in zip(got.items(), expected.items()):
        assert key is expected_key
        assert type(bound) is BoundWeightFragment and bound == reference
        assert list(field_state(bound)) == list(field_state(reference))
        for name in _FIELDS:
            assert getattr(bound, name) is getattr(reference, name)


def _check(parts: Any, attestations: Any, operations: Any, which: int) -> dict[str, Any]:
    rows = _call(parts, attestations, operations, which)
    got = _call(parts, attestations, operations, which, True)
    _assert_map_equals(got, _oracle(rows, "target" if which == 0 else "source"))
    # as_map False is the rows mode.
    again = _call(parts, attestations, operations, which, False)
    assert [[(key, bound.placement) for key, bound in part] for part in again] == [
        [(key, bound.placement) for key, bound in part] for part in rows
    ]
    return got


@pytest.mark.parametrize("which", [0, 1])
def test_map_equals_the_loop_over_the_rows(which: int) -> None:
    world = _world()
    parts, attestations = world.side(which)
    operations = world.logical.operations
    for ops in (operations, (), list(operations), world.logical.operations[::-1]):
        _check(parts, attestations, ops, which)
    _check(parts, attestations, operations, 1 - which)


@settings(deadline=None, max_examples=30)
@given(worlds())
def test_random_layouts_map_equals_the_loop(world: World) -> None:
    for which in (0, 1):
        parts, attestations = world.side(which)
        _check(parts, attestations, world.logical.operations, which)


@pytest.mark.parametrize("which", [0, 1])
def test_allocation_order_is_the_rows_mode_order(which: int) -> None:
    world = _world()
    parts, attestations = world.side(which)
    operations = world.logical.operations
    rows, created_rows = _allocated_bound(lambda: _call(parts, attestations, operations, which))
    mapped, created_map = _allocated_bound(lambda: _call(parts, attestations, operations, which, True))
    assert len(created_map) == len(mapped) == len(created_rows)
    assert [bound.placement for bound in created_map] == [bound.placement for bound in created_rows]
    assert {id(bound) for bound in created_map} == {id(bound) for bound in mapped.values()}
    # The map holds each allocated fragment once (released with it: nothing else keeps them).
    held = [sys.getrefcount(bound) for bound in created_map]
    del mapped
    assert [sys.getrefcount(bound) for bound in created_map] == [count - 1 for count in held]
    assert len(set(held)) == 1
    del rows


@pytest.mark.parametrize("which", [0, 1])
def test_duplicate_ids_raise_the_loops_error(which: int) -> None:
    world = _world()
    parts, attestations = world.side(which)
    label = "target" if which == 0 else "source"
    layouts = [
        (parts[:1] * 2, attestations[:1] * 2),
        (parts + parts[1:2], attestations + attestations[1:2]),
        (parts[-1:] + parts, attestations[-1:] + attestations),
    ]
    for dup_parts, dup_attestations in layouts:
        rows = _call(dup_parts, dup_attestations, world.logical.operations, which)
        with pytest.raises(ValueError) as expected:
            _oracle(rows, label)
        with pytest.raises(ValueError) as raised:
            _call(dup_parts, dup_attestations, world.logical.operations, which, True)
        assert str(raised.value) == str(expected.value)
        assert str(raised.value).startswith(f"duplicate bound {label} placement fragment: ")


def test_bound_fragments_takes_the_map_and_equals_the_per_part_path() -> None:
    world = _world()
    for label, placement, bindings in (
        ("target", world.target, world.target_bindings),
        ("source", world.source, world.source_bindings),
    ):

        def attested() -> dict[tuple[str, str], Any]:
            return {
                (placement.placement_id, binding.participant_id): RuntimeBindingAttestation._from_validated(
                    placement, dataclasses.replace(binding)
                )
                for binding in bindings
            }

        calls: list[Any] = []
        real = _native.bound_fragments_ordered

        def spy(*args: Any) -> Any:
            calls.append(args[7:])
            return real(*args)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(planner_binding, "_ORDERED_MIN_OPERATIONS", 0)
            patch.setattr(_native, "bound_fragments_ordered", spy)
            mapped = planner_binding._bound_fragments(label, placement, bindings, attested(), world.logical.operations)
        assert calls == [(True,)]
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(planner_binding, "_ordered_bound_map", lambda *args: None)
            per_part = planner_binding._bound_fragments(label, placement, bindings, attested(), world.logical.operations)
        assert list(mapped) == list(per_part)
        for key, bound in mapped.items():
            reference = per_part[key]
            assert bound == reference
            for name in _FIELDS[:-1]:
                assert getattr(bound, name) is getattr(reference, name)


def test_hostile_as_map() -> None:
    world = _world()
    parts, attestations = world.side(0)
    ops = world.logical.operations
    for as_map in (1, 0, None, "True", 1 << 80, 1.0, [True]):
        with pytest.raises(TypeError):
            _call(parts, attestations, ops, 0, as_map)
    with pytest.raises(TypeError):
        _call(parts, attestations, ops, 0, True, True)
    for which in (2, -1, 1 << 70):
        with pytest.raises(ValueError):
            _call(parts, attestations, ops, which, True)
    with pytest.raises(TypeError):
        _call(parts, attestations, ops, "0", True)
    # Not decided here: None in map mode too.
    assert _call(list(parts), attestations, ops, 0, True) is None
    assert _call(parts, attestations[:-1], ops, 0, True) is None
    assert _call(parts, (object(),) + attestations[1:], ops, 0, True) is None
    copied = tuple(dataclasses.replace(fragment) for fragment in parts[0])
    assert _call((copied,) + parts[1:], attestations, ops, 0, True) is None
    _, fresh = world.side(0)
    object.__setattr__(fresh[-1], "_binding_dict", {})
    assert _call(parts, fresh, ops, 0, True) is None
    assert _call((), (), ops, 0, True) == {}
    assert _call(((),), (attestations[0],), ops, 0, True) == {}


def test_no_reference_leaks_in_map_mode() -> None:
    world = _world()
    parts, attestations = world.side(0)
    ops = world.logical.operations
    watched = [parts, attestations, ops, *parts[0], *attestations, attestations[0]._binding_dict]
    watched += list(attestations[0]._binding_dict.values())
    watched += [fragment.placement_fragment_id for fragment in parts[0]]

    def run() -> None:
        for _ in range(3):
            _call(parts, attestations, ops, 0, True)
            _call(parts, attestations[:-1], ops, 0, True)
            with pytest.raises(ValueError):
                _call(parts[:1] * 2, attestations[:1] * 2, ops, 0, True)
            _, fresh = world.side(0)
            object.__setattr__(fresh[-1], "_binding_dict", {})
            _call(parts, fresh, ops, 0, True)

    run()
    gc.collect()
    before = [sys.getrefcount(item) for item in watched]
    run()
    gc.collect()
    assert [sys.getrefcount(item) for item in watched] == before

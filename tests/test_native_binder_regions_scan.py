"""``_native.bind_regions`` reads each operation's fields from one scan of its instance dict
(keys matched to the interned field names by identity), a few operations ahead of building its
region, and reads each bound fragment's fields once for step 11's ids, the physical accept path
and the carried proof. Checked against a Python oracle of the six-argument form (the regions
with their field values, by identity, in field order) on plans longer than the look-ahead, with
forged operation dicts (reordered, extra, equal-but-not-interned and non-str keys, missing
fields) at every position, and the fused forms against bound_fragment_ids and the
physical_whole_targets check."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import pytest
from hypothesis import given, settings, strategies as st

from forge_helpers import tp3_bound_plan
from spec_helpers import field_state, forged_instance

from mooncake.reshard import _native
from mooncake.reshard.contracts.fragments import RuntimeBindingFragment
from mooncake.reshard.weight import StoredFragmentSnapshot
from mooncake.reshard.weight._planner import bound_validation
from mooncake.reshard.weight._planner.contracts import TransferRegion
from mooncake.reshard.weight._planner.fragments import BoundWeightFragment
from mooncake.reshard.weight.types import PlacementFragment

CLASSES = (TransferRegion, PlacementFragment, StoredFragmentSnapshot)
FIELDS = tuple(field.name for field in dataclasses.fields(TransferRegion))


LOGICAL, PLAN, _MEMORY = tp3_bound_plan(tuple(f"t{k}" for k in range(12)))
TARGETS = {op.target.placement_fragment_id: op.target for op in PLAN.operations}
SOURCES = {op.source.placement_fragment_id: op.source for op in PLAN.operations}


def _oracle(operations: tuple[Any, ...], targets: dict[str, Any], sources: dict[str, Any]) -> Optional[list[list[tuple[str, Any]]]]:
    """The regions' (name, value) items bind_regions builds, or None where it declines."""
    out = []
    for op in operations:
        if type(op) is not TransferRegion:
            return None
        state = field_state(op)
        if any(type(key) is not str for key in state):
            return None  # a forged non-str key: declined before any lookup
        if any(name not in state for name in FIELDS):
            return None
        values = {name: state[name] for name in FIELDS}
        bound = []
        for name, table in (("source", sources), ("target", targets)):
            fragment = values[name]
            if type(fragment) is PlacementFragment:
                pfid = field_state(fragment).get("placement_fragment_id")
                if type(pfid) is not str or not pfid or pfid not in table:
                    return None
                bound.append(table[pfid])
            elif name == "source" and type(fragment) is StoredFragmentSnapshot:
                bound.append(fragment)
            else:
                return None
        values["source"], values["target"] = bound
        out.append([(name, values[name]) for name in FIELDS])
    return out


def _items(regions: list[Any]) -> list[list[tuple[str, Any]]]:
    assert all(type(region) is TransferRegion for region in regions)
    return [list(field_state(region).items()) for region in regions]


def _same(got: Any, want: Any) -> None:
    if want is None:
        assert got is None
        return
    assert got is not None and len(got) == len(want)
    for items, expected in zip(got, want):
        assert [k for k, _ in items] == [k for k, _ in expected]
        assert all(a is b for (_, a), (_, b) in zip(items, expected))


def _check(operations: tuple[Any, ...]) -> Any:
    want = _oracle(operations, TARGETS, SOURCES)
    plain = _native.bind_regions(*CLASSES, operations, TARGETS, SOURCES)
    _same(None if plain is None else _items(plain), want)
    fused = _native.bind_regions(
        *CLASSES, operations, TARGETS, SOURCES, BoundWeightFragment, RuntimeBindingFragment, 10**9, True, True
    )
    if want is None:
        assert fused is None
        return None
    regions, selections, physical, carried = fused
    _same(_items(regions), want)
    assert selections == _native.bound_fragment_ids(regions, TransferRegion, BoundWeightFragment, StoredFragmentSnapshot)
    if physical is True:
        bound_validation._validate_target_physical_ranges(regions, max_segment_checks=10**9)
    return fused


def _forged(op: Any, state: dict[Any, Any]) -> Any:
    # (a region is stored in its C layout: each item stored with object.__setattr__, in order)
    return forged_instance(TransferRegion, state)


def _reordered(op: Any) -> Any:
    return _forged(op, dict(reversed(list(field_state(op).items()))))


def _extra(op: Any) -> Any:
    return _forged(op, {"zz_extra": 1, **field_state(op), "aa_extra": 2})


def _not_interned(op: Any) -> Any:
    # equal keys that are other str objects than the interned field names
    return _forged(op, {"".join(list(key)): value for key, value in field_state(op).items()})


def _non_str_key(op: Any) -> Any:
    state: dict[Any, Any] = dict(field_state(op))
    state[7] = "seven"
    return _forged(op, state)


def _missing(op: Any) -> Any:
    return _forged(op, {k: v for k, v in field_state(op).items() if k != "inner_bytes"})


def _wrong_target(op: Any) -> Any:
    return _forged(op, {**field_state(op), "target": op.source})


def test_plan_is_longer_than_the_look_ahead() -> None:
    assert len(LOGICAL.operations) > 40


def test_genuine_operations() -> None:
    assert _check(LOGICAL.operations) is not None


@pytest.mark.parametrize("forge", [_extra, _non_str_key])
def test_a_region_cannot_hold_a_key_that_is_not_a_field(forge: Any) -> None:
    # what an instance dict could hold besides the fields has no place in the C layout
    with pytest.raises((AttributeError, TypeError)):
        forge(LOGICAL.operations[0])


@pytest.mark.parametrize("forge", [_reordered, _not_interned])
def test_accepted_forged_dicts_give_the_lookups_values(forge: Any) -> None:
    ops = LOGICAL.operations
    for position in (0, 1, 7, 8, 15, 16, 17, len(ops) // 2, len(ops) - 1):
        changed = ops[:position] + (forge(ops[position]),) + ops[position + 1 :]
        assert _check(changed) is not None
    assert _check(tuple(forge(op) for op in ops)) is not None


@pytest.mark.parametrize("forge", [_missing, _wrong_target])
def test_declined_forged_dicts_at_every_position(forge: Any) -> None:
    ops = LOGICAL.operations
    for position in range(len(ops)):
        changed = ops[:position] + (forge(ops[position]),) + ops[position + 1 :]
        assert _check(changed) is None


def test_other_objects_among_operations_decline() -> None:
    ops = LOGICAL.operations
    for position in (0, 9, 16, 33, len(ops) - 1):
        for bad in (None, 3, "op", field_state(ops[position])):
            assert _native.bind_regions(*CLASSES, ops[:position] + (bad,) + ops[position + 1 :], TARGETS, SOURCES) is None


def test_short_and_empty_plans() -> None:
    for count in (0, 1, 2, 5, 8, 9, 16, 17):
        assert _check(LOGICAL.operations[:count]) is not None


def test_bound_fragment_without_binding_leaves_ids_undecided() -> None:
    targets = dict(TARGETS)
    pfid, bound = next(iter(targets.items()))
    forged = forged_instance(BoundWeightFragment, {k: v for k, v in field_state(bound).items() if k != "binding"})
    targets[pfid] = forged
    fused = _native.bind_regions(
        *CLASSES, LOGICAL.operations, targets, SOURCES, BoundWeightFragment, RuntimeBindingFragment, 10**9, True, True
    )
    assert fused is not None
    regions, selections, physical, carried = fused
    assert selections is None and physical is None and carried is not None and carried[8] is None
    assert selections == _native.bound_fragment_ids(regions, TransferRegion, BoundWeightFragment, StoredFragmentSnapshot)


def test_subclassed_binding_takes_the_attribute_reads() -> None:
    class Binding(RuntimeBindingFragment):
        @property
        def fragment_id(self) -> str:  # type: ignore[override]
            return "from-property"

    targets = dict(TARGETS)
    pfid, bound = next(iter(targets.items()))
    binding = forged_instance(Binding, dict(field_state(bound.binding)))
    forged = forged_instance(BoundWeightFragment, {**field_state(bound), "binding": binding})
    targets[pfid] = forged
    fused = _native.bind_regions(
        *CLASSES, LOGICAL.operations, targets, SOURCES, BoundWeightFragment, RuntimeBindingFragment, 10**9, True, True
    )
    assert fused is not None
    regions, selections, physical, _ = fused
    assert physical is None
    assert selections == _native.bound_fragment_ids(regions, TransferRegion, BoundWeightFragment, StoredFragmentSnapshot)
    assert "from-property" in selections[1]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(min_value=0, max_value=10**6), st.sampled_from([None, _reordered, _not_interned, _missing])),
        max_size=6,
    )
)
def test_random_forgeries_agree_with_the_oracle(changes: list[tuple[int, Any]]) -> None:
    ops = list(LOGICAL.operations)
    for position, forge in changes:
        if forge is not None:
            ops[position % len(ops)] = forge(ops[position % len(ops)])
    _check(tuple(ops))

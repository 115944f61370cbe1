"""``_native.bind_regions`` with its optional seventh argument (the bound fragment class): the
regions are the six-argument call's, and the selections it derives in the same pass are exactly
what ``_native.bound_fragment_ids`` returns for those regions (the binding step 11 selections),
or None where that returns None; binding with and without the fused selections agrees."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from memory_executor import HostMemory, host_bindings
from forge_helpers import tp3_bound_plan
from spec_helpers import field_state, forged_instance

from mooncake.reshard import _native
from mooncake.reshard.weight import StoredFragmentSnapshot
from mooncake.reshard.weight._planner import binding as binding_module
from mooncake.reshard.weight._planner.contracts import TransferRegion
from mooncake.reshard.weight._planner.fragments import BoundWeightFragment
from mooncake.reshard.weight.planner import bind_logical_transfer_plan
from mooncake.reshard.weight.types import PlacementFragment

CLASSES = (TransferRegion, PlacementFragment, StoredFragmentSnapshot)


LOGICAL, PLAN, _MEMORY = tp3_bound_plan(("v", "w"))


def _tables() -> tuple[dict[str, Any], dict[str, Any]]:
    targets = {op.target.placement_fragment_id: op.target for op in PLAN.operations}
    sources = {op.source.placement_fragment_id: op.source for op in PLAN.operations}
    return targets, sources


def _forge(value: Any, **changes: Any) -> Any:
    return forged_instance(type(value), {**field_state(value), **changes})


def _without(value: Any, name: str) -> Any:
    return forged_instance(type(value), {k: v for k, v in field_state(value).items() if k != name})


def _check(operations: Any, targets: Any, sources: Any) -> Any:
    """Both forms agree; returns the fused selections."""
    plain = _native.bind_regions(*CLASSES, operations, targets, sources)
    fused = _native.bind_regions(*CLASSES, operations, targets, sources, BoundWeightFragment)
    if plain is None:
        assert fused is None
        return None
    regions, selections = fused
    assert len(regions) == len(plain)
    for got, want in zip(regions, plain):
        assert type(got) is type(want) and field_state(got) == field_state(want)
        assert all(field_state(got)[k] is field_state(want)[k] for k in field_state(want))
    expected = _native.bound_fragment_ids(regions, TransferRegion, BoundWeightFragment, StoredFragmentSnapshot)
    assert selections == expected
    return selections


def test_genuine_selections_equal_bound_fragment_ids() -> None:
    targets, sources = _tables()
    selections = _check(LOGICAL.operations, targets, sources)
    assert selections is not None
    assert selections[0] == frozenset(op.source.fragment_id for op in PLAN.operations)
    assert selections[1] == frozenset(op.target.fragment_id for op in PLAN.operations)
    assert all(type(item) is frozenset for item in selections)


class _Odd:
    pass


class _BoundSubclass(BoundWeightFragment):
    pass


def _bound_variants(bound: Any) -> list[Any]:
    sub = forged_instance(_BoundSubclass, field_state(bound))
    return [
        _Odd(),
        sub,
        "text",
        _without(bound, "binding"),
        _forge(bound, binding=_without(bound.binding, "fragment_id")),
        _forge(bound, binding=_forge(bound.binding, fragment_id=7)),
        _forge(bound, binding=_forge(bound.binding, fragment_id="")),
        _forge(bound, binding=_forge(bound.binding, fragment_id="other")),
        _forge(bound, binding=_Odd()),
    ]


@pytest.mark.parametrize("side", ["source", "target"])
def test_forged_bound_fragments_give_bound_fragment_ids_answer(side: str) -> None:
    targets, sources = _tables()
    table = targets if side == "target" else sources
    key = next(iter(table))
    undecided = 0
    for variant in _bound_variants(table[key]):
        forged = dict(table)
        forged[key] = variant
        args = (forged, sources) if side == "target" else (targets, forged)
        if _check(LOGICAL.operations, *args) is None:
            undecided += 1
    assert undecided > 0


def test_stored_sources_are_skipped() -> None:
    targets, sources = _tables()
    stored = object.__new__(StoredFragmentSnapshot)
    key = next(iter(sources))
    forged = dict(sources)
    forged[key] = stored
    selections = _check(LOGICAL.operations, targets, forged)
    assert selections is not None


def test_hostile_seventh_argument() -> None:
    targets, sources = _tables()
    with pytest.raises(TypeError):
        _native.bind_regions(*CLASSES, LOGICAL.operations, targets, sources, "not a class")
    with pytest.raises(TypeError):
        _native.bind_regions(*CLASSES, LOGICAL.operations, targets, sources, BoundWeightFragment, None)
    assert _native.bind_regions(*CLASSES, (), targets, sources, BoundWeightFragment) == ([], (frozenset(), frozenset()))
    assert _native.bind_regions(*CLASSES, list(LOGICAL.operations), targets, sources, BoundWeightFragment) is None
    assert _native.bind_regions(*CLASSES, (object(),), targets, sources, BoundWeightFragment) is None


def test_binding_with_and_without_fused_selections_agrees(monkeypatch: pytest.MonkeyPatch) -> None:
    memory = HostMemory()
    source = LOGICAL.source_placement
    target = LOGICAL.target_placement
    target_bindings = host_bindings(target, memory, prefix="dst")
    source_bindings = host_bindings(source, memory, prefix="src")
    fused = bind_logical_transfer_plan(LOGICAL, target_bindings, source_bindings=source_bindings)
    original = _native.bind_regions

    def six_only(*args: Any) -> Any:
        # (regions, selections, step 9 decision): neither fused part decided
        regions = original(*args[:6])
        return None if regions is None else (regions, None, None)

    monkeypatch.setattr(binding_module._native, "bind_regions", six_only)
    separate = bind_logical_transfer_plan(LOGICAL, target_bindings, source_bindings=source_bindings)
    assert fused == separate
    assert fused.source_executors == separate.source_executors
    assert fused.target_executors == separate.target_executors
    assert dataclasses.replace(fused) == fused


def test_bound_regions_use_their_own_instance_dict_in_field_order() -> None:
    """A region bind_regions builds holds every field in field order in its C layout (no
    instance dict): the same items as the constructor's, no larger than a constructed region."""
    import sys

    targets, sources = _tables()
    regions = _native.bind_regions(*CLASSES, LOGICAL.operations, targets, sources, BoundWeightFragment)[0]
    names = [field.name for field in dataclasses.fields(TransferRegion)]
    for region in regions:
        assert type(region) is TransferRegion
        assert not hasattr(region, "__dict__")
        assert list(field_state(region)) == names
        constructed = TransferRegion(**{name: field_state(region)[name] for name in names})
        assert constructed == region
        assert sys.getsizeof(region) == sys.getsizeof(constructed)

"""Planner objects built in C keep the instance's own key-sharing dict (csrc/common.h
``mr_new_instance`` / ``mr_new_object``), or for regions their C-owned layout (csrc/layout.h):
the same fields, values and field order as the dataclass constructor gives, pickle round trips,
and a traced size per region well below what a private 11-key dict installed as ``__dict__``
costs (about 530 bytes a region on CPython 3.11)."""

from __future__ import annotations

import abc
import dataclasses
import pickle
import tracemalloc
from typing import Any

import pytest

import known_answers
from test_planner_objects import _plan, _records
from spec_helpers import field_state

from mooncake.reshard import _native
from mooncake.reshard.weight._planner import core
from mooncake.reshard.weight._planner.contracts import PlacementExecutorPlan, TransferRegion
from mooncake.reshard.weight.planner import plan_placement_transfer

REGION_FIELDS = [f.name for f in dataclasses.fields(TransferRegion)]
EXECUTOR_FIELDS = [f.name for f in dataclasses.fields(PlacementExecutorPlan)]


def _constructed(region: TransferRegion) -> TransferRegion:
    return TransferRegion(**{name: getattr(region, name) for name in REGION_FIELDS})


def test_built_regions_fit_a_per_region_bound() -> None:
    plan = _plan()
    records, sources, targets = _records(plan)
    records = records * 400
    _native.build_regions(TransferRegion, records[:4], sources, targets)  # class state warmed up
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        built = _native.build_regions(TransferRegion, records, sources, targets)
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    per_region = (after - before) / len(records)
    # measured on CPython 3.11: 136 bytes (the instance in its C layout, 128 with its collector
    # header, and the result tuple's slot; about 240 with the shared-key dict the dict-backed
    # class had); an instance with a private 11-key dict costs about 530
    assert per_region < 200, per_region
    for region in built[:8]:
        assert list(field_state(region)) == REGION_FIELDS
        assert region == _constructed(region)


def test_planned_regions_have_field_order_and_equal_constructed_ones() -> None:
    names = known_answers.placement_case_names()
    assert names
    for name in names:
        plan = plan_placement_transfer(known_answers.source_placement(name), known_answers.target_placement(name))
        for region in plan.operations:
            assert list(field_state(region)) == REGION_FIELDS
            assert field_state(region) == field_state(_constructed(region))
        for executor in (*plan.source_executors, *plan.target_executors):
            assert type(executor) is PlacementExecutorPlan
            assert list(field_state(executor)) == EXECUTOR_FIELDS
            assert executor == PlacementExecutorPlan(**field_state(executor))


def test_planned_objects_pickle_round_trip() -> None:
    names = known_answers.placement_case_names()
    assert names
    for name in names:
        plan = plan_placement_transfer(known_answers.source_placement(name), known_answers.target_placement(name))
        for protocol in (2, pickle.HIGHEST_PROTOCOL):
            restored = pickle.loads(pickle.dumps(plan, protocol=protocol))
            assert restored == plan
            assert [list(field_state(r)) for r in restored.operations] == [REGION_FIELDS] * len(plan.operations)
            assert [field_state(r) for r in restored.operations] == [field_state(r) for r in plan.operations]


def test_native_executors_equal_the_python_projection_item_by_item() -> None:
    name = known_answers.case_names()[0]
    placement = known_answers.target_placement(name)
    used = {f.placement_fragment_id for f in placement.fragments}
    got = core.project_executors(placement, used, "target")
    expected = core._project_executors_python(placement, used, "target")
    assert [list(field_state(e).items()) for e in got] == [list(field_state(e).items()) for e in expected]


class _Counting:
    calls = 0

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        _Counting.calls += 1
        return super().__new__(cls)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _Counting.calls += 1


class _Abstract(abc.ABC):
    @abc.abstractmethod
    def method(self) -> None: ...


class _Slotted:
    __slots__ = ("a",)


def test_build_regions_with_odd_classes() -> None:
    records, sources, targets = _records(_plan())
    # the class is not called: neither its __new__ nor its __init__
    built = _native.build_regions(_Counting, records, sources, targets)
    assert _Counting.calls == 0
    assert [list(field_state(r)) for r in built] == [REGION_FIELDS] * len(records)
    assert [field_state(r) for r in built] == [field_state(r) for r in _native.build_regions(TransferRegion, records, sources, targets)]
    # an abstract class is allocated as before (object.__new__ would refuse it)
    abstract = _native.build_regions(_Abstract, records[:1], sources, targets)
    assert type(abstract[0]) is _Abstract and list(field_state(abstract[0])) == REGION_FIELDS
    with pytest.raises(AttributeError):
        _native.build_regions(_Slotted, records[:1], sources, targets)
    with pytest.raises(TypeError):
        _native.build_regions(int, records[:1], sources, targets)


def _bound_plans() -> list[Any]:
    names = known_answers.placement_case_names()
    return [known_answers.bind_inputs(known_answers.load_case(name)["inputs"]) for name in names]


def _fields(value: Any) -> list[str]:
    return [f.name for f in dataclasses.fields(value)]


def test_bound_objects_hold_their_fields_in_field_order_through_pickle() -> None:
    plans = _bound_plans()
    assert plans
    for plan in plans:
        restored = pickle.loads(pickle.dumps(plan, protocol=pickle.HIGHEST_PROTOCOL))
        assert restored == plan
        for built in (plan, restored):
            objects: list[Any] = list(built.operations)
            objects += [op.source for op in built.operations] + [op.target for op in built.operations]
            for executor in (*built.source_executors, *built.target_executors):
                objects.append(executor)
                objects.extend(executor.fragment_snapshots)
            for value in objects:
                if dataclasses.is_dataclass(value):
                    # (a value stored in a C layout has no __dict__: its pickle state, in order)
                    state = field_state(value) if hasattr(value, "__dict__") else value.__getstate__()
                    assert list(state)[: len(_fields(value))] == _fields(value), type(value)
        assert [field_state(op) for op in restored.operations] == [field_state(op) for op in plan.operations]

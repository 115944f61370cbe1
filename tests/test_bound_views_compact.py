"""A bound plan of more than 256 operations keeps its operation views' index tables as int64
arrays (session 17: the lists naming each operation index three times, and one int object per
index above 256, lived as long as the plan; ~30 B per operation); smaller plans keep the lists.
The views they materialise are exactly the views the rules derive (``build_operation_views``)
for every executor and route, as tuples of ints."""

from __future__ import annotations

from array import array
from typing import Any

import pytest

from test_native_revalidate import _bound_plan

from mooncake.reshard.weight._planner import bound_contracts as bc
from mooncake.reshard.weight._planner.contracts import build_operation_views


def _plan(target_tp: int, tensors: int) -> Any:
    # more than 256 operations: indices above the small-int cache
    return _bound_plan(target_tp=target_tp, shape=(4, 2 * target_tp), tensors=tuple(f"t{i}" for i in range(tensors)))


@pytest.mark.parametrize("target_tp, tensors", [(3, 2), (16, 24)])
def test_tables_are_arrays_until_first_use(target_tp: int, tensors: int) -> None:
    plan = _plan(target_tp, tensors)
    views = plan._operation_views
    pending = views._pending
    assert pending is not None
    large = len(plan.operations) > bc._COMPACT_MIN  # (smaller plans' indices are cached small ints)
    assert large == (tensors > 2)
    for table in pending:
        assert table
        for indices in table.values():
            assert (type(indices) is array and indices.typecode == "q") if large else type(indices) is list


@pytest.mark.parametrize("target_tp, tensors", [(3, 2), (16, 24)])
def test_views_equal_the_rules(target_tp: int, tensors: int) -> None:
    plan = _plan(target_tp, tensors)
    assert len(plan.operations) > 256 or tensors == 2
    expected = build_operation_views(plan.operations, plan.source_executors, plan.target_executors)
    for side, executors in (("source", plan.source_executors), ("target", plan.target_executors)):
        for executor in executors:
            got = plan.operation_indices_for_executor(executor, side)
            assert got == expected.indices(executor, side)
            assert type(got) is tuple and all(type(i) is int for i in got)
    assert plan.pipeline_routes == expected.pipeline_routes
    for group in plan.pipeline_routes:
        assert all(type(i) is int for i in group.operation_indices)

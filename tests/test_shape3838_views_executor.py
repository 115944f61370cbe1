"""SHAPE38 (session 38): ``_native.revalidate_views`` (rw_side) tests an executor rank's values
for exact ints before packing them (not on the packed tuple's items) and reads an executor's
``fragment_ids`` (proved an exact tuple of exact strs) by index instead of through an iterator.

The call is captured from a real ``dataclasses.replace`` of a bound plan and repeated:
- with a rank value forged (``object.__setattr__``) to a bool, an int subclass, a str, a float:
  declined (None), like the rules' ``_require_typed_executor``;
- with an executor's ``fragment_ids`` forged to a list, a tuple subclass, or a tuple holding a
  str subclass: declined;
- unforged, with the side tables built (``side_tables=True``): each runtime fragment id maps to
  the row of the first executor listing it (oracle: a Python loop over the executors), with
  fragment ids listed by several executors and executors listing several ids.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forge_helpers import replace_pass_arguments, sized_world
from forge_helpers import with_field as _with

from mooncake.reshard import _native
from mooncake.reshard.weight import bind_logical_transfer_plan


class _Text(str):
    pass


class _Int(int):
    pass


class _Tuple(tuple):
    pass


def _captured() -> tuple[Any, tuple[Any, ...]]:
    logical, targets, sources, _memory = sized_world(2)
    plan = bind_logical_transfer_plan(logical, targets, source_bindings=sources)
    return plan, replace_pass_arguments(plan, "revalidate_views")


def _tabled(args: tuple[Any, ...]) -> tuple[Any, ...]:
    # the side tables built (runtime maps), row_of left empty
    args = list(args) + [None] * (11 - len(args))
    args[8] = None
    args[10] = True
    return tuple(args)


@pytest.fixture(scope="module")
def captured() -> tuple[Any, tuple[Any, ...]]:
    return _captured()


@pytest.mark.parametrize("side", ("source", "target"))
@pytest.mark.parametrize("field", ("dp", "tp", "pp", "ep"))
def test_rank_values_of_another_kind_are_declined(captured, side, field):
    plan, args = captured
    executors = plan.source_executors if side == "source" else plan.target_executors
    call = lambda: _native.revalidate_views(*args)  # noqa: E731
    assert call() is not None
    for executor in (executors[0], executors[-1]):
        rank = executor.rank
        value = getattr(rank, field)
        for bad in (bool(value), _Int(value), str(value), float(value)):
            assert _with(rank, field, bad, call) is None, (field, bad)
        assert _with(rank, field, int(str(value)), call) is not None
    assert call() is not None


@pytest.mark.parametrize("side", ("source", "target"))
def test_fragment_ids_of_another_kind_are_declined(captured, side):
    plan, args = captured
    executors = plan.source_executors if side == "source" else plan.target_executors
    call = lambda: _native.revalidate_views(*args)  # noqa: E731
    for executor in (executors[0], executors[-1]):
        ids = executor.fragment_ids
        assert ids, "an executor lists its fragments"
        for bad in (list(ids), _Tuple(ids), ids[:-1] + (_Text(ids[-1]),), (_Text(ids[0]),) + ids[1:]):
            assert _with(executor, "fragment_ids", bad, call) is None, bad
        assert _with(executor, "fragment_ids", tuple("".join(list(i)) for i in ids), call) is not None
    assert call() is not None


def _first_owner(executors: tuple[Any, ...]) -> dict[str, Any]:
    owner: dict[str, Any] = {}
    for executor in executors:
        for fragment_id in executor.fragment_ids:
            owner.setdefault(fragment_id, executor)
    return owner


def test_runtime_maps_name_the_first_listing_executor(captured):
    plan, args = captured
    tabled = _tabled(args)
    result = _native.revalidate_views(*tabled)
    assert result is not None
    s_runtime, s_rows, _s_table, t_runtime, t_rows, _t_table, _routes = result
    for runtime, rows, executors in ((s_runtime, s_rows, plan.source_executors), (t_runtime, t_rows, plan.target_executors)):
        assert [row[0] for row in rows] == [vars(executor) for executor in executors]
        expected = _first_owner(executors)
        assert set(runtime) == set(expected)
        for fragment_id, executor in expected.items():
            assert runtime[fragment_id][0] is vars(executor)


def test_shared_and_repeated_ids_keep_the_first_owner(captured):
    # one executor lists a later executor's ids too (and its own twice): the first still owns
    plan, args = captured
    tabled = _tabled(args)
    executors = plan.target_executors
    first, last = executors[0], executors[-1]
    grown = first.fragment_ids + last.fragment_ids + first.fragment_ids[:1]
    result = _with(first, "fragment_ids", grown, lambda: _native.revalidate_views(*tabled))
    assert result is not None
    t_runtime = result[3]
    for fragment_id in last.fragment_ids:
        assert t_runtime[fragment_id][0] is vars(first)
    assert _native.revalidate_views(*tabled) is not None


def _route_oracle(halves: list[Any], source_of: list[int], target_of: list[int]) -> dict[tuple[Any, ...], list[int]]:
    routes: dict[tuple[Any, ...], list[int]] = {}
    for i, (s, t) in enumerate(zip(source_of, target_of)):
        routes.setdefault(tuple(halves[s]) + tuple(halves[t]), []).append(i)
    return routes


def test_routes_match_the_python_grouping(captured):
    # the bucket a route's first operation was appended to takes the next ones of that route
    _plan_unused, args = captured
    source_of, target_of, halves = args[4], args[5], args[3]
    assert isinstance(source_of, list) and isinstance(target_of, list)
    result = _native.revalidate_views(*args)
    assert result is not None
    assert result[6] == _route_oracle(halves, source_of, target_of)


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_routes_of_reordered_operations(captured, data):
    # operations drawn (with repeats, any order) from the plan's: runs of one route, switches
    _plan_unused, args = captured
    source_of, target_of = args[4], args[5]
    picks = data.draw(st.lists(st.integers(0, len(source_of) - 1), min_size=1, max_size=3 * len(source_of)))
    s_of = [source_of[i] for i in picks]
    t_of = [target_of[i] for i in picks]
    call = list(args)
    call[4], call[5] = s_of, t_of
    result = _native.revalidate_views(*call)
    assert result is not None
    assert result[6] == _route_oracle(args[3], s_of, t_of)
    for rows in (result[1], result[4]):
        assert sum(len(row[2]) for row in rows) == len(picks)

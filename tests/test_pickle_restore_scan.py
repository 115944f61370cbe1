"""``_native.restore_regions_carried`` (csrc/restore_scan.c): the regions of a TransferPlan pickle
record's operation table, built exactly as ``_native.restore_regions`` builds them, and the
revalidation scan's facts derived from the values stored in them (the shape
``revalidate_scan_carried`` takes, as ``bind_regions`` carries them).

Oracles: ``restore_regions`` for the regions (same classes, same instance dict keys in the same
order, the very value objects), ``revalidate_scan`` for the facts: on every table and budget,
``revalidate_scan_carried`` over the carried facts returns exactly what ``revalidate_scan`` returns
on the restored regions, or None (then the plain scan decides); it never accepts what the scan
declines, including after the adapter's bindings are edited."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_executor import HostWorld, tp_placement
from test_binding_attacks import World
from spec_helpers import field_state

from mooncake.reshard import _native
from mooncake.reshard.contracts.fragments import RuntimeBindingFragment
from mooncake.reshard.weight._planner import bound_pickle
from mooncake.reshard.weight._planner.bound_pickle import _REGION_FIELDS
from mooncake.reshard.weight._planner.contracts import TransferRegion
from mooncake.reshard.weight._planner.fragments import BoundWeightFragment

BIG = 1 << 62
_carried = _native.restore_regions_carried


def _record_parts(plan: Any) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """``(operation table, restored bound fragments)`` of a plan's compact record."""
    function, record = bound_pickle.reduce_transfer_plan(plan)
    assert function is bound_pickle._restore_transfer_plan
    rows = list(bound_pickle._groups(record[6], 2))
    _attestations, fragments = bound_pickle._restore_bound(rows, record[7])
    return record[8], tuple(fragments)


_PLANS: dict[str, Any] = {}


def _plan(kind: str) -> Any:
    if kind not in _PLANS:
        if kind == "world":
            world = World()
            _PLANS[kind] = (world.bind(), world)
        else:
            world = HostWorld(
                tp_placement(8, prefix="s", shape=(16, 16), dim=0), tp_placement(8, prefix="t", shape=(16, 16), dim=1)
            )
            _PLANS[kind] = (world.bind(), world.memory)
    return _PLANS[kind][0]


def _scan(operations: tuple[Any, ...], segments: Any = BIG, total: Any = BIG) -> Any:
    return _native.revalidate_scan(operations, segments, total, TransferRegion, BoundWeightFragment)


def _scan_carried(operations: tuple[Any, ...], carried: Any, segments: Any = BIG, total: Any = BIG) -> Any:
    return _native.revalidate_scan_carried(
        operations, carried, segments, total, BoundWeightFragment, RuntimeBindingFragment
    )


def _same_scan(left: Any, right: Any) -> bool:
    if left is None or right is None:
        return left is right
    frags_l, source_l, target_l, boxes_l = left
    frags_r, source_r, target_r, boxes_r = right
    return (
        len(frags_l) == len(frags_r)
        and all(a is b for a, b in zip(frags_l, frags_r))
        and source_l == source_r
        and target_l == target_r
        and boxes_l == boxes_r
        and all(a[0] is b[0] and a[1] is b[1] for a, b in zip(boxes_l, boxes_r))
    )


def _check(table: tuple[Any, ...], fragments: tuple[Any, ...], budgets: tuple[Any, Any] = (BIG, BIG)) -> Any:
    """restore_regions_carried against its two oracles; returns the carried facts."""
    expected = _native.restore_regions(table, fragments, TransferRegion, _REGION_FIELDS)
    result = _carried(table, fragments, TransferRegion, _REGION_FIELDS, BoundWeightFragment)
    if expected is None:
        assert result is None
        return None
    assert type(result) is tuple and len(result) == 2
    regions, carried = result
    assert type(regions) is tuple and len(regions) == len(expected)
    for mine, theirs in zip(regions, expected):
        assert type(mine) is TransferRegion
        assert list(field_state(mine)) == list(field_state(theirs)) == list(_REGION_FIELDS)
        assert all(field_state(mine)[k] is field_state(theirs)[k] for k in _REGION_FIELDS)
    plain = _scan(regions, *budgets)
    if carried is not None:
        assert type(carried) is tuple and len(carried) == 8
        assert type(carried[0]) is list and all(a is b for a, b in zip(carried[0], regions))
        taken = _scan_carried(regions, carried, *budgets)
        assert taken is None or _same_scan(taken, plain)
        # The facts never stand for other operations (pointer check).
        assert _scan_carried(tuple(expected), carried, *budgets) is None
    return carried


@pytest.mark.parametrize("kind", ["world", "tp8"])
def test_record_tables_restore_with_the_scan_facts(kind: str) -> None:
    plan = _plan(kind)
    table, fragments = _record_parts(plan)
    assert _check(table, fragments) is not None
    regions, carried = _carried(table, fragments, TransferRegion, _REGION_FIELDS, BoundWeightFragment)
    assert regions == plan.operations
    taken = _scan_carried(regions, carried)
    assert taken is not None and _same_scan(taken, _scan(regions))
    # Tight budgets: exactly the plain scan's decisions.
    segments = [op.segment_count for op in plan.operations]
    for budgets in ((max(segments), sum(segments)), (max(segments) - 1, BIG), (BIG, sum(segments) - 1), (1, 1)):
        carried = _check(table, fragments, budgets)
        assert carried is not None
        regions = carried[0]
        assert _same_scan(_scan_carried(tuple(regions), carried, *budgets), _scan(tuple(regions), *budgets))


def _edit(table: tuple[Any, ...], index: int, value: Any) -> tuple[Any, ...]:
    items = list(table)
    items[index] = value
    return tuple(items)


# Values the scan declines or that change its facts: (field position in a row, value).
_FORGED = [
    (3, (0,) * 7),  # a box of another rank: stored, only the region check reads it
    (5, -1),
    (5, 1 << 40),
    (5, 1 << 63),
    (5, "0"),
    (5, True),
    (6, (1 << 63) - 1),
    (7, 0),
    (7, -5),
    (7, 1 << 62),
    (7, 1.0),
    (8, ()),
    (8, (2,)),
    (8, (0, 1)),
    (8, (-1, -1)),
    (8, (1 << 40, 1 << 40)),
    (8, [1]),
    (9, (1 << 62,)),
    (9, ()),
    (10, ("x",)),
    (1, 1),  # another fragment as source
    (2, 0),
]


@pytest.mark.parametrize("kind", ["world", "tp8"])
@pytest.mark.parametrize("field,value", _FORGED)
def test_forged_rows_match_the_plain_scan(kind: str, field: int, value: Any) -> None:
    table, fragments = _record_parts(_plan(kind))
    size = len(_REGION_FIELDS)
    for row in (0, len(table) // size - 1):
        _check(_edit(table, row * size + field, value), fragments)
        _check(_edit(table, row * size + field, value), fragments, (2, 3))


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_random_edits_match_the_plain_scan(data: Any) -> None:
    table, fragments = _record_parts(_plan("world"))
    items = list(table)
    ints = st.one_of(st.integers(-3, 40), st.integers(-(2**64), 2**64), st.sampled_from([0, 1, 1 << 62, -(1 << 63)]))
    for _ in range(data.draw(st.integers(1, 4))):
        index = data.draw(st.integers(0, len(items) - 1))
        current = items[index]
        if type(current) is tuple:
            items[index] = tuple(data.draw(ints) for _ in range(data.draw(st.integers(0, 3))))
        else:
            items[index] = data.draw(ints)
    budgets = (data.draw(st.sampled_from([BIG, 1, 2, 7, 1 << 70])), data.draw(st.sampled_from([BIG, 1, 5, 40])))
    _check(tuple(items), fragments, budgets)


def test_edited_bindings_are_read_again() -> None:
    world = World()
    plan = world.bind()
    table, fragments = _record_parts(plan)
    regions, carried = _carried(table, fragments, TransferRegion, _REGION_FIELDS, BoundWeightFragment)
    assert carried is not None and _scan_carried(regions, carried) is not None
    binding = fragments[0].binding
    for value in (1, 0, -1, 1 << 70, "8"):
        object.__setattr__(binding, "nbytes", value)
        plain = _scan(regions)
        taken = _scan_carried(regions, carried)
        assert taken is None or _same_scan(taken, plain)
        if value == 1:
            assert plain is None and taken is None
    # A binding of another class, or none: declined.
    object.__setattr__(fragments[0], "binding", object())
    assert _scan_carried(regions, carried) is None


def test_shapes_the_record_does_not_describe() -> None:
    table, fragments = _record_parts(_plan("world"))
    size = len(_REGION_FIELDS)
    assert _carried(table[:-1], fragments, TransferRegion, _REGION_FIELDS, BoundWeightFragment) is None
    assert _carried(list(table), fragments, TransferRegion, _REGION_FIELDS, BoundWeightFragment) is None
    assert _carried(table, list(fragments), TransferRegion, _REGION_FIELDS, BoundWeightFragment) is None
    for index in (-1, len(fragments), 1 << 64, -(1 << 64), None, "0", 0.0, True):
        edited = _edit(table, 1, index)
        assert _carried(edited, fragments, TransferRegion, _REGION_FIELDS, BoundWeightFragment) is None
        assert _native.restore_regions(edited, fragments, TransferRegion, _REGION_FIELDS) is None
        edited = _edit(table, size + 2, index)
        assert _carried(edited, fragments, TransferRegion, _REGION_FIELDS, BoundWeightFragment) is None
    empty = _carried((), fragments, TransferRegion, _REGION_FIELDS, BoundWeightFragment)
    assert empty == ((), None)
    # Fragments that are not bound fragments: regions built, no facts (the scan declines them).
    other = tuple(object() for _ in fragments)
    regions, carried = _carried(table, other, TransferRegion, _REGION_FIELDS, BoundWeightFragment)
    assert len(regions) == len(table) // size and carried is None
    # One fragment object at two indices: positions by identity, as the scan's.
    doubled = (fragments[0],) * len(fragments)
    assert _check(table, doubled) is not None


def test_hostile_arguments() -> None:
    table, fragments = _record_parts(_plan("world"))
    with pytest.raises(TypeError):
        _carried(table, fragments, TransferRegion, _REGION_FIELDS)
    with pytest.raises(TypeError):
        _carried(table, fragments, int, _REGION_FIELDS, BoundWeightFragment)
    with pytest.raises(TypeError):
        _carried(table, fragments, TransferRegion, _REGION_FIELDS, 3)
    for names in (_REGION_FIELDS[:-1], _REGION_FIELDS[::-1], list(_REGION_FIELDS), (1,) * 11, None):
        with pytest.raises(TypeError):
            _carried(table, fragments, TransferRegion, names, BoundWeightFragment)


def test_restored_regions_are_freed() -> None:
    import gc
    import weakref

    table, fragments = _record_parts(_plan("tp8"))
    regions, carried = _carried(table, fragments, TransferRegion, _REGION_FIELDS, BoundWeightFragment)
    probe = weakref.ref(fragments[0])
    watched = weakref.ref(carried[0][0]) if hasattr(TransferRegion, "__weakref__") else None
    del regions, carried
    gc.collect()
    assert probe() is not None  # still held by ``fragments``
    if watched is not None:
        assert watched() is None


def test_record_round_trip_still_equal() -> None:
    plan = _plan("tp8")
    assert pickle.loads(pickle.dumps(plan, protocol=5)) == plan
    assert pickle.loads(pickle.dumps(plan, protocol=4)) == plan


def _regions_without_facts(*args: Any) -> Any:
    regions = _native.restore_regions(*args[:4])
    return None if regions is None else (regions, None)


def _restore_outcome(record: tuple[Any, ...]) -> Any:
    try:
        return bound_pickle._restore_transfer_plan(*record)
    except Exception as exc:  # the first failure, compared by type and message
        return (type(exc), str(exc))


@pytest.mark.parametrize("kind", ["world", "tp8"])
@pytest.mark.parametrize("field,value", _FORGED)
def test_restore_with_and_without_the_facts_agrees(
    monkeypatch: pytest.MonkeyPatch, kind: str, field: int, value: Any
) -> None:
    """End to end: a record whose operation rows are forged restores to the same plan, or fails
    with the same first error, whether the restore hands its scan facts to the revalidation or
    the plain scan decides."""
    plan = _plan(kind)
    function, record = bound_pickle.reduce_transfer_plan(plan)
    assert function is bound_pickle._restore_transfer_plan
    size = len(_REGION_FIELDS)
    rows = len(record[8]) // size
    for row in (0, rows - 1):
        forged = record[:8] + (_edit(record[8], row * size + field, value),) + record[9:]
        with_facts = _restore_outcome(forged)
        with monkeypatch.context() as patch:
            patch.setattr(bound_pickle, "_native_restore_regions_carried", _regions_without_facts)
            without = _restore_outcome(forged)
        assert with_facts == without, (field, value, row, with_facts, without)
    assert _restore_outcome(record) == plan

"""Session 19 (bind's peak memory): the revalidation fast path keeps no box tuple per operation.

``revalidate_spaces`` and ``revalidate_coverage`` take the plan's operations tuple in place of the
scan's boxes list and read each operation's ``(overlap_offset, overlap_shape)`` from its region's
own fields: on every plan and mutation they must decide exactly what they decide on the scan's
boxes (and what the Python versions decide), decline on regions they cannot read (another class,
an emptied field), and keep refusing a tuple of box tuples. The bind path empties the carried
boxes list once the scan has read it, and the plan it builds is the one the rules accept.
"""

from __future__ import annotations

import pickle
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank
from mooncake.reshard.weight._planner import bound_contracts as bc
from mooncake.reshard.weight._planner.contracts import TransferRegion
from mooncake.reshard.weight.types import PlacementFragment
from mooncake.reshard.contracts.fragments import RuntimeBindingFragment

from test_native_revalidate import (
    _MUTATIONS,
    _PLANS,
    _coverage_tables,
    _forge,
    _mutated,
    _record_fast_path,
    _scan,
    _spaces_reference,
)


def _call(function: Any, *args: Any) -> Any:
    try:
        return function(*args)
    except Exception as error:  # the fast path declines on any exception
        return type(error)


def _spaces_both(plan: Any) -> None:
    operations = plan.operations
    scanned = _scan(operations)
    if scanned is None:
        return
    frags, source_of, target_of, boxes = scanned
    for physical in (True, False):
        for extra in ((), (RuntimeBindingFragment, PlacementFragment)):
            by_list = _call(_native.revalidate_spaces, frags, source_of, target_of, boxes, physical, *extra)
            by_regions = _call(_native.revalidate_spaces, frags, source_of, target_of, operations, physical, *extra)
            assert by_regions is by_list, (by_regions, by_list)
        try:
            reference: Any = _spaces_reference(frags, source_of, target_of, boxes, physical)
        except Exception:
            reference = "error"
        if reference != "error":
            assert by_regions is reference


def _coverage_both(plan: Any) -> None:
    try:
        tables = _coverage_tables(plan)
    except Exception:
        return
    if tables is None:
        return
    with_regions = list(tables)
    with_regions[3] = plan.operations
    for extra in ((), (ParallelRank,), (ParallelRank, PlacementFragment)):
        by_list = _call(_native.revalidate_coverage, *tables, *extra)
        by_regions = _call(_native.revalidate_coverage, *with_regions, *extra)
        assert by_regions is by_list, (by_regions, by_list, extra)
    if by_regions is True:
        assert bc._fast_target_coverage(*tables) is True
    # the fallback's boxes: what the scan read
    assert bc._operation_boxes(plan.operations) == tables[3]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(sorted(_PLANS)),
    choices=st.lists(st.integers(0, len(_MUTATIONS) - 1), min_size=0, max_size=2),
    data=st.data(),
)
def test_boxes_read_from_regions_decide_alike(name: str, choices: list[int], data: Any) -> None:
    mutated = _mutated(name, choices, data)
    if mutated is None:  # a mutation that does not apply to the plan it was given
        return
    plan = mutated
    _spaces_both(plan)
    _coverage_both(plan)


def test_genuine_plans_accept_with_regions() -> None:
    plan = _PLANS["split"]
    frags, source_of, target_of, _boxes = _scan(plan.operations)
    assert _native.revalidate_spaces(frags, source_of, target_of, plan.operations, True) is True
    tables = list(_coverage_tables(plan))
    tables[3] = plan.operations
    assert _native.revalidate_coverage(*tables, ParallelRank, PlacementFragment) is True
    assert _native.revalidate_coverage(*tables) is True  # the string-keyed pass builds its boxes


def _edited(operations: tuple[Any, ...], index: int, **changes: Any) -> tuple[Any, ...]:
    edited = list(operations)
    edited[index] = _forge(operations[index], **changes)
    return tuple(edited)


def test_region_boxes_are_the_regions_own() -> None:
    """An overlap box edited in place (a partial write) is seen, as the list form sees it."""
    plan = _PLANS["split"]
    frags, source_of, target_of, boxes = _scan(plan.operations)
    offset, shape = boxes[0]
    smaller = tuple(max(d - 1, 1) for d in shape)
    assert smaller != shape
    partial = _edited(plan.operations, 0, overlap_shape=smaller)
    partial_boxes = list(boxes)
    partial_boxes[0] = (offset, smaller)
    assert _native.revalidate_spaces(frags, source_of, target_of, partial_boxes, True) is None
    assert _native.revalidate_spaces(frags, source_of, target_of, partial, True) is None
    tables = list(_coverage_tables(plan))
    for extra in ((), (ParallelRank, PlacementFragment)):
        tables[3] = partial_boxes
        by_list = _native.revalidate_coverage(*tables, *extra)
        tables[3] = partial
        assert _native.revalidate_coverage(*tables, *extra) is by_list is None


def test_unreadable_regions_decline() -> None:
    plan = _PLANS["split"]
    operations = plan.operations
    frags, source_of, target_of, _boxes = _scan(operations)
    tables = list(_coverage_tables(plan))

    class Region(TransferRegion):
        pass

    other = object.__new__(Region)
    for name, value in operations[-1].__getstate__().items():
        object.__setattr__(other, name, value)
    emptied = _forge(operations[-1])
    object.__delattr__(emptied, "overlap_offset")
    variants = [
        operations[:-1],  # another length
        operations[:-1] + (other,),  # another class
        operations[:-1] + (emptied,),  # an emptied field
        operations[:-1] + (operations[-1].overlap_offset,),
    ]
    for variant in variants:
        assert _native.revalidate_spaces(frags, source_of, target_of, variant, True) is False
        tables[3] = variant
        for extra in ((), (ParallelRank, PlacementFragment)):
            assert _native.revalidate_coverage(*tables, *extra) is None


def test_box_tuples_in_a_tuple_stay_refused() -> None:
    plan = _PLANS["split"]
    frags, source_of, target_of, boxes = _scan(plan.operations)
    tables = list(_coverage_tables(plan))
    for bad in (tuple(boxes), (), None, (plan.operations[0].source,) + plan.operations[1:]):
        with pytest.raises(TypeError):
            _native.revalidate_spaces(frags, source_of, target_of, bad, True)
        tables[3] = bad
        with pytest.raises(TypeError):
            _native.revalidate_coverage(*tables)


def test_bind_empties_the_carried_boxes_and_keeps_the_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path of the bind call's own plan empties the carried boxes (its private list) and
    accepts exactly what the rule-by-rule path accepts; the restore path too. (Every plan size
    packs its positions here: threshold lowered.)"""
    monkeypatch.setattr(bc, "_COMPACT_MIN", 0)
    seen: list[Any] = []
    scan_carried = _native.revalidate_scan_carried

    def spy(operations: Any, carried: Any, *rest: Any) -> Any:
        seen.append(carried)
        return scan_carried(operations, carried, *rest)

    monkeypatch.setattr(bc._native, "revalidate_scan_carried", spy)
    results = _record_fast_path(monkeypatch)

    from test_native_revalidate import _bound_plan

    plan = _bound_plan(target_tp=4, shape=(4, 8))
    assert results == [True]
    # the carried boxes and positions are emptied (the positions packed; or carried compact:
    # bc._compact_carried), the rest kept
    assert seen and all(type(c) is tuple and c[2] in ([], b"") and c[3] in ([], b"") and c[4] in ([], None) or
                        type(c[2]) is type(c[3]) is bytes and c[4] is None for c in seen)
    assert seen[0][0] and seen[0][1]
    restored = pickle.loads(pickle.dumps(plan))
    assert results == [True, True]
    assert len(seen) == 2 and seen[1][2] == seen[1][3] == seen[1][4] == []  # (the restore's carry as well)
    # the rules accept the same plan and derive the same operation views
    monkeypatch.setattr(bc, "_fast_revalidate_live", lambda *args: False)
    ruled = pickle.loads(pickle.dumps(plan))
    for side in ("source", "target"):
        for mine, theirs, fast in zip(
            getattr(restored, side + "_executors"), getattr(ruled, side + "_executors"), getattr(plan, side + "_executors")
        ):
            want = ruled.operation_indices_for_executor(theirs, side)
            assert restored.operation_indices_for_executor(mine, side) == want
            assert plan.operation_indices_for_executor(fast, side) == want


# ---------------------------------------------------------------------------------------
# Packed positions: source_of / target_of as bytes of native int32 (bc._packed_positions)

from mooncake.reshard.weight import ExecutorTransferPlan  # noqa: E402
from mooncake.reshard.weight._planner.bound_contracts import (  # noqa: E402
    BoundWeightFragment,
    PlacementFragment as _PF,
    RuntimeBindingAttestation,
    RuntimeFragmentSnapshot,
)

from test_native_revalidate import _identity, _native_fragments  # noqa: E402


def _comparable(value: Any) -> Any:
    """Tables with their buckets as plain lists (rows compared by their key and bucket)."""
    if isinstance(value, dict):
        return {k: _comparable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_comparable(v) for v in value]
    if isinstance(value, tuple) and len(value) == 3 and isinstance(value[0], dict):
        return ("row", value[1], list(value[2]))
    return value


def _pipeline(plan: Any, pack: bool, halves: Any = None) -> list[Any]:
    """The fast path's passes on the plan's tables, positions packed or not: each pass's
    answer (tables made comparable), stopping at the first decline."""
    operations = plan.operations
    answers: list[Any] = []
    with bc._ViewScope():
        scanned = _scan(operations)
        if scanned is None:
            return answers
        frags, source_of, target_of, _boxes = scanned
        if pack:
            packed = bc._packed_positions(source_of, target_of)
            assert packed is not None
            source_of, target_of = packed
            assert bc._position_list(source_of) == scanned[1] and bc._position_list(target_of) == scanned[2]
        checked = _native_fragments(frags, _identity(plan))
        if checked is None:
            return answers
        keys, routes_half, runtime_ids, attested = checked
        if halves is not None:
            routes_half = halves(routes_half)
        row_of: list[Any] = []
        views = _call(
            _native.revalidate_views, plan.source_executors, plan.target_executors, runtime_ids, routes_half,
            source_of, target_of, ParallelRank, ExecutorTransferPlan, row_of,
        )
        answers.append(_comparable(views))
        if not isinstance(views, tuple):
            return answers
        s_runtime, s_rows, _s_table, t_runtime, t_rows, _t_table, _routes = views
        s_row_of, t_row_of = row_of or (None, None)
        used: set[int] = set()
        for side_of, runtime, rows, side_row_of in (
            (source_of, s_runtime, s_rows, s_row_of),
            (target_of, t_runtime, t_rows, t_row_of),
        ):
            side = _call(
                _native.revalidate_side, frags, keys, runtime_ids, side_of, runtime, rows, attested, used,
                RuntimeBindingAttestation, ParallelRank, RuntimeFragmentSnapshot, _PF, side_row_of,
            )
            python = bc._fast_side_consistent(
                frags, keys, runtime_ids, bc._position_list(side_of), runtime, rows, attested, set()
            )
            answers.append((side, python, sorted(used)))
        for physical in (True, False):
            answers.append(_call(
                _native.revalidate_spaces, frags, source_of, target_of, operations, physical,
                RuntimeBindingFragment, _PF,
            ))
        for extra in ((), (ParallelRank, _PF)):
            answers.append(_call(
                _native.revalidate_coverage, plan.target_placement, frags, target_of, operations, t_rows,
                attested, used, *extra,
            ))
    return answers


def _same_pipeline(plan: Any, halves: Any = None) -> list[Any]:
    plain = _pipeline(plan, False, halves)
    packed = _pipeline(plan, True, halves)
    assert packed == plain
    return packed


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(sorted(_PLANS)),
    choices=st.lists(st.integers(0, len(_MUTATIONS) - 1), min_size=0, max_size=2),
    data=st.data(),
)
def test_packed_positions_decide_alike(name: str, choices: list[int], data: Any) -> None:
    mutated = _mutated(name, choices, data)
    if mutated is None:  # a mutation that does not apply to the plan it was given
        return
    plan = mutated
    _same_pipeline(plan)


def test_packed_positions_genuine_plans_and_the_views_loop() -> None:
    answers = _same_pipeline(_PLANS["split"])
    assert len(answers) == 7 and answers[1][0] is True and answers[2][0] is True and answers[3] is True
    assert answers[5] is True and answers[6] is True
    # route halves that are not plain 2-tuples: revalidate_views' general loop (rw_loop) reads
    # the packed positions as ints
    loop = _same_pipeline(_PLANS["split"], lambda halves: [(h[0], (h[1],)) for h in halves])
    assert isinstance(loop[0], tuple) and loop[0][:6] == answers[0][:6]  # (other route keys)


def test_packed_positions_out_of_range_or_malformed_decline() -> None:
    plan = _PLANS["split"]
    with bc._ViewScope():
        frags, source_of, target_of, _boxes = _scan(plan.operations)
        keys, halves, runtime_ids, attested = _native_fragments(frags, _identity(plan))
        s_packed, t_packed = bc._packed_positions(source_of, target_of)
        n = len(frags)
        bad_values = [
            bc._packed_positions([n] + source_of[1:], target_of)[0],  # one past the fragments
            bc._packed_positions(source_of, target_of)[0][:-4],  # one operation short
            s_packed + b"\0",  # not a whole number of positions
            b"\xff\xff\xff\xff" + s_packed[4:],  # -1
        ]
        for bad in bad_values:
            views = _native.revalidate_views(
                plan.source_executors, plan.target_executors, runtime_ids, halves, bad, t_packed, ParallelRank,
                ExecutorTransferPlan,
            )
            assert views is None
            assert _native.revalidate_spaces(frags, bad, t_packed, plan.operations, True) is False
            views = _native.revalidate_views(
                plan.source_executors, plan.target_executors, runtime_ids, halves, s_packed, t_packed, ParallelRank,
                ExecutorTransferPlan,
            )
            s_runtime, s_rows, _st, _tr, t_rows, _tt, _routes = views
            assert _native.revalidate_side(
                frags, keys, runtime_ids, bad, s_runtime, s_rows, attested, set(), RuntimeBindingAttestation,
                ParallelRank, RuntimeFragmentSnapshot, _PF,
            ) is None or bad is bad_values[1]  # (one operation short: the side owns the others alike)
            assert _native.revalidate_coverage(
                plan.target_placement, frags, bad, plan.operations, t_rows, attested, set(), ParallelRank, _PF
            ) is None


def test_positions_containers() -> None:
    plan = _PLANS["split"]
    frags, source_of, target_of, boxes = _scan(plan.operations)
    s_packed, t_packed = bc._packed_positions(source_of, target_of)
    for bad in (tuple(source_of), bytearray(s_packed), memoryview(s_packed), None):
        with pytest.raises(TypeError):
            _native.revalidate_spaces(frags, bad, target_of, boxes, True)
    # the packer keeps the lists for what int32 cannot hold or what is not an int
    assert bc._packed_positions([1 << 31], [0]) is None
    assert bc._packed_positions([0], [1.0]) is None
    assert bc._packed_positions((0,), [0]) is None
    assert bc._position_list(target_of) is target_of
    assert bc._position_list(t_packed) == target_of


# ---------------------------------------------------------------------------------------
# The compact carried form (bc._compact_carried: packed positions, no boxes)

from test_native_revalidate_carried import _bind as _carried_bind, _logical as _carried_logical  # noqa: E402
from test_native_revalidate_carried import _ops as _carried_ops, BIG  # noqa: E402


def _fresh_carried() -> tuple[tuple[Any, ...], Any]:
    built = _carried_bind(*_carried_logical(_carried_ops()))
    assert built is not None and built[3] is not None
    return tuple(built[0]), built[3]


def _scan_carried(operations: tuple[Any, ...], carried: Any) -> Any:
    return _native.revalidate_scan_carried(operations, carried, BIG, BIG, BoundWeightFragment, RuntimeBindingFragment)


def test_compact_carried_scans_as_the_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bc, "_COMPACT_MIN", 0)  # (small plans' facts are kept as they are)
    operations, carried = _fresh_carried()
    want = _scan(operations)
    lists = (list(carried[2]), list(carried[3]))
    compact = bc._compact_carried(carried)
    assert carried[2] == carried[3] == carried[4] == []  # emptied: the call's own lists
    assert compact[:2] == carried[:2] and compact[5:] == carried[5:] and compact[4] is None
    assert compact[2:4] == bc._packed_positions(*lists)
    got = _scan_carried(operations, compact)
    assert got is not None and all(a is b for a, b in zip(got[0], want[0])) and len(got[0]) == len(want[0])
    assert bc._position_list(got[1]) == want[1] and bc._position_list(got[2]) == want[2] and got[3] is None
    # the emptied original declines (another length), the compact one is kept as it is
    assert _scan_carried(operations, carried) is None
    assert bc._compact_carried(compact) is compact
    for other in (None, (), [1], carried[:7], "carried"):
        assert bc._compact_carried(other) is other


def test_forged_compact_carried_declines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bc, "_COMPACT_MIN", 0)
    operations, carried = _fresh_carried()
    compact = bc._compact_carried(carried)
    s_packed, t_packed = compact[2], compact[3]
    distinct = len(compact[1])
    n = len(operations)

    def at(packed: bytes, index: int, value: int) -> bytes:
        raw = bytearray(packed)
        raw[4 * index:4 * index + 4] = value.to_bytes(4, sys.byteorder, signed=True)
        return bytes(raw)

    forgeries = [
        compact[:2] + (s_packed[:-4], t_packed) + compact[4:],  # one operation short
        compact[:2] + (s_packed, t_packed + b"\0") + compact[4:],  # ragged
        compact[:2] + (at(s_packed, n - 1, distinct), t_packed) + compact[4:],  # past the fragments
        compact[:2] + (s_packed, at(t_packed, 0, -1)) + compact[4:],
        compact[:2] + (s_packed, t_packed, []) + compact[5:],  # boxes with packed positions
        compact[:2] + (s_packed, list(t_packed)) + compact[4:],  # one packed, one list
        compact[:2] + (bytearray(s_packed), t_packed) + compact[4:],
    ]
    for forged in forgeries:
        assert _scan_carried(operations, forged) is None
    assert _scan_carried(operations, compact) is not None


def test_plan_from_compact_carried_is_the_rules_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bind path with the carried facts compacted as soon as bind_regions returns: the fast
    path takes them (and the region recheck the carried proof) and builds the plan the rules
    build."""
    monkeypatch.setattr(bc, "_COMPACT_MIN", 0)
    from mooncake.reshard.weight._planner import binding

    real = binding._native.bind_regions
    compacted: list[Any] = []

    def bind_regions(*args: Any) -> Any:
        built = real(*args)
        if built is not None and len(built) > 3 and built[3] is not None:
            compact = bc._compact_carried(built[3])
            compacted.append(compact)
            built = built[:3] + (compact,)
        return built

    results = _record_fast_path(monkeypatch)

    monkeypatch.setattr(binding._native, "bind_regions", bind_regions)
    from test_native_revalidate import _bound_plan

    plan = _bound_plan(target_tp=4, shape=(4, 8))
    assert results == [True] and len(compacted) == 1 and compacted[0][4] is None
    monkeypatch.setattr(bc, "_fast_revalidate_live", lambda *args: False)
    ruled = pickle.loads(pickle.dumps(plan))
    for side in ("source", "target"):
        for theirs, fast in zip(getattr(ruled, side + "_executors"), getattr(plan, side + "_executors")):
            assert plan.operation_indices_for_executor(fast, side) == ruled.operation_indices_for_executor(theirs, side)


# ---------------------------------------------------------------------------------------
# revalidate_views' packed index tables (packed_indices: one bytes of int64 per bucket)


def _unpacked(table: dict[Any, Any]) -> dict[Any, list[int]]:
    return {k: memoryview(v).cast("q").tolist() if type(v) is bytes else list(v) for k, v in table.items()}


def _views_both(plan: Any, halves: Any = None) -> Any:
    with bc._ViewScope():
        scanned = _scan(plan.operations)
        if scanned is None:
            return None
        frags, source_of, target_of, _boxes = scanned
        checked = _native_fragments(frags, _identity(plan))
        if checked is None:
            return None
        _keys, routes_half, runtime_ids, _attested = checked
        if halves is not None:
            routes_half = halves(routes_half)
        answers = []
        for packed in (False, True):
            for positions in ((source_of, target_of), bc._packed_positions(source_of, target_of)):
                views = _call(
                    _native.revalidate_views, plan.source_executors, plan.target_executors, runtime_ids,
                    routes_half, *positions, ParallelRank, ExecutorTransferPlan, [], packed,
                )
                if not isinstance(views, tuple):
                    answers.append(views)
                    continue
                s_runtime, s_rows, s_table, t_runtime, t_rows, t_table, routes = views
                for rows, table in ((s_rows, s_table), (t_rows, t_table)):
                    for _estate, _key, bucket in rows:
                        assert type(bucket) is list
                        if packed and bucket and type(bucket[0]) is bytes:  # its packed indices
                            assert len(bucket) == 1 and any(value is bucket[0] for value in table.values())
                        else:  # (the general loop keeps lists)
                            assert all(type(index) is int for index in bucket)
                answers.append((
                    [(key, bool(bucket)) for _e, key, bucket in s_rows],
                    [(key, bool(bucket)) for _e, key, bucket in t_rows],
                    _unpacked(s_table), _unpacked(t_table), _unpacked(routes),
                    {k: row[1] for k, row in s_runtime.items()}, {k: row[1] for k, row in t_runtime.items()},
                ))
        assert all(answer == answers[0] for answer in answers), answers
        return answers[0]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(sorted(_PLANS)),
    choices=st.lists(st.integers(0, len(_MUTATIONS) - 1), min_size=0, max_size=2),
    data=st.data(),
)
def test_packed_indices_are_the_lists(name: str, choices: list[int], data: Any) -> None:
    mutated = _mutated(name, choices, data)
    if mutated is None:  # a mutation that does not apply to the plan it was given
        return
    plan = mutated
    _views_both(plan)


def test_packed_indices_genuine_and_general_loop() -> None:
    for name in sorted(_PLANS):
        answer = _views_both(_PLANS[name])
        assert answer is None or isinstance(answer, tuple)
    assert isinstance(_views_both(_PLANS["split"]), tuple)
    plan = _PLANS["split"]
    with bc._ViewScope():
        frags, source_of, target_of, _boxes = _scan(plan.operations)
        _keys, halves, runtime_ids, _attested = _native_fragments(frags, _identity(plan))
        views = _native.revalidate_views(plan.source_executors, plan.target_executors, runtime_ids, halves,
                                         source_of, target_of, ParallelRank, ExecutorTransferPlan, [], True)
    assert all(type(v) is bytes for k in (2, 5, 6) for v in views[k].values() if v)  # the packed form taken
    # the general loop (halves that are not plain) keeps lists whatever packed_indices says
    assert isinstance(_views_both(_PLANS["split"], lambda halves: [(h[0], (h[1],)) for h in halves]), tuple)
    with pytest.raises(TypeError):
        plan = _PLANS["split"]
        frags, source_of, target_of, _boxes = _scan(plan.operations)
        _native.revalidate_views(plan.source_executors, plan.target_executors, [], [], source_of, target_of,
                                 ParallelRank, None, [], False, True, None)  # (one argument too many)


@pytest.mark.parametrize("name", ["split", "plain", "shared", "tied"])
def test_packed_tables_build_the_rules_views(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every plan size takes the packed tables (threshold lowered): the plan's operation views
    and routes are the ones the rule-by-rule path derives."""
    monkeypatch.setattr(bc, "_COMPACT_MIN", 0)
    plan = pickle.loads(pickle.dumps(_PLANS[name]))
    packed_views = plan._operation_views
    assert packed_views is not None and packed_views._pending is not None
    assert all(type(v).__name__ == "array" for table in packed_views._pending for v in table.values())
    monkeypatch.setattr(bc, "_fast_revalidate_live", lambda *args: False)
    ruled = pickle.loads(pickle.dumps(_PLANS[name]))
    assert plan.pipeline_routes == ruled.pipeline_routes
    for side in ("source", "target"):
        for mine, theirs in zip(getattr(plan, side + "_executors"), getattr(ruled, side + "_executors")):
            assert plan.operation_indices_for_executor(mine, side) == ruled.operation_indices_for_executor(theirs, side)


def test_small_plans_keep_their_position_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []
    scan_carried = _native.revalidate_scan_carried

    def spy(operations: Any, carried: Any, *rest: Any) -> Any:
        seen.append(carried)
        return scan_carried(operations, carried, *rest)

    monkeypatch.setattr(bc._native, "revalidate_scan_carried", spy)
    from test_native_revalidate import _bound_plan

    plan = _bound_plan(target_tp=4, shape=(4, 8))
    assert len(plan.operations) <= bc._COMPACT_MIN
    assert seen and seen[0][2] and seen[0][3] and seen[0][4] == []  # positions kept, boxes emptied
    small = _fresh_carried()[1]
    assert bc._compact_carried(small) is small and small[2] and small[4]  # (kept as they are: small)

"""``_native.revalidate_views``: the address-indexed pass (``rw_fast``) against the Python
reference of ``test_native_revalidate`` (``runtime.setdefault`` / ``runtime.get`` / routes).

The fast pass decides only when every operation's runtime fragment id object is one an
executor listed in an exact tuple, and every route half is an exact 2-tuple of exact int / str
/ None; everything else must give the original loop's result. Each case builds inputs that
take one of the two ways (equal but not identical ids, str subclasses, ids listed twice,
fragment id lists, odd halves, changing halves) and compares the whole result."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank
from mooncake.reshard.weight._planner.bound_contracts import ExecutorTransferPlan

from test_native_revalidate import _PLANS, _forge, _identity, _native_fragments, _scan


class _Str(str):
    pass


def _inputs(name: str) -> tuple[Any, ...]:
    plan = _PLANS[name]
    frags, source_of, target_of, _boxes = _scan(plan.operations)
    _keys, halves, runtime_ids, _attested = _native_fragments(frags, _identity(plan))
    return plan.source_executors, plan.target_executors, list(runtime_ids), list(halves), source_of, target_of


_EXECUTOR_STRS = ("instance_id", "placement_id", "participant_id", "placement_digest", "runtime_lease_id", "worker_id")


def _reference(sources: Any, targets: Any, runtime_ids: Any, halves: Any, source_of: Any, target_of: Any) -> Any:
    """The result revalidate_views must return (None: it declines)."""
    sides = []
    for executors in (sources, targets):
        runtime: dict[Any, Any] = {}
        table: dict[Any, Any] = {}
        rows: list[Any] = []
        for count, executor in enumerate(executors, 1):
            if type(executor) is not ExecutorTransferPlan:
                return None
            estate = executor.__dict__
            rank = estate["rank"]
            if type(rank) is not ParallelRank:
                return None
            r = rank.__dict__
            # every field exactly typed (what _require_typed_executor checks), else unsure
            if any(type(estate[name]) is not str for name in _EXECUTOR_STRS):
                return None
            if any(type(r[name]) is not int for name in ("dp", "tp", "pp", "ep")):
                return None
            ids = estate["fragment_ids"]
            if type(ids) is not tuple or any(type(item) is not str for item in ids):
                return None
            key = (estate["instance_id"], estate["placement_id"], estate["participant_id"], estate["placement_digest"],
                   estate["runtime_lease_id"], estate["worker_id"], (r["dp"], r["tp"], r["pp"], r["ep"]))
            row = (estate, key, [])
            table[key + (estate["fragment_ids"],)] = row[2]
            if len(table) != count:
                return None
            for fragment_id in estate["fragment_ids"]:
                runtime.setdefault(fragment_id, row)
            rows.append(row)
        sides.append((runtime, rows, table))
    if len(halves) != len(runtime_ids) or len(target_of) != len(source_of):
        return None
    routes: dict[Any, list[int]] = {}
    for index, (s, t) in enumerate(zip(source_of, target_of)):
        if not (0 <= s < len(runtime_ids) and 0 <= t < len(runtime_ids)):
            return None
        if any(type(h) is not tuple or len(h) != 2 for h in (halves[s], halves[t])):
            return None
        for (runtime, _rows, _table), position in zip(sides, (s, t)):
            row = runtime.get(runtime_ids[position])
            if row is not None:
                row[2].append(index)
        routes.setdefault(halves[s] + halves[t], []).append(index)
    (s_runtime, s_rows, s_table), (t_runtime, t_rows, t_table) = sides
    return s_runtime, s_rows, s_table, t_runtime, t_rows, t_table, routes


def _plain(value: Any) -> Any:
    """Rows by the identity of their state dict; buckets and keys by value."""
    if isinstance(value, dict):
        return [(k, type(k), _plain(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple) and len(value) == 3 and isinstance(value[0], dict):
        return (id(value[0]), value[1], value[2])
    return value


def _agree(*args: Any) -> Any:
    native = _native.revalidate_views(*args, ParallelRank, ExecutorTransferPlan)
    reference = _reference(*args)
    if native is None:
        assert reference is None
    else:
        assert reference is not None
        assert _plain(list(native)) == _plain(list(reference))
        # Runtime rows are the very rows of the result's row lists, buckets the table's.
        for runtime, rows in ((native[0], native[1]), (native[3], native[4])):
            ids = {id(row) for row in rows}
            assert all(id(row) in ids for row in runtime.values())
    return native


def _copy(text: str) -> str:
    return "".join(list(text))  # equal, not identical


@pytest.mark.parametrize("name", sorted(_PLANS))
def test_genuine_inputs(name: str) -> None:
    assert _agree(*_inputs(name)) is not None


@pytest.mark.parametrize("name", sorted(_PLANS))
def test_equal_not_identical_runtime_ids(name: str) -> None:
    sources, targets, ids, halves, source_of, target_of = _inputs(name)
    for position in (0, len(ids) - 1, target_of[0], source_of[-1]):
        changed = list(ids)
        changed[position] = _copy(ids[position])
        assert changed[position] is not ids[position]
        assert _agree(sources, targets, changed, halves, source_of, target_of) is not None
        changed[position] = _Str(ids[position])  # a subclass: equal, hashed as a str
        assert _agree(sources, targets, changed, halves, source_of, target_of) is not None
        changed[position] = "no such fragment"  # no executor lists it: nothing appended
        assert _agree(sources, targets, changed, halves, source_of, target_of) is not None


def test_ids_listed_by_two_executors_belong_to_the_first() -> None:
    sources, targets, ids, halves, source_of, target_of = _inputs("plain")
    first, second = targets[0], targets[1]
    stolen = second.fragment_ids[0]
    for value in (stolen, _copy(stolen), _Str(stolen)):
        forged = (_forge(first, fragment_ids=first.fragment_ids + (value,)),) + targets[1:]
        native = _agree(sources, forged, ids, halves, source_of, target_of)
        if type(value) is not str:  # not exactly a str (the rules reject it): declined
            assert native is None
            continue
        assert native is not None
        # The id's operations went to the first executor's bucket.
        owner = native[3][stolen]
        assert owner[0] is forged[0].__dict__
        forged = targets[:1] + (_forge(second, fragment_ids=(value,) + second.fragment_ids),) + targets[2:]
        _agree(sources, forged, ids, halves, source_of, target_of)


def test_fragment_ids_that_are_not_tuples() -> None:
    sources, targets, ids, halves, source_of, target_of = _inputs("split")
    forged = tuple(_forge(e, fragment_ids=list(e.fragment_ids)) for e in targets)
    # a list (the rules reject it): declined before it is hashed as part of a view key
    assert _native.revalidate_views(sources, forged, ids, halves, source_of, target_of, ParallelRank) is None

    class Ids(tuple):  # hashable, iterable, not an exact tuple (the rules reject it): declined
        pass

    forged = tuple(_forge(e, fragment_ids=Ids(e.fragment_ids)) for e in targets)
    assert _agree(sources, forged, ids, halves, source_of, target_of) is None
    forged = tuple(_forge(e, fragment_ids=tuple(_Str(i) for i in e.fragment_ids)) for e in targets)
    assert _agree(sources, forged, ids, halves, source_of, target_of) is None  # str subclass items
    forged = tuple(_forge(e, fragment_ids=tuple(_copy(i) for i in e.fragment_ids)) for e in targets)
    assert _agree(sources, forged, ids, halves, source_of, target_of) is not None


@pytest.mark.parametrize("name", sorted(_PLANS))
def test_route_halves(name: str) -> None:
    sources, targets, ids, halves, source_of, target_of = _inputs(name)
    n = len(halves)
    variants = [
        [(p % 3, None) for p in range(n)],  # changing plain halves: routes of several keys
        [("w", p % 2) for p in range(n)],
        [(p, _copy("x")) for p in range(n)],  # equal str objects, not identical
        [(1.0, None)] * n,  # not plain: the loop
        [(_Str("a"), None)] * n,
        [(True, None)] * n,  # bool is no exact int
        [(0, 2**90)] * n,
        [[0, None]] * n,  # not tuples: declined
        [(0,)] * n,
        [(0, None, 1)] * n,
    ]
    for variant in variants:
        _agree(sources, targets, ids, variant, source_of, target_of)
    mixed = list(halves)
    mixed[target_of[-1]] = (0.5, "x")  # the last operation only
    _agree(sources, targets, ids, mixed, source_of, target_of)
    mixed[target_of[-1]] = ["a", "b"]
    assert _agree(sources, targets, ids, mixed, source_of, target_of) is None


@pytest.mark.parametrize("name", sorted(_PLANS))
def test_positions(name: str) -> None:
    sources, targets, ids, halves, source_of, target_of = _inputs(name)
    n = len(ids)
    for bad in (n, -1, 2**70, True, 1.0, None):
        changed = list(target_of)
        changed[-1] = bad
        assert _native.revalidate_views(sources, targets, ids, halves, source_of, changed, ParallelRank) is None
    assert _agree(sources, targets, ids, halves[:-1], source_of, target_of) is None
    assert _agree(sources, targets, ids, halves, source_of, target_of[:-1]) is None
    # Every operation on one position pair (repeated positions on both sides).
    _agree(sources, targets, ids, halves, [source_of[0]] * len(source_of), [target_of[0]] * len(target_of))
    assert _agree(sources, targets, ids, halves, [], []) is not None


def test_hashes_that_run_python_code() -> None:
    """A half item whose ``__hash__`` clears the argument lists: the loop runs on private
    copies (no crash), and the result is the reference's on the lists as passed."""
    sources, targets, ids, halves, source_of, target_of = _inputs("plain")
    lists = [list(ids), list(halves), list(source_of), list(target_of)]

    armed: list[bool] = []

    class Clearing:
        def __hash__(self) -> int:
            if armed:
                for value in lists:
                    value.clear()
            return 1

    item = Clearing()
    lists[1] = [(item, None)] * len(halves)
    expected = _reference(sources, targets, list(ids), list(lists[1]), list(source_of), list(target_of))
    armed.append(True)
    native = _native.revalidate_views(sources, targets, *lists, ParallelRank, ExecutorTransferPlan)
    assert native is not None and expected is not None
    assert _plain(list(native)) == _plain(list(expected))
    assert sys.getrefcount(item) >= 2


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(_PLANS)), data=st.data())
def test_against_the_reference(name: str, data: Any) -> None:
    sources, targets, ids, halves, source_of, target_of = _inputs(name)
    n = len(ids)
    ids = [
        data.draw(st.sampled_from([i, _copy(i), _Str(i), "other", 7])) if data.draw(st.booleans()) else i
        for i in ids
    ]
    halves = [data.draw(st.sampled_from([h, (0, None), ("a", 1), (0.5, None), (0, None, 0)])) for h in halves]
    k = data.draw(st.integers(0, len(source_of)))
    source_of = [data.draw(st.integers(0, n - 1)) for _ in range(k)]
    target_of = [data.draw(st.integers(0, n - 1)) for _ in range(k)]
    all_ids = [i for e in sources + targets for i in e.fragment_ids]
    pick = data.draw(st.sampled_from(["none", "dup", "copy"]))
    if pick != "none" and all_ids:
        side = list(targets)
        extra = data.draw(st.sampled_from(all_ids))
        side[0] = _forge(side[0], fragment_ids=side[0].fragment_ids + ((extra if pick == "dup" else _copy(extra)),))
        targets = tuple(side)
    _agree(sources, targets, ids, halves, source_of, target_of)


# ``row_of``: the per-position rows revalidate_views hands to revalidate_side (from 4096
# fragment positions on: the inputs are padded with positions no operation uses).

ROW_OF_MIN = 4096


def _padded(name: str) -> tuple[Any, ...]:
    sources, targets, ids, halves, source_of, target_of = _inputs(name)
    extra = max(ROW_OF_MIN - len(ids), 0)
    return (sources, targets, ids + [f"pad-{k}" for k in range(extra)], halves + [(0, None)] * extra, source_of,
            target_of)


def _row_of(*args: Any) -> tuple[Any, list[Any]]:
    out: list[Any] = []
    native = _native.revalidate_views(*args, ParallelRank, ExecutorTransferPlan, out)
    return native, out


@pytest.mark.parametrize("name", sorted(_PLANS))
def test_row_of_is_the_runtime_lookup(name: str) -> None:
    sources, targets, ids, halves, source_of, target_of = _padded(name)
    native, out = _row_of(sources, targets, ids, halves, source_of, target_of)
    assert native is not None and len(out) == 2
    for (runtime, side_of), rows in zip(((native[0], source_of), (native[3], target_of)), out):
        assert len(rows) == len(ids)
        used = set(side_of)
        for position, row in enumerate(rows):
            if position in used:
                assert row is runtime.get(ids[position]) and row is not None
            else:
                assert row is None


@pytest.mark.parametrize("name", sorted(_PLANS))
def test_row_of_only_when_assigned_by_address(name: str) -> None:
    native, out = _row_of(*_inputs(name))  # small: the lookups are cheaper than the lists
    assert native is not None and out == []
    sources, targets, ids, halves, source_of, target_of = _padded(name)
    native, out = _row_of(sources, targets, ids[:ROW_OF_MIN - 1], halves[:ROW_OF_MIN - 1], source_of, target_of)
    assert native is not None and out == []
    changed = list(ids)
    changed[target_of[0]] = _copy(ids[target_of[0]])
    native, out = _row_of(sources, targets, changed, halves, source_of, target_of)
    assert native is not None and out == []
    native, out = _row_of(sources, targets, ids, [(0.5, None)] * len(halves), source_of, target_of)
    assert native is not None and out == []
    native, out = _row_of(sources, targets, ids, halves[:-1], source_of, target_of)
    assert native is None and out == []
    with pytest.raises(TypeError):
        _native.revalidate_views(sources, targets, ids, halves, source_of, target_of, ParallelRank, None, ())


@pytest.mark.parametrize("name", sorted(_PLANS))
def test_revalidate_side_with_row_of(name: str) -> None:
    from mooncake.reshard.weight._planner import bound_contracts as bc
    from mooncake.reshard.weight._planner.bound_contracts import RuntimeBindingAttestation
    from mooncake.reshard.weight.types import PlacementFragment

    plan = _PLANS[name]
    with bc._ViewScope():
        frags, source_of, target_of, _boxes = _scan(plan.operations)
        keys, halves, runtime_ids, attested = _native_fragments(frags, _identity(plan))
        extra = max(ROW_OF_MIN - len(frags), 0)  # positions no operation uses
        frags, keys = frags + [None] * extra, keys + [None] * extra
        runtime_ids, halves = runtime_ids + [f"pad-{k}" for k in range(extra)], halves + [(0, None)] * extra
        views, out = _row_of(plan.source_executors, plan.target_executors, runtime_ids, halves, source_of,
                             target_of)
        assert views is not None and len(out) == 2

        def side(which: int, row_of: Any) -> tuple[Any, set[int]]:
            used: set[int] = set()
            side_of, runtime, rows = ((source_of, views[0], views[1]), (target_of, views[3], views[4]))[which]
            result = _native.revalidate_side(
                frags, keys, runtime_ids, side_of, runtime, rows, attested, used, RuntimeBindingAttestation,
                ParallelRank, bc.RuntimeFragmentSnapshot, PlacementFragment, row_of,
            )
            return result, used

        for which in (0, 1):
            plain = side(which, None)
            assert side(which, out[which]) == plain
            assert side(which, out[which][:-1]) == plain  # not this side's: looked up
            side_of = (source_of, target_of)[which]
            forged = list(out[which])
            forged[side_of[0]] = None
            assert side(which, forged)[0] is None
            other = [row for row in (views[1], views[4])[which] if row is not out[which][side_of[0]]]
            if other:
                forged[side_of[0]] = other[0]
                assert side(which, forged)[0] is None


# revalidate_side's ``snapshot_owner`` by address: a runtime id object that is one of the
# snapshot fragment ids (exact str) finds its snapshot without a lookup; anything else is
# looked up. Forged snapshot ids must give the Python version's verdict.


def _side_verdicts(plan: Any, which: int, executors: Any) -> tuple[Any, Any]:
    from mooncake.reshard.weight._planner import bound_contracts as bc
    from mooncake.reshard.weight._planner.bound_contracts import RuntimeBindingAttestation
    from mooncake.reshard.weight.types import PlacementFragment

    from test_native_revalidate import _side_tables

    with bc._ViewScope():
        frags, source_of, target_of, _boxes = _scan(plan.operations)
        keys, _halves, runtime_ids, attested = _native_fragments(frags, _identity(plan))
        side_of = (source_of, target_of)[which]
        runtime, rows = _side_tables(executors, side_of, runtime_ids)
        native_used: set[int] = set()
        native = _native.revalidate_side(
            frags, keys, runtime_ids, side_of, runtime, rows, attested, native_used, RuntimeBindingAttestation,
            ParallelRank, bc.RuntimeFragmentSnapshot, PlacementFragment,
        )
        python_used: set[int] = set()
        python = bc._fast_side_consistent(frags, keys, runtime_ids, side_of, runtime, rows, attested, python_used)
        if native is not None:
            assert python is native and python_used == native_used
    return native, python


@pytest.mark.parametrize("name", sorted(_PLANS))
@pytest.mark.parametrize("which", [0, 1])
def test_snapshot_ids_by_address(name: str, which: int) -> None:
    plan = _PLANS[name]
    executors = (plan.source_executors, plan.target_executors)[which]
    assert _side_verdicts(plan, which, executors)[0] is True
    first = executors[0]
    snapshots = first.fragment_snapshots
    if not snapshots:
        return
    snapshot = snapshots[0]
    fid = snapshot.fragment_id
    for value in (_copy(fid), _Str(fid), "no such fragment", 7):
        forged = _forge(snapshot, fragment_id=value)
        forged_executor = _forge(first, fragment_snapshots=(forged,) + snapshots[1:])
        native, python = _side_verdicts(plan, which, (forged_executor,) + executors[1:])
        if value == fid and type(value) is str:
            assert native is True  # an equal id: looked up, same verdict
    # A snapshot listed twice (its id twice): declined.
    twice = _forge(first, fragment_snapshots=snapshots + snapshots[:1])
    assert _side_verdicts(plan, which, (twice,) + executors[1:])[0] is None
    if len(executors) > 1:
        other = executors[1]
        stolen = _forge(other, fragment_snapshots=other.fragment_snapshots + snapshots[:1])
        assert _side_verdicts(plan, which, (first, stolen) + executors[2:])[0] is None

"""Memory of a restored TransferPlan (round 12, RESTORE).

``_native.graph_unpack`` decodes every int of the stream once per value: all occurrences of
one value are one int object (a live plan shares the int objects read from one field and stored
in several objects; decoding each occurrence into its own object cost a 74k-operation restore
1.06M int objects for 157k values). Ints are immutable and compared by value, so the restored
graph is equal to the one decoded without sharing (the pure-Python oracle of
``test_pickle_codec``), and hostile streams are rejected as before."""

from __future__ import annotations

import gc
import pickle
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_executor import HostWorld, tp_placement
from test_pickle_codec import _py_unpack
from spec_helpers import field_state

from mooncake.reshard import _native

_pack = _native.graph_pack
_unpack = _native.graph_unpack


@dataclass(frozen=True)
class Pair:
    a: Any
    b: Any = None


_REGISTRY = ((Pair, ("a", "b"), 0),)


def _ints(value: Any, out: list[Any]) -> list[Any]:
    """Every int object of a graph of tuples and Pair (with repeats)."""
    if type(value) is int:
        out.append(value)
    elif type(value) is tuple:
        for item in value:
            _ints(item, out)
    elif type(value) is Pair:
        _ints(value.a, out)
        _ints(value.b, out)
    return out


def _assert_one_object_per_value(ints: list[Any]) -> None:
    by_value: dict[int, Any] = {}
    for number in ints:
        first = by_value.setdefault(number, number)
        assert first is number, number


_INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(_INT64, st.integers(-10, 300)), max_size=60), st.randoms(use_true_random=False))
def test_equal_ints_decode_to_one_object(values: list[int], rng: Any) -> None:
    # Every value twice, each occurrence a distinct int object when possible (int(str(x))).
    items = [int(str(v)) for v in values] + [int(str(v)) for v in values]
    rng.shuffle(items)
    graph = (tuple(items), Pair(tuple(items[:5]), items[-1] if items else None))
    codes, leaves = _pack(graph, _REGISTRY)
    restored = _unpack(codes, leaves, _REGISTRY)
    assert restored == graph
    assert restored == _py_unpack(codes, leaves, _REGISTRY)
    _assert_one_object_per_value(_ints(restored, []))


def test_many_distinct_ints_grow_the_cache_and_stay_exact() -> None:
    # Beyond several table sizes, with values whose low bits collide (multiples of 2**20),
    # negatives and the int64 extremes; every value twice, beyond-int64 ints as leaves.
    values = [i << 20 for i in range(6000)] + [-(i * 7919) - 300 for i in range(3000)]
    values += [2**63 - 1, -(2**63), 2**63, -(2**63) - 1, 257, -6, 256, -5]
    graph = tuple(int(str(v)) for v in values) + tuple(int(str(v)) for v in reversed(values))
    codes, leaves = _pack(graph, _REGISTRY)
    assert leaves == (2**63, -(2**63) - 1, -(2**63) - 1, 2**63)  # beyond int64: pickle writes them
    restored = _unpack(codes, leaves, _REGISTRY)
    assert restored == graph and [type(v) for v in restored] == [int] * len(graph)
    assert restored == _py_unpack(codes, leaves, _REGISTRY)
    n = len(values)
    for k in range(n):
        if -(2**63) <= values[k] < 2**63:
            assert restored[k] is restored[2 * n - 1 - k], values[k]


def test_decoded_ints_are_released_with_the_graph() -> None:
    import sys

    big = 10**15 + 12345
    graph = tuple(Pair(int(str(big)), i) for i in range(50))
    codes, leaves = _pack(graph, _REGISTRY)
    restored = _unpack(codes, leaves, _REGISTRY)
    shared = restored[0].a
    assert all(pair.a is shared for pair in restored)
    # The graph's 50 references, ``shared`` and getrefcount's argument: the decoder kept none.
    assert sys.getrefcount(shared) == 52
    del restored
    assert sys.getrefcount(shared) == 2


def test_malformed_ints_after_cached_ones_still_return_none() -> None:
    codes, leaves = _pack((10**9, 10**9, 10**10), _REGISTRY)
    assert _unpack(codes, leaves, _REGISTRY) == (10**9, 10**9, 10**10)
    assert _unpack(codes[:-1], leaves, _REGISTRY) is None  # the last varint cut short
    assert _unpack(codes + b"\x04", leaves, _REGISTRY) is None


def test_restored_plan_shares_equal_ints_and_equals_the_original() -> None:
    source = tp_placement(32, prefix="s", shape=(64, 64), dim=0)
    world = HostWorld(source, tp_placement(32, prefix="t", shape=(64, 64), dim=1))
    plan = world.bind()
    restored = pickle.loads(pickle.dumps(plan, protocol=pickle.HIGHEST_PROTOCOL))
    assert restored == plan and len(restored.operations) == 1024
    ints: list[Any] = []
    for operation in restored.operations:
        state = field_state(operation)
        for name in ("overlap_offset", "overlap_shape", "outer_loop_counts", "source_strides", "target_strides"):
            ints.extend(state[name])
        ints += [state["source_base_offset"], state["target_base_offset"], state["inner_bytes"]]
        for side in (operation.source, operation.target):
            binding = field_state(side.binding)
            ints += [binding["address"], binding["nbytes"], binding["itemsize"]]
            ints.extend(binding["local_shape"])
            ints.extend(binding["strides_bytes"])
    _assert_one_object_per_value(ints)
    gc.collect()


# ---------------------------------------------------------------------------------------
# The packed restore drops the record's tables before the revalidation


def _small_plan() -> Any:
    world = HostWorld(tp_placement(4, prefix="s", shape=(8, 8), dim=0), tp_placement(4, prefix="t", shape=(8, 8), dim=1))
    return world.bind(), world.memory


def test_packed_restore_frees_the_record_tables_before_revalidating(monkeypatch: Any) -> None:
    import sys

    from mooncake.reshard.weight._planner import bound_pickle
    from mooncake.reshard.weight._planner.bound_contracts import TransferPlan

    plan, _memory = _small_plan()
    blob = pickle.dumps(plan, protocol=pickle.HIGHEST_PROTOCOL)
    tables: list[Any] = []
    counts: list[int] = []
    restore_bound = bound_pickle._restore_bound_fast
    # The regions' builder (``_native_restore_regions`` or, once the restore carries the scan's
    # facts, ``_native_restore_regions_carried``): its first argument is the operation table.
    regions_name = next(
        name for name in ("_native_restore_regions_carried", "_native_restore_regions") if hasattr(bound_pickle, name)
    )
    restore_regions = getattr(bound_pickle, regions_name)
    restore_executors = bound_pickle._restore_executors
    revalidate = TransferPlan._revalidate_scoped

    def bound_spy(rows: Any, table: Any) -> Any:
        tables.append(table)
        return restore_bound(rows, table)

    def regions_spy(table: Any, *rest: Any) -> Any:
        tables.append(table)
        return restore_regions(table, *rest)

    def executors_spy(table: Any, attestations: Any) -> Any:
        tables.append(table)
        return restore_executors(table, attestations)

    def revalidate_spy(self: Any, *args: Any) -> None:
        # ``tables`` and getrefcount's argument only: the restore holds none of them.
        counts.extend(sys.getrefcount(tables[k]) for k in range(len(tables)))
        revalidate(self, *args)

    monkeypatch.setattr(bound_pickle, "_restore_bound_fast", bound_spy)
    monkeypatch.setattr(bound_pickle, regions_name, regions_spy)
    monkeypatch.setattr(bound_pickle, "_restore_executors", executors_spy)
    monkeypatch.setattr(TransferPlan, "_revalidate_scoped", revalidate_spy)
    restored = pickle.loads(blob)
    assert restored == plan
    assert len(tables) == 4 and all(type(table) is tuple and len(table) > 0 for table in tables)
    assert counts == [2, 2, 2, 2]


def test_a_record_list_is_read_as_the_same_items() -> None:
    from spec_helpers import raises

    from mooncake.reshard.weight._planner import bound_pickle

    plan, _memory = _small_plan()
    function, record = bound_pickle.reduce_transfer_plan(plan)
    assert function is bound_pickle._restore_transfer_plan
    items = bound_pickle._Record(record)
    assert bound_pickle._restore_transfer_plan(items) == plan
    assert items == []  # taken out
    assert bound_pickle._restore_transfer_plan(*record) == plan
    invalid = "transfer plan pickle state is invalid"
    for bad in (record[:-1], record + (None,), (2,) + record[1:], ("1",) + record[1:]):
        with raises(invalid):
            bound_pickle._restore_transfer_plan(bound_pickle._Record(bad))
        with raises(invalid):
            bound_pickle._restore_transfer_plan(*bad)
    with raises(invalid):  # a plain list is one item, not a record
        bound_pickle._restore_transfer_plan(list(record))
    with raises(invalid):
        bound_pickle._restore_transfer_plan(bound_pickle._Record())
    # A payload naming the class restores exactly as the record it holds.
    assert pickle.loads(pickle.dumps(_Reduce(bound_pickle._Record(record)))) == plan


class _Reduce:
    def __init__(self, items: Any) -> None:
        self.items = items

    def __reduce__(self) -> Any:
        from mooncake.reshard.weight._planner import bound_pickle

        return (bound_pickle._restore_transfer_plan, (self.items,))


# ---------------------------------------------------------------------------------------
# The opcode string is a bytearray the restore empties once decoded


def test_packed_codes_are_a_bytearray_emptied_by_the_restore() -> None:
    from mooncake.reshard.weight._planner import bound_pickle

    plan, _memory = _small_plan()
    function, (codes, values) = bound_pickle.reduce_ex_transfer_plan(plan, 5)
    assert function is bound_pickle._restore_packed_transfer_plan
    assert type(codes) is bytearray and len(codes) > 0
    kept = bytes(codes)
    assert function(codes, values) == plan
    assert codes == bytearray()  # emptied: its buffer is freed before the revalidation
    # so the same reduce result restores once (docs/api.md, "Pickle, copy and replace")
    with pytest.raises(ValueError, match="^transfer plan pickle state is invalid"):
        function(codes, values)
    # Payloads written before (bytes) restore as they did; the bytes are left as they are.
    assert function(kept, values) == plan and len(kept) > 0
    # Through pickle: both forms.
    assert pickle.loads(pickle.dumps(plan, protocol=5)) == plan
    assert pickle.loads(pickle.dumps(_Reduce2(bound_pickle._restore_packed_transfer_plan, (kept, values)))) == plan


def test_hostile_bytearray_codes_raise_the_record_message() -> None:
    from spec_helpers import raises

    from mooncake.reshard.weight._planner import bound_pickle

    plan, _memory = _small_plan()
    function, (codes, values) = bound_pickle.reduce_ex_transfer_plan(plan, 5)
    invalid = "transfer plan pickle state is invalid"
    for bad in (codes[:-1], codes + b"\x06", bytearray(), bytearray(b"\x00")):
        with raises(invalid):
            function(bytearray(bad), values)
    subclass = type("Codes", (bytearray,), {})(codes)
    with raises(invalid):  # only an exact bytearray is copied; anything else goes to the decoder as is
        function(subclass, values)
    assert len(subclass) == len(codes)
    # The same bytearray twice (a payload referring to it twice): the second call finds it empty.
    again = bytearray(codes)
    assert function(again, values) == plan
    with raises(invalid):
        function(again, values)


def test_opcode_copy_is_freed_before_revalidating(monkeypatch: Any) -> None:
    import sys

    from mooncake.reshard.weight._planner import bound_pickle
    from mooncake.reshard.weight._planner.bound_contracts import TransferPlan

    plan, _memory = _small_plan()
    blob = pickle.dumps(plan, protocol=pickle.HIGHEST_PROTOCOL)
    seen: list[Any] = []
    counts: list[int] = []
    unpack = bound_pickle._graph_unpack
    revalidate = TransferPlan._revalidate_scoped

    def unpack_spy(data: Any, *rest: Any) -> Any:
        seen.append(data)
        return unpack(data, *rest)

    def revalidate_spy(self: Any, *args: Any) -> None:
        counts.append(sys.getrefcount(seen[0]))
        revalidate(self, *args)

    monkeypatch.setattr(bound_pickle, "_graph_unpack", unpack_spy)
    monkeypatch.setattr(TransferPlan, "_revalidate_scoped", revalidate_spy)
    assert pickle.loads(blob) == plan
    assert type(seen[0]) is bytes and counts == [2]


class _Reduce2:
    def __init__(self, function: Any, args: Any) -> None:
        self.function = function
        self.args = args

    def __reduce__(self) -> Any:
        return (self.function, self.args)

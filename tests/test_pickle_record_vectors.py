"""The tables of ``_native.encode_record`` and the leaves of ``_native.graph_pack`` are collected in C
arrays of owned references handed over to the result tuples (csrc/pickle_codec.c ``pc_vec``):
tables long enough to grow the arrays many times equal the Python reference item by item, no
reference is leaked or dropped by a finished, declined or repeated call, and the restored plan is
the same."""

from __future__ import annotations

import gc
import pickle
import sys
from typing import Any

import pytest

from test_binding_attacks import World
from test_pickle_encode_record import _native_tables, _python_tables, _same

from mooncake.reshard import _native
from mooncake.reshard.weight._planner import bound_pickle


@pytest.fixture(scope="module")
def plan() -> Any:
    return World().bind()


def _long_args(plan: Any, times: int) -> tuple[Any, Any, Any]:
    # Repeated operations and executors: rows for every occurrence, fragments and attestations once.
    return (plan.operations * times, plan.source_executors * times, plan.target_executors * times)


@pytest.mark.parametrize("times", [1, 7, 64, 301])
def test_long_tables_match_the_python_encoder(plan: Any, times: int) -> None:
    args = _long_args(plan, times)
    native = _native_tables(*args)
    assert native is not None
    assert len(native[2]) == len(plan.operations) * times * len(bound_pickle._REGION_FIELDS)
    assert _same(native, _python_tables(*args))


def _counts(objects: list[Any]) -> list[int]:
    return [sys.getrefcount(obj) for obj in objects]


def _watched(plan: Any) -> list[Any]:
    operation = plan.operations[0]
    executor = plan.target_executors[0]
    snapshot = executor.fragment_snapshots[0]
    return [
        operation,
        operation.source,
        operation.target,
        operation.overlap_shape,
        operation.target.attestation,
        operation.target.attestation.placement,
        operation.target.attestation.evidence,
        executor,
        snapshot,
        snapshot.worker_id,
    ]


def test_no_reference_leaked_or_dropped(plan: Any) -> None:
    watched = _watched(plan)
    args = _long_args(plan, 40)
    declined = (plan.operations + ("not a region",), plan.source_executors, plan.target_executors)
    late = (plan.operations, plan.source_executors, plan.target_executors + (7,))
    for _ in range(3):  # warm caches of the classes (interned names, small ints)
        _native_tables(*args)
        _native_tables(*declined)
        _native_tables(*late)
    gc.collect()
    before = _counts(watched)
    for _ in range(25):
        tables = _native_tables(*args)
        assert tables is not None
        del tables
        assert _native_tables(*declined) is None
        assert _native_tables(*late) is None
    gc.collect()
    assert _counts(watched) == before


def test_graph_pack_leaves_keep_their_references(plan: Any) -> None:
    record = bound_pickle._compact_record(plan)
    assert record is not None
    placement = record[4]
    leaf = placement.placement_id  # a str leaf written into values once
    packed = _native.graph_pack(record, bound_pickle._GRAPH_REGISTRY)
    assert packed is not None and any(value is leaf for value in packed[1])
    del packed
    gc.collect()
    before = sys.getrefcount(leaf)
    for _ in range(25):
        packed = _native.graph_pack(record, bound_pickle._GRAPH_REGISTRY)
        assert packed is not None
        codes, values = packed
        assert type(values) is tuple and all(value is not None for value in values)
        del packed, codes, values
    gc.collect()
    assert sys.getrefcount(leaf) == before
    restored = pickle.loads(pickle.dumps(plan, protocol=5))
    assert restored == plan


def test_executor_attestation_positions_replace_their_placeholder(plan: Any) -> None:
    # The attestation index of an executor row is written after its snapshots (the None pushed
    # at its place is replaced): None stays None, an attestation gives its table position.
    args = (plan.operations, plan.source_executors, plan.target_executors)
    native = _native_tables(*args)
    assert native is not None and _same(native, _python_tables(*args))
    width = len(bound_pickle._EXECUTOR_FIELDS)
    snapshot_width = len(bound_pickle._SNAPSHOT_FIELDS)
    for rows in (native[3], native[4]):
        position = 0
        while position < len(rows):
            index, count = rows[position + 8], rows[position + 9]
            assert type(index) is int and 0 <= index < len(native[0]) // 2
            position += width + count * snapshot_width
        assert position == len(rows)

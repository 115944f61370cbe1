"""Trusted construction of planner results in C (csrc/planobj.c ``build_regions``): regions equal
the Python trusted path field for field, and malformed records fail closed."""

from __future__ import annotations

import dataclasses
import gc
import sys
import types
from array import array
from typing import Any

import pytest

import known_answers
from planner_helpers import tp_placement
from spec_helpers import field_state, raises

from mooncake.reshard import _native
from mooncake.reshard.weight._planner.contracts import TransferRegion, _trusted_region
from mooncake.reshard.weight.planner import plan_placement_transfer
from layout_model import TensorSpec


def _plan() -> Any:
    spec = TensorSpec("w", (8, 6))
    source = tp_placement("src", spec, 2, 0)
    target = tp_placement("dst", spec, 3, 1)
    return plan_placement_transfer(source, target)


def _records(plan: Any) -> tuple[list[Any], list[Any], list[Any]]:
    sources: list[Any] = []
    targets: list[Any] = []
    records: list[Any] = []
    for op in plan.operations:
        sources.append(op.source)
        targets.append(op.target)
        index = len(sources) - 1
        records.append(
            (
                index, index, op.overlap_offset, op.overlap_shape, op.source_base_offset,
                op.target_base_offset, op.inner_bytes, op.outer_loop_counts, op.source_strides,
                op.target_strides, 1,
            )
        )
    return records, sources, targets


def test_build_regions_equals_trusted_python_path() -> None:
    plan = _plan()
    records, sources, targets = _records(plan)
    built = _native.build_regions(TransferRegion, records, sources, targets)
    assert isinstance(built, tuple) and len(built) == len(plan.operations) > 1
    for region, record in zip(built, records):
        expected = _trusted_region(targets[record[1]].tensor_id, sources[record[0]], targets[record[1]], *record[2:10])
        assert type(region) is TransferRegion
        assert region == expected and field_state(region) == field_state(expected)
        assert list(field_state(region)) == [f for f in TransferRegion.__dataclass_fields__]
        assert gc.is_tracked(region)
    assert built == plan.operations
    with pytest.raises(Exception):
        built[0].inner_bytes = 1  # still frozen


def test_build_regions_rejects_malformed_input() -> None:
    plan = _plan()
    records, sources, targets = _records(plan)
    good = records[0]
    for bad, message in [
        ((-1,) + good[1:], "region record index out of range"),
        ((len(sources),) + good[1:], "region record index out of range"),
        (good[:1] + (1 << 70,) + good[2:], "region record index out of range"),
        (good[:1] + ("0",) + good[2:], "region record index must be an int"),
        (good[:10], "region record must be a tuple of 11 items"),
        (list(good), "region record must be a tuple of 11 items"),
    ]:
        with raises(message):
            _native.build_regions(TransferRegion, [good, bad], sources, targets)
    with pytest.raises(TypeError):
        _native.build_regions(int, records, sources, targets)
    with pytest.raises(TypeError):
        _native.build_regions(TransferRegion, tuple(records), sources, targets)
    with pytest.raises(TypeError):
        _native.build_regions(TransferRegion, records, tuple(sources), targets)
    with pytest.raises(AttributeError):
        _native.build_regions(TransferRegion, [good], sources, [object()] * len(targets))
    assert _native.build_regions(TransferRegion, [], [], []) == ()


def test_build_regions_no_reference_leaks() -> None:
    plan = _plan()
    records, sources, targets = _records(plan)
    before = [sys.getrefcount(x) for x in sources[:1] + targets[:1] + [records[0][2]]]
    for _ in range(200):
        _native.build_regions(TransferRegion, records, sources, targets)
        with pytest.raises(ValueError):
            _native.build_regions(TransferRegion, records + [(99,) + records[0][1:]], sources, targets)
    after = [sys.getrefcount(x) for x in sources[:1] + targets[:1] + [records[0][2]]]
    assert before == after


# --- pack_targets: the planner's one-pass target packing ------------------------------------


def _i64(values: list[int]) -> bytes:
    return array("q", values).tobytes()


def _unpack(packed: Any) -> tuple[list[int], ...]:
    return tuple(list(array("q", part)) for part in packed[:4]) + (list(array("Q", packed[4])), packed[5])


def test_pack_targets_covers_by_first_appearance_and_replica_slot() -> None:
    plan = _plan()
    targets = sorted({op.target.placement_fragment_id: op.target for op in plan.operations}.values(),
                     key=lambda f: f.placement_fragment_id)
    tensor, cover, offsets, shapes, nbytes, keys = _unpack(
        _native.pack_targets(targets, {"w": 0}, _i64([2]), _i64([0]), 3)
    )
    assert tensor == [0] * len(targets)
    # dp 0 of every target: replica slot 0 % 3 = 0, one cover with key 0 * 4 + 0
    assert cover == [0] * len(targets) and keys == [0]
    assert offsets == [c for f in targets for c in f.global_offset]
    assert shapes == [c for f in targets for c in f.local_shape]
    assert nbytes == [f.nbytes for f in targets]
    routed = _unpack(_native.pack_targets(targets, {"w": 0}, _i64([2]), _i64([1]), 3))
    assert routed[1] == [0] * len(targets) and routed[5] == [3]
    two = _unpack(_native.pack_targets(targets, {"v": 0, "w": 1}, _i64([2, 2]), _i64([0, 1]), 0))
    assert two[0] == [1] * len(targets) and two[5] == [1]


def test_pack_targets_falls_back_or_rejects() -> None:
    plan = _plan()
    targets = [op.target for op in plan.operations][:2]
    args = ({"w": 0}, _i64([2]), _i64([0]), 1)
    assert _native.pack_targets(targets, {"x": 0}, *args[1:]) is None  # unknown tensor
    assert _native.pack_targets(targets, {"w": 0}, _i64([3]), _i64([0]), 1) is None  # rank mismatch
    assert _native.pack_targets(targets, {"w": 0}, _i64([2]), _i64([0]), 0) is None  # no replica
    assert dataclasses.is_dataclass(targets[0])  # frozen: out-of-range values need a stand-in
    stand_in = types.SimpleNamespace(**{k: getattr(targets[0], k) for k in ("tensor_id", "rank", "local_shape", "nbytes")})
    stand_in.global_offset = (1 << 63, 0)
    assert _native.pack_targets([stand_in], *args) is None  # beyond int64: the exact path reports
    stand_in.global_offset = (0, "0")
    assert _native.pack_targets([stand_in], *args) is None
    stand_in.global_offset = (0, 0)
    stand_in.nbytes = 1 << 64
    assert _unpack(_native.pack_targets([stand_in], *args))[4] == [0]
    stand_in.nbytes = -1
    assert _unpack(_native.pack_targets([stand_in], *args))[4] == [0]
    assert _native.pack_targets([], *args) == (b"", b"", b"", b"", b"", [])
    # a tuple (the placement's own fragments, as the planner passes them) packs as the list does
    assert _native.pack_targets(tuple(targets), *args) == _native.pack_targets(targets, *args)
    with pytest.raises(TypeError):
        _native.pack_targets(iter(targets), *args)

    class Tuple(tuple):  # type: ignore[type-arg]
        pass

    with pytest.raises(TypeError):
        _native.pack_targets(Tuple(targets), *args)
    with pytest.raises(ValueError):
        _native.pack_targets(targets, {"w": 0}, _i64([2]), _i64([0, 0]), 1)
    with pytest.raises(ValueError):
        _native.pack_targets(targets, {"w": 0}, _i64([2]), _i64([0]), -1)
    with pytest.raises(AttributeError):
        _native.pack_targets([object()], *args)


def test_planner_plans_equal_through_the_exact_packing(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = TensorSpec("w", (8, 6))
    cases = [
        (tp_placement("s1", spec, 2, 0, dp=2), tp_placement("t1", spec, 3, 1, dp=3)),
        (tp_placement("s2", spec, 1, 0), tp_placement("t2", spec, 4, 0, dp=2)),
    ]
    for name in known_answers.placement_case_names():
        cases.append((known_answers.source_placement(name), known_answers.target_placement(name)))
    fast = [plan_placement_transfer(s, t) for s, t in cases]
    monkeypatch.setattr(_native, "pack_targets", lambda *args: None)
    exact = [plan_placement_transfer(s, t) for s, t in cases]
    assert fast == exact
    assert [p.operations for p in fast] == [p.operations for p in exact]

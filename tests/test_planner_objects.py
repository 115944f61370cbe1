"""Trusted construction of planner results in C (csrc/planobj.c ``build_regions``): regions equal
the Python trusted path field for field, and malformed records fail closed."""

from __future__ import annotations

import gc
import sys
from typing import Any

import pytest

from planner_helpers import tp_placement
from spec_helpers import raises

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
        assert region == expected and vars(region) == vars(expected)
        assert list(vars(region)) == [f for f in TransferRegion.__dataclass_fields__]
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

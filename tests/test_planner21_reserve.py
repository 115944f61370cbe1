"""plan_regions past the size from which its kernel reserves one region per processed target
up front (csrc/overlap.c ``OV_RESERVE_MIN``, 65,536 targets) and builds its used-index lists at
their final length (session 21): the regions equal ``plan_overlaps``' records built by
``build_regions``, and the used indices are the records' distinct indices, increasing."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mooncake.reshard import _native
from mooncake.reshard.weight import plan_placement_transfer
from mooncake.reshard.weight._planner import core, geometry
from mooncake.reshard.weight._planner.contracts import TransferRegion

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import _workloads as w  # noqa: E402

_RESERVE_MIN = 65536  # csrc/overlap.c OV_RESERVE_MIN


def test_large_plan_regions_equal_records_built(monkeypatch: Any) -> None:
    # 16,400 tensors: 65,600 targets (4 each) and 32,800 sources, every target planned
    inputs = w._sweep(_RESERVE_MIN // 4 + 16)
    source, target = w.assemble(inputs.source), w.assemble(inputs.target)
    seen: list[tuple[Any, ...]] = []
    original = geometry.plan_region_objects

    def recording(region_type: type, sources: Any, targets: Any, tids: Any = None, **kernel: Any) -> Any:
        result = original(region_type, sources, targets, tids, **kernel)
        seen.append((sources, targets, kernel, result))
        return result

    monkeypatch.setattr(core, "plan_region_objects", recording)
    plan = plan_placement_transfer(source, target)
    (sources, targets, kernel, (regions, used_sources, used_targets)), = seen
    assert kernel["nprocess"] >= _RESERVE_MIN
    records = geometry.plan_overlap_regions(**kernel)
    assert len(records) == len(regions) == len(plan.operations)
    built = _native.build_regions(TransferRegion, records, list(sources), list(targets))
    assert built == regions == plan.operations
    assert list(used_sources) == sorted({record[0] for record in records})
    assert list(used_targets) == sorted({record[1] for record in records})
    # a list, or range(n) when every one of the n is used (session 22: no int object per index)
    for used, n in ((used_sources, len(sources)), (used_targets, kernel["nprocess"])):
        assert type(used) is list or (type(used) is range and used == range(n))

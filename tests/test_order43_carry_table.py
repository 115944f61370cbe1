"""ORDER43: ``bind_regions``' carried facts (csrc/scan_carry.h ``sc_carry``) are built with an
identity table homed by a full address mix (``sc_carry_home``), and the ordered path
(``bind_regions_ordered``) asks for the carry's arrays and table slots a few operations ahead
(hints). Neither may change a fact: the distinct fragments in first-appearance order and each
operation's source and target positions must be what ``revalidate_scan`` derives from the same
regions, on plans large enough that the table grows (more than two thirds of its first 32,768
slots: Kimi-class 20 layers of 48 experts, ~23,000 operations), and the bound plan must be the
one the unfused steps (``bind_regions`` over the two maps) give."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from mooncake.reshard import _native
from mooncake.reshard.weight import PlanningLimits, bind_logical_transfer_plan, plan_placement_transfer
from mooncake.reshard.weight._planner import binding
from mooncake.reshard.weight._planner.bound_contracts import _position_list
from mooncake.reshard.weight._planner.contracts import TransferRegion
from mooncake.reshard.weight._planner.fragments import BoundWeightFragment

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import _workloads as w  # noqa: E402
import scale  # noqa: E402

_CACHE: dict[int, tuple[Any, Any, Any]] = {}


def _inputs(layers: int) -> tuple[Any, Any, Any]:
    if layers not in _CACHE:
        inputs = w.independent_experts(layers=layers, experts=48)
        source, target = w.assemble(inputs.source), w.assemble(inputs.target)
        logical = plan_placement_transfer(source, target, planning_limits=PlanningLimits(**scale.PLANNING_LIMITS))
        _CACHE[layers] = (
            logical,
            w.bindings(target, prefix="dst", window=4096),
            w.bindings(source, prefix="src", window=0),
        )
    return _CACHE[layers]


def _bind_capturing(monkeypatch: pytest.MonkeyPatch, layers: int) -> tuple[Any, list[Any]]:
    """The bound plan, and what each ``bind_regions_ordered`` call returned (before the bind
    path compacts and empties its lists: the results are copied here)."""
    logical, target_bindings, source_bindings = _inputs(layers)
    seen: list[Any] = []
    real = _native.bind_regions_ordered

    def spy(*args: Any) -> Any:
        result = real(*args)
        if result is not None:
            regions, _selections, _physical, carried = result
            copied = None
            if carried is not None:
                copied = (
                    list(carried[0]),
                    list(carried[1]),
                    list(_position_list(carried[2])),
                    list(_position_list(carried[3])),
                )
            seen.append((list(regions), copied))
        return result

    monkeypatch.setattr(_native, "bind_regions_ordered", spy)
    try:
        plan = bind_logical_transfer_plan(logical, target_bindings, source_bindings=source_bindings)
    finally:
        monkeypatch.undo()
    return plan, seen


@pytest.mark.parametrize("layers", [4, 20])
def test_carried_positions_are_revalidate_scans(monkeypatch: pytest.MonkeyPatch, layers: int) -> None:
    plan, seen = _bind_capturing(monkeypatch, layers)
    assert len(seen) == 1, "the ordered path decided the bind"
    regions, carried = seen[0]
    assert carried is not None, "the carry stayed on"
    assert carried[0] == regions and all(a is b for a, b in zip(carried[0], regions))
    if layers == 20:
        assert len(carried[1]) > 32768 * 2 // 3, "the identity table grew"
    scanned = _native.revalidate_scan(
        tuple(regions),
        scale.PLANNING_LIMITS["max_segments_per_region"],
        scale.PLANNING_LIMITS["max_total_lowered_segments"],
        TransferRegion,
        BoundWeightFragment,
    )
    assert scanned is not None
    frags, source_of, target_of, _boxes = scanned
    assert len(frags) == len(carried[1]) and all(a is b for a, b in zip(frags, carried[1]))
    assert list(_position_list(source_of)) == carried[2]
    assert list(_position_list(target_of)) == carried[3]
    # each position names the region's own fragment
    for k, region in enumerate(regions):
        assert carried[1][carried[2][k]] is region.source
        assert carried[1][carried[3][k]] is region.target
    assert list(plan.operations) == regions


def test_fused_plan_equals_the_unfused_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plan bind_regions_ordered gives equals the one steps 7 and 8 give through the maps
    (the fused path off: ``_FUSED_MIN_OPERATIONS`` above the plan's size)."""
    plan, seen = _bind_capturing(monkeypatch, 4)
    assert len(seen) == 1
    logical, target_bindings, source_bindings = _inputs(4)
    monkeypatch.setattr(binding, "_FUSED_MIN_OPERATIONS", 10**9)
    calls: list[int] = []
    real = _native.bind_regions_ordered

    def never(*args: Any) -> Any:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(_native, "bind_regions_ordered", never)
    unfused = bind_logical_transfer_plan(logical, target_bindings, source_bindings=source_bindings)
    assert not calls
    assert unfused == plan

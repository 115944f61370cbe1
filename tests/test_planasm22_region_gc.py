"""plan_regions' collector rule for the regions it builds (session 22, round two).

A large plan's regions (at least MR_GC_BULK_MIN of them) are untracked exactly when every field
value is inert (common.h's rule): the coordinate fields are shared tuples of ints, untracked
when made, so only the tensor id, the source and the target decide. These tests hold the built
regions to that rule with an oracle written from the rule, for inert fragments and for sources
or targets the collector tracks."""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import Any

import pytest

from mooncake.reshard import _native
from mooncake.reshard.weight import plan_placement_transfer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import _workloads as w  # noqa: E402

FIELDS = (
    "tensor_id", "source", "target", "overlap_offset", "overlap_shape", "source_base_offset",
    "target_base_offset", "inner_bytes", "outer_loop_counts", "source_strides", "target_strides",
)


def _inert(value: Any, depth: int = 4) -> bool:
    """common.h's mr_gc_inert, from its comment: atoms, untracked objects, and tuples whose
    items are inert (to a depth)."""
    if type(value) in (str, int) or value is None:
        return True
    if type(value) is tuple:
        if not gc.is_tracked(value):
            return True
        return depth > 0 and all(_inert(item, depth - 1) for item in value)
    if isinstance(value, dict):
        return False
    return not gc.is_tracked(value)


class _Tracked:
    """A stand-in fragment the collector tracks (plan_regions only stores what it is given)."""


def _capture(monkeypatch: pytest.MonkeyPatch, swap: Any) -> list[Any]:
    """Records plan_regions' result for the same arguments with swap(sources, targets) in place
    of the planner's fragments; the planner itself gets the unchanged call's result."""
    original = _native.plan_regions
    seen: list[Any] = []

    def wrapper(cls: Any, sources: Any, targets: Any, *rest: Any) -> Any:
        swapped_sources, swapped_targets = swap(list(sources), list(targets))
        seen.append((original(cls, swapped_sources, swapped_targets, *rest), swapped_sources, swapped_targets))
        return original(cls, sources, targets, *rest)

    monkeypatch.setattr(_native, "plan_regions", wrapper)
    return seen


def _plan(fragments: int) -> Any:
    inputs = w.sweep(fragments=fragments)
    return plan_placement_transfer(w.assemble(inputs.source), w.assemble(inputs.target))


def _check_rule(regions: tuple[Any, ...]) -> tuple[int, int]:
    tracked = untracked = 0
    for region in regions:
        values = [getattr(region, name) for name in FIELDS]
        for value in values[3:]:
            assert _inert(value)  # coordinate fields: ints or untracked tuples of ints
        expected = all(map(_inert, values))
        assert gc.is_tracked(region) is not expected
        tracked += gc.is_tracked(region)
        untracked += not gc.is_tracked(region)
    return tracked, untracked


@pytest.mark.parametrize("where", ["none", "source", "target", "both"])
def test_large_plan_regions_follow_the_inert_rule(monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    def swap(sources: list[Any], targets: list[Any]) -> tuple[list[Any], list[Any]]:
        if where in ("source", "both"):
            sources[::7] = [_Tracked() for _ in sources[::7]]
        if where in ("target", "both"):
            targets[::5] = [_Tracked() for _ in targets[::5]]
        return sources, targets

    seen = _capture(monkeypatch, swap)
    enabled = gc.isenabled()
    gc.disable()  # (a collection would untrack an inert tuple itself: the rule is plan_regions')
    try:
        plan = _plan(3000)
        assert len(seen) == 1
        (regions, _, _), sources, targets = seen[0]
        assert len(regions) >= 1024  # the bulk threshold: regions are judged
        tracked, untracked = _check_rule(regions)
        if where == "none":
            assert tracked == 0
        else:
            assert tracked > 0 and untracked > 0
        # the tuple of them: untracked exactly when every region is (session 59 decides it from
        # each region as it is built, not by a second walk)
        assert gc.is_tracked(regions) is (tracked > 0)
    finally:
        if enabled:
            gc.enable()
    # the planner's own regions: exact fragments, all inert
    assert not any(map(gc.is_tracked, plan.operations))
    assert _check_rule(plan.operations) == (0, len(plan.operations))


def test_a_tracked_tensor_id_keeps_its_regions_tracked(monkeypatch: pytest.MonkeyPatch) -> None:
    original = _native.plan_regions
    seen: list[Any] = []

    class Id(str):
        pass

    def wrapper(cls: Any, sources: Any, targets: Any, tids: Any, *rest: Any) -> Any:
        if tids is not None:
            ids = [Id(t) if i % 3 == 0 else t for i, t in enumerate(tids)]
            seen.append(original(cls, sources, targets, ids, *rest))
        return original(cls, sources, targets, tids, *rest)

    monkeypatch.setattr(_native, "plan_regions", wrapper)
    _plan(3000)
    assert len(seen) == 1  # the planner hands plan_regions the targets' tensor ids
    regions = seen[0][0]
    assert len(regions) >= 1024
    tracked, untracked = _check_rule(regions)
    assert untracked > 0
    assert tracked == sum(1 for region in regions if gc.is_tracked(region.tensor_id))


def test_small_plan_regions_stay_tracked() -> None:
    plan = _plan(120)
    assert 0 < len(plan.operations) < 1024
    assert all(map(gc.is_tracked, plan.operations))  # below the bulk threshold nothing is judged

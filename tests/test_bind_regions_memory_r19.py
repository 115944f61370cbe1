"""``_native.bind_regions``' carried facts in the compact form (session 19, bind's peak memory).

Above ``COMPACT_MIN`` operations the call writes each operation's carried source / target
position as a native int32 straight into the two bytes it returns (``bound_contracts._compact_carried``'s
form: no int object, list slot or box tuple per operation; ``boxes`` None), and its identity table
grows with the fragments it meets instead of being sized for two per operation. Checked: the
packed positions, extent ends and maxima equal what ``revalidate_scan`` derives from the regions
(on a plan whose distinct fragments outgrow the table's first capacity), the
revalidation takes them as they are, and a bind with the facts carried builds the plan a bind
without them builds (and the same first error when a binding is forged)."""

from __future__ import annotations

from array import array
from typing import Any, Tuple

import pytest

from memory_executor import HostMemory, host_bindings, tp_placement
from test_native_binder_fused_physical import CLASSES, _logical, whole
from test_native_revalidate_carried import _calls, _not_carried, _outcome

from mooncake.reshard import _native
from mooncake.reshard.contracts.fragments import RuntimeBindingFragment
from mooncake.reshard.weight import TransferPlan
from mooncake.reshard.weight._planner import bound_contracts
from mooncake.reshard.weight._planner.contracts import TransferRegion
from mooncake.reshard.weight._planner.fragments import BoundWeightFragment
from mooncake.reshard.weight.planner import plan_placement_transfer

COMPACT_MIN = 257  # binder.c BD_COMPACT_MIN
TABLE_FIRST = 4096  # scan_carry.h SC_TABLE_FIRST: first capacity 2**15 slots, doubled above two thirds
BIG = 1 << 62


def _bind(logical: Tuple[Any, ...], targets: Any, sources: Any) -> Any:
    return _native.bind_regions(
        *CLASSES, logical, targets, sources, BoundWeightFragment, RuntimeBindingFragment, BIG, True, True
    )


def _ends(region: Any) -> Tuple[int, int, int]:
    s_end = region.source_base_offset + region.inner_bytes
    t_end = region.target_base_offset + region.inner_bytes
    count = 1
    for n, ss, ts in zip(region.outer_loop_counts, region.source_strides, region.target_strides):
        s_end += (n - 1) * ss
        t_end += (n - 1) * ts
        count *= n
    return s_end, t_end, count


def _check_compact(regions: list[Any], carried: Any) -> None:
    assert carried is not None and len(carried) == 9
    got_regions, frags, source_of, target_of, boxes, ends, max_count, max_total, _facts = carried
    assert got_regions is regions
    operations = tuple(regions)
    scanned = _native.revalidate_scan(operations, BIG, BIG, TransferRegion, BoundWeightFragment)
    assert scanned is not None
    want_frags, want_source_of, want_target_of, _want_boxes = scanned
    assert len(frags) == len(want_frags) and all(a is b for a, b in zip(frags, want_frags))
    assert type(source_of) is bytes and type(target_of) is bytes and boxes is None
    assert source_of == array("i", want_source_of).tobytes()
    assert target_of == array("i", want_target_of).tobytes()
    want_ends = [-1] * len(frags)
    total = top_total = top_count = 0
    for i, region in enumerate(regions):
        s_end, t_end, count = _ends(region)
        for position, end in ((want_source_of[i], s_end), (want_target_of[i], t_end)):
            want_ends[position] = max(want_ends[position], end)
        total += count
        top_total = max(top_total, total)
        top_count = max(top_count, count)
    assert list(memoryview(ends).cast("q")) == want_ends
    assert (max_count, max_total) == (top_count, top_total)
    assert bound_contracts._compact_carried(carried) is carried  # taken as it is
    assert _native.revalidate_scan_carried(
        operations, carried, BIG, BIG, BoundWeightFragment, RuntimeBindingFragment
    ) == (frags, source_of, target_of, None)


def test_many_distinct_fragments_grow_the_identity_table() -> None:
    count = 7 * TABLE_FIRST  # 28,672 distinct fragments: past 2**15 * 2 / 3, the first growth
    ops = [whole(f"f{k}", 4096 + 64 * k) for k in range(count)]
    built = _bind(*_logical(ops))
    assert built is not None
    regions, _selections, physical, carried = built
    assert physical is True
    _check_compact(regions, carried)
    assert len(carried[1]) == count
    # the same regions in another order (positions by first appearance), each twice
    shuffled = ops[1::2] + ops[::2] + ops[::-1]
    built = _bind(*_logical(shuffled))
    assert built is not None
    _check_compact(built[0], built[3])


@pytest.mark.parametrize("count", [COMPACT_MIN, COMPACT_MIN + 1])
def test_small_plans_keep_their_lists(count: int) -> None:
    ops = [whole(f"f{k}", 4096 + 64 * k) for k in range(count)]
    regions, _selections, _physical, carried = _bind(*_logical(ops))
    compact = count > COMPACT_MIN
    assert (type(carried[2]) is bytes, carried[4] is None) == (compact, compact)
    if not compact:
        assert type(carried[2]) is list and type(carried[4]) is list
        assert carried[2] == carried[3] == list(range(count))  # (a region onto its own fragment)


def _world(tensors: int, whole_targets: bool) -> Tuple[Any, Any, Any]:
    names = tuple(f"w{k}" for k in range(tensors))
    source = tp_placement(2, prefix="s", dp=2, shape=(4, 6), tensors=names)
    target = tp_placement(2 if whole_targets else 3, prefix="t", shape=(4, 6), tensors=names)
    logical = plan_placement_transfer(source, target)
    memory = HostMemory()
    return logical, host_bindings(target, memory, prefix="dst"), host_bindings(source, memory, prefix="src")


@pytest.mark.parametrize("whole_targets", [True, False])
def test_a_large_bind_with_and_without_the_carried_facts_agrees(
    monkeypatch: pytest.MonkeyPatch, whole_targets: bool
) -> None:
    logical, targets, sources = _world(150, whole_targets)
    assert len(logical.operations) > COMPACT_MIN
    with monkeypatch.context() as patch:
        seen = _calls(patch)
        carried = _outcome(logical, targets, sources)
        assert len(seen) == 1 and seen[0] is not None  # taken, and accepted
        assert type(seen[0][1]) is bytes and seen[0][3] is None  # in the compact form
    with monkeypatch.context() as patch:
        _not_carried(patch)
        plain = _outcome(logical, targets, sources)
    assert isinstance(carried, TransferPlan) and carried == plain
    assert carried.target_executors == plain.target_executors
    assert carried.source_executors == plain.source_executors
    assert carried.pipeline_routes == plain.pipeline_routes
    assert carried.operations == plain.operations

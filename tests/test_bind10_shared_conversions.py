"""``_native.bind_regions`` with the carry and the proof (eleven arguments) converts each region's
values once and shares them between its steps (session 30): the carried proof's overlap box and
target box decide the physical path's same-box checks, and the scan rule's int conversions are
the proof's. The spaces of the physical path are remembered by the identity of their key strs in
a table that grows (it was direct-mapped: 128 slots). Each step must still decide exactly as it
decides alone: the physical decision equals the nine-argument call's (and
``physical_whole_targets``'), the carried facts equal the call's without the physical path, and
the regions and selections are the seven-argument call's."""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

from hypothesis import given, settings

from test_binding_physical import bound, region, workloads
from test_native_binder_fused_physical import CLASSES, _agree, _logical, whole, whole_workloads

from mooncake.reshard import _native
from mooncake.reshard.contracts.fragments import RuntimeBindingFragment
from mooncake.reshard.weight._planner.fragments import BoundWeightFragment


def _agree11(logical: Tuple[Any, ...], targets: Any, sources: Any, budget: Any = 1_000_000) -> Optional[bool]:
    """The eleven-argument call: regions, selections and physical as the nine-argument call
    (``_agree`` checks that against the seven-argument call and physical_whole_targets), carried
    facts as the same call without the physical path (budget 0). Returns the physical decision."""
    physical = _agree(logical, targets, sources, budget)
    full = _native.bind_regions(
        *CLASSES, logical, targets, sources, BoundWeightFragment, RuntimeBindingFragment, budget, True, True
    )
    alone = _native.bind_regions(
        *CLASSES, logical, targets, sources, BoundWeightFragment, RuntimeBindingFragment, 0, True, True
    )
    nine = _native.bind_regions(
        *CLASSES, logical, targets, sources, BoundWeightFragment, RuntimeBindingFragment, budget
    )
    if nine is None:
        assert full is None and alone is None
        return None
    regions, selections, decided, carried = full
    assert decided is physical and decided is nine[2]
    assert selections == nine[1] == alone[1]
    assert alone[2] is None
    for got, want in zip(regions, nine[0]):
        assert type(got) is type(want) and vars_of(got) == vars_of(want)
    if alone[3] is None:
        assert carried is None
    else:
        assert carried is not None
        facts, facts_alone = carried[8], alone[3][8]
        assert (facts is None) == (facts_alone is None)
        if facts is not None:
            assert len(facts) == len(facts_alone) and all(a is b for a, b in zip(facts, facts_alone))
        assert carried[5] == alone[3][5] and carried[6:8] == alone[3][6:8]
    return decided


def vars_of(obj: Any) -> List[Any]:
    from spec_helpers import field_state

    return [(k, id(v)) for k, v in field_state(obj).items()]


def test_whole_and_partial_targets_decide_as_alone() -> None:
    genuine = _logical([whole("a", 4096), whole("b", 8192), whole("c", 4096, worker="w1")])
    assert _agree11(*genuine) is True
    full = _native.bind_regions(
        *CLASSES, *genuine, BoundWeightFragment, RuntimeBindingFragment, 1, True, True
    )
    assert full[3] is not None and full[3][8] is not None  # proven: the shared boxes decided
    assert _agree11(*_logical([whole("a", 4096), whole("b", 4096 + 8)])) is None
    same = whole("a", 4096)
    assert _agree11(*_logical([same, same])) is None
    fragment = bound("p", (0, 0), (2, 4), 1 << 20)
    # the offset equals the target's global offset, the shape is smaller: not whole
    assert _agree11(*_logical([region(fragment, (0, 0), (2, 2))])) is None
    assert _agree11(*_logical([region(fragment, (0, 0), (2, 2)), region(fragment, (0, 2), (2, 2))])) is None
    # the shape equals the target's local shape, the offset differs (a forged box)
    op = whole("d", 4096)
    logical, targets, sources = _logical([op])
    object.__setattr__(logical[0], "overlap_offset", (0, 1))
    assert _agree11(logical, targets, sources) is None


def test_equal_box_objects_that_are_not_the_targets_own() -> None:
    # the overlap box equal by value to the target's box, as other tuple objects: still whole
    op = whole("a", 4096, rows=3, cols=5)
    logical, targets, sources = _logical([op, whole("b", 1 << 20)])
    object.__setattr__(logical[0], "overlap_offset", tuple(list(op.target.placement.global_offset)))
    object.__setattr__(logical[0], "overlap_shape", tuple(list(op.target.placement.local_shape)))
    assert logical[0].overlap_offset is not op.target.placement.global_offset
    assert _agree11(logical, targets, sources) is True


def test_an_unproven_region_still_decides_the_physical_path() -> None:
    # the proof fails (no shared boxes): the physical path converts on its own
    for name, value in (("inner_bytes", 8), ("source_base_offset", 4), ("outer_loop_counts", (3,))):
        op = whole("a", 4096)
        logical, targets, sources = _logical([whole("z", 1 << 20), op, whole("b", 8192)])
        object.__setattr__(logical[1], name, value)
        assert _agree11(logical, targets, sources) is True, name
    # an overlap offset past int64: neither the proof nor the memo converts it
    op = whole("a", 4096)
    logical, targets, sources = _logical([op])
    object.__setattr__(logical[0], "overlap_offset", (0, 1 << 70))
    assert _agree11(logical, targets, sources) is None


def _spaces(count: int, overlap: bool) -> List[Any]:
    """count targets each in its own space (worker strs built per call: equal values are
    distinct objects), then one target per space again at a later address, and two targets of
    space 0 (equal strs, distinct objects) far apart in the operation order."""
    ops = [whole(f"a{k}", 4096, worker="".join(["w", str(k)])) for k in range(count)]
    ops += [whole(f"b{k}", 8192, worker="".join(["w", str(k)])) for k in range(count)]
    ops.append(whole("last", 4096 + (8 if overlap else 4096 * 3), worker="".join(["w", "0"])))
    return ops


def test_many_spaces_with_equal_but_distinct_key_strs() -> None:
    for count in (1, 40, 130, 300):
        assert _agree11(*_logical(_spaces(count, overlap=False))) is True
        assert _agree11(*_logical(_spaces(count, overlap=True))) is None
        assert _agree(*_logical(_spaces(count, overlap=True))) is None


def test_a_device_or_instance_apart_is_another_space() -> None:
    ops = [whole(f"a{k}", 4096, device="".join(["cuda:", str(k % 3)]), instance=f"i{k // 3}") for k in range(12)]
    assert _agree11(*_logical(ops)) is True
    ops.append(whole("x", 4096 + 8, device="".join(["cuda:", "2"]), instance="i3"))  # a{11}'s space
    assert _agree11(*_logical(ops)) is None


@settings(max_examples=200, deadline=None)
@given(whole_workloads())
def test_whole_workloads_agree(operations: List[Any]) -> None:
    _agree11(*_logical(operations))


@settings(max_examples=150, deadline=None)
@given(workloads())
def test_partial_workloads_agree(workload: Tuple[List[Any], int]) -> None:
    operations, budget = workload
    _agree11(*_logical(operations), budget)


def test_the_attestation_memo_decides_per_attestation() -> None:
    """The untracking passes decide once per attestation pointer (common.h mr_att_memo_closed:
    a window of slots from each one's home, else the home replaced). With more attestations than
    the memo has slots (every window full, homes replaced), each bound fragment is still judged by
    its own attestation: the ones whose cache holds a bound row stay tracked, with their regions."""
    import gc
    import random

    import test_gc_bound
    from spec_helpers import forged_copy

    _, _, _, _, plan = test_gc_bound._bind(72)
    operations = list(plan.operations)
    assert len(operations) >= 4096
    rng = random.Random(30)
    count = 6000
    attestations = [forged_copy(operations[k % len(operations)].target.attestation) for k in range(count)]
    poisoned = set(rng.sample(range(count), count // 5))
    some_bound = operations[0].target
    for k in poisoned:
        a = attestations[k]
        object.__setattr__(a, "_derived_cache", (a.placement, a.evidence, {"rows": (("row", some_bound),)}))
    order = list(range(count))
    rng.shuffle(order)
    regions = []
    for k in order:
        op = operations[k % len(operations)]
        target = forged_copy(op.target, attestation=attestations[k])
        source = forged_copy(op.source, attestation=attestations[k])
        regions.append(forged_copy(op, source=source, target=target))
    assert all(gc.is_tracked(r.target) and gc.is_tracked(r.source) for r in regions)
    _native.untrack_bound_regions(regions, BoundWeightFragment)
    for k, r in zip(order, regions):
        kept = k in poisoned
        assert gc.is_tracked(r.target) is kept and gc.is_tracked(r.source) is kept, k
        assert gc.is_tracked(r) is kept, k

"""``_native.bind_regions`` keeps, within one call, what it read of each operation's source object
(its bound source, that fragment's binding and fragment id, its carried position), offers every
region and its bound fragments to the collector as it builds them (what
``untrack_bound_regions`` did after the pass), and records the carried positions (native int32)
and boxes in C: above ``COMPACT_MIN`` operations the positions are returned packed (the bytes
they were written into) with no boxes (``bound_contracts._compact_carried``'s form), else turned
into the carried lists once every region is built (one int object per position).

Checked against oracles on plans whose operations name the same source objects many times, in
any order, with sources that are distinct objects of the same id, stored snapshots, forged bound
fragments: the regions, the id selections (``bound_fragment_ids``), the carried facts
(``revalidate_scan`` on the regions, extent ends and segment maxima computed in Python, the
proof's facts), and the collector state (``untrack_bound_regions`` after the six-argument call,
on fresh bound fragments)."""

from __future__ import annotations

import dataclasses
import gc
from array import array
from typing import Any, Optional

import pytest
from hypothesis import given, settings, strategies as st

from test_native_binder_regions_ids import _forge as _copy  # a distinct object, same class, same (or changed) dict
from test_native_binder_regions_scan import LOGICAL, SOURCES, TARGETS
from spec_helpers import field_state

from mooncake.reshard import _native
from mooncake.reshard.contracts.fragments import RuntimeBindingFragment
from mooncake.reshard.weight import StoredFragmentSnapshot
from mooncake.reshard.weight._planner import bound_contracts
from mooncake.reshard.weight._planner.contracts import TransferRegion
from mooncake.reshard.weight._planner.fragments import BoundWeightFragment
from mooncake.reshard.weight.types import PlacementFragment

CLASSES = (TransferRegion, PlacementFragment, StoredFragmentSnapshot)
FIELDS = tuple(field.name for field in dataclasses.fields(TransferRegion))
BIG = 10**12
GC_BULK_MIN = 1024  # common.h MR_GC_BULK_MIN
COMPACT_MIN = 257  # binder.c BD_COMPACT_MIN, bound_contracts._COMPACT_MIN


OPS = LOGICAL.operations


def _with_source(op: Any, source: Any) -> Any:
    return _copy(op, source=source)


def _fused(operations: tuple[Any, ...], targets: dict[str, Any], sources: dict[str, Any], prove: bool = True) -> Any:
    return _native.bind_regions(
        *CLASSES, operations, targets, sources, BoundWeightFragment, RuntimeBindingFragment, BIG, True, prove
    )


def _bound_of(fragment: Any, table: dict[str, Any]) -> Any:
    if type(fragment) is StoredFragmentSnapshot:
        return fragment
    return table[field_state(fragment)["placement_fragment_id"]]


def _ends(region: Any) -> tuple[int, int, int]:
    """revalidate_scan's source and target extent ends and segment count of one region."""
    s_end = region.source_base_offset + region.inner_bytes
    t_end = region.target_base_offset + region.inner_bytes
    count = 1
    for n, ss, ts in zip(region.outer_loop_counts, region.source_strides, region.target_strides):
        s_end += (n - 1) * ss
        t_end += (n - 1) * ts
        count *= n
    return s_end, t_end, count


def _check_carried(operations: tuple[Any, ...], fused: Any, sources: dict[str, Any] = SOURCES) -> None:
    assert fused is not None
    regions, selections, physical, carried = fused
    assert len(regions) == len(operations)
    for op, region in zip(operations, regions):
        assert type(region) is TransferRegion
        assert list(field_state(region)) == list(FIELDS)
        for name in FIELDS:
            want = field_state(op)[name]
            if name == "source":
                want = _bound_of(want, sources)
            elif name == "target":
                want = _bound_of(want, TARGETS)
            assert field_state(region)[name] is want, name
    assert selections == _native.bound_fragment_ids(regions, TransferRegion, BoundWeightFragment, StoredFragmentSnapshot)
    assert carried is not None and len(carried) == 9
    got_regions, frags, source_of, target_of, boxes, ends, max_count, max_total, facts = carried
    assert got_regions is regions
    scanned = _native.revalidate_scan(tuple(regions), BIG, BIG, TransferRegion, BoundWeightFragment)
    assert scanned is not None
    want_frags, want_source_of, want_target_of, want_boxes = scanned
    assert len(frags) == len(want_frags) and all(a is b for a, b in zip(frags, want_frags))
    packed = (source_of, target_of)
    if len(operations) > COMPACT_MIN:
        # the compact form: the positions packed as native int32, no boxes
        assert type(source_of) is bytes and type(target_of) is bytes and boxes is None
        assert source_of == array("i", want_source_of).tobytes()
        assert target_of == array("i", want_target_of).tobytes()
        source_of = memoryview(source_of).cast("i").tolist()
        target_of = memoryview(target_of).cast("i").tolist()
        assert bound_contracts._compact_carried(carried) is carried  # (taken as it is)
    else:
        assert source_of == want_source_of and target_of == want_target_of and boxes == want_boxes
        assert all(type(p) is int for p in source_of + target_of)
        assert all(type(box) is tuple and len(box) == 2 for box in boxes)
        for region, box in zip(regions, boxes):
            assert box[0] is region.overlap_offset and box[1] is region.overlap_shape
        # one int object per position
        by_position: dict[int, int] = {}
        for p in source_of + target_of:
            assert by_position.setdefault(p, id(p)) == id(p)
    # the extent ends and segment maxima, in Python
    want_ends = [0] * len(frags)
    seen = [False] * len(frags)
    total = top_total = 0
    top_count = None
    for i, region in enumerate(regions):
        s_end, t_end, count = _ends(region)
        for position, end in ((source_of[i], s_end), (target_of[i], t_end)):
            want_ends[position] = end if not seen[position] else max(want_ends[position], end)
            seen[position] = True
        total += count
        top_total = max(top_total, total)
        top_count = count if top_count is None else max(top_count, count)
    assert list(memoryview(ends).cast("q")) == want_ends
    assert max_count == top_count and max_total == top_total
    # the proof's facts: four adapter values per distinct fragment
    assert facts is not None and len(facts) == 4 * len(frags)
    for p, fragment in enumerate(frags):
        placement, binding = fragment.placement, fragment.binding
        want = (placement.tensor_id, placement.global_offset, placement.local_shape, binding.nbytes)
        assert all(a is b for a, b in zip(facts[4 * p : 4 * p + 4], want))
    assert _native.revalidate_scan_carried(
        tuple(regions), carried, BIG, BIG, BoundWeightFragment, RuntimeBindingFragment
    ) == ((frags,) + packed + (carried[4],))


def test_sources_repeat_in_the_plan() -> None:
    sources = [id(op.source) for op in OPS]
    assert len(set(sources)) < len(sources)


@pytest.mark.parametrize("copies", [1, 2, COMPACT_MIN // len(OPS) + 1, 40])
def test_repeated_operations_in_any_order(copies: int) -> None:
    operations = (tuple(OPS) * 3 + tuple(reversed(OPS)) * 2) * copies
    _check_carried(operations, _fused(operations, TARGETS, SOURCES))


@pytest.mark.parametrize("count", [COMPACT_MIN - 1, COMPACT_MIN, COMPACT_MIN + 1, COMPACT_MIN + 2])
def test_compact_form_from_the_threshold_on(count: int) -> None:
    operations = (tuple(OPS) * (count // len(OPS) + 1))[:count]
    fused = _fused(operations, TARGETS, SOURCES)
    _check_carried(operations, fused)
    assert (fused[3][4] is None) == (count > COMPACT_MIN)


def test_distinct_source_objects_of_one_id_share_a_position() -> None:
    copies = tuple(_with_source(op, _copy(op.source)) for op in OPS)
    operations = tuple(x for pair in zip(OPS, copies) for x in pair) + tuple(OPS)
    fused = _fused(operations, TARGETS, SOURCES)
    _check_carried(operations, fused)
    carried = fused[3]
    assert carried[2][0] is carried[2][1]  # the same bound source: the same position (object)


def test_stored_snapshot_sources_met_again() -> None:
    snapshots = {}
    for op in OPS:
        placement = op.source
        if id(placement) not in snapshots:
            snapshots[id(placement)] = StoredFragmentSnapshot(
                fragment_id="stored-" + placement.placement_fragment_id,
                tensor_id=placement.tensor_id,
                global_offset=placement.global_offset,
                local_shape=placement.local_shape,
                object_key="object",
                object_offset=0,
                nbytes=SOURCES[placement.placement_fragment_id].binding.nbytes,
            )
    operations = tuple(_with_source(op, snapshots[id(op.source)]) for op in OPS) * 2
    fused = _fused(operations, TARGETS, SOURCES)
    assert fused is not None
    regions, selections, _, carried = fused
    for op, region in zip(operations, regions):
        assert region.source is op.source
    assert selections == _native.bound_fragment_ids(regions, TransferRegion, BoundWeightFragment, StoredFragmentSnapshot)
    assert carried is None  # a stored source is not a bound fragment: revalidate_scan declines
    assert _native.revalidate_scan(tuple(regions), BIG, BIG, TransferRegion, BoundWeightFragment) is None


def test_a_bound_source_without_fragment_id_met_again_leaves_ids_undecided() -> None:
    """The first meeting takes bound_fragment_ids' attribute read (the view has no id) and finds
    nothing: the selections are None, as bound_fragment_ids returns for the regions."""
    op = OPS[0]
    pfid = op.source.placement_fragment_id
    bound = SOURCES[pfid]
    forged_binding = _copy(bound.binding)
    object.__delattr__(forged_binding, "fragment_id")
    sources = dict(SOURCES)
    sources[pfid] = _copy(bound, binding=forged_binding)
    operations = tuple(OPS) * 2
    fused = _fused(operations, TARGETS, sources)
    assert fused is not None
    regions, selections, _, _ = fused
    assert selections is None
    assert _native.bound_fragment_ids(regions, TransferRegion, BoundWeightFragment, StoredFragmentSnapshot) is None


def test_a_source_that_declines_declines_at_every_meeting() -> None:
    pfid = OPS[0].source.placement_fragment_id
    sources = {k: v for k, v in SOURCES.items() if k != pfid}
    operations = tuple(OPS) * 2
    assert _fused(operations, TARGETS, sources) is None
    assert _native.bind_regions(*CLASSES, operations, TARGETS, sources) is None


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, len(OPS) - 1), st.sampled_from(["same", "copy", "shared-copy"])),
        min_size=1,
        max_size=60,
    )
)
def test_random_sequences_agree_with_the_oracles(picks: list[tuple[int, str]]) -> None:
    shared = {i: _copy(op.source) for i, op in enumerate(OPS)}
    operations = []
    for index, kind in picks:
        op = OPS[index]
        if kind == "copy":
            op = _with_source(op, _copy(op.source))
        elif kind == "shared-copy":
            op = _with_source(op, shared[index])
        operations.append(op)
    ops = tuple(operations)
    _check_carried(ops, _fused(ops, TARGETS, SOURCES))
    # the forms without the carry build the same regions
    plain = _native.bind_regions(*CLASSES, ops, TARGETS, SOURCES)
    assert plain is not None
    fused = _fused(ops, TARGETS, SOURCES, prove=False)
    assert fused[3][8] is None
    for a, b in zip(plain, fused[0]):
        assert all(x is y for x, y in zip(field_state(a).values(), field_state(b).values()))


# --- the collector --------------------------------------------------------------------------


def _fresh_tables(variant: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Fresh (tracked) bound fragments: every third one without attestation (untrackable when its
    other fields are inert), every fifth holding a list as its owner (stays tracked), the rest as
    bound."""
    tables = []
    for k, table in enumerate((TARGETS, SOURCES)):
        fresh = {}
        for j, (pfid, bound) in enumerate(sorted(table.items())):
            changes: dict[str, Any] = {}
            if (j + variant + k) % 3 == 0:
                changes["attestation"] = None
            if (j + variant + k) % 5 == 0:
                changes["owner"] = [1]  # (a field: bound fragments have no other attribute)
            fresh[pfid] = _copy(bound, **changes)
        tables.append(fresh)
    return tables[0], tables[1]


def _states(regions: list[Any]) -> list[tuple[bool, bool, bool]]:
    return [(gc.is_tracked(r), gc.is_tracked(r.source), gc.is_tracked(r.target)) for r in regions]


@pytest.mark.parametrize("variant", range(3))
@pytest.mark.parametrize("copies", [GC_BULK_MIN // len(OPS) + 1, 2])
def test_untracking_matches_untrack_bound_regions_after_the_pass(variant: int, copies: int) -> None:
    operations = tuple(OPS) * copies
    targets, sources = _fresh_tables(variant)
    fused = _fused(operations, targets, sources)
    assert fused is not None
    got = _states(fused[0])
    targets, sources = _fresh_tables(variant)
    plain = _native.bind_regions(*CLASSES, operations, targets, sources)
    assert plain is not None
    if len(operations) >= GC_BULK_MIN:
        _native.untrack_bound_regions(plain, BoundWeightFragment)
    want = _states(plain)
    assert got == want
    if len(operations) >= GC_BULK_MIN:
        assert any(not any(state) for state in got) and any(all(state) for state in got)
    else:
        assert all(state[0] for state in got)


def _no_attestation_tables() -> tuple[dict[str, Any], dict[str, Any]]:
    return tuple(  # type: ignore[return-value]
        {pfid: _copy(bound, attestation=None) for pfid, bound in table.items()} for table in (TARGETS, SOURCES)
    )


def test_a_failed_call_still_returns_none() -> None:
    """A plan that declines late (a missing target after many operations) returns None whatever
    it untracked on the way (only objects no cycle can pass through)."""
    targets, sources = _no_attestation_tables()
    pfid = OPS[-1].target.placement_fragment_id
    del targets[pfid]
    operations = tuple(OPS) * (GC_BULK_MIN // len(OPS) + 1)
    assert _fused(operations, targets, sources) is None


def test_argument_errors() -> None:
    with pytest.raises(TypeError):
        _native.bind_regions(*CLASSES, tuple(OPS), TARGETS, SOURCES, BoundWeightFragment, RuntimeBindingFragment, BIG, 1)
    with pytest.raises(TypeError):
        _native.bind_regions(*CLASSES, tuple(OPS), TARGETS, SOURCES, BoundWeightFragment, RuntimeBindingFragment, BIG, True, "x")
    assert _native.bind_regions(*CLASSES, list(OPS), TARGETS, SOURCES, BoundWeightFragment) is None
    huge = _fused(tuple(OPS), TARGETS, SOURCES)
    assert huge is not None
    assert _native.bind_regions(
        *CLASSES, tuple(OPS), TARGETS, SOURCES, BoundWeightFragment, RuntimeBindingFragment, 2**200, True, True
    )[2] in (True, None)
    assert _native.bind_regions(
        *CLASSES, tuple(OPS), TARGETS, SOURCES, BoundWeightFragment, RuntimeBindingFragment, -(2**200), True, True
    )[2] is None


# --- fragments' ids and bound fragments read ahead ------------------------------------------


def _fragment_without_id(fragment: Any) -> Any:
    forged = _copy(fragment)
    object.__delattr__(forged, "placement_fragment_id")
    return forged


def _fragment_with_id(value: Any) -> Any:
    def forge(fragment: Any) -> Any:
        return _copy(fragment, placement_fragment_id=value)

    return forge


FRAGMENT_FORGERIES = [
    _fragment_without_id,
    _fragment_with_id(""),
    _fragment_with_id(7),
    _fragment_with_id("no-such-fragment"),
    _fragment_with_id(type("S", (str,), {})("x")),
]


def _oracle_declines(operations: tuple[Any, ...]) -> bool:
    for op in operations:
        for fragment, table in ((op.target, TARGETS), (op.source, SOURCES)):
            pfid = field_state(fragment).get("placement_fragment_id")
            if type(pfid) is not str or not pfid or pfid not in table:
                return True
    return False


@pytest.mark.parametrize("forge", FRAGMENT_FORGERIES)
@pytest.mark.parametrize("side", ["target", "source"])
def test_forged_fragment_ids_at_every_position(forge: Any, side: str) -> None:
    """A fragment whose id is missing, not a non-empty exact str or unknown declines the whole call
    wherever it sits relative to the operations read ahead (also a source met before and after)."""
    base = tuple(OPS) * 2
    for position in range(0, len(base), 3):
        op = base[position]
        changed = base[:position] + (_copy(op, **{side: forge(getattr(op, side))}),) + base[position + 1 :]
        assert _oracle_declines(changed)
        assert _fused(changed, TARGETS, SOURCES) is None
        assert _native.bind_regions(*CLASSES, changed, TARGETS, SOURCES) is None


def test_a_source_read_ahead_that_is_met_before_its_turn() -> None:
    """Operations naming one source object back to back (its id read ahead while an earlier
    operation first meets it) and a forged-id copy of it: the genuine ones agree with the oracles."""
    ops = tuple(op for op in OPS for _ in range(5))
    _check_carried(ops, _fused(ops, TARGETS, SOURCES))
    for position in (0, 1, 2, 4, 5, 17, len(ops) - 1):
        op = ops[position]
        changed = ops[:position] + (_copy(op, source=_fragment_without_id(op.source)),) + ops[position + 1 :]
        assert _fused(changed, TARGETS, SOURCES) is None

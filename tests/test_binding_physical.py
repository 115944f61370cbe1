"""Target physical-range validation (spec §12.6): the spec's consequences, and a differential
property test of the C sweep against a direct Python transcription of the rule (lazy
``heapq.merge`` of per-operation segment generators with a per-space budget)."""

from __future__ import annotations

import heapq
import itertools
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from hypothesis import given, settings
from hypothesis import strategies as st

from spec_helpers import raises

from mooncake.reshard.weight import ParallelRank, PlacementFragment, RuntimeBindingFragment
from mooncake.reshard.weight._planner.bound_validation import _validate_target_physical_ranges
from mooncake.reshard.weight.planner import BoundWeightFragment, TransferRegion

ITEMSIZE = 2


def row_major(shape: Sequence[int]) -> Tuple[int, ...]:
    strides = [ITEMSIZE] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    return tuple(strides)


def bound(
    name: str,
    offset: Tuple[int, ...],
    shape: Tuple[int, ...],
    address: int,
    *,
    tensor: str = "w",
    device: str = "cpu",
    endpoint: str = "e0",
    worker: str = "w0",
    instance: str = "i0",
    lease: str = "lease",
    generation: int = 1,
) -> BoundWeightFragment:
    nbytes = ITEMSIZE
    for extent in shape:
        nbytes *= extent
    placement = PlacementFragment(tensor, offset, shape, nbytes, ParallelRank(), placement_fragment_id=f"p-{name}")
    runtime = RuntimeBindingFragment(
        placement_fragment_id=f"p-{name}",
        fragment_id=name,
        address=address,
        nbytes=nbytes,
        worker_id=worker,
        endpoint=endpoint,
        device=device,
        itemsize=ITEMSIZE,
        local_shape=shape,
        strides_bytes=row_major(shape),
        storage_address=address,
        storage_nbytes=nbytes,
        storage_offset_bytes=0,
    )
    return BoundWeightFragment(placement, runtime, instance, lease, generation)


def region(fragment: BoundWeightFragment, overlap_offset: Tuple[int, ...], overlap_shape: Tuple[int, ...]) -> Any:
    """A canonical region (spec §11.7) copying a box of ``fragment`` onto itself."""
    strides = row_major(fragment.local_shape)
    base = sum((o - g) * s for o, g, s in zip(overlap_offset, fragment.global_offset, strides))
    ndim = len(overlap_shape)
    inner = overlap_shape[-1] * ITEMSIZE
    suffix = ndim - 1
    for d in range(ndim - 2, -1, -1):
        if strides[d] == inner:
            inner *= overlap_shape[d]
            suffix = d
        else:
            break
    return TransferRegion(
        fragment.tensor_id,
        fragment,
        fragment,
        overlap_offset,
        overlap_shape,
        base,
        base,
        inner,
        tuple(overlap_shape[:suffix]),
        strides[:suffix],
        strides[:suffix],
    )


# ---------------------------------------------------------------------------------------
# Spec consequences


def test_same_address_on_other_device_is_fine_other_endpoint_conflicts() -> None:
    a = bound("a", (0, 0), (4, 4), 4096)
    b = bound("b", (0, 0), (4, 4), 4096, device="gpu")
    _validate_target_physical_ranges([region(a, (0, 0), (4, 4)), region(b, (0, 0), (4, 4))])
    c = bound("c", (0, 0), (4, 4), 4096, endpoint="other")
    with raises("conflicting target physical range: c"):
        _validate_target_physical_ranges([region(a, (0, 0), (4, 4)), region(c, (0, 0), (4, 4))])


def test_overlap_in_last_mixed_radix_segment_is_caught() -> None:
    a = bound("a", (0, 0, 0), (3, 4, 8), 1 << 20)
    # b's only byte range touches the last segment of a's strided region.
    last = (1 << 20) + 2 * 64 + 3 * 16 + 8
    b = bound("b", (0,), (1,), last, tensor="v")
    ops = [region(a, (0, 0, 4), (3, 4, 4)), region(b, (0,), (1,))]
    assert ops[0].segment_count == 12
    with raises("conflicting target physical range: "):
        _validate_target_physical_ranges(ops)
    shifted = bound("b", (0,), (1,), last + 8, tensor="v")
    _validate_target_physical_ranges([ops[0], region(shifted, (0,), (1,))])


def test_complete_fragment_is_free() -> None:
    a = bound("a", (0, 0), (500_001, 2), 1 << 24)
    ops = [region(a, (0, 0), (500_001, 1)), region(a, (0, 1), (500_001, 1))]
    assert sum(op.segment_count for op in ops) == 1_000_002
    _validate_target_physical_ranges(ops)
    _validate_target_physical_ranges(ops, max_segment_checks=1)


def test_each_segment_charged_once_with_interleaved_columns() -> None:
    ops = []
    for column in range(32):
        fragment = bound(f"f{column}", (0, 0), (16, 32), 1 << 20, tensor=f"t{column}")
        ops.append(region(fragment, (0, column), (16, 1)))
    _validate_target_physical_ranges(ops, max_segment_checks=512)
    with raises("target physical segment scan budget exceeded"):
        _validate_target_physical_ranges(ops, max_segment_checks=511)


def test_complete_fragment_conflicts_with_incomplete_segment() -> None:
    whole = bound("whole", (0, 0), (4, 4), 1 << 20)
    partial = bound("partial", (0, 0), (4, 4), (1 << 20) + 24, tensor="v")
    with raises("conflicting target physical range: "):
        _validate_target_physical_ranges([region(whole, (0, 0), (4, 4)), region(partial, (0, 0), (2, 1))])


def test_budget_is_per_address_space() -> None:
    ops = []
    for device in ("cpu", "gpu"):
        fragment = bound(f"f-{device}", (0, 0), (8, 4), 1 << 20, device=device)
        ops.append(region(fragment, (0, 0), (8, 2)))
    _validate_target_physical_ranges(ops, max_segment_checks=8)
    with raises("target physical segment scan budget exceeded"):
        _validate_target_physical_ranges(ops, max_segment_checks=7)


def test_benchmark_shape_boundary() -> None:
    target = bound("t", (0, 0), (128, 512), 1 << 30)
    ops = [region(target, (0, c), (128, 1)) for c in range(128)]
    _validate_target_physical_ranges(ops, max_segment_checks=16384)
    with raises("target physical segment scan budget exceeded"):
        _validate_target_physical_ranges(ops, max_segment_checks=16383)


# ---------------------------------------------------------------------------------------
# Differential property test


class _Budget(Exception):
    pass


def oracle(operations: Sequence[Any], max_segment_checks: int) -> Optional[str]:
    """Spec §12.6 transcribed literally (no aliases); returns the error message or None."""
    spaces: Dict[Any, Dict[Any, List[int]]] = {}
    for index, op in enumerate(operations):
        t = op.target
        space = (t.instance_id, t.worker_id, t.device)
        key = (t.fragment_id, t.tensor_id, t.instance_id, t.worker_id, t.device, t.lease_generation, t.address,
               t.nbytes, t.global_offset, t.local_shape)
        spaces.setdefault(space, {}).setdefault(key, []).append(index)
    for groups in spaces.values():
        used = [0]

        def charged(index: int) -> Iterator[Tuple[int, int, int]]:
            op = operations[index]
            for _s, target_offset, n in op.iter_segments(max_segments=op.segment_count):
                if used[0] >= max_segment_checks:
                    raise _Budget
                used[0] += 1
                begin = op.target.address + target_offset
                yield (begin, begin + n, index)

        streams: List[Iterator[Tuple[int, int, int]]] = []
        for members in groups.values():
            t = operations[members[0]].target
            cells = set()
            volume = 0
            for i in members:
                op = operations[i]
                box = [range(o, o + n) for o, n in zip(op.overlap_offset, op.overlap_shape)]
                for cell in itertools.product(*box):
                    cells.add(cell)
                    volume += 1
            full = 1
            for n in t.local_shape:
                full *= n
            if volume == full and len(cells) == full:
                streams.append(iter([(t.address, t.address + t.nbytes, members[0])]))
            else:
                streams.extend(charged(i) for i in members)
        try:
            previous: Optional[Tuple[int, int, int]] = None
            for begin, end, index in heapq.merge(*streams):
                if previous is not None and begin < previous[1]:
                    return f"conflicting target physical range: {operations[index].target.fragment_id}"
                previous = (begin, max(end, previous[1]) if previous else end, index)
        except _Budget:
            return "target physical segment scan budget exceeded"
    return None


@st.composite
def workloads(draw: Any) -> Tuple[List[Any], int]:
    fragments = []
    for number in range(draw(st.integers(1, 4))):
        rows = draw(st.integers(1, 4))
        cols = draw(st.integers(1, 4))
        address = (1 << 16) + draw(st.integers(0, 6)) * 8
        device = draw(st.sampled_from(["cpu", "gpu"]))
        fragments.append(bound(f"f{number}", (0, 0), (rows, cols), address, tensor=f"t{number}", device=device))
    ops = []
    for fragment in fragments:
        rows, cols = fragment.local_shape
        if draw(st.booleans()):
            cut = draw(st.integers(0, cols))
            pieces = [((0, 0), (rows, cut)), ((0, cut), (rows, cols - cut))]
            ops.extend(region(fragment, o, s) for o, s in pieces if s[1] > 0)
        else:
            for _ in range(draw(st.integers(1, 2))):
                r0 = draw(st.integers(0, rows - 1))
                c0 = draw(st.integers(0, cols - 1))
                r1 = draw(st.integers(r0 + 1, rows))
                c1 = draw(st.integers(c0 + 1, cols))
                ops.append(region(fragment, (r0, c0), (r1 - r0, c1 - c0)))
    order = draw(st.permutations(range(len(ops))))
    return [ops[i] for i in order], draw(st.integers(1, 24))


@settings(max_examples=300, deadline=None)
@given(workloads())
def test_kernel_matches_literal_rule(workload: Tuple[List[Any], int]) -> None:
    operations, budget = workload
    expected = oracle(operations, budget)
    try:
        _validate_target_physical_ranges(operations, max_segment_checks=budget)
        actual = None
    except ValueError as exc:
        actual = str(exc)
    assert actual == expected

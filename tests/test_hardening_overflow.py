"""Issue 6: overflow and budget edges give clean errors (a plain ValueError with the spec's message,
or the documented signed-64-bit coordinate limitation of docs/manifest.md), never a wrap-around,
an OverflowError or a crash; values at the edge are accepted and keep working end to end."""

from __future__ import annotations

import math
import re
from typing import Any, Callable, Sequence, Tuple

import pytest

from layout_model import canonical_strides
from memory_executor import HostWorld
from spec_helpers import from_fragments, runtime_fragment_kwargs, topology

from mooncake.reshard.weight import (
    ParallelRank,
    PlacementFragment,
    PlanningLimits,
    RuntimeBindingFragment,
    SplitAxis,
    TensorDescriptor,
    bind_logical_transfer_plan,
    plan_placement_transfer,
)
from mooncake.reshard.weight._planner.bound_validation import _validate_target_physical_ranges

U64 = 2**64 - 1
I64 = 2**63 - 1
LIMITATION = "must fit in a signed 64-bit integer"


def clean_error(fn: Callable[[], Any], message: str) -> str:
    """``fn()`` raises exactly ValueError whose text matches ``message`` (a regex)."""
    with pytest.raises(ValueError) as info:
        fn()
    assert type(info.value) is ValueError
    assert re.search(message, str(info.value)), str(info.value)
    return str(info.value)


def tensor(shape: Sequence[int], *, itemsize: int = 1, dim: int = 0, tensor_id: str = "w") -> TensorDescriptor:
    return TensorDescriptor(tensor_id=tensor_id, global_shape=tuple(shape), dtype=f"u{8 * itemsize}",
                            itemsize=itemsize, shard_dims=(dim,), layout_fingerprint="fp",
                            parallel_axes=(SplitAxis("tp", dim),))


def tp_place(shape: Sequence[int], tp: int, *, dim: int = 0, itemsize: int = 1, prefix: str = "p") -> Any:
    """``shape`` split ``tp`` ways on ``dim`` (last piece takes the remainder)."""
    base = shape[dim] // tp
    frags = []
    for r in range(tp):
        begin = r * base
        size = base if r < tp - 1 else shape[dim] - begin
        off = tuple(begin if d == dim else 0 for d in range(len(shape)))
        loc = tuple(size if d == dim else shape[d] for d in range(len(shape)))
        frags.append(PlacementFragment("w", off, loc, math.prod(loc) * itemsize, ParallelRank(tp=r),
                                       placement_fragment_id=f"{prefix}-{r}"))
    return from_fragments(topology(tp=tp), (tensor(shape, itemsize=itemsize, dim=dim),), frags,
                          placement_set_id=f"{prefix}-set")


# ------------------------------------------------------------------------------------------------
# byte sizes beyond 2**63 / 2**64


def test_fragment_byte_size_at_u64_edge_is_accepted() -> None:
    # 2**32 * (2**32 - 1) elements of 1 byte = 2**64 - 2**32 bytes: fits u64
    placement = tp_place((2**32, 2**32 - 1), 1)
    assert placement.fragments[0].nbytes == 2**32 * (2**32 - 1)


@pytest.mark.parametrize("shape,itemsize", [((2**32, 2**32), 1), ((2**33, 2**31), 2), ((2**62,), 8), ((2**63 - 1,), 4)])
def test_fragment_byte_size_beyond_u64_is_a_clean_error(shape: Tuple[int, ...], itemsize: int) -> None:
    true_size = math.prod(shape) * itemsize
    assert true_size > U64
    t = tensor(shape, itemsize=itemsize)
    # the only nbytes that could match does not fit u64: the u64 check fires first
    clean_error(lambda: PlacementFragment("w", (0,) * len(shape), shape, true_size, ParallelRank()),
                "^nbytes must fit in an unsigned 64-bit integer$")
    # any u64 nbytes is a byte size mismatch, reported with the exact (unwrapped) expectation
    frag = PlacementFragment("w", (0,) * len(shape), shape, U64, ParallelRank(), placement_fragment_id="f")
    text = clean_error(lambda: from_fragments(topology(), (t,), (frag,)), "^fragment byte size mismatch: f: ")
    assert text == f"fragment byte size mismatch: f: expected {true_size}, got {U64}"


def test_fragment_byte_size_beyond_i64_but_within_u64_is_accepted() -> None:
    shape = (2**31, 2**31)
    placement = tp_place(shape, 2, dim=1, itemsize=4)  # 2**64 bytes in total, 2**63 per fragment
    assert {f.nbytes for f in placement.fragments} == {2**63}


def test_tensor_beyond_i64_coordinates_is_the_documented_limitation() -> None:
    # the reference would accept these (pure Python ints); this package rejects them cleanly
    n = 2**63
    clean_error(lambda: tensor((128 * n,)), LIMITATION)
    clean_error(lambda: PlacementFragment("w", (n,), (1,), 1, ParallelRank()), LIMITATION)
    clean_error(lambda: PlacementFragment("w", (0,), (n,), 1, ParallelRank()), LIMITATION)


# ------------------------------------------------------------------------------------------------
# offsets at the edge


def test_offsets_at_the_i64_edge_plan_and_bind() -> None:
    shape = (I64,)  # offset + extent == 2**63 - 1 exactly
    source = tp_place(shape, 2, prefix="s")
    target = tp_place(shape, 3, prefix="t")
    plan = plan_placement_transfer(source, target)
    assert sum(op.total_bytes for op in plan.operations) == I64
    assert all(op.segment_count == 1 for op in plan.operations)
    # bind at the top of the address space: address + nbytes == 2**64 - 1 for the last fragment
    from layout_model import build_runtime_bindings

    def high(placement: Any) -> Any:
        bindings = build_runtime_bindings(placement, base_address=1, gap=0)
        assert max(f.address + f.nbytes for b in bindings for f in b.fragments) <= U64
        return bindings

    bound = bind_logical_transfer_plan(plan, high(target), source_bindings=high(source))
    assert len(bound.operations) == len(plan.operations)
    _validate_target_physical_ranges(bound.operations, max_segment_checks=1)


@pytest.mark.parametrize("address,nbytes,ok", [
    (U64 - 4, 4, True), (U64 - 3, 4, False), (2**64 - 4, 4, False), (1, U64 - 1, True), (1, U64, False),
    (U64, 1, False), (U64 - 1, 1, True),
])
def test_runtime_view_range_edges(address: int, nbytes: int, ok: bool) -> None:
    shape, strides = ((nbytes,), (1,)) if nbytes <= I64 else ((2, nbytes // 2), (nbytes // 2, 1))
    kw = runtime_fragment_kwargs(address=address, nbytes=nbytes, local_shape=shape, strides_bytes=strides,
                                 itemsize=1, storage_address=address, storage_nbytes=nbytes)
    if ok:
        fragment = RuntimeBindingFragment(**kw)
        assert fragment.address + fragment.nbytes <= U64
    else:
        clean_error(lambda: RuntimeBindingFragment(**kw), "^address range must fit in an unsigned 64-bit integer$")


@pytest.mark.parametrize("storage_address,offset,message", [
    (U64 - 10, 10, "^runtime address must equal storage_address plus storage_offset_bytes$"),
    (U64 - 10, 11, "^normalized runtime address must fit in 64 bits$"),
    (2, U64, "^normalized runtime address must fit in 64 bits$"),
    (1, 2**64, "^storage_offset_bytes must fit in an unsigned 64-bit integer$"),
    (1, -1, "^storage_offset_bytes must be at least 0$"),
])
def test_storage_offset_edges(storage_address: int, offset: int, message: str) -> None:
    kw = runtime_fragment_kwargs(address=16, nbytes=4, local_shape=(2,), strides_bytes=(2,),
                                 storage_address=storage_address, storage_nbytes=8, storage_offset_bytes=offset)
    clean_error(lambda: RuntimeBindingFragment(**kw), message)


@pytest.mark.parametrize("field,value,message", [
    ("address", 2**64, "^address must fit in an unsigned 64-bit integer$"),
    ("address", 2**200, "^address must fit in an unsigned 64-bit integer$"),
    ("nbytes", -(2**64), "^nbytes must be at least 1$"),
    ("itemsize", 2**64, None),
    ("local_shape", (2**64, 4), None),
    ("strides_bytes", (2**64, 2), None),
    ("strides_bytes", (-1, 2), r"^runtime strides_bytes\[0\] must be at least 0$"),
])
def test_runtime_fragment_huge_values(field: str, value: Any, message: Any) -> None:
    kw = runtime_fragment_kwargs(**{field: value})
    try:
        fragment = RuntimeBindingFragment(**kw)
    except ValueError as exc:
        assert type(exc) is ValueError
        if message is not None:
            assert re.search(message, str(exc)), str(exc)
        return
    assert message is None, "expected a rejection"
    assert getattr(fragment, field) == (tuple(value) if isinstance(value, tuple) else value)


# ------------------------------------------------------------------------------------------------
# planning limits at and one past their limits


def test_planning_limits_reject_non_positive_and_accept_huge() -> None:
    for field in ("max_transfer_regions", "max_segments_per_region", "max_total_lowered_segments"):
        for bad in (0, -1, True, 1.0, None):
            clean_error(lambda: PlanningLimits(**{field: bad}),
                        f"^planning limit {field} must be a positive integer$")
        for good in (1, U64, 2**64, 2**200):
            assert getattr(PlanningLimits(**{field: good}), field) == good


@pytest.fixture(scope="module")
def reshard() -> Tuple[Any, Any, Any]:
    """TP2 -> TP4 on dim 1 of (6, 8): 4 operations of 6 segments each (24 in total)."""
    source = tp_place((6, 8), 2, dim=1, itemsize=2, prefix="s")
    target = tp_place((6, 8), 4, dim=1, itemsize=2, prefix="t")
    plan = plan_placement_transfer(source, target)
    return source, target, plan


def test_region_budget_at_and_one_past_the_limit(reshard: Tuple[Any, Any, Any]) -> None:
    source, target, plan = reshard
    n = len(plan.operations)
    assert n == 4
    assert len(plan_placement_transfer(source, target, planning_limits=PlanningLimits(max_transfer_regions=n)).operations) == n
    clean_error(lambda: plan_placement_transfer(source, target, planning_limits=PlanningLimits(max_transfer_regions=n - 1)),
                f"^logical transfer plan exceeds max_transfer_regions: {n - 1}$")


def test_segment_budgets_at_and_one_past_the_limit(reshard: Tuple[Any, Any, Any]) -> None:
    source, target, plan = reshard
    per_region = max(op.segment_count for op in plan.operations)
    total = sum(op.segment_count for op in plan.operations)
    assert (per_region, total) == (6, 24)
    plan_placement_transfer(source, target, planning_limits=PlanningLimits(max_segments_per_region=per_region))
    clean_error(lambda: plan_placement_transfer(source, target, planning_limits=PlanningLimits(max_segments_per_region=per_region - 1)),
                f"^logical transfer region exceeds max_segments_per_region: {per_region} > {per_region - 1}$")
    plan_placement_transfer(source, target, planning_limits=PlanningLimits(max_total_lowered_segments=total))
    clean_error(lambda: plan_placement_transfer(source, target, planning_limits=PlanningLimits(max_total_lowered_segments=total - 1)),
                rf"^logical transfer plan exceeds max_total_lowered_segments: \d+ > {total - 1}$")


def test_physical_segment_budget_at_and_one_past_the_limit(reshard: Tuple[Any, Any, Any]) -> None:
    import dataclasses

    source, target, plan = reshard
    bound = HostWorld(source, target, logical=plan, source_prefix="s", target_prefix="t").bind()
    # complete target fragments cost nothing; cut each operation to its first column so that
    # every target fragment is incomplete and each segment is charged
    ops = []
    for op in bound.operations:
        rows = op.overlap_shape[0]
        ops.append(dataclasses.replace(
            op, overlap_shape=(rows, 1), inner_bytes=2, outer_loop_counts=(rows,),
        ))
    assert sum(op.segment_count for op in ops) == 24
    # every target participant is its own address space, with its own budget (spec 12.6 step 2)
    charged = max(op.segment_count for op in ops)
    assert charged == 6
    _validate_target_physical_ranges(ops, max_segment_checks=charged)
    clean_error(lambda: _validate_target_physical_ranges(ops, max_segment_checks=charged - 1),
                "^target physical segment scan budget exceeded$")
    for bad in (0, -1, True, 1.5):
        clean_error(lambda: _validate_target_physical_ranges(ops, max_segment_checks=bad),
                    "^max_segment_checks must be a positive integer$")
    _validate_target_physical_ranges(ops, max_segment_checks=2**64)
    _validate_target_physical_ranges(ops, max_segment_checks=2**200)


# ------------------------------------------------------------------------------------------------
# 8-D tensors end to end


@pytest.mark.parametrize("src_dim,dst_dim", [(7, 0), (0, 7), (3, 5)])
def test_8d_reshard_executes_byte_exact(src_dim: int, dst_dim: int) -> None:
    shape = (2, 3, 2, 2, 3, 2, 2, 4)
    source = tp_place(shape, 2, dim=src_dim, prefix="s")
    target = tp_place(shape, 2 if shape[dst_dim] < 3 else 3, dim=dst_dim, prefix="t")
    world = HostWorld(source, target, fill=True, source_prefix="s", target_prefix="t")
    bound = world.bind()
    _moved, checked = world.execute_and_check(bound)
    assert checked == math.prod(shape)
    assert all(len(op.overlap_offset) == 8 for op in bound.operations)


def test_8d_strides_are_canonical_and_loop_geometry_bounded() -> None:
    shape = (3,) * 8
    source = tp_place(shape, 3, dim=7, prefix="s")
    target = tp_place(shape, 3, dim=0, prefix="t")
    plan = plan_placement_transfer(source, target)
    for op in plan.operations:
        assert op.source_strides == canonical_strides(op.source.local_shape, 1)[: len(op.source_strides)]
        assert op.segment_count * op.inner_bytes == op.total_bytes == math.prod(op.overlap_shape)

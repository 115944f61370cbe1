"""``_native.bind_regions``' physical decision (spec §12.6, nine or more arguments) on larger
workloads: distinct targets and extents pairwise disjoint per address space, decided after the
pass with a radix sort of the targets and the extents grouped by space (each group sorted only
when it is not in order already). The decision must be the brute-force one (every pair of
extents compared, every pair of targets) and ``physical_whole_targets``' (qsort kernels), for
targets met in address order, in reverse, shuffled, across many spaces, with duplicates and
touching or overlapping neighbours, and past the 257 operations where the carried facts pack."""

from __future__ import annotations

import random
from typing import Any, List, Optional, Sequence, Tuple

from hypothesis import given, settings
from hypothesis import strategies as st

from test_binding_physical import ITEMSIZE, bound, region
from test_native_binder_fused_physical import _agree, _logical

from mooncake.reshard import _native
from mooncake.reshard.contracts.fragments import RuntimeBindingFragment
from mooncake.reshard.weight import StoredFragmentSnapshot
from mooncake.reshard.weight._planner.contracts import TransferRegion
from mooncake.reshard.weight._planner.fragments import BoundWeightFragment
from mooncake.reshard.weight.types import PlacementFragment

CLASSES = (TransferRegion, PlacementFragment, StoredFragmentSnapshot)
ITEM_BYTES = 2 * 4 * ITEMSIZE  # a whole (2, 4) fragment


def _whole(name: str, address: int, space: Tuple[str, str, str]) -> Any:
    instance, worker, device = space
    fragment = bound(name, (0, 0), (2, 4), 4096, tensor=f"t-{name}", instance=instance, worker=worker, device=device)
    object.__setattr__(fragment.binding, "address", address)  # past the constructor's checks
    return region(fragment, (0, 0), (2, 4))


def _oracle(operations: Sequence[Any]) -> bool:
    """Brute force: no target twice, no two extents of one space overlapping."""
    seen = set()
    extents = []
    for op in operations:
        if id(op.target) in seen:
            return False
        seen.add(id(op.target))
        binding = op.target.binding
        space = (op.target.instance_id, binding.worker_id, binding.device)
        extents.append((space, binding.address, binding.address + binding.nbytes))
    for i, (space, begin, end) in enumerate(extents):
        for other_space, other_begin, other_end in extents[:i]:
            if space == other_space and begin < other_end and other_begin < end:
                return False
    return True


def _expected(operations: Sequence[Any]) -> Optional[bool]:
    return True if _oracle(operations) else None


def _decide(operations: Sequence[Any]) -> Optional[bool]:
    logical, targets, sources = _logical(operations)
    physical = _agree(logical, targets, sources)  # also: physical_whole_targets agrees
    full = _native.bind_regions(
        *CLASSES, logical, targets, sources, BoundWeightFragment, RuntimeBindingFragment, 1_000_000, True, True
    )
    assert full is not None and full[2] is physical  # the carried call decides the same
    return physical


def _spaces(count: int) -> List[Tuple[str, str, str]]:
    """count distinct (instance, worker, device) spaces."""
    return [(f"i{k % 3}", f"w{k}", "cpu" if k % 2 else "gpu") for k in range(count)]


@st.composite
def layouts(draw: Any) -> List[Any]:
    count = draw(st.integers(0, 320))
    spaces = _spaces(draw(st.integers(1, 40)))
    order = draw(st.sampled_from(["ascending", "descending", "shuffled", "per-space"]))
    gap = draw(st.sampled_from([0, 8, ITEM_BYTES, 2 * ITEM_BYTES]))  # 0, 8: neighbours overlap
    spread = draw(st.sampled_from([1, 1 << 20, 1 << 44]))  # addresses differing in low or high bits
    seed = draw(st.integers(0, 2**32 - 1))
    rng = random.Random(seed)
    placed = []
    for number in range(count):
        space = spaces[rng.randrange(len(spaces))] if order != "per-space" else spaces[number % len(spaces)]
        address = 4096 + (number // (len(spaces) if order == "per-space" else 1)) * (ITEM_BYTES + gap) * spread
        placed.append((address, space))
    if order == "descending":
        placed.reverse()
    elif order == "shuffled":
        rng.shuffle(placed)
    ops = [_whole(f"f{k}", address, space) for k, (address, space) in enumerate(placed)]
    if ops and draw(st.booleans()):
        ops.insert(rng.randrange(len(ops) + 1), ops[rng.randrange(len(ops))])  # one target written twice
    if ops and draw(st.booleans()):
        # one extent moved onto (or just past) another of the same space
        victim, other = rng.randrange(len(ops)), rng.randrange(len(ops))
        shift = draw(st.sampled_from([0, 8, ITEM_BYTES - 1, ITEM_BYTES]))
        target = ops[victim].target
        object.__setattr__(target.binding, "address", ops[other].target.binding.address + shift)
        for name in ("instance_id",):
            object.__setattr__(target, name, ops[other].target.instance_id)
        for name in ("worker_id", "device"):
            object.__setattr__(target.binding, name, getattr(ops[other].target.binding, name))
    return ops


@settings(max_examples=120, deadline=None)
@given(layouts())
def test_large_layouts_decide_as_brute_force(operations: List[Any]) -> None:
    assert _decide(operations) is _expected(operations)


def test_many_spaces_in_address_order_and_shuffled() -> None:
    spaces = _spaces(64)
    rng = random.Random(5)
    ops = [_whole(f"f{k}", 4096 + (k // 64) * ITEM_BYTES, spaces[k % 64]) for k in range(2000)]
    assert _decide(ops) is True
    rng.shuffle(ops)
    assert _decide(ops) is True
    # the last extent of the busiest space overlapping its predecessor by one byte
    late = ops[-1].target
    same_space = [op for op in ops[:-1] if op.target.binding.worker_id == late.binding.worker_id
                  and op.target.binding.device == late.binding.device and op.target.instance_id == late.instance_id]
    object.__setattr__(late.binding, "address", same_space[0].target.binding.address + ITEM_BYTES - 1)
    assert _decide(ops) is None
    # touching (end == next begin) stays disjoint
    object.__setattr__(late.binding, "address", same_space[0].target.binding.address + ITEM_BYTES)
    assert _decide(ops) is _expected(ops)


def test_one_target_twice_far_apart() -> None:
    ops = [_whole(f"f{k}", 4096 + k * ITEM_BYTES * (1 << 30), ("i0", "w0", "cpu")) for k in range(600)]
    assert _decide(ops) is True
    assert _decide(ops + [ops[3]]) is None
    assert _decide([ops[599]] + ops) is None

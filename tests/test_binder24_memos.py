"""``_native.bind_regions``' per-call memos (session 24): the int tuples its carried spec §8.4
proof and its physical accept path convert (by tuple identity, two ways per set, holding a
reference to each tuple kept), and the address spaces of its physical decision (by the identity of
the (instance_id, worker_id, device) str objects). A memo decides what converting or looking up
again would; these tests make it evict and miss: many distinct tuple objects, tuples of equal
values that are other objects, spaces whose key parts are equal str objects that are not
identical, more spaces than the memo has slots. The decisions must be the full predicates' and
the brute force's, and every reference the memos took must be released (in every exit path)."""

from __future__ import annotations

import random
import sys
from typing import Any, List, Optional, Sequence, Tuple

from hypothesis import given, settings
from hypothesis import strategies as st

from spec_helpers import forged_copy
from test_binder22_extents import ITEM_BYTES, _decide, _oracle, _whole
from test_binding_physical import bound, region
from test_native_binder_fused_physical import CLASSES, _logical

from mooncake.reshard import _native
from mooncake.reshard.contracts.fragments import RuntimeBindingFragment
from mooncake.reshard.weight._planner import region_check
from mooncake.reshard.weight._planner.fragments import BoundWeightFragment

PLAIN = region_check._PLAIN_TYPES


def _bind(ops: Sequence[Any]) -> Tuple[Tuple[Any, ...], Any, Any]:
    logical, targets, sources = _logical(ops)
    built = _native.bind_regions(
        *CLASSES, logical, targets, sources, BoundWeightFragment, RuntimeBindingFragment, 1 << 40, True, True
    )
    assert built is not None
    regions, _selections, physical, carried = built
    return tuple(regions), physical, carried


def _full(operations: Tuple[Any, ...]) -> bool:
    return _native.regions_canonical(operations, 0, BoundWeightFragment, PLAIN) == len(operations)


def _fragments(count: int, seed: int) -> List[Any]:
    """count fragments of distinct boxes (their offset and shape tuples distinct objects and
    values), at disjoint addresses of one space."""
    rng = random.Random(seed)
    out = []
    address = 1 << 20
    for k in range(count):
        shape = (1 + rng.randrange(4), 1 + rng.randrange(6))
        offset = (k * 8, rng.randrange(3))
        fragment = bound(f"f{k}", offset, shape, address, tensor=f"t{k % 7}")
        address += 4096
        out.append(fragment)
    return out


def _regions(fragments: Sequence[Any], rng: random.Random, split: bool = True) -> List[Any]:
    """Canonical regions of each fragment: the whole box, or (split) two column pieces."""
    ops = []
    for fragment in fragments:
        (r0, c0), (rows, cols) = fragment.global_offset, fragment.local_shape
        if split and cols > 1 and rng.random() < 0.5:
            cut = 1 + rng.randrange(cols - 1)
            ops.append(region(fragment, (r0, c0), (rows, cut)))
            ops.append(region(fragment, (r0, c0 + cut), (rows, cols - cut)))
        else:
            ops.append(region(fragment, (r0, c0), (rows, cols)))
    return ops


def _proof_agrees(ops: Sequence[Any]) -> bool:
    """The carried proof is there exactly when the full predicate proves every region; returns
    whether it is."""
    operations, _physical, carried = _bind(ops)
    proven = carried is not None and carried[8] is not None
    assert proven == _full(operations)
    return proven


@st.composite
def proof_workloads(draw: Any) -> List[Any]:
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    ops = _regions(_fragments(draw(st.integers(1, 400)), rng.randrange(1 << 30)), rng)
    rng.shuffle(ops)
    edit = draw(st.sampled_from(["none", "borrow", "equal copy", "value"]))
    if edit != "none" and len(ops) > 1:
        # a late region's box field made another region's tuple (the same object, or an equal
        # one that is another object): canonical only where the boxes happen to coincide
        victim = rng.randrange(len(ops) // 2, len(ops))
        donor = ops[rng.randrange(len(ops))]
        name = draw(st.sampled_from(["overlap_offset", "overlap_shape"]))
        value = getattr(donor, name)
        if edit == "equal copy":
            value = tuple(list(value))
            assert value is not getattr(donor, name) or not value
        elif edit == "value":
            value = (value[0], value[1] + 1)
        ops[victim] = forged_copy(ops[victim], **{name: value})
    return ops


@settings(max_examples=60, deadline=None)
@given(proof_workloads())
def test_carried_proof_is_the_full_predicate(ops: List[Any]) -> None:
    _proof_agrees(ops)


def test_many_distinct_tuples_then_one_unproven() -> None:
    rng = random.Random(24)
    ops = _regions(_fragments(700, 7), rng)
    assert _proof_agrees(ops)  # hundreds of distinct boxes: the memo evicts
    # the last region's overlap box made the first one's (a tuple the memo met long ago, and an
    # equal copy of it): outside the last fragment's box
    for value in (ops[0].overlap_offset, tuple(list(ops[0].overlap_offset))):
        edited = ops[:-1] + [forged_copy(ops[-1], overlap_offset=value)]
        assert not _proof_agrees(edited)
    # strides tuples of equal values but other objects stay proven
    copied = [forged_copy(op, outer_loop_counts=tuple(list(op.outer_loop_counts))) for op in ops]
    assert _proof_agrees(copied)


def _equal_str(text: str) -> str:
    """An equal str that is another object."""
    copy = "".join([text[:1], text[1:]])
    assert copy == text and copy is not text
    return copy


@st.composite
def space_layouts(draw: Any) -> List[Any]:
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    nspaces = draw(st.integers(1, 160))  # past the memo's slots
    # spaces differing in any one part (the same instance and worker on several devices, ...)
    spaces = [(f"i{k % 2}", f"w{k // 6}", ("cpu", "gpu", "cuda:1")[k % 3]) for k in range(nspaces)]
    count = draw(st.integers(1, 400))
    gap = draw(st.sampled_from([0, 8, ITEM_BYTES]))  # 0, 8: neighbours overlap
    ops = []
    for k in range(count):
        space = spaces[rng.randrange(nspaces)]
        if draw(st.booleans()) if k < 4 else rng.random() < 0.3:
            space = tuple(_equal_str(part) for part in space)  # equal key parts, other objects
        ops.append(_whole(f"f{k}", 4096 + (k // 2) * (ITEM_BYTES + gap), space))
    rng.shuffle(ops)
    return ops


@settings(max_examples=80, deadline=None)
@given(space_layouts())
def test_spaces_decide_as_brute_force(ops: List[Any]) -> None:
    expected: Optional[bool] = True if _oracle(ops) else None
    assert _decide(ops) is expected
    _operations, physical, _carried = _bind(ops)
    assert physical is expected


def test_equal_space_parts_of_other_objects_overlap() -> None:
    # many spaces met first (the memo's slots taken), then two extents of one space that overlap,
    # their key parts equal but not identical
    ops = [_whole(f"f{k}", 4096, (f"i{k}", f"w{k}", "cpu")) for k in range(300)]
    # the same addresses on one worker's devices: other spaces, disjoint
    ops += [_whole(f"d{k}", 1 << 20, ("i0", "w0", device)) for k, device in enumerate(["cpu", "gpu", "cuda:1"])]
    assert _decide(ops) is True
    late = ("i-late", "w-late", "gpu")
    ops.append(_whole("a", 1 << 30, late))
    ops.append(_whole("b", (1 << 30) + 8, tuple(_equal_str(part) for part in late)))
    assert _oracle(ops) is False
    assert _decide(ops) is None
    ops[-1] = _whole("b", (1 << 30) + ITEM_BYTES, tuple(_equal_str(part) for part in late))
    assert _decide(ops) is True


def _counts(objects: Sequence[Any]) -> List[int]:
    return [sys.getrefcount(obj) for obj in objects]


def test_memos_release_their_references() -> None:
    rng = random.Random(3)
    ops = _regions(_fragments(300, 11), rng, split=False)  # whole targets: the physical path too
    logical, targets, sources = _logical(ops)
    watched: List[Any] = []
    for op in logical:
        watched.extend([op.overlap_offset, op.overlap_shape, op.outer_loop_counts, op.source_strides])
    for fragment in targets.values():
        watched.extend([fragment.global_offset, fragment.local_shape, fragment.instance_id, fragment.binding.worker_id])
    before = _counts(watched)
    for _ in range(3):
        built = _native.bind_regions(
            *CLASSES, logical, targets, sources, BoundWeightFragment, RuntimeBindingFragment, 1 << 40, True, True
        )
        assert built is not None and built[2] is True and built[3][8] is not None
        del built
    assert _counts(watched) == before
    # a call that falls back part way (a target missing from the map: None) releases them too
    missing = dict(targets)
    del missing[logical[-1].target.placement_fragment_id]
    assert _native.bind_regions(
        *CLASSES, logical, missing, sources, BoundWeightFragment, RuntimeBindingFragment, 1 << 40, True, True
    ) is None
    assert _counts(watched) == before

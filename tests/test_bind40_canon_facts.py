"""binder.c ``bind_regions``' carried spec 8.4 proof keeps each source fragment's converted facts
(session 40, BIND40: ``bd_fc_slot``): the box, rank and size of a distinct fragment are converted
once, and an operation naming that fragment again only checks its own tensor id and rank against
them. The proof must still be carried exactly where every region is canonical: an operation that
reuses a source with another tensor id (equal but another object: proven; unequal: not), an
overlap box of another rank or outside the source's box, must get the verdict the full predicate
(``regions_canonical``, which converts everything again) gives on the regions built, on the first
use of the source as on a later one (the slot's hit)."""

from __future__ import annotations

import copy
from typing import Any, Callable, Optional

import pytest
from hypothesis import given, settings

from mooncake.reshard import _native
from mooncake.reshard.weight._planner.region_check import _PLAIN_TYPES
from mooncake.reshard.weight._planner.fragments import BoundWeightFragment

from test_bindpass27_fused import _fused
from test_native_binder_ordered import World, _world, worlds


def _forged(op: Any, name: str, value: Any) -> Any:
    """A copy of the operation with one field replaced (no validation runs)."""
    forged = copy.copy(op)
    object.__setattr__(forged, name, value)
    return forged


def _reused_sources(ops: tuple[Any, ...]) -> tuple[list[int], list[int]]:
    """(operations naming their source for the first time, operations naming it again)."""
    seen: set[int] = set()
    first, again = [], []
    for index, op in enumerate(ops):
        (again if id(op.source) in seen else first).append(index)
        seen.add(id(op.source))
    return first, again


def _verdict(ops: tuple[Any, ...], world: World) -> Optional[tuple[bool, bool]]:
    """(the proof carried, the full predicate proves every region built), or None when the
    fused call does not decide or carries nothing."""
    result = _fused(ops, world.side(0), world.side(1))
    if result is None:
        return None
    regions, _, _, carried = result
    if carried is None:
        return None
    facts = carried[8]
    full = _native.regions_canonical(tuple(regions), 0, BoundWeightFragment, _PLAIN_TYPES) == len(regions)
    return facts is not None, full


def _tensor_copy(op: Any) -> Any:
    return _forged(op, "tensor_id", "".join(list(op.tensor_id)))  # equal, another object


def _tensor_renamed(op: Any) -> Any:
    return _forged(op, "tensor_id", op.tensor_id + "x")


def _rank_raised(op: Any) -> Any:
    return _forged(op, "overlap_offset", tuple(op.overlap_offset) + (0,))


def _box_moved(op: Any) -> Any:
    return _forged(op, "overlap_offset", tuple(v + 1000 for v in op.overlap_offset))


FORGES: dict[str, tuple[Callable[[Any], Any], bool]] = {
    "tensor_copy": (_tensor_copy, True),
    "tensor_renamed": (_tensor_renamed, False),
    "rank_raised": (_rank_raised, False),
    "box_moved": (_box_moved, False),
}


# Edits of a source placement fragment in place (every operation naming it, and its part and
# attestation, see the edit): its facts differ from its operations' own fields, which the
# targets' facts still match, so only the source side's check refuses.
def _source_tensor_copy(fragment: Any) -> None:
    object.__setattr__(fragment, "tensor_id", "".join(list(fragment.tensor_id)))


def _source_tensor_renamed(fragment: Any) -> None:
    object.__setattr__(fragment, "tensor_id", fragment.tensor_id + "x")


def _source_rank_raised(fragment: Any) -> None:
    object.__setattr__(fragment, "global_offset", tuple(fragment.global_offset) + (0,))
    object.__setattr__(fragment, "local_shape", tuple(fragment.local_shape) + (1,))


def _source_shape_rank_raised(fragment: Any) -> None:
    object.__setattr__(fragment, "local_shape", tuple(fragment.local_shape) + (1,))


def _source_box_moved(fragment: Any) -> None:
    object.__setattr__(fragment, "global_offset", tuple(v + 1 for v in fragment.global_offset))


SOURCE_EDITS: dict[str, tuple[Callable[[Any], None], bool]] = {
    "tensor_copy": (_source_tensor_copy, True),
    "tensor_renamed": (_source_tensor_renamed, False),
    "rank_raised": (_source_rank_raised, False),
    "shape_rank_raised": (_source_shape_rank_raised, False),
    "box_moved": (_source_box_moved, False),
}


@pytest.mark.parametrize("use", ["first", "again", "last"])
@pytest.mark.parametrize("edit", sorted(SOURCE_EDITS))
def test_source_fragment_edited_gets_the_full_predicates_verdict(edit: str, use: str) -> None:
    world = _world()
    ops = world.logical.operations
    first, again = _reused_sources(ops)
    index = {"first": first[-1], "again": again[0], "last": again[-1]}[use]
    change, carried = SOURCE_EDITS[edit]
    change(ops[index].source)
    verdict = _verdict(ops, world)
    assert verdict is not None
    assert verdict == (carried, carried)


def test_world_reuses_sources() -> None:
    world = _world()
    ops = world.logical.operations
    first, again = _reused_sources(ops)
    assert first and again
    assert _verdict(ops, world) == (True, True)


@pytest.mark.parametrize("use", ["first", "again", "last"])
@pytest.mark.parametrize("forge", sorted(FORGES))
def test_forged_operation_gets_the_full_predicates_verdict(forge: str, use: str) -> None:
    world = _world()
    ops = world.logical.operations
    first, again = _reused_sources(ops)
    index = {"first": first[-1], "again": again[0], "last": again[-1]}[use]
    change, carried = FORGES[forge]
    forged = ops[:index] + (change(ops[index]),) + ops[index + 1 :]
    verdict = _verdict(forged, world)
    assert verdict is not None
    assert verdict == (carried, carried)


@settings(deadline=None, max_examples=30)
@given(worlds())
def test_random_worlds_forged_on_a_reused_source(world: World) -> None:
    ops = world.logical.operations
    assert _verdict(ops, world) == (True, True)
    _, again = _reused_sources(ops)
    for index in again[:1] + again[-1:]:
        for forge, (change, carried) in FORGES.items():
            forged = ops[:index] + (change(ops[index]),) + ops[index + 1 :]
            verdict = _verdict(forged, world)
            if verdict is not None:
                assert verdict == (carried, carried), forge

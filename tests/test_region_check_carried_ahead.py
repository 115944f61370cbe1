"""``regions_canonical_carried`` reads each carried fragment's placement and binding a few
fragments ahead as a cache hint (address only: nothing is decided there). Whatever a fragment
reached first by the hint holds (a swapped or missing part, every field emptied, an object of
another class in the carried list), the answer is the one the read in turn gives."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from test_native_revalidate_carried import whole
from test_region_check_carried import _carried, _full, _taken
from spec_helpers import field_state, forged_instance

from mooncake.reshard.contracts.fragments import RuntimeBindingFragment
from mooncake.reshard.weight.types import PlacementFragment

COUNT = 20


def _plan() -> tuple[tuple[Any, ...], Any]:
    operations, carried = _carried([whole(f"a{k:02d}", 4096 * (k + 1)) for k in range(COUNT)])
    assert len(carried[1]) >= 12  # beyond the hints' distance (8 and 4 fragments on)
    return operations, carried


def test_intact_plan_is_taken() -> None:
    operations, carried = _plan()
    assert _taken(operations, carried) and _full(operations)


POSITIONS = [0, 3, 4, 5, 8, 9, 13, -1]


@pytest.mark.parametrize("position", POSITIONS)
@pytest.mark.parametrize("part", ["placement", "binding"])
def test_a_swapped_part_declines_wherever_it_is(position: int, part: str) -> None:
    base = PlacementFragment if part == "placement" else RuntimeBindingFragment
    sub = type("Sub", (base,), {})
    operations, carried = _plan()
    fragment = carried[1][position]
    held = getattr(fragment, part)
    forged = forged_instance(sub, dict(field_state(held)))
    object.__setattr__(fragment, part, forged)
    assert not _taken(operations, carried)


@pytest.mark.parametrize("position", POSITIONS)
@pytest.mark.parametrize("part", ["placement", "binding"])
def test_a_missing_part_declines_wherever_it_is(position: int, part: str) -> None:
    operations, carried = _plan()
    object.__delattr__(carried[1][position], part)
    assert not _taken(operations, carried)


@pytest.mark.parametrize("position", POSITIONS)
def test_an_emptied_fragment_declines_wherever_it_is(position: int) -> None:
    """(A bound fragment stored in its C layout has no instance dict to replace: every field
    emptied is what an empty replaced dict was.)"""
    operations, carried = _plan()
    fragment = carried[1][position]
    for field in dataclasses.fields(fragment):
        object.__delattr__(fragment, field.name)
    assert not _taken(operations, carried)


@pytest.mark.parametrize("position", POSITIONS)
def test_an_equal_twin_part_is_taken_wherever_it_is(position: int) -> None:
    operations, carried = _plan()
    fragment = carried[1][position]
    held = fragment.placement
    twin = forged_instance(type(held), dict(field_state(held)))
    object.__setattr__(fragment, "placement", twin)
    assert _taken(operations, carried) and _full(operations)


@pytest.mark.parametrize("position", POSITIONS)
@pytest.mark.parametrize("stranger", [None, 7, "x", object()])
def test_another_object_in_the_carried_fragments_declines(position: int, stranger: Any) -> None:
    operations, carried = _plan()
    carried[1][position] = stranger
    assert not _taken(operations, carried)


@pytest.mark.parametrize("position", [4, 9, -1])
def test_an_edited_value_reached_by_the_hint_first_declines(position: int) -> None:
    operations, carried = _plan()
    placement = carried[1][position].placement
    object.__setattr__(placement, "global_offset", tuple(x + 1 for x in placement.global_offset))
    assert not _taken(operations, carried)
    assert not _full(operations)

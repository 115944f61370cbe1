"""``_native.part_index_exact`` takes each part's ``participant_id`` in the walk that checks its
instance dict's keys (RESTORE39; exact.c ``pd_plain_values``) instead of looking it up after the
walk. The value is the one a lookup finds: a key equal to the interned name but another object is
still looked up; a dict with any key that is not an exact str still refuses (no probe could run
its ``__eq__``). Each case is compared with ``part_index_matches``'s Python reference."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from forge_helpers import EQ_CALLS as _EQ_CALLS
from forge_helpers import LoudKey as _LoudKey
from forge_helpers import sized_world

from mooncake.reshard import _native
from mooncake.reshard.weight import WeightPlacementPart
from mooncake.reshard.weight.placement import part_index_matches


def _placement() -> Any:
    logical, _, _, _ = sized_world(2)
    return copy.deepcopy(logical.target_placement)


def _reference(parts: Any, index: Any) -> bool:
    """``part_index_matches`` without its C shortcut: the Python loop alone."""
    if type(parts) is not tuple or type(index) is not dict or len(index) != len(parts):
        return False
    if any(type(key) is not str for key in index):
        return False
    for part in parts:
        if type(part) is not WeightPlacementPart:
            return False
        state = part.__dict__
        if any(type(key) is not str for key in state):
            return False
        participant_id = state.get("participant_id")
        if type(participant_id) is not str or index.get(participant_id) is not part:
            return False
    return len({id(part) for part in parts}) == len(parts)


def _rekeyed(part: Any, key: Any) -> None:
    """The part's ``participant_id`` stored under ``key`` (same text, another object), in a new
    (combined) instance dict: a split dict would keep its shared, interned key object."""
    rebuilt = {key if name == "participant_id" else name: value for name, value in part.__dict__.items()}
    object.__setattr__(part, "__dict__", rebuilt)
    assert any(name is key for name in part.__dict__)


@pytest.mark.parametrize("in_order", [True, False])
def test_equal_key_not_the_interned_name_is_found(in_order: bool) -> None:
    placement = _placement()
    parts = placement.parts
    index = {part.participant_id: part for part in (parts if in_order else parts[::-1])}
    fresh = "".join(["participant", "_id"])  # equal to the name, not the interned object
    assert fresh == "participant_id" and fresh is not "participant_id"
    _rekeyed(parts[0], fresh)
    assert _native.part_index_exact(parts, index, WeightPlacementPart) is True
    assert _reference(parts, index) is True
    assert part_index_matches(parts, index, exact_parts=True) is True


@pytest.mark.parametrize("in_order", [True, False])
def test_key_of_a_str_subclass_refuses_without_running_it(in_order: bool) -> None:
    placement = _placement()
    parts = placement.parts
    index = {part.participant_id: part for part in (parts if in_order else parts[::-1])}
    _rekeyed(parts[-1], _LoudKey("participant_id"))
    _EQ_CALLS.clear()
    assert _native.part_index_exact(parts, index, WeightPlacementPart) is False
    assert _EQ_CALLS == []
    assert _reference(parts, index) is False


@pytest.mark.parametrize("in_order", [True, False])
def test_extra_non_str_key_refuses(in_order: bool) -> None:
    placement = _placement()
    parts = placement.parts
    index = {part.participant_id: part for part in (parts if in_order else parts[::-1])}
    parts[0].__dict__[7] = "x"
    assert _native.part_index_exact(parts, index, WeightPlacementPart) is False
    assert _reference(parts, index) is False


@pytest.mark.parametrize("in_order", [True, False])
def test_missing_or_wrong_id(in_order: bool) -> None:
    placement = _placement()
    parts = placement.parts
    index = {part.participant_id: part for part in (parts if in_order else parts[::-1])}
    del parts[1].__dict__["participant_id"]
    assert _native.part_index_exact(parts, index, WeightPlacementPart) is False
    assert _reference(parts, index) is False
    parts[1].__dict__["participant_id"] = parts[0].participant_id
    assert _native.part_index_exact(parts, index, WeightPlacementPart) is False
    assert _reference(parts, index) is False
    parts[1].__dict__["participant_id"] = "".join(list(next(k for k, v in index.items() if v is parts[1])))
    assert _native.part_index_exact(parts, index, WeightPlacementPart) is True
    assert _reference(parts, index) is True

"""A placement's derived part index (``WeightPlacementManifest._part_index``, cached under
``_parts_by_participant``) decides nothing (session 29).

Bind's step 6 validates each binding against the part its participant id names in that index,
steps 7 and 11 read parts through it, and the revalidation's attested views (``_native.attested_view``)
take a part's rank from it. The cache is an ordinary instance-dict value, so it can be replaced or
edited in place. Before session 29 a forged index was trusted: a valid bind was refused, or
failed with ``AttributeError``/``KeyError`` instead of a rule's ``ValueError``, and a plan's
``replace()`` read a part's rank through it. Now ``_part_index`` returns the cache only while it is
exactly the placement's ``parts`` keyed by participant id, and the C view build calls it.

Each case forges the index of a world that binds (or that a rule refuses), and checks that bind,
sealed (no hook) and unsealed (a profile hook: every rule), gives what it gives with the index
intact; that the forged value's keys run no code; and that bind does not release the forged value
(its weakref callbacks would run mid-call).
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import pickle
import weakref
from typing import Any, Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forge_helpers import EQ_CALLS as _EQ_CALLS
from forge_helpers import LoudKey as _LoudKey
from forge_helpers import maybe_profiled, outcome, sized_world
from test_skip27_final_guards import _part_index_extra_fragment

from mooncake.reshard import _native
from mooncake.reshard.weight import WeightPlacementPart, bind_logical_transfer_plan
from mooncake.reshard.weight.placement import part_index_matches


def _swapped(placement: Any) -> dict:
    index = {part.participant_id: part for part in placement.parts}
    first, second = placement.parts[0], placement.parts[1]
    index[first.participant_id], index[second.participant_id] = second, first
    return index


# (name, the forged index of a placement)
FORGED: list[tuple[str, Callable[[Any], Any]]] = [
    ("swapped", _swapped),
    ("ints", lambda placement: {part.participant_id: 1 for part in placement.parts}),
    ("empty", lambda placement: {}),
    ("list", lambda placement: [1]),
    ("missing_one", lambda placement: {part.participant_id: part for part in placement.parts[1:]}),
    ("loud_keys", lambda placement: {_LoudKey(part.participant_id): part for part in placement.parts}),
    ("extra_entry", lambda placement: {**{p.participant_id: p for p in placement.parts}, "x": placement.parts[0]}),
]


def _forge(placement: Any, value: Any) -> None:
    placement._part_index()
    placement.__dict__["_parts_by_participant"] = value


def _swapped_participants(logical: Any, targets: Any, sources: Any, memory: Any) -> tuple[Any, Any]:
    """The first two target bindings trade participant ids, and the forged index trades the two
    parts: each binding is then checked against the part of the fragments it holds."""
    first, second = targets[0], targets[1]
    traded = (
        dataclasses.replace(first, participant_id=second.participant_id),
        dataclasses.replace(second, participant_id=first.participant_id),
    )
    _forge(logical.target_placement, _swapped(logical.target_placement))
    return traded + tuple(targets[2:]), sources


def _bind(logical: Any, targets: Any, sources: Any, profiled: bool) -> Any:
    return maybe_profiled(profiled, lambda: outcome(lambda: bind_logical_transfer_plan(logical, targets, source_bindings=sources)))


@pytest.mark.parametrize("profiled", [False, True], ids=["sealed", "every_rule"])
@pytest.mark.parametrize("tensors", [2, 200], ids=["4ops", "400ops"])
@pytest.mark.parametrize("side", ["target", "source"])
@pytest.mark.parametrize("name, forged", FORGED, ids=[case[0] for case in FORGED])
def test_a_forged_index_changes_no_bind(name: str, forged: Callable[[Any], Any], side: str, tensors: int, profiled: bool) -> None:
    logical, targets, sources, _memory = sized_world(tensors)
    expected = _bind(logical, targets, sources, profiled)
    assert not isinstance(expected, tuple), expected  # the world binds
    placement = logical.target_placement if side == "target" else logical.source_placement
    value = forged(placement)
    _forge(placement, value)
    _EQ_CALLS.clear()
    got = _bind(logical, targets, sources, profiled)
    assert got == expected
    assert _EQ_CALLS == []
    assert placement.__dict__["_parts_by_participant"] is value  # left in place, not released


@pytest.mark.parametrize("profiled", [False, True], ids=["sealed", "every_rule"])
@pytest.mark.parametrize("tensors", [2, 200], ids=["4ops", "400ops"])
@pytest.mark.parametrize("forge", [_part_index_extra_fragment, _swapped_participants])
def test_a_forged_index_admits_no_binding(forge: Callable[..., Any], tensors: int, profiled: bool) -> None:
    """Bindings the placement's parts refuse are refused with the rule's message, whatever part
    the forged index names (before: past step 6, then ``KeyError`` or the final revalidation),
    as with the cache dropped."""
    logical, targets, sources, memory = sized_world(tensors)
    targets, sources = forge(logical, targets, sources, memory)
    got = _bind(logical, targets, sources, profiled)
    logical.target_placement.__dict__.pop("_parts_by_participant")
    expected = _bind(logical, targets, sources, profiled)
    assert expected[0] == "ValueError" and expected[1].startswith("unknown placement fragment in runtime binding"), expected
    assert got == expected


@pytest.mark.parametrize("side", ["target", "source"])
@pytest.mark.parametrize("tensors", [2, 200], ids=["4ops", "400ops"])
def test_a_forged_index_changes_no_revalidation(side: str, tensors: int) -> None:
    """A bound plan's ``replace()`` and pickle round trip (the attested views, built in C) read
    the parts, not the forged index (before: the swapped parts' ranks)."""
    logical, targets, sources, _memory = sized_world(tensors)
    plan = bind_logical_transfer_plan(logical, targets, source_bindings=sources)
    placement = logical.target_placement if side == "target" else logical.source_placement
    _forge(placement, _swapped(placement))
    assert outcome(lambda: dataclasses.replace(plan)) == plan
    assert outcome(lambda: dataclasses.replace(dataclasses.replace(plan))) == plan
    assert outcome(lambda: pickle.loads(pickle.dumps(plan))) == plan


class _Watched:
    pass


@pytest.mark.parametrize("tensors", [2, 200], ids=["4ops", "400ops"])
def test_bind_does_not_release_a_forged_index(tensors: int) -> None:
    """The forged value is ignored, not replaced: replaced, its last reference would go mid-call
    and its weakref callbacks (foreign code, C code alone unseen by any watch) would run there."""
    logical, targets, sources, _memory = sized_world(tensors)
    placement = logical.target_placement
    inner = _Watched()
    fired: list[str] = []
    ref = weakref.ref(inner, lambda _ref: fired.append("released"))
    _forge(placement, {"x": inner})
    del inner
    gc.collect()
    plan = bind_logical_transfer_plan(logical, targets, source_bindings=sources)
    assert len(plan.operations) == 2 * tensors
    assert fired == [] and ref() is not None
    dataclasses.replace(plan)
    assert fired == [] and ref() is not None


def test_an_intact_index_is_the_cached_one() -> None:
    """The exact cached dict is returned while it matches (no rebuild per call), and a missing
    cache is stored."""
    logical, _targets, _sources, _memory = sized_world(2)
    placement = logical.target_placement
    placement.__dict__.pop("_parts_by_participant", None)
    first = placement._part_index()
    assert placement.__dict__["_parts_by_participant"] is first
    assert placement._part_index() is first
    assert first == {part.participant_id: part for part in placement.parts}
    first[placement.parts[0].participant_id] = placement.parts[1]  # edited in place: ignored
    rebuilt = placement._part_index()
    assert rebuilt is not first and rebuilt == {part.participant_id: part for part in placement.parts}


def _oracle(parts: Any, index: Any) -> bool:
    """``part_index_exact`` by brute force: the dict the parts build, compared entry by entry."""
    if type(parts) is not tuple or type(index) is not dict:
        return False
    if any(type(part) is not WeightPlacementPart for part in parts):
        return False
    if any(type(key) is not str for key in index) or any(type(part.participant_id) is not str for part in parts):
        return False
    if len({id(part) for part in parts}) != len(parts):
        return False
    built = {part.participant_id: part for part in parts}
    return len(built) == len(index) and all(index.get(key) is value for key, value in built.items())


_WORLD_PARTS = sized_world(2)[0].source_placement.parts  # 4 parts


@settings(max_examples=300, deadline=None)
@given(
    chosen=st.lists(st.integers(0, 3), max_size=5),
    entries=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=6),
    loud=st.booleans(),
    as_list=st.booleans(),
)
def test_part_index_exact_matches_its_oracle(chosen: list, entries: list, loud: bool, as_list: bool) -> None:
    """The C check against the brute-force oracle: parts drawn from a placement's (repeats
    allowed), an index of their ids (or "x"/"y", maybe str-subclass keys) naming parts or ints;
    the exact index of the drawn parts, then edited by the drawn entries."""
    parts = tuple(_WORLD_PARTS[i] for i in chosen)
    index: Any = {part.participant_id: part for part in parts}
    ids = [part.participant_id for part in _WORLD_PARTS] + ["x", "y"]
    for key_at, value_at in entries:
        key = _LoudKey(ids[key_at]) if loud else ids[key_at]
        index[key] = _WORLD_PARTS[value_at] if value_at < 4 else value_at
    if as_list:
        parts = list(parts)  # type: ignore[assignment]
    _EQ_CALLS.clear()
    assert _native.part_index_exact(parts, index, WeightPlacementPart) is _oracle(parts, index)
    assert part_index_matches(parts, index, exact_parts=True) is _oracle(parts, index)
    assert _EQ_CALLS == []


def test_part_index_exact_refuses_odd_parts() -> None:
    """Parts of another class, a part without an instance dict, a part whose id is not an
    exact str, a part whose instance dict has a str-subclass key: False, and no key runs."""
    part = _WORLD_PARTS[0]
    index = {part.participant_id: part}
    assert _native.part_index_exact((part,), index, WeightPlacementPart) is True
    assert _native.part_index_exact((part,), index, object) is False
    assert _native.part_index_exact((1,), {part.participant_id: 1}, int) is False
    odd = copy.copy(part)
    object.__setattr__(odd, "participant_id", _LoudKey(part.participant_id))
    assert _native.part_index_exact((odd,), {part.participant_id: odd}, WeightPlacementPart) is False
    loud_state = copy.copy(part)
    loud_state.__dict__[_LoudKey("participant_id_")] = 1
    _EQ_CALLS.clear()
    assert _native.part_index_exact((loud_state,), {part.participant_id: loud_state}, WeightPlacementPart) is False
    assert _EQ_CALLS == []
    with pytest.raises(TypeError):
        _native.part_index_exact((part,), index, 1)
    with pytest.raises(TypeError):
        _native.part_index_exact((part,), index)

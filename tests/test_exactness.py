"""_native.classes_within (csrc/exact.c) against a brute-force oracle, and
_planner.exactness.exact_placement on placements with one member of a subclass."""

from __future__ import annotations

import copy
from typing import Any, Optional

import pytest
from hypothesis import given, settings, strategies as st

from memory_executor import tp_placement

from mooncake.reshard import _native
from mooncake.reshard.weight._planner.exactness import exact_items, exact_placement
from mooncake.reshard.weight.types import ParallelRank


class Thing:
    def __init__(self, tag: Any) -> None:
        self.tag = tag


class SubThing(Thing):
    pass


class Bare:
    """No ``tag`` attribute."""


class SubInt(int):
    pass


def _oracle(items: Any, allowed: tuple[type, ...], name: Optional[str], name_allowed: tuple[type, ...]) -> bool:
    if type(items) is not tuple:
        return False
    for item in items:
        if type(item) not in allowed:
            return False
        if name is not None:
            if not hasattr(item, name) or type(getattr(item, name)) not in name_allowed:
                return False
    return True


_ITEM = st.one_of(
    st.integers(-3, 3).map(Thing),
    st.integers(-3, 3).map(lambda v: Thing(SubInt(v))),
    st.text(max_size=2).map(Thing),
    st.integers(-3, 3).map(SubThing),
    st.just(Bare()),
    st.integers(-3, 3),
)
_CLASSES = st.lists(st.sampled_from([Thing, SubThing, Bare, int, str]), max_size=4).map(tuple)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_ITEM, max_size=24),
    _CLASSES,
    st.sampled_from([None, "tag", "missing"]),
    _CLASSES,
    st.booleans(),
)
def test_classes_within_matches_the_oracle(items, allowed, name, name_allowed, as_list):
    values = list(items) if as_list else tuple(items)
    assert _native.classes_within(values, allowed, name, name_allowed) is _oracle(values, allowed, name, name_allowed)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(_ITEM, min_size=20, max_size=80),
    _CLASSES,
    st.sampled_from([None, "tag"]),
    _CLASSES,
)
def test_classes_within_long_tuples_match_the_oracle(items, allowed, name, name_allowed):
    # (past csrc/exact.c's hint distances: the item 32 on, the attribute of the one 16 on)
    values = tuple(items)
    assert _native.classes_within(values, allowed, name, name_allowed) is _oracle(values, allowed, name, name_allowed)


def test_attribute_read_only_from_allowed_items():
    reads = []

    class Loud(Thing):
        def __getattribute__(self, attr: str) -> Any:
            reads.append(attr)
            return object.__getattribute__(self, attr)

    assert _native.classes_within((Thing(1), Loud(2)), (Thing,), "tag", (int,)) is False
    assert reads == []


@pytest.mark.parametrize(
    ("allowed", "name", "name_allowed", "error"),
    [
        ([Thing], None, (), TypeError),
        ((Thing, 3), None, (), TypeError),
        ((Thing,) * 9, None, (), ValueError),
        ((Thing,), 3, (), TypeError),
        ((Thing,), "tag", [int], TypeError),
    ],
)
def test_bad_arguments_raise(allowed, name, name_allowed, error):
    with pytest.raises(error):
        _native.classes_within((Thing(1),), allowed, name, name_allowed)


def test_exact_items():
    assert exact_items((Thing(1), Thing(2)), Thing)
    assert not exact_items((Thing(1), SubThing(2)), Thing)
    assert not exact_items([Thing(1)], Thing)


def _subclass_copy(obj: Any) -> Any:
    sub = type(f"Sub{type(obj).__name__}", (type(obj),), {"__slots__": ()})
    hooked = copy.copy(obj)
    object.__setattr__(hooked, "__class__", sub)
    return hooked


def _placement() -> Any:
    return tp_placement(2, prefix="x", dp=2, shape=(4, 6), tensors=("wa", "wb"))


def _replace_in(owner: Any, field: str, index: int, value: Any) -> None:
    items = list(getattr(owner, field))
    items[index] = value
    object.__setattr__(owner, field, tuple(items))


def test_an_exact_placement_is_exact():
    assert exact_placement(_placement())


@pytest.mark.parametrize(
    "forge",
    [
        lambda p: _replace_in(p, "parts", 1, _subclass_copy(p.parts[1])),
        lambda p: _replace_in(p, "tensors", 0, _subclass_copy(p.tensors[0])),
        lambda p: _replace_in(p, "fragments", 2, _subclass_copy(p.fragments[2])),
        lambda p: _replace_in(p.parts[0], "tensors", 0, _subclass_copy(p.parts[0].tensors[0])),
        lambda p: _replace_in(p.parts[1], "fragments", 0, _subclass_copy(p.parts[1].fragments[0])),
        lambda p: object.__setattr__(p.parts[1], "rank", _subclass_copy(p.parts[1].rank)),
        lambda p: object.__setattr__(p.parts[0].fragments[0], "rank", _subclass_copy(p.parts[0].fragments[0].rank)),
        lambda p: object.__setattr__(p, "topology", _subclass_copy(p.topology)),
        lambda p: _replace_in(p.topology, "participants", 0, _subclass_copy(p.topology.participants[0])),
        lambda p: object.__setattr__(p.topology.participants[0], "rank", _subclass_copy(p.topology.participants[0].rank)),
        lambda p: object.__setattr__(p, "parts", list(p.parts)),
        lambda p: object.__delattr__(p, "tensors"),
    ],
    ids=[
        "part", "tensor", "fragment", "part_tensor", "part_fragment", "part_rank", "fragment_rank",
        "topology", "participant", "participant_rank", "parts_list", "tensors_missing",
    ],
)
def test_one_member_of_a_subclass_is_not_exact(forge):
    placement = _placement()
    forge(placement)
    assert not exact_placement(placement)


def test_the_rank_class_is_the_package_one():
    placement = _placement()
    assert type(placement.parts[0].rank) is ParallelRank


@pytest.mark.parametrize("position", [None, 0, 15, 16, 31, 32, 47, 79])
def test_classes_within_long_tuple_with_one_odd_item(position):
    items = [Thing(index) for index in range(80)]
    if position is not None:
        items[position] = Thing(str(position))
    values = tuple(items)
    expected = _oracle(values, (Thing,), "tag", (int,))
    assert expected is (position is None)
    assert _native.classes_within(values, (Thing,), "tag", (int,)) is expected
    assert _native.classes_within(values, (Thing,), None, ()) is True

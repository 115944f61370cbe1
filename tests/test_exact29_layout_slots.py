"""_native.classes_within reads the attribute of an item whose exact class is PlacementFragment's
C-owned layout from its slot (csrc/exact.c ex_layout_slots: the slot getattr reads, an empty one
the AttributeError it raises) instead of PyObject_GetAttr, and asks for the attribute object of
the item EX_AHEAD / 2 = 16 on (the item's own line EX_AHEAD = 32 on). The answers must be the
brute-force oracle's for slots emptied or holding another class's object at every position
(around the hints' distances), for a name that is an equal str but not the interned field name
(getattr's path), and for allowed classes mixing the layout class with a dict-backed one."""

from __future__ import annotations

from typing import Any, Callable, List

import pytest

from test_exactness import Thing, _oracle, _placement, _subclass_copy

from mooncake.reshard import _native
from mooncake.reshard.weight.types import ParallelRank


def _fragments() -> List[Any]:
    fragments = list(_placement().fragments)
    while len(fragments) < 41:  # past the hint's distance (16) and the prefetch's (32)
        fragments += list(_placement().fragments)
    return fragments


FRAGMENT = type(_placement().fragments[0])


def _empty(fragment: Any) -> None:
    object.__delattr__(fragment, "rank")


def _other(value: Any) -> Callable[[Any], None]:
    return lambda fragment: object.__setattr__(fragment, "rank", value)


FORGES = {
    "empty": _empty,
    "int": _other(3),
    "none": _other(None),
    "subclass": lambda fragment: object.__setattr__(fragment, "rank", _subclass_copy(fragment.rank)),
}


def _check(items: tuple, allowed: tuple, name: str = "rank") -> bool:
    got = _native.classes_within(items, allowed, name, (ParallelRank,))
    assert got is _oracle(items, allowed, name, (ParallelRank,))
    return got


def test_exact_fragments_pass() -> None:
    assert FRAGMENT.__module__.startswith("mooncake")
    assert _check(tuple(_fragments()), (FRAGMENT,))


@pytest.mark.parametrize("forge", sorted(FORGES))
@pytest.mark.parametrize("position", [0, 3, 15, 16, 17, 32, 33, -33, -17, -16, -15, -1])
def test_forged_slot_at_each_position(forge: str, position: int) -> None:
    fragments = _fragments()
    FORGES[forge](fragments[position])
    assert not _check(tuple(fragments), (FRAGMENT,))


def test_a_name_that_is_not_the_interned_field_name() -> None:
    name = "".join(["ra", "nk"])
    fragments = _fragments()
    assert _check(tuple(fragments), (FRAGMENT,), name)
    _empty(fragments[6])
    assert not _check(tuple(fragments), (FRAGMENT,), name)


def test_another_field_and_a_missing_name() -> None:
    fragments = tuple(_fragments())
    assert _native.classes_within(fragments, (FRAGMENT,), "tensor_id", (str,)) is True
    assert _native.classes_within(fragments, (FRAGMENT,), "tensor_id", (ParallelRank,)) is False
    assert _native.classes_within(fragments, (FRAGMENT,), "no_such_field", (ParallelRank,)) is False


def test_mixed_allowed_classes() -> None:
    fragments = _fragments()
    thing_rank = Thing(1)
    thing_rank.rank = ParallelRank()
    items = tuple(fragments[:5]) + (thing_rank,) + tuple(fragments[5:])
    assert _check(items, (Thing, FRAGMENT))
    assert _check(items, (FRAGMENT, Thing))
    assert not _check(items, (FRAGMENT,))
    thing_rank.rank = 7
    assert not _check(items, (FRAGMENT, Thing))

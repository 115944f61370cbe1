"""``_native.same_items`` (csrc/planobj.c) against ``all(map(operator.is_, first, second))``,
and the planner checks that use it (``_same_keys``, ``_distinct_are_the_keys``)."""

from __future__ import annotations

from operator import is_
from typing import Any

import pytest
from hypothesis import given, strategies as st

from mooncake.reshard import _native
from mooncake.reshard.weight._planner.core import _same_keys
from mooncake.reshard.weight._planner.ownership import _distinct_are_the_keys


class Liar:
    """Equal to everything (hashed by identity, so two are two dict keys), and records any use: same_items must never
    compare, hash or otherwise read an item."""

    used = 0

    def __eq__(self, other: object) -> bool:
        Liar.used += 1
        return True

    def __ne__(self, other: object) -> bool:
        Liar.used += 1
        return False

    def __hash__(self) -> int:
        Liar.used += 1
        return id(self) >> 4

    def __bool__(self) -> bool:
        Liar.used += 1
        return True


class Raiser:
    def __eq__(self, other: object) -> bool:
        raise AssertionError("compared")

    def __hash__(self) -> int:
        raise AssertionError("hashed")


POOL: list[Any] = [Liar(), Liar(), Raiser(), "a", "a" * 2, 1, 10**30, None, (), (1,)]


def _oracle(first: Any, second: Any) -> bool:
    return all(map(is_, first, second))


@given(
    st.lists(st.integers(0, len(POOL) - 1), max_size=40),
    st.lists(st.tuples(st.integers(0, 39), st.integers(0, len(POOL) - 1)), max_size=4),
    st.booleans(),
    st.booleans(),
)
def test_sequences_match_the_oracle(picks: list[int], edits: list[tuple[int, int]], a_tuple: bool, b_tuple: bool) -> None:
    first = [POOL[i] for i in picks]
    second = list(first)
    for at, value in edits:
        if at < len(second):
            second[at] = POOL[value]
    a: Any = tuple(first) if a_tuple else first
    b: Any = tuple(second) if b_tuple else second
    Liar.used = 0
    assert _native.same_items(a, b) is _oracle(a, b)
    assert Liar.used == 0


@given(st.lists(st.integers(0, 30), unique=True, max_size=30), st.integers(0, 3))
def test_dicts_match_the_oracle(keys: list[int], change: int) -> None:
    objects = [f"k{k}" for k in keys]
    first = dict.fromkeys(objects, 0)
    if change == 0:
        second = dict.fromkeys(objects, 1)  # the same key objects, other values
    elif change == 1:
        second = dict.fromkeys(reversed(objects), 0)  # the same keys in another order
    elif change == 2:
        second = dict.fromkeys([("".join(["k", o[1:]])) for o in objects], 0)  # equal keys, other objects
    else:
        second = dict.fromkeys(objects[:-1], 0)  # one key fewer
    expected = len(first) == len(second) and _oracle(first, second)
    assert _native.same_items(first, second) is expected
    assert _same_keys(first, second) is expected


def test_dict_keys_are_not_hashed_or_compared() -> None:
    a, b = Liar(), Liar()
    first = {a: 1, b: 2}
    second = dict(first)
    third = {b: 1, a: 2}
    fewer = {a: 1}
    assert len(first) == 2
    Liar.used = 0
    assert _native.same_items(first, second) is True
    assert _native.same_items(first, third) is False  # equal (by the liars' ==), not the same
    assert _native.same_items(first, fewer) is False
    assert Liar.used == 0


def test_equal_but_distinct_items_are_not_the_same() -> None:
    x = "".join(["tensor", ".0"])
    y = "".join(["tensor", ".", "0"])
    assert x == y and x is not y
    assert _native.same_items([x], [y]) is False
    assert _native.same_items((x,), [x]) is True
    assert _native.same_items([float("nan")] * 2, [float("nan")] * 2) is False


def test_other_arguments_decline() -> None:
    class MyList(list):  # type: ignore[type-arg]
        pass

    class MyDict(dict):  # type: ignore[type-arg]
        pass

    items = [1, 2]
    assert _native.same_items(items, [1]) is None  # different lengths: map would stop early
    assert _native.same_items(MyList(items), items) is None
    assert _native.same_items(items, MyList(items)) is None
    assert _native.same_items({1: 2}, MyDict({1: 2})) is None
    assert _native.same_items({1: 2}, [1]) is None  # a dict and a list
    assert _native.same_items(iter(items), items) is None
    assert _native.same_items(range(2), items) is None
    assert _native.same_items({1, 2}, {1, 2}) is None
    assert _native.same_items("ab", "ab") is None
    assert _native.same_items(None, None) is None
    with pytest.raises(TypeError):
        _native.same_items(items)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        _native.same_items(items, items, items)  # type: ignore[call-arg]


def test_empty() -> None:
    assert _native.same_items([], ()) is True
    assert _native.same_items({}, {}) is True


def _distinct_rule(ids: list[Any], tensors: dict[Any, Any]) -> bool:
    return len(ids) == len(tensors) and all(map(tensors.__contains__, ids))


@given(st.lists(st.integers(0, 20), unique=True, max_size=20), st.integers(0, 4))
def test_distinct_are_the_keys_matches_its_rule(keys: list[int], change: int) -> None:
    objects = [f"t{k}" for k in keys]
    tensors = dict.fromkeys(objects, None)
    ids = list(objects)
    distinct_keys: Any = list(tensors)
    if change == 1 and ids:
        ids[0] = "".join(["t", ids[0][1:]])  # an equal id held by another object: looked up
    elif change == 2 and ids:
        ids[-1] = "absent"
    elif change == 3:
        distinct_keys = tuple(distinct_keys)  # not a list: every id looked up
    elif change == 4 and len(ids) > 1:
        ids.reverse()  # same keys, other order: not the same objects pairwise, looked up
    assert _distinct_are_the_keys(ids, tensors, distinct_keys) is _distinct_rule(ids, tensors)
    assert _distinct_are_the_keys(ids, tensors, None) is _distinct_rule(ids, tensors)


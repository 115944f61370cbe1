"""``fragment_columns``' id order (issue 5, round 15): with the fragment and rank classes the
address-order pass reads each id's first 16 UTF-8 bytes where it visits the fragment, and the
order flag is then decided from those heads, comparing the str objects only when a head is
missing (an id that cannot be encoded) or two heads are equal. An exact tuple is read as it is
(no private copy).

The flag must be what the in-order call gives and what the brute-force oracle says: -1 when some
id is not an exact str, else 1 when the ids are in non-decreasing order, else 0. Ids are forged
(``object.__setattr__``) to hit every edge of the heads: NUL characters against the zero pad,
a shared prefix longer than the heads, multi-byte UTF-8, lone surrogates, str subclasses and
non-str values."""

from __future__ import annotations

from typing import Any, List

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mooncake.reshard import _native
from mooncake.reshard.weight.types import ParallelRank, PlacementFragment


class _Str(str):
    pass


def _fragments(count: int) -> List[PlacementFragment]:
    rank = ParallelRank(tp=1)
    return [
        PlacementFragment(
            tensor_id=f"t{i % 3}",
            global_offset=(4 * i, 0),
            local_shape=(4, 8),
            nbytes=64,
            rank=rank,
        )
        for i in range(count)
    ]


def _with_ids(ids: List[Any]) -> List[PlacementFragment]:
    made = _fragments(len(ids))
    for fragment, value in zip(made, ids):
        object.__setattr__(fragment, "placement_fragment_id", value)
    return made


def _oracle(ids: List[Any]) -> int:
    if not all(type(value) is str for value in ids):
        return -1
    return 1 if all(a <= b for a, b in zip(ids, ids[1:])) else 0


def _check(ids: List[Any]) -> None:
    made = _with_ids(ids)
    expected = _oracle(ids)
    for items in (made, tuple(made)):
        fast = _native.fragment_columns(items, PlacementFragment, ParallelRank)
        plain = _native.fragment_columns(items)
        assert fast[3] == plain[3] == expected
        assert fast[:4] == plain
        assert all(a is b for a, b in zip(fast[0], ids))
        assert fast[4] is not None  # the address-order pass decided (the geometry fits)


_PREFIX = "sha256:" + "0" * 12  # 19 characters: longer than the 16-byte heads
_ALPHABET = st.sampled_from(["", "\x00", "a", "b", "\x7f", "\xe9", "\u20ac", "\U0001d11e", "0", "f"])
_ID = st.builds(
    lambda prefix, parts: prefix + "".join(parts),
    st.sampled_from(["", "sha256:", "sha256:0", "abcdefg\xe9", _PREFIX, _PREFIX + "\x00"]),
    st.lists(_ALPHABET, max_size=4),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_ID, min_size=1, max_size=12), st.booleans())
def test_order_equals_the_oracle(ids: List[str], sort: bool) -> None:
    _check(sorted(ids) if sort else ids)


@pytest.mark.parametrize(
    "ids",
    [
        ["a", "a\x00"],  # the zero pad against a real NUL: equal heads, compared as str
        ["a\x00", "a"],
        ["a\x00\x00", "a\x00"],
        [_PREFIX + "b", _PREFIX + "a"],  # equal heads, order decided past them
        [_PREFIX + "a", _PREFIX + "b"],
        [_PREFIX, _PREFIX],
        ["\xe9", "\U0001d11e", "\uffff"],  # byte order of UTF-8 is code point order
        ["\U0001d11e", "\uffff"],
        ["a\ud800", "a\ud801"],  # lone surrogates: not encodable, compared as str
        ["a\ud801", "a\ud800"],
        ["b", "a\ud800"],
        ["sha256:" + "f" * 64, "sha256:" + "0" * 64],
        ["sha256:01", "sha256:00"],  # equal first words, the second decides
        ["sha256:00", "sha256:01"],
        ["abcdefghb", "abcdefgha"],
        ["abcdefgh" + "x" * 7 + "b", "abcdefgh" + "x" * 7 + "a"],  # the 16th byte decides
        ["abcdefgh" + "x" * 7 + "a", "abcdefgh" + "x" * 7 + "b"],
        ["abcdefg\xe9", "abcdefg\xe8"],  # a two-byte character across the words
        ["abcdefg\U0001d11e", "abcdefg\uffff"],
        ["sha256:" + "0" * 64, "sha256:" + "f" * 64],
    ],
)
def test_order_edges(ids: List[str]) -> None:
    _check(ids)


@pytest.mark.parametrize("bad", [_Str("b"), 5, None, b"b"])
@pytest.mark.parametrize("position", [0, 1, 2])
def test_non_exact_str_ids_give_minus_one(bad: Any, position: int) -> None:
    ids: List[Any] = ["a", "b", "c"]
    ids[position] = bad
    _check(ids)
    ids = ["c", "b", "a"]  # also out of order: -1 still wins
    ids[position] = bad
    _check(ids)


def test_tuple_subclass_and_lists_read_alike() -> None:
    class Tup(tuple):
        pass

    made = _with_ids(["b", "a", "c"])
    want = _native.fragment_columns(made)
    assert _native.fragment_columns(Tup(made), PlacementFragment, ParallelRank)[:4] == want
    assert _native.fragment_columns(tuple(made), PlacementFragment, ParallelRank)[:4] == want
    assert want[3] == 0


def test_a_hook_cannot_resize_a_tuple_being_read() -> None:
    """A rank class that is not exactly ParallelRank sends the call to the in-order loop, whose
    attribute reads run Python code: with a tuple the items cannot change under it."""
    log: List[str] = []

    class Rank(ParallelRank):
        def __getattribute__(self, name: str) -> Any:
            log.append(name)
            return super().__getattribute__(name)

    made = _fragments(4)
    object.__setattr__(made[2], "rank", Rank(tp=1))
    items = tuple(made)
    got = _native.fragment_columns(items, PlacementFragment, ParallelRank)
    assert got[:4] == _native.fragment_columns(list(items))
    assert got[4] is None and "dp" in log

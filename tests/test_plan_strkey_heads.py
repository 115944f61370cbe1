"""The C sort by str keys (``sorted_by_str_keys``, ``sorted_groups``; issue 5, round 15) reads
each key's first 16 UTF-8 bytes once, where the caller first touches the key, and derives the
keys' common prefix and 8-byte sort heads from those words when the common prefix is at most 8
bytes (longer ones read the keys again).

Differential against Python's stable ``sorted`` on keys built around the word boundaries: a
shared prefix of 0 to 20 characters (NUL, multi-byte UTF-8, the "sha256:" of fragment ids),
keys shorter than 16 bytes and than the prefix, equal keys (stability), one key."""

from __future__ import annotations

from typing import List

from hypothesis import given, settings
from hypothesis import strategies as st

from mooncake.reshard import _native

_CHARS = st.sampled_from(["a", "b", "\x00", "\x01", "\x7f", "\xe9", "\u4e2d", "\U0001f600", "0", "f", "\xff"])
_PREFIXES = st.one_of(
    st.sampled_from(["", "sha256:", "sha256:0", "layers.", "abcdefgh", "abcdefghijklmno", "abcdefghijklmnop"]),
    st.lists(_CHARS, max_size=20).map("".join),
)


@st.composite
def _keys(draw: st.DrawFn) -> List[str]:
    prefix = draw(_PREFIXES)
    suffixes = draw(st.lists(st.lists(_CHARS, max_size=10).map("".join), min_size=1, max_size=30))
    keys = [prefix + suffix for suffix in suffixes]
    if draw(st.booleans()):  # a key cut inside the prefix
        keys.append(prefix[: draw(st.integers(0, len(prefix)))])
    return keys


def _expected_order(keys: List[str]) -> List[int]:
    return sorted(range(len(keys)), key=keys.__getitem__)


@settings(max_examples=400, deadline=None)
@given(_keys())
def test_sorted_by_str_keys_equals_sorted(keys: List[str]) -> None:
    items = [object() for _ in keys]
    order = _expected_order(keys)
    got = _native.sorted_by_str_keys(items, keys, True)
    assert got is not None
    ordered, rows = got
    assert [id(x) for x in ordered] == [id(items[i]) for i in order]
    assert [ordered[r] is items[i] for i, r in enumerate(rows)] == [True] * len(keys)


@settings(max_examples=200, deadline=None)
@given(_keys(), st.integers(1, 4))
def test_sorted_groups_equals_sorted(keys: List[str], ngroups: int) -> None:
    items = [object() for _ in keys]
    group_of = [i % ngroups for i in range(len(keys))]
    extra = list(range(100, 100 + len(keys)))
    order = _expected_order(keys)
    got = _native.sorted_groups(items, keys, group_of, ngroups, extra)
    assert got is not None
    ordered, rows, by_group, extras = got
    assert [id(x) for x in ordered] == [id(items[i]) for i in order]
    assert [ordered[r] is items[i] for i, r in enumerate(rows)] == [True] * len(keys)
    for g in range(ngroups):
        members = [i for i in order if group_of[i] == g]
        assert [id(x) for x in by_group[g]] == [id(items[i]) for i in members]
        assert list(extras[g]) == [extra[i] for i in members]


def test_word_boundaries() -> None:
    cases = [
        ["b", "a"],
        ["a"],
        ["abcdefgh" + "z", "abcdefgh" + "a", "abcdefgh"],  # the common prefix is exactly 8 bytes
        ["abcdefg" + "z", "abcdefg" + "a"],  # 7 bytes: one byte of the second word in the head
        ["abcdefghi" + "b", "abcdefghi" + "a"],  # 9 bytes: the keys are read again
        ["x" * 15 + "b", "x" * 15 + "a", "x" * 15],
        ["x" * 16 + "b", "x" * 16 + "a", "x" * 16],
        ["a\x00", "a", "a\x00\x00", "a\x01"],  # NUL against the zero pad
        ["\xe9b", "\xe9a", "\xe9"],  # a two-byte character in the prefix
        ["sha256:" + "f" * 64, "sha256:" + "0" * 64, "sha256:" + "0" * 63 + "1"],
        ["same", "same", "same"],  # stable
    ]
    for keys in cases:
        items = [object() for _ in keys]
        got = _native.sorted_by_str_keys(items, keys)
        assert [id(x) for x in got] == [id(items[i]) for i in _expected_order(keys)], keys

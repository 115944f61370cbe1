"""FRONT39: strkey_sort keeps the (head, position) pairs and the radix sort's scratch in its
scratch entries and gathers the entries from the last one down (fewer fresh pages at 10^6).
The order must stay exactly Python's stable ``sorted`` by key, at every size around the
insertion-sort cutoff (32) and with ties, shared prefixes, short and non-ASCII keys."""

import array
import hashlib

from hypothesis import given, settings
from hypothesis import strategies as st

import mooncake.reshard._native as native

_ALPHABET = st.sampled_from(["", "a", "b", "ab", "ba", "\x00", "é", "€", "😀", "sha256:", "sha256:0", "sha256:f"])
_KEY = st.lists(_ALPHABET, max_size=6).map("".join)


def _check(keys):
    items = [object() for _ in keys]
    expect = sorted(range(len(keys)), key=lambda i: keys[i])  # stable: ties in input order
    out, rows = native.sorted_by_str_keys(items, list(keys), True)
    assert [id(x) for x in out] == [id(items[i]) for i in expect]
    place = [0] * len(keys)
    for k, i in enumerate(expect):
        place[i] = k
    assert list(rows) == place
    packed, distinct = native.sorted_by_str_keys(items, list(keys), True, True)
    assert array.array("q", packed).tolist() == place
    assert distinct == (len(set(keys)) == len(keys))


@settings(max_examples=300, deadline=None)
@given(st.lists(_KEY, min_size=0, max_size=120))
def test_front39_sort_matches_sorted(keys):
    _check(keys)


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=0, max_value=3000), st.integers(min_value=0, max_value=40))
def test_front39_hex_ids_with_repeats(n, repeats):
    keys = ["sha256:" + hashlib.sha256(str(i).encode()).hexdigest() for i in range(n)]
    keys += keys[: min(repeats, n)]  # equal keys: stable, and distinct turns false
    _check(keys)


def test_front39_sizes_around_cutoff():
    for n in (31, 32, 33, 34, 63, 64, 65, 1000):
        _check([str((i * 7919) % 97) for i in range(n)])
        _check(["same"] * n)
        _check(["p" * 20 + str(n - i) for i in range(n)])

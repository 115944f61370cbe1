"""``_native.attested_executors``' id sort with integer keys (session 29, ``bd_sortkeys_fill``).

A part's ids that are not increasing in evidence order are sorted by keys: the eight code
points after the prefix all ids of at most 64 code points share, one byte each, when each is
below 256; equal keys, and ids without a key, compare in full. The order must be code point
order exactly, so the ids here sit on every edge of that: a shared prefix longer than the key,
ids equal in the key's eight code points, one id a prefix of another, NUL and 0xFF code points
(the padding byte and the largest byte), code points of 256 and above inside and past the key's
window (0x161 & 0xFF is "a"), and ids of 64 and 65 code points (keyed and not) mixed. The
oracle is the Python rows on an independent attestation (test_binder23_sorted_ids._agree)."""

from __future__ import annotations

from typing import Any, List

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from test_binder23_sorted_ids import _agree, _binding, _renamed


def _check(ids: List[str]) -> None:
    placement, binding = _binding()
    fragments = list(binding.fragments)[: len(ids)]
    assert len(fragments) == len(ids)
    built = _agree(placement, binding, _renamed(fragments, ids))
    if len(set(ids)) == len(ids):
        assert built is not None
        (snapshots,) = built[0].values()
        assert [s.fragment_id for s in snapshots] == sorted(ids)


EDGE_SETS = [
    # a shared prefix longer than the key, the rest past it
    ["p" * 30 + f"-{k}" for k in (10, 2, 33, 1, 0, 9, 100, 21, 3, 4)],
    # equal in the key's eight code points after the prefix, differing after them
    ["x-" + "abcdefgh" + tail for tail in ("z", "a", "", "m", "aa", "\u0100", "\x00", "b", "y", "\xff")],
    # prefixes of one another (the shorter first), and NUL code points (the padding byte)
    ["q", "q\x00", "q\x00\x00", "qa", "q\x00a", "qa\x00", "q\xff", "q\x00\xff", "qb", "q\x01"],
    # code points of 256 and above inside the key's window: no key, compared in full
    ["k-\u0161", "k-a", "k-b", "k-\u0061\u0161", "k-\u0100", "k-\xff", "k-\U0001f600", "k-\u4e00", "k-", "k-aa"],
    # 64 and 65 code points mixed (keyed and not), with a shared prefix
    ["L" * 63 + c for c in "9a0Zz"] + ["L" * 64 + c for c in "9a0Zz"],
    # no shared prefix at all
    ["b", "a", "ba", "ab", "\xff", "\x00", "aaaaaaaaab", "aaaaaaaaaa", "c" * 9, "c" * 8],
]


@pytest.mark.parametrize("ids", EDGE_SETS)
def test_edge_sets_sort_in_code_point_order(ids: List[str]) -> None:
    assert len(set(ids)) == len(ids)
    _check(ids)
    _check(list(reversed(ids)))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_ids_with_shared_prefixes_sort_in_code_point_order(data: st.DataObject) -> None:
    placement, binding = _binding()
    n = data.draw(st.integers(2, len(binding.fragments)))
    prefix = data.draw(st.sampled_from(["", "dst-5-", "p" * 20, "L" * 60]))
    alphabet = st.sampled_from(["\x00", "\x01", "0", "1", "9", "a", "\xff", "\u0100", "\u0161", "\U0001f600"])
    tails = data.draw(st.lists(st.text(alphabet, min_size=0, max_size=12), min_size=n, max_size=n, unique=True))
    ids = [prefix + tail for tail in tails]
    if all(not i for i in ids):
        return
    ids = [i if i else "-" for i in ids]
    if len(set(ids)) != n:
        return
    _check(ids)

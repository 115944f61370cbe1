"""Session 21: the sorts behind WeightPlacementManifest.from_fragments against brute-force oracles
at sizes past the small-input shortcuts (more than 32 keys: the head radix sort of (head, position)
pairs, and the distinct form's per-group radix sort of tensor positions)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mooncake.reshard import _native

# keys sharing long prefixes (the 8-byte heads tie, the full comparison decides), equal keys (the
# sort must stay stable) and non-ASCII text (UTF-8 byte order is code point order)
_PREFIXES = st.sampled_from(["", "sha256:", "sha256:0123456789", "experts.1", "é", "\U0001f600"])
_KEYS = st.builds(lambda p, s: p + s, _PREFIXES, st.text(alphabet="ab0f\x7fé\U0001f600", max_size=3))


@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(_KEYS, st.integers(0, 4), st.integers(0, 2**31 - 1)), min_size=33, max_size=300),
       st.booleans())
def test_sorted_groups_large_matches_oracle(entries: list[tuple[str, int, int]], narrow: bool) -> None:
    ngroups = 5
    items = [object() for _ in entries]
    keys = [key for key, _, _ in entries]
    group_of = [group for _, group, _ in entries]
    # narrow: tensor positions in a small range (the stamp shortcut), else spread up to 2**31 - 1
    extra = [value % 7 if narrow else value for _, _, value in entries]
    order = sorted(range(len(items)), key=keys.__getitem__)
    plain = _native.sorted_groups(items, keys, group_of, ngroups, extra)
    distinct = _native.sorted_groups(items, keys, group_of, ngroups, extra, True)
    assert plain is not None and distinct is not None
    for ordered, rows, by_group, _ in (plain, distinct):
        assert ordered == tuple(items[i] for i in order)
        assert [ordered[rows[i]] is items[i] for i in range(len(items))] == [True] * len(items)
        for group in range(ngroups):
            assert by_group[group] == tuple(items[i] for i in order if group_of[i] == group)
    for group in range(ngroups):
        assert plain[3][group] == tuple(extra[i] for i in order if group_of[i] == group)
        assert list(distinct[3][group]) == sorted({extra[i] for i in range(len(items)) if group_of[i] == group})


@settings(max_examples=120, deadline=None)
@given(st.lists(_KEYS, min_size=33, max_size=300))
def test_sorted_by_str_keys_large_matches_oracle(keys: list[str]) -> None:
    items = [object() for _ in keys]
    result = _native.sorted_by_str_keys(items, keys, True)
    assert result is not None
    ordered, rows = result
    order = sorted(range(len(items)), key=keys.__getitem__)
    assert ordered == [items[i] for i in order]
    assert [ordered[rows[i]] is items[i] for i in range(len(items))] == [True] * len(items)

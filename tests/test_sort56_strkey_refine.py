"""SORT56: strkey_sort orders a run of equal 8-byte heads by the next 8 bytes (a radix sort of
the run, then each sub-run 8 bytes further on, up to 8 steps, then by comparison) instead of
qsort. The order must stay exactly Python's stable ``sorted`` by key: runs longer than the
insertion cutoff (16) whose keys share long stretches past the head (deeper than the 8 steps),
keys that differ only in trailing NUL characters (equal once zero padded), equal keys (input
order), mixed lengths and non-ASCII keys; through both entry points that sort (the order and
rows of ``sorted_by_str_keys``, the groups of ``sorted_groups``)."""

from hypothesis import given, settings
from hypothesis import strategies as st

import mooncake.reshard._native as native

from test_front39_strkey_sort import _check

_PIECE = st.sampled_from(["", "a", "b", "\x00", "é", "😀", "7", "12", "z" * 9])
_SHORT = st.lists(_PIECE, max_size=3).map("".join)


def _groups_check(keys):
    """sorted_groups: the items in stable key order, and each group's items and extras in it."""
    items = tuple(object() for _ in keys)
    group_of = [i % 3 for i in range(len(keys))]
    ordered, positions, by_group, extra = native.sorted_groups(items, list(keys), group_of, 3, list(range(len(keys))))
    expect = sorted(range(len(keys)), key=lambda i: keys[i])
    assert [id(x) for x in ordered] == [id(items[i]) for i in expect]
    assert [expect.index(i) for i in range(len(keys))] == list(positions)
    for g in range(3):
        assert list(extra[g]) == [i for i in expect if i % 3 == g]
        assert [id(x) for x in by_group[g]] == [id(items[i]) for i in expect if i % 3 == g]


@settings(max_examples=150, deadline=None)
@given(
    st.text(alphabet="mp.", max_size=12),
    st.lists(st.tuples(_SHORT, st.integers(min_value=0, max_value=90), _SHORT), min_size=17, max_size=300),
)
def test_sort56_runs_past_the_head_match_sorted(prefix, parts):
    """A shared prefix, then a short part (the heads: few distinct, so long runs), a shared
    filler of 0-90 bytes (the refine steps, up to past their bound), and a short tail."""
    keys = [prefix + a + "x" * filler + b for a, filler, b in parts]
    _check(keys)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=6), min_size=17, max_size=400), st.integers(0, 40))
def test_sort56_trailing_nuls_and_repeats(nuls, width):
    """Keys equal once zero padded (only their trailing NULs differ), many repeated: after every
    step a run past all of its keys' ends, ordered by length, ties in input order."""
    keys = ["w" * width + "\x00" * k for k in nuls]
    _check(keys)


def test_sort56_tensor_ids():
    """Tensor-id-like keys (a long common prefix, the layer, a long shared middle, the expert
    and the matrix), shuffled deterministically, with repeats."""
    keys = [
        f"model.layers.{layer}.mlp.experts.{expert}.{matrix}.weight"
        for layer in range(12)
        for expert in range(40)
        for matrix in ("w1", "w2", "w3")
    ]
    keys = [keys[(i * 7919) % len(keys)] for i in range(len(keys))] + keys[:50]
    _check(keys)
    _groups_check(keys)


def test_sort56_deep_shared_middle():
    """Runs whose keys agree for far more than the 8 refine steps (64 bytes) past the head: the
    comparison sort finishes them."""
    middle = "m" * 200
    keys = [f"{i % 3}{middle}{(i * 37) % 101}" for i in range(500)]
    _check(keys)
    _groups_check(keys)


def test_sort56_sizes_around_the_insertion_cutoff():
    for n in (15, 16, 17, 18, 33, 200):
        _check(["run." + str((i * 13) % n).rjust(12, "0") for i in range(n)])
        _check(["run." + "q" * 20 + str(n - i) for i in range(n)])


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), _SHORT, st.integers(0, 30), _SHORT), min_size=17, max_size=200))
def test_sort56_groups_match_sorted(parts):
    keys = [str(a) + "g" * 8 + b + "y" * filler + c for a, b, filler, c in parts]
    _groups_check(keys)


_HEX = "0123456789abcdef"
# the bytes around the hex ranges' edges, and others: any one of them in a head keeps the
# heads' own values (not their hex value) as the sort's keys
_NOT_HEX = ["/", ":", "@", "`", "g", "A", "F", "\x00", "\x7f", "é", "😀", "<cut>"]


@settings(max_examples=120, deadline=None)
@given(
    st.sampled_from(["sha256:", "", "x", "sha256:0000"]),
    st.lists(st.text(alphabet=_HEX, min_size=8, max_size=20), min_size=33, max_size=400),
    st.lists(st.tuples(st.integers(0, 399), st.integers(0, 19), st.sampled_from(_NOT_HEX)), max_size=3),
)
def test_sort56_hex_heads(prefix, digits, planted):
    """Derived-id-like keys (a prefix, then lowercase hex digits): sorted by the digits' 32-bit
    value when every head is hex, else by the heads' bytes; a planted non-hex character or a key
    cut short (a zero padded head) anywhere must give the same order as ``sorted``."""
    keys = [prefix + d for d in digits]
    for at, offset, ch in planted:
        at %= len(keys)
        key = keys[at]
        cut = min(len(prefix) + offset, len(key))
        keys[at] = key[:cut] if ch == "<cut>" else key[:cut] + ch + key[cut + 1 :]
    _check(keys)
    _groups_check(keys)


def test_sort56_hex_digit_order():
    """Every hex digit against every other in each head position (the value's nibbles)."""
    keys = ["sha256:" + "7" * k + a + "3" * (7 - k) for k in range(8) for a in _HEX for _ in range(2)]
    keys = [keys[(i * 37) % len(keys)] for i in range(len(keys))]
    _check(keys)

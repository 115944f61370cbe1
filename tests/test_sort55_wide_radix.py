"""Session 55: ``mr_radix_sort`` (csrc/coverage_kernels.h) sorts 16,384 records and more with 11-bit
digits (six passes of 64-bit keys, digits straddling the key's bytes), fewer with 8-bit ones.
Through the string sort whose (head, position) pairs it orders (``sorted_by_str_keys``), the
order must stay exactly Python's stable ``sorted`` at every size around that cutoff, with heads
differing in any of their 64 bits (non-ASCII text sets the bytes' top bits), digits shared by
every key (skipped passes) and ties (stability)."""

import hashlib
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from test_front39_strkey_sort import _check

WIDE_MIN = 16384  # MR_RADIX_WIDE_MIN


def test_sort55_hex_ids_around_the_cutoff():
    ids = ["sha256:" + hashlib.sha256(str(i).encode()).hexdigest() for i in range(WIDE_MIN + 2)]
    for n in (WIDE_MIN - 1, WIDE_MIN, WIDE_MIN + 1):
        keys = ids[:n]
        keys[n // 2] = keys[n // 3]  # a tie, kept in input order
        _check(keys)


# Characters whose UTF-8 bytes set each bit of a head byte: ASCII (bits 0-6), two- and
# four-byte sequences (bit 7, lead and continuation bytes).
_CHARS = "\x00\x01\x02\x04\x08\x10\x20\x40\x7f" + "é\u07ff\u0080" + "\U0001f600\U0010ffff"


@settings(max_examples=20, deadline=None)
@given(
    st.integers(min_value=0, max_value=2**32),
    st.integers(min_value=WIDE_MIN - 2, max_value=WIDE_MIN + 3000),
    st.lists(st.sampled_from(_CHARS), min_size=1, max_size=4, unique=True),
    st.integers(min_value=0, max_value=12),
    st.text(alphabet="ab", max_size=3),
)
def test_sort55_heads_vary_in_any_bit(seed, n, alphabet, length, prefix):
    # A small alphabet per example: the keys agree in many digits (their passes are skipped)
    # and tie often; the position at which they differ moves with the prefix and the length.
    rng = random.Random(seed)
    keys = [prefix + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, length))) for _ in range(n)]
    _check(keys)


@settings(max_examples=10, deadline=None)
@given(st.integers(min_value=0, max_value=2**32), st.integers(min_value=0, max_value=63))
def test_sort55_keys_differing_in_one_head_bit(seed, bit):
    # Two head values that first differ in one bit (63 - 8 * k - j: bit j from the top of the
    # k-th byte after the shared prefix "k"), in one digit of the sort: every other pass is
    # skipped. A flipped top bit (j == 0) makes that byte a two-byte UTF-8 sequence, which
    # differs from there on (the first difference is still that bit).
    byte, within = divmod(63 - bit, 8)
    low = [0x20] * 8
    high = list(low)
    high[byte] ^= 0x80 >> within
    texts = [bytes(low).decode("latin-1"), bytes(high).decode("latin-1")]
    rng = random.Random(seed)
    keys = ["k" + rng.choice(texts) for _ in range(WIDE_MIN + 100)]
    _check(keys)

"""FRONT39: cj_write_utf8_string copies a string's last (< 8) bytes with the word that ends it
when that word is plain, rewriting the bytes of the word already written. The text must stay
exactly json.dumps' for every length and every place of an escaped or non-ASCII character
(before the last word, inside it, across the boundary), in both modes."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from mooncake.reshard import _native

_SPECIALS = ['"', "\\", "\n", "\x00", "\x1f", "\x7f", "\x80", "é", "€", "\U0001f600", "\ud800"]


def _expect(obj, ensure_ascii):
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=ensure_ascii)


def _check(s):
    assert _native.canonical_json(s) == _expect(s, True)
    assert _native.canonical_json([s, {s: s}]) == _expect([s, {s: s}], True)
    try:
        _expect(s, False).encode("utf-8")
    except UnicodeEncodeError:
        return
    assert _native.canonical_json(s, ensure_ascii=False) == _expect(s, False)


def test_front39_every_length_and_place():
    plain = "".join(chr(0x20 + (i * 7) % 95) for i in range(40)).replace('"', "a").replace("\\", "b")
    for n in range(0, 34):
        _check(plain[:n])
        for at in range(n):
            for sp in _SPECIALS:
                _check(plain[:at] + sp + plain[at + 1 : n])


_CHAR = st.one_of(
    st.characters(min_codepoint=0x20, max_codepoint=0x7E),
    st.sampled_from(_SPECIALS),
    st.characters(min_codepoint=0, max_codepoint=0x10FFFF),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.text(_CHAR, max_size=40), max_size=4))
def test_front39_strings_match_json_dumps(strings):
    for s in strings:
        _check(s)
    _check("".join(strings))

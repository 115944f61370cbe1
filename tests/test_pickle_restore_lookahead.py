"""graph_unpack's lookahead cursors (csrc/pickle_codec.c ``pc_lookahead``): prefetch hints read the
opcodes up to PC_FAR bytes ahead of the decoder, in tuples of at least PC_LOOKAHEAD_ITEMS (1024) items. On
such streams (shared ints beyond the small ints, strings met again, shared tuples and instances),
hostile and truncated streams still give exactly the oracle's outcome, and the cursors never read
past the stream (ASan)."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from test_pickle_codec import _REGISTRY, Cached, Leaf, Node, _py_unpack, _shape

from mooncake.reshard import _native


def _long_sample() -> tuple[bytes, tuple[Any, ...]]:
    shared = (1000, 2**40, "s")
    words = [f"w{j}" for j in range(7)]
    leaves = [Leaf(shared, 300 + j % 5) for j in range(6)]
    items = []
    for j in range(9000):
        items.append(
            Node(leaves[j % 6], (j * 1000, -(j % 9) * 7777, words[j % 7], None), Cached(words[(j + 3) % 7]))
        )
        items.append(shared)
        items.append(2**63 - 1 - j % 3)
    root = tuple(items)
    packed = _native.graph_pack(root, _REGISTRY)
    assert packed is not None
    codes, values = packed
    assert len(codes) > 1 << 18 and len(root) >= 1024  # the cursors run (root items)
    assert _native.graph_unpack(codes, values, _REGISTRY) == root
    return codes, values


_CODES, _VALUES = _long_sample()


def test_long_stream_round_trip_keeps_sharing() -> None:
    restored = _native.graph_unpack(_CODES, _VALUES, _REGISTRY)
    assert _shape(restored) == _shape(_py_unpack(_CODES, _VALUES, _REGISTRY))
    # ints equal by value are one object (the int cache the lookahead reads)
    assert restored[3].y[0] == 1000 and restored[3].y[0] is restored[1][0]
    assert restored[2] == 2**63 - 1 and restored[2] is restored[11]


def test_truncations_return_none() -> None:
    # a strict prefix of one graph is never one graph; cuts in the cursors' last opcodes
    rng = random.Random(5)
    cuts = list(range(len(_CODES) - 700, len(_CODES))) + [rng.randrange(1 << 18, len(_CODES)) for _ in range(40)]
    for end in cuts:
        assert _native.graph_unpack(_CODES[:end], _VALUES, _REGISTRY) is None
    assert _py_unpack(_CODES[:-1], _VALUES, _REGISTRY) is None


def test_fewer_values_and_references_beyond_them() -> None:
    for count in (0, 1, len(_VALUES) // 2, len(_VALUES) - 1):
        values = _VALUES[:count]
        assert _native.graph_unpack(_CODES, values, _REGISTRY) is None
        assert _py_unpack(_CODES, values, _REGISTRY) is None


def test_hostile_opcodes_ahead_of_the_decoder() -> None:
    prefix = _CODES[: (1 << 18) + 50]
    tails = [
        b"\x03\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",  # reference beyond everything
        b"\x05\xff\xff\xff\xff\xff\xff\xff\xff\x7f",  # value reference beyond 2**62
        b"\x04\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",  # the largest int
        b"\x04\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01",  # endless int varint
        b"\x09" * 30,  # no opcode
        b"\x04\x80",  # varint cut at the end
        b"\x03",
    ]
    for tail in tails:
        for filler in (b"", b"\x06" * 5, b"\x06" * 45):
            codes = prefix + filler + tail
            actual = _native.graph_unpack(codes, _VALUES, _REGISTRY)
            assert _shape(actual) == _shape(_py_unpack(codes, _VALUES, _REGISTRY))


@settings(max_examples=15, deadline=None)
@given(st.data())
def test_mutated_long_streams_match_the_oracle(data: Any) -> None:
    raw = bytearray(_CODES)
    for _ in range(data.draw(st.integers(1, 4))):
        if len(raw) < 2100:
            break
        action = data.draw(st.integers(0, 3))
        if data.draw(st.booleans()):
            position = len(raw) - 1 - data.draw(st.integers(0, 2000))
        else:
            position = data.draw(st.integers(0, len(raw) - 1))
        if action == 0:
            raw[position] = data.draw(st.integers(0, 255))
        elif action == 1:
            raw.insert(position, data.draw(st.integers(0, 255)))
        elif action == 3:
            del raw[position:]
        else:
            del raw[position]
    mutated = bytes(raw)
    actual = _native.graph_unpack(mutated, _VALUES, _REGISTRY)
    expected = _py_unpack(mutated, _VALUES, _REGISTRY)
    assert _shape(actual) == _shape(expected)

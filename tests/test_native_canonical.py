"""Differential tests: the C canonical JSON / SHA-256 kernels against json + hashlib."""

from __future__ import annotations

import hashlib
import json
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mooncake.reshard import _native


def reference_json(obj: object, ensure_ascii: bool = True) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=ensure_ascii)


# Every code point, including lone surrogates, controls and astral characters.
any_char = st.characters(min_codepoint=0, max_codepoint=sys.maxunicode)
special_char = st.sampled_from(
    ['"', "\\", "\n", "\r", "\t", "\b", "\f", "\x00", "\x1f", "\x7f", "\x80", "\u2028",
     "\ud800", "\udfff", "\ud83d", "\ude00", "\uffff", "\U0001f600", "\U0010ffff", "é", "/"]
)
text = st.text(st.one_of(any_char, special_char), max_size=12)
ints = st.one_of(
    st.integers(-(2**70), 2**70),
    st.integers(-(2**63) - 2, -(2**63) + 2),
    st.integers(2**63 - 2, 2**64 + 2),
    st.integers(-(10**300), 10**300),
)
scalars = st.one_of(st.none(), st.booleans(), ints, text)
trees = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.lists(children, max_size=5).map(tuple),
        st.dictionaries(text, children, max_size=5),
    ),
    max_leaves=30,
)


def _has_surrogate(obj: object) -> bool:
    try:
        json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


@settings(max_examples=400)
@given(trees)
def test_canonical_json_matches_json_dumps_ascii(obj: object) -> None:
    assert _native.canonical_json(obj) == reference_json(obj)
    assert _native.canonical_json(obj, ensure_ascii=True) == reference_json(obj)
    expected = hashlib.sha256(reference_json(obj).encode("utf-8")).hexdigest()
    assert _native.canonical_sha256(obj) == expected


@settings(max_examples=400)
@given(trees)
def test_canonical_json_matches_json_dumps_unicode(obj: object) -> None:
    if _has_surrogate(obj):
        with pytest.raises(UnicodeEncodeError):
            _native.canonical_json(obj, ensure_ascii=False)
        with pytest.raises(UnicodeEncodeError):
            _native.canonical_sha256(obj, ensure_ascii=False)
        return
    expected = reference_json(obj, ensure_ascii=False)
    assert _native.canonical_json(obj, ensure_ascii=False) == expected
    digest = hashlib.sha256(expected.encode("utf-8")).hexdigest()
    assert _native.canonical_sha256(obj, ensure_ascii=False) == digest


@given(st.dictionaries(text, st.integers(), min_size=2, max_size=20))
def test_keys_sort_by_code_point(d: dict[str, int]) -> None:
    assert _native.canonical_json(d) == reference_json(d)


def test_specific_escapes() -> None:
    value = {"k\u00e9y": ['"\\\n\r\t\b\f\x00\x1f\x7f', "\ud800x\udfff", "\U0001f600", "\u2028"]}
    assert _native.canonical_json(value) == reference_json(value)
    assert "\\ud83d\\ude00" in _native.canonical_json(value)
    assert "\\u001f" in _native.canonical_json(value)
    plain = {"b": "\u00e9\U0001f600", "a": [1, (2, 3)], "": None}
    assert _native.canonical_json(plain, ensure_ascii=False) == reference_json(plain, ensure_ascii=False)
    assert _native.canonical_json(plain, False) == reference_json(plain, ensure_ascii=False)


def test_surrogate_in_key_sorts_like_python() -> None:
    value = {"\ud800": 1, "\uffff": 2, "\U00010000": 3, "\ue000": 4, "a": 5}
    assert _native.canonical_json(value) == reference_json(value)


def test_int_edges_and_subclasses() -> None:
    import enum

    class Color(enum.IntEnum):
        RED = 7

    class MyInt(int):
        def __repr__(self) -> str:
            return "bad"

        __str__ = __repr__

    for v in (0, -1, 2**63 - 1, -(2**63), 2**63, -(2**63) - 1, 2**64, 10**100, -(10**100)):
        assert _native.canonical_json(v) == reference_json(v)
    assert _native.canonical_json([Color.RED, MyInt(5), MyInt(2**80)]) == reference_json(
        [Color.RED, MyInt(5), MyInt(2**80)]
    )
    assert _native.canonical_json([True, False, None]) == "[true,false,null]"


def test_container_subclasses() -> None:
    class D(dict):  # type: ignore[type-arg]
        pass

    class L(list):  # type: ignore[type-arg]
        pass

    class S(str):
        pass

    value = D({S("b"): L([S("x"), (1,)]), "a": {}})
    assert _native.canonical_json(value) == reference_json(value)
    assert _native.canonical_json([]) == "[]"
    assert _native.canonical_json(()) == "[]"
    assert _native.canonical_json({}) == "{}"
    assert _native.canonical_json("") == '""'


@pytest.mark.parametrize("bad", [1.5, b"x", {1, 2}, object(), {1: "x"}, {("a",): 1}, [1, 2.0], {"a": {"b": 1j}}])
def test_type_errors(bad: object) -> None:
    with pytest.raises(TypeError):
        _native.canonical_json(bad)
    with pytest.raises(TypeError):
        _native.canonical_sha256(bad)


def test_cycles_and_depth_raise() -> None:
    cyc: list[object] = []
    cyc.append(cyc)
    with pytest.raises((RecursionError, ValueError)):
        _native.canonical_json(cyc)
    deep: object = 0
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(RecursionError):
        _native.canonical_json(deep)
    nested: object = 0
    for _ in range(200):
        nested = {"x": [nested]}
    assert _native.canonical_json(nested) == reference_json(nested)


@given(st.binary(max_size=300))
def test_sha256_hex_matches_hashlib(data: bytes) -> None:
    assert _native.sha256_hex(data) == hashlib.sha256(data).hexdigest()


def test_sha256_hex_type_error() -> None:
    with pytest.raises(TypeError):
        _native.sha256_hex("text")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        _native.sha256_hex(bytearray(b"x"))  # type: ignore[arg-type]


def test_sha256_large_buffer() -> None:
    data = bytes(range(256)) * 40_000
    assert _native.sha256_hex(data) == hashlib.sha256(data).hexdigest()
    big = {"k": ["x" * 1000] * 5000}
    assert _native.canonical_sha256(big) == hashlib.sha256(reference_json(big).encode()).hexdigest()


# --- placement_fragment_id (spec 6.1) -------------------------------------------


def reference_fragment_id(
    tensor_id: str,
    global_offset: tuple[int, ...],
    local_shape: tuple[int, ...],
    nbytes: int,
    dp: int,
    tp: int,
    pp: int,
    ep: int,
    aliases: tuple[str, ...],
    pipeline_stage_id: int | None,
) -> str:
    content: dict[str, object] = {
        "schema": "weight-placement-fragment",
        "tensor_id": tensor_id,
        "global_offset": global_offset,
        "local_shape": local_shape,
        "nbytes": nbytes,
        "rank": {"dp": dp, "tp": tp, "pp": pp, "ep": ep},
        "aliases": sorted(aliases),
    }
    if pipeline_stage_id is not None:
        content["pipeline_stage_id"] = pipeline_stage_id
    return "sha256:" + hashlib.sha256(reference_json(content).encode("utf-8")).hexdigest()


def test_placement_fragment_id_known_answer() -> None:
    assert (
        _native.placement_fragment_id("weight", (0, 0), (4, 4), 32, 0, 1, 0, 0, (), None)
        == "sha256:73b1b25fe8cf11d48697cfd441a400d57ef84d52583d392c09453b5b79a86035"
    )


coords = st.integers(0, 2**70)
ident = st.text(st.one_of(any_char, special_char), min_size=1, max_size=8)


@settings(max_examples=300)
@given(
    ident,
    st.lists(coords, max_size=4),
    st.lists(st.integers(1, 2**64), max_size=4),
    st.integers(1, 2**64),
    st.integers(0, 2**40),
    st.integers(0, 2**40),
    st.integers(0, 2**40),
    st.integers(0, 2**40),
    st.lists(ident, max_size=4, unique=True),
    st.one_of(st.none(), st.integers(0, 2**64)),
)
def test_placement_fragment_id_matches_reference(
    tensor_id: str,
    offset: list[int],
    shape: list[int],
    nbytes: int,
    dp: int,
    tp: int,
    pp: int,
    ep: int,
    aliases: list[str],
    stage: int | None,
) -> None:
    args = (tensor_id, tuple(offset), tuple(shape), nbytes, dp, tp, pp, ep, tuple(aliases), stage)
    assert _native.placement_fragment_id(*args) == reference_fragment_id(*args)


def test_placement_fragment_id_keywords_and_stage() -> None:
    got = _native.placement_fragment_id(
        tensor_id="t", global_offset=(1,), local_shape=(2,), nbytes=4, dp=0, tp=0, pp=1, ep=0,
        aliases=("b", "a"), pipeline_stage_id=3,
    )
    assert got == reference_fragment_id("t", (1,), (2,), 4, 0, 0, 1, 0, ("a", "b"), 3)
    assert got != _native.placement_fragment_id("t", (1,), (2,), 4, 0, 0, 1, 0, ("a", "b"), None)


@pytest.mark.parametrize(
    "args",
    [
        (1, (0,), (1,), 1, 0, 0, 0, 0, (), None),
        ("t", [0], (1,), 1, 0, 0, 0, 0, (), None),
        ("t", (0,), (1.0,), 1, 0, 0, 0, 0, (), None),
        ("t", (0,), (1,), True, 0, 0, 0, 0, (), None),
        ("t", (0,), (1,), 1, 0, None, 0, 0, (), None),
        ("t", (0,), (1,), 1, 0, 0, 0, 0, ["a"], None),
        ("t", (0,), (1,), 1, 0, 0, 0, 0, (1,), None),
        ("t", (0,), (1,), 1, 0, 0, 0, 0, (), "3"),
        ("t", (0,), (True,), 1, 0, 0, 0, 0, (), None),
    ],
)
def test_placement_fragment_id_type_errors(args: tuple[object, ...]) -> None:
    with pytest.raises(TypeError):
        _native.placement_fragment_id(*args)  # type: ignore[arg-type]


def test_repeated_calls_do_not_leak_refs() -> None:
    value = {"a": [1, 2**100, "x\ud800"], "b": ("y",)}
    before = sys.getrefcount(value)
    for _ in range(1000):
        _native.canonical_json(value)
        _native.canonical_sha256(value)
    assert sys.getrefcount(value) == before

"""Issue 6: fuzzing of every entry point that takes outside data (short, deterministic runs).

The engine lives in ``fuzz/pyfuzz.py``; here hypothesis drives it so failures shrink and replay.
Contract under test: an input is either rejected with ``ValueError`` (spec 1.4) or accepted, and an
accepted value round-trips exactly (JSON decode/encode, digest, pickle, copy, ``replace``).
Longer runs: ``HYPOTHESIS_PROFILE=nightly`` or ``python fuzz/pyfuzz.py --seconds N`` (fuzz/README.md).
"""

from __future__ import annotations

import json
import os
import random
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fuzz"))

import pyfuzz  # noqa: E402
from layout_model import build_placement  # noqa: E402
from strategies import valid_layouts  # noqa: E402

from mooncake.reshard.weight import weight_placement_from_json, weight_placement_to_json  # noqa: E402

DOCS = pyfuzz.seed_documents()
CASES = int(os.environ.get("MOONCAKE_FUZZ_CASES", "300"))


def _check_text(text: str) -> None:
    if pyfuzz.known_finding(text):
        return
    pyfuzz.check_json_text(text)


def test_seed_documents_are_accepted_and_canonical() -> None:
    for text in DOCS:
        placement = pyfuzz.check_json_text(text)
        assert placement is not None
        assert weight_placement_to_json(placement) == text


@settings(max_examples=CASES // 3)
@given(seed=st.integers(0, 2**64 - 1))
def test_structured_json_mutations(seed: int) -> None:
    rng = random.Random(seed)
    doc = json.loads(rng.choice(DOCS))
    text = pyfuzz.serialize(pyfuzz.mutate_document(doc, rng, rounds=rng.randint(1, 3)), rng)
    _check_text(text)


@settings(max_examples=CASES // 3)
@given(seed=st.integers(0, 2**64 - 1))
def test_textual_json_mutations(seed: int) -> None:
    rng = random.Random(seed)
    text = pyfuzz.mutate_text(pyfuzz.serialize(json.loads(rng.choice(DOCS)), rng), rng)
    _check_text(text)


@settings(max_examples=30)
@given(layout=valid_layouts(max_tensors=2, max_ndim=3), seed=st.integers(0, 2**32))
def test_generated_layout_documents_round_trip_and_survive_mutation(layout: object, seed: int) -> None:
    text = weight_placement_to_json(build_placement(layout))
    assert weight_placement_to_json(pyfuzz.check_json_text(text)) == text
    rng = random.Random(seed)
    _check_text(pyfuzz.serialize(pyfuzz.mutate_document(json.loads(text), rng), rng))


@settings(max_examples=CASES)
@given(seed=st.integers(0, 2**64 - 1))
def test_constructor_hostile_fields(seed: int) -> None:
    pyfuzz.fuzz_constructor_once(random.Random(seed))


@pytest.mark.parametrize("value", [
    None, b"{}", bytearray(b"{}"), 1, 1.5, [], {}, pyfuzz.StrSub("{}"), "", " ", "\x00", "\ud800", "{", "[]",
    '"placement"', "null", "NaN", '{"a":NaN}', '{"a":1,"a":1}', "[" * 100000, "{\"a\":" * 50000, "1" * 5000,
    "\ufeff{}",
])
def test_degenerate_documents_raise_value_error(value: object) -> None:
    with pytest.raises(ValueError):
        weight_placement_from_json(value)  # type: ignore[arg-type]


def test_non_finite_tokens_and_duplicate_keys_keep_their_messages() -> None:
    text = DOCS[0]
    for token in ("NaN", "Infinity", "-Infinity"):
        bad = text.replace('"weight_generation":7', f'"weight_generation":{token}')
        with pytest.raises(ValueError, match=f"^non-finite JSON number is unsupported: {token}$"):
            weight_placement_from_json(bad)
    bad = text.replace('"dtype":"bfloat16"', '"dtype":"bfloat16","dtype":"bfloat16"')
    with pytest.raises(ValueError, match="^duplicate JSON field: dtype$"):
        weight_placement_from_json(bad)


def test_nul_and_lone_surrogate_ids_round_trip() -> None:
    doc = json.loads(DOCS[0])
    doc["resource_id"] = "a\x00\ud800b"
    doc["parts"][0]["fragments"][0]["placement_fragment_id"] = "\udfff"
    text = json.dumps(pyfuzz.fix_ids(doc), sort_keys=True, separators=(",", ":"))
    placement = pyfuzz.check_json_text(text)
    assert placement is not None and placement.resource_id == "a\x00\ud800b"
    assert weight_placement_to_json(placement) == text

"""The reference known-answer cases, manifest layer only: their placement JSON decodes, reproduces
the recorded ids and digests, re-encodes to identical bytes, matches the recorded canonical form,
and their runtime bindings rebuild through the constructors and validate (spec 4.10, 6, 7)."""

from __future__ import annotations

import pytest

import known_answers as ka
from mooncake.reshard.weight import validate_runtime_binding, validate_runtime_bindings, weight_placement_to_json

CASES = ka.case_names()
PLACEMENT_CASES = [c for c in CASES if "source_placement_json" in ka.load_case(c)["inputs"]]
STORED_CASES = [c for c in CASES if "stored_manifest_json" in ka.load_case(c)["inputs"]]


def test_cases_present() -> None:
    assert len(CASES) == 7 and len(PLACEMENT_CASES) == 6 and len(STORED_CASES) == 1


@pytest.mark.parametrize("name", PLACEMENT_CASES)
@pytest.mark.parametrize("side", ["source", "target"])
def test_placement_ids_digests_and_bytes(name: str, side: str) -> None:
    case = ka.load_case(name)
    text = case["inputs"][f"{side}_placement_json"]
    placement = ka.source_placement(name) if side == "source" else ka.target_placement(name)
    assert placement.placement_id == case["expected"][f"{side}_placement_id"]
    assert placement.digest == case["expected"][f"{side}_digest"]
    assert weight_placement_to_json(placement) == text


@pytest.mark.parametrize("name", CASES)
def test_target_placement_bytes_and_bindings(name: str) -> None:
    case = ka.load_case(name)
    placement = ka.target_placement(name)
    assert weight_placement_to_json(placement) == case["inputs"]["target_placement_json"]
    bindings = ka.target_bindings(name)
    for binding in bindings:
        assert binding.placement_id == placement.placement_id
        assert binding.placement_digest == placement.digest
        validate_runtime_binding(placement, binding)
    validate_runtime_bindings(placement, bindings)


@pytest.mark.parametrize("name", PLACEMENT_CASES)
def test_source_bindings(name: str) -> None:
    placement = ka.source_placement(name)
    bindings = ka.source_bindings(name)
    assert bindings
    validate_runtime_bindings(placement, bindings)
    validate_runtime_bindings(placement, tuple(reversed(bindings)))


@pytest.mark.parametrize("name", PLACEMENT_CASES)
def test_decoded_placements_match_recorded_canonical_form(name: str) -> None:
    expected = ka.load_case(name)["expected"]["logical_plan"]
    assert ka.canonical(ka.source_placement(name)) == expected["source_placement"]
    assert ka.canonical(ka.target_placement(name)) == expected["target_placement"]


@pytest.mark.parametrize("name", STORED_CASES)
def test_stored_manifest(name: str) -> None:
    case = ka.load_case(name)
    manifest = ka.stored_manifest(name)
    assert manifest.manifest_digest == case["expected"]["stored_content_sha256"]
    assert manifest.manifest_identity.content_sha256 == case["expected"]["stored_content_sha256"]
    assert manifest.to_json() == case["inputs"]["stored_manifest_json"]
    assert ka.canonical(manifest) == case["expected"]["logical_plan"]["source_manifest"]
    assert ka.canonical(ka.target_placement(name)) == case["expected"]["logical_plan"]["target_placement"]


def test_binding_rebuild_rejects_tampering() -> None:
    name = PLACEMENT_CASES[0]
    raw = ka.load_case(name)["inputs"]["source_bindings"][0]
    first = raw["fragments"][0]
    bigger = dict(first, nbytes=first["nbytes"] + 2, storage_nbytes=first["storage_nbytes"] + 2)
    forged = dict(raw, fragments=[bigger] + raw["fragments"][1:])
    with pytest.raises(ValueError, match="^runtime binding byte size does not match placement"):
        validate_runtime_binding(ka.source_placement(name), ka.build_binding(forged))

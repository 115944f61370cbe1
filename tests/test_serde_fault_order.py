"""Which fault ``weight_placement_from_json`` reports first when a document has several.

The spec (§7.2) lists the checks but not their order across objects; these follow the released
reference (``conformance/`` found the differences): a topology's participants are read before
its sizes and id; a fragment's pipeline stage is read before its aliases; each part is decoded
and built (its constructor's checks included) before the next part is read; a part's unknown
tensor and the document's unreferenced tensor are the first by id.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Callable, Dict

import pytest

from known_answers import load_case

from mooncake.reshard.weight import weight_placement_from_json

Doc = Dict[str, Any]


def _document() -> Doc:
    """A valid two-participant TP2 placement of one tensor ``w`` (known-answer case)."""
    return json.loads(load_case("tp2_to_tp3_uneven_fp32")["inputs"]["source_placement_json"])


def _error(doc: Doc) -> str:
    with pytest.raises(ValueError) as caught:
        weight_placement_from_json(json.dumps(doc))
    return str(caught.value)


def _with(*edits: Callable[[Doc], None]) -> Doc:
    doc = copy.deepcopy(_document())
    for edit in edits:
        edit(doc)
    return doc


def _bad_participant(doc: Doc) -> None:
    doc["topology"]["participants"][0]["extra"] = 1


def _bad_tp_size(doc: Doc) -> None:
    doc["topology"]["tp_size"] = 0


def _bad_topology_id(doc: Doc) -> None:
    doc["topology"]["topology_id"] = ""


def test_the_document_is_valid_before_the_edits() -> None:
    assert weight_placement_from_json(json.dumps(_document())).parts


def test_each_fault_alone_reports_itself() -> None:
    assert _error(_with(_bad_participant)) == "parallel topology participant 0 schema fields do not match contract"
    assert _error(_with(_bad_tp_size)) == "tp_size must be an integer at least 1"
    assert _error(_with(_bad_topology_id)) == "topology_id must be a non-empty string"


def test_topology_participants_are_read_before_the_sizes_and_the_id() -> None:
    expected = "parallel topology participant 0 schema fields do not match contract"
    assert _error(_with(_bad_participant, _bad_tp_size, _bad_topology_id)) == expected
    assert _error(_with(_bad_tp_size, _bad_topology_id)) == "tp_size must be an integer at least 1"


def test_a_part_is_built_before_the_next_part_is_read() -> None:
    def rank_mismatch_in_part_0(doc: Doc) -> None:  # (a constructor's check: the part's own rank differs)
        doc["parts"][0]["rank"]["tp"] = 1

    def bad_schema_in_part_1(doc: Doc) -> None:
        doc["parts"][1]["fragments"][0]["extra"] = 1

    alone = _error(_with(rank_mismatch_in_part_0))
    assert "rank" in alone and "schema" not in alone
    assert _error(_with(bad_schema_in_part_1)) == "placement fragment 0 has an invalid schema"
    assert _error(_with(rank_mismatch_in_part_0, bad_schema_in_part_1)) == alone


def test_a_parts_unknown_tensor_is_the_first_by_id() -> None:
    def two_unknown_tensors(doc: Doc) -> None:
        fragment = doc["parts"][0]["fragments"][0]
        doc["parts"][0]["fragments"] = [dict(fragment, tensor_id="z"), dict(fragment, tensor_id="b",
                                                                          placement_fragment_id="other")]

    assert _error(_with(two_unknown_tensors)) == "unknown tensor_id in placement part: b"


def test_the_unreferenced_tensor_is_the_first_by_id() -> None:
    def two_unreferenced_tensors(doc: Doc) -> None:
        tensor = doc["tensors"][0]
        doc["tensors"] += [dict(tensor, tensor_id="z"), dict(tensor, tensor_id="m")]

    assert _error(_with(two_unreferenced_tensors)) == "placement JSON contains an unreferenced tensor: m"


def test_a_parts_faults_come_before_an_unreferenced_tensor() -> None:
    def unreferenced(doc: Doc) -> None:
        doc["tensors"].append(dict(doc["tensors"][0], tensor_id="z"))

    def rank_mismatch_in_part_1(doc: Doc) -> None:
        doc["parts"][1]["rank"]["tp"] = 0

    alone = _error(_with(rank_mismatch_in_part_1))
    assert _error(_with(unreferenced)) == "placement JSON contains an unreferenced tensor: z"
    assert _error(_with(unreferenced, rank_mismatch_in_part_1)) == alone


def test_a_fragments_stage_is_read_before_its_aliases() -> None:
    def bad_stage(doc: Doc) -> None:
        doc["parts"][0]["fragments"][0]["pipeline_stage_id"] = -1

    def bad_aliases(doc: Doc) -> None:
        doc["parts"][0]["fragments"][0]["aliases"] = "w"

    assert _error(_with(bad_aliases)) == "aliases must be a sequence"
    assert _error(_with(bad_stage)) == "pipeline_stage_id must be an integer at least 0"
    assert _error(_with(bad_aliases, bad_stage)) == "pipeline_stage_id must be an integer at least 0"

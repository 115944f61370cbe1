"""Spec 6 (canonical identity, known answers) and 7 (placement JSON encoding and every decoding
label/message)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Callable

import pytest

from layout_model import AxisSpec, Coord, FragmentSpec, Layout, TensorSpec, build_placement, full_participants
import oracles
from mooncake.reshard.weight.serde import weight_placement_from_json, weight_placement_to_json
from mooncake.reshard.weight.types import ParallelRank, PlacementFragment
from spec_helpers import KA_DIGEST, KA_FRAGMENT_ID, KA_JSON, KA_PLACEMENT_ID, KA_TOPOLOGY_ID, ka_placement, raises

FORBIDDEN = ("address", "endpoint", "worker_id", "instance_id", '"generation":', "lease_id", "owner")


def doc() -> dict:
    return json.loads(KA_JSON)


def enc(d: Any) -> str:
    return json.dumps(d, sort_keys=True, separators=(",", ":"))


def decode_after(fn: Callable[[dict], Any]) -> Any:
    d = doc()
    fn(d)
    return weight_placement_from_json(enc(d))


# ---------------------------------------------------------------------------------------------- 6


def test_known_answers() -> None:
    p = ka_placement()
    assert p.topology.topology_id == KA_TOPOLOGY_ID
    assert p.placement_id == KA_PLACEMENT_ID
    assert p.digest == KA_DIGEST
    assert weight_placement_to_json(p) == KA_JSON
    f = PlacementFragment(tensor_id="weight", global_offset=(0, 0), local_shape=(4, 4), nbytes=32, rank=ParallelRank(tp=1))
    assert f.placement_fragment_id == KA_FRAGMENT_ID


def small(**changes: Any) -> Layout:
    base = Layout(
        sizes=(1, 1, 1, 1), participants=(("worker-0", Coord()),),
        tensors=(TensorSpec("w", (4,), (AxisSpec("replicated", "tp"),)),),
        fragments=(FragmentSpec("w", (0,), (4,), Coord(), fragment_id="f"),),
    )
    return dataclasses.replace(base, **changes)


def test_placement_id_changes_with_identity_inputs() -> None:
    base = build_placement(small())
    assert base.placement_id == oracles.placement_id(small())
    variants = {
        "generation": small(weight_generation=2),
        "ownership semantics": small(tensors=(TensorSpec("w", (4,), (AxisSpec("ownership", "tp"),)),)),
        "no axes": small(tensors=(TensorSpec("w", (4,)),)),
        "declared sizes": small(sizes=(2, 1, 1, 1)),
        "explicit stage": small(fragments=(FragmentSpec("w", (0,), (4,), Coord(), fragment_id="f", pipeline_stage_id=3),)),
    }
    ids = {base.placement_id}
    for name, layout in variants.items():
        p = build_placement(layout)
        assert p.placement_id == oracles.placement_id(layout), name
        ids.add(p.placement_id)
    assert len(ids) == len(variants) + 1


def test_explicit_stage_appears_in_json() -> None:
    p = build_placement(small(fragments=(FragmentSpec("w", (0,), (4,), Coord(), fragment_id="f", pipeline_stage_id=3),)))
    assert '"pipeline_stage_id":3' in weight_placement_to_json(p)
    assert "pipeline_stage_id" not in weight_placement_to_json(build_placement(small()))


def test_empty_parts_are_encoded() -> None:
    layout = Layout(
        sizes=(2, 1, 1, 1), participants=full_participants(2, 1, 1, 1),
        tensors=(TensorSpec("w", (4,), (AxisSpec("ownership", "tp"),)),),
        fragments=(FragmentSpec("w", (0,), (4,), Coord(tp=1), fragment_id="f"),),
    )
    text = weight_placement_to_json(build_placement(layout))
    assert text == oracles.placement_json(layout)
    parts = json.loads(text)["parts"]
    assert [p["participant_id"] for p in parts] == ["w-d0-p0-e0-t0", "w-d0-p0-e0-t1"]
    assert parts[0]["fragments"] == []


# ---------------------------------------------------------------------------------------------- 7.1


def test_encoding_rejects_non_placements() -> None:
    for bad in (None, json.loads(KA_JSON), KA_JSON):
        with raises("placement must be a WeightPlacementManifest"):
            weight_placement_to_json(bad)


def test_encoding_shape() -> None:
    d = json.loads(weight_placement_to_json(ka_placement()))
    assert set(d) == {"resource_kind", "resource_id", "revision", "weight_generation", "placement_set_id", "placement_id", "topology", "tensors", "parts"}
    assert set(d["topology"]) == {"tp_size", "pp_size", "ep_size", "dp_size", "topology_id", "participants"}
    assert set(d["parts"][0]["fragments"][0]) == {"placement_fragment_id", "tensor_id", "global_offset", "local_shape", "nbytes", "rank", "aliases"}
    for forbidden in FORBIDDEN:
        assert forbidden not in KA_JSON


def test_non_ascii_is_escaped() -> None:
    layout = small(resource_id="mod\u00e8le", tensors=(TensorSpec("w\u00e9", (4,), (AxisSpec("replicated", "tp"),)),),
                   fragments=(FragmentSpec("w\u00e9", (0,), (4,), Coord(), fragment_id="f"),))
    text = weight_placement_to_json(build_placement(layout))
    assert text.isascii() and "\\u00e8" in text
    assert text == oracles.placement_json(layout)


# ---------------------------------------------------------------------------------------------- 7.2 document level


def test_decode_round_trip() -> None:
    p = weight_placement_from_json(KA_JSON)
    assert p == ka_placement() and p.digest == KA_DIGEST
    assert weight_placement_to_json(p) == KA_JSON
    # key order of the input does not matter
    assert weight_placement_from_json(json.dumps(doc(), indent=2)) == p


@pytest.mark.parametrize("value", [None, 42, KA_JSON.encode(), bytearray(KA_JSON.encode()), doc()])
def test_decode_requires_str(value: Any) -> None:
    with raises("placement manifest is not valid JSON"):
        weight_placement_from_json(value)


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "placement manifest is not valid JSON"),
        ("{", "placement manifest is not valid JSON"),
        ("{'a': 1}", "placement manifest is not valid JSON"),
        (KA_JSON.replace('"weight_generation":7', '"weight_generation":NaN'), "non-finite JSON number is unsupported: NaN"),
        (KA_JSON.replace('"weight_generation":7', '"weight_generation":Infinity'), "non-finite JSON number is unsupported: Infinity"),
        (KA_JSON.replace('"weight_generation":7', '"weight_generation":-Infinity'), "non-finite JSON number is unsupported: -Infinity"),
        (KA_JSON.replace('"tp_size":1}', '"tp_size":1,"tp_size":1}'), "duplicate JSON field: tp_size"),
        (KA_JSON.replace('"resource_id":"model"', '"resource_id":"model","resource_id":"model"'), "duplicate JSON field: resource_id"),
        ("[]", "placement manifest must be a JSON object"),
        ('"placement"', "placement manifest must be a JSON object"),
        ("null", "placement manifest must be a JSON object"),
    ],
)
def test_decode_document_errors(text: str, message: str) -> None:
    with raises(message):
        weight_placement_from_json(text)


# ---------------------------------------------------------------------------------------------- 7.2 objects and key sets


def _set(path: list, value: Any) -> Callable[[dict], None]:
    def fn(d: dict) -> None:
        node: Any = d
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return fn


def _pop(path: list) -> Callable[[dict], None]:
    def fn(d: dict) -> None:
        node: Any = d
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]
    return fn


def _rename(path: list, old: str, new: str) -> Callable[[dict], None]:
    def fn(d: dict) -> None:
        node: Any = d
        for key in path:
            node = node[key]
        node[new] = node.pop(old)
    return fn


FRAG = ["parts", 0, "fragments", 0]
TENSOR = ["tensors", 0]
AXIS = ["tensors", 0, "parallel_axes", 0]
PART = ["parts", 0]
PARTICIPANT = ["topology", "participants", 0]

CASES = [
    # must be a JSON object
    (_set(["topology"], []), "parallel topology must be a JSON object"),
    (_set(PARTICIPANT, "worker-0"), "parallel topology participant 0 must be a JSON object"),
    (_set(PARTICIPANT + ["rank"], [0, 0, 0, 0]), "parallel topology rank 0 must be a JSON object"),
    (_set(TENSOR, []), "placement tensor 0 must be a JSON object"),
    (_set(AXIS, "tp"), "placement tensor parallel axis 0 must be a JSON object"),
    (_set(PART, None), "placement part 0 must be a JSON object"),
    (_set(PART + ["rank"], 0), "placement part rank 0 must be a JSON object"),
    (_set(FRAG + ["rank"], "r"), "placement rank 0 must be a JSON object"),
    # exact key sets
    (_set(["future"], 1), "placement manifest schema fields do not match contract"),
    (_rename([], "resource_id", "model_id"), "placement manifest schema fields do not match contract"),
    (_pop(["resource_kind"]), "placement manifest schema fields do not match contract"),
    (_pop(["placement_id"]), "placement manifest schema fields do not match contract"),
    (_set(["topology", "world_size"], 1), "parallel topology schema fields do not match contract"),
    (_pop(["topology", "topology_id"]), "parallel topology schema fields do not match contract"),
    (_set(PARTICIPANT + ["endpoint"], "x"), "parallel topology participant 0 schema fields do not match contract"),
    (_set(PARTICIPANT + ["rank", "cp"], 0), "parallel topology rank 0 schema fields do not match contract"),
    (_pop(PARTICIPANT + ["rank", "ep"]), "parallel topology rank 0 schema fields do not match contract"),
    (_rename(TENSOR, "shard_dims", "partition_dim"), "placement tensor 0 schema fields do not match contract"),
    (_pop(TENSOR + ["expert_id"]), "placement tensor 0 schema fields do not match contract"),
    (_set(AXIS + ["future_semantics"], "x"), "placement tensor parallel axis 0 schema fields do not match contract"),
    (_rename(AXIS, "dim", "split_dim"), "placement tensor parallel axis 0 schema fields do not match contract"),
    (_set(AXIS, {"semantics": "replicated", "kind": "tp", "dim": 0}), "placement tensor parallel axis 0 schema fields do not match contract"),
    (_set(PART + ["address"], 1), "placement part 0 schema fields do not match contract"),
    (_set(PART + ["rank", "extra"], 0), "placement part rank 0 schema fields do not match contract"),
    (_set(FRAG + ["rank", "extra"], 0), "placement rank 0 schema fields do not match contract"),
    (_set(FRAG + ["address"], 1), "placement fragment 0 has an invalid schema"),
    (_pop(FRAG + ["aliases"]), "placement fragment 0 has an invalid schema"),
    (_rename(FRAG, "placement_fragment_id", "fragment_id"), "placement fragment 0 has an invalid schema"),
    # resource kind
    (_set(["resource_kind"], "kv_cache"), "placement manifest resource_kind must be model_weight"),
    (_set(["resource_kind"], ""), "placement manifest resource_kind must be model_weight"),
    (_set(["resource_kind"], 1), "placement manifest resource_kind must be model_weight"),
    # axes
    (_set(AXIS + ["semantics"], ""), "axis semantics must be a non-empty string"),
    (_set(AXIS + ["semantics"], 3), "axis semantics must be a non-empty string"),
    (_set(AXIS, {"semantics": "sharded", "kind": "tp", "dim": 0}), "unsupported parallel axis semantics: sharded"),
    (_set(AXIS + ["kind"], "cp"), "unsupported parallel axis kind: cp"),
    (_set(AXIS + ["kind"], "pp"), "pp cannot use split semantics"),
    (_set(AXIS + ["dim"], -1), "split axis dim must be an integer at least 0"),
    (_set(AXIS + ["dim"], True), "split axis dim must be an integer at least 0"),
    # containers
    (_set(["tensors"], {}), "placement tensors must be a sequence"),
    (_set(["tensors"], "abc"), "placement tensors must be a sequence"),
    (_set(["parts"], {"a": 1}), "placement parts must be a sequence"),
    (_set(PART + ["fragments"], "f"), "placement part fragments must be a sequence"),
    (_set(["topology", "participants"], {}), "parallel topology participants must be a sequence"),
    (_set(TENSOR + ["parallel_axes"], {}), "placement tensor parallel_axes must be a sequence"),
    (_set(FRAG + ["aliases"], "a"), "aliases must be a sequence"),
    (_set(TENSOR + ["global_shape"], {}), "global_shape must be a sequence"),
    (_set(FRAG + ["local_shape"], "44"), "local_shape must be a sequence"),
    # integers
    (_set(["topology", "tp_size"], 0), "tp_size must be an integer at least 1"),
    (_set(["topology", "pp_size"], True), "pp_size must be an integer at least 1"),
    (_set(["topology", "ep_size"], 1.0), "ep_size must be an integer at least 1"),
    (_set(["topology", "dp_size"], "1"), "dp_size must be an integer at least 1"),
    (_set(PARTICIPANT + ["rank", "dp"], -1), "rank dp must be an integer at least 0"),
    (_set(PARTICIPANT + ["rank", "tp"], False), "rank tp must be an integer at least 0"),
    (_set(PART + ["rank", "pp"], None), "rank pp must be an integer at least 0"),
    (_set(FRAG + ["rank", "ep"], 0.0), "rank ep must be an integer at least 0"),
    (_set(["weight_generation"], -1), "weight_generation must be an integer at least 0"),
    (_set(["weight_generation"], True), "weight_generation must be an integer at least 0"),
    (_set(TENSOR + ["layer_id"], -1), "layer_id must be an integer at least 0"),
    (_set(TENSOR + ["expert_id"], "3"), "expert_id must be an integer at least 0"),
    (_set(FRAG + ["global_offset"], [-1, 0]), "global_offset must be an integer at least 0"),
    (_set(TENSOR + ["shard_dims"], [True]), "shard_dims must be an integer at least 0"),
    (_set(FRAG + ["pipeline_stage_id"], -1), "pipeline_stage_id must be an integer at least 0"),
    (_set(TENSOR + ["global_shape"], [0, 4]), "global_shape must be an integer at least 1"),
    (_set(FRAG + ["local_shape"], [4, 4.0]), "local_shape must be an integer at least 1"),
    (_set(TENSOR + ["itemsize"], 0), "itemsize must be an integer at least 1"),
    (_set(FRAG + ["nbytes"], 0), "nbytes must be an integer at least 1"),
    # strings
    (_set(TENSOR + ["tensor_id"], ""), "tensor_id must be a non-empty string"),
    (_set(TENSOR + ["dtype"], 2), "dtype must be a non-empty string"),
    (_set(TENSOR + ["layout_fingerprint"], ""), "layout_fingerprint must be a non-empty string"),
    (_set(FRAG + ["aliases"], ["layers.2.experts.3.w1", ""]), "alias must be a non-empty string"),
    (_set(PARTICIPANT + ["participant_id"], ""), "participant_id must be a non-empty string"),
    (_set(FRAG + ["placement_fragment_id"], None), "placement_fragment_id must be a non-empty string"),
    (_set(["resource_id"], ""), "resource_id must be a non-empty string"),
    (_set(["revision"], 5), "revision must be a non-empty string"),
    (_set(["placement_set_id"], ""), "placement_set_id must be a non-empty string"),
    (_set(["placement_id"], ""), "placement_id must be a non-empty string"),
    (_set(["topology", "topology_id"], ""), "topology_id must be a non-empty string"),
    # catalog consistency
    (lambda d: d["tensors"].append(dict(d["tensors"][0])), "duplicate tensor_id in placement JSON"),
    (
        lambda d: d["parts"][0]["fragments"].append(dict(d["parts"][0]["fragments"][0], placement_fragment_id="zz", tensor_id="x")),
        "unknown tensor_id in placement part: x",
    ),
    (lambda d: d["tensors"].append(dict(d["tensors"][0], tensor_id="zz")), "placement JSON contains an unreferenced tensor: zz"),
    # rebuilding
    (_set(["topology", "topology_id"], "sha256:" + "0" * 64), "topology_id does not match canonical topology"),
    (_set(["placement_id"], "sha256:" + "0" * 64), "placement_id does not match canonical logical content"),
    (_set(["weight_generation"], 8), "placement_id does not match canonical logical content"),
]


@pytest.mark.parametrize("index", range(len(CASES)))
def test_decode_errors(index: int) -> None:
    fn, message = CASES[index]
    with raises(message):
        decode_after(fn)


def test_pipeline_stage_null_means_unset() -> None:
    assert decode_after(_set(FRAG + ["pipeline_stage_id"], None)) == ka_placement()


def test_decode_rejects_fragment_schema_by_index_inside_part() -> None:
    layout = Layout(
        sizes=(1, 1, 1, 1), participants=(("w0", Coord()),), tensors=(TensorSpec("w", (4,)),),
        fragments=(FragmentSpec("w", (0,), (2,), Coord(), fragment_id="a"), FragmentSpec("w", (2,), (2,), Coord(), fragment_id="b")),
    )
    d = json.loads(weight_placement_to_json(build_placement(layout)))
    d["parts"][0]["fragments"][1]["worker_id"] = "x"
    with raises("placement fragment 1 has an invalid schema"):
        weight_placement_from_json(enc(d))


def test_decoded_equal_content_in_other_order_gives_equal_objects() -> None:
    layout = Layout(
        sizes=(2, 1, 1, 1), participants=full_participants(2, 1, 1, 1),
        tensors=(TensorSpec("b", (4,), (AxisSpec("split", "tp", 0),)), TensorSpec("a", (2,), (AxisSpec("replicated", "tp"),))),
        fragments=(
            FragmentSpec("b", (0,), (2,), Coord(tp=0)), FragmentSpec("b", (2,), (2,), Coord(tp=1)),
            FragmentSpec("a", (0,), (2,), Coord(tp=0)), FragmentSpec("a", (0,), (2,), Coord(tp=1)),
        ),
    )
    p = build_placement(layout)
    d = json.loads(weight_placement_to_json(p))
    d["tensors"].reverse()
    d["parts"].reverse()
    for part in d["parts"]:
        part["fragments"].reverse()
    d["topology"]["participants"].reverse()
    q = weight_placement_from_json(json.dumps(d))
    assert q == p and q.digest == p.digest and weight_placement_to_json(q) == weight_placement_to_json(p)


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100000 + "]" * 100000,
        '{"a":' * 50000 + "1" + "}" * 50000,
        KA_JSON.replace('"nbytes":32', '"nbytes":' + str(10**400)),
        KA_JSON.replace('"weight_generation":7', '"weight_generation":1e400'),
        KA_JSON.replace('"weight_generation":7', '"weight_generation":-0'),
        KA_JSON.replace('"revision":"revision"', '"revision":"\\ud800"'),
        KA_JSON[:-1],
        KA_JSON + "x",
    ],
    ids=["deep-list", "deep-object", "huge-int", "1e400", "minus-zero", "lone-surrogate", "truncated", "trailing"],
)
def test_hostile_documents_raise_plain_value_error(text: str) -> None:
    with pytest.raises(ValueError) as info:
        weight_placement_from_json(text)
    assert type(info.value) is ValueError

"""Smoke tests of the manifest layer: spec §6 known answers and a few round trips."""

from __future__ import annotations

import copy
import dataclasses
import glob
import json
import pickle
import typing

import pytest

from mooncake.reshard.weight import (
    ParallelRank,
    PlacementFragment,
    RuntimeBindingFragment,
    StoredWeightManifest,
    WeightPlacementManifest,
    WeightRuntimeBindingManifest,
    validate_runtime_bindings,
    weight_placement_from_json,
    weight_placement_to_json,
)
from mooncake.reshard.weight import manifest as weight_manifest
from spec_helpers import ka_fragment, ka_stored_kwargs, ka_tensor, ka_topology, runtime_fragment_kwargs

PLACEMENT_ID = "sha256:618f22d9994d8d327a7afd97f3cfcf1f6680a337d71ea3a8162a7827ed0346db"
DIGEST = "a2ade0db5b17691e6a7c16d589d0498a64359eef91589addc870590899512d98"
PLACEMENT_JSON = (
    '{"parts":[{"fragments":[{"aliases":[],"global_offset":[0,0],"local_shape":[4,4],"nbytes":32,'
    '"placement_fragment_id":"placement-0","rank":{"dp":0,"ep":0,"pp":0,"tp":0},'
    '"tensor_id":"layers.2.experts.3.w1"}],"participant_id":"worker-0","rank":{"dp":0,"ep":0,"pp":0,'
    '"tp":0}}],"placement_id":"sha256:618f22d9994d8d327a7afd97f3cfcf1f6680a337d71ea3a8162a7827ed0346db",'
    '"placement_set_id":"placement-set-7","resource_id":"model","resource_kind":"model_weight",'
    '"revision":"revision","tensors":[{"dtype":"bfloat16","expert_id":3,"global_shape":[4,4],'
    '"itemsize":2,"layer_id":2,"layout_fingerprint":"test:qwen:bf16:v1","parallel_axes":[{"dim":0,'
    '"kind":"tp","semantics":"split"}],"shard_dims":[0],"tensor_id":"layers.2.experts.3.w1"}],'
    '"topology":{"dp_size":1,"ep_size":1,"participants":[{"participant_id":"worker-0","rank":'
    '{"dp":0,"ep":0,"pp":0,"tp":0}}],"pp_size":1,"topology_id":'
    '"sha256:017d6c66843ba96ccd39ed1b118b7635fee56677a41dc3d39c48b7bb3ccccdf4","tp_size":1},'
    '"weight_generation":7}'
)
STORED_SHA = "3276b40c240a49150c2df0a0bf03026baf4bc7829854b20064900637b93aa9df"
STORED_JSON = (
    '{"created_at":"2026-07-17T00:00:00Z","fragments":[{"aliases":[],"fragment_id":"stored-0",'
    '"global_offset":[0,0],"local_shape":[8,4],"nbytes":64,"object_key":'
    '"weights/default/qwen3.5-0.8b/step-42/payload/0","object_offset":0,"tensor_id":'
    '"layers.2.experts.3.w1"}],"group_id":"weights/default/qwen3.5-0.8b/step-42","manifest_key":'
    '"weights/default/qwen3.5-0.8b/step-42/manifest","namespace":"default","resource_id":'
    '"qwen3.5-0.8b","resource_kind":"model_weight","revision":"step-42","tensors":[{"dtype":'
    '"bfloat16","expert_id":3,"global_shape":[8,4],"itemsize":2,"layer_id":2,"layout_fingerprint":'
    '"sglang:qwen3.5:bf16:v1","parallel_axes":[{"dim":0,"kind":"tp","semantics":"split"}],'
    '"shard_dims":[0],"tensor_id":"layers.2.experts.3.w1"}],"weight_generation":42}'
)


def _placement() -> WeightPlacementManifest:
    """The known-answer placement of spec §6, built with ``from_fragments``."""
    return WeightPlacementManifest.from_fragments(
        resource_id="model",
        revision="revision",
        weight_generation=7,
        placement_set_id="placement-set-7",
        topology=ka_topology(),
        tensors=(ka_tensor(),),
        fragments=(ka_fragment(),),
    )


def _stored() -> StoredWeightManifest:
    return StoredWeightManifest(**ka_stored_kwargs())


def test_fragment_id_known_answer() -> None:
    fragment = PlacementFragment("weight", (0, 0), (4, 4), 32, ParallelRank(tp=1))
    assert fragment.placement_fragment_id == (
        "sha256:73b1b25fe8cf11d48697cfd441a400d57ef84d52583d392c09453b5b79a86035"
    )
    assert fragment.fragment_id == fragment.placement_fragment_id


def test_topology_id_known_answer() -> None:
    assert ka_topology().topology_id == (
        "sha256:017d6c66843ba96ccd39ed1b118b7635fee56677a41dc3d39c48b7bb3ccccdf4"
    )


def test_placement_known_answers() -> None:
    placement = _placement()
    assert placement.placement_id == PLACEMENT_ID
    assert weight_placement_to_json(placement) == PLACEMENT_JSON
    assert placement.digest == DIGEST
    assert placement._digest_cache == DIGEST


def test_placement_json_round_trip() -> None:
    placement = _placement()
    decoded = weight_placement_from_json(PLACEMENT_JSON)
    assert decoded == placement
    assert decoded.digest == placement.digest
    assert weight_placement_to_json(decoded) == PLACEMENT_JSON


def test_placement_pickle_and_copy() -> None:
    placement = _placement()
    _ = placement.digest
    for clone in (pickle.loads(pickle.dumps(placement)), copy.copy(placement)):
        assert clone == placement
        assert clone._digest_cache == DIGEST
    with pytest.raises(TypeError):
        dataclasses.replace(placement)


def test_stored_known_answer_and_round_trips() -> None:
    stored = _stored()
    assert stored.to_json() == STORED_JSON
    assert stored.manifest_digest == STORED_SHA
    assert stored.manifest_identity.content_sha256 == STORED_SHA
    assert StoredWeightManifest.from_json(STORED_JSON) == stored
    assert StoredWeightManifest.from_json(STORED_JSON.encode()) == stored
    assert pickle.loads(pickle.dumps(stored)) == stored
    assert dataclasses.replace(stored) == stored


def test_stored_rejects_duplicate_keys_and_nan() -> None:
    with pytest.raises(ValueError, match="^duplicate JSON field: a$"):
        StoredWeightManifest.from_json('{"a":1,"a":2}')
    with pytest.raises(ValueError, match="^non-finite JSON number is unsupported: NaN$"):
        StoredWeightManifest.from_json('{"a":NaN}')


def test_runtime_binding_round_trip() -> None:
    placement = _placement()
    fragment = RuntimeBindingFragment(
        **runtime_fragment_kwargs(placement_fragment_id="placement-0", endpoint="worker-0:1", owner=object())
    )
    binding = WeightRuntimeBindingManifest(
        resource_id="model",
        placement_id=placement.placement_id,
        placement_digest=placement.digest,
        instance_id="instance-0",
        generation=1,
        lease_id="lease-0",
        revision="revision",
        participant_id="worker-0",
        fragments=(fragment,),
    )
    validate_runtime_bindings(placement, (binding,))
    clone = pickle.loads(pickle.dumps(fragment))
    assert clone == fragment and clone.owner is None


def test_type_hints_resolve() -> None:
    for name in weight_manifest.__all__:
        obj = getattr(weight_manifest, name)
        typing.get_type_hints(obj)
        if isinstance(obj, type):
            typing.get_type_hints(obj.__init__)
    assert json.loads(PLACEMENT_JSON)["weight_generation"] == 7


KNOWN_ANSWERS = sorted(glob.glob("/work/shared/spec/known-answers/*.json"))


def _runtime_binding(raw: dict[str, typing.Any]) -> WeightRuntimeBindingManifest:
    fields = dict(raw)
    fields["fragments"] = tuple(
        RuntimeBindingFragment(
            **{key: tuple(value) if isinstance(value, list) else value for key, value in item.items()}
        )
        for item in raw["fragments"]
    )
    return WeightRuntimeBindingManifest(**fields)


@pytest.mark.skipif(not KNOWN_ANSWERS, reason="known-answer files are not available")
def test_known_answer_inputs_reproduce() -> None:
    for path in KNOWN_ANSWERS:
        with open(path, encoding="utf-8") as handle:
            case = json.load(handle)
        inputs, expected = case["inputs"], case["expected"]
        for side in ("source", "target"):
            text = inputs.get(f"{side}_placement_json")
            if text is None:
                continue
            placement = weight_placement_from_json(text)
            assert weight_placement_to_json(placement) == text, path
            if f"{side}_placement_id" in expected:
                assert placement.placement_id == expected[f"{side}_placement_id"], path
                assert placement.digest == expected[f"{side}_digest"], path
            bindings = [_runtime_binding(raw) for raw in inputs.get(f"{side}_bindings") or ()]
            if bindings:
                validate_runtime_bindings(placement, bindings)
        if "stored_manifest_json" in inputs:
            stored = StoredWeightManifest.from_json(inputs["stored_manifest_json"])
            assert stored.to_json() == inputs["stored_manifest_json"]
            assert stored.manifest_digest == expected["stored_content_sha256"]

"""The constructor hashes the placement id and the wire digest from one encoding of the parts
and tensors (canonical_parts_json with wire=...): both hashes equal a brute-force json.dumps +
hashlib oracle's, ``digest`` returns the constructor's value only while every field it read is
still the very object it read, and the cache is never pickled or copied."""

from __future__ import annotations

import copy
import hashlib
import json
import pickle
from typing import Any

import pytest
from hypothesis import given, settings

import known_answers
from layout_model import Layout, build_placement
from test_planner_oracle import placement_pairs

from mooncake.reshard import _native
from mooncake.reshard.weight import WeightPlacementManifest
from mooncake.reshard.weight import _canonical as canonical
from mooncake.reshard.weight.types import OwnershipAxis, ParallelRank, PlacementFragment
from mooncake.reshard.weight.types import ReplicatedAxis, SplitAxis, TensorDescriptor

_TYPES = (TensorDescriptor, SplitAxis, ReplicatedAxis, OwnershipAxis, PlacementFragment, ParallelRank)


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def _parts_objects(placement: Any) -> list[Any]:
    return [canonical.part_object(p.participant_id, p.rank, p.fragments) for p in placement.parts]


def _oracle(placement: Any) -> tuple[str, str]:
    """(content hex, wire hex) by json.dumps and hashlib over the objects of _canonical."""
    topology = canonical.topology_object(placement.topology)
    tensors = [canonical.tensor_object(t) for t in placement.tensors]
    content = {
        "schema": "complete-weight-placement",
        "resource_id": placement.resource_id,
        "revision": placement.revision,
        "weight_generation": placement.weight_generation,
        "placement_set_id": placement.placement_set_id,
        "topology": topology,
        "parts": _parts_objects(placement),
        "tensors": tensors,
    }
    content_hex = hashlib.sha256(_dumps(content).encode("ascii")).hexdigest()
    wire = {
        "resource_kind": "model_weight",
        "resource_id": placement.resource_id,
        "revision": placement.revision,
        "weight_generation": placement.weight_generation,
        "placement_set_id": placement.placement_set_id,
        "placement_id": "sha256:" + content_hex,
        "topology": topology,
        "parts": _parts_objects(placement),
        "tensors": tensors,
    }
    return content_hex, hashlib.sha256(_dumps(wire).encode("ascii")).hexdigest()


def _check(placement: Any) -> None:
    content_hex, wire_hex = _oracle(placement)
    assert placement.placement_id == "sha256:" + content_hex
    ahead = placement.__dict__["_digest_ahead"]
    assert ahead[0] == wire_hex
    assert placement.digest == wire_hex == canonical.placement_wire_json(placement, sha256=True)
    assert "_digest_ahead" not in placement.__dict__


def _rebuilt(placement: Any) -> Any:
    return WeightPlacementManifest(
        resource_id=placement.resource_id,
        revision=placement.revision,
        weight_generation=placement.weight_generation,
        placement_set_id=placement.placement_set_id,
        topology=placement.topology,
        parts=placement.parts,
    )


def test_known_answers_both_digests_match_the_oracle() -> None:
    for placement in known_answers.placements():
        fresh = _rebuilt(placement)
        assert fresh.placement_id == placement.placement_id
        _check(fresh)
        assert fresh.digest == placement.digest


@settings(max_examples=40, deadline=None)
@given(placement_pairs())
def test_random_placements_both_digests_match_the_oracle(pair: tuple[Layout, Layout]) -> None:
    for layout in pair:
        _check(build_placement(layout))
        _check(_rebuilt(build_placement(layout)))


def test_kernel_wire_form_against_the_oracle() -> None:
    placement = _rebuilt(known_answers.placements()[0])
    pairs = canonical._part_pairs(placement.parts)
    content, wire = _oracle(placement)
    payload = {"rest": 1}
    text_head = '{"parts":'
    middle = ',"rest":1,"tensors":'
    # a made-up second text: head + first digest + tail, the same tensors, then after
    result = _native.canonical_parts_json(
        pairs, prefix=text_head, suffix=middle, sha256=True, tensors=placement.tensors, after="}",
        types=_TYPES, wire=("[", "]", "!"),
    )
    assert type(result) is tuple and len(result) == 2
    parts_text = _dumps(_parts_objects(placement))
    tensors_text = _dumps([canonical.tensor_object(t) for t in placement.tensors])
    first_text = text_head + parts_text + middle + tensors_text + "}"
    assert json.loads(first_text)["rest"] == payload["rest"]
    first = hashlib.sha256(first_text.encode()).hexdigest()
    second = hashlib.sha256((text_head + parts_text + "[" + first + "]" + tensors_text + "!").encode()).hexdigest()
    assert result == (first, second)
    # the placement's own form
    assert canonical.content_and_wire_sha256(
        {
            "schema": "complete-weight-placement",
            "resource_id": placement.resource_id,
            "revision": placement.revision,
            "weight_generation": placement.weight_generation,
            "placement_set_id": placement.placement_set_id,
            "topology": canonical.topology_object(placement.topology),
        },
        placement.parts,
        placement.tensors,
        {
            "resource_kind": "model_weight",
            "resource_id": placement.resource_id,
            "revision": placement.revision,
            "weight_generation": placement.weight_generation,
            "placement_set_id": placement.placement_set_id,
            "topology": canonical.topology_object(placement.topology),
        },
    ) == (content, wire)


def test_kernel_wire_argument_errors() -> None:
    placement = known_answers.placements()[0]
    pairs = canonical._part_pairs(placement.parts)
    tensors = placement.tensors
    with pytest.raises(ValueError):  # needs tensors
        _native.canonical_parts_json(pairs, sha256=True, types=_TYPES, wire=("a", "b", "c"))
    with pytest.raises(ValueError):  # needs sha256
        _native.canonical_parts_json(pairs, tensors=tensors, types=_TYPES, wire=("a", "b", "c"))
    for bad in (("a", "b"), ["a", "b", "c"], ("a", "b", 3), ("a", b"b", "c")):
        with pytest.raises(TypeError):
            _native.canonical_parts_json(pairs, sha256=True, tensors=tensors, types=_TYPES, wire=bad)
    with pytest.raises(ValueError):
        _native.canonical_parts_json(pairs, sha256=True, tensors=tensors, types=_TYPES, wire=("a", "\u00e9", "c"))
    # wire=None is the one-digest form
    assert _native.canonical_parts_json(
        pairs, sha256=True, tensors=tensors, types=_TYPES, wire=None
    ) == _native.canonical_parts_json(pairs, sha256=True, tensors=tensors, types=_TYPES)


class _Declining:
    """Stands for _native with the fused form declined (the exact encoding runs)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(_native, name)

    @staticmethod
    def canonical_parts_json(*args: Any, **kwargs: Any) -> Any:
        if "tensors" in kwargs:
            return None
        return _native.canonical_parts_json(*args, **kwargs)


def test_declined_encoding_leaves_the_digest_to_first_access(monkeypatch: pytest.MonkeyPatch) -> None:
    placement = known_answers.placements()[0]
    with monkeypatch.context() as patch:
        patch.setattr(canonical, "_native", _Declining())
        fresh = _rebuilt(placement)
    assert fresh.placement_id == placement.placement_id
    assert "_digest_ahead" not in fresh.__dict__
    assert fresh.digest == placement.digest


def _fields(placement: Any) -> dict[str, Any]:
    return {
        "resource_id": placement.resource_id,
        "revision": placement.revision,
        "weight_generation": placement.weight_generation,
        "placement_set_id": placement.placement_set_id,
        "topology": placement.topology,
    }


@pytest.mark.parametrize(
    "field",
    ["resource_id", "revision", "weight_generation", "placement_set_id", "placement_id", "topology", "parts",
     "tensors"],
)
def test_a_field_replaced_before_first_access_is_hashed(field: str) -> None:
    placement = _rebuilt(known_answers.placements()[1])
    other = _rebuilt(known_answers.placements()[0])
    value = {
        "resource_id": "other-resource",
        "revision": "other-revision",
        "weight_generation": placement.weight_generation + 1,
        "placement_set_id": "other-set",
        "placement_id": "sha256:" + "0" * 64,
        "topology": other.topology,
        "parts": other.parts,
        "tensors": other.tensors,
    }[field]
    object.__setattr__(placement, field, value)
    assert placement.digest == canonical.placement_wire_json(placement, sha256=True)
    assert "_digest_ahead" not in placement.__dict__


def test_an_equal_replacement_is_hashed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    placement = _rebuilt(known_answers.placements()[1])
    expected = placement.__dict__["_digest_ahead"][0]
    object.__setattr__(placement, "parts", tuple(list(placement.parts)))  # equal, not the same object
    calls = []
    real = canonical.placement_wire_json

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr("mooncake.reshard.weight.placement.placement_wire_json", counting)
    assert placement.digest == expected
    assert calls == [1]
    fresh = _rebuilt(known_answers.placements()[1])
    assert fresh.digest == expected
    assert calls == [1]  # the constructor's value


def test_subclass_and_copies_compute_their_own() -> None:
    class Sub(WeightPlacementManifest):
        pass

    placement = known_answers.placements()[0]
    sub = Sub(**_fields(placement), parts=placement.parts)
    assert "_digest_ahead" not in sub.__dict__
    assert sub.digest == placement.digest
    fresh = _rebuilt(placement)
    for clone in (copy.copy(fresh), copy.deepcopy(fresh), pickle.loads(pickle.dumps(fresh))):
        assert "_digest_ahead" not in clone.__dict__
        assert clone._digest_cache is None
        assert clone.digest == placement.digest
    assert "_digest_ahead" in fresh.__dict__


def test_pickles_unchanged_by_the_cache() -> None:
    placement = known_answers.placements()[0]
    fresh = _rebuilt(placement)
    plain = _rebuilt(placement)
    del plain.__dict__["_digest_ahead"]
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        assert pickle.dumps(fresh, protocol) == pickle.dumps(plain, protocol)
    assert fresh.digest == plain.digest
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        assert pickle.dumps(fresh, protocol) == pickle.dumps(plain, protocol)

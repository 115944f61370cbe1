"""Spec 5: StoredManifestIdentity, StoredFragmentSnapshot, StoredWeightManifest (rules, JSON,
from_dict, pickle) and validate_weight_manifest_snapshot; known answer of 6.5."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
from typing import Any

import pytest

from mooncake.reshard.contracts import ResourceKind, RuntimeBindingFragment, StoredResourceManifest
from mooncake.reshard.weight.storage_manifest import (
    StoredFragmentSnapshot,
    StoredManifestIdentity,
    StoredWeightManifest,
    validate_weight_manifest_snapshot,
)
from mooncake.reshard.weight.types import ReplicatedAxis, SplitAxis
from spec_helpers import (
    GROUP,
    KA_STORED_JSON,
    KA_STORED_SHA,
    U64,
    StrSub,
    ka_stored_kwargs,
    ka_stored_tensor,
    raises,
    runtime_fragment_kwargs,
    stored_fragment_kwargs,
)

TID = "layers.2.experts.3.w1"


def sfs(**overrides: Any) -> StoredFragmentSnapshot:
    return StoredFragmentSnapshot(**stored_fragment_kwargs(**overrides))


def swm(**overrides: Any) -> StoredWeightManifest:
    return StoredWeightManifest(**ka_stored_kwargs(**overrides))


def halves(key_a: str = "/payload/0", key_b: str = "/payload/0", off_b: int = 32, **kw: Any) -> tuple:
    return (
        sfs(fragment_id="s0", local_shape=(4, 4), nbytes=32, object_key=GROUP + key_a, object_offset=0, **kw),
        sfs(fragment_id="s1", global_offset=(4, 0), local_shape=(4, 4), nbytes=32, object_key=GROUP + key_b, object_offset=off_b, **kw),
    )


# ---------------------------------------------------------------------------------------------- 5.1


def identity_kwargs(**overrides: Any) -> dict:
    kw: dict = dict(namespace="default", resource_id="r", revision="rev", weight_generation=1, group_id="g",
                    manifest_key="g/manifest", content_sha256=KA_STORED_SHA)
    kw.update(overrides)
    return kw


def test_identity_fields() -> None:
    assert [f.name for f in dataclasses.fields(StoredManifestIdentity)] == [
        "namespace", "resource_id", "revision", "weight_generation", "group_id", "manifest_key", "content_sha256",
    ]
    assert StoredManifestIdentity(**identity_kwargs(weight_generation=U64)).weight_generation == U64


@pytest.mark.parametrize("name", ["namespace", "resource_id", "revision", "group_id", "manifest_key"])
def test_identity_strings(name: str) -> None:
    for bad in ("", StrSub("x"), None):
        with raises(f"{name} must be a non-empty string"):
            StoredManifestIdentity(**identity_kwargs(**{name: bad}))


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"weight_generation": -1}, "weight_generation must be at least 0"),
        ({"weight_generation": True}, "weight_generation must be an integer"),
        ({"weight_generation": 2**64}, "weight_generation must fit in an unsigned 64-bit integer"),
        ({"content_sha256": KA_STORED_SHA.upper()}, "content_sha256 must be a SHA-256 hex digest"),
        ({"content_sha256": KA_STORED_SHA[:-1]}, "content_sha256 must be a SHA-256 hex digest"),
        ({"content_sha256": "sha256:" + KA_STORED_SHA}, "content_sha256 must be a SHA-256 hex digest"),
        ({"content_sha256": "z" * 64}, "content_sha256 must be a SHA-256 hex digest"),
    ],
)
def test_identity_rules(overrides: dict, message: str) -> None:
    with raises(message):
        StoredManifestIdentity(**identity_kwargs(**overrides))


# ---------------------------------------------------------------------------------------------- 5.2


def test_snapshot_fields_and_defaults() -> None:
    fields = dataclasses.fields(StoredFragmentSnapshot)
    assert [f.name for f in fields] == [
        "fragment_id", "tensor_id", "global_offset", "local_shape", "object_key", "object_offset", "nbytes", "aliases",
    ]
    assert fields[-1].default == ()
    s = sfs(global_offset=[0, 0], local_shape=[8, 4], aliases=[TID, "b", "a"])
    assert s.global_offset == (0, 0) and type(s.global_offset) is tuple and type(s.local_shape) is tuple
    assert s.aliases == ("a", "b", TID) and type(s.aliases) is tuple
    # neither object_offset nor nbytes is capped at u64
    big = sfs(object_offset=2**70, nbytes=2**70)
    assert big.object_offset == 2**70 and big.nbytes == 2**70
    assert pickle.loads(pickle.dumps(s)) == s
    assert copy.copy(s) == s


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"global_offset": {0}}, "global_offset must contain integers"),
        ({"global_offset": (0, -1)}, "global_offset must be at least 0"),
        ({"local_shape": (8, 0)}, "local_shape must be at least 1"),
        ({"local_shape": (8, True)}, "local_shape must be an integer"),
        ({"fragment_id": ""}, "fragment_id must be a non-empty string"),
        ({"tensor_id": StrSub("t")}, "tensor_id must be a non-empty string"),
        ({"object_key": ""}, "object_key must be a non-empty string"),
        ({"object_offset": -1}, "object_offset must be at least 0"),
        ({"object_offset": True}, "object_offset must be an integer"),
        ({"nbytes": 0}, "nbytes must be at least 1"),
        ({"nbytes": 64.0}, "nbytes must be an integer"),
        ({"aliases": "ab"}, "aliases must be a sequence"),
        ({"aliases": (TID, "")}, "aliases must contain non-empty strings"),
        ({"aliases": (TID, TID)}, "aliases must not contain duplicates"),
        ({"aliases": (TID,)}, "alias group must contain at least two tensor IDs"),
        ({"aliases": ("a", "b")}, "alias group must contain the fragment tensor_id"),
    ],
)
def test_snapshot_rules(overrides: dict, message: str) -> None:
    with raises(message):
        sfs(**overrides)


# ---------------------------------------------------------------------------------------------- 5.3 surface and known answer


def test_manifest_fields_and_base() -> None:
    assert issubclass(StoredWeightManifest, StoredResourceManifest)
    fields = dataclasses.fields(StoredWeightManifest)
    assert [f.name for f in fields] == [
        "namespace", "resource_id", "group_id", "manifest_key", "created_at", "revision", "weight_generation",
        "tensors", "fragments", "manifest_digest",
    ]
    digest = fields[-1]
    assert digest.init is False and digest.compare is True and digest.repr is True
    assert StoredWeightManifest.__dataclass_params__.frozen  # type: ignore[attr-defined]


def test_known_answer() -> None:
    m = swm()
    assert m.to_json() == KA_STORED_JSON
    assert m.manifest_digest == KA_STORED_SHA
    assert m.resource_kind is ResourceKind.MODEL_WEIGHT
    ident = m.manifest_identity
    assert isinstance(ident, StoredManifestIdentity)
    assert ident == StoredManifestIdentity(
        namespace="default", resource_id="qwen3.5-0.8b", revision="step-42", weight_generation=42, group_id=GROUP,
        manifest_key=GROUP + "/manifest", content_sha256=KA_STORED_SHA,
    )
    assert f"manifest_digest='{KA_STORED_SHA}'" in repr(m)


def test_to_json_uses_ensure_ascii_false() -> None:
    m = swm(created_at="2026-07-17T00:00:00Z \u00e9\u4e2d")
    text = m.to_json()
    assert "\u00e9\u4e2d" in text and "\\u" not in text
    assert json.loads(text)["created_at"].endswith("\u00e9\u4e2d")


def test_stored_order_is_kept_not_sorted() -> None:
    a, b = halves(key_b="/payload/1", off_b=0)
    m1 = swm(fragments=(a, b))
    m2 = swm(fragments=(b, a))
    assert m1.fragments == (a, b) and m2.fragments == (b, a)
    assert m1 != m2 and m1.manifest_digest != m2.manifest_digest
    assert [f["fragment_id"] for f in json.loads(m2.to_json())["fragments"]] == ["s1", "s0"]
    t2 = ka_stored_tensor(tensor_id="a.first", global_shape=(2,), shard_dims=(), parallel_axes=())
    f2 = sfs(fragment_id="x", tensor_id="a.first", global_offset=(0,), local_shape=(2,), nbytes=4, object_key=GROUP + "/payload/9")
    m3 = swm(tensors=(ka_stored_tensor(), t2), fragments=(sfs(), f2))
    assert [t.tensor_id for t in m3.tensors] == [TID, "a.first"]
    assert [t["tensor_id"] for t in json.loads(m3.to_json())["tensors"]] == [TID, "a.first"]


# ---------------------------------------------------------------------------------------------- 5.3 rules


@pytest.mark.parametrize("name", ["namespace", "resource_id", "revision", "group_id", "manifest_key", "created_at"])
def test_manifest_strings(name: str) -> None:
    for bad in ("", StrSub("x"), None):
        with raises(f"{name} must be a non-empty string"):
            swm(**{name: bad})


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"tensors": "t"}, "StoredWeightManifest tensors must be a sequence"),
        ({"tensors": ("t",)}, "StoredWeightManifest tensors must contain TensorDescriptor"),
        ({"fragments": None}, "StoredWeightManifest fragments must be a sequence"),
        (
            {"fragments": (RuntimeBindingFragment(**runtime_fragment_kwargs()),)},
            "StoredWeightManifest fragments must contain StoredFragmentSnapshot",
        ),
        ({"weight_generation": -1}, "weight_generation must be at least 0"),
        ({"weight_generation": True}, "weight_generation must be an integer"),
        ({"weight_generation": 2**64}, "weight_generation must fit in an unsigned 64-bit integer"),
        ({"manifest_key": GROUP + "/manifest2"}, "manifest_key does not belong to manifest group"),
        ({"manifest_key": "other/manifest"}, "manifest_key does not belong to manifest group"),
        ({"fragments": (sfs(object_key="elsewhere/payload/0"),)}, "payload object_key does not belong to manifest group"),
        ({"fragments": (sfs(object_key=GROUP + "/payload"),)}, "payload object_key does not belong to manifest group"),
        ({"tensors": (ka_stored_tensor(), ka_stored_tensor())}, f"duplicate tensor_id: {TID}"),
        (
            {"fragments": (sfs(fragment_id="s", local_shape=(4, 4), nbytes=32),
                           sfs(fragment_id="s", global_offset=(4, 0), local_shape=(4, 4), nbytes=32, object_offset=32))},
            "duplicate fragment_id: s",
        ),
        ({"fragments": (sfs(), sfs(fragment_id="x", tensor_id="nope"))}, "unknown tensor_id: nope"),
        ({"fragments": (sfs(global_offset=(1, 0)),)}, "fragment is out of bounds: stored-0"),
        ({"fragments": (sfs(global_offset=(0,), local_shape=(8,)),)}, "fragment rank mismatch: stored-0"),
        ({"fragments": (sfs(nbytes=65),)}, "fragment byte size mismatch: stored-0: expected 64, got 65"),
        ({"fragments": (sfs(local_shape=(4, 4), nbytes=32),)}, f"tensor is not fully covered: {TID}"),
        (
            {"fragments": (sfs(fragment_id="a", local_shape=(4, 4), nbytes=32),
                           sfs(fragment_id="b", global_offset=(3, 0), local_shape=(4, 4), nbytes=32, object_offset=64))},
            f"tensor is not fully covered: {TID}",
        ),
        (
            {"fragments": (sfs(fragment_id="a", local_shape=(4, 4), nbytes=32),
                           sfs(fragment_id="b", local_shape=(4, 4), nbytes=32, object_offset=64))},
            f"duplicate fragment geometry: {TID}",
        ),
        ({"fragments": halves(off_b=31)}, f"stored fragment object ranges overlap: s0 and s1 in {GROUP}/payload/0"),
        ({"fragments": tuple(reversed(halves(off_b=16)))}, f"stored fragment object ranges overlap: s0 and s1 in {GROUP}/payload/0"),
    ],
)
def test_manifest_rules(overrides: dict, message: str) -> None:
    with raises(message):
        swm(**overrides)


def test_object_ranges_touching_or_in_different_objects_are_fine() -> None:
    assert len(swm(fragments=halves(off_b=32)).fragments) == 2
    assert len(swm(fragments=halves(key_b="/payload/1", off_b=0)).fragments) == 2


def test_manifest_rule_order() -> None:
    with raises("created_at must be a non-empty string"):
        swm(created_at="", tensors="x")
    with raises("StoredWeightManifest fragments must be a sequence"):
        swm(fragments="x", weight_generation=-1)
    with raises("weight_generation must be at least 0"):
        swm(weight_generation=-1, manifest_key="x")
    with raises("manifest_key does not belong to manifest group"):
        swm(manifest_key="x", fragments=(sfs(object_key="elsewhere"),))
    with raises("payload object_key does not belong to manifest group"):
        swm(fragments=(sfs(object_key="elsewhere", tensor_id="nope"),))


def alias_kwargs(b_tensor: Any = None, b_fragment: bool = True, group: tuple = ("a", "b")) -> dict:
    ta = ka_stored_tensor(tensor_id="a")
    tb = b_tensor or ka_stored_tensor(tensor_id="b")
    frags = [sfs(fragment_id="fa", tensor_id="a", aliases=group)]
    if b_fragment:
        frags.append(sfs(fragment_id="fb", tensor_id="b", aliases=group, object_key=GROUP + "/payload/1"))
    return dict(tensors=(ta, tb), fragments=tuple(frags))


def test_stored_aliases() -> None:
    m = swm(**alias_kwargs())
    assert [f.aliases for f in m.fragments] == [("a", "b"), ("a", "b")]
    with raises("stored alias references unknown tensor: zz"):
        swm(**alias_kwargs(group=("a", "b", "zz")))
    with raises("stored alias group is incomplete for fragment geometry"):
        swm(**alias_kwargs(group=("a", "b", "c"), b_tensor=None) | {"tensors": (ka_stored_tensor(tensor_id="a"), ka_stored_tensor(tensor_id="b"), ka_stored_tensor(tensor_id="c"))})
    with raises("stored alias tensor descriptors differ"):
        swm(**alias_kwargs(b_tensor=ka_stored_tensor(tensor_id="b", layer_id=9)))
    with raises("stored alias tensor descriptors differ"):
        swm(**alias_kwargs(b_tensor=ka_stored_tensor(tensor_id="b", parallel_axes=(SplitAxis("tp", 0), ReplicatedAxis("dp")))))


# ---------------------------------------------------------------------------------------------- JSON and dict


@pytest.mark.parametrize("convert", [str, lambda s: s.encode("utf-8"), lambda s: bytearray(s.encode("utf-8"))])
def test_from_json_round_trip(convert: Any) -> None:
    m = StoredWeightManifest.from_json(convert(KA_STORED_JSON))
    assert m == swm()
    assert m.manifest_digest == KA_STORED_SHA
    assert StoredWeightManifest.from_json(m.to_json()).to_json() == m.to_json()


@pytest.mark.parametrize(
    "text, message",
    [
        (KA_STORED_JSON.replace('"weight_generation":42', '"weight_generation":NaN'), "non-finite JSON number is unsupported: NaN"),
        (KA_STORED_JSON.replace('"weight_generation":42', '"weight_generation":Infinity'), "non-finite JSON number is unsupported: Infinity"),
        (KA_STORED_JSON.replace('"weight_generation":42', '"weight_generation":-Infinity'), "non-finite JSON number is unsupported: -Infinity"),
        ('{"namespace":"a","namespace":"b"}', "duplicate JSON field: namespace"),
        (KA_STORED_JSON.replace('"dtype":"bfloat16"', '"dtype":"bfloat16","dtype":"float32"'), "duplicate JSON field: dtype"),
        ("{", "weight manifest is not valid JSON"),
        ("", "weight manifest is not valid JSON"),
        ("[]", "weight manifest must be a JSON object"),
        ('"manifest"', "weight manifest must be a JSON object"),
        ("42", "weight manifest must be a JSON object"),
    ],
)
def test_from_json_errors(text: str, message: str) -> None:
    with raises(message):
        StoredWeightManifest.from_json(text)


@pytest.mark.parametrize("value", [None, 42, ["{}"], {"a": 1}])
def test_from_json_wrong_argument_type(value: Any) -> None:
    with raises("weight manifest is not valid JSON"):
        StoredWeightManifest.from_json(value)


def ka_dict() -> dict:
    return json.loads(KA_STORED_JSON)


def test_from_dict() -> None:
    assert StoredWeightManifest.from_dict(ka_dict()) == swm()

    def mutate(fn: Any) -> dict:
        d = ka_dict()
        fn(d)
        return d

    cases = [
        (lambda d: d.update(extra=1), "weight manifest schema fields do not match contract"),
        (lambda d: d.pop("created_at"), "weight manifest schema fields do not match contract"),
        (lambda d: d.update(manifest_digest=KA_STORED_SHA), "weight manifest schema fields do not match contract"),
        (lambda d: d.pop("resource_kind"), "weight manifest schema fields do not match contract"),
        (lambda d: d["tensors"][0].update(partition_dim=0), "tensor descriptor schema fields do not match contract"),
        (lambda d: d["tensors"][0].pop("layer_id"), "tensor descriptor schema fields do not match contract"),
        (lambda d: d["fragments"][0].pop("aliases"), "stored fragment schema fields do not match contract"),
        (lambda d: d["fragments"][0].update(owner=None), "stored fragment schema fields do not match contract"),
        (lambda d: d.update(resource_kind="kv_cache"), "weight manifest resource_kind must be model_weight"),
        (lambda d: d.update(weight_generation=True), "weight_generation must be an integer"),
        (lambda d: d.update(weight_generation=-1), "weight_generation must be at least 0"),
    ]
    for fn, message in cases:
        with raises(message):
            StoredWeightManifest.from_dict(mutate(fn))


# ---------------------------------------------------------------------------------------------- pickle, replace, snapshot


def test_pickle_state_and_revalidation() -> None:
    m = swm()
    state = m.__getstate__()
    assert state == ("default", "qwen3.5-0.8b", "step-42", 42, GROUP, GROUP + "/manifest", m.tensors, m.fragments, "2026-07-17T00:00:00Z")
    for restored in (pickle.loads(pickle.dumps(m)), copy.copy(m), copy.deepcopy(m)):
        assert restored == m and restored.manifest_digest == KA_STORED_SHA
    # the digest is recomputed, not trusted
    forged = swm()
    object.__setattr__(forged, "manifest_digest", "0" * 64)
    assert pickle.loads(pickle.dumps(forged)).manifest_digest == KA_STORED_SHA
    # forged content is revalidated on unpickling
    bad = swm()
    object.__setattr__(bad, "manifest_key", "elsewhere")
    with raises("manifest_key does not belong to manifest group"):
        pickle.loads(pickle.dumps(bad))
    blank = object.__new__(StoredWeightManifest)
    for state in ((), state[:8], state + (None,), list(state), None):
        with raises("StoredWeightManifest pickle state is invalid"):
            blank.__setstate__(state)


def test_replace_recomputes_digest() -> None:
    m = swm()
    r = dataclasses.replace(m, created_at="2027-01-01T00:00:00Z")
    assert r.manifest_digest != m.manifest_digest and r.manifest_digest == json_sha(r.to_json())
    with raises("manifest_key does not belong to manifest group"):
        dataclasses.replace(m, group_id="other")
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.created_at = "x"  # type: ignore[misc]


def json_sha(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_validate_weight_manifest_snapshot() -> None:
    m = swm()
    v = validate_weight_manifest_snapshot(m)
    assert v == m and v is not m and type(v) is StoredWeightManifest
    for bad in (None, "x", ka_dict()):
        with raises("weight manifest snapshot is invalid"):
            validate_weight_manifest_snapshot(bad)
    forged = swm()
    object.__setattr__(forged, "manifest_digest", "0" * 64)
    assert validate_weight_manifest_snapshot(forged).manifest_digest == KA_STORED_SHA
    missing = swm()
    object.__delattr__(missing, "namespace")
    with raises("weight manifest snapshot is invalid"):
        validate_weight_manifest_snapshot(missing)
    broken = swm()
    object.__setattr__(broken, "fragments", (sfs(object_key="elsewhere"),))
    with raises("payload object_key does not belong to manifest group"):
        validate_weight_manifest_snapshot(broken)


@pytest.mark.parametrize(
    "value",
    [
        "[" * 100000 + "]" * 100000,
        b"\xff\xfe",
        KA_STORED_JSON.replace('"weight_generation":42', '"weight_generation":' + str(10**400)),
        KA_STORED_JSON.replace('"weight_generation":42', '"weight_generation":42.0'),
        KA_STORED_JSON[:-1],
    ],
    ids=["deep", "bad-utf8", "huge-generation", "float", "truncated"],
)
def test_hostile_documents_raise_plain_value_error(value: Any) -> None:
    with pytest.raises(ValueError) as info:
        StoredWeightManifest.from_json(value)
    assert type(info.value) is ValueError


def test_uncapped_object_offset_survives_json() -> None:
    # spec 5.2: object_offset and nbytes are not capped at u64
    text = KA_STORED_JSON.replace('"object_offset":0', '"object_offset":' + str(10**400))
    m = StoredWeightManifest.from_json(text)
    assert m.fragments[0].object_offset == 10**400
    assert m.to_json() == text

"""Spec section 3: resource-neutral contracts (IDs, ResourceKind, protocols,
StoredResourceManifest, validate_resource_binding_identity, RuntimeBindingFragment)."""

from __future__ import annotations

import abc
import copy
import dataclasses
import enum
import inspect
import pickle
import typing
from types import SimpleNamespace
from typing import Any, Optional

import pytest

from mooncake.reshard import contracts
from mooncake.reshard.contracts import (
    PlacementManifest,
    ResourceKind,
    ResourceManifest,
    RuntimeBindingFragment,
    RuntimeBindingManifest,
    StoredResourceManifest,
    validate_resource_binding_identity,
)
from spec_helpers import U64, IntSub, StrSub, raises, runtime_fragment_kwargs

ID_NAMES = (
    "ResourceId", "PlacementId", "ParticipantId", "PlacementFragmentId", "RuntimeFragmentId", "TensorId",
    "TopologyId", "PlacementSetId", "RevisionId", "RuntimeInstanceId", "LeaseId", "StoredFragmentSnapshotId",
)


# ---------------------------------------------------------------------------------------------- 3.1


@pytest.mark.parametrize("name", ID_NAMES)
def test_id_types_are_str_newtypes(name: str) -> None:
    from mooncake.reshard.contracts import ids

    t = getattr(ids, name)
    assert getattr(contracts, name) is t
    assert t.__name__ == name
    assert t.__supertype__ is str
    value = t("x")
    assert type(value) is str and value == "x"


def test_no_stored_fragment_id_name() -> None:
    from mooncake.reshard.contracts import ids

    assert not hasattr(contracts, "StoredFragmentId")
    assert not hasattr(ids, "StoredFragmentId")


# ---------------------------------------------------------------------------------------------- 3.2


def test_resource_kind_enum() -> None:
    assert issubclass(ResourceKind, str) and issubclass(ResourceKind, enum.Enum)
    assert [(m.name, m.value) for m in ResourceKind] == [("MODEL_WEIGHT", "model_weight"), ("KV_CACHE", "kv_cache")]
    assert ResourceKind.MODEL_WEIGHT == "model_weight"


@pytest.mark.parametrize(
    "proto, props",
    [
        (ResourceManifest, {"resource_id", "resource_kind"}),
        (PlacementManifest, {"resource_id", "resource_kind", "placement_id", "digest"}),
        (
            RuntimeBindingManifest,
            {"resource_id", "resource_kind", "placement_id", "placement_digest", "instance_id", "generation", "lease_id"},
        ),
    ],
)
def test_protocols_have_read_only_properties(proto: Any, props: set) -> None:
    assert getattr(proto, "_is_protocol", False) is True
    assert typing.Protocol in proto.__mro__
    for name in props:
        attr = inspect.getattr_static(proto, name)
        assert isinstance(attr, property), name
        assert attr.fset is None, name


def test_protocol_bases() -> None:
    assert ResourceManifest.__bases__ == (typing.Protocol,)
    assert PlacementManifest.__bases__ == (ResourceManifest, typing.Protocol)
    assert RuntimeBindingManifest.__bases__ == (ResourceManifest, typing.Protocol)
    assert ResourceManifest in PlacementManifest.__mro__
    assert ResourceManifest in RuntimeBindingManifest.__mro__


def test_stored_resource_manifest_is_abstract_frozen_dataclass() -> None:
    assert issubclass(StoredResourceManifest, abc.ABC)
    assert not getattr(StoredResourceManifest, "_is_protocol", False)
    assert dataclasses.is_dataclass(StoredResourceManifest)
    assert StoredResourceManifest.__dataclass_params__.frozen  # type: ignore[attr-defined]
    fields = dataclasses.fields(StoredResourceManifest)
    assert [f.name for f in fields] == ["namespace", "resource_id", "group_id", "manifest_key", "created_at"]
    assert all(f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING for f in fields)
    assert "resource_kind" in StoredResourceManifest.__abstractmethods__
    assert inspect.isabstract(StoredResourceManifest)
    with pytest.raises(TypeError):
        StoredResourceManifest(namespace="n", resource_id="r", group_id="g", manifest_key="g/manifest", created_at="t")  # type: ignore[abstract]


def _pair(**overrides: Any) -> tuple:
    placement = SimpleNamespace(resource_kind="model_weight", resource_id="r", placement_id="p", digest="d")
    binding = SimpleNamespace(resource_kind="model_weight", resource_id="r", placement_id="p", placement_digest="d")
    for k, v in overrides.items():
        setattr(binding, k, v)
    return placement, binding


def test_validate_resource_binding_identity_accepts_structural_match() -> None:
    assert validate_resource_binding_identity(*_pair()) is None


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"resource_kind": "kv_cache", "resource_id": "x", "placement_id": "x", "placement_digest": "x"},
         "placement and runtime binding resource_kind differ"),
        ({"resource_id": "x", "placement_id": "x", "placement_digest": "x"}, "placement and runtime binding resource_id differ"),
        ({"placement_id": "x", "placement_digest": "x"}, "placement_id and runtime binding placement_id differ"),
        ({"placement_digest": "x"}, "placement digest and runtime binding placement digest differ"),
    ],
)
def test_validate_resource_binding_identity_order(overrides: dict, message: str) -> None:
    with raises(message):
        validate_resource_binding_identity(*_pair(**overrides))


# ---------------------------------------------------------------------------------------------- 3.3


def make(**overrides: Any) -> RuntimeBindingFragment:
    return RuntimeBindingFragment(**runtime_fragment_kwargs(**overrides))


def test_runtime_fragment_valid_and_fields() -> None:
    f = make()
    assert [x.name for x in dataclasses.fields(RuntimeBindingFragment)] == [
        "placement_fragment_id", "fragment_id", "address", "nbytes", "worker_id", "endpoint", "device", "itemsize",
        "local_shape", "strides_bytes", "storage_address", "storage_nbytes", "storage_offset_bytes", "owner",
    ]
    owner = dataclasses.fields(RuntimeBindingFragment)[-1]
    assert owner.default is None and owner.compare is False and owner.repr is False
    assert typing.get_type_hints(RuntimeBindingFragment)["owner"] == Optional[object]
    assert f.owner is None
    assert "owner" not in repr(f)


@pytest.mark.parametrize("name", ["placement_fragment_id", "fragment_id", "worker_id", "endpoint", "device"])
@pytest.mark.parametrize("bad", ["", StrSub("x"), 1, None, b"x"])
def test_runtime_fragment_strings(name: str, bad: Any) -> None:
    with raises(f"{name} must be a non-empty string"):
        make(**{name: bad})


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"address": 0}, "address must be at least 1"),
        ({"address": -5}, "address must be at least 1"),
        ({"address": True}, "address must be an integer"),
        ({"address": 4096.0}, "address must be an integer"),
        ({"address": IntSub(4096)}, "address must be an integer"),
        ({"address": "4096"}, "address must be an integer"),
        ({"address": 2**64}, "address must fit in an unsigned 64-bit integer"),
        ({"address": 2**200}, "address must fit in an unsigned 64-bit integer"),
        ({"nbytes": 0}, "nbytes must be at least 1"),
        ({"nbytes": False}, "nbytes must be an integer"),
        ({"nbytes": 2**64}, "nbytes must fit in an unsigned 64-bit integer"),
        ({"address": 2**64 - 4, "nbytes": 4}, "address range must fit in an unsigned 64-bit integer"),
        ({"address": U64, "nbytes": 1}, "address range must fit in an unsigned 64-bit integer"),
        ({"address": 1, "nbytes": U64}, "address range must fit in an unsigned 64-bit integer"),
        ({"itemsize": 0}, "runtime itemsize must be at least 1"),
        ({"itemsize": True}, "runtime itemsize must be an integer"),
        ({"itemsize": 2.0}, "runtime itemsize must be an integer"),
        ({"local_shape": (4, 0)}, "runtime local_shape[1] must be at least 1"),
        ({"local_shape": (4, True)}, "runtime local_shape[1] must be an integer"),
        ({"local_shape": (IntSub(4), 4)}, "runtime local_shape[0] must be an integer"),
        ({"local_shape": range(2)}, "runtime local_shape must be a tuple or list"),
        ({"local_shape": {4}}, "runtime local_shape must be a tuple or list"),
        ({"local_shape": "44"}, "runtime local_shape must be a tuple or list"),
        ({"strides_bytes": (8, -1)}, "runtime strides_bytes[1] must be at least 0"),
        ({"strides_bytes": (8.0, 2)}, "runtime strides_bytes[0] must be an integer"),
        ({"strides_bytes": "82"}, "runtime strides_bytes must be a tuple or list"),
        ({"strides_bytes": None}, "runtime strides_bytes must be a tuple or list"),
        ({"strides_bytes": (2,)}, "runtime stride rank differs from local_shape"),
        ({"strides_bytes": (0, 2)}, "runtime stride must be positive for non-singleton dimensions"),
        ({"storage_address": 0}, "address must be at least 1"),
        ({"storage_nbytes": 0}, "nbytes must be at least 1"),
        ({"storage_address": True}, "address must be an integer"),
        ({"storage_nbytes": 2**64}, "nbytes must fit in an unsigned 64-bit integer"),
        ({"storage_address": 2**64 - 4, "storage_nbytes": 4}, "address range must fit in an unsigned 64-bit integer"),
        ({"storage_offset_bytes": -1}, "storage_offset_bytes must be at least 0"),
        ({"storage_offset_bytes": True}, "storage_offset_bytes must be an integer"),
        ({"storage_offset_bytes": 2**64}, "storage_offset_bytes must fit in an unsigned 64-bit integer"),
        (
            {"storage_address": 2**64 - 100, "storage_nbytes": 50, "storage_offset_bytes": 200},
            "normalized runtime address must fit in 64 bits",
        ),
        ({"address": 4100}, "runtime address must equal storage_address plus storage_offset_bytes"),
        (
            {"address": 4112, "storage_nbytes": 40, "storage_offset_bytes": 16},
            "runtime view exceeds storage allocation bounds",
        ),
        ({"storage_nbytes": 16}, "runtime view exceeds storage allocation bounds"),
    ],
)
def test_runtime_fragment_rules(overrides: dict, message: str) -> None:
    with raises(message):
        make(**overrides)


def test_runtime_fragment_edges_accepted() -> None:
    # the largest representable exclusive end
    f = make(address=2**64 - 5, nbytes=4, local_shape=(2,), strides_bytes=(2,), storage_address=2**64 - 5, storage_nbytes=4)
    assert f.address == 2**64 - 5
    # view at the very end of its allocation
    g = make(address=4104, storage_nbytes=40, storage_offset_bytes=8)
    assert g.storage_offset_bytes == 8
    # lists become tuples
    h = make(local_shape=[4, 4], strides_bytes=[8, 2])
    assert h.local_shape == (4, 4) and type(h.local_shape) is tuple and type(h.strides_bytes) is tuple


@pytest.mark.parametrize(
    "shape, strides, expected",
    [((1, 4), (200, 2), (8, 2)), ((4, 1), (2, 200), (2, 2)), ((2, 1, 4), (8, 0, 2), (8, 8, 2)), ((1,), (0,), (2,))],
)
def test_runtime_fragment_singleton_normalization(shape: tuple, strides: tuple, expected: tuple) -> None:
    nbytes = 2
    for e in shape:
        nbytes *= e
    f = make(local_shape=shape, strides_bytes=strides, nbytes=nbytes, storage_nbytes=nbytes)
    assert f.strides_bytes == expected and type(f.strides_bytes) is tuple


def test_runtime_fragment_first_rule_wins() -> None:
    # strings (step 1) are checked before the address range (step 2)
    with raises("device must be a non-empty string"):
        make(device="", address=0)
    with raises("address must be at least 1"):
        make(address=0, itemsize=0)
    with raises("runtime itemsize must be at least 1"):
        make(itemsize=0, local_shape=(0,))


def test_runtime_fragment_pickle_drops_owner_and_revalidates() -> None:
    owner = object()
    f = make(owner=owner)
    assert f.owner is owner
    reduced = f.__reduce__()
    assert reduced[0] is RuntimeBindingFragment
    assert tuple(reduced[1]) == tuple(getattr(f, x.name) for x in dataclasses.fields(RuntimeBindingFragment)[:13])
    for restored in (pickle.loads(pickle.dumps(f)), pickle.loads(pickle.dumps(f, protocol=pickle.HIGHEST_PROTOCOL)), copy.copy(f)):
        assert restored.owner is None
        assert restored == f
    assert f == make(owner=object())  # owner is not compared
    assert hash(f) == hash(make())


def test_runtime_fragment_pickle_revalidates_forged_state() -> None:
    f = make()
    object.__setattr__(f, "address", 0)
    with raises("address must be at least 1"):
        pickle.loads(pickle.dumps(f))


def test_runtime_fragment_frozen_and_replace_revalidates() -> None:
    f = make()
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.address = 5  # type: ignore[misc]
    with raises("address must be at least 1"):
        dataclasses.replace(f, address=0)
    g = dataclasses.replace(f, local_shape=(1, 16), strides_bytes=(999, 2))
    assert g.strides_bytes == (32, 2)

"""Spec 1.2 and 13: every manifest-layer value is a frozen dataclass with the spec's fields and
flags; ``replace``/``asdict``/``copy``/``pickle``/``inspect.signature`` work; default-pickled types
restore their ``__dict__`` without revalidation while the types with hooks revalidate."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
from typing import Any, Callable, Dict

import pytest
from spec_helpers import field_state

from mooncake.reshard.contracts import RuntimeBindingFragment
from mooncake.reshard.weight import (
    OwnershipAxis,
    ParallelRank,
    ParallelTopology,
    PlacementFragment,
    ReplicatedAxis,
    SplitAxis,
    StoredFragmentSnapshot,
    StoredWeightManifest,
    TensorDescriptor,
    TopologyParticipant,
    WeightPlacementManifest,
    WeightPlacementPart,
    WeightRuntimeBindingManifest,
)
from mooncake.reshard.weight.storage_manifest import StoredManifestIdentity
from spec_helpers import (
    field_state,
    KA_DIGEST,
    KA_STORED_SHA,
    ka_binding,
    ka_fragment,
    ka_part,
    ka_placement,
    ka_stored_kwargs,
    ka_tensor,
    ka_topology,
    raises,
    runtime_fragment_kwargs,
    stored_fragment_kwargs,
)

FACTORIES: Dict[str, Callable[[], Any]] = {
    "ParallelRank": lambda: ParallelRank(dp=1, tp=2, pp=3, ep=4),
    "SplitAxis": lambda: SplitAxis("tp", 1),
    "ReplicatedAxis": lambda: ReplicatedAxis("dp"),
    "OwnershipAxis": lambda: OwnershipAxis("pp"),
    "TensorDescriptor": ka_tensor,
    "PlacementFragment": ka_fragment,
    "TopologyParticipant": lambda: TopologyParticipant("worker-0", ParallelRank()),
    "ParallelTopology": ka_topology,
    "WeightPlacementPart": ka_part,
    "WeightPlacementManifest": ka_placement,
    "RuntimeBindingFragment": lambda: RuntimeBindingFragment(**runtime_fragment_kwargs()),
    "WeightRuntimeBindingManifest": ka_binding,
    "StoredManifestIdentity": lambda: StoredManifestIdentity(
        namespace="n", resource_id="r", revision="v", weight_generation=1, group_id="g", manifest_key="g/manifest",
        content_sha256=KA_STORED_SHA),
    "StoredFragmentSnapshot": lambda: StoredFragmentSnapshot(**stored_fragment_kwargs()),
    "StoredWeightManifest": lambda: StoredWeightManifest(**ka_stored_kwargs()),
}

# (name, init, repr, compare) for every field, in order (spec 3.3, 4, 5)
FIELDS: Dict[str, list] = {
    "ParallelRank": ["dp", "tp", "pp", "ep"],
    "SplitAxis": ["kind", "dim"],
    "ReplicatedAxis": ["kind"],
    "OwnershipAxis": ["kind"],
    "TensorDescriptor": ["tensor_id", "global_shape", "dtype", "itemsize", "shard_dims", "layout_fingerprint", "parallel_axes", "layer_id", "expert_id"],
    "PlacementFragment": ["tensor_id", "global_offset", "local_shape", "nbytes", "rank", "pipeline_stage_id", "aliases", "placement_fragment_id"],
    "TopologyParticipant": ["participant_id", "rank"],
    "ParallelTopology": ["tp_size", "pp_size", "ep_size", "dp_size", "participants", "topology_id"],
    "WeightPlacementPart": ["resource_id", "revision", "weight_generation", "placement_set_id", "topology_id", "participant_id", "rank", "tensors", "fragments"],
    "WeightPlacementManifest": ["resource_id", "placement_id", "revision", "weight_generation", "placement_set_id", "topology", "parts", "tensors", "fragments", ("_digest_cache", False, False, False)],
    "RuntimeBindingFragment": ["placement_fragment_id", "fragment_id", "address", "nbytes", "worker_id", "endpoint", "device", "itemsize", "local_shape", "strides_bytes", "storage_address", "storage_nbytes", "storage_offset_bytes", ("owner", True, False, False)],
    "WeightRuntimeBindingManifest": ["resource_id", "placement_id", "placement_digest", "instance_id", "generation", "lease_id", "revision", "participant_id", "fragments"],
    "StoredManifestIdentity": ["namespace", "resource_id", "revision", "weight_generation", "group_id", "manifest_key", "content_sha256"],
    "StoredFragmentSnapshot": ["fragment_id", "tensor_id", "global_offset", "local_shape", "object_key", "object_offset", "nbytes", "aliases"],
    "StoredWeightManifest": ["namespace", "resource_id", "group_id", "manifest_key", "created_at", "revision", "weight_generation", "tensors", "fragments", ("manifest_digest", False, True, True)],
}

NAMES = sorted(FACTORIES)


@pytest.mark.parametrize("name", NAMES)
def test_frozen_dataclass_with_spec_fields(name: str) -> None:
    value = FACTORIES[name]()
    cls = type(value)
    assert cls.__name__ == name
    assert dataclasses.is_dataclass(cls)
    assert cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
    expected = [f if isinstance(f, tuple) else (f, True, True, True) for f in FIELDS[name]]
    assert [(f.name, f.init, f.repr, f.compare) for f in dataclasses.fields(cls)] == expected
    first = dataclasses.fields(cls)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, first, getattr(value, first))


@pytest.mark.parametrize("name", NAMES)
def test_asdict_copy_pickle_signature(name: str) -> None:
    value = FACTORIES[name]()
    d = dataclasses.asdict(value)
    assert set(d) == {f.name for f in dataclasses.fields(value)}
    assert copy.copy(value) == value
    assert copy.deepcopy(value) == value
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
        restored = pickle.loads(pickle.dumps(value, protocol=protocol))
        assert restored == value and type(restored) is type(value)
        assert hash(restored) == hash(value)
    inspect.signature(type(value))


@pytest.mark.parametrize("name", [n for n in NAMES if n != "WeightPlacementManifest"])
def test_replace_without_changes_returns_equal_value(name: str) -> None:
    value = FACTORIES[name]()
    assert dataclasses.replace(value) == value


def test_placement_manifest_replace_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        dataclasses.replace(ka_placement())
    with pytest.raises(TypeError):
        dataclasses.replace(ka_placement(), revision="other")


def test_default_pickling_restores_dict_without_revalidation() -> None:
    # spec 13: "Every other dataclass uses default dataclass pickling: the __dict__ state is
    # restored without running __post_init__ (this includes WeightPlacementManifest._digest_cache)"
    p = ka_placement()
    assert p.digest == KA_DIGEST
    restored = pickle.loads(pickle.dumps(p))
    assert restored._digest_cache == KA_DIGEST
    t = ka_tensor()
    object.__setattr__(t, "dtype", "")
    assert pickle.loads(pickle.dumps(t)).dtype == ""
    r = ParallelRank()
    object.__setattr__(r, "tp", -1)
    assert pickle.loads(pickle.dumps(r)).tp == -1
    assert copy.copy(r).tp == -1


def test_instance_state_lives_in_dict() -> None:
    for name in NAMES:
        value = FACTORIES[name]()
        for f in dataclasses.fields(value):
            if f.name == "_digest_cache":
                continue
            # (or, for a value stored in a C-owned layout, in its fields' state: what its
            # __getstate__ gives, the instance dict a dict-backed value had)
            assert f.name in field_state(value), (name, f.name)


def test_replace_revalidates_every_type() -> None:
    cases = [
        (lambda: dataclasses.replace(ParallelRank(), tp=-1), "parallel rank tp must be at least 0"),
        (lambda: dataclasses.replace(SplitAxis("tp", 0), kind="pp"), "pp cannot use split semantics"),
        (lambda: dataclasses.replace(ReplicatedAxis("tp"), kind="cp"), "unsupported parallel axis kind: cp"),
        (lambda: dataclasses.replace(OwnershipAxis("tp"), kind=""), "parallel axis kind must be a non-empty string"),
        (lambda: dataclasses.replace(ka_tensor(), dtype=""), "dtype must be a non-empty string"),
        (lambda: dataclasses.replace(ka_fragment(), nbytes=0), "nbytes must be at least 1"),
        (lambda: dataclasses.replace(TopologyParticipant("w", ParallelRank()), rank=None), "topology participant rank must be a ParallelRank"),
        (lambda: dataclasses.replace(ka_topology(), tp_size=2), "topology_id does not match canonical topology"),
        (lambda: dataclasses.replace(ka_part(), rank=ParallelRank(tp=1)), "placement part fragment rank differs from part rank"),
        (lambda: dataclasses.replace(ka_binding(), placement_digest="x"), "placement_digest must be a lowercase SHA-256 digest"),
        (lambda: dataclasses.replace(FACTORIES["StoredManifestIdentity"](), content_sha256="x"), "content_sha256 must be a SHA-256 hex digest"),
        (lambda: dataclasses.replace(FACTORIES["StoredFragmentSnapshot"](), object_offset=-1), "object_offset must be at least 0"),
        (lambda: dataclasses.replace(FACTORIES["StoredWeightManifest"](), manifest_key="x"), "manifest_key does not belong to manifest group"),
    ]
    for fn, message in cases:
        with raises(message):
            fn()


def test_placement_fragment_replace_keeps_id_even_with_new_content() -> None:
    f = PlacementFragment(tensor_id="w", global_offset=(0,), local_shape=(2,), nbytes=4, rank=ParallelRank())
    g = dataclasses.replace(f, global_offset=(2,))
    assert g.placement_fragment_id == f.placement_fragment_id


def test_whole_placement_asdict() -> None:
    d = dataclasses.asdict(ka_placement())
    assert d["placement_id"] == ka_placement().placement_id
    assert d["parts"][0]["fragments"][0]["rank"] == {"dp": 0, "tp": 0, "pp": 0, "ep": 0}
    assert isinstance(WeightPlacementPart, type) and isinstance(TensorDescriptor, type) and isinstance(ParallelTopology, type)
    assert isinstance(WeightPlacementManifest, type) and isinstance(WeightRuntimeBindingManifest, type)

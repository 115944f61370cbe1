"""Spec 1.3 integer conventions across every integer field of the manifest layer: ``bool`` and
``int`` subclasses are rejected, u64 fields accept ``2**64-1`` and reject ``2**64`` (and far larger
values) with the spec message, and huge or hugely negative ints never crash (a value or a plain
``ValueError``, never ``OverflowError``/``SystemError``)."""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, List, Tuple

import pytest

from mooncake.reshard.contracts import RuntimeBindingFragment
from mooncake.reshard.weight import (
    ParallelRank,
    ParallelTopology,
    PlacementFragment,
    SplitAxis,
    StoredFragmentSnapshot,
    StoredWeightManifest,
    TensorDescriptor,
    TopologyParticipant,
    WeightPlacementManifest,
    WeightPlacementPart,
    WeightRuntimeBindingManifest,
    weight_placement_from_json,
)
from mooncake.reshard.weight.storage_manifest import StoredManifestIdentity
from spec_helpers import (
    KA_JSON,
    KA_STORED_SHA,
    U64,
    IntSub,
    fragment_kwargs,
    ka_binding_kwargs,
    ka_manifest_kwargs,
    ka_part,
    ka_stored_kwargs,
    raises,
    runtime_fragment_kwargs,
    stored_fragment_kwargs,
    tensor_kwargs,
)


def _identity(**kw: Any) -> StoredManifestIdentity:
    base: Dict[str, Any] = dict(namespace="n", resource_id="r", revision="v", weight_generation=1, group_id="g",
                                manifest_key="g/manifest", content_sha256=KA_STORED_SHA)
    base.update(kw)
    return StoredManifestIdentity(**base)


def _topology(**kw: Any) -> ParallelTopology:
    base: Dict[str, Any] = dict(tp_size=1, pp_size=1, ep_size=1, dp_size=1, participants=(TopologyParticipant("w", ParallelRank()),))
    base.update(kw)
    return ParallelTopology(**base)


BUILDERS: Dict[str, Callable[..., Any]] = {
    "ParallelRank": lambda **kw: ParallelRank(**kw),
    "SplitAxis": lambda **kw: SplitAxis(**{"kind": "tp", "dim": 0, **kw}),
    "TensorDescriptor": lambda **kw: TensorDescriptor(**tensor_kwargs(**kw)),
    "PlacementFragment": lambda **kw: PlacementFragment(**fragment_kwargs(**kw)),
    "ParallelTopology": _topology,
    "WeightPlacementPart": lambda **kw: ka_part(**kw),
    "WeightPlacementManifest": lambda **kw: WeightPlacementManifest(**ka_manifest_kwargs(**kw)),
    "RuntimeBindingFragment": lambda **kw: RuntimeBindingFragment(**runtime_fragment_kwargs(**kw)),
    "WeightRuntimeBindingManifest": lambda **kw: WeightRuntimeBindingManifest(**ka_binding_kwargs(**kw)),
    "StoredManifestIdentity": _identity,
    "StoredFragmentSnapshot": lambda **kw: StoredFragmentSnapshot(**stored_fragment_kwargs(**kw)),
    "StoredWeightManifest": lambda **kw: StoredWeightManifest(**ka_stored_kwargs(**kw)),
}

# (type, field, label in messages, how to wrap a scalar into the field's value)
SCALAR = lambda v: v  # noqa: E731
FIRST = lambda v: (v, 4)  # noqa: E731
INT_FIELDS: List[Tuple[str, str, str, Callable[[Any], Any]]] = [
    *[("ParallelRank", f, f"parallel rank {f}", SCALAR) for f in ("dp", "tp", "pp", "ep")],
    ("SplitAxis", "dim", "split axis dim", SCALAR),
    ("TensorDescriptor", "global_shape", "global_shape", FIRST),
    ("TensorDescriptor", "itemsize", "itemsize", SCALAR),
    ("TensorDescriptor", "shard_dims", "shard_dims", lambda v: (v,)),
    ("TensorDescriptor", "layer_id", "layer_id", SCALAR),
    ("TensorDescriptor", "expert_id", "expert_id", SCALAR),
    ("PlacementFragment", "global_offset", "global_offset", FIRST),
    ("PlacementFragment", "local_shape", "local_shape", FIRST),
    ("PlacementFragment", "nbytes", "nbytes", SCALAR),
    ("PlacementFragment", "pipeline_stage_id", "pipeline_stage_id", SCALAR),
    *[("ParallelTopology", f, f, SCALAR) for f in ("tp_size", "pp_size", "ep_size", "dp_size")],
    ("WeightPlacementPart", "weight_generation", "weight_generation", SCALAR),
    ("WeightPlacementManifest", "weight_generation", "weight_generation", SCALAR),
    ("RuntimeBindingFragment", "address", "address", SCALAR),
    ("RuntimeBindingFragment", "nbytes", "nbytes", SCALAR),
    ("RuntimeBindingFragment", "itemsize", "runtime itemsize", SCALAR),
    ("RuntimeBindingFragment", "local_shape", "runtime local_shape[0]", FIRST),
    ("RuntimeBindingFragment", "strides_bytes", "runtime strides_bytes[0]", lambda v: (v, 2)),
    ("RuntimeBindingFragment", "storage_address", "address", SCALAR),
    ("RuntimeBindingFragment", "storage_nbytes", "nbytes", SCALAR),
    ("RuntimeBindingFragment", "storage_offset_bytes", "storage_offset_bytes", SCALAR),
    ("WeightRuntimeBindingManifest", "generation", "generation", SCALAR),
    ("StoredManifestIdentity", "weight_generation", "weight_generation", SCALAR),
    ("StoredFragmentSnapshot", "global_offset", "global_offset", FIRST),
    ("StoredFragmentSnapshot", "local_shape", "local_shape", FIRST),
    ("StoredFragmentSnapshot", "object_offset", "object_offset", SCALAR),
    ("StoredFragmentSnapshot", "nbytes", "nbytes", SCALAR),
    ("StoredWeightManifest", "weight_generation", "weight_generation", SCALAR),
]

IDS = [f"{t}.{f}" for t, f, _, _ in INT_FIELDS]


@pytest.mark.parametrize("type_name, field, label, wrap", INT_FIELDS, ids=IDS)
@pytest.mark.parametrize("bad", [True, False, IntSub(1), 1.0, "1"], ids=["True", "False", "IntSub", "float", "str"])
def test_non_int_rejected(type_name: str, field: str, label: str, wrap: Callable[[Any], Any], bad: Any) -> None:
    with raises(f"{label} must be an integer"):
        BUILDERS[type_name](**{field: wrap(bad)})


@pytest.mark.parametrize("type_name, field, label, wrap", INT_FIELDS, ids=IDS)
@pytest.mark.parametrize("huge", [2**63, 2**64, 2**100, -(2**100), 10**400], ids=["2^63", "2^64", "2^100", "-2^100", "10^400"])
def test_huge_ints_never_crash(type_name: str, field: str, label: str, wrap: Callable[[Any], Any], huge: int) -> None:
    try:
        BUILDERS[type_name](**{field: wrap(huge)})
    except ValueError as exc:
        assert type(exc) is ValueError
        assert str(exc)


U64_FIELDS = [
    ("PlacementFragment", "nbytes", "nbytes", {}),
    ("WeightPlacementPart", "weight_generation", "weight_generation", {}),
    ("WeightRuntimeBindingManifest", "generation", "generation", {}),
    ("StoredManifestIdentity", "weight_generation", "weight_generation", {}),
    ("StoredWeightManifest", "weight_generation", "weight_generation", {}),
    ("RuntimeBindingFragment", "address", "address", {}),
    ("RuntimeBindingFragment", "nbytes", "nbytes", {}),
    ("RuntimeBindingFragment", "storage_address", "address", {}),
    ("RuntimeBindingFragment", "storage_nbytes", "nbytes", {}),
    ("RuntimeBindingFragment", "storage_offset_bytes", "storage_offset_bytes", {}),
]


@pytest.mark.parametrize("type_name, field, label, extra", U64_FIELDS, ids=[f"{t}.{f}" for t, f, _, _ in U64_FIELDS])
@pytest.mark.parametrize("value", [2**64, 2**64 + 1, 2**200])
def test_u64_overflow_message(type_name: str, field: str, label: str, extra: dict, value: int) -> None:
    with raises(f"{label} must fit in an unsigned 64-bit integer"):
        BUILDERS[type_name](**{field: value}, **extra)


def test_u64_max_accepted() -> None:
    assert BUILDERS["PlacementFragment"](nbytes=U64).nbytes == U64
    assert BUILDERS["WeightPlacementPart"](weight_generation=U64).weight_generation == U64
    assert BUILDERS["WeightRuntimeBindingManifest"](generation=U64).generation == U64
    assert BUILDERS["StoredManifestIdentity"](weight_generation=U64).weight_generation == U64
    assert BUILDERS["StoredWeightManifest"](weight_generation=U64).weight_generation == U64
    # a view and an allocation ending exactly at the top of the address space
    top = U64 - 32
    f = BUILDERS["RuntimeBindingFragment"](address=top, storage_address=top)
    assert f.address + f.nbytes == U64
    g = BUILDERS["RuntimeBindingFragment"](address=U64 - 32, storage_address=U64 - 64, storage_nbytes=64, storage_offset_bytes=32)
    assert g.storage_offset_bytes == 32


def test_u64_generation_survives_json() -> None:
    d = json.loads(KA_JSON)
    d["weight_generation"] = 2**64
    with raises("weight_generation must fit in an unsigned 64-bit integer"):
        weight_placement_from_json(json.dumps(d))
    d["weight_generation"] = True
    with raises("weight_generation must be an integer at least 0"):
        weight_placement_from_json(json.dumps(d))

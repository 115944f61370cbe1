"""Spec 4.1-4.5: ParallelRank, axis classes, TensorDescriptor, PlacementFragment and the
``weight.types`` utility functions.  One test (or parametrised case) per validation rule."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from types import SimpleNamespace
from typing import Any, Union

import pytest

from mooncake.reshard.weight.types import (
    OwnershipAxis,
    ParallelAxis,
    ParallelAxisKind,
    ParallelRank,
    PlacementFragment,
    ReplicatedAxis,
    SplitAxis,
    SplitAxisKind,
    TensorDescriptor,
    canonical_strides_bytes,
    require_manifest_items,
    require_sha256_digest,
    validate_fragment_geometry,
)
from spec_helpers import KA_FRAGMENT_ID, U64, IntSub, StrSub, fragment_kwargs, raises, tensor_kwargs


def gen(*items: Any) -> Any:
    return (i for i in items)


# ---------------------------------------------------------------------------------------------- 4.1


def test_axis_kind_literals() -> None:
    assert typing.get_args(ParallelAxisKind) == ("dp", "pp", "ep", "tp")
    assert typing.get_args(SplitAxisKind) == ("ep", "tp")
    assert typing.get_origin(ParallelAxis) is Union
    assert typing.get_args(ParallelAxis) == (SplitAxis, ReplicatedAxis, OwnershipAxis)


def test_parallel_rank_fields_and_positional_order() -> None:
    fields = dataclasses.fields(ParallelRank)
    assert [(f.name, f.default) for f in fields] == [("dp", 0), ("tp", 0), ("pp", 0), ("ep", 0)]
    r = ParallelRank(1, 2, 3, 4)
    assert (r.dp, r.tp, r.pp, r.ep) == (1, 2, 3, 4)
    assert dataclasses.asdict(r) == {"dp": 1, "tp": 2, "pp": 3, "ep": 4}
    assert repr(r) == "ParallelRank(dp=1, tp=2, pp=3, ep=4)"
    assert {ParallelRank(tp=1): "x"}[ParallelRank(0, 1, 0, 0)] == "x"
    assert ParallelRank() == ParallelRank(0, 0, 0, 0)


@pytest.mark.parametrize("name", ["dp", "tp", "pp", "ep"])
@pytest.mark.parametrize(
    "bad, suffix",
    [(-1, "must be at least 0"), (True, "must be an integer"), (1.0, "must be an integer"), (IntSub(1), "must be an integer"), ("1", "must be an integer"), (None, "must be an integer")],
)
def test_parallel_rank_fields_validated(name: str, bad: Any, suffix: str) -> None:
    with raises(f"parallel rank {name} {suffix}"):
        ParallelRank(**{name: bad})


def test_parallel_rank_huge_int_never_crashes() -> None:
    # spec 4.1 states only "int >= 0"; whatever the outcome it must be a value or a ValueError
    try:
        r = ParallelRank(tp=2**70)
    except ValueError:
        return
    assert r.tp == 2**70


# ---------------------------------------------------------------------------------------------- 4.2


@pytest.mark.parametrize("cls", [SplitAxis, ReplicatedAxis, OwnershipAxis])
@pytest.mark.parametrize(
    "kind, message",
    [
        ("", "parallel axis kind must be a non-empty string"),
        (StrSub("tp"), "parallel axis kind must be a non-empty string"),
        (None, "parallel axis kind must be a non-empty string"),
        ("cp", "unsupported parallel axis kind: cp"),
        ("TP", "unsupported parallel axis kind: TP"),
    ],
)
def test_axis_kind_validation(cls: Any, kind: Any, message: str) -> None:
    with raises(message):
        cls(kind, 0) if cls is SplitAxis else cls(kind)


@pytest.mark.parametrize(
    "args, message",
    [
        (("pp", 0), "pp cannot use split semantics"),
        (("dp", 0), "dp cannot use split semantics"),
        (("pp", -1), "pp cannot use split semantics"),
        (("tp", -1), "split axis dim must be at least 0"),
        (("tp", True), "split axis dim must be an integer"),
        (("tp", 1.0), "split axis dim must be an integer"),
        (("ep", 1), "EP must split the leading logical expert dimension"),
        (("ep", -1), "split axis dim must be at least 0"),
    ],
)
def test_split_axis_rules(args: tuple, message: str) -> None:
    with raises(message):
        SplitAxis(*args)


def test_axis_classes_accept_valid_values() -> None:
    assert SplitAxis("tp", 3) == SplitAxis(kind="tp", dim=3)
    assert SplitAxis("ep", 0).dim == 0
    for kind in ("dp", "pp", "ep", "tp"):
        assert ReplicatedAxis(kind).kind == kind  # type: ignore[arg-type]
        assert OwnershipAxis(kind).kind == kind  # type: ignore[arg-type]
    assert [f.name for f in dataclasses.fields(SplitAxis)] == ["kind", "dim"]
    assert [f.name for f in dataclasses.fields(ReplicatedAxis)] == ["kind"]
    assert [f.name for f in dataclasses.fields(OwnershipAxis)] == ["kind"]
    assert ReplicatedAxis("tp") != OwnershipAxis("tp")


# ---------------------------------------------------------------------------------------------- 4.3


def td(**overrides: Any) -> TensorDescriptor:
    return TensorDescriptor(**tensor_kwargs(**overrides))


def test_tensor_descriptor_fields() -> None:
    fields = dataclasses.fields(TensorDescriptor)
    assert [f.name for f in fields] == [
        "tensor_id", "global_shape", "dtype", "itemsize", "shard_dims", "layout_fingerprint", "parallel_axes",
        "layer_id", "expert_id",
    ]
    defaults = {f.name: f.default for f in fields}
    assert defaults["layer_id"] is None and defaults["expert_id"] is None
    assert defaults["layout_fingerprint"] is dataclasses.MISSING
    kw = tensor_kwargs()
    del kw["layout_fingerprint"]
    with pytest.raises(TypeError):
        TensorDescriptor(**kw)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"global_shape": {4, 5}}, "global_shape must contain integers"),
        ({"global_shape": {4: 1}}, "global_shape must contain integers"),
        ({"global_shape": frozenset({4})}, "global_shape must contain integers"),
        ({"global_shape": gen(4, 4)}, "global_shape must contain integers"),
        ({"global_shape": "44"}, "global_shape must contain integers"),
        ({"global_shape": b"\x04\x04"}, "global_shape must contain integers"),
        ({"global_shape": 4}, "global_shape must contain integers"),
        ({"global_shape": (4, 0)}, "global_shape must be at least 1"),
        ({"global_shape": (4, True)}, "global_shape must be an integer"),
        ({"global_shape": (4, 4.0)}, "global_shape must be an integer"),
        ({"global_shape": ()}, "global_shape must not be empty"),
        ({"tensor_id": ""}, "tensor_id must be a non-empty string"),
        ({"tensor_id": StrSub("w")}, "tensor_id must be a non-empty string"),
        ({"dtype": ""}, "dtype must be a non-empty string"),
        ({"dtype": 1}, "dtype must be a non-empty string"),
        ({"itemsize": 0}, "itemsize must be at least 1"),
        ({"itemsize": True}, "itemsize must be an integer"),
        ({"shard_dims": {0}}, "shard_dims must contain integers"),
        ({"shard_dims": (-1,)}, "shard_dims must be at least 0"),
        ({"shard_dims": (False,)}, "shard_dims must be an integer"),
        ({"shard_dims": (0, 0)}, "shard_dims must not contain duplicates"),
        ({"shard_dims": (1, 0)}, "shard_dims must be sorted"),
        ({"shard_dims": (2,)}, "shard_dims contains an out-of-range dimension"),
        ({"parallel_axes": None}, "TensorDescriptor parallel_axes must be a sequence"),
        ({"parallel_axes": "tp"}, "TensorDescriptor parallel_axes must be a sequence"),
        ({"parallel_axes": {SplitAxis("tp", 0)}}, "TensorDescriptor parallel_axes must be a sequence"),
        ({"parallel_axes": SplitAxis("tp", 0)}, "TensorDescriptor parallel_axes must be a sequence"),
        ({"parallel_axes": (SplitAxis("tp", 0), "dp")}, "TensorDescriptor parallel_axes must contain explicit axis values"),
        ({"parallel_axes": (SimpleNamespace(kind="tp", dim=0),)}, "TensorDescriptor parallel_axes must contain explicit axis values"),
        (
            {"shard_dims": (), "parallel_axes": (ReplicatedAxis("tp"), OwnershipAxis("tp"))},
            "parallel_axes must not contain duplicate kinds",
        ),
        (
            {"shard_dims": (0,), "parallel_axes": (SplitAxis("tp", 0), SplitAxis("ep", 0))},
            "split axes must not share a dimension",
        ),
        ({"shard_dims": (), "parallel_axes": (SplitAxis("tp", 2),)}, "split axis dimension is out of range"),
        ({"shard_dims": (1,), "parallel_axes": (SplitAxis("tp", 0),)}, "parallel axis split dimensions conflict with shard_dims"),
        ({"shard_dims": (0,), "parallel_axes": ()}, "parallel axis split dimensions conflict with shard_dims"),
        ({"shard_dims": (), "parallel_axes": (SplitAxis("tp", 0),)}, "parallel axis split dimensions conflict with shard_dims"),
        ({"layer_id": -1}, "layer_id must be at least 0"),
        ({"layer_id": True}, "layer_id must be an integer"),
        ({"expert_id": -1}, "expert_id must be at least 0"),
        ({"expert_id": 1.5}, "expert_id must be an integer"),
        (
            {"expert_id": 3, "parallel_axes": (SplitAxis("ep", 0),)},
            "an individually allocated expert requires explicit EP ownership",
        ),
        ({"layout_fingerprint": ""}, "layout_fingerprint must be a non-empty string"),
        ({"layout_fingerprint": None}, "layout_fingerprint must be a non-empty string"),
    ],
)
def test_tensor_descriptor_rules(overrides: dict, message: str) -> None:
    with raises(message):
        td(**overrides)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"global_shape": (), "tensor_id": ""}, "global_shape must not be empty"),
        ({"tensor_id": "", "itemsize": 0}, "tensor_id must be a non-empty string"),
        ({"itemsize": 0, "shard_dims": (1, 0)}, "itemsize must be at least 1"),
        ({"shard_dims": (1, 0), "parallel_axes": None}, "shard_dims must be sorted"),
        ({"parallel_axes": (1,), "layer_id": -1}, "TensorDescriptor parallel_axes must contain explicit axis values"),
        (
            {"shard_dims": (), "parallel_axes": (SplitAxis("tp", 5), ReplicatedAxis("tp"))},
            "parallel_axes must not contain duplicate kinds",
        ),
        ({"shard_dims": (), "parallel_axes": (SplitAxis("tp", 0), SplitAxis("ep", 0)), "layer_id": -1}, "split axes must not share a dimension"),
        ({"layer_id": -1, "expert_id": -1}, "layer_id must be at least 0"),
        ({"expert_id": 3, "parallel_axes": (SplitAxis("ep", 0),), "layout_fingerprint": ""}, "an individually allocated expert requires explicit EP ownership"),
    ],
)
def test_tensor_descriptor_rule_order(overrides: dict, message: str) -> None:
    with raises(message):
        td(**overrides)


def test_tensor_descriptor_normalization() -> None:
    t = td(global_shape=[4, 6], shard_dims=[0, 1], parallel_axes=[SplitAxis("tp", 1), SplitAxis("ep", 0), OwnershipAxis("pp"), ReplicatedAxis("dp")])
    assert t.global_shape == (4, 6) and type(t.global_shape) is tuple
    assert t.shard_dims == (0, 1) and type(t.shard_dims) is tuple
    assert type(t.parallel_axes) is tuple
    assert [a.kind for a in t.parallel_axes] == ["dp", "pp", "ep", "tp"]
    assert t.parallel_axes == (ReplicatedAxis("dp"), OwnershipAxis("pp"), SplitAxis("ep", 0), SplitAxis("tp", 1))
    # equal content in a different axis order compares equal
    u = td(global_shape=(4, 6), shard_dims=(0, 1), parallel_axes=(ReplicatedAxis("dp"), OwnershipAxis("pp"), SplitAxis("ep", 0), SplitAxis("tp", 1)))
    assert t == u and hash(t) == hash(u)


def test_tensor_descriptor_valid_variants() -> None:
    assert td(shard_dims=(), parallel_axes=()).parallel_axes == ()
    assert td(expert_id=3, shard_dims=(), parallel_axes=(OwnershipAxis("ep"),)).expert_id == 3
    assert td(layer_id=0, expert_id=0, shard_dims=(), parallel_axes=()).layer_id == 0
    big = td(global_shape=(2**40, 2**40), itemsize=8)
    assert big.global_shape == (2**40, 2**40)


# ---------------------------------------------------------------------------------------------- 4.4


def pf(**overrides: Any) -> PlacementFragment:
    return PlacementFragment(**fragment_kwargs(**overrides))


def test_placement_fragment_fields_and_signature() -> None:
    assert [f.name for f in dataclasses.fields(PlacementFragment)] == [
        "tensor_id", "global_offset", "local_shape", "nbytes", "rank", "pipeline_stage_id", "aliases",
        "placement_fragment_id",
    ]
    params = inspect.signature(PlacementFragment).parameters
    assert list(params) == [
        "tensor_id", "global_offset", "local_shape", "nbytes", "rank", "pipeline_stage_id", "aliases",
        "placement_fragment_id",
    ]
    assert all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in params.values())
    assert params["pipeline_stage_id"].default is None
    assert params["aliases"].default == ()
    assert params["placement_fragment_id"].default is None
    assert PlacementFragment.__dataclass_params__.frozen  # type: ignore[attr-defined]
    assert PlacementFragment.__dataclass_params__.init is False  # type: ignore[attr-defined]


def test_placement_fragment_positional_construction() -> None:
    f = PlacementFragment("w", (0, 0), (4, 4), 32, ParallelRank(), 2, ("w", "a"), "id-1")
    assert f.pipeline_stage_id == 2 and f.aliases == ("a", "w") and f.placement_fragment_id == "id-1"
    assert f.fragment_id == "id-1"


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"global_offset": {0}}, "global_offset must contain integers"),
        ({"global_offset": (0, -1)}, "global_offset must be at least 0"),
        ({"global_offset": (0, True)}, "global_offset must be an integer"),
        ({"local_shape": "ab"}, "local_shape must contain integers"),
        ({"local_shape": (0, 4)}, "local_shape must be at least 1"),
        ({"local_shape": (4, None)}, "local_shape must be an integer"),
        ({"tensor_id": ""}, "tensor_id must be a non-empty string"),
        ({"tensor_id": StrSub("w")}, "tensor_id must be a non-empty string"),
        ({"nbytes": 0}, "nbytes must be at least 1"),
        ({"nbytes": True}, "nbytes must be an integer"),
        ({"nbytes": 2**64}, "nbytes must fit in an unsigned 64-bit integer"),
        ({"nbytes": 2**100}, "nbytes must fit in an unsigned 64-bit integer"),
        ({"rank": (0, 0, 0, 0)}, "rank must be a ParallelRank"),
        ({"rank": SimpleNamespace(dp=0, tp=0, pp=0, ep=0)}, "rank must be a ParallelRank"),
        ({"pipeline_stage_id": -1}, "pipeline_stage_id must be at least 0"),
        ({"pipeline_stage_id": True}, "pipeline_stage_id must be an integer"),
        ({"aliases": "wa"}, "aliases must be a sequence"),
        ({"aliases": {"w", "a"}}, "aliases must be a sequence"),
        ({"aliases": None}, "aliases must be a sequence"),
        ({"aliases": ("w", "")}, "aliases must contain non-empty strings"),
        ({"aliases": ("w", 1)}, "aliases must contain non-empty strings"),
        ({"aliases": ("w", StrSub("a"))}, "aliases must contain non-empty strings"),
        ({"aliases": ("w", "w")}, "aliases must not contain duplicates"),
        ({"aliases": ("w",)}, "alias group must contain at least two tensor IDs"),
        ({"aliases": ("a", "b")}, "alias group must contain the fragment tensor_id"),
        ({"placement_fragment_id": ""}, "placement_fragment_id must be a non-empty string"),
        ({"placement_fragment_id": 7}, "placement_fragment_id must be a non-empty string"),
    ],
)
def test_placement_fragment_rules(overrides: dict, message: str) -> None:
    with raises(message):
        pf(**overrides)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"global_offset": (-1, 0), "local_shape": (0, 4)}, "global_offset must be at least 0"),
        ({"local_shape": (0, 4), "tensor_id": ""}, "local_shape must be at least 1"),
        ({"tensor_id": "", "nbytes": 0}, "tensor_id must be a non-empty string"),
        ({"nbytes": 0, "rank": None}, "nbytes must be at least 1"),
        ({"rank": None, "pipeline_stage_id": -1}, "rank must be a ParallelRank"),
        ({"pipeline_stage_id": -1, "aliases": "x"}, "pipeline_stage_id must be at least 0"),
        ({"aliases": ("w",), "placement_fragment_id": ""}, "alias group must contain at least two tensor IDs"),
    ],
)
def test_placement_fragment_rule_order(overrides: dict, message: str) -> None:
    with raises(message):
        pf(**overrides)


def test_placement_fragment_normalization_and_derived_id() -> None:
    f = pf(global_offset=[0, 0], local_shape=[4, 4], aliases=["w", "b", "a"], placement_fragment_id="x")
    assert f.global_offset == (0, 0) and type(f.global_offset) is tuple and type(f.local_shape) is tuple
    assert f.aliases == ("a", "b", "w") and type(f.aliases) is tuple
    ka = PlacementFragment(tensor_id="weight", global_offset=(0, 0), local_shape=(4, 4), nbytes=32, rank=ParallelRank(tp=1))
    assert ka.placement_fragment_id == KA_FRAGMENT_ID
    assert ka.fragment_id == KA_FRAGMENT_ID
    staged = PlacementFragment(tensor_id="weight", global_offset=(0, 0), local_shape=(4, 4), nbytes=32, rank=ParallelRank(tp=1), pipeline_stage_id=0)
    assert staged.placement_fragment_id.startswith("sha256:") and staged.placement_fragment_id != KA_FRAGMENT_ID
    assert len(staged.placement_fragment_id) == len("sha256:") + 64


def test_placement_fragment_explicit_id_is_verbatim_and_content_is_not_checked() -> None:
    f = pf(placement_fragment_id="anything at all", local_shape=(100, 100), nbytes=U64)
    assert f.placement_fragment_id == "anything at all"
    assert f.nbytes == U64


def test_placement_fragment_replace_keeps_id() -> None:
    f = PlacementFragment(tensor_id="weight", global_offset=(0, 0), local_shape=(4, 4), nbytes=32, rank=ParallelRank(tp=1))
    g = dataclasses.replace(f, rank=ParallelRank(tp=0))
    assert g.rank == ParallelRank() and g.placement_fragment_id == KA_FRAGMENT_ID
    with raises("nbytes must be at least 1"):
        dataclasses.replace(f, nbytes=0)


# ---------------------------------------------------------------------------------------------- 4.5


def test_validate_fragment_geometry_signature() -> None:
    params = inspect.signature(validate_fragment_geometry).parameters
    assert list(params) == ["tensor", "fragment_id", "global_offset", "local_shape", "nbytes"]
    assert [p.kind for p in params.values()][1:] == [inspect.Parameter.KEYWORD_ONLY] * 4


@pytest.mark.parametrize(
    "offset, shape, nbytes, message",
    [
        ((0,), (4, 4), 32, "fragment rank mismatch: f-1"),
        ((0, 0), (4,), 8, "fragment rank mismatch: f-1"),
        ((0, 0, 0), (4, 4, 1), 32, "fragment rank mismatch: f-1"),
        ((1, 0), (4, 4), 32, "fragment is out of bounds: f-1"),
        ((0, 0), (4, 5), 40, "fragment is out of bounds: f-1"),
        ((0, 0), (4, 4), 31, "fragment byte size mismatch: f-1: expected 32, got 31"),
        ((2, 2), (2, 2), 16, "fragment byte size mismatch: f-1: expected 8, got 16"),
    ],
)
def test_validate_fragment_geometry(offset: tuple, shape: tuple, nbytes: int, message: str) -> None:
    with raises(message):
        validate_fragment_geometry(td(), fragment_id="f-1", global_offset=offset, local_shape=shape, nbytes=nbytes)


def test_validate_fragment_geometry_accepts() -> None:
    assert validate_fragment_geometry(td(), fragment_id="f", global_offset=(2, 0), local_shape=(2, 4), nbytes=16) is None


def test_canonical_strides_bytes() -> None:
    assert canonical_strides_bytes((2, 3, 4), 2) == (24, 8, 2)
    assert canonical_strides_bytes((5,), 4) == (4,)
    assert canonical_strides_bytes((1, 1), 1) == (1, 1)
    assert type(canonical_strides_bytes((2, 3), 2)) is tuple


@pytest.mark.parametrize(
    "value, message",
    [
        ("", "thing must be a non-empty string"),
        (None, "thing must be a non-empty string"),
        (StrSub("a" * 64), "thing must be a non-empty string"),
        ("A" * 64, "thing must be a lowercase SHA-256 digest"),
        ("a" * 63, "thing must be a lowercase SHA-256 digest"),
        ("a" * 65, "thing must be a lowercase SHA-256 digest"),
        ("g" * 64, "thing must be a lowercase SHA-256 digest"),
        ("sha256:" + "a" * 64, "thing must be a lowercase SHA-256 digest"),
    ],
)
def test_require_sha256_digest(value: Any, message: str) -> None:
    with raises(message):
        require_sha256_digest(value, "thing")


def test_require_sha256_digest_accepts() -> None:
    assert require_sha256_digest("0123456789abcdef" * 4, "thing") is None


def test_require_manifest_items() -> None:
    assert require_manifest_items([ParallelRank(), ParallelRank(tp=1)], "ranks", ParallelRank) == (ParallelRank(), ParallelRank(tp=1))
    assert require_manifest_items((), "ranks", ParallelRank) == ()
    with raises("ranks must be a sequence"):
        require_manifest_items("ab", "ranks", ParallelRank)
    with raises("ranks must be a sequence"):
        require_manifest_items({ParallelRank()}, "ranks", ParallelRank)
    with raises("ranks must be a sequence"):
        require_manifest_items(gen(ParallelRank()), "ranks", ParallelRank)
    with raises("ranks must contain ParallelRank"):
        require_manifest_items([ParallelRank(), (0, 0, 0, 0)], "ranks", ParallelRank)

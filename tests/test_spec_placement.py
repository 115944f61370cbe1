"""Spec 4.8 (WeightPlacementManifest constructor and from_fragments), the manifest-level fragment
checks of 11.4 and every complete-placement coverage rule of 11.5.

Coverage cases are written as plain-data layouts (``layout_model``) so that each one is judged
twice: by the brute-force oracle (sanity of the case) and by the package."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Optional, Sequence

import pytest

import oracles
from layout_model import Coord, FragmentSpec, Layout, TensorSpec, build_placement, full_participants
from planner_helpers import own, rep, split
from mooncake.reshard.contracts import PlacementManifest, ResourceKind, ResourceManifest
from mooncake.reshard.weight.part import WeightPlacementPart
from mooncake.reshard.weight.placement import WeightPlacementManifest
from mooncake.reshard.weight.topology import ParallelTopology, TopologyParticipant
from mooncake.reshard.weight.types import OwnershipAxis, ParallelRank, PlacementFragment, SplitAxis, TensorDescriptor
from spec_helpers import (
    KA_DIGEST,
    KA_PLACEMENT_ID,
    KA_TOPOLOGY_ID,
    U64,
    StrSub,
    from_fragments,
    ka_fragment,
    ka_manifest_kwargs,
    ka_part,
    ka_placement,
    ka_tensor,
    raises,
    tensor_kwargs,
    topology,
)


# ---------------------------------------------------------------------------------------------- surface


def test_fields_and_flags() -> None:
    fields = dataclasses.fields(WeightPlacementManifest)
    assert [f.name for f in fields] == [
        "resource_id", "placement_id", "revision", "weight_generation", "placement_set_id", "topology", "parts",
        "tensors", "fragments", "_digest_cache",
    ]
    cache = fields[-1]
    assert (cache.init, cache.repr, cache.compare) == (False, False, False)
    assert all(f.init and f.repr and f.compare for f in fields[:-1])
    params = inspect.signature(WeightPlacementManifest).parameters
    assert list(params) == ["resource_id", "revision", "weight_generation", "placement_set_id", "topology", "parts", "placement_id"]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params.values())
    assert params["placement_id"].default is None
    ff = inspect.signature(WeightPlacementManifest.from_fragments).parameters
    assert list(ff) == [
        "resource_id", "revision", "weight_generation", "placement_set_id", "topology", "tensors", "fragments", "placement_id",
    ]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in ff.values())
    assert ff["placement_id"].default is None
    with pytest.raises(TypeError):
        WeightPlacementManifest("model", "revision", 7, "placement-set-7", None, ())  # type: ignore[misc]


def test_weight_classes_do_not_inherit_protocols() -> None:
    from mooncake.reshard.weight.runtime import WeightRuntimeBindingManifest
    from mooncake.reshard.contracts import RuntimeBindingManifest

    assert PlacementManifest not in WeightPlacementManifest.__mro__
    assert ResourceManifest not in WeightPlacementManifest.__mro__
    assert RuntimeBindingManifest not in WeightRuntimeBindingManifest.__mro__


def test_known_answer_manifest() -> None:
    p = ka_placement()
    assert p.placement_id == KA_PLACEMENT_ID
    assert p.topology.topology_id == KA_TOPOLOGY_ID
    assert p.resource_kind is ResourceKind.MODEL_WEIGHT
    assert p.tensors == (ka_tensor(),)
    assert p.fragments == (ka_fragment(),)
    assert p.parts == (ka_part(),)
    assert p.digest == KA_DIGEST
    assert WeightPlacementManifest(placement_id=KA_PLACEMENT_ID, **ka_manifest_kwargs()) == p
    assert "_digest_cache" not in repr(p)


def test_digest_is_cached_on_first_access() -> None:
    p = ka_placement()
    assert p._digest_cache is None
    first = p.digest
    assert p._digest_cache == first == KA_DIGEST
    # a cached value is reused, not recomputed
    object.__setattr__(p, "_digest_cache", "f" * 64)
    assert p.digest == "f" * 64
    # the cache does not take part in equality
    assert p == ka_placement()


# ---------------------------------------------------------------------------------------------- constructor rules


@pytest.mark.parametrize("name", ["resource_id", "revision", "placement_set_id"])
@pytest.mark.parametrize("bad", ["", StrSub("x"), None])
def test_constructor_strings(name: str, bad: Any) -> None:
    with raises(f"{name} must be a non-empty string"):
        WeightPlacementManifest(**ka_manifest_kwargs(**{name: bad}))


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"weight_generation": -1}, "weight_generation must be at least 0"),
        ({"weight_generation": True}, "weight_generation must be an integer"),
        ({"weight_generation": 2**64}, "weight_generation must fit in an unsigned 64-bit integer"),
        ({"topology": None}, "topology must be a ParallelTopology"),
        ({"topology": "sha256:x"}, "topology must be a ParallelTopology"),
        ({"placement_id": ""}, "placement_id must be a non-empty string"),
        ({"placement_id": 5}, "placement_id must be a non-empty string"),
        ({"parts": "p"}, "WeightPlacementManifest parts must be a sequence"),
        ({"parts": None}, "WeightPlacementManifest parts must be a sequence"),
        ({"parts": ("p",)}, "WeightPlacementManifest parts must contain WeightPlacementPart"),
        ({"placement_id": "sha256:" + "0" * 64}, "placement_id does not match canonical logical content"),
        ({"placement_id": KA_PLACEMENT_ID[:-1] + "0"}, "placement_id does not match canonical logical content"),
    ],
)
def test_constructor_rules(overrides: dict, message: str) -> None:
    with raises(message):
        WeightPlacementManifest(**ka_manifest_kwargs(**overrides))


def test_constructor_rule_order() -> None:
    with raises("placement_set_id must be a non-empty string"):
        WeightPlacementManifest(**ka_manifest_kwargs(placement_set_id="", weight_generation=-1))
    with raises("weight_generation must be at least 0"):
        WeightPlacementManifest(**ka_manifest_kwargs(weight_generation=-1, topology=None))
    with raises("topology must be a ParallelTopology"):
        WeightPlacementManifest(**ka_manifest_kwargs(topology=None, placement_id=""))
    with raises("placement_id must be a non-empty string"):
        WeightPlacementManifest(**ka_manifest_kwargs(placement_id="", parts="x"))


def test_u64_generation_accepted() -> None:
    topo = topology()
    part = ka_part(weight_generation=U64, topology_id=topo.topology_id, participant_id="w-d0-p0-e0-t0")
    p = WeightPlacementManifest(**ka_manifest_kwargs(weight_generation=U64, topology=topo, parts=(part,)))
    assert p.weight_generation == U64


def tp2_topology() -> ParallelTopology:
    return ParallelTopology(
        tp_size=2, pp_size=1, ep_size=1, dp_size=1,
        participants=(TopologyParticipant("a", ParallelRank(tp=0)), TopologyParticipant("b", ParallelRank(tp=1))),
    )


def tp2_tensor(**overrides: Any) -> TensorDescriptor:
    return TensorDescriptor(**tensor_kwargs(**overrides))


def tp2_part(participant_id: str, tp: int, *, tensor: Optional[TensorDescriptor] = None, fid: Optional[str] = None, **overrides: Any) -> WeightPlacementPart:
    t = tensor or tp2_tensor()
    frag = PlacementFragment(tensor_id=t.tensor_id, global_offset=(2 * tp, 0), local_shape=(2, 4), nbytes=16,
                             rank=ParallelRank(tp=tp), placement_fragment_id=fid or f"f{tp}")
    kw: dict = dict(resource_id="model", revision="rev-1", weight_generation=1, placement_set_id="set-1",
                    topology_id=tp2_topology().topology_id, participant_id=participant_id, rank=ParallelRank(tp=tp),
                    tensors=(t,), fragments=(frag,))
    kw.update(overrides)
    return WeightPlacementPart(**kw)


def tp2_manifest(parts: Sequence[WeightPlacementPart], **overrides: Any) -> WeightPlacementManifest:
    kw: dict = dict(resource_id="model", revision="rev-1", weight_generation=1, placement_set_id="set-1",
                    topology=tp2_topology(), parts=tuple(parts))
    kw.update(overrides)
    return WeightPlacementManifest(**kw)


def test_tp2_constructor_accepts_and_sorts() -> None:
    p = tp2_manifest([tp2_part("b", 1), tp2_part("a", 0)])
    assert [x.participant_id for x in p.parts] == ["a", "b"]
    assert [f.placement_fragment_id for f in p.fragments] == ["f0", "f1"]
    assert type(p.parts) is tuple and type(p.tensors) is tuple and type(p.fragments) is tuple
    q = tp2_manifest([tp2_part("a", 0), tp2_part("b", 1)])
    assert p == q and p.placement_id == q.placement_id and p.digest == q.digest


@pytest.mark.parametrize(
    "parts, message",
    [
        (lambda: [tp2_part("a", 0), tp2_part("a", 0), tp2_part("b", 1)], "duplicate placement participant"),
        (lambda: [tp2_part("a", 0)], "missing topology participant: b"),
        (lambda: [], "missing topology participant: a"),
        (lambda: [tp2_part("a", 0), tp2_part("b", 1), tp2_part("c", 1, fid="g")], "unknown topology participant: c"),
        (lambda: [tp2_part("a", 0), tp2_part("b", 1, resource_id="other")], "placement part resource_id differs"),
        (lambda: [tp2_part("a", 0), tp2_part("b", 1, revision="other")], "placement part revision differs"),
        (lambda: [tp2_part("a", 0), tp2_part("b", 1, weight_generation=2)], "placement part weight_generation differs"),
        (lambda: [tp2_part("a", 0), tp2_part("b", 1, placement_set_id="other")], "placement part placement_set_id differs"),
        (lambda: [tp2_part("a", 0), tp2_part("b", 1, topology_id="sha256:other")], "placement part topology_id differs"),
        (lambda: [tp2_part("a", 1, fid="x"), tp2_part("b", 0, fid="y")], "placement part rank differs from topology"),
        (
            lambda: [tp2_part("a", 0), tp2_part("b", 1, tensor=tp2_tensor(layout_fingerprint="other:v2"))],
            "placement part tensor descriptor mismatch: w",
        ),
        (lambda: [tp2_part("a", 0, fid="f"), tp2_part("b", 1, fid="f")], "duplicate fragment_id: f"),
    ],
)
def test_part_set_rules(parts: Any, message: str) -> None:
    with raises(message):
        tp2_manifest(parts())


def test_placement_part_empty_part_for_participant_is_required() -> None:
    # tp=2 topology, tensor fully held by "a"; "b" must still contribute an (empty) part
    t = TensorDescriptor(**tensor_kwargs(shard_dims=(), parallel_axes=(OwnershipAxis("tp"),)))
    frag = PlacementFragment(tensor_id="w", global_offset=(0, 0), local_shape=(4, 4), nbytes=32, rank=ParallelRank(), placement_fragment_id="f")
    full = tp2_part("a", 0, tensor=t, fragments=(frag,))
    empty = tp2_part("b", 1, tensors=(), fragments=())
    with raises("missing topology participant: b"):
        tp2_manifest([full])
    p = tp2_manifest([full, empty])
    assert p.parts[1].fragments == ()


# ---------------------------------------------------------------------------------------------- from_fragments


def w_tensor(tensor_id: str = "w", **overrides: Any) -> TensorDescriptor:
    return TensorDescriptor(**tensor_kwargs(tensor_id=tensor_id, **overrides))


def w_frag(tensor_id: str = "w", rank: Optional[ParallelRank] = None, offset: tuple = (0, 0), shape: tuple = (4, 4), fid: Optional[str] = None, **kw: Any) -> PlacementFragment:
    return PlacementFragment(tensor_id=tensor_id, global_offset=offset, local_shape=shape, nbytes=2 * shape[0] * shape[1],
                             rank=rank or ParallelRank(), placement_fragment_id=fid, **kw)


@pytest.mark.parametrize(
    "tensors, fragments, message",
    [
        ("w", (), "placement tensors must be a sequence"),
        ((1,), (), "placement tensors must contain TensorDescriptor"),
        (lambda: (w_tensor(),), "f", "placement fragments must be a sequence"),
        (lambda: (w_tensor(),), (None,), "placement fragments must contain PlacementFragment"),
        (lambda: (w_tensor(), w_tensor()), lambda: (w_frag(),), "duplicate tensor_id in placement tensors"),
        (lambda: (w_tensor(),), lambda: (w_frag(), w_frag("x", fid="x0")), "unknown tensor_id: x"),
        (lambda: (w_tensor(), w_tensor("z")), lambda: (w_frag(),), "global placement contains an unreferenced tensor: z"),
        (lambda: (w_tensor(),), lambda: (w_frag(rank=ParallelRank(dp=1), fid="lost"),), "placement fragment rank has no topology participant: lost"),
    ],
)
def test_from_fragments_rules(tensors: Any, fragments: Any, message: str) -> None:
    tensors = tensors() if callable(tensors) else tensors
    fragments = fragments() if callable(fragments) else fragments
    with raises(message):
        from_fragments(topology(), tensors, fragments)


def test_from_fragments_rule_order() -> None:
    with raises("duplicate tensor_id in placement tensors"):
        from_fragments(topology(), (w_tensor(), w_tensor(), w_tensor("z")), (w_frag("x"),))
    with raises("unknown tensor_id: x"):
        from_fragments(topology(), (w_tensor(), w_tensor("z")), (w_frag("x"),))
    with raises("global placement contains an unreferenced tensor: z"):
        from_fragments(topology(), (w_tensor(), w_tensor("z")), (w_frag(rank=ParallelRank(dp=1)),))


def test_from_fragments_derived_fragment_id_in_message() -> None:
    f = w_frag(rank=ParallelRank(tp=1))
    with raises(f"placement fragment rank has no topology participant: {f.placement_fragment_id}"):
        from_fragments(topology(), (w_tensor(),), (f,))


def test_from_fragments_builds_every_part_and_matches_constructor() -> None:
    topo = topology(tp=2, pp=2)
    t = w_tensor(shard_dims=(0,), parallel_axes=(SplitAxis("tp", 0), OwnershipAxis("pp")))
    u = w_tensor("u", shard_dims=(), parallel_axes=(OwnershipAxis("tp"), OwnershipAxis("pp")))
    frags = [
        w_frag(rank=ParallelRank(tp=1), offset=(2, 0), shape=(2, 4), fid="b"),
        w_frag(rank=ParallelRank(tp=0), offset=(0, 0), shape=(2, 4), fid="a"),
        w_frag("u", rank=ParallelRank(tp=1), fid="c"),
    ]
    p = from_fragments(topo, [u, t], frags)
    assert [x.participant_id for x in p.parts] == sorted(x.participant_id for x in topo.participants)
    by_pid = {x.participant_id: x for x in p.parts}
    assert [f.placement_fragment_id for f in by_pid["w-d0-p0-e0-t0"].fragments] == ["a"]
    assert [t.tensor_id for t in by_pid["w-d0-p0-e0-t0"].tensors] == ["w"]
    assert [t.tensor_id for t in by_pid["w-d0-p0-e0-t1"].tensors] == ["u", "w"]
    assert by_pid["w-d0-p1-e0-t0"].fragments == () and by_pid["w-d0-p1-e0-t0"].tensors == ()
    assert [t.tensor_id for t in p.tensors] == ["u", "w"]
    assert [f.placement_fragment_id for f in p.fragments] == ["a", "b", "c"]
    again = WeightPlacementManifest(resource_id="model", revision="rev-1", weight_generation=1, placement_set_id="set-1", topology=topo, parts=p.parts)
    assert again == p
    assert from_fragments(topo, [t, u], list(reversed(frags)), placement_id=p.placement_id) == p
    with raises("placement_id does not match canonical logical content"):
        from_fragments(topo, [t, u], frags, placement_id="sha256:" + "1" * 64)


def test_empty_placement_rejected() -> None:
    with raises("global weight placement must contain tensors"):
        from_fragments(topology(), (), ())
    with raises("global weight placement must contain tensors"):
        WeightPlacementManifest(**ka_manifest_kwargs(parts=(ka_part(tensors=(), fragments=()),)))


# ---------------------------------------------------------------------------------------------- 11.4 manifest level


def test_alias_group_references_unknown_tensor() -> None:
    with raises("alias group references unknown tensor: zz"):
        from_fragments(topology(), (w_tensor("a"),), (w_frag("a", aliases=("a", "zz")),))


def test_alias_group_must_be_declared_consistently() -> None:
    with raises("alias group is not declared consistently for tensor: b"):
        from_fragments(topology(), (w_tensor("a"), w_tensor("b")), (w_frag("a", aliases=("a", "b")), w_frag("b")))
    with raises("alias group is not declared consistently for tensor: b"):
        from_fragments(
            topology(), (w_tensor("a"), w_tensor("b"), w_tensor("c")),
            (w_frag("a", aliases=("a", "b")), w_frag("b", aliases=("b", "c")), w_frag("c", aliases=("b", "c"))),
        )


def test_alias_group_accepted_and_checked_before_coverage() -> None:
    p = from_fragments(topology(), (w_tensor("a"), w_tensor("b")), (w_frag("a", aliases=("a", "b")), w_frag("b", aliases=("b", "a"))))
    assert all(f.aliases == ("a", "b") for f in p.fragments)
    # an alias problem is reported even though the tensors are not covered either (11.4 before 11.5)
    with raises("alias group is not declared consistently for tensor: b"):
        from_fragments(topology(), (w_tensor("a"), w_tensor("b")), (w_frag("a", aliases=("a", "b"), shape=(2, 4)), w_frag("b", shape=(2, 4))))


# ---------------------------------------------------------------------------------------------- 11.5 coverage


def L(sizes: tuple, tensors: Sequence[TensorSpec], frags: Sequence[FragmentSpec], participants: Any = None) -> Layout:
    tp, pp, ep, dp = sizes
    return Layout(sizes=sizes, participants=tuple(participants or full_participants(tp, pp, ep, dp)), tensors=tuple(tensors), fragments=tuple(frags))


def F(offset: tuple, shape: tuple, tensor: str = "w", **rank: int) -> FragmentSpec:
    return FragmentSpec(tensor, offset, shape, Coord(**rank))


ACCEPTED = {
    "tp2 even": L((2, 1, 1, 1), [TensorSpec("w", (4, 4), (split("tp", 0),))], [F((0, 0), (2, 4), tp=0), F((2, 0), (2, 4), tp=1)]),
    "tp3 uneven on dim 1": L((3, 1, 1, 1), [TensorSpec("w", (2, 5), (split("tp", 1),))],
                             [F((0, 0), (2, 2), tp=0), F((0, 2), (2, 2), tp=1), F((0, 4), (2, 1), tp=2)]),
    "storage segmentation on a non-split dim": L((2, 1, 1, 1), [TensorSpec("w", (4, 4), (split("tp", 0),))],
                                                [F((0, 0), (2, 1), tp=0), F((0, 1), (2, 3), tp=0), F((2, 0), (2, 4), tp=1)]),
    "segmentation on the split dim": L((2, 1, 1, 1), [TensorSpec("w", (4, 4), (split("tp", 0),))],
                                      [F((0, 0), (1, 4), tp=0), F((1, 0), (1, 4), tp=0), F((2, 0), (2, 4), tp=1)]),
    "dp replicas": L((1, 1, 1, 2), [TensorSpec("w", (4,), (rep("dp"),))], [F((0,), (4,), dp=0), F((0,), (4,), dp=1)]),
    "one dp replica selected, dp_size kept": L((2, 1, 1, 2), [TensorSpec("w", (4, 4), (rep("dp"), split("tp", 1)))],
                                               [F((0, 0), (4, 2), tp=0), F((0, 2), (4, 2), tp=1)],
                                               participants=[p for p in full_participants(2, 1, 1, 2) if p[1].dp == 0]),
    "complete replicas on two pp owners": L((1, 2, 1, 1), [TensorSpec("w", (4,), (own("pp"),))], [F((0,), (4,), pp=0), F((0,), (4,), pp=1)]),
    "single pp owner": L((1, 2, 1, 1), [TensorSpec("w", (4,), (own("pp"),))], [F((0,), (4,), pp=1)]),
    "grouped experts": L((1, 1, 2, 1), [TensorSpec("w", (4, 3), (split("ep", 0),))], [F((0, 0), (2, 3), ep=0), F((2, 0), (2, 3), ep=1)]),
    "independent experts": L((1, 1, 2, 1), [TensorSpec("e0", (2, 3), (own("ep"),), expert_id=0), TensorSpec("e1", (2, 3), (own("ep"),), expert_id=1)],
                             [F((0, 0), (2, 3), "e0", ep=0), F((0, 0), (2, 3), "e1", ep=1)]),
    "ep x tp cartesian split": L((2, 1, 2, 1), [TensorSpec("w", (4, 4), (split("ep", 0), split("tp", 1)))],
                                 [F((2 * e, 2 * t), (2, 2), ep=e, tp=t) for e in range(2) for t in range(2)]),
    "tp coupled to a varying ep split": L((2, 1, 2, 1), [TensorSpec("w", (4, 4), (split("ep", 0),))],
                                          [F((0, 0), (2, 4), ep=0, tp=0), F((2, 0), (2, 4), ep=1, tp=1)]),
    "no axes, all sizes 1": L((1, 1, 1, 1), [TensorSpec("w", (3,))], [F((0,), (3,))]),
    "4-D split": L((2, 1, 1, 1), [TensorSpec("w", (2, 2, 2, 3), (split("tp", 3),))],
                   [F((0, 0, 0, 0), (2, 2, 2, 2), tp=0), F((0, 0, 0, 2), (2, 2, 2, 1), tp=1)]),
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_coverage_accepts(name: str) -> None:
    layout = ACCEPTED[name]
    assert oracles.from_fragments_verdict(layout) is None
    p = build_placement(layout)
    assert p.placement_id == oracles.placement_id(layout)


REJECTED = {
    "undeclared dp": (
        L((1, 1, 1, 2), [TensorSpec("w", (4,))], [F((0,), (4,), dp=0), F((0,), (4,), dp=1)]),
        "global placement tensor requires explicit parallel semantics for active undeclared dp axis: w",
    ),
    "undeclared pp on one coordinate": (
        L((1, 2, 1, 1), [TensorSpec("w", (4,))], [F((0,), (4,), pp=0)]),
        "global placement tensor requires explicit parallel semantics for active undeclared pp axis: w",
    ),
    "undeclared tp used on one coordinate": (
        L((2, 1, 1, 1), [TensorSpec("w", (4,))], [F((0,), (4,), tp=0)]),
        "global placement tensor requires explicit parallel semantics for active undeclared tp axis: w",
    ),
    "undeclared ep used on one coordinate": (
        L((1, 1, 2, 1), [TensorSpec("w", (4,))], [F((0,), (4,), ep=1)]),
        "global placement tensor requires explicit parallel semantics for active undeclared ep axis: w",
    ),
    "undeclared tp varies, nothing declared varies": (
        L((2, 1, 1, 1), [TensorSpec("w", (4,))], [F((0,), (2,), tp=0), F((2,), (2,), tp=1)]),
        "global placement tensor varies across undeclared tp axis: w",
    ),
    "undeclared tp varies independently of ep": (
        L((2, 1, 2, 1), [TensorSpec("w", (4, 4), (split("ep", 0),))],
          [F((0, 0), (2, 2), ep=0, tp=0), F((0, 2), (2, 2), ep=0, tp=1), F((2, 0), (2, 4), ep=1, tp=0)]),
        "global placement tensor varies independently across undeclared tp axis: w",
    ),
    "dp replica missing": (
        L((1, 1, 1, 2), [TensorSpec("w", (4,), (rep("dp"),))], [F((0,), (4,), dp=0)]),
        "global placement tensor is not fully covered: missing or unexpected replicated-axis participant for w",
    ),
    "gap": (
        L((1, 1, 1, 1), [TensorSpec("w", (4, 4))], [F((0, 0), (4, 3))]),
        "global placement tensor is not fully covered: w",
    ),
    "full shard on every split rank": (
        L((2, 1, 1, 1), [TensorSpec("w", (4, 4), (split("tp", 0),))], [F((0, 0), (4, 4), tp=0), F((0, 0), (4, 4), tp=1)]),
        "global placement tensor is not fully covered: w",
    ),
    "coverage assembled across pp owners": (
        L((1, 2, 1, 1), [TensorSpec("w", (4,), (own("pp"),))], [F((0,), (2,), pp=0), F((2,), (2,), pp=1)]),
        "global placement tensor is not fully covered: w",
    ),
    "coverage assembled across ep owners": (
        L((1, 1, 2, 1), [TensorSpec("w", (4,), (own("ep"),))], [F((0,), (2,), ep=0), F((2,), (2,), ep=1)]),
        "global placement tensor is not fully covered: w",
    ),
    "dp replica incomplete": (
        L((1, 1, 1, 2), [TensorSpec("w", (4,), (rep("dp"),))], [F((0,), (4,), dp=0), F((0,), (3,), dp=1)]),
        "global placement tensor is not fully covered: w",
    ),
    "split rank without fragments": (
        L((2, 1, 1, 1), [TensorSpec("w", (4, 4), (split("tp", 0),))], [F((0, 0), (4, 4), tp=0)]),
        "global placement tensor is not fully covered: missing or unexpected split-axis participant for w",
    ),
    "split rank missing from the topology": (
        L((2, 1, 1, 1), [TensorSpec("w", (4, 4), (split("tp", 0),))], [F((0, 0), (4, 4), tp=0)],
          participants=[("only", Coord(tp=0))]),
        "global placement tensor is not fully covered: missing or unexpected split-axis participant for w",
    ),
    "non-cartesian split participants": (
        L((2, 1, 2, 1), [TensorSpec("w", (4, 4), (split("ep", 0), split("tp", 1)))],
          [F((0, 0), (2, 2), ep=0, tp=0), F((0, 2), (2, 2), ep=0, tp=1), F((2, 0), (2, 4), ep=1, tp=0)],
          participants=[("e0t0", Coord(ep=0, tp=0)), ("e0t1", Coord(ep=0, tp=1)), ("e1t0", Coord(ep=1, tp=0))]),
        "non-Cartesian split-axis participant mapping cannot prove rank-to-dimension ownership: w",
    ),
    "split on a different dim than declared": (
        L((2, 1, 1, 1), [TensorSpec("w", (4, 4), (split("tp", 0),))], [F((0, 0), (4, 2), tp=0), F((0, 2), (4, 2), tp=1)]),
        "split-axis rank geometry conflicts with declared dimension: w: tp -> dim 0",
    ),
    "split intervals disagree across another split axis": (
        L((2, 1, 2, 1), [TensorSpec("w", (4, 4), (split("ep", 0), split("tp", 1)))],
          [F((0, 0), (2, 1), ep=0, tp=0), F((0, 1), (2, 3), ep=0, tp=1), F((2, 0), (2, 2), ep=1, tp=0), F((2, 2), (2, 2), ep=1, tp=1)]),
        "split-axis rank geometry conflicts with declared dimension: w: tp -> dim 1",
    ),
}


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_coverage_rejects(name: str) -> None:
    layout, message = REJECTED[name]
    verdict = oracles.from_fragments_verdict(layout)
    assert verdict is not None and message in verdict, verdict
    with raises(message):
        build_placement(layout)


def test_coverage_rule_3_before_rule_4() -> None:
    # undeclared active dp AND a gap: rule 3 is reported
    layout = L((1, 1, 1, 2), [TensorSpec("w", (4,))], [F((0,), (3,), dp=0), F((0,), (4,), dp=1)])
    with raises("global placement tensor requires explicit parallel semantics for active undeclared dp axis: w"):
        build_placement(layout)


def test_coverage_replica_set_before_exact_cover() -> None:
    layout = L((1, 1, 1, 2), [TensorSpec("w", (4,), (rep("dp"),))], [F((0,), (3,), dp=0)])
    with raises("global placement tensor is not fully covered: missing or unexpected replicated-axis participant for w"):
        build_placement(layout)

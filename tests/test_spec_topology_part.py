"""Spec 4.6 (TopologyParticipant, ParallelTopology) and 4.7 (WeightPlacementPart, with the
part-level fragment checks of 11.4)."""

from __future__ import annotations

import dataclasses
import inspect
import math
from types import SimpleNamespace
from typing import Any

import pytest

from mooncake.reshard.weight.topology import ParallelTopology, TopologyParticipant
from mooncake.reshard.weight.part import WeightPlacementPart
from mooncake.reshard.weight.types import ParallelRank, PlacementFragment, TensorDescriptor
from spec_helpers import KA_TOPOLOGY_ID, U64, StrSub, ka_fragment, ka_part, ka_tensor, raises, tensor_kwargs


def tp(pid: str, **rank: int) -> TopologyParticipant:
    return TopologyParticipant(pid, ParallelRank(**rank))


def topo(participants: Any, **sizes: int) -> ParallelTopology:
    kw = dict(tp_size=1, pp_size=1, ep_size=1, dp_size=1)
    kw.update(sizes)
    return ParallelTopology(participants=participants, **kw)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------- 4.6


def test_topology_participant() -> None:
    assert [f.name for f in dataclasses.fields(TopologyParticipant)] == ["participant_id", "rank"]
    p = TopologyParticipant("w0", ParallelRank(tp=1))
    assert p.participant_id == "w0" and p.rank == ParallelRank(tp=1)
    for bad in ("", StrSub("w"), None, 3):
        with raises("participant_id must be a non-empty string"):
            TopologyParticipant(bad, ParallelRank())  # type: ignore[arg-type]
    for bad_rank in (None, (0, 0, 0, 0), SimpleNamespace(dp=0, tp=0, pp=0, ep=0)):
        with raises("topology participant rank must be a ParallelRank"):
            TopologyParticipant("w0", bad_rank)  # type: ignore[arg-type]


def test_topology_fields_and_keyword_only_constructor() -> None:
    assert [f.name for f in dataclasses.fields(ParallelTopology)] == [
        "tp_size", "pp_size", "ep_size", "dp_size", "participants", "topology_id",
    ]
    params = inspect.signature(ParallelTopology).parameters
    assert list(params) == ["tp_size", "pp_size", "ep_size", "dp_size", "participants", "topology_id"]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params.values())
    assert params["topology_id"].default is None
    with pytest.raises(TypeError):
        ParallelTopology(1, 1, 1, 1, (tp("w0"),))  # type: ignore[misc]


def test_topology_known_answer_and_supplied_id() -> None:
    t = topo((tp("worker-0"),))
    assert t.topology_id == KA_TOPOLOGY_ID
    assert topo((tp("worker-0"),), topology_id=KA_TOPOLOGY_ID) == t
    with raises("topology_id does not match canonical topology"):
        topo((tp("worker-0"),), topology_id="sha256:" + "0" * 64)
    with raises("topology_id does not match canonical topology"):
        topo((tp("worker-0"),), tp_size=2, topology_id=KA_TOPOLOGY_ID)


@pytest.mark.parametrize("name", ["tp_size", "pp_size", "ep_size", "dp_size"])
@pytest.mark.parametrize("bad, suffix", [(0, "must be at least 1"), (-3, "must be at least 1"), (True, "must be an integer"), (2.0, "must be an integer"), (None, "must be an integer")])
def test_topology_sizes(name: str, bad: Any, suffix: str) -> None:
    with raises(f"{name} {suffix}"):
        topo((tp("w0"),), **{name: bad})


@pytest.mark.parametrize(
    "participants, message",
    [
        ("w0", "ParallelTopology participants must be a sequence"),
        ({tp("w0")}, "ParallelTopology participants must be a sequence"),
        (None, "ParallelTopology participants must be a sequence"),
        ((tp("w0"), ("w1", ParallelRank())), "ParallelTopology participants must contain TopologyParticipant"),
        ((), "parallel topology participants must not be empty"),
        ([], "parallel topology participants must not be empty"),
    ],
)
def test_topology_participants_container(participants: Any, message: str) -> None:
    with raises(message):
        topo(participants, tp_size=2)


def test_topology_duplicates_and_ranges() -> None:
    with raises("duplicate topology participant_id"):
        topo((tp("w0"), tp("w0", tp=1)), tp_size=2)
    with raises("duplicate topology participant_id"):
        topo((tp("w0"), tp("w0")), tp_size=2)  # both duplicated: participant_id first
    with raises("duplicate topology parallel rank"):
        topo((tp("w0", tp=1), tp("w1", tp=1)), tp_size=2)
    with raises("tp rank is out of range for participant worker-3"):
        topo((tp("worker-3", tp=2),), tp_size=2)
    with raises("pp rank is out of range for participant w"):
        topo((tp("w", pp=1),))
    with raises("ep rank is out of range for participant w"):
        topo((tp("w", ep=4),), ep_size=4)
    with raises("dp rank is out of range for participant w"):
        topo((tp("w", dp=1),))
    # axis order tp, pp, ep, dp within one participant
    with raises("tp rank is out of range for participant w"):
        topo((tp("w", dp=5, ep=5, pp=5, tp=5),))
    with raises("pp rank is out of range for participant w"):
        topo((tp("w", dp=5, ep=5, pp=5),))
    with raises("ep rank is out of range for participant w"):
        topo((tp("w", dp=5, ep=5),))
    # participants are examined in sorted order
    with raises("dp rank is out of range for participant a"):
        topo((tp("b", tp=1), tp("a", dp=1)))


def test_topology_sorting_world_size_and_lookup() -> None:
    t = topo((tp("w1", dp=1), tp("w0")), dp_size=3, tp_size=4)
    assert [p.participant_id for p in t.participants] == ["w0", "w1"]
    assert type(t.participants) is tuple
    assert t.world_size == 2  # not the product of the sizes
    assert t.participant("w1").rank == ParallelRank(dp=1)
    with raises("unknown topology participant: nobody"):
        t.participant("nobody")
    # the id does not depend on the order participants are given in
    assert topo((tp("w0"), tp("w1", dp=1)), dp_size=3, tp_size=4).topology_id == t.topology_id
    assert t.topology_id.startswith("sha256:")


def test_topology_replace() -> None:
    t = topo((tp("w0"),), tp_size=2)
    assert dataclasses.replace(t) == t
    with raises("topology_id does not match canonical topology"):
        dataclasses.replace(t, tp_size=3)
    with raises("topology_id does not match canonical topology"):
        dataclasses.replace(t, participants=(tp("w0"), tp("w1", tp=1)))


# ---------------------------------------------------------------------------------------------- 4.7


def test_part_fields() -> None:
    assert [f.name for f in dataclasses.fields(WeightPlacementPart)] == [
        "resource_id", "revision", "weight_generation", "placement_set_id", "topology_id", "participant_id",
        "rank", "tensors", "fragments",
    ]


@pytest.mark.parametrize("name", ["resource_id", "revision", "placement_set_id", "topology_id", "participant_id"])
@pytest.mark.parametrize("bad", ["", StrSub("x"), None, 1])
def test_part_string_ids(name: str, bad: Any) -> None:
    with raises(f"{name} must be a non-empty string"):
        ka_part(**{name: bad})


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"weight_generation": -1}, "weight_generation must be at least 0"),
        ({"weight_generation": True}, "weight_generation must be an integer"),
        ({"weight_generation": 7.0}, "weight_generation must be an integer"),
        ({"weight_generation": 2**64}, "weight_generation must fit in an unsigned 64-bit integer"),
        ({"weight_generation": 2**1000}, "weight_generation must fit in an unsigned 64-bit integer"),
        ({"rank": None}, "placement part rank must be a ParallelRank"),
        ({"rank": (0, 0, 0, 0)}, "placement part rank must be a ParallelRank"),
        ({"tensors": "w"}, "WeightPlacementPart tensors must be a sequence"),
        ({"tensors": None}, "WeightPlacementPart tensors must be a sequence"),
        ({"tensors": ("w",)}, "WeightPlacementPart tensors must contain TensorDescriptor"),
        ({"fragments": {1}}, "WeightPlacementPart fragments must be a sequence"),
        ({"fragments": (ka_fragment(), "f")}, "WeightPlacementPart fragments must contain PlacementFragment"),
        ({"rank": ParallelRank(tp=1)}, "placement part fragment rank differs from part rank"),
    ],
)
def test_part_rules(overrides: dict, message: str) -> None:
    with raises(message):
        ka_part(**overrides)


def test_part_order_of_first_rules() -> None:
    with raises("participant_id must be a non-empty string"):
        ka_part(participant_id="", weight_generation=-1)
    with raises("weight_generation must be at least 0"):
        ka_part(weight_generation=-1, rank=None)
    with raises("placement part rank must be a ParallelRank"):
        ka_part(rank=None, tensors="x")


def test_part_accepts_u64_generation_and_empty_part() -> None:
    assert ka_part(weight_generation=U64).weight_generation == U64
    empty = ka_part(tensors=(), fragments=())
    assert empty.tensors == () and empty.fragments == ()
    lists = ka_part(tensors=[ka_tensor()], fragments=[ka_fragment()])
    assert type(lists.tensors) is tuple and type(lists.fragments) is tuple


def t2(tensor_id: str = "w", **overrides: Any) -> TensorDescriptor:
    return TensorDescriptor(**tensor_kwargs(tensor_id=tensor_id, **overrides))


def frag(tensor_id: str = "w", offset: tuple = (0, 0), shape: tuple = (4, 4), fid: Any = None, rank: Any = None, **kw: Any) -> PlacementFragment:
    nbytes = kw.pop("nbytes", 2 * math.prod(shape))
    return PlacementFragment(tensor_id=tensor_id, global_offset=offset, local_shape=shape, nbytes=nbytes,
                             rank=rank or ParallelRank(), placement_fragment_id=fid, **kw)


def part(tensors: Any, fragments: Any) -> WeightPlacementPart:
    return ka_part(tensors=tuple(tensors), fragments=tuple(fragments))


def test_part_unreferenced_tensor() -> None:
    with raises("placement part contains an unreferenced tensor: z"):
        part([t2("w"), t2("z")], [frag("w")])
    # unreferenced is checked before unknown tensors (step 6 before step 8)
    with raises("placement part contains an unreferenced tensor: z"):
        part([t2("w"), t2("z")], [frag("w"), frag("x")])


def test_part_sorts_tensors_and_fragments() -> None:
    p = part([t2("z"), t2("a")], [frag("z", fid="f2"), frag("a", fid="f1")])
    assert [t.tensor_id for t in p.tensors] == ["a", "z"]
    assert [f.placement_fragment_id for f in p.fragments] == ["f1", "f2"]


@pytest.mark.parametrize(
    "tensors, fragments, message",
    [
        ([t2("w"), t2("w")], [frag("w")], "duplicate tensor_id: w"),
        ([t2("w")], [frag("w", shape=(2, 4), fid="f"), frag("w", offset=(2, 0), shape=(2, 4), fid="f")], "duplicate fragment_id: f"),
        ([t2("w")], [frag("w", fid="a"), frag("w", fid="b")], "duplicate logical fragment for tensor and parallel rank: w"),
        ([t2("w")], [frag("w"), frag("x", fid="x0")], "unknown tensor_id: x"),
        ([t2("w")], [frag("w", offset=(0,), shape=(4,), fid="f-1")], "fragment rank mismatch: f-1"),
        ([t2("w")], [frag("w", offset=(1, 0), fid="f-1")], "fragment is out of bounds: f-1"),
        ([t2("w")], [frag("w", fid="f-1", nbytes=31)], "fragment byte size mismatch: f-1: expected 32, got 31"),
        ([t2("w")], [frag("w", shape=(2, 4), fid="a"), frag("w", offset=(1, 0), shape=(2, 4), fid="b")],
         "logical fragment boxes overlap for tensor and parallel rank"),
        ([t2("w")], [frag("w", shape=(3, 3), fid="a"), frag("w", offset=(2, 2), shape=(2, 2), fid="b")],
         "logical fragment boxes overlap for tensor and parallel rank"),
    ],
)
def test_part_fragment_checks(tensors: Any, fragments: Any, message: str) -> None:
    with raises(message):
        part(tensors, fragments)


def test_part_allows_adjacent_boxes_and_unknown_alias_members() -> None:
    p = part([t2("w")], [frag("w", shape=(2, 4), fid="a"), frag("w", offset=(2, 0), shape=(2, 2), fid="b"), frag("w", offset=(2, 2), shape=(2, 2), fid="c")])
    assert len(p.fragments) == 3
    # a part does not check alias-group completeness (spec 4.7 step 8)
    q = part([t2("w")], [frag("w", aliases=("w", "elsewhere"))])
    assert q.fragments[0].aliases == ("elsewhere", "w")
    # a part need not cover its tensor
    assert len(part([t2("w")], [frag("w", shape=(1, 1))]).fragments) == 1


def test_part_3d_overlap_detected() -> None:
    t = t2("c", global_shape=(2, 2, 2), shard_dims=(), parallel_axes=())
    with raises("logical fragment boxes overlap for tensor and parallel rank"):
        part([t], [frag("c", offset=(0, 0, 0), shape=(2, 2, 1), fid="a"), frag("c", offset=(1, 1, 0), shape=(1, 1, 2), fid="b")])
    ok = part([t], [frag("c", offset=(0, 0, 0), shape=(2, 2, 1), fid="a"), frag("c", offset=(0, 0, 1), shape=(2, 2, 1), fid="b")])
    assert len(ok.fragments) == 2


def test_part_replace_revalidates() -> None:
    p = ka_part()
    assert dataclasses.replace(p) == p
    with raises("placement part fragment rank differs from part rank"):
        dataclasses.replace(p, rank=ParallelRank(dp=1))
    assert dataclasses.replace(p, fragments=(), tensors=()).fragments == ()

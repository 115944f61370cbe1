"""The packed TransferPlan pickle record (``csrc/pickle_codec.c``: ``_native.graph_pack`` /
``graph_unpack``, used by ``bound_pickle`` from protocol 5 on).

A pure-Python decoder of the same stream (``_py_unpack``) is the oracle: every graph packs and
unpacks to an equal graph with the same sharing, hostile streams return None (never crash),
runtime fragments are rebuilt exactly as their constructor would (same value or same message),
and a tampered leaf of a packed plan gives the outcome of the record format."""

from __future__ import annotations

import copy
import pickle
from dataclasses import dataclass, field
from typing import Any, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spec_helpers import field_state, forged_instance, raises, store_state
from test_binding_attacks import World

from mooncake.reshard import _native
from mooncake.reshard.contracts.fragments import RuntimeBindingFragment
from mooncake.reshard.weight._planner import bound_pickle
from mooncake.reshard.weight._planner.bound_pickle import (
    _GRAPH_REGISTRY,
    _restore_packed_transfer_plan,
    _restore_transfer_plan,
    reduce_transfer_plan,
)
from mooncake.reshard.weight.part import _FIELD_NAMES as _PART_FIELDS
from mooncake.reshard.weight.placement import _PICKLED_FIELDS
from mooncake.reshard.weight.topology import _PARTICIPANT_FIELDS, _TOPOLOGY_FIELDS
from mooncake.reshard.weight.types import _FRAGMENT_FIELDS, _RANK_FIELDS, _SPLIT_AXIS_FIELDS, _TENSOR_FIELDS

_INVALID = "transfer plan pickle state is invalid"
_pack = _native.graph_pack
_unpack = _native.graph_unpack


@dataclass(frozen=True)
class Leaf:
    a: Any
    b: Any = None


@dataclass(frozen=True)
class Node:
    x: Any
    y: Any
    z: Any = ()


@dataclass(frozen=True)
class Cached:
    v: Any
    _digest: Any = None


_REGISTRY = ((Leaf, ("a", "b"), 0), (Node, ("x", "y", "z"), 0), (Cached, ("v", "_digest"), 1))


# ---------------------------------------------------------------------------------------
# Oracle: the stream format in Python.


def _py_unpack(codes: bytes, values: tuple[Any, ...], registry: Any) -> Any:
    """What ``graph_unpack`` returns (None for a malformed stream), in Python."""
    position = 0
    next_value = 0
    memo: list[Any] = []

    class Malformed(Exception):
        pass

    def arg() -> int:
        nonlocal position
        value = shift = 0
        while True:
            if position >= len(codes) or shift >= 63:
                raise Malformed
            byte = codes[position]
            position += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                if value >= 2**63:
                    raise Malformed
                return value

    def one(depth: int) -> Any:
        nonlocal position, next_value
        if position >= len(codes):
            raise Malformed
        op = codes[position]
        position += 1
        if op in (1, 2) and depth >= 64:
            raise Malformed
        if op == 0:
            if next_value >= len(values):
                raise Malformed
            next_value += 1
            return values[next_value - 1]
        if op == 6:
            return None
        if op == 4:
            value = shift = 0
            while True:
                if position >= len(codes) or shift > 63:
                    raise Malformed
                byte = codes[position]
                position += 1
                if shift == 63 and byte > 1:
                    raise Malformed
                value |= (byte & 0x7F) << shift
                shift += 7
                if not byte & 0x80:
                    return -1 - (value >> 1) if value & 1 else value >> 1
        if op == 5:
            index = arg()
            if index >= next_value:
                raise Malformed
            return values[index]
        if op == 3:
            index = arg()
            if index >= len(memo):
                raise Malformed
            return memo[index]
        if op == 1:
            count = arg()
            if count > len(codes) - position:
                raise Malformed
            built: Any = tuple(one(depth + 1) for _ in range(count))
            if count:
                memo.append(built)
            return built
        if op == 2:
            index = arg()
            if index >= len(registry):
                raise Malformed
            cls, names, mode = registry[index]
            items = [one(depth + 1) for _ in range(13 if mode == 2 else len(names))]
            if mode == 2:
                built = cls(*items)
            else:
                built = object.__new__(cls)
                store_state(built, dict(zip(names, items)))  # (a C layout's slots, or its dict)
            memo.append(built)
            return built
        raise Malformed

    try:
        root = one(0)
        if position != len(codes) or next_value != len(values):
            return None
        return root
    except Malformed:
        return None


def _shape(value: Any, seen: Optional[dict[int, int]] = None) -> Any:
    """The value with every tuple/instance replaced by its structure and the first-visit index
    of its identity (so equal shapes mean equal values *and* equal sharing)."""
    seen = {} if seen is None else seen
    if type(value) is tuple or type(value) in (Leaf, Node, Cached, RuntimeBindingFragment):
        key = id(value)
        if key in seen and (type(value) is not tuple or value):
            return ("ref", seen[key])
        if type(value) is not tuple or value:
            seen[key] = len(seen)
        if type(value) is tuple:
            return ("tuple", tuple(_shape(item, seen) for item in value))
        return (type(value).__name__, tuple((k, _shape(v, seen)) for k, v in value.__dict__.items()))
    return ("leaf", type(value).__name__, value)


# ---------------------------------------------------------------------------------------
# Round trips


_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.text(max_size=4),
    st.binary(max_size=4),
    st.floats(allow_nan=False),
)


@st.composite
def _graphs(draw: Any) -> Any:
    pool: list[Any] = []
    for _ in range(draw(st.integers(1, 25))):
        kind = draw(st.integers(0, 5))
        pick = st.one_of(_leaves, st.sampled_from(pool)) if pool else _leaves
        if kind == 0:
            made: Any = draw(pick)
        elif kind == 1:
            made = tuple(draw(st.lists(pick, max_size=4)))
        elif kind == 2:
            made = Leaf(draw(pick), draw(pick))
        elif kind == 3:
            made = Node(draw(pick), draw(pick), draw(pick))
        elif kind == 4:
            made = Cached(draw(pick))
        else:
            made = [draw(pick)]  # not described: a leaf pickle writes itself
        pool.append(made)
    return tuple(pool[-3:])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_graphs())
def test_pack_unpack_round_trip_keeps_values_and_sharing(graph: Any) -> None:
    packed = _pack(graph, _REGISTRY)
    assert packed is not None
    codes, values = packed
    assert type(codes) is bytes and type(values) is tuple
    restored = _unpack(codes, values, _REGISTRY)
    assert restored == graph
    assert _shape(restored) == _shape(graph)
    oracle = _py_unpack(codes, values, _REGISTRY)
    assert _shape(oracle) == _shape(restored)
    # Through pickle as well (the leaves are pickled by pickle itself).
    again = pickle.loads(pickle.dumps(packed, protocol=5))
    assert _unpack(*again, _REGISTRY) == graph


def test_instances_of_another_shape_are_leaves() -> None:
    odd = Leaf(1, 2)
    object.__setattr__(odd, "extra", 3)  # default pickling keeps it: written by pickle
    missing = Node(1, 2)
    object.__delattr__(missing, "z")
    cached = Cached(5, "digest")
    cached.__dict__["_derived"] = object()  # dropped, like WeightPlacementManifest's caches
    public = Cached(6)
    object.__setattr__(public, "shown", 1)  # a public extra: not described
    sub = type("SubLeaf", (Leaf,), {})(1)
    codes, values = _pack((odd, missing, cached, public, sub), _REGISTRY)
    assert [v for v in values if not isinstance(v, (int, str))] == [odd, missing, public, sub]
    restored = _unpack(codes, values, _REGISTRY)
    assert restored[2] == cached and "_derived" not in restored[2].__dict__
    assert restored[2].__dict__ == {"v": 5, "_digest": "digest"}


def test_cycles_are_declined_and_deep_graphs_become_leaves() -> None:
    loop = Node(1, 2)
    object.__setattr__(loop, "y", (loop,))
    assert _pack((1, loop), _REGISTRY) is None
    deep: Any = Leaf(0)
    for _ in range(200):
        deep = Leaf(deep)
    codes, values = _pack(deep, _REGISTRY)
    assert len(values) >= 1 and _unpack(codes, values, _REGISTRY) == deep
    assert _py_unpack(codes, values, _REGISTRY) == deep


# ---------------------------------------------------------------------------------------
# Hostile streams and arguments


def _sample() -> tuple[bytes, tuple[Any, ...]]:
    shared = (1, 2)
    packed = _pack((Leaf(shared, "s"), Node(shared, Leaf(3), (4, None)), Cached("x")), _REGISTRY)
    assert packed is not None
    return packed


@pytest.mark.parametrize(
    "codes",
    [
        b"",
        b"\x04",
        b"\xff",
        b"\x01",  # tuple without a count
        b"\x01\x05\x00",  # count beyond the stream
        b"\x01\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f",  # count beyond 2**63
        b"\x01\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01",  # endless varint
        b"\x02\x09" + b"\x00" * 3,  # class index beyond the registry
        b"\x03\x00",  # reference before any object
        b"\x01\x02\x01\x01\x00\x03\x01",  # reference to the tuple being built
        b"\x00\x00",  # two roots
        b"\x01\x01" * 70 + b"\x00",  # nesting beyond the packer's depth
        b"\x04",  # int without its varint
        b"\x04\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02",  # int beyond 64 bits
        b"\x04\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x00",  # endless int varint
        b"\x05\x00",  # value reference before any value
        b"\x01\x02\x00\x05\x01",  # value reference to a value not read yet
        b"\x07",
    ],
)
def test_malformed_streams_return_none(codes: bytes) -> None:
    values = (1, 2, 3)
    assert _unpack(codes, values, _REGISTRY) is None
    assert _py_unpack(codes, values, _REGISTRY) is None


def test_value_count_must_match_exactly() -> None:
    codes, values = _sample()
    assert _unpack(codes, values, _REGISTRY) is not None
    assert _unpack(codes, values + (None,), _REGISTRY) is None
    assert _unpack(codes, values[:-1], _REGISTRY) is None
    assert _unpack(codes + b"\x00", values + (1,), _REGISTRY) is None
    assert _unpack(bytearray(codes), values, _REGISTRY) is None
    assert _unpack(codes, list(values), _REGISTRY) is None
    assert _unpack(codes.decode("latin-1"), values, _REGISTRY) is None


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_mutated_streams_match_the_oracle(data: Any) -> None:
    codes, values = _sample()
    raw = bytearray(codes)
    for _ in range(data.draw(st.integers(1, 4))):
        action = data.draw(st.integers(0, 2))
        if action == 0 and raw:
            raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
        elif action == 1:
            raw.insert(data.draw(st.integers(0, len(raw))), data.draw(st.integers(0, 255)))
        elif raw:
            del raw[data.draw(st.integers(0, len(raw) - 1))]
    mutated = bytes(raw)
    actual = _unpack(mutated, values, _REGISTRY)
    expected = _py_unpack(mutated, values, _REGISTRY)
    assert _shape(actual) == _shape(expected)


@pytest.mark.parametrize(
    "registry",
    [
        [],
        ((Leaf, ("a", "b")),),
        ((Leaf, ("a", "b"), 3),),
        ((Leaf, ("a", "b"), -1),),
        ((Leaf, ("a", "b"), 2**70),),
        ((Leaf, ("a", "b"), True),),
        ((Leaf, ["a", "b"], 0),),
        ((Leaf, (), 0),),
        ((Leaf, ("a", 1), 0),),
        ((Leaf, tuple("abcdefghijklmnopq"), 0),),
        ((Leaf, ("a", "b"), 2),),  # mode 2 takes 13 arguments and owner
        ((int, ("a",), 0),),  # not a heap type
        (("Leaf", ("a",), 0),),
        ((Leaf, ("a", "b"), 0), (Leaf, ("a", "b"), 0)),
        tuple((type(f"C{i}", (), {}), ("a",), 0) for i in range(33)),
    ],
)
def test_invalid_registries_raise_type_error(registry: Any) -> None:
    with pytest.raises(TypeError):
        _pack((), registry)
    with pytest.raises(TypeError):
        _unpack(b"\x01\x00", (), registry)


def test_wrong_argument_counts_raise_type_error() -> None:
    with pytest.raises(TypeError):
        _native.graph_pack(())  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        _native.graph_unpack(b"", ())  # type: ignore[call-arg]


# ---------------------------------------------------------------------------------------
# Runtime fragments: decided in C exactly as the constructor decides


_RBF_NAMES = _GRAPH_REGISTRY[2][1]
_RBF_REGISTRY = ((RuntimeBindingFragment, _RBF_NAMES, 2),)
_U64 = 2**64


def _valid_rbf_args() -> list[Any]:
    return ["pf", "rf", 4096 + 64, 512, "w", "e", "cuda:0", 2, (16, 16), (32, 2), 4096, 1024, 64]


_INTS = st.one_of(
    st.integers(-3, 3),
    st.sampled_from([_U64 - 1, _U64, _U64 + 1, 2**63 - 1, 2**63, -(2**63), 2**200, True, False, 1.0, None]),
    st.integers(0, 2**66),
)


@st.composite
def _rbf_args(draw: Any) -> list[Any]:
    args = _valid_rbf_args()
    for _ in range(draw(st.integers(0, 3))):
        index = draw(st.integers(0, 12))
        if index in (0, 1, 4, 5, 6):
            args[index] = draw(st.sampled_from(["", "x", None, 1, b"x"]))
        elif index in (8, 9):
            args[index] = draw(
                st.one_of(
                    st.tuples(_INTS),
                    st.tuples(_INTS, _INTS),
                    st.just(()),
                    st.just([16, 16]),
                    st.just((16, 1)),
                    st.just((1, 16)),
                )
            )
        else:
            args[index] = draw(_INTS)
    return args


def _constructed(args: list[Any]) -> tuple[str, Any]:
    try:
        return ("ok", RuntimeBindingFragment(*args))
    except (ValueError, TypeError) as error:
        return (type(error).__name__, str(error))


@settings(max_examples=600, deadline=None)
@given(_rbf_args())
def test_runtime_fragments_are_restored_as_their_constructor_does(args: list[Any]) -> None:
    owner = object()
    fragment = forged_instance(RuntimeBindingFragment, dict(zip(_RBF_NAMES, args + [owner])))  # an owner is never written
    packed = _pack((fragment,), _RBF_REGISTRY)
    assert packed is not None
    codes, values = packed
    assert all(value is not owner for value in values)
    expected = _constructed(args)
    try:
        actual: tuple[str, Any] = ("ok", _unpack(codes, values, _RBF_REGISTRY)[0])
    except (ValueError, TypeError) as error:
        actual = (type(error).__name__, str(error))
    assert actual[0] == expected[0]
    if expected[0] == "ok":
        assert actual[1] == expected[1] and actual[1].owner is None
        assert field_state(actual[1]) == field_state(expected[1])
        assert list(field_state(actual[1])) == list(field_state(expected[1]))
    else:
        assert actual[1] == expected[1]


def test_runtime_fragment_fast_path_keeps_the_argument_objects() -> None:
    args = _valid_rbf_args()
    fragment = RuntimeBindingFragment(*args, owner=object())
    twin = RuntimeBindingFragment(*args)
    codes, values = _pack((fragment, twin), _RBF_REGISTRY)
    restored, restored_twin = _unpack(codes, values, _RBF_REGISTRY)
    assert restored == fragment and restored.owner is None and restored_twin == twin
    # The argument tuples are kept as unpacked (shared by both fragments, as in the original).
    assert restored.local_shape is restored_twin.local_shape
    assert restored.strides_bytes is restored_twin.strides_bytes
    # A singleton dimension normalises its stride: the constructor decides.
    odd = RuntimeBindingFragment(*args[:8], (16, 1, 16), (32, 7, 2), *args[10:])
    restored = _unpack(*_pack(odd, _RBF_REGISTRY), _RBF_REGISTRY)
    assert restored == odd and restored.strides_bytes == odd.strides_bytes


# ---------------------------------------------------------------------------------------
# The registry of bound_pickle matches every class's own pickling fields


def test_registry_names_are_the_pickled_fields() -> None:
    by_class = {cls.__name__: (names, mode) for cls, names, mode in _GRAPH_REGISTRY}
    assert by_class["ParallelRank"] == (_RANK_FIELDS, 0)
    assert by_class["PlacementFragment"] == (_FRAGMENT_FIELDS, 0)
    assert by_class["WeightPlacementPart"] == (_PART_FIELDS, 0)
    assert by_class["TopologyParticipant"] == (_PARTICIPANT_FIELDS, 0)
    assert by_class["ParallelTopology"] == (_TOPOLOGY_FIELDS, 0)
    assert by_class["TensorDescriptor"] == (_TENSOR_FIELDS, 0)
    assert by_class["SplitAxis"] == (_SPLIT_AXIS_FIELDS, 0)
    assert by_class["ReplicatedAxis"] == (("kind",), 0)
    assert by_class["OwnershipAxis"] == (("kind",), 0)
    assert by_class["WeightPlacementManifest"] == (_PICKLED_FIELDS, 1)
    assert by_class["RuntimeBindingFragment"][1] == 2
    fragment = RuntimeBindingFragment(*_valid_rbf_args())
    names = by_class["RuntimeBindingFragment"][0]
    assert tuple(field_state(fragment)[name] for name in names[:13]) == fragment.__reduce__()[1]
    assert names[13] == "owner"
    assert by_class["PlanningLimits"][1] == 0
    assert by_class["RuntimeBindingEvidence"][1] == 0


# ---------------------------------------------------------------------------------------
# Whole plans


@pytest.fixture()
def world() -> World:
    return World()


def _record(plan: Any) -> tuple[Any, ...]:
    reduced = reduce_transfer_plan(plan)
    assert reduced[0] is _restore_transfer_plan
    return tuple(reduced[1])


class _Packed:
    """Pickles as a call of the packed restore with arbitrary (possibly hostile) arguments."""

    def __init__(self, codes: Any, values: Any) -> None:
        self.codes = codes
        self.values = values

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore_packed_transfer_plan, (self.codes, self.values))


def _outcome(call: Any) -> tuple[str, Any]:
    try:
        return ("ok", call())
    except Exception as error:  # the oracle decides which exception is right
        return (type(error).__name__, str(error))


def test_packed_plan_round_trips_with_sharing(world: World) -> None:
    plan = world.bind()
    blob = pickle.dumps(plan, protocol=5)
    assert b"_restore_packed_transfer_plan" in blob
    restored = pickle.loads(blob)
    assert restored == plan
    placements = {id(e.attestation.placement) for e in restored.target_executors}
    assert placements == {id(restored.target_placement)}
    for op in restored.operations:
        assert op.target.binding is op.target.attestation.binding_fragment(op.target.placement_fragment_id)
        part = restored.target_placement._part_index()[op.target.attestation.evidence.participant_id]
        assert any(op.target.placement is fragment for fragment in part.fragments)
    assert restored.target_placement.digest == plan.target_placement.digest
    assert pickle.loads(pickle.dumps(restored, protocol=5)) == plan
    assert len(blob) <= len(pickle.dumps(plan, protocol=4))


def test_malformed_packed_payloads_are_rejected(world: World) -> None:
    plan = world.bind()
    codes, values = _pack(_record(plan), _GRAPH_REGISTRY)
    for bad in (
        (codes[:-1], values),
        (codes, values[:-1]),
        (codes, values + (0,)),
        (b"\x00", (None,)),  # a graph that is not a tuple
        (b"\x01\x00", ()),  # an empty record
        (codes, list(values)),
        (None, values),
    ):
        with raises(_INVALID):
            pickle.loads(pickle.dumps(_Packed(*bad)))


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("itemsize", 0, "runtime itemsize must be at least 1"),
        ("address", 0, "address must be at least 1"),
        ("nbytes", True, "nbytes must be an integer"),
        ("worker_id", "", "worker_id must be a non-empty string"),
        ("storage_offset_bytes", -1, "storage_offset_bytes must be at least 0"),
        ("strides_bytes", (0, 2), "runtime stride must be positive for non-singleton dimensions"),
        ("local_shape", (16,), "runtime stride rank differs from local_shape"),
    ],
)
@pytest.mark.parametrize("where", ["operation", "evidence"])
def test_forged_runtime_fragment_in_a_packed_plan_keeps_its_message(
    world: World, field: str, value: Any, message: str, where: str
) -> None:
    plan = world.bind()
    forged = copy.copy(plan)
    if where == "operation":
        op = copy.copy(plan.operations[0])
        bound = copy.copy(op.target)
        runtime = copy.copy(bound.binding)
        object.__setattr__(bound, "binding", runtime)
        object.__setattr__(op, "target", bound)
        object.__setattr__(forged, "operations", (op,) + plan.operations[1:])
    else:
        executor = copy.copy(plan.target_executors[0])
        attestation = copy.copy(executor.attestation)
        evidence = copy.copy(attestation.evidence)
        runtime = copy.copy(evidence.fragments[0])
        object.__setattr__(evidence, "fragments", (runtime,) + evidence.fragments[1:])
        object.__setattr__(attestation, "evidence", evidence)
        object.__setattr__(executor, "attestation", attestation)
        object.__setattr__(forged, "target_executors", (executor,) + plan.target_executors[1:])
    object.__setattr__(runtime, field, value)
    for protocol in (4, 5):
        with raises(message):
            pickle.loads(pickle.dumps(forged, protocol=protocol))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_tampered_leaf_matches_the_record_format(world: World, data: Any) -> None:
    plan = world.bind()
    codes, values = _pack(_record(plan), _GRAPH_REGISTRY)
    index = data.draw(st.integers(0, len(values) - 1))
    original = values[index]
    if type(original) is int:
        replacement = data.draw(st.sampled_from([original + 1, original - 1, 0, -1, 2**64, True, None, "x"]))
    elif type(original) is str:
        replacement = data.draw(st.sampled_from([original + "x", "", None, 0]))
    else:
        replacement = data.draw(st.sampled_from([None, 0, "x", ()]))
    tampered = values[:index] + (replacement,) + values[index + 1 :]
    actual = _outcome(lambda: pickle.loads(pickle.dumps(_Packed(codes, tampered))))

    def oracle() -> Any:
        record = _py_unpack(codes, tampered, _GRAPH_REGISTRY)
        if type(record) is not tuple:
            raise ValueError(_INVALID)
        bound_pickle._require_typed_placements(record)  # (what the packed restore checks first)
        return _restore_transfer_plan(*record)

    expected = _outcome(oracle)
    assert actual[0] == expected[0]
    if expected[0] == "ok":
        assert actual[1] == expected[1]
    else:
        assert actual[1] == expected[1]


def test_copy_keeps_the_record_format(world: World) -> None:
    plan = world.bind()
    assert plan.__reduce_ex__(4)[0] is _restore_transfer_plan
    assert plan.__reduce_ex__(5)[0] is _restore_packed_transfer_plan
    assert plan.__reduce_ex__("5")[0] is _restore_transfer_plan
    clone = copy.copy(plan)
    assert clone == plan and clone.target_placement is plan.target_placement
    assert copy.deepcopy(plan) == plan
    assert bound_pickle.reduce_ex_transfer_plan(plan, 5)[0] is _restore_packed_transfer_plan


def test_restore_pauses_the_collector_and_restores_its_state(world: World) -> None:
    import gc

    plan = world.bind()
    blob = pickle.dumps(plan, protocol=5)
    seen: list[bool] = []
    original = bound_pickle._restore_proved

    def spy(*record: Any) -> Any:
        seen.append(gc.isenabled())
        return original(*record)

    bound_pickle._restore_proved = spy
    try:
        for enabled in (True, False):
            (gc.enable if enabled else gc.disable)()
            assert pickle.loads(blob) == plan
            assert gc.isenabled() is enabled
            with raises(_INVALID):
                pickle.loads(pickle.dumps(_Packed(b"\x00", (None,))))
            assert gc.isenabled() is enabled
    finally:
        bound_pickle._restore_proved = original
        gc.enable()
    assert seen == [False, False]


@pytest.mark.parametrize(
    "codes,expected",
    [
        (b"\x04\x00", 0),
        (b"\x04\x01", -1),
        (b"\x04\x02", 1),
        (b"\x04\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01", 2**63 - 1),
        (b"\x04\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", -(2**63)),
        (b"\x04\x80\x00", 0),  # a padded varint reads the same number
        (b"\x06", None),
    ],
)
def test_ints_and_none_in_codes(codes: bytes, expected: Any) -> None:
    assert _unpack(codes, (), _REGISTRY) == expected
    assert _py_unpack(codes, (), _REGISTRY) == expected
    if codes[-1:] != b"\x00" or codes == b"\x04\x00":
        packed = _pack(expected, _REGISTRY)
        assert packed == (codes, ())


def test_ints_beyond_int64_and_repeated_strings_are_values() -> None:
    text = "shared-" + str(7)
    other = "shared-" + str(7)  # equal, another object: written once more
    graph = (2**63, -(2**63) - 1, text, text, other, True, 1.5)
    codes, values = _pack(graph, _REGISTRY)
    assert values == (2**63, -(2**63) - 1, text, other, True, 1.5)
    restored = _unpack(codes, values, _REGISTRY)
    assert restored == graph and restored[2] is restored[3] and type(restored[5]) is bool


def test_packing_survives_collections_that_mutate_the_graph() -> None:
    """Collections triggered by the packer's own allocations may run code that rewrites the
    objects being packed: values in flight are held, the memo keeps its objects alive."""
    import gc

    nodes = [Node(Leaf((i, i + 1), str(i)), (str(i) * 3, i), ()) for i in range(300)]
    graph = tuple(nodes)
    counter = [0]

    def mutate(phase: str, info: dict[str, Any]) -> None:
        if phase != "start":
            return
        counter[0] += 1
        victim = nodes[counter[0] % len(nodes)]
        # The only references to the old values go away (a new tuple each time).
        victim.__dict__["x"] = Leaf((counter[0], -counter[0]), "new")
        victim.__dict__["y"] = (str(counter[0]), counter[0])

    thresholds = gc.get_threshold()
    gc.callbacks.append(mutate)
    gc.set_threshold(1, 1, 1)
    try:
        for _ in range(5):
            packed = _pack(graph, _REGISTRY)
            assert packed is not None
            restored = _unpack(*packed, _REGISTRY)
            assert type(restored) is tuple and len(restored) == len(nodes)
            assert all(type(node) is Node and type(node.x) is Leaf for node in restored)
    finally:
        gc.callbacks.remove(mutate)
        gc.set_threshold(*thresholds)
    assert counter[0] > 0

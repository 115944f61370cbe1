"""Forged placement-graph content of the wrong type is refused on restore (session 18).

CI's short fuzz run crashed with an uncaught ``RecursionError`` in a dataclass ``__eq__``: one
``BINGET`` of the field-state seed pickle (a ``TransferPlan`` made by ``NEWOBJ`` and filled by
``__setstate__``) redirected to the plan itself or to its state dict made a placement part's
``resource_id`` (``revision``, ``placement_set_id``, ``topology_id``; the placement's
``tensors``/``fragments`` items) refer back to the plan. The revalidation never reads those
fields, so the plan was accepted with a reference cycle and its round-trip comparison recursed
forever. Fuzz finding F5 is the same family (a float NaN ``layout_fingerprint``).

Now every restore of the placement graph (the ``__setstate__`` of ``ParallelRank``, the axes,
``TensorDescriptor``, ``TopologyParticipant``, ``ParallelTopology``, ``WeightPlacementPart`` and
``WeightPlacementManifest`` under default pickling since session 66, ``weight/_default_state.py``;
the restore helpers that pickles written before then name, ``_restore_parallel_rank`` and the
like; the packed record's placements through ``bound_pickle._require_typed_placements``) checks
that each field has the type the constructor stores and that every part names its placement's
identity and topology, and raises the field rule's ``ValueError`` otherwise. ``fuzz/pickle_cases.check_plan`` turns any exception
raised while comparing or re-pickling an accepted plan into a ``pyfuzz.Finding``.
"""

from __future__ import annotations

import copyreg
import dataclasses
import io
import os
import pickle
import pickletools
import sys
from typing import Any, Callable

import pytest

from spec_helpers import PickledCall, ka_placement, raises

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fuzz"))

import pickle_cases  # noqa: E402
import pyfuzz  # noqa: E402

from mooncake.reshard.weight import TransferPlan, WeightPlacementManifest  # noqa: E402
from mooncake.reshard.weight import part as weight_part  # noqa: E402
from mooncake.reshard.weight import placement as weight_placement  # noqa: E402
from mooncake.reshard.weight import topology as weight_topology  # noqa: E402
from mooncake.reshard.weight import types as weight_types  # noqa: E402
from mooncake.reshard.weight._planner import bound_pickle  # noqa: E402


def _plan_memo_indices(data: bytes) -> tuple[int, int]:
    """The memo indices of the field-state pickle's ``TransferPlan`` (``NEWOBJ``) and of its
    state dict (the ``EMPTY_DICT`` after it)."""
    memo = 0
    wanted: list[int] = []
    pending = False
    for opcode, _, _ in pickletools.genops(data):
        if opcode.name in ("NEWOBJ", "EMPTY_DICT") and len(wanted) < 2 and (wanted or opcode.name == "NEWOBJ"):
            pending = True
        elif opcode.name == "MEMOIZE":
            if pending:
                wanted.append(memo)
                pending = False
            memo += 1
    assert len(wanted) == 2
    return wanted[0], wanted[1]


def _field_state_seeds() -> list[tuple[str, bytes]]:
    seeds = [(name, data) for name, data in pickle_cases.seed_pickles() if name.startswith("stored-")]
    assert len(seeds) == 2  # protocols 4 and 5 of the stored-source plan (the field-state format)
    for _, data in seeds:
        assert pickle_cases.split_pickle(data) is None  # not a record: NEWOBJ + __setstate__
    return seeds


@pytest.mark.parametrize("protocol", [4, 5])
def test_binget_redirected_to_the_plan_or_its_state_is_refused_or_sound(protocol: int) -> None:
    # The CI reproduction (/tmp/r18/cycle_search.py): every BINGET of the seed redirected to the
    # plan object or its state dict. 32 of them per protocol were accepted with a reference
    # cycle (check_plan then recursed); each must now be refused with a contract message or
    # load a plan that passes check_plan (no exception escapes check_loads).
    name, data = dict((int(n[-1]), (n, d)) for n, d in _field_state_seeds())[protocol]
    targets = _plan_memo_indices(data)
    refused = accepted = 0
    for opcode, arg, position in pickletools.genops(data):
        if opcode.name != "BINGET":
            continue
        for target in targets:
            if target == arg:
                continue
            raw = bytearray(data)
            raw[position + 1] = target
            result = pickle_cases.check_loads(bytes(raw), structured=False)  # raises Finding
            if result is None:
                refused += 1
            else:
                accepted += 1
    assert refused >= 64, (name, refused, accepted)


_STRING_OPS = ("BINUNICODE", "SHORT_BINUNICODE", "BINUNICODE8", "UNICODE")
_PART_KEYS = {"participant_id", "rank", "tensors", "fragments", "topology_id"}


def _part_identity_positions(data: bytes) -> list[int]:
    """Positions of the BINGETs that are the value of a placement part's resource_id, revision,
    placement_set_id or topology_id in its default-pickling state dict (a dict holding the
    part's keys). The stream's stack is simulated (each entry: where it starts, its op, the str
    it is when it is one), so that each dict's items are paired whatever their values hold."""
    memo: dict[int, Any] = {}
    stack: list[Any] = []  # (start, opcode name, str or None), or the MARK sentinel
    mark = object()
    positions: list[int] = []
    for opcode, arg, position in pickletools.genops(data):
        name = opcode.name
        if name == "MARK":
            stack.append(mark)
            continue
        if name in ("BINPUT", "LONG_BINPUT", "PUT"):
            memo[int(arg)] = stack[-1][2]
            continue
        if name == "MEMOIZE":
            memo[len(memo)] = stack[-1][2]
            continue
        if name in ("BINGET", "LONG_BINGET", "GET"):
            stack.append((position, name, memo.get(int(arg))))
            continue
        popped: list[Any] = []
        before = opcode.stack_before
        if pickletools.markobject in before:
            while stack[-1] is not mark:
                popped.insert(0, stack.pop())
            stack.pop()
            items = list(popped)
            for _ in range(before.index(pickletools.markobject)):
                popped.insert(0, stack.pop())
            if name == "SETITEMS":
                keys = {key[2]: value for key, value in zip(items[::2], items[1::2])}
                if _PART_KEYS <= keys.keys():
                    positions.extend(
                        keys[field][0]
                        for field in ("resource_id", "revision", "placement_set_id", "topology_id")
                        if field in keys and keys[field][1] == "BINGET"
                    )
        else:
            for _ in before:
                popped.insert(0, stack.pop())
        value = arg if name in _STRING_OPS else None
        start = popped[0][0] if popped else position
        stack.extend((start, name, value) for _ in opcode.stack_after)
    return positions


@pytest.mark.parametrize("protocol", [4, 5])
def test_the_ci_cycle_is_refused_by_the_part_restore(protocol: int) -> None:
    name, data = dict((int(n[-1]), (n, d)) for n, d in _field_state_seeds())[protocol]
    plan_index, state_index = _plan_memo_indices(data)
    positions = _part_identity_positions(data)
    assert len(positions) >= 4, positions
    for position in positions:
        for target in (plan_index, state_index):
            raw = bytearray(data)
            raw[position + 1] = target
            with pytest.raises(ValueError) as info:
                pickle_cases.RestrictedUnpickler(io.BytesIO(bytes(raw))).load()
            text = str(info.value)
            assert text.endswith("must be a non-empty string") or text.startswith("placement part "), text
            assert pyfuzz.spec_message(text), text


# --------------------------------------------------------------------------------------------
# each restore function, one forged field at a time


def _cycle_marker() -> Any:
    box: list[Any] = []
    box.append(box)  # a value holding a reference cycle
    return box


_FORGERIES: list[Any] = [float("nan"), {}, _cycle_marker(), b"x", 1.0]


def _graph_values() -> dict[str, Any]:
    placement = ka_placement()
    part = placement.parts[0]
    tensor = placement.tensors[0]
    axes = {type(axis).__name__: axis for tensor in placement.tensors for axis in tensor.parallel_axes}
    values = {
        "rank": part.rank,
        "tensor": tensor,
        "participant": placement.topology.participants[0],
        "topology": placement.topology,
        "part": part,
        "placement": placement,
    }
    values.update(axes)
    return values


# (value, field index, message) of every field of the restores; None: any value of the right
# type (a str, an int) is still restored unvalidated (spec §13), only another type is refused.
_FIELDS: list[tuple[str, int, str]] = [
    *(("rank", i, "rank must be a ParallelRank") for i in range(4)),
    ("tensor", 0, "tensor_id must be a non-empty string"),
    ("tensor", 1, "global_shape must contain integers"),
    ("tensor", 2, "dtype must be a non-empty string"),
    ("tensor", 3, "itemsize must be an integer"),
    ("tensor", 4, "shard_dims must contain integers"),
    ("tensor", 5, "layout_fingerprint must be a non-empty string"),
    ("tensor", 6, "TensorDescriptor parallel_axes must"),
    ("tensor", 7, "layer_id must be an integer"),
    ("tensor", 8, "expert_id must be an integer"),
    ("participant", 0, "participant_id must be a non-empty string"),
    ("participant", 1, "topology participant rank must be a ParallelRank"),
    ("topology", 0, "tp_size must be an integer"),
    ("topology", 4, "ParallelTopology participants must"),
    ("topology", 5, "topology_id must be a non-empty string"),
    ("part", 0, "resource_id must be a non-empty string"),
    ("part", 1, "revision must be a non-empty string"),
    ("part", 2, "weight_generation must be an integer"),
    ("part", 3, "placement_set_id must be a non-empty string"),
    ("part", 4, "topology_id must be a non-empty string"),
    ("part", 5, "participant_id must be a non-empty string"),
    ("part", 6, "placement part rank must be a ParallelRank"),
    ("part", 7, "WeightPlacementPart tensors must"),
    ("part", 8, "WeightPlacementPart fragments must"),
    ("placement", 0, "resource_id must be a non-empty string"),
    ("placement", 1, "placement_id must be a non-empty string"),
    ("placement", 2, "revision must be a non-empty string"),
    ("placement", 3, "weight_generation must be an integer"),
    ("placement", 4, "placement_set_id must be a non-empty string"),
    ("placement", 5, "topology must be a ParallelTopology"),
    ("placement", 6, "WeightPlacementManifest parts must"),
    ("placement", 7, "WeightPlacementManifest tensors must"),
    ("placement", 8, "WeightPlacementManifest fragments must"),
    ("placement", 9, "placement digest must be a lowercase SHA-256 digest"),
    ("SplitAxis", 0, "parallel axis kind must be a non-empty string"),
    ("SplitAxis", 1, "split axis dim must be an integer"),
]


def _field_dict(value: Any) -> dict[str, Any]:
    """The value's default pickling state (its fields in field order; a placement's digest
    cache last)."""
    state = value.__getstate__() if isinstance(value, WeightPlacementManifest) else dict(value.__dict__)
    return dict(state)


def _instance(cls: type, state: dict[str, Any]) -> Any:
    """An instance of ``cls`` holding exactly ``state`` as its instance dict (a forgery)."""
    forged = object.__new__(cls)
    forged.__dict__.update(state)
    return forged


# The restore helpers that pickles written before session 66 name (one call per value with its
# field values): they must keep refusing what ``__setstate__`` refuses.
_LEGACY_RESTORES: dict[str, Callable[..., Any]] = {
    "rank": weight_types._restore_parallel_rank,
    "tensor": weight_types._restore_tensor_descriptor,
    "participant": weight_topology._restore_topology_participant,
    "topology": weight_topology._restore_parallel_topology,
    "part": weight_part._restore_placement_part,
    "placement": weight_placement._restore_placement_manifest,
    "SplitAxis": weight_types._restore_split_axis,
}


@pytest.mark.parametrize("kind, index, message", _FIELDS, ids=[f"{k}-{i}" for k, i, _ in _FIELDS])
@pytest.mark.parametrize("forgery", range(len(_FORGERIES)))
def test_each_restore_refuses_a_field_of_another_type(kind: str, index: int, message: str, forgery: int) -> None:
    value = _graph_values()[kind]
    cls = type(value)
    state = _field_dict(value)
    assert value.__reduce_ex__(4)[:3] == (copyreg.__newobj__, (cls,), state)  # default pickling
    name = list(state)[index]
    forged = {**state, name: _FORGERIES[forgery]}
    blank = object.__new__(cls)
    with raises(message):
        blank.__setstate__(forged)
    assert blank.__dict__ == {}  # refused before anything was stored
    blank.__setstate__(state)  # (the unforged state restores an equal value)
    assert blank == value and blank.__dict__ == state
    # through pickle itself: the forged value, alone and inside another pickle
    for data in (pickle.dumps(_instance(cls, forged)), pickle.dumps([_instance(cls, forged)], protocol=2)):
        with raises(message):
            pickle.loads(data)
    # and the pre-session-66 form: one call of the restore helper with the field values
    restore = _LEGACY_RESTORES[kind]
    assert restore(*state.values()) == value
    with raises(message):
        restore(*forged.values())
    with raises(message):
        pickle.loads(pickle.dumps(PickledCall(restore, tuple(forged.values()))))


def test_values_of_the_right_type_are_still_restored_unvalidated() -> None:
    # spec §13: default pickling restores without __post_init__; only the type is checked
    values = _graph_values()
    for kind, name, forged in (("part", "resource_id", ""), ("rank", "dp", -1), ("tensor", "layout_fingerprint", "other")):
        value = values[kind]
        state = {**_field_dict(value), name: forged}
        restored = pickle.loads(pickle.dumps(_instance(type(value), state)))
        assert getattr(restored, name) == forged and restored.__dict__ == state
        assert getattr(_LEGACY_RESTORES[kind](*state.values()), name) == forged


@pytest.mark.parametrize("name", ["resource_id", "revision", "weight_generation", "placement_set_id", "topology_id"])
def test_a_part_that_differs_from_its_placement_is_refused(name: str) -> None:
    placement = ka_placement()
    placement.digest  # noqa: B018  (pickled with the fields)
    part = placement.parts[0]
    other = placement.weight_generation + 1 if name == "weight_generation" else "other"
    forged_part = _instance(type(part), {**part.__dict__, name: other})
    state = {**_field_dict(placement), "parts": (forged_part,) + placement.parts[1:]}
    with raises(f"placement part {name} differs"):
        pickle.loads(pickle.dumps(_instance(WeightPlacementManifest, state)))
    with raises(f"placement part {name} differs"):
        _LEGACY_RESTORES["placement"](*state.values())


# --------------------------------------------------------------------------------------------
# the plan pickles: record (protocol 4) and packed record (protocol 5), F5's NaN


def _record(plan: Any) -> list[Any]:
    split = pickle_cases.split_pickle(pickle.dumps(plan, protocol=4))
    assert split is not None and split[0] == "_restore_transfer_plan"
    return list(split[1])


def _forged(obj: Any, **fields: Any) -> Any:
    clone = object.__new__(type(obj))
    clone.__dict__.update(obj.__dict__)
    clone.__dict__.update(fields)
    return clone


def _load_record(items: list[Any]) -> Any:
    return pickle.loads(pickle_cases.repickle("_restore_transfer_plan", tuple(items), 4))


def _load_packed(items: list[Any]) -> Any:
    packed = bound_pickle._graph_pack(tuple(items), bound_pickle._GRAPH_REGISTRY)
    assert packed is not None
    return pickle.loads(pickle_cases.repickle("_restore_packed_transfer_plan", packed, 5))


def _with_target_placement(record: list[Any], placement: Any, forged: Any) -> list[Any]:
    for key in [k for k in forged.__dict__ if k.startswith("_") and k != "_digest_cache"]:
        del forged.__dict__[key]
    edited = list(record)
    edited[4] = forged
    edited[6] = tuple(forged if item is placement else item for item in record[6])
    return edited


@pytest.fixture(scope="module")
def seed_plan() -> Any:
    return dict(pickle_cases.seed_plans())["tp2-to-tp3"]


@pytest.mark.parametrize("load", [_load_record, _load_packed], ids=["protocol4", "packed"])
@pytest.mark.parametrize("value", [float("nan"), None, 3, ("x",)], ids=["nan", "none", "int", "tuple"])
def test_f5_forged_layout_fingerprint_is_refused(seed_plan: Any, load: Callable[[list[Any]], Any], value: Any) -> None:
    # fuzz finding F5's reproducer (fuzz/findings/f5_repro.py): accepted before this session
    record = _record(seed_plan)
    placement = record[4]
    tensor = _forged(placement.tensors[0], layout_fingerprint=value)
    parts = tuple(_forged(part, tensors=(tensor,)) for part in placement.parts)
    forged = _forged(placement, tensors=(tensor,), parts=parts)
    with raises("layout_fingerprint must be a non-empty string"):
        load(_with_target_placement(record, placement, forged))


@pytest.mark.parametrize("load", [_load_record, _load_packed], ids=["protocol4", "packed"])
@pytest.mark.parametrize("field", ["resource_id", "revision", "placement_set_id", "topology_id"])
def test_a_part_field_holding_another_object_is_refused(seed_plan: Any, load: Callable[[list[Any]], Any], field: str) -> None:
    # the CI cycle's fields, through the record formats: a part's identity holding another
    # object of the plan (here its planning limits) instead of a str
    record = _record(seed_plan)
    placement = record[4]
    parts = (_forged(placement.parts[0], **{field: record[5]}),) + placement.parts[1:]
    forged = _forged(placement, parts=parts)
    with raises(f"{field} must be a non-empty string"):
        load(_with_target_placement(record, placement, forged))


@pytest.mark.parametrize("load", [_load_record, _load_packed], ids=["protocol4", "packed"])
def test_placement_fragments_holding_another_object_are_refused(seed_plan: Any, load: Callable[[list[Any]], Any]) -> None:
    record = _record(seed_plan)
    placement = record[4]
    forged = _forged(placement, fragments=placement.fragments[:-1] + (record[5],))
    with raises("WeightPlacementManifest fragments must contain PlacementFragment"):
        load(_with_target_placement(record, placement, forged))


@pytest.mark.parametrize("load", [_load_record, _load_packed], ids=["protocol4", "packed"])
def test_a_placement_missing_a_field_is_refused(seed_plan: Any, load: Callable[[list[Any]], Any]) -> None:
    # session 66's fuzz finding (pickle_cases --case 6015047197458986675): one byte turned the
    # target placement's "topology" key into "tkpology"; the plan loaded, and comparing its round
    # trip raised AttributeError. A state missing a field is now refused like a mistyped one.
    record = _record(seed_plan)
    placement = record[4]
    forged = _forged(placement)
    forged.__dict__["tkpology"] = forged.__dict__.pop("topology")
    with raises("topology must be a ParallelTopology"):
        load(_with_target_placement(record, placement, forged))


def test_a_descriptor_left_without_its_state_is_refused(seed_plan: Any) -> None:
    # A descriptor with an empty dict pickles with no BUILD, so no __setstate__ runs for it. In
    # the placement's catalog only (its parts hold the real one) no revalidation rule reads it:
    # the compact record's whole-graph check (bound_pickle._require_typed_placements, as for the
    # packed record) refuses it.
    record = _record(seed_plan)
    placement = record[4]
    empty = object.__new__(type(placement.tensors[0]))
    assert empty.__reduce_ex__(4)[2] is None
    forged = _forged(placement, tensors=(empty,) + placement.tensors[1:])
    with raises("global_shape must contain integers"):
        _load_record(_with_target_placement(record, placement, forged))


def test_unforged_seed_plans_still_round_trip() -> None:
    for _, plan in pickle_cases.seed_plans():
        for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
            again = pickle.loads(pickle.dumps(plan, protocol=protocol))
            assert type(again) is TransferPlan and again == plan
        assert dataclasses.replace(plan) == plan


# --------------------------------------------------------------------------------------------
# the harness: an exception while comparing an accepted plan is a Finding, not a crash


class _Recursing:
    def __ne__(self, other: Any) -> bool:
        raise RecursionError("maximum recursion depth exceeded in comparison")

    __eq__ = __ne__  # type: ignore[assignment]


def test_check_plan_turns_a_comparison_error_into_a_finding(seed_plan: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    data = pickle.dumps(seed_plan, protocol=4)
    pickle_cases.check_plan(seed_plan, data)  # a sound plan passes
    monkeypatch.setattr(pickle_cases.dataclasses, "replace", lambda plan: _Recursing())
    with pytest.raises(pyfuzz.Finding) as info:
        pickle_cases.check_plan(seed_plan, data)
    assert "RecursionError" in str(info.value) and info.value.input is data


def test_check_plan_turns_a_round_trip_comparison_error_into_a_finding(
    seed_plan: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = pickle.dumps(seed_plan, protocol=4)
    real_loads = pickle.loads
    calls = []

    def loads(payload: bytes) -> Any:
        calls.append(payload)
        return _Recursing()

    monkeypatch.setattr(pickle_cases.pickle, "loads", loads)
    try:
        with pytest.raises(pyfuzz.Finding) as info:
            pickle_cases.check_plan(seed_plan, data)
    finally:
        monkeypatch.setattr(pickle_cases.pickle, "loads", real_loads)
    assert calls and "round trip" in str(info.value) and "RecursionError" in str(info.value)


# --------------------------------------------------------------------------------------------
# two small gaps (session 17's closing note)


def _plan_copy(plan: Any) -> Any:
    import copy

    return copy.deepcopy(plan)


@pytest.mark.parametrize("name", ["max_transfer_regions", "max_segments_per_region", "max_total_lowered_segments"])
def test_replace_refuses_planning_limits_without_a_field(seed_plan: Any, name: str) -> None:
    # dataclasses.replace passed the damaged limits on, and reading the removed field fell back
    # to the class default: accepted, while every pickle path refused it
    import copy

    forged = copy.copy(seed_plan)
    limits = copy.copy(seed_plan.planning_limits)
    del limits.__dict__[name]
    object.__setattr__(forged, "planning_limits", limits)
    message = f"planning limit {name} must be a positive integer"
    with raises(message):
        dataclasses.replace(forged)
    for protocol in (4, 5):
        with raises(message):
            pickle.loads(pickle.dumps(forged, protocol=protocol))


def _damaged_attestation_placement(plan: Any, damage: str) -> Any:
    import copy

    damaged_plan = _plan_copy(plan)
    attestation = damaged_plan.target_executors[0].attestation
    placement = attestation.placement
    bad = copy.copy(placement)
    if damage == "topology.tp_size":
        topology = copy.copy(placement.topology)
        del topology.__dict__["tp_size"]
        object.__setattr__(bad, "topology", topology)
    elif damage == "topology":
        del bad.__dict__["topology"]
    else:
        part = copy.copy(placement.parts[0])
        del part.__dict__["revision"]
        object.__setattr__(bad, "parts", (part,) + placement.parts[1:])
    object.__setattr__(attestation, "placement", bad)
    return damaged_plan


@pytest.mark.parametrize("damage", ["topology.tp_size", "topology", "part.revision"])
def test_a_damaged_attestation_placement_is_named(seed_plan: Any, damage: str) -> None:
    # it was reported as "transfer plan target placement is invalid", blaming the target
    with raises("runtime attestation placement is invalid"):
        dataclasses.replace(_damaged_attestation_placement(seed_plan, damage))


def test_a_damaged_target_placement_is_still_the_target(seed_plan: Any) -> None:
    import copy

    forged = copy.copy(seed_plan)
    placement = copy.copy(seed_plan.target_placement)
    topology = copy.copy(placement.topology)
    del topology.__dict__["tp_size"]
    object.__setattr__(placement, "topology", topology)
    object.__setattr__(forged, "target_placement", placement)
    with raises("transfer plan target placement is invalid"):
        dataclasses.replace(forged)

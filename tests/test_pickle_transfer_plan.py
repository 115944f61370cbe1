"""The compact pickle record of ``TransferPlan`` (``_planner/bound_pickle.py``, spec §13): round
trips are exact, shared objects stay shared, the fallback field-state format covers what the
record does not describe, and every restore runs the validating paths: forged values inside a
record and malformed records are rejected with ``ValueError``."""

from __future__ import annotations

import copy
import copyreg
import dataclasses
import pickle
from typing import Any, Callable

import pytest

from spec_helpers import forged_copy, raises
from test_binding_attacks import World, _stored_world

from mooncake.reshard.weight._planner import bound_pickle
from mooncake.reshard.weight._planner.bound_pickle import (
    _restore_packed_transfer_plan,
    _restore_transfer_plan,
    reduce_transfer_plan,
)
from mooncake.reshard.weight.planner import (
    RuntimeBindingAttestation,
    TransferPlan,
    bind_logical_transfer_plan,
    plan_stored_transfer_to_target_placement,
)

_INVALID = "transfer plan pickle state is invalid"
_PROTOCOLS = range(2, pickle.HIGHEST_PROTOCOL + 1)


@pytest.fixture()
def world() -> World:
    return World()


def _is_compact(plan: Any) -> bool:
    # Protocol 5 packs the record (``_restore_packed_transfer_plan``), lower ones write it as is.
    packed = plan.__reduce_ex__(pickle.HIGHEST_PROTOCOL)[0] is _restore_packed_transfer_plan
    record = plan.__reduce_ex__(4)[0] is _restore_transfer_plan
    assert packed == record
    return packed


def _record(plan: TransferPlan) -> list[Any]:
    reduced = reduce_transfer_plan(plan)
    assert reduced[0] is _restore_transfer_plan
    return list(reduced[1])


def _restore(record: list[Any]) -> TransferPlan:
    return pickle.loads(pickle.dumps(_Payload(tuple(record))))


class _Payload:
    """Pickles as a call of the restore helper with an arbitrary (possibly hostile) record."""

    def __init__(self, record: tuple[Any, ...]) -> None:
        self.record = record

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore_transfer_plan, self.record)


def _assert_same_plan(restored: TransferPlan, plan: TransferPlan) -> None:
    assert type(restored) is TransferPlan and restored == plan
    assert restored.source_stored_fragment_snapshots == plan.source_stored_fragment_snapshots
    assert restored.pipeline_routes == plan.pipeline_routes
    for side in ("source", "target"):
        for mine, theirs in zip(getattr(restored, f"{side}_executors"), getattr(plan, f"{side}_executors")):
            assert mine.attestation == theirs.attestation
            assert restored.operation_indices_for_executor(mine, side) == plan.operation_indices_for_executor(
                theirs, side
            )
    for mine, theirs in zip(restored.operations, plan.operations):
        for side in ("source", "target"):
            a, b = getattr(mine, side), getattr(theirs, side)
            assert a == b and a.attestation == b.attestation and a.owner is None


def test_bound_plan_uses_the_compact_record_and_round_trips(world: World) -> None:
    plan = world.bind()
    assert _is_compact(plan)
    for protocol in _PROTOCOLS:
        _assert_same_plan(pickle.loads(pickle.dumps(plan, protocol=protocol)), plan)
    for clone in (copy.copy(plan), copy.deepcopy(plan), dataclasses.replace(plan)):
        _assert_same_plan(clone, plan)
    # A restored plan pickles compactly again, to an equal plan.
    restored = pickle.loads(pickle.dumps(plan))
    assert _is_compact(restored)
    _assert_same_plan(pickle.loads(pickle.dumps(restored)), plan)


def test_compact_record_is_smaller_and_keeps_sharing(world: World) -> None:
    plan = world.bind()
    compact = pickle.dumps(plan, protocol=pickle.HIGHEST_PROTOCOL)
    fallback = pickle.dumps(
        (copyreg.__newobj__, (TransferPlan,), plan.__getstate__()), protocol=pickle.HIGHEST_PROTOCOL
    )
    assert len(compact) < len(fallback)
    restored = pickle.loads(compact)
    attestations = {id(e.attestation) for e in restored.source_executors + restored.target_executors}
    # Every operation fragment's attestation is one of the executors' (shared, not duplicated).
    for op in restored.operations:
        assert id(op.source.attestation) in attestations and id(op.target.attestation) in attestations
    # Fragments shared by several operations stay one object; placements stay shared.
    assert len({id(op.source) for op in restored.operations}) == len({id(op.source) for op in plan.operations})
    assert all(op.target.attestation.placement is restored.target_placement for op in restored.operations)
    for op in restored.operations:
        bound = op.target
        assert bound.binding is bound.attestation.binding_fragment(bound.placement_fragment_id)


def test_hand_built_plan_round_trips(world: World) -> None:
    plan = world.bind()
    by_hand = TransferPlan(
        resource_id=plan.resource_id,
        revision=plan.revision,
        weight_generation=plan.weight_generation,
        target_placement=plan.target_placement,
        operations=list(plan.operations),
        planning_limits=plan.planning_limits,
        source_executors=list(plan.source_executors),
        target_executors=plan.target_executors,
    )
    assert _is_compact(by_hand)
    for protocol in _PROTOCOLS:
        _assert_same_plan(pickle.loads(pickle.dumps(by_hand, protocol=protocol)), plan)


def test_fallback_format_for_what_the_record_does_not_describe(world: World) -> None:
    plan = world.bind()
    target, manifest, targets, _memory = _stored_world()
    stored = bind_logical_transfer_plan(
        plan_stored_transfer_to_target_placement(manifest, target), targets, source_manifest=manifest
    )
    extra = forged_copy(plan, note="kept")
    listed = forged_copy(plan, operations=list(plan.operations))
    for value, expected in ((stored, stored), (extra, extra), (listed, plan)):
        assert not _is_compact(value)
        for protocol in _PROTOCOLS:
            restored = pickle.loads(pickle.dumps(value, protocol=protocol))
            assert restored == expected
    assert pickle.loads(pickle.dumps(extra)).note == "kept"  # type: ignore[attr-defined]
    assert type(pickle.loads(pickle.dumps(listed)).operations) is tuple


def test_forged_values_inside_the_record_are_rejected(world: World) -> None:
    plan = world.bind()
    op = plan.operations[0]
    # A bound fragment whose fence differs from its attestation (constructor check).
    stale = forged_copy(op.target, lease_generation=op.target.lease_generation + 1)
    forged = forged_copy(plan, operations=(forged_copy(op, target=stale),) + plan.operations[1:])
    assert _is_compact(forged)
    with raises("bound fragment runtime fence differs from attestation"):
        pickle.loads(pickle.dumps(forged))
    # Evidence that retains an owner (attestation __setstate__ check), even when forged.
    attestation = plan.target_executors[0].attestation
    fragments = attestation.evidence.fragments
    evidence = forged_copy(attestation.evidence, fragments=(forged_copy(fragments[0], owner=object()),) + fragments[1:])
    record = _record(plan)
    table = list(record[6])  # flat (placement, evidence) pairs
    index = next(i for i, item in enumerate(table) if item is attestation.evidence)
    table[index] = evidence
    record[6] = tuple(table)
    with raises("runtime binding evidence must not retain allocation owners"):
        bound_pickle._restore_transfer_plan(*record)
    # A tampered region field (plan revalidation).
    region = forged_copy(op, inner_bytes=op.inner_bytes + 1)
    forged = forged_copy(plan, operations=(region,) + plan.operations[1:])
    assert _is_compact(forged)
    with pytest.raises(ValueError):
        pickle.loads(pickle.dumps(forged))
    # An executor without its attestation (plan revalidation).
    executor = forged_copy(plan.target_executors[0], attestation=None)
    forged = forged_copy(plan, target_executors=(executor,) + plan.target_executors[1:])
    assert _is_compact(forged)
    with raises("target executor lacks runtime attestation"):
        pickle.loads(pickle.dumps(forged))


@pytest.mark.parametrize("field", ["address", "worker_id", "storage_offset_bytes", "lease_generation"])
def test_tampered_snapshot_in_the_record_is_rejected(world: World, field: str) -> None:
    plan = world.bind()
    executor = plan.source_executors[0]
    value = getattr(executor.fragment_snapshots[0], field)
    tampered = value + 64 if isinstance(value, int) else value + "-x"
    snapshot = forged_copy(executor.fragment_snapshots[0], **{field: tampered})
    forged_executor = forged_copy(executor, fragment_snapshots=(snapshot,) + executor.fragment_snapshots[1:])
    forged = forged_copy(plan, source_executors=(forged_executor,) + plan.source_executors[1:])
    assert _is_compact(forged)
    with pytest.raises(ValueError, match="source executor"):
        pickle.loads(pickle.dumps(forged))


def _edit(index: int, change: Callable[[Any], Any]) -> Callable[[list[Any]], None]:
    def apply(record: list[Any]) -> None:
        record[index] = change(record[index])

    return apply


def _item(position: int, value: Any) -> Callable[[Any], Any]:
    def change(table: Any) -> Any:
        items = list(table)
        items[position] = value
        return tuple(items)

    return change


# Record layout: 6 attestations (flat pairs), fragments (flat 6-item rows), operations (flat
# 11-item rows), executors (8 fields, attestation index, snapshot count, 16 items per snapshot).
@pytest.mark.parametrize(
    "edit",
    [
        lambda record: record.pop(),
        lambda record: record.append(None),
        _edit(0, lambda version: 2),
        _edit(0, lambda version: True),
        _edit(6, list),
        _edit(6, lambda table: table + (None,)),
        _edit(7, lambda table: table + table[:5]),
        _edit(7, _item(5, 10**30)),
        _edit(7, _item(5, -1)),
        _edit(7, _item(5, "0")),
        _edit(8, _item(1, 10**6)),
        _edit(8, _item(2, 1.0)),
        _edit(8, lambda table: table[:-1]),
        _edit(9, lambda table: table + (None,)),
        _edit(9, lambda table: table[:-1]),
        _edit(9, _item(8, 99)),
        _edit(9, _item(8, -1)),
        _edit(9, _item(9, -1)),
        _edit(9, _item(9, 10**30)),
        _edit(9, _item(9, "1")),
        _edit(9, list),
        _edit(10, _item(9, 2)),
        _edit(10, lambda table: table + table[:9]),
    ],
)
def test_malformed_records_are_rejected(world: World, edit: Callable[[list[Any]], None]) -> None:
    record = _record(world.bind())
    assert record[9][9] == 1 and record[10][9] == 1  # one snapshot per executor in this world
    edit(record)
    with raises(_INVALID):
        _restore(record)


@pytest.mark.parametrize("field", ["operations", "source_executors", "target_executors"])
@pytest.mark.parametrize("value", [1, None, 2.5, object()])
def test_field_state_with_a_sequence_that_is_not_iterable_is_invalid(world: World, field: str, value: Any) -> None:
    # pickle_cases finding: a field-state pickle whose source_executors was the int 1 raised
    # TypeError("'int' object is not iterable") from inside the revalidation.
    state = dict(world.bind().__getstate__())
    state[field] = value
    with raises(_INVALID):
        _field_state_restore(state)


_PLACEMENT_INVALID = "transfer plan target placement is invalid"
_TOPOLOGY_FIELDS = ("tp_size", "pp_size", "ep_size", "dp_size", "participants", "topology_id")


def _damaged(value: Any, field: str) -> Any:
    """A copy of ``value`` without ``field`` in its instance dict."""
    damaged = copy.copy(value)
    del damaged.__dict__[field]
    return damaged


def _topology_without(placement: Any, field: str) -> Any:
    damaged = copy.copy(placement)
    object.__setattr__(damaged, "topology", _damaged(placement.topology, field))
    return damaged


def _participant_without(placement: Any, field: str) -> Any:
    topology = copy.copy(placement.topology)
    participants = topology.participants
    object.__setattr__(topology, "participants", (_damaged(participants[0], field),) + participants[1:])
    damaged = copy.copy(placement)
    object.__setattr__(damaged, "topology", topology)
    return damaged


def _part_without(placement: Any, field: str) -> Any:
    damaged = copy.copy(placement)
    object.__setattr__(damaged, "parts", (_damaged(placement.parts[0], field),) + placement.parts[1:])
    return damaged


# (label, damage of the plan's top-level target placement (a copy: the attestations hold the
# original), message): a field the comparison with the attested placement reads, removed from the
# placement or a value it holds, is an invalid target placement (spec §9.6 step 12's message); an
# identity field the plan reads first gives its field rule's message (as placement_id, read by the
# placement shape check, always did).
_UNREADABLE_PLACEMENTS = [
    *((f"topology.{field}", lambda p, f=field: _topology_without(p, f), _PLACEMENT_INVALID) for field in _TOPOLOGY_FIELDS),
    ("topology", lambda p: _damaged(p, "topology"), _PLACEMENT_INVALID),
    ("tensors", lambda p: _damaged(p, "tensors"), _PLACEMENT_INVALID),
    ("fragments", lambda p: _damaged(p, "fragments"), _PLACEMENT_INVALID),
    ("participant.participant_id", lambda p: _participant_without(p, "participant_id"), _PLACEMENT_INVALID),
    ("participant.rank", lambda p: _participant_without(p, "rank"), _PLACEMENT_INVALID),
    ("part.resource_id", lambda p: _part_without(p, "resource_id"), _PLACEMENT_INVALID),
    ("part.topology_id", lambda p: _part_without(p, "topology_id"), _PLACEMENT_INVALID),
    ("resource_id", lambda p: _damaged(p, "resource_id"), "resource_id must be a non-empty string"),
    ("revision", lambda p: _damaged(p, "revision"), "revision must be a non-empty string"),
    ("weight_generation", lambda p: _damaged(p, "weight_generation"), "weight_generation must be an integer"),
    ("placement_id", lambda p: _damaged(p, "placement_id"), "placement_id must be a non-empty string"),
]

# Session 18 (fuzz finding F5, the CI cycle): a placement's restore refuses fields of the wrong
# type below it with the field rule's message. Since session 66 every path through the plan's
# record (``copy``, ``deepcopy``, pickle at any protocol) runs the packed record's whole-graph
# check (``bound_pickle._require_typed_placements``) on the placements it holds, and each
# placement graph type's ``__setstate__`` refuses a state missing a field: all give the field
# rule's message. ``replace`` and the field state keep the placement object: the rules decide, as
# before.
_RESTORE_REFUSES = {
    **{f"topology.{field}": f"{field} must be an integer" for field in ("tp_size", "pp_size", "ep_size", "dp_size")},
    "topology.participants": "ParallelTopology participants must be a sequence",
    "topology.topology_id": "topology_id must be a non-empty string",
    "participant.participant_id": "participant_id must be a non-empty string",
    "participant.rank": "topology participant rank must be a ParallelRank",
    "part.resource_id": "placement part resource_id differs",
    "part.topology_id": "placement part topology_id differs",
}
_PACKED_RESTORE_REFUSES = {
    "topology": "topology must be a ParallelTopology",
    "tensors": "WeightPlacementManifest tensors must be a sequence",
    "fragments": "WeightPlacementManifest fragments must be a sequence",
    # (a part without the field: its own check in the packed record, the placement's otherwise)
    "part.resource_id": "resource_id must be a non-empty string",
    "part.topology_id": "topology_id must be a non-empty string",
}

# Every way a plan is constructed again from an existing one (the field state: what unpickling
# the fallback format does).
_REBUILDS: dict[str, Callable[[Any], Any]] = {
    "replace": dataclasses.replace,
    "copy": copy.copy,
    "deepcopy": copy.deepcopy,
    "field_state": lambda plan: _field_state_restore(dict(plan.__getstate__())),
    **{f"pickle{protocol}": (lambda p, protocol=protocol: pickle.loads(pickle.dumps(p, protocol))) for protocol in range(6)},
}


@pytest.fixture(scope="module")
def bound_plan() -> TransferPlan:
    return World().bind()


@pytest.mark.parametrize("rebuild", sorted(_REBUILDS))
@pytest.mark.parametrize(
    "label, damage, message",
    _UNREADABLE_PLACEMENTS,
    ids=[label for label, _, _ in _UNREADABLE_PLACEMENTS],
)
def test_a_target_placement_the_rules_cannot_read_is_invalid(
    bound_plan: TransferPlan, rebuild: str, label: str, damage: Callable[[Any], Any], message: str
) -> None:
    # A plan whose target placement (or its topology, a participant, a part) lost a field raised
    # AttributeError from the dataclass comparison with the attested placement (spec §12.7) or from
    # the identity read (step 12) on every path but the field state (bd3b714: "transfer plan pickle
    # state is invalid"); now every path gives one ValueError, as for any other forged field.
    if rebuild.startswith("pickle") or rebuild in ("copy", "deepcopy"):
        # every path through the plan's record: the whole-graph check refuses it first
        message = _PACKED_RESTORE_REFUSES.get(label, _RESTORE_REFUSES.get(label, message))
    forged = copy.copy(bound_plan)
    object.__setattr__(forged, "target_placement", damage(bound_plan.target_placement))
    with raises(message):
        _REBUILDS[rebuild](forged)


def test_unrelated_attestation_in_the_record_is_rejected(world: World) -> None:
    plan = world.bind()
    record = _record(plan)
    # Point the first operation's target fragment at another executor's attestation.
    table = list(record[7])
    target_row = record[8][2]
    own = table[6 * target_row + 5]
    other = next(i for i in range(len(record[6]) // 2) if record[6][2 * i + 1] is not record[6][2 * own + 1])
    table[6 * target_row + 5] = other
    record[7] = tuple(table)
    with raises("bound fragment does not match its runtime binding attestation"):
        _restore(record)
    assert isinstance(plan.target_executors[0].attestation, RuntimeBindingAttestation)


# ---------------------------------------------------------------------------------------
# Oracle: the object-by-object field-state format. A single forged field anywhere in the plan
# must give the same outcome through the compact record (same exception and message, or an
# equal plan).


class _FieldState:
    """Pickles a plan in the fallback (field-state) format, whatever its shape."""

    def __init__(self, plan: TransferPlan) -> None:
        self.plan = plan

    def __reduce__(self) -> tuple[Any, ...]:
        return (_field_state_restore, (self.plan.__getstate__(),))


def _field_state_restore(state: dict[str, Any]) -> TransferPlan:
    """What unpickling ``(copyreg.__newobj__, (TransferPlan,), state)`` does."""
    plan: TransferPlan = object.__new__(TransferPlan)
    plan.__setstate__(state)
    return plan


def _outcome(blob: bytes) -> Any:
    try:
        return ("ok", pickle.loads(blob))
    except ValueError as error:
        return ("error", str(error))


def _forge(plan: TransferPlan, site: str, field: str, value: Any) -> TransferPlan:
    """A copy of ``plan`` whose object at ``site`` (a copy) has ``field`` forged to ``value``."""
    forged = copy.copy(plan)
    operations = list(plan.operations)
    op = copy.copy(operations[0])
    if site == "operation":
        target: Any = op
    elif site in ("source", "target"):
        target = copy.copy(getattr(op, site))
        object.__setattr__(op, site, target)
    elif site == "binding":
        bound = copy.copy(op.target)
        target = copy.copy(bound.binding)
        object.__setattr__(bound, "binding", target)
        object.__setattr__(op, "target", bound)
    elif site in ("executor", "snapshot", "evidence"):
        executors = list(plan.target_executors)
        executor = copy.copy(executors[0])
        executors[0] = executor
        object.__setattr__(forged, "target_executors", tuple(executors))
        if site == "executor":
            target = executor
        elif site == "snapshot":
            target = copy.copy(executor.fragment_snapshots[0])
            object.__setattr__(executor, "fragment_snapshots", (target,) + executor.fragment_snapshots[1:])
        else:
            attestation = copy.copy(executor.attestation)
            target = copy.copy(attestation.evidence)
            object.__setattr__(attestation, "evidence", target)
            object.__setattr__(executor, "attestation", attestation)
    else:
        raise AssertionError(site)
    object.__setattr__(target, field, value)
    operations[0] = op
    object.__setattr__(forged, "operations", tuple(operations))
    return forged


_FORGERIES = [
    ("operation", "tensor_id", "other"),
    ("operation", "overlap_offset", (0, 1)),
    ("operation", "overlap_shape", (1, 1)),
    ("operation", "source_base_offset", 2),
    ("operation", "target_base_offset", -1),
    ("operation", "inner_bytes", 3),
    ("operation", "outer_loop_counts", (1,)),
    ("operation", "source_strides", (7,)),
    ("operation", "target_strides", ()),
    ("source", "instance_id", "elsewhere"),
    ("source", "lease_generation", 2**64),
    ("target", "runtime_lease_id", ""),
    ("target", "lease_generation", True),
    ("target", "attestation", None),
    ("target", "owner", object()),
    ("binding", "address", 4096),
    ("binding", "device", "cuda:9"),
    ("binding", "nbytes", 0),
    ("executor", "worker_id", "moved"),
    ("executor", "runtime_lease_id", None),
    ("executor", "fragment_ids", ()),
    ("executor", "placement_digest", "0" * 64),
    ("executor", "attestation", None),
    ("snapshot", "address", 4096),
    ("snapshot", "lease_generation", 99),
    ("snapshot", "tensor_id", "other"),
    ("evidence", "generation", 5),
    ("evidence", "lease_id", "stolen"),
    ("evidence", "placement_digest", "f" * 64),
    ("evidence", "fragments", ()),
]


@pytest.mark.parametrize("protocol", [4, 5])
@pytest.mark.parametrize("site,field,value", _FORGERIES)
def test_single_forgery_matches_the_field_state_format(
    world: World, site: str, field: str, value: Any, protocol: int
) -> None:
    forged = _forge(world.bind(), site, field, value)
    expected = _outcome(pickle.dumps(_FieldState(forged)))
    actual = _outcome(pickle.dumps(forged, protocol=protocol))
    if site != "operation" and (site, field) != ("target", "owner"):  # owners are never pickled
        assert expected[0] == "error"  # the oracle itself rejects every other forgery
    if expected[0] == "error":
        assert actual == expected
    else:
        assert actual[0] == "ok" and actual[1] == expected[1]

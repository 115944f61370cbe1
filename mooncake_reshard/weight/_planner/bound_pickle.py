"""Pickle format of ``TransferPlan`` (spec §13): every restore revalidates the whole plan.

``TransferPlan.__reduce__`` returns one of two private formats; ``__reduce_ex__`` from
protocol 5 on (``pickle.HIGHEST_PROTOCOL``) packs the first (below). ``copy.copy`` reduces
with protocol 4 and keeps the unpacked record, whose restore shares the plan's placements.

**Compact record** (the usual case): ``(_restore_transfer_plan, record)`` where ``record`` is
the tuple

``(1, resource_id, revision, weight_generation, target_placement, planning_limits,
attestations, fragments, operations, source_executors, target_executors)``

whose last five items are flat tuples (no tuple per row: fewer objects to write and read):

- ``attestations``: ``placement, evidence`` (the attestation's own pickle state, spec §13) for
  each distinct attestation object of the plan, in first-use order (operation sources and
  targets, then source and target executors); attestation ``i`` is items ``2i, 2i+1``;
- ``fragments``: six items per distinct ``BoundWeightFragment`` object of the operations,
  ``placement, binding, instance_id, runtime_lease_id, lease_generation, attestation`` (the
  arguments ``BoundWeightFragment.__reduce__`` passes to the constructor, spec §13, without
  the owner), ``attestation`` being an attestation index or ``None``;
- ``operations``: eleven items per operation, the ``TransferRegion`` field values in field
  order with ``source`` and ``target`` replaced by fragment indices;
- ``source_executors``/``target_executors``: per executor, its first eight
  ``ExecutorTransferPlan`` field values in field order, its attestation index (or ``None``),
  the number ``k`` of its snapshots, then ``16 * k`` items: the ``RuntimeFragmentSnapshot``
  field values of each snapshot in field order.

Every value is written as the object holds it (nothing is recomputed or trusted at dump time);
shared objects (placements, placement fragments, runtime fragments, ranks, strings) stay shared
through pickle's memo. ``init=False`` and derived state is not written:
``source_stored_fragment_snapshots`` and the operation views are recomputed on restore.

Restoring runs exactly the validating paths of the object-by-object format: each attestation
as ``RuntimeBindingAttestation.__setstate__`` does (the full validated-state routine of §9.2),
each bound fragment through the ``BoundWeightFragment`` constructor's checks
(``BoundWeightFragment._restore``), regions, executors and
snapshots by field dict (their default pickling, spec §13), runtime fragments through their
constructor (their own ``__reduce__``), and the plan as ``TransferPlan.__setstate__`` does
(fields written, then ``__post_init__``: the whole plan is revalidated). A record of the wrong shape
(a hostile payload) raises "transfer plan pickle state is invalid".

The common case runs those same checks in C, each step declining (``None``) to its Python
reference for anything it does not decide: attestations through ``_native.attest_restored``
(``_restore_attestation``), bound fragments through ``_native.restore_fragments`` (after all
attestations were restored in the reference's first-use order; any failure or decline reruns
the one-at-a-time reference ``_restore_bound``, so the first failure reported is unchanged),
regions through ``_native.restore_regions_carried`` (csrc/restore_scan.c: the regions
``_native.restore_regions`` builds, plus the revalidation scan's facts derived from the values
stored in them, handed to the plan's revalidation as bind hands its own) and executors through
``_native.restore_executors`` (references ``_python_restore_regions`` /
``_python_restore_executors``, which raise).

**Packed record** (protocol 5): ``(_restore_packed_transfer_plan, (codes, values))``, the
compact record flattened by ``_native.graph_pack`` (csrc/pickle_codec.c): the record's tuples
and the instances of the classes of ``_GRAPH_REGISTRY`` (placements, topologies, parts,
tensors, axes, placement fragments, ranks, evidence, runtime fragments, planning limits) as
one opcode string, with None, ints within int64 and repeated str objects inline, and a flat
tuple of the other leaves; any object of another class or shape stays a leaf that pickle
writes itself. Pickle then writes one opcode string (a bytearray, which the restore empties
once decoded; payloads of earlier versions hold bytes) and one short tuple instead of calling
``__reduce_ex__`` on every object. ``_native.graph_unpack`` rebuilds the record (registered
instances by field dict, as their default pickling does; runtime fragments through their
constructor's checks, decided in C when they visibly hold, else by the constructor, which
raises its message; a malformed stream raises "transfer plan pickle state is invalid"), then
``_restore_transfer_plan`` restores it as above, taking each table out of the record as it
is read (none is alive during the revalidation). The restore pauses the cyclic collector.
The record's last five tables are built in C (``_native.encode_record``; ``_encode`` is its
reference and decides whatever it declines).

**Field state** (fallback, for anything the record does not describe exactly: stored-source
plans, subclasses, list-valued fields, extra instance attributes, fragments retaining an
owner): ``(copyreg.__newobj__, (cls,), plan.__getstate__())``, restored by
``TransferPlan.__setstate__``.
"""

from __future__ import annotations

import copyreg
from dataclasses import fields
from operator import itemgetter
from typing import Any, Optional

from ... import _native
from ..._collector import collector_paused
from ..._memo_proof import memo_proved, memo_proved_once
from ...contracts.fragments import RuntimeBindingFragment
from ..part import WeightPlacementPart
from ..placement import WeightPlacementManifest, restored_graph_failure, typed_graphs
from ..topology import ParallelTopology, TopologyParticipant
from ..types import (
    OwnershipAxis,
    ParallelRank,
    PlacementFragment,
    ReplicatedAxis,
    SplitAxis,
    TensorDescriptor,
)
from .attestation import RuntimeBindingAttestation, RuntimeBindingEvidence
from .bound_contracts import (
    ExecutorTransferPlan,
    RuntimeFragmentSnapshot,
    TransferPlan,
    _build_snapshot,
    _require_typed_limits,
    _snapshot_fields_state,
    _ViewScope,
)
from .contracts import PlanningLimits, TransferRegion, _build_region, _region_fields_state
from .exactness import exact_placement, inert_inputs, start_watch, stop_watch, untouched
from .fragments import BoundWeightFragment, _bound_fields_state
from .field_types import attestable_shape_failure

_FORMAT = 1
_INVALID = "transfer plan pickle state is invalid"

_PLAN_FIELDS = tuple(f.name for f in fields(TransferPlan))
_PLAN_KEYS = frozenset(_PLAN_FIELDS)
_REGION_FIELDS = tuple(f.name for f in fields(TransferRegion))
_FRAGMENT_FIELDS = tuple(f.name for f in fields(BoundWeightFragment))
_EXECUTOR_FIELDS = tuple(f.name for f in fields(ExecutorTransferPlan))
_SNAPSHOT_FIELDS = tuple(f.name for f in fields(RuntimeFragmentSnapshot))
_SOURCE_INDEX = _REGION_FIELDS.index("source")
_TARGET_INDEX = _REGION_FIELDS.index("target")
_SNAPSHOTS_INDEX = _EXECUTOR_FIELDS.index("fragment_snapshots")
_EXECUTOR_ATTESTATION_INDEX = _EXECUTOR_FIELDS.index("attestation")
# The record has the plan's fields minus the derived/optional ones and plus the three tables.
_RECORD_LENGTH = 11
_new_object = object.__new__
_attest_restored = _native.attest_restored
_native_restore_executors = _native.restore_executors
_native_restore_fragments = _native.restore_fragments
_native_restore_regions_carried = _native.restore_regions_carried
_native_encode_record = _native.encode_record
_PLACEMENT = WeightPlacementManifest
_EVIDENCE = RuntimeBindingEvidence
_RUNTIME_FRAGMENT = RuntimeBindingFragment
_PLACEMENT_FRAGMENT = PlacementFragment
_TENSOR = TensorDescriptor
# ``copyreg.__newobj__`` (what default pickling writes; not in the typeshed stubs).
_NEWOBJ: Any = getattr(copyreg, "__newobj__")


# The row layouts below rely on these field positions (checked once, at import).
if (_SOURCE_INDEX, _TARGET_INDEX) != (1, 2) or _SNAPSHOTS_INDEX != 8 or _EXECUTOR_ATTESTATION_INDEX != 9:
    raise RuntimeError("bound_pickle: unexpected TransferRegion/ExecutorTransferPlan field order")


_region_values = itemgetter(*_REGION_FIELDS)
_fragment_values = itemgetter(*_FRAGMENT_FIELDS)
_executor_values = itemgetter(*_EXECUTOR_FIELDS)
_snapshot_values = itemgetter(*_SNAPSHOT_FIELDS)
_REGION_COUNT = len(_REGION_FIELDS)
_FRAGMENT_COUNT = len(_FRAGMENT_FIELDS)
_EXECUTOR_COUNT = len(_EXECUTOR_FIELDS)
_SNAPSHOT_COUNT = len(_SNAPSHOT_FIELDS)


class _Irregular(Exception):
    """A value the compact record does not describe exactly: use the fallback format."""


def _compact_record(plan: Any) -> Optional[tuple[Any, ...]]:
    """The compact record of ``plan`` (see the module docstring), or None when it does not
    describe the plan exactly. An instance dict is read as its field values in field order
    when it holds exactly the fields (a missing field raises ``KeyError``, an extra entry
    shows in its length)."""
    if type(plan) is not TransferPlan:
        return None
    state = plan.__dict__
    extra = len(state) - len(_PLAN_KEYS)
    if not (extra == 0 or (extra == 1 and "_operation_views" in state)) or not _PLAN_KEYS <= state.keys():
        return None
    if (
        state["source_manifest"] is not None
        or state["source_manifest_identity"] is not None
        or state["source_stored_fragment_snapshots"] != ()
    ):
        return None
    operations = state["operations"]
    source_executors = state["source_executors"]
    target_executors = state["target_executors"]
    if type(operations) is not tuple or type(source_executors) is not tuple or type(target_executors) is not tuple:
        return None
    tables = _native_encode_record(
        operations,
        source_executors,
        target_executors,
        TransferRegion,
        BoundWeightFragment,
        ExecutorTransferPlan,
        RuntimeFragmentSnapshot,
        RuntimeBindingAttestation,
        _REGION_FIELDS,
        _FRAGMENT_FIELDS,
        _EXECUTOR_FIELDS,
        _SNAPSHOT_FIELDS,
    )
    if tables is not None:  # ``_encode``'s tables, built in C
        return (
            _FORMAT,
            state["resource_id"],
            state["revision"],
            state["weight_generation"],
            state["target_placement"],
            state["planning_limits"],
            *tables,
        )
    try:
        return _encode(state, operations, source_executors, target_executors)
    except (_Irregular, KeyError):
        return None


def _encode(
    state: dict[str, Any], operations: tuple[Any, ...], source_executors: tuple[Any, ...], target_executors: tuple[Any, ...]
) -> tuple[Any, ...]:
    """The record of a plan (raises ``_Irregular`` or ``KeyError`` for what it does not describe);
    the reference of ``_native.encode_record``, which builds its last five items in C and
    declines (None) to this function for anything else."""
    attestations: list[Any] = []
    # ``id`` -> table index of every attestation met (``None`` is written as ``None``); the
    # plan holds every object for the whole call, so no ``id`` can be reused meanwhile.
    attestation_index: dict[int, Any] = {id(None): None}
    fragment_rows: list[Any] = []
    fragment_index: dict[int, int] = {}

    def new_attestation(attestation: Any) -> int:
        if type(attestation) is not RuntimeBindingAttestation:
            raise _Irregular
        attestation_state = attestation.__dict__
        index = attestation_index[id(attestation)] = len(attestations) // 2
        # Exactly the attestation's pickle state (spec §13: ``(placement, evidence)``).
        attestations.append(attestation_state["placement"])
        attestations.append(attestation_state["evidence"])
        return index

    def fragment_position(fragment: Any) -> int:
        """Index of a new bound fragment in the table (its row appended)."""
        if type(fragment) is not BoundWeightFragment:
            raise _Irregular
        fragment_state = _bound_fields_state(fragment)  # its set fields (C layout, no __dict__)
        if len(fragment_state) != _FRAGMENT_COUNT:
            raise _Irregular
        row = _fragment_values(fragment_state)
        if row[5] is not None:  # an owner is never pickled: fallback (which rejects it)
            raise _Irregular
        attestation = row[6]
        position = attestation_index.get(id(attestation), False)
        if position is False:
            position = new_attestation(attestation)
        index = fragment_index[id(fragment)] = len(fragment_rows) // 6
        fragment_rows.extend(row[:5])
        fragment_rows.append(position)
        return index

    operation_rows: list[Any] = []
    for operation in operations:
        if type(operation) is not TransferRegion:
            raise _Irregular
        region_state = _region_fields_state(operation)  # its set fields (C layout, no __dict__)
        if len(region_state) != _REGION_COUNT:
            raise _Irregular
        values = _region_values(region_state)
        source = values[1]
        target = values[2]
        source_index = fragment_index.get(id(source))
        if source_index is None:
            source_index = fragment_position(source)
        target_index = fragment_index.get(id(target))
        if target_index is None:
            target_index = fragment_position(target)
        operation_rows += (values[0], source_index, target_index)
        operation_rows += values[3:]
    executor_rows: list[tuple[Any, ...]] = []
    for executors in (source_executors, target_executors):
        rows: list[Any] = []
        for executor in executors:
            if type(executor) is not ExecutorTransferPlan:
                raise _Irregular
            executor_state = executor.__dict__
            if len(executor_state) != _EXECUTOR_COUNT:
                raise _Irregular
            values = _executor_values(executor_state)
            snapshots = values[8]
            if type(snapshots) is not tuple:
                raise _Irregular
            head = len(rows)
            rows += values[:8]
            rows += (None, len(snapshots))  # the attestation index is set below
            for snapshot in snapshots:
                if type(snapshot) is not RuntimeFragmentSnapshot:
                    raise _Irregular
                snapshot_state = _snapshot_fields_state(snapshot)  # its set fields (C layout, no __dict__)
                if len(snapshot_state) != _SNAPSHOT_COUNT:
                    raise _Irregular
                rows.extend(_snapshot_values(snapshot_state))
            attestation = values[9]
            position = attestation_index.get(id(attestation), False)
            if position is False:
                position = new_attestation(attestation)
            rows[head + 8] = position
        executor_rows.append(tuple(rows))
    return (
        _FORMAT,
        state["resource_id"],
        state["revision"],
        state["weight_generation"],
        state["target_placement"],
        state["planning_limits"],
        tuple(attestations),
        tuple(fragment_rows),
        tuple(operation_rows),
        executor_rows[0],
        executor_rows[1],
    )


def reduce_transfer_plan(plan: Any) -> tuple[Any, ...]:
    """``TransferPlan.__reduce__``: the compact record when it describes the plan exactly, else
    the class, no arguments, and the plan's field state (both restore through
    ``TransferPlan.__setstate__``, which revalidates)."""
    record = _compact_record(plan)
    if record is None:
        return (_NEWOBJ, (type(plan),), plan.__getstate__())
    return (_restore_transfer_plan, record)


# The classes whose objects the packed record describes itself (``_native.graph_pack``, see
# csrc/pickle_codec.c): ``(class, names, mode)``. Mode 0: default dataclass pickling (the
# instance dict holds exactly the fields, restored without ``__post_init__``); mode 1: the same
# for ``WeightPlacementManifest``'s ``__getstate__`` (its fields and ``_digest_cache``; derived
# ``_`` caches are dropped); mode 2: ``RuntimeBindingFragment``'s rebuild through its
# constructor (13 arguments, then ``owner``). Most frequent classes first.
def _names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls))  # type: ignore[arg-type]


_GRAPH_REGISTRY: tuple[tuple[type, tuple[str, ...], int], ...] = (
    (ParallelRank, _names(ParallelRank), 0),
    (PlacementFragment, _names(PlacementFragment), 0),
    (RuntimeBindingFragment, _names(RuntimeBindingFragment), 2),
    (WeightPlacementPart, _names(WeightPlacementPart), 0),
    (TopologyParticipant, _names(TopologyParticipant), 0),
    (TensorDescriptor, _names(TensorDescriptor), 0),
    (RuntimeBindingEvidence, _names(RuntimeBindingEvidence), 0),
    (SplitAxis, _names(SplitAxis), 0),
    (ReplicatedAxis, _names(ReplicatedAxis), 0),
    (OwnershipAxis, _names(OwnershipAxis), 0),
    (ParallelTopology, _names(ParallelTopology), 0),
    (WeightPlacementManifest, _names(WeightPlacementManifest), 1),
    (PlanningLimits, _names(PlanningLimits), 0),
)
if _GRAPH_REGISTRY[2][1][-1] != "owner" or _GRAPH_REGISTRY[11][1][-1] != "_digest_cache":
    raise RuntimeError("bound_pickle: unexpected RuntimeBindingFragment/WeightPlacementManifest fields")
_graph_pack = _native.graph_pack
_graph_unpack = _native.graph_unpack
# ``copy.copy`` reduces with protocol 4: it keeps the record format, whose restore shares the
# plan's placements and evidence instead of rebuilding them.
_PACKED_PROTOCOL = 5


def reduce_ex_transfer_plan(plan: Any, protocol: Any) -> tuple[Any, ...]:
    """``TransferPlan.__reduce_ex__``: from protocol 5 on, the compact record packed by
    ``_native.graph_pack`` (``(_restore_packed_transfer_plan, (codes, values))``: pickle then
    writes one bytes string and one flat tuple of leaves instead of every placement, part,
    fragment, rank and runtime fragment object); otherwise, or when the record has a cycle,
    ``reduce_transfer_plan``."""
    record = _compact_record(plan)
    if record is None:
        return (_NEWOBJ, (type(plan),), plan.__getstate__())
    if type(protocol) is int and protocol >= _PACKED_PROTOCOL:
        packed = _graph_pack(record, _GRAPH_REGISTRY)
        if packed is not None:
            # The opcode string as a bytearray: the restore empties it once decoded (see
            # ``_restore_packed_transfer_plan``), which pickle's memo would not let it free.
            return (_restore_packed_transfer_plan, (bytearray(packed[0]), packed[1]))
    return (_restore_transfer_plan, record)


# ---------------------------------------------------------------------------------------
# Restore


def _groups(value: Any, size: int) -> Any:
    """The consecutive ``size``-item groups of a flat table (else the payload is invalid)."""
    if type(value) is not tuple or len(value) % size:
        raise ValueError(_INVALID)
    return zip(*[iter(value)] * size)


def _pick(table: list[Any], index: Any) -> Any:
    """``table[index]`` for an index the dump wrote (``None`` stays ``None``)."""
    if index is None:
        return None
    if type(index) is not int or not 0 <= index < len(table):
        raise ValueError(_INVALID)
    return table[index]


def _restore_attestation(
    placement: Any, evidence: Any, placements: Optional[dict[int, Any]] = None
) -> RuntimeBindingAttestation:
    """What unpickling an attestation does (``_new_attestation`` then ``__setstate__((placement,
    evidence))``): the full validated-state routine (spec §9.2, §13) on a new instance.

    The common case (exact classes, a known participant) runs that routine in one C call:
    ``_native.attest_restored`` (``attest_binding`` storing the evidence object itself, not an
    equal copy) on the evidence itself (it holds exactly the field values of
    ``evidence.to_binding()``, read by name) performs every check of
    ``validate_runtime_binding(placement, evidence.to_binding())`` and of the manifest
    constructor's normalised shape (scalars, sorted placement ids, distinct runtime ids,
    exact runtime fragment classes, no owner), and builds the same state. Anything it does not
    decide (``None``) takes the Python routine, which raises the first failure's message.

    ``placements`` (``id(placement)`` -> its values read for the C call, or ``False``) lets the
    attestations of one restore read each placement once; the caller keeps every placement
    alive meanwhile."""
    if type(placement) is _PLACEMENT and type(evidence) is _EVIDENCE:
        values = None if placements is None else placements.get(id(placement))
        if values is None:
            values = _placement_values(placement)
            if placements is not None:
                placements[id(placement)] = values
        participant_id = evidence.__dict__.get("participant_id")
        if values is not False and type(participant_id) is str:
            fused = None
            try:
                part = values[0].get(participant_id)
                if part is not None:
                    fused = _attest_restored(
                        RuntimeBindingAttestation,
                        _EVIDENCE,
                        _RUNTIME_FRAGMENT,
                        _PLACEMENT_FRAGMENT,
                        _TENSOR,
                        placement,
                        evidence,
                        part.fragments,
                        part.tensors,
                        values[1],
                        values[2],
                        values[3],
                        values[4],
                    )
            except Exception:  # a malformed placement: the Python routine reports the first failure
                fused = None
            if fused is not None:
                # (it holds the unpickled evidence object itself: an exact _EVIDENCE)
                return fused  # type: ignore[no-any-return]
    # Default-pickled placement-graph objects and evidence (spec §13) never ran their own
    # checks: the shape the routine reads is checked first (fuzz finding F3).
    failure = attestable_shape_failure(placement, evidence)
    if failure is not None:
        raise ValueError(failure)
    attestation: RuntimeBindingAttestation = _new_object(RuntimeBindingAttestation)
    attestation._set_validated_state(placement, evidence)
    return attestation


def _placement_values(placement: Any) -> Any:
    """``(parts by participant id, resource_id, placement_id, digest, revision)`` of an exact
    placement for ``_native.attest_restored``, or ``False`` (the Python routine decides): the
    digest only when already known (``placement.digest`` reads this cache; computing it here
    could fail before a check the Python routine reports first), a placement whose parts cannot
    be indexed is left to the Python routine (its first failure, e.g. of the evidence, is
    reported as before)."""
    placement_state = placement.__dict__
    digest = placement_state.get("_digest_cache")
    if type(digest) is not str:
        return False
    try:
        index = placement._part_index()
    except Exception:
        return False
    return (
        index,
        placement_state.get("resource_id"),
        placement_state.get("placement_id"),
        digest,
        placement_state.get("revision"),
    )


def _restore_executors(table: Any, attestations: list[Any]) -> tuple[ExecutorTransferPlan, ...]:
    """Executors and their snapshots by field dict (their default pickling, spec §13).

    Built in C when the table has exactly the record's shape (``_native.restore_executors``
    builds the same instance dicts); otherwise ``_python_restore_executors``, its reference,
    which raises the record's message."""
    executors: Optional[tuple[ExecutorTransferPlan, ...]] = _native_restore_executors(
        table, attestations, ExecutorTransferPlan, RuntimeFragmentSnapshot, _EXECUTOR_FIELDS, _SNAPSHOT_FIELDS
    )
    if executors is None:
        executors = _python_restore_executors(table, attestations)
    return executors


def _python_restore_executors(table: Any, attestations: list[Any]) -> tuple[ExecutorTransferPlan, ...]:
    """``_restore_executors`` in Python (the C version's reference; raises for a bad table)."""
    if type(table) is not tuple:
        raise ValueError(_INVALID)
    executors = []
    executor_fields = _EXECUTOR_FIELDS[:8]
    build_snapshot = _build_snapshot
    size = _SNAPSHOT_COUNT
    position = 0
    end = len(table)
    while position < end:
        count = table[position + 9] if position + 10 <= end else None
        if type(count) is not int or count < 0 or position + 10 + size * count > end:
            raise ValueError(_INVALID)
        start = position + 10
        position = start + size * count
        snapshots = []
        for offset in range(start, position, size):
            # the 16 values stored in field order, no ``__post_init__`` (the default pickling's
            # state restore); the slice has exactly ``size`` items (bounds checked above)
            snapshots.append(build_snapshot(*table[offset : offset + size]))
        executor: ExecutorTransferPlan = _new_object(ExecutorTransferPlan)
        state = executor.__dict__
        state.update(zip(executor_fields, table[start - 10 : start - 2]))
        state["fragment_snapshots"] = tuple(snapshots)
        state["attestation"] = _pick(attestations, table[start - 2])
        executors.append(executor)
    return tuple(executors)


def _restore_bound(attestation_rows: list[Any], fragment_table: Any) -> tuple[list[Any], Any]:
    """The attestations and bound fragments of a record, one fragment at a time (the reference;
    raises the first failure): attestations are restored at first use, in the order the
    object-by-object format met them, then those only executors use."""
    attestations: list[Any] = [None] * len(attestation_rows)
    fragments: list[Any] = []
    restore_fragment = BoundWeightFragment._restore
    for placement, binding, instance_id, lease_id, generation, attestation_index in _groups(fragment_table, 6):
        attestation = None
        if attestation_index is not None:
            if type(attestation_index) is not int or not 0 <= attestation_index < len(attestations):
                raise ValueError(_INVALID)
            attestation = attestations[attestation_index]
            if attestation is None:
                attestation = attestations[attestation_index] = _restore_attestation(
                    *attestation_rows[attestation_index]
                )
        fragments.append(restore_fragment(placement, binding, instance_id, lease_id, generation, attestation))
    for index, attestation in enumerate(attestations):
        if attestation is None:  # used by executors only
            attestations[index] = _restore_attestation(*attestation_rows[index])
    return attestations, fragments


def _restore_bound_fast(attestation_rows: list[Any], fragment_table: Any) -> Optional[tuple[list[Any], Any]]:
    """``_restore_bound`` when nothing fails: the attestations in the same first-use order,
    then every bound fragment's constructor checks decided in one C call
    (``_native.restore_fragments``). None when any attestation fails or the C call does not
    decide: the caller then runs ``_restore_bound`` from the start, which raises the first
    failure in the reference order."""
    if type(fragment_table) is not tuple or len(fragment_table) % 6:
        return None
    count = len(attestation_rows)
    attestations: list[Any] = [None] * count
    placements: dict[int, Any] = {}
    try:
        for attestation_index in fragment_table[5::6]:
            if attestation_index is None:
                continue
            if type(attestation_index) is not int or not 0 <= attestation_index < count:
                return None
            if attestations[attestation_index] is None:
                placement, evidence = attestation_rows[attestation_index]
                attestations[attestation_index] = _restore_attestation(placement, evidence, placements)
        for index in range(count):
            if attestations[index] is None:
                placement, evidence = attestation_rows[index]
                attestations[index] = _restore_attestation(placement, evidence, placements)
    except Exception:  # the reference order decides which failure is reported
        return None
    fragments = _native_restore_fragments(
        fragment_table,
        attestations,
        BoundWeightFragment,
        _PLACEMENT_FRAGMENT,
        _RUNTIME_FRAGMENT,
        RuntimeBindingAttestation,
        _EVIDENCE,
    )
    if fragments is None:
        return None
    return attestations, fragments


def _python_restore_regions(operation_table: Any, fragments: Any) -> tuple[Any, ...]:
    """The regions of a record's operation table by field dict (``_native.restore_regions``'s
    reference; raises for a bad table)."""
    operations = []
    build_region = _build_region
    count = len(fragments)
    for row in _groups(operation_table, _REGION_COUNT):
        source_index = row[1]
        target_index = row[2]
        if (
            type(source_index) is not int
            or type(target_index) is not int
            or not 0 <= source_index < count
            or not 0 <= target_index < count
        ):
            raise ValueError(_INVALID)
        region: TransferRegion[Any, Any] = build_region(
            row[0],
            fragments[source_index],
            fragments[target_index],
            row[3],
            row[4],
            row[5],
            row[6],
            row[7],
            row[8],
            row[9],
            row[10],
        )
        operations.append(region)
    return tuple(operations)


def _restore_packed_transfer_plan(codes: Any, values: Any) -> TransferPlan:
    """Rebuild a plan from its packed record: ``_native.graph_unpack`` rebuilds the record
    (placement graph objects by field dict, as their default pickling does; runtime fragments
    through their constructor's checks), then ``_restore_transfer_plan`` (every validating path
    of the record). A stream that is not exactly one packed tuple raises the record's message.

    ``codes`` is a bytearray in the payloads ``reduce_ex_transfer_plan`` writes (bytes in older
    ones): its content is copied once and the bytearray emptied, so the opcode string (about 260
    bytes an operation) is freed once decoded, before the revalidation, although pickle's memo
    holds the bytearray object until ``pickle.loads`` returns.

    ``graph_unpack`` builds the record's objects through per-call-site layout memos too: the
    whole restore is proved (``memo_proved_once``: the codes are emptied as they are read; AUDIT41)."""
    return memo_proved_once(lambda: _restore_packed(codes, values), _post_init_again)


def _restore_packed(codes: Any, values: Any) -> TransferPlan:
    # Many new objects, all kept: no automatic collection rescans them meanwhile.
    with collector_paused():
        if type(codes) is bytearray:
            data: Any = bytes(codes)
            codes.clear()
        else:
            data = codes
        del codes
        record = _graph_unpack(data, values, _GRAPH_REGISTRY)
        del data
        if type(record) is not tuple:
            raise ValueError(_INVALID)
        _require_typed_placements(record)
        # Handed over in a list the restore empties: the record's flat tables (about 280 bytes
        # an operation) are freed before the revalidation, the restore's peak.
        items = _Record(record)
        del record
        return _restore_proved(items)  # (proved by the caller: memo_proved_once)


def _require_typed_placements(record: tuple[Any, ...]) -> None:
    """The record's placements (the target's, each attestation's) and the topologies, parts and
    descriptors below them: built by field dict in the packed record (``graph_unpack``), without
    the type checks their ``__setstate__`` makes in the other formats, or restored by default
    pickling in the compact record, where a forged stream can skip an object's ``__setstate__``
    (no ``BUILD``). The same checks over the whole graph (``placement.restored_graph_failure``),
    else the field rule's ``ValueError`` (fuzz finding F5). A record of another shape is left to
    ``_restore_transfer_plan``."""
    if len(record) != _RECORD_LENGTH:
        return
    placements = [record[4]]
    table = record[6]
    if type(table) is tuple:
        placements.extend(table[0::2])
    distinct = list({id(placement): placement for placement in placements}.values())
    if _native.graph_typed(distinct, _GRAPH_CLASSES):
        return  # (the common case, one C walk: typed_graphs' condition, exact classes only)
    if all(type(placement) is _PLACEMENT for placement in distinct) and typed_graphs(
        [placement.__dict__ for placement in distinct]
    ):
        return  # (the common case, all placements in one pass)
    for placement in distinct:
        failure = restored_graph_failure(placement)
        if failure is not None:
            raise ValueError(failure)


# graph_typed's classes, in its order (placement, topology, participant, rank, part,
# descriptor, fragment, the three axes)
_GRAPH_CLASSES = (
    WeightPlacementManifest,
    ParallelTopology,
    TopologyParticipant,
    ParallelRank,
    WeightPlacementPart,
    TensorDescriptor,
    PlacementFragment,
    SplitAxis,
    ReplicatedAxis,
    OwnershipAxis,
)


class _Record(list):  # type: ignore[type-arg]
    """The items of a compact record, passed as ``_restore_transfer_plan``'s only argument by
    ``_restore_packed_transfer_plan``, which holds no other reference to them: the restore
    takes them out (the list is left empty) and drops each table once read. It is read and
    checked exactly as the same items passed one by one (a payload naming this class gains
    nothing)."""

    __slots__ = ()


def _restore_transfer_plan(*record: Any) -> TransferPlan:
    """Rebuild a plan from its compact record through the validating paths (module docstring).
    The collector is paused throughout: no gc callback or finalizer runs between the region
    scan whose facts are carried and the revalidation that takes them (see below)."""
    # The restore's C steps check classes' layouts through per-call-site memos, trusted only
    # while no field is shadowed (AUDIT41, tests/test_audit4141_rules_cold_memos.py). A record in
    # a _Record is emptied as it is read (it cannot be read again): its plan is re-decided
    # instead (memo_proved_once).
    if len(record) == 1 and type(record[0]) is _Record:
        return memo_proved_once(lambda: _restore_proved(*record), _post_init_again)
    # The record's placements were restored by default pickling: each object's __setstate__
    # checked its fields, but a forged stream can leave one without its state (NEWOBJ, no
    # BUILD). The packed record's check of the whole graph refuses that too.
    _require_typed_placements(record)
    return memo_proved(lambda: _restore_proved(*record))


def _restore_proved(*record: Any) -> TransferPlan:
    """``_restore_transfer_plan`` under its caller's memo proof."""
    with collector_paused():
        watch = start_watch(_record_operations(record) >= _WATCH_MIN_ENTRIES)  # (see below)
        try:
            return _restore_record(record, watch)
        finally:
            stop_watch(watch)


def _post_init_again(plan: TransferPlan) -> None:
    plan.__post_init__()


# From this many operation-table entries a restore is watched (exactness.start_watch) rather than
# its record's values walked (exactness.inert_inputs): see binding._sealed.
_WATCH_MIN_ENTRIES = 4096


def _record_operations(record: tuple[Any, ...]) -> int:
    """The length of the record's operation table when it is an exact list or tuple, else 0
    (reads exact objects only)."""
    items = record[0] if len(record) == 1 and type(record[0]) is _Record else record
    table = items[8] if len(items) == _RECORD_LENGTH else None
    return len(table) if type(table) in (list, tuple) else 0


def _restore_record(record: tuple[Any, ...], watch: Any = None) -> TransferPlan:
    hooks_clear = untouched(watch)
    if len(record) == 1 and type(record[0]) is _Record:
        items: Any = record[0][:]
        record[0].clear()
    else:
        items = record
    del record
    # The record's values hold nothing but plain values and exact package objects (else the
    # carried facts below are not taken: tests/test_audit23_sealed_gate.py); a watched restore
    # sees any other code that runs instead.
    values_inert = hooks_clear and (watch is not None or inert_inputs(items))
    if len(items) != _RECORD_LENGTH or type(items[0]) is not int or items[0] != _FORMAT:
        raise ValueError(_INVALID)
    (
        _,
        resource_id,
        revision,
        weight_generation,
        target_placement,
        planning_limits,
        attestation_table,
        fragment_table,
        operation_table,
        source_table,
        target_table,
    ) = items
    del items
    attestation_rows = list(_groups(attestation_table, 2))
    del attestation_table
    restored = _restore_bound_fast(attestation_rows, fragment_table)
    if restored is None:
        attestations, fragments = _restore_bound(attestation_rows, fragment_table)
    else:
        attestations, fragments = restored
    del restored, fragment_table
    # The regions, and revalidate_scan's facts derived from the values stored in them
    # (csrc/restore_scan.c; None: the plain scan decides).
    carried: Any = None
    restored_regions = _native_restore_regions_carried(
        operation_table, tuple(fragments), TransferRegion, _REGION_FIELDS, BoundWeightFragment
    )
    if restored_regions is not None:
        operations, carried = restored_regions
    else:  # not the record's shape: the reference raises its message
        operations = _python_restore_regions(operation_table, fragments)
    del restored_regions, operation_table, fragments
    _require_typed_limits(planning_limits)  # read before the rules (F2)
    source_executors = _restore_executors(source_table, attestations)
    del source_table
    target_executors = _restore_executors(target_table, attestations)
    del target_table, attestations, attestation_rows
    plan: TransferPlan = _new_object(TransferPlan)
    # ``TransferPlan.__setstate__`` on this new instance: write the fields, then ``__post_init__``
    # (the whole plan is revalidated; ``source_stored_fragment_snapshots`` is recomputed).
    plan.__dict__.update(
        {
            "resource_id": resource_id,
            "revision": revision,
            "weight_generation": weight_generation,
            "target_placement": target_placement,
            "operations": operations,
            "planning_limits": planning_limits,
            "source_executors": source_executors,
            "target_executors": target_executors,
            "source_manifest": None,
            "source_manifest_identity": None,
        }
    )
    del source_executors, target_executors
    # The carried facts only when no code but this package's ran since the scan: limits and
    # placement (deeply: exactness.exact_placement) of the exact classes (their reads run no
    # user code) and no trace or profile hook (else, as for bind's carried facts, that code could have changed the regions since:
    # tests/test_audit22_restore_carried.py).
    if not (
        values_inert
        and untouched(watch)
        and type(planning_limits) is PlanningLimits
        and exact_placement(target_placement)
    ):
        carried = None
    if carried is None:
        plan.__post_init__()
    else:
        # ``__post_init__`` (``_revalidate(check_physical_ranges=True)``: every rule, in one view
        # scope) with the scan's facts about these regions: this restore's own objects, built
        # from the payload's values just above and reachable by no other code yet; the budgets
        # and every fragment's binding and nbytes are read again (revalidate_scan_carried).
        try:
            with _ViewScope():
                plan._revalidate_scoped(True, carried)
        except Exception:
            if untouched(watch):
                raise
        del carried
        if not untouched(watch):
            # other code ran while the carried facts were taken: every rule, on the objects as
            # they are now (as an unwatched restore with a hook decides)
            plan.__post_init__()
    # Out of the cyclic GC (from 1024 operations): the restored bound fragments whose
    # attestation caches none of them, and the regions holding them (see csrc/common.h).
    _native.untrack_bound_regions(operations, BoundWeightFragment)
    return plan


__all__ = ["reduce_ex_transfer_plan", "reduce_transfer_plan"]

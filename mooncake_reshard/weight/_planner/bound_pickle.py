"""Pickle format of ``TransferPlan`` (spec §13): every restore revalidates the whole plan.

``TransferPlan.__reduce__`` returns one of two private formats.

**Compact record** (the usual case): ``(_restore_transfer_plan, record)`` where ``record`` is
the flat tuple

``(1, resource_id, revision, weight_generation, target_placement, planning_limits,
attestations, fragments, operations, source_executors, target_executors)``

- ``attestations``: one ``(placement, evidence)`` pair per distinct attestation object of the
  plan (the attestation's own pickle state, spec §13), in first-use order (operation sources
  and targets, then source and target executors);
- ``fragments``: one row per distinct ``BoundWeightFragment`` object of the operations,
  ``(placement, binding, instance_id, runtime_lease_id, lease_generation, attestation)`` (the
  arguments ``BoundWeightFragment.__reduce__`` passes to the constructor, spec §13, without the
  owner), ``attestation`` being an index into ``attestations`` or ``None``;
- ``operations``: one row per operation, the eleven ``TransferRegion`` field values in field
  order with ``source`` and ``target`` replaced by indices into ``fragments``;
- ``source_executors``/``target_executors``: one row per executor, the ten
  ``ExecutorTransferPlan`` field values in field order, ``fragment_snapshots`` as a tuple of
  rows (the sixteen ``RuntimeFragmentSnapshot`` field values in field order) and
  ``attestation`` as an index into ``attestations`` or ``None``.

Every value is written as the object holds it (nothing is recomputed or trusted at dump time);
shared objects (placements, placement fragments, runtime fragments, ranks, strings) stay shared
through pickle's memo. ``init=False`` and derived state is not written:
``source_stored_fragment_snapshots`` and the operation views are recomputed on restore.

Restoring runs exactly the validating paths of the object-by-object format: each attestation
through ``RuntimeBindingAttestation.__setstate__`` (the full validated-state routine of §9.2),
each bound fragment through the ``BoundWeightFragment`` constructor's checks
(``BoundWeightFragment._restore``), regions, executors and
snapshots by field dict (their default pickling, spec §13), runtime fragments through their
constructor (their own ``__reduce__``), and the plan through ``TransferPlan.__setstate__``
(which runs ``__post_init__``: the whole plan is revalidated). A record of the wrong shape
(a hostile payload) raises "transfer plan pickle state is invalid".

**Field state** (fallback, for anything the record does not describe exactly: stored-source
plans, subclasses, list-valued fields, extra instance attributes, fragments retaining an
owner): ``(copyreg.__newobj__, (cls,), plan.__getstate__())``, restored by
``TransferPlan.__setstate__``.
"""

from __future__ import annotations

import copyreg
from dataclasses import fields
from typing import Any, Optional

from .attestation import RuntimeBindingAttestation, _new_attestation
from .bound_contracts import ExecutorTransferPlan, RuntimeFragmentSnapshot, TransferPlan
from .contracts import TransferRegion
from .fragments import BoundWeightFragment

_FORMAT = 1
_INVALID = "transfer plan pickle state is invalid"

_PLAN_FIELDS = tuple(f.name for f in fields(TransferPlan))
_PLAN_KEYS = frozenset(_PLAN_FIELDS)
_REGION_FIELDS = tuple(f.name for f in fields(TransferRegion))
_REGION_KEYS = frozenset(_REGION_FIELDS)
_FRAGMENT_FIELDS = tuple(f.name for f in fields(BoundWeightFragment))
_FRAGMENT_KEYS = frozenset(_FRAGMENT_FIELDS)
_EXECUTOR_FIELDS = tuple(f.name for f in fields(ExecutorTransferPlan))
_EXECUTOR_KEYS = frozenset(_EXECUTOR_FIELDS)
_SNAPSHOT_FIELDS = tuple(f.name for f in fields(RuntimeFragmentSnapshot))
_SNAPSHOT_KEYS = frozenset(_SNAPSHOT_FIELDS)
_SOURCE_INDEX = _REGION_FIELDS.index("source")
_TARGET_INDEX = _REGION_FIELDS.index("target")
_SNAPSHOTS_INDEX = _EXECUTOR_FIELDS.index("fragment_snapshots")
_EXECUTOR_ATTESTATION_INDEX = _EXECUTOR_FIELDS.index("attestation")
# The record has the plan's fields minus the derived/optional ones and plus the three tables.
_RECORD_LENGTH = 11
_new_object = object.__new__
# ``copyreg.__newobj__`` (what default pickling writes; not in the typeshed stubs).
_NEWOBJ: Any = getattr(copyreg, "__newobj__")


# The row layouts below rely on these field positions (checked once, at import).
if (_SOURCE_INDEX, _TARGET_INDEX) != (1, 2) or _SNAPSHOTS_INDEX != 8 or _EXECUTOR_ATTESTATION_INDEX != 9:
    raise RuntimeError("bound_pickle: unexpected TransferRegion/ExecutorTransferPlan field order")


def _values(state: dict[str, Any], names: tuple[str, ...], keys: frozenset[str]) -> Optional[tuple[Any, ...]]:
    """The field values of an instance ``__dict__`` in field order, or None when the dict holds
    anything but exactly those fields (the fallback format then carries it as it is)."""
    if tuple(state) == names:
        return tuple(state.values())
    if len(state) != len(names) or state.keys() != keys:
        return None
    return tuple([state[name] for name in names])


def _compact_record(plan: Any) -> Optional[tuple[Any, ...]]:
    """The compact record of ``plan`` (see the module docstring), or None when it does not
    describe the plan exactly."""
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
    attestations: list[tuple[Any, Any]] = []
    attestation_index: dict[int, Any] = {id(None): None}
    fragment_rows: list[tuple[Any, ...]] = []
    fragment_index: dict[int, int] = {}
    region_fields = _REGION_FIELDS
    fragment_fields = _FRAGMENT_FIELDS

    def attestation_of(attestation: Any) -> Any:
        """Index of a new attestation in the table; False when it cannot be recorded."""
        if type(attestation) is not RuntimeBindingAttestation:
            return False
        attestation_state = attestation.__dict__
        if "placement" not in attestation_state or "evidence" not in attestation_state:
            return False
        index = attestation_index[id(attestation)] = len(attestations)
        # Exactly the attestation's pickle state (spec §13: ``(placement, evidence)``).
        attestations.append((attestation_state["placement"], attestation_state["evidence"]))
        return index

    operation_rows = []
    for operation in operations:
        if type(operation) is not TransferRegion:
            return None
        region_state = operation.__dict__
        values = (
            tuple(region_state.values())
            if tuple(region_state) == region_fields
            else _values(region_state, region_fields, _REGION_KEYS)
        )
        if values is None:
            return None
        indices = []
        for fragment in (values[1], values[2]):
            index = fragment_index.get(id(fragment))
            if index is None:
                if type(fragment) is not BoundWeightFragment:
                    return None
                fragment_state = fragment.__dict__
                row = (
                    tuple(fragment_state.values())
                    if tuple(fragment_state) == fragment_fields
                    else _values(fragment_state, fragment_fields, _FRAGMENT_KEYS)
                )
                if row is None or row[5] is not None:  # an owner is never pickled: fallback
                    return None
                attestation = row[6]
                position = attestation_index.get(id(attestation), False)
                if position is False:
                    position = attestation_of(attestation)
                    if position is False:
                        return None
                index = fragment_index[id(fragment)] = len(fragment_rows)
                fragment_rows.append(row[:5] + (position,))
            indices.append(index)
        operation_rows.append((values[0], indices[0], indices[1]) + values[3:])
    executor_rows: list[tuple[tuple[Any, ...], ...]] = []
    executor_fields = _EXECUTOR_FIELDS
    snapshot_fields = _SNAPSHOT_FIELDS
    for executors in (source_executors, target_executors):
        rows = []
        for executor in executors:
            if type(executor) is not ExecutorTransferPlan:
                return None
            executor_state = executor.__dict__
            values = (
                tuple(executor_state.values())
                if tuple(executor_state) == executor_fields
                else _values(executor_state, executor_fields, _EXECUTOR_KEYS)
            )
            if values is None:
                return None
            snapshots = values[8]
            if type(snapshots) is not tuple:
                return None
            snapshot_rows = []
            for snapshot in snapshots:
                if type(snapshot) is not RuntimeFragmentSnapshot:
                    return None
                snapshot_state = snapshot.__dict__
                row = (
                    tuple(snapshot_state.values())
                    if tuple(snapshot_state) == snapshot_fields
                    else _values(snapshot_state, snapshot_fields, _SNAPSHOT_KEYS)
                )
                if row is None:
                    return None
                snapshot_rows.append(row)
            attestation = values[9]
            position = attestation_index.get(id(attestation), False)
            if position is False:
                position = attestation_of(attestation)
                if position is False:
                    return None
            rows.append(values[:8] + (tuple(snapshot_rows), position))
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


# ---------------------------------------------------------------------------------------
# Restore


def _rows(value: Any, length: int) -> tuple[Any, ...]:
    """``value`` as a tuple of tuples of ``length`` items each (else the payload is invalid)."""
    if type(value) is not tuple:
        raise ValueError(_INVALID)
    for row in value:
        if type(row) is not tuple or len(row) != length:
            raise ValueError(_INVALID)
    return value


def _pick(table: list[Any], index: Any) -> Any:
    """``table[index]`` for an index the dump wrote (``None`` stays ``None``)."""
    if index is None:
        return None
    if type(index) is not int or not 0 <= index < len(table):
        raise ValueError(_INVALID)
    return table[index]


def _restore_attestation(placement: Any, evidence: Any) -> RuntimeBindingAttestation:
    """``pickle`` of an attestation: ``_new_attestation`` then ``__setstate__``, which runs the
    full validated-state routine (spec §9.2, §13)."""
    attestation = _new_attestation(RuntimeBindingAttestation)
    attestation.__setstate__((placement, evidence))
    return attestation


def _restore_executors(rows: Any, attestations: list[Any]) -> tuple[ExecutorTransferPlan, ...]:
    """Executors and their snapshots by field dict (their default pickling, spec §13)."""
    executors = []
    executor_fields = _EXECUTOR_FIELDS
    snapshot_fields = _SNAPSHOT_FIELDS
    for row in _rows(rows, len(executor_fields)):
        snapshots = []
        for snapshot_row in _rows(row[8], len(snapshot_fields)):
            snapshot: RuntimeFragmentSnapshot = _new_object(RuntimeFragmentSnapshot)
            snapshot.__dict__.update(zip(snapshot_fields, snapshot_row))
            snapshots.append(snapshot)
        executor: ExecutorTransferPlan = _new_object(ExecutorTransferPlan)
        state = executor.__dict__
        state.update(zip(executor_fields, row[:8]))
        state["fragment_snapshots"] = tuple(snapshots)
        state["attestation"] = _pick(attestations, row[9])
        executors.append(executor)
    return tuple(executors)


def _restore_transfer_plan(*record: Any) -> TransferPlan:
    """Rebuild a plan from its compact record through the validating paths (module docstring)."""
    if len(record) != _RECORD_LENGTH or type(record[0]) is not int or record[0] != _FORMAT:
        raise ValueError(_INVALID)
    (
        _,
        resource_id,
        revision,
        weight_generation,
        target_placement,
        planning_limits,
        attestation_rows,
        fragment_rows,
        operation_rows,
        source_rows,
        target_rows,
    ) = record
    attestations: list[Any] = [None] * len(_rows(attestation_rows, 2))
    fragments: list[Any] = []
    restore_fragment = BoundWeightFragment._restore
    # Attestations are restored at first use, in the order the object-by-object format met them.
    for placement, binding, instance_id, lease_id, generation, attestation_index in _rows(fragment_rows, 6):
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
    operations = []
    count = len(fragments)
    for row in _rows(operation_rows, len(_REGION_FIELDS)):
        source_index = row[1]
        target_index = row[2]
        if (
            type(source_index) is not int
            or type(target_index) is not int
            or not 0 <= source_index < count
            or not 0 <= target_index < count
        ):
            raise ValueError(_INVALID)
        region: TransferRegion[Any, Any] = _new_object(TransferRegion)
        region.__dict__.update(
            {
                "tensor_id": row[0],
                "source": fragments[source_index],
                "target": fragments[target_index],
                "overlap_offset": row[3],
                "overlap_shape": row[4],
                "source_base_offset": row[5],
                "target_base_offset": row[6],
                "inner_bytes": row[7],
                "outer_loop_counts": row[8],
                "source_strides": row[9],
                "target_strides": row[10],
            }
        )
        operations.append(region)
    plan: TransferPlan = _new_object(TransferPlan)
    plan.__setstate__(
        {
            "resource_id": resource_id,
            "revision": revision,
            "weight_generation": weight_generation,
            "target_placement": target_placement,
            "operations": tuple(operations),
            "planning_limits": planning_limits,
            "source_executors": _restore_executors(source_rows, attestations),
            "target_executors": _restore_executors(target_rows, attestations),
            "source_manifest": None,
            "source_manifest_identity": None,
        }
    )
    return plan


__all__ = ["reduce_transfer_plan"]

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
each bound fragment through the ``BoundWeightFragment`` constructor, regions, executors and
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


def _values(state: dict[str, Any], names: tuple[str, ...], keys: frozenset[str]) -> Optional[tuple[Any, ...]]:
    """The field values of an instance ``__dict__`` in field order, or None when the dict holds
    anything but exactly those fields (the fallback format then carries it as it is)."""
    if tuple(state) == names:
        return tuple(state.values())
    if len(state) != len(names) or state.keys() != keys:
        return None
    return tuple([state[name] for name in names])


class _Encoder:
    """Builds the compact record of one plan; ``None`` from any method means "use the
    fallback format"."""

    __slots__ = ("attestations", "attestation_index", "fragments", "fragment_index")

    def __init__(self) -> None:
        self.attestations: list[tuple[Any, Any]] = []
        self.attestation_index: dict[int, int] = {}
        self.fragments: list[tuple[Any, ...]] = []
        self.fragment_index: dict[int, int] = {}

    def attestation(self, attestation: Any) -> Any:
        """Index of ``attestation`` in the table (None stays None); False when not encodable."""
        if attestation is None:
            return None
        index = self.attestation_index.get(id(attestation))
        if index is not None:
            return index
        if type(attestation) is not RuntimeBindingAttestation:
            return False
        state = attestation.__dict__
        if "placement" not in state or "evidence" not in state:
            return False
        index = self.attestation_index[id(attestation)] = len(self.attestations)
        # Exactly the attestation's pickle state (spec §13: ``(placement, evidence)``).
        self.attestations.append((state["placement"], state["evidence"]))
        return index

    def fragment(self, fragment: Any) -> Optional[int]:
        index = self.fragment_index.get(id(fragment))
        if index is not None:
            return index
        if type(fragment) is not BoundWeightFragment:
            return None
        values = _values(fragment.__dict__, _FRAGMENT_FIELDS, _FRAGMENT_KEYS)
        if values is None:
            return None
        placement, binding, instance_id, lease_id, generation, owner, attestation = values
        if owner is not None:
            return None
        attestation_index = self.attestation(attestation)
        if attestation_index is False:
            return None
        index = self.fragment_index[id(fragment)] = len(self.fragments)
        self.fragments.append((placement, binding, instance_id, lease_id, generation, attestation_index))
        return index

    def operation(self, operation: Any) -> Optional[tuple[Any, ...]]:
        if type(operation) is not TransferRegion:
            return None
        values = _values(operation.__dict__, _REGION_FIELDS, _REGION_KEYS)
        if values is None:
            return None
        source = self.fragment(values[_SOURCE_INDEX])
        if source is None:
            return None
        target = self.fragment(values[_TARGET_INDEX])
        if target is None:
            return None
        row = list(values)
        row[_SOURCE_INDEX] = source
        row[_TARGET_INDEX] = target
        return tuple(row)

    def executor(self, executor: Any) -> Optional[tuple[Any, ...]]:
        if type(executor) is not ExecutorTransferPlan:
            return None
        values = _values(executor.__dict__, _EXECUTOR_FIELDS, _EXECUTOR_KEYS)
        if values is None:
            return None
        snapshots = values[_SNAPSHOTS_INDEX]
        if type(snapshots) is not tuple:
            return None
        rows = []
        for snapshot in snapshots:
            if type(snapshot) is not RuntimeFragmentSnapshot:
                return None
            row = _values(snapshot.__dict__, _SNAPSHOT_FIELDS, _SNAPSHOT_KEYS)
            if row is None:
                return None
            rows.append(row)
        attestation_index = self.attestation(values[_EXECUTOR_ATTESTATION_INDEX])
        if attestation_index is False:
            return None
        out = list(values)
        out[_SNAPSHOTS_INDEX] = tuple(rows)
        out[_EXECUTOR_ATTESTATION_INDEX] = attestation_index
        return tuple(out)


def _compact_record(plan: Any) -> Optional[tuple[Any, ...]]:
    """The compact record of ``plan`` (see the module docstring), or None."""
    if type(plan) is not TransferPlan:
        return None
    state = plan.__dict__
    keys = state.keys()
    extra = len(keys) - len(_PLAN_KEYS)
    if not (extra == 0 or (extra == 1 and "_operation_views" in state)) or not _PLAN_KEYS <= keys:
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
    encoder = _Encoder()
    operation_rows = []
    for operation in operations:
        row = encoder.operation(operation)
        if row is None:
            return None
        operation_rows.append(row)
    executor_rows: list[tuple[tuple[Any, ...], ...]] = []
    for executors in (source_executors, target_executors):
        rows = []
        for executor in executors:
            row = encoder.executor(executor)
            if row is None:
                return None
            rows.append(row)
        executor_rows.append(tuple(rows))
    return (
        _FORMAT,
        state["resource_id"],
        state["revision"],
        state["weight_generation"],
        state["target_placement"],
        state["planning_limits"],
        tuple(encoder.attestations),
        tuple(encoder.fragments),
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
        return (copyreg.__newobj__, (type(plan),), plan.__getstate__())
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


def _restore_snapshot(row: tuple[Any, ...]) -> RuntimeFragmentSnapshot:
    snapshot: RuntimeFragmentSnapshot = _new_object(RuntimeFragmentSnapshot)
    snapshot.__dict__.update(zip(_SNAPSHOT_FIELDS, row))
    return snapshot


def _restore_executors(rows: Any, attestations: list[Any]) -> tuple[ExecutorTransferPlan, ...]:
    executors = []
    for row in _rows(rows, len(_EXECUTOR_FIELDS)):
        values = list(row)
        snapshots = _rows(values[_SNAPSHOTS_INDEX], len(_SNAPSHOT_FIELDS))
        values[_SNAPSHOTS_INDEX] = tuple([_restore_snapshot(snapshot) for snapshot in snapshots])
        values[_EXECUTOR_ATTESTATION_INDEX] = _pick(attestations, values[_EXECUTOR_ATTESTATION_INDEX])
        executor: ExecutorTransferPlan = _new_object(ExecutorTransferPlan)
        executor.__dict__.update(zip(_EXECUTOR_FIELDS, values))
        executors.append(executor)
    return tuple(executors)


def _restore_transfer_plan(*record: Any) -> TransferPlan:
    """Rebuild a plan from its compact record through the validating paths (module docstring)."""
    if len(record) != _RECORD_LENGTH or record[0] != _FORMAT or type(record[0]) is not int:
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
        fragments.append(
            BoundWeightFragment(placement, binding, instance_id, lease_id, generation, None, attestation)
        )
    for index, attestation in enumerate(attestations):
        if attestation is None:  # used by executors only
            attestations[index] = _restore_attestation(*attestation_rows[index])
    operations = []
    for row in _rows(operation_rows, len(_REGION_FIELDS)):
        values = list(row)
        values[_SOURCE_INDEX] = _pick(fragments, values[_SOURCE_INDEX])
        values[_TARGET_INDEX] = _pick(fragments, values[_TARGET_INDEX])
        region: TransferRegion[Any, Any] = _new_object(TransferRegion)
        region.__dict__.update(zip(_REGION_FIELDS, values))
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

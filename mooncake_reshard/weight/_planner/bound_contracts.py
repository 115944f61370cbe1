"""Bound plan value types: ``RuntimeFragmentSnapshot``, ``ExecutorTransferPlan`` and
``TransferPlan`` (spec §9.4-§9.6, §12.4-§12.7, §13)."""

from __future__ import annotations

import dataclasses
import sys
import threading
from array import array
from dataclasses import dataclass, field, fields, is_dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Optional

from ... import _native
from ..._collector import collector_paused
from ..._layout import layout_builder, layout_dataclass, layout_state_reader, value_base
from ..._memo_proof import memo_proved
from ..._shared_keys import share_field_keys
from ...contracts.fragments import RuntimeBindingFragment
from ...contracts.ids import (
    LeaseId,
    ParticipantId,
    PlacementFragmentId,
    PlacementId,
    ResourceId,
    RevisionId,
    RuntimeFragmentId,
    RuntimeInstanceId,
    TensorId,
)
from ..part import WeightPlacementPart
from ..placement import WeightPlacementManifest, part_index_matches
from ..storage_manifest import (
    StoredFragmentSnapshot,
    StoredManifestIdentity,
    StoredWeightManifest,
    validate_weight_manifest_snapshot,
)
from ..types import (
    OwnershipAxis,
    ParallelRank,
    PlacementFragment,
    ReplicatedAxis,
    SplitAxis,
    TensorDescriptor,
    _fragment_fields_state,
)
from .attestation import RuntimeBindingAttestation, RuntimeBindingEvidence
from .region_check import recheck_regions
from .bound_validation import (
    _attestation_cache,
    _check_target_physical_ranges,
    _validate_no_in_place,
)
from .contracts import (
    ExecutableTransferOperation,
    OperationViews,
    PipelineRouteGroup,
    PlanningLimits,
    TransferRegion,
    build_operation_views,
)
from .geometry import exact_cover_failures
from .field_types import (
    PLACEMENT_FRAGMENT_FIELDS,
    RUNTIME_FRAGMENT_FIELDS,
    evidence_shape_failure,
    field_type_failure,
    placement_shape_failure,
    require_fields,
    state_type_failure,
)
from .fragments import BoundWeightFragment, _bound_fields_state

_HEX = frozenset("0123456789abcdef")
_U64_MAX = (1 << 64) - 1
_SIDES = ("source", "target")


# The field names in field order (``layout_dataclass`` checks them against the annotations).
_SNAPSHOT_LAYOUT = tuple(
    "placement_fragment_id fragment_id tensor_id global_offset local_shape address nbytes worker_id endpoint"
    " device itemsize strides_bytes storage_address storage_nbytes storage_offset_bytes lease_generation".split()
)


if TYPE_CHECKING:  # type checkers see a frozen dataclass (layout_dataclass is a dataclass transform)
    _SnapshotBase = object
else:
    _SnapshotBase = value_base("RuntimeFragmentSnapshot", _SNAPSHOT_LAYOUT)


@layout_dataclass
class RuntimeFragmentSnapshot(_SnapshotBase):
    """A flat, immutable copy of one selected runtime fragment (spec §9.4).

    Stored in a C-owned layout (``mooncake_reshard/_layout.py``): the 16 fields live in the
    instance itself, in field order (no instance ``__dict__``); C readers load them directly
    (``csrc/layout.h``). The pickle state is the dict-backed dataclass's ``{field: value}``, so
    pickles are byte-equal to and interchangeable with the dict-backed class's."""

    __slots__ = ("__weakref__",)

    placement_fragment_id: PlacementFragmentId
    fragment_id: RuntimeFragmentId
    tensor_id: TensorId
    global_offset: tuple[int, ...]
    local_shape: tuple[int, ...]
    address: int
    nbytes: int
    worker_id: str
    endpoint: str
    device: str
    itemsize: int
    strides_bytes: tuple[int, ...]
    storage_address: int
    storage_nbytes: int
    storage_offset_bytes: int
    lease_generation: int

    @classmethod
    def from_fragment(cls, bound_fragment: BoundWeightFragment) -> RuntimeFragmentSnapshot:
        """Snapshot of a bound fragment (its placement, runtime binding and lease generation)."""
        return cls.from_attested_pair(
            bound_fragment.placement, bound_fragment.binding, lease_generation=bound_fragment.lease_generation
        )

    @classmethod
    def from_attested_pair(
        cls,
        placement_fragment: PlacementFragment,
        runtime_fragment: RuntimeBindingFragment,
        *,
        lease_generation: int,
    ) -> RuntimeFragmentSnapshot:
        """Snapshot of a placement fragment and its (evidence) runtime fragment."""
        if cls is not RuntimeFragmentSnapshot:
            return cls(**_snapshot_state(placement_fragment, runtime_fragment, lease_generation))
        # The dataclass has no validation: storing the fields is exactly ``__init__``. They are
        # read in ``_snapshot_state``'s order (the field order) and stored directly in the
        # layout by the C builder.
        return _build_snapshot(
            placement_fragment.placement_fragment_id,
            runtime_fragment.fragment_id,
            placement_fragment.tensor_id,
            placement_fragment.global_offset,
            placement_fragment.local_shape,
            runtime_fragment.address,
            runtime_fragment.nbytes,
            runtime_fragment.worker_id,
            runtime_fragment.endpoint,
            runtime_fragment.device,
            runtime_fragment.itemsize,
            runtime_fragment.strides_bytes,
            runtime_fragment.storage_address,
            runtime_fragment.storage_nbytes,
            runtime_fragment.storage_offset_bytes,
            lease_generation,
        )


# Builds an exact RuntimeFragmentSnapshot from its 16 field values in field order (C, no
# ``__init__``: the dataclass has no checks to skip).
_build_snapshot = layout_builder(RuntimeFragmentSnapshot)
# ``{field: value}`` of a snapshot's set fields in field order (its pickle state), read through
# the layout's own member descriptors (a subclass cannot shadow them here).
_snapshot_fields_state = layout_state_reader(RuntimeFragmentSnapshot)
_runtime_fields_state = layout_state_reader(RuntimeBindingFragment)


def _snapshot_state(placement_fragment: Any, runtime_fragment: Any, lease_generation: int) -> dict[str, Any]:
    """The field dict (in field order) of the snapshot of an attested pair."""
    return {
        "placement_fragment_id": placement_fragment.placement_fragment_id,
        "fragment_id": runtime_fragment.fragment_id,
        "tensor_id": placement_fragment.tensor_id,
        "global_offset": placement_fragment.global_offset,
        "local_shape": placement_fragment.local_shape,
        "address": runtime_fragment.address,
        "nbytes": runtime_fragment.nbytes,
        "worker_id": runtime_fragment.worker_id,
        "endpoint": runtime_fragment.endpoint,
        "device": runtime_fragment.device,
        "itemsize": runtime_fragment.itemsize,
        "strides_bytes": runtime_fragment.strides_bytes,
        "storage_address": runtime_fragment.storage_address,
        "storage_nbytes": runtime_fragment.storage_nbytes,
        "storage_offset_bytes": runtime_fragment.storage_offset_bytes,
        "lease_generation": lease_generation,
    }


def _snapshot_matches(snapshot: Any, expected: dict[str, Any]) -> bool:
    """``snapshot == RuntimeFragmentSnapshot(**expected)`` without building the latter (dataclass
    equality: same exact class, field values equal in order)."""
    if type(snapshot) is not RuntimeFragmentSnapshot:
        return False
    # The set fields in field order (an emptied field is absent, as a missing key was).
    return _snapshot_fields_state(snapshot) == expected


def _snapshot_typed(snapshot: Any) -> bool:
    """True when ``snapshot`` is exactly a ``RuntimeFragmentSnapshot`` whose every field has its
    exact stored type (what ``_require_typed_executor`` checks before any comparison)."""
    return type(snapshot) is RuntimeFragmentSnapshot and (
        state_type_failure(_snapshot_fields_state(snapshot), _SNAPSHOT_TYPES) is None
    )


def _executor_state_typed(state: dict[str, Any]) -> bool:
    """True when the executor field dict ``state`` passes ``_require_typed_executor`` with exact
    types throughout (a lease of None, a rank subclass or an untyped snapshot: False, unsure).
    A fast path compares and looks up these values with ``==``: a str subclass or a float equal
    to the attested value would pass, which the rules reject first."""
    fragment_ids = state.get("fragment_ids")
    snapshots = state.get("fragment_snapshots")
    rank = state.get("rank")
    return (
        all(type(state.get(name)) is str for name in _EXECUTOR_IDS)
        and type(state.get("placement_digest")) is str
        and type(state.get("runtime_lease_id")) is str
        and type(fragment_ids) is tuple
        and all(type(item) is str for item in fragment_ids)
        and type(rank) is ParallelRank
        and _rank_type_failure(rank) is None
        and type(snapshots) is tuple
        and all(map(_snapshot_typed, snapshots))
        and "attestation" in state
    )


def _typed_snapshot_matches(snapshot: Any, expected: dict[str, Any]) -> bool:
    """``_snapshot_matches`` for a fast path: also False (unsure) when a field of ``snapshot`` or
    a value of ``expected`` is not exactly of its stored type. Equality alone accepts a float,
    a bool or a subclass equal to the attested value, which the rules reject ("executor plan
    has invalid runtime fragment snapshots"); with both typed, comparing runs no Python code."""
    return (
        _snapshot_typed(snapshot)
        and state_type_failure(expected, _SNAPSHOT_TYPES) is None
        and _snapshot_matches(snapshot, expected)
    )


@dataclass(frozen=True)
class ExecutorTransferPlan:
    """The runtime projection of one participant's fragments on one worker (spec §9.5)."""

    instance_id: RuntimeInstanceId
    placement_id: PlacementId
    participant_id: ParticipantId
    placement_digest: str
    runtime_lease_id: Optional[LeaseId]
    worker_id: str
    rank: ParallelRank
    fragment_ids: tuple[RuntimeFragmentId, ...]
    fragment_snapshots: tuple[RuntimeFragmentSnapshot, ...]
    attestation: Optional[RuntimeBindingAttestation] = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        fragment_ids = tuple(self.fragment_ids)
        snapshots = tuple(self.fragment_snapshots)
        object.__setattr__(self, "fragment_ids", fragment_ids)
        object.__setattr__(self, "fragment_snapshots", snapshots)
        if not self.instance_id or not self.placement_id or not self.participant_id or not self.worker_id or not fragment_ids:
            raise ValueError("executor plan identifiers must not be empty")
        digest = self.placement_digest
        if type(digest) is not str or len(digest) != 64 or not _HEX.issuperset(digest):
            raise ValueError("executor plan placement digest must be SHA-256")
        lease = self.runtime_lease_id
        if lease is not None and (type(lease) is not str or not lease):
            raise ValueError("executor plan runtime lease ID must be non-empty")
        if len(set(fragment_ids)) != len(fragment_ids):
            raise ValueError("executor plan has duplicate fragment IDs")
        for snapshot in snapshots:
            if not isinstance(snapshot, RuntimeFragmentSnapshot):
                raise ValueError("executor plan has invalid runtime fragment snapshots")
        if tuple(snapshot.fragment_id for snapshot in snapshots) != fragment_ids:
            raise ValueError("executor plan fragment snapshot IDs do not match")
        if self.attestation is not None and not isinstance(self.attestation, RuntimeBindingAttestation):
            raise ValueError("executor plan runtime attestation is invalid")


share_field_keys(ExecutorTransferPlan)  # CPython 3.10: dicts the C core fills stay key-sharing


# ---------------------------------------------------------------------------------------
# TransferPlan


def _rank_key(rank: Any) -> Any:
    """A ``ParallelRank`` as a plain tuple (cheap to hash and compare in keys); anything else
    as itself, so it never equals the key of a real rank (dataclass equality is per class)."""
    if type(rank) is ParallelRank:
        return (rank.dp, rank.tp, rank.pp, rank.ep)
    return rank


def _placement_identity(placement: Any) -> tuple[Any, Any, Any]:
    return (placement.resource_id, placement.revision, placement.weight_generation)


def _target_identity(placement: WeightPlacementManifest) -> tuple[Any, Any, Any]:
    """``_placement_identity`` of the plan's target placement (spec §9.6 step 12), which may lack
    a field (a crafted pickle, ``object.__delattr__``): then the placement shape check's message
    for it (the field rule's, as for any other removed field), not ``AttributeError``."""
    try:
        return _placement_identity(placement)
    except AttributeError:
        raise ValueError(
            placement_shape_failure(placement, declared_tensors=False) or "transfer plan target placement is invalid"
        ) from None


def _is_target_placement(attested: Any, placement: WeightPlacementManifest) -> bool:
    """``attested is placement or attested == placement`` (spec §12.7). The dataclass comparison
    reads every compared field of both placements and of the values they hold (topology,
    participants, ranks, parts): such a field of the plan's target placement removed (a crafted
    pickle, ``object.__delattr__``; the attested one was validated) makes it an invalid target
    placement, spec §9.6 step 12's message, instead of ``AttributeError``."""
    if attested is placement:
        return True
    try:
        return bool(attested == placement)
    except AttributeError:
        # (the attestation's placement edited in place and passed to ``replace``: name it, not
        # the target, when the target reads whole and it does not)
        if _compared_fields_readable(placement) and not _compared_fields_readable(attested):
            raise ValueError("runtime attestation placement is invalid") from None
        raise ValueError("transfer plan target placement is invalid") from None


def _compared_fields_readable(value: Any) -> bool:
    """True when every field the dataclass comparison reads is present on ``value`` and, through
    tuples, on every dataclass value it holds (each distinct object once); only used after a
    comparison raised ``AttributeError``, to say which side lost a field."""
    seen: set[int] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if type(item) is tuple:
            stack.extend(item)
        elif is_dataclass(item) and not isinstance(item, type):
            for entry in fields(item):
                if entry.compare:
                    try:
                        stack.append(getattr(item, entry.name))
                    except AttributeError:
                        return False
    return True


def _attested_snapshots(attestation: RuntimeBindingAttestation, worker_id: str) -> tuple[RuntimeFragmentSnapshot, ...]:
    """All attested snapshots on ``worker_id`` sorted by runtime fragment id (cached)."""

    def build() -> dict[str, tuple[RuntimeFragmentSnapshot, ...]]:
        generation = attestation.evidence.generation
        per_worker: dict[str, list[RuntimeFragmentSnapshot]] = {}
        placement_by_id = attestation._placement_by_id
        for runtime_fragment in attestation.evidence.fragments:
            placement_fragment = placement_by_id.get(runtime_fragment.placement_fragment_id)
            if placement_fragment is None:
                continue
            per_worker.setdefault(runtime_fragment.worker_id, []).append(
                RuntimeFragmentSnapshot.from_attested_pair(
                    placement_fragment, runtime_fragment, lease_generation=generation
                )
            )
        return {
            worker: tuple(sorted(snapshots, key=lambda s: s.fragment_id)) for worker, snapshots in per_worker.items()
        }

    table: dict[str, tuple[RuntimeFragmentSnapshot, ...]] = _attestation_cache(attestation, "snapshots_by_worker", build)
    return table.get(worker_id, ())


class _AttestedView:
    """Everything the plan checks derive from one attestation, computed once per attestation
    and revalidation, and kept on the attestation only as an exact cache entry (reused while
    every object it was derived from is unchanged: see ``_VIEW_KEY``): expected snapshot field
    dicts instead of snapshot objects.

    ``objects_by_worker`` is None except inside the revalidation of a plan that binding has
    just built (``_ViewScope(built_now=True)``): its attestations were all created by that same
    bind call, so the snapshot objects binding derived from them in that call (``_derived_cache``)
    are the attested ones and are compared by identity (the cheap index now, the expected field
    dicts on first use). Anywhere else such objects could have been edited in place since, so
    every snapshot is compared with the expected field dicts derived from the current values."""

    __slots__ = ("placement", "evidence", "key_base", "part_rank", "generation", "attested_pfids",
                 "ids_by_worker", "evidence_ids_by_worker", "objects_by_worker", "_objects_by_pfid",
                 "_rows", "_placement_dict")

    def object_by_pfid(self) -> dict[str, RuntimeFragmentSnapshot]:
        """The attested snapshot objects by placement fragment id (empty when none was built)."""
        table = self._objects_by_pfid
        if table is None:
            table = {}
            for snapshots in (self.objects_by_worker or {}).values():
                for snapshot in snapshots:
                    table[snapshot.placement_fragment_id] = snapshot
            self._objects_by_pfid = table
        return table

    def rows(self) -> tuple[dict[str, dict[str, Any]], dict[str, tuple[tuple[str, dict[str, Any]], ...]]]:
        """``(expected_by_pfid, rows_by_worker)`` (see ``_python_attested_rows``), built on first use."""
        rows = self._rows
        if rows is None:
            placement_dict = self._placement_dict
            evidence = self.evidence
            built = None
            if type(evidence) is RuntimeBindingEvidence and evidence.__dict__.get("generation") is self.generation:
                # The kernel reads ``evidence`` and ``_placement_dict`` from an attestation: a
                # carrier holding exactly the two objects this view was built from.
                carrier: RuntimeBindingAttestation = object.__new__(RuntimeBindingAttestation)
                carrier.__dict__["evidence"] = evidence
                carrier.__dict__["_placement_dict"] = placement_dict
                built = _native.attested_rows(
                    RuntimeBindingAttestation, RuntimeBindingEvidence, RuntimeBindingFragment, carrier
                )
            if built is None:
                built = _python_attested_rows({"_placement_dict": placement_dict}, evidence, self.generation)
            rows = self._rows = (built[0], built[1])
        return rows

    @property
    def expected_by_pfid(self) -> dict[str, dict[str, Any]]:
        """The expected snapshot field dict of every attested placement fragment id."""
        return self.rows()[0]

    @property
    def rows_by_worker(self) -> dict[str, tuple[tuple[str, dict[str, Any]], ...]]:
        """Per worker the ``(runtime id, expected field dict)`` pairs sorted by runtime id."""
        return self.rows()[1]

    def __init__(self, attestation: RuntimeBindingAttestation, objects: Any = None) -> None:
        state = attestation.__dict__
        evidence = self.evidence = state["evidence"]
        placement = self.placement = state["placement"]
        participant_id = evidence.participant_id
        self.key_base = (
            evidence.instance_id,
            placement.placement_id,
            participant_id,
            placement.digest,
            evidence.lease_id,
        )
        part = placement._part_index().get(participant_id)
        self.part_rank = None if part is None else part.rank
        generation = self.generation = evidence.generation
        placement_dict = self._placement_dict = state["_placement_dict"]
        # ``objects``: binding's snapshot objects of this very call (see the class docstring).
        self.objects_by_worker = objects
        self._objects_by_pfid: Optional[dict[str, RuntimeFragmentSnapshot]] = None
        if objects is not None:
            # The checks compare with the snapshot objects: the cheap index now, the expected
            # field dicts on first use. ``_python_attested_index`` is the kernel's reference.
            index = _native.attested_index(
                RuntimeBindingAttestation, RuntimeBindingEvidence, RuntimeBindingFragment, attestation
            )
            if index is None:
                index = _python_attested_index(placement_dict, evidence)
            pfids, self.ids_by_worker, self.evidence_ids_by_worker, _complete = index
            self.attested_pfids = _compact_pfids(pfids)
            self._rows = None
            return
        # The rows in C when it decides them (views of fresh attestations, e.g. after unpickling);
        # ``_python_attested_rows`` is its reference and the fallback.
        rows = _native.attested_rows(
            RuntimeBindingAttestation, RuntimeBindingEvidence, RuntimeBindingFragment, attestation
        )
        if rows is None:
            rows = _python_attested_rows(state, evidence, generation)
        expected_by_pfid, rows_by_worker, ids_by_worker, complete = rows
        self._rows = (expected_by_pfid, rows_by_worker)
        self.attested_pfids = expected_by_pfid
        self.ids_by_worker = ids_by_worker
        # Runtime ids are distinct within a binding, so when every evidence fragment has its
        # placement entry the sorted evidence ids per worker are exactly ``ids_by_worker``.
        if complete:
            self.evidence_ids_by_worker = ids_by_worker
        else:
            self.evidence_ids_by_worker = _python_attested_index(placement_dict, evidence)[2]


def _drop_object_tables(attested: dict[int, Any]) -> None:
    """The side checks' by-pfid tables of binding's snapshot objects (``object_by_pfid``, a cache
    the method rebuilds when asked again; ~50 B per attested fragment) dropped from the views of
    ``attested`` (the fast path's own dict) that were given those objects: views of this very
    revalidation (``_attested_view``), read by nothing else once a side is checked."""
    for entry in attested.values():
        view = entry[2] if type(entry) is tuple and len(entry) == 3 else None
        if type(view) is _AttestedView and view.objects_by_worker is not None:
            view._objects_by_pfid = None


def _pfid_order(text: str) -> tuple[int, str]:
    return (hash(text), text)


def _compact_pfids(pfids: Any) -> Any:
    """A view's ``attested_pfids`` (read only by ``revalidate_side``: membership) in the form
    the C view takes when binding's snapshot objects are given: the distinct ids as a tuple in
    ``(hash, text)`` order, which the C side searches by hash (8 bytes per id where the set costs
    ~50, alive through bind's peak). The set itself when an id is not an exact str."""
    if type(pfids) is not set or any(type(pfid) is not str for pfid in pfids):
        return pfids
    return tuple(sorted(pfids, key=_pfid_order))


def _python_attested_index(placement_dict: Any, evidence: Any) -> tuple[Any, Any, Any, bool]:
    """``(attested_pfids, ids_by_worker, evidence_ids_by_worker, complete)`` of an attestation
    whose ``_placement_dict`` is ``placement_dict``: the placement fragment ids of the evidence
    fragments with a placement entry, per worker their runtime ids sorted, per worker the sorted
    runtime ids of all its evidence fragments (the same dict when ``complete``: every evidence
    fragment has its entry). The reference of ``_native.attested_index`` and its fallback."""
    attested_pfids: set[str] = set()
    attested: dict[str, list[str]] = {}
    everything: dict[str, list[str]] = {}
    complete = True
    for runtime_fragment in evidence.fragments:
        pfid = runtime_fragment.placement_fragment_id
        worker_id = runtime_fragment.worker_id
        fragment_id = runtime_fragment.fragment_id
        if placement_dict.get(pfid) is None:
            complete = False
        else:
            attested_pfids.add(pfid)
            attested.setdefault(worker_id, []).append(fragment_id)
        everything.setdefault(worker_id, []).append(fragment_id)
    ids_by_worker = {worker: tuple(sorted(ids)) for worker, ids in attested.items()}
    if complete:
        return attested_pfids, ids_by_worker, ids_by_worker, True
    return attested_pfids, ids_by_worker, {worker: tuple(sorted(ids)) for worker, ids in everything.items()}, False


def _python_attested_rows(state: dict[str, Any], evidence: Any, generation: Any) -> tuple[Any, Any, Any, bool]:
    """``(expected_by_pfid, rows_by_worker, ids_by_worker, complete)`` of an attestation (its
    instance dict ``state``): the expected snapshot field dict of every evidence fragment with a
    placement entry, per worker the ``(runtime id, expected)`` pairs sorted by runtime id and
    their ids; ``complete`` is False when some evidence fragment has no placement entry. The
    reference of ``_native.attested_rows`` and its fallback."""
    placement_by_id = state["_placement_dict"]
    expected_by_pfid: dict[str, dict[str, Any]] = {}
    rows: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    complete = True
    for runtime_fragment in evidence.fragments:
        pfid = runtime_fragment.placement_fragment_id
        placement_fragment = placement_by_id.get(pfid)
        if placement_fragment is None:
            complete = False
            continue
        worker_id = runtime_fragment.worker_id
        fragment_id = runtime_fragment.fragment_id
        # ``_snapshot_state(placement_fragment, runtime_fragment, generation)``, inline.
        expected = {
            "placement_fragment_id": placement_fragment.placement_fragment_id,
            "fragment_id": fragment_id,
            "tensor_id": placement_fragment.tensor_id,
            "global_offset": placement_fragment.global_offset,
            "local_shape": placement_fragment.local_shape,
            "address": runtime_fragment.address,
            "nbytes": runtime_fragment.nbytes,
            "worker_id": worker_id,
            "endpoint": runtime_fragment.endpoint,
            "device": runtime_fragment.device,
            "itemsize": runtime_fragment.itemsize,
            "strides_bytes": runtime_fragment.strides_bytes,
            "storage_address": runtime_fragment.storage_address,
            "storage_nbytes": runtime_fragment.storage_nbytes,
            "storage_offset_bytes": runtime_fragment.storage_offset_bytes,
            "lease_generation": generation,
        }
        expected_by_pfid[pfid] = expected
        bucket = rows.get(worker_id)
        if bucket is None:
            rows[worker_id] = [(fragment_id, expected)]
        else:
            bucket.append((fragment_id, expected))
    rows_by_worker: dict[str, tuple[tuple[str, dict[str, Any]], ...]] = {}
    ids_by_worker: dict[str, tuple[str, ...]] = {}
    for worker_id, items in rows.items():
        if len(items) > 1:
            items.sort(key=_first)
            rows_by_worker[worker_id] = tuple(items)
            ids_by_worker[worker_id] = tuple([item[0] for item in items])
        else:
            rows_by_worker[worker_id] = (items[0],)
            ids_by_worker[worker_id] = (items[0][0],)
    return expected_by_pfid, rows_by_worker, ids_by_worker, complete


def _first(item: tuple[str, Any]) -> str:
    return item[0]


class _ViewState(threading.local):
    """Per-thread state of ``_ViewScope``. Per thread because revalidations run concurrently
    from several threads: with one process-wide save/restore, two threads entering and leaving
    interleaved (A enters, B enters, A leaves, B leaves) leave B's saved scope installed for
    good, and every later call of every thread would then reuse views of old revalidations."""

    # The views built during this thread's current revalidation: id(attestation) ->
    # (attestation, view). None outside a revalidation. A view is kept on an attestation only
    # with the record of everything it was derived from (``_VIEW_KEY``): its nested values
    # (evidence fragments, placement fragments) can be edited in place between two calls, and
    # a view kept without that exact check would then change an outcome (the reference derives
    # everything from the current values on every call).
    scope: Optional[dict[int, tuple[Any, _AttestedView]]] = None
    # True inside the revalidation of a plan binding has just built (see ``_AttestedView``).
    built_now: bool = False
    # Values this revalidation releases from its inputs, held until it ends: the ``_VIEW_KEY``
    # values it replaces and the placements' ``_digest_ahead`` (popped at the first ``digest``
    # read, which a view build makes). Released there, a value held only there would run its
    # weakref callbacks (foreign code, C code alone unseen by any watch) between the passes
    # (tests/test_sound8_release_points.py).
    held: Optional[list[Any]] = None
    # The snapshots ``_view_deps`` recorded in this revalidation for a placement and its parts
    # dict: id(object) -> (object, snapshot tuple). The views of attestations sharing a placement
    # then record the very same tuples while the object is unchanged, and revalidate_fragments
    # walks such a pair once per call (rf_proved). None outside a revalidation.
    snapshots: Optional[dict[int, tuple[Any, tuple[Any, ...]]]] = None

    def __init__(self) -> None:
        # Run in each thread at its first use: every field is then in the thread's own dict, so
        # ``_ViewScope`` reads and writes that dict (``__dict__``: one thread-local lookup for
        # the four fields, each of which is an attribute read or write of its own otherwise).
        self.scope = None
        self.built_now = False
        self.held = None
        self.snapshots = None


_VIEW_STATE = _ViewState()


# ``with _ViewScope():`` one revalidation; every attestation's view is built once in it.
# ``_ViewScope(built_now=True)`` only for the plan ``bind_logical_transfer_plan`` has just built
# from attestations it created in the same call. Entering saves this thread's four
# ``_VIEW_STATE`` fields (its ``__dict__``) and installs a fresh scope ({}, built_now, [], {});
# leaving puts them back, ``held`` last (the replaced values are released outside the scope).
# In C (csrc/view_scope.c): every replace, bind and restore enters one.
_native.view_scope_state(_VIEW_STATE)
_ViewScope = _native.ViewScope


# The exact view cache: inside a revalidation scope (and without binding's snapshot objects) an
# attestation of the exact class keeps ``(view, evidence, placement, placement_dict, deps)`` under
# ``_attested_view`` (dropped by the attestation's ``_set_validated_state``; never pickled or
# copied: its state is ``(placement, evidence)``), from its second view on (after the first
# only ``()``: recording costs more than a build, and most attestations, e.g. unpickled ones,
# are revalidated once). ``deps`` records, when the view was built, every
# object the view was derived from with the very key and value objects of its instance dict (see
# ``_view_deps``); the view is reused only when ``_native.deps_unchanged(deps)`` finds each of them
# unchanged, pointer for pointer (the recorded values are held, so no address is reused), and the
# attestation still holds the same evidence, placement and placement dict. Any in-place edit of a
# recorded object (even with an equal but new value object) rebuilds the view.
_VIEW_KEY = "_attested_view"
_ATOMS: frozenset[type] = frozenset({str, int, float, bool, type(None), bytes})
# The classes whose instances are recorded (and whose values are followed): dataclasses with an
# instance dict and no computed attribute the view reads.
_RECORDED: frozenset[type] = frozenset({RuntimeBindingEvidence, RuntimeBindingFragment, PlacementFragment, ParallelRank})


def _record(obj: Any, deps: list[Any], seen: set[int], follow: bool) -> bool:
    """Appends ``obj`` (an exact dict, an object with an exact instance dict, or an exact
    ``PlacementFragment``: its set fields in field order) and the flat ``(key, value, ...)``
    tuple of its dict to ``deps``; with ``follow``, every value too (see
    ``_record_value``). False when something reached cannot be recorded (no cache then)."""
    if id(obj) in seen:
        return True
    seen.add(id(obj))
    if type(obj) is dict:
        state = obj
    elif type(obj) is RuntimeBindingFragment:  # its C-owned layout's set fields (no __dict__)
        state = _runtime_fields_state(obj)
    elif type(obj) is PlacementFragment:  # its set fields (C layout, no __dict__)
        state = _fragment_fields_state(obj)
    else:
        state = getattr(obj, "__dict__", None)
    if type(state) is not dict:
        return False
    flat: list[Any] = []
    for key, value in state.items():
        flat.append(key)
        flat.append(value)
    deps.append(obj)
    deps.append(tuple(flat))
    if follow:
        for value in flat[1::2]:
            if not _record_value(value, deps, seen):
                return False
    return True


def _record_shared(obj: Any, deps: list[Any], seen: set[int]) -> bool:
    """``_record(obj, deps, seen, False)`` that records, while ``obj`` is unchanged since
    (``deps_unchanged``), the snapshot tuple an earlier view of this revalidation recorded for it
    (``_ViewState.snapshots``), and keeps the one it records for the next."""
    shared = _VIEW_STATE.snapshots
    if shared is not None and id(obj) not in seen:
        kept = shared.get(id(obj))
        if kept is not None and kept[0] is obj and _native.deps_unchanged(kept):
            seen.add(id(obj))
            deps.append(obj)
            deps.append(kept[1])
            return True
    if not _record(obj, deps, seen, False):
        return False
    if shared is not None and len(deps) >= 2 and deps[-2] is obj:
        shared[id(obj)] = (obj, deps[-1])
    return True


def _record_value(value: Any, deps: list[Any], seen: set[int]) -> bool:
    """Atoms (str, int, ...) need nothing, tuples their items, instances of ``_RECORDED`` are
    recorded with their values; anything else cannot be recorded."""
    kind = type(value)
    if kind in _ATOMS:
        return True
    if kind is tuple:
        for item in value:
            if not _record_value(item, deps, seen):
                return False
        return True
    if kind in _RECORDED:
        return _record(value, deps, seen, True)
    return False


def _view_deps(attestation: RuntimeBindingAttestation) -> Optional[tuple[Any, ...]]:
    """The ``deps`` of a view just built from ``attestation`` (see ``_VIEW_KEY``), or None when
    something it was derived from cannot be recorded. Recorded: the placement (its fields and
    derived caches, e.g. the digest), its part index dict, the part of the evidence's participant
    and its rank, the attestation's placement dict with every placement fragment in it (and their
    ranks and nested values), the evidence with every evidence fragment (and nested values)."""
    state = attestation.__dict__
    placement = state.get("placement")
    evidence = state.get("evidence")
    placement_dict = state.get("_placement_dict")
    if type(placement) is not WeightPlacementManifest or type(evidence) is not RuntimeBindingEvidence:
        return None
    if type(placement_dict) is not dict:
        return None
    deps: list[Any] = []
    seen: set[int] = set()
    # (first, shared: the attestations of one side share them; see _record_shared)
    if not _record_shared(placement, deps, seen):
        return None
    parts = placement.__dict__.get("_parts_by_participant")
    if type(parts) is not dict or not _record_shared(parts, deps, seen):
        return None
    part = parts.get(evidence.__dict__.get("participant_id"))
    if part is not None:
        if type(part) is not WeightPlacementPart or not _record(part, deps, seen, False):
            return None
        if not _record_value(part.__dict__.get("rank"), deps, seen):
            return None
    if not _record(placement_dict, deps, seen, True) or not _record(evidence, deps, seen, True):
        return None
    return tuple(deps)


def _attested_view(attestation: RuntimeBindingAttestation) -> _AttestedView:
    """The ``_AttestedView`` of ``attestation`` from its current values (built once per
    revalidation scope, else on every call; inside a scope the exact cache of ``_VIEW_KEY``)."""
    view_state = _VIEW_STATE
    scope = view_state.scope
    built_now = view_state.built_now
    if scope is not None:
        entry = scope.get(id(attestation))
        if entry is not None and entry[0] is attestation:
            return entry[1]
        if not built_now and type(attestation) is RuntimeBindingAttestation:
            state = attestation.__dict__
            cached = state.get(_VIEW_KEY)
            if (
                type(cached) is tuple
                and len(cached) == 5
                and cached[1] is state.get("evidence")
                and cached[2] is state.get("placement")
                and cached[3] is state.get("_placement_dict")
                and _native.deps_unchanged(cached[4])
                # (a record mirrors the state: it answers for the rules' attribute reads only
                # while no field is shadowed, AUDIT41)
                and _fields_unshadowed(_STATE_FIELDS)
            ):
                kept: _AttestedView = cached[0]
                scope[id(attestation)] = (attestation, kept)
                return kept
    held = view_state.held
    if held is not None and type(attestation) is RuntimeBindingAttestation:
        placement = attestation.__dict__.get("placement")
        if type(placement) is WeightPlacementManifest:
            held.append(placement.__dict__.get("_digest_ahead"))  # (see _ViewState.held)
    objects = None
    if built_now and scope is not None:
        # The snapshot objects binding derived from this attestation in this very call.
        state = attestation.__dict__
        cache = state.get("_derived_cache")
        if (
            type(cache) is tuple
            and len(cache) == 3
            and cache[0] is state.get("placement")
            and cache[1] is state.get("evidence")
            and type(cache[2]) is dict
        ):
            objects = cache[2].get("snapshots_by_worker")
    # Built in C when it decides.
    view: Optional[_AttestedView] = _native.attested_view(
        _AttestedView,
        attestation,
        RuntimeBindingAttestation,
        RuntimeBindingEvidence,
        RuntimeBindingFragment,
        WeightPlacementManifest,
        objects,
        WeightPlacementPart,
    )
    return _attested_view_end(attestation, view, objects, scope, built_now, held)


def _attested_view_end(
    attestation: RuntimeBindingAttestation,
    view: Optional[_AttestedView],
    objects: Any,
    scope: Optional[dict[int, tuple[Any, _AttestedView]]],
    built_now: bool,
    held: Optional[list[Any]],
) -> _AttestedView:
    """The end of ``_attested_view`` once ``_native.attested_view`` has answered (``view``, None
    when it declined): the Python constructor then, the scope entry, the ``_VIEW_KEY`` record.
    ``revalidate_fragments`` runs ``_attested_view``'s common paths in C (``views``) and calls
    this for every other end, with the values the wrapper would have at this point."""
    if view is None:
        view = _AttestedView(attestation, objects)
    if scope is not None:
        scope[id(attestation)] = (attestation, view)  # holds the attestation: its id stays unique
        if objects is None and not built_now and type(attestation) is RuntimeBindingAttestation:
            state = attestation.__dict__
            if state.get(_VIEW_KEY) is None:
                # The first view of this attestation (e.g. a plan just unpickled): only that is
                # remembered; the record (``_view_deps``) is paid from the second build on.
                state[_VIEW_KEY] = ()
            elif _fields_unshadowed(_STATE_FIELDS):
                # (a view the rules built through a shadowed field is not the state's: never
                # recorded, else taken once the shadow is gone, AUDIT41)
                if held is not None:
                    held.append(state[_VIEW_KEY])  # replaced below (see _ViewState.held)
                deps = _view_deps(attestation)
                if deps is not None and view.evidence is state["evidence"] and view.placement is state["placement"]:
                    state[_VIEW_KEY] = (view, view.evidence, view.placement, state["_placement_dict"], deps)
                else:
                    state[_VIEW_KEY] = ()
    return view


# The wrapper whose common paths ``revalidate_fragments`` runs in C (``views``).
_ATTESTED_VIEW = _attested_view


class _FactoryDefault:
    """Stands for "the field's default_factory" in a written-out dataclass ``__init__`` signature
    (shown as the generated one shows it)."""

    def __repr__(self) -> str:
        return "<factory>"


# The marker a generated __init__ uses, so that inspect.signature(TransferPlan) is unchanged.
_FACTORY_DEFAULT: Any = getattr(dataclasses, "_HAS_DEFAULT_FACTORY", None) or _FactoryDefault()


@dataclass(frozen=True, init=False)
class TransferPlan:
    """The bound, attested plan (spec §9.6). It has no execute or submit method.

    Every construction path (``__init__``, ``dataclasses.replace``, unpickling, ``copy``)
    revalidates the whole plan.
    """

    resource_id: ResourceId
    revision: RevisionId
    weight_generation: int
    target_placement: WeightPlacementManifest
    operations: tuple[ExecutableTransferOperation, ...]
    planning_limits: PlanningLimits = field(default_factory=PlanningLimits)
    source_executors: tuple[ExecutorTransferPlan, ...] = ()
    target_executors: tuple[ExecutorTransferPlan, ...] = ()
    source_manifest: Optional[StoredWeightManifest] = None
    source_manifest_identity: Optional[StoredManifestIdentity] = None
    source_stored_fragment_snapshots: tuple[StoredFragmentSnapshot, ...] = field(init=False)

    _operation_views: ClassVar[Any] = None

    def __init__(
        self,
        resource_id: ResourceId,
        revision: RevisionId,
        weight_generation: int,
        target_placement: WeightPlacementManifest,
        operations: tuple[ExecutableTransferOperation, ...],
        planning_limits: PlanningLimits = _FACTORY_DEFAULT,
        source_executors: tuple[ExecutorTransferPlan, ...] = (),
        target_executors: tuple[ExecutorTransferPlan, ...] = (),
        source_manifest: Optional[StoredWeightManifest] = None,
        source_manifest_identity: Optional[StoredManifestIdentity] = None,
    ) -> None:
        # The dataclass-generated __init__ with the same signature and effect (each field set as
        # object.__setattr__ sets it, then __post_init__), written out because every replace()
        # runs it: the generated one's object.__setattr__ per field costs about half the
        # instructions of dataclasses.replace itself. The instance dict is written directly only
        # for this exact class (no descriptor under a field name); a subclass gets the setattr.
        if planning_limits is _FACTORY_DEFAULT:
            planning_limits = PlanningLimits()
        if type(self) is TransferPlan:
            state = self.__dict__
            state["resource_id"] = resource_id
            state["revision"] = revision
            state["weight_generation"] = weight_generation
            state["target_placement"] = target_placement
            state["operations"] = operations
            state["planning_limits"] = planning_limits
            state["source_executors"] = source_executors
            state["target_executors"] = target_executors
            state["source_manifest"] = source_manifest
            state["source_manifest_identity"] = source_manifest_identity
        else:
            for name, value in zip(
                _INIT_FIELDS,
                (
                    resource_id,
                    revision,
                    weight_generation,
                    target_placement,
                    operations,
                    planning_limits,
                    source_executors,
                    target_executors,
                    source_manifest,
                    source_manifest_identity,
                ),
            ):
                object.__setattr__(self, name, value)
        self.__post_init__()

    def __post_init__(self) -> None:
        with _ViewScope():  # (``_revalidate(check_physical_ranges=True)``, one call fewer)
            self._revalidate_scoped(True)

    @classmethod
    def _from_bound_operations(
        cls,
        carried: Any = None,
        sealed: bool = False,
        source_placement: Any = None,
        attested_now: bool = False,
        **values: Any,
    ) -> TransferPlan:
        """Private constructor for ``bind_logical_transfer_plan``.

        ``sealed`` (binding._sealed: no code but this package's ran during the bind call): every
        rule runs except the target physical-range check, which binding has just applied to
        these very operations (spec §2.5: binding applies that check exactly once), and the
        rules whose outcome bind's steps prove for these very objects when the placements allow
        it (§12.4 and §12.7: ``_sealed_side_holds``, ``_sealed_coverage_holds``; §12.5:
        ``_sealed_spaces_apart``), the call's
        own attestations' snapshots are compared by identity (``built_now``), and ``carried``,
        ``bind_regions``' scan facts about the regions that call built (or None), is taken by
        ``revalidate_scan_carried`` (the adapter's bindings and the budgets are read again
        there). Not sealed: ``carried`` is ignored and every rule runs, the physical ranges
        included, as ``replace`` runs them. Every other constructor (``TransferPlan(...)``,
        ``replace``, pickle restore) revalidates everything. ``source_placement``: the sealed
        call's source placement (its source bindings' attestations were built with it), read
        only by ``_sealed_side_holds``. ``attested_now`` (sealed calls only): the bound
        fragments were made by ``bind_regions_ordered`` in this call (see
        ``_fast_revalidate_live``: the attested-dict lookups of §9.6 step 11 are then proven)."""
        plan: TransferPlan = object.__new__(cls)
        for name in _INIT_FIELDS:
            object.__setattr__(plan, name, values[name])
        with _ViewScope(built_now=sealed):  # attestations created by the bind call itself
            plan._revalidate_scoped(
                not sealed,
                carried if sealed else None,
                sealed,
                source_placement if sealed else None,
                sealed and attested_now,
            )
        return plan

    def _revalidate(self, *, check_physical_ranges: bool) -> None:
        with _ViewScope():
            self._revalidate_scoped(check_physical_ranges)

    def _revalidate_scoped(
        self,
        check_physical_ranges: bool,
        carried: Any = None,
        sealed: bool = False,
        source_placement: Any = None,
        attested_now: bool = False,
    ) -> None:
        # Each sequence as an exact tuple (``tuple(value)``; stored back only when it was not one).
        operations = self.operations
        if type(operations) is not tuple:
            operations = tuple(operations)
            object.__setattr__(self, "operations", operations)
        source_executors = self.source_executors
        if type(source_executors) is not tuple:
            source_executors = tuple(source_executors)
            object.__setattr__(self, "source_executors", source_executors)
        target_executors = self.target_executors
        if type(target_executors) is not tuple:
            target_executors = tuple(target_executors)
            object.__setattr__(self, "target_executors", target_executors)
        if not self.resource_id or not self.revision:
            raise ValueError("transfer plan identifiers must not be empty")
        if type(self.weight_generation) is not int or self.weight_generation < 0:
            raise ValueError("transfer plan weight_generation must be non-negative")
        limits = self.planning_limits
        if not isinstance(limits, PlanningLimits):
            raise ValueError("transfer plan planning_limits is invalid")
        identity = self.source_manifest_identity
        if identity is not None and not isinstance(identity, StoredManifestIdentity):
            raise ValueError("transfer plan source manifest identity is invalid")
        if self.source_manifest is not None and not isinstance(self.source_manifest, StoredWeightManifest):
            raise ValueError("transfer plan source manifest is invalid")
        # A forged limit: its spec 8.3 message, not a TypeError; a removed one too, as the pickle
        # paths refuse it (``replace`` passes the limits object on, whose attribute read would
        # fall back to the class default).
        _require_typed_limits(limits)
        max_regions = limits.max_transfer_regions
        if len(operations) > max_regions:
            raise ValueError("transfer plan exceeds max_transfer_regions")
        ruled = not _fast_revalidate(
            self,
            operations,
            source_executors,
            target_executors,
            limits,
            check_physical_ranges,
            carried,
            sealed,
            source_placement,
            attested_now,
        )
        if not ruled:
            # Beyond the reference: regions restored by default pickling skip their own checks,
            # so forged geometry is refused here, after every spec rule (same first failure
            # otherwise). A bind call's own regions: the proof bind_regions carried, the
            # adapter's values it used read again (carried is None on every other path: everything
            # is proven again). (The fast path proved fields_unshadowed before and after itself.)
            recheck_regions(operations, carried)
            return
        # The rules call C helpers that check a class's layout through per-call-site memos: they
        # are trusted only while no field is shadowed, else decided as in a fresh process
        # (memo_proved; AUDIT41, tests/test_audit4141_rules_cold_memos.py).

        def ruled_steps() -> None:
            self._revalidate_rules(operations, source_executors, target_executors, limits, check_physical_ranges)
            recheck_regions(operations, carried)
            _require_attested_fences(operations)

        memo_proved(ruled_steps)

    def _revalidate_rules(
        self,
        operations: tuple[Any, ...],
        source_executors: tuple[Any, ...],
        target_executors: tuple[Any, ...],
        limits: PlanningLimits,
        check_physical_ranges: bool,
    ) -> None:
        """The rules after the scalar ones, one by one in the spec's order (raises the first
        failure); the fast path's fallback and its test oracle."""
        _require_typed_limits(limits)
        total_segments = 0
        any_stored = False
        for op in operations:
            if not isinstance(op, TransferRegion):
                raise ValueError("transfer plan requires a canonical transfer operation")
            # (getattr: a region restored from a forged dict may lack a field; F2)
            target = getattr(op, "target", None)
            if not isinstance(target, BoundWeightFragment):
                raise ValueError("executable transfer plan target must be runtime-bound")
            source = getattr(op, "source", None)
            if isinstance(source, StoredFragmentSnapshot):
                any_stored = True
            elif not isinstance(source, BoundWeightFragment):
                raise ValueError("executable transfer plan source must be runtime-bound")
            _require_typed_region(op, source, target)
            op.validate_bounds()
            segments = op.segment_count
            if segments > limits.max_segments_per_region:
                raise ValueError("transfer plan exceeds max_segments_per_region")
            total_segments += segments
            if total_segments > limits.max_total_lowered_segments:
                raise ValueError("transfer plan exceeds max_total_lowered_segments")
        _require_typed_stored_source(self)
        self._validate_stored_source(operations, any_stored)
        for executor in source_executors + target_executors:
            if not isinstance(executor, ExecutorTransferPlan):
                raise ValueError("transfer plan has invalid canonical executor metadata")
        for executor in source_executors + target_executors:
            _require_typed_executor(executor)
        object.__setattr__(
            self, "_operation_views", build_operation_views(operations, source_executors, target_executors)
        )
        _require_typed_attestations(operations, source_executors + target_executors)
        keys = self._validate_attested_execution(operations)
        target_placement = self.target_placement
        if not isinstance(target_placement, WeightPlacementManifest):
            raise ValueError("transfer plan target placement is invalid")
        if _target_identity(target_placement) != (self.resource_id, self.revision, self.weight_generation):
            raise ValueError("transfer plan target placement identity differs")
        failure = placement_shape_failure(target_placement, declared_tensors=False)
        if failure is not None:  # a default-pickled placement read by the rules below (F2)
            raise ValueError(failure)
        used: set[int] = set()
        self._validate_executor_consistency("source", operations, source_executors, keys, used)
        self._validate_executor_consistency("target", operations, target_executors, keys, used)
        _validate_no_in_place(operations)
        if check_physical_ranges:
            _require_loop_ranks(operations)
            _check_target_physical_ranges(operations, limits.max_total_lowered_segments)
        self._validate_bound_target_coverage(operations, target_executors, used)

    # -- §9.6 step 8 ---------------------------------------------------------------------
    def _validate_stored_source(self, operations: tuple[Any, ...], any_stored: bool) -> None:
        if not any_stored:
            if self.source_manifest is not None:
                raise ValueError("runtime transfer plan must not have a source manifest")
            if self.source_manifest_identity is not None:
                raise ValueError("runtime transfer plan must not have a source manifest identity")
            object.__setattr__(self, "source_stored_fragment_snapshots", ())
            return
        if self.source_manifest is None:
            raise ValueError("stored transfer plan requires a source manifest")
        manifest = validate_weight_manifest_snapshot(self.source_manifest)
        object.__setattr__(self, "source_manifest", manifest)
        identity = self.source_manifest_identity
        if identity is None:
            raise ValueError("stored transfer plan requires a source manifest identity")
        if (identity.resource_id, identity.revision, identity.weight_generation) != (
            self.resource_id,
            self.revision,
            self.weight_generation,
        ):
            raise ValueError("transfer plan source manifest identity differs")
        if manifest.manifest_identity != identity:
            raise ValueError("transfer plan source manifest commitment differs")
        committed = {fragment.fragment_id: fragment for fragment in manifest.fragments}
        selected: dict[str, StoredFragmentSnapshot] = {}
        for op in operations:
            source = op.source
            if not isinstance(source, StoredFragmentSnapshot):
                raise ValueError("transfer plan mixes stored and live source fragments")
            expected = committed.get(source.fragment_id)
            if expected is None or expected != source:
                raise ValueError("transfer plan stored source fragment differs from committed manifest")
            selected.setdefault(source.fragment_id, expected)
        object.__setattr__(
            self, "source_stored_fragment_snapshots", tuple(selected[key] for key in sorted(selected))
        )

    # -- §9.6 step 11 --------------------------------------------------------------------
    def _validate_attested_execution(self, operations: tuple[Any, ...]) -> dict[int, tuple[Any, ...]]:
        """Spec §9.6 step 11; returns the executor key (attested provenance, worker, rank) of
        every distinct bound fragment, by ``id``."""
        plan_identity = (self.resource_id, self.revision, self.weight_generation)
        keys: dict[int, tuple[Any, ...]] = {}
        identity_ok: set[int] = set()
        # key_base of every attestation seen, by ``id`` (the attestations stay alive in the
        # fragments for the whole call, so an ``id`` cannot be reused meanwhile).
        bases: dict[int, tuple[Any, ...]] = {}
        sources = [op.source for op in operations]
        targets = [op.target for op in operations]
        # Operations in order, source before target: the same first failure as one joint loop.
        for index in range(len(operations)):
            for side, fragment in (("source", sources[index]), ("target", targets[index])):
                if id(fragment) in keys or not isinstance(fragment, BoundWeightFragment):
                    continue
                # (an emptied owner / attestation slot reads as its default None, as a missing
                # key of the dict-backed class's instance dict read the class default)
                if getattr(fragment, "owner", None) is not None or getattr(fragment.binding, "owner", None) is not None:
                    raise ValueError(f"transfer plan {side} fragment retains runtime allocation owner")
                attestation = getattr(fragment, "attestation", None)
                if attestation is None:
                    raise ValueError(f"transfer plan {side} fragment lacks an attested runtime binding")
                placement = attestation.placement
                if id(placement) not in identity_ok:
                    if _placement_identity(placement) != plan_identity:
                        raise ValueError(f"transfer plan identity differs from {side} placement")
                    identity_ok.add(id(placement))
                binding = fragment.binding
                placement_fragment = fragment.placement
                if not attestation.validates(placement_fragment, binding):
                    raise ValueError(f"transfer plan {side} fragment differs from attested runtime binding")
                base = bases.get(id(attestation))
                if base is None:
                    base = bases[id(attestation)] = _attested_view(attestation).key_base
                keys[id(fragment)] = base + (binding.worker_id, _rank_key(placement_fragment.rank))
        return keys

    # -- §12.4 ---------------------------------------------------------------------------
    def _validate_executor_consistency(
        self,
        side: str,
        operations: tuple[Any, ...],
        executors: tuple[ExecutorTransferPlan, ...],
        keys: dict[int, tuple[Any, ...]],
        used: set[int],
    ) -> None:
        """Spec §12.4; adds to ``used`` the ``id`` of every executor owning operations."""
        if not operations:
            return
        if side == "source":
            fragments = [op.source for op in operations]
        else:
            fragments = [op.target for op in operations]
        if set(map(type, fragments)) != {BoundWeightFragment}:  # else: none stored, all bound
            stored = [isinstance(fragment, StoredFragmentSnapshot) for fragment in fragments]
            if any(stored):
                if side != "source" or not all(stored):
                    raise ValueError("transfer plan mixes stored and live source fragments")
                if executors:
                    raise ValueError("stored source must not have live executor provenance")
                return
            for fragment in fragments:
                if not isinstance(fragment, BoundWeightFragment):
                    raise ValueError(f"transfer plan {side} fragment is not runtime-bound")
        if not executors:
            raise ValueError(f"live {side} requires executor provenance")
        # Expected executor key of every operation fragment, from its attestation.
        expected_ops: dict[tuple[Any, ...], list[int]] = {}
        active_placements: dict[int, WeightPlacementManifest] = {}
        unique: dict[int, BoundWeightFragment] = {}
        # Expected-operation bucket of every distinct fragment object, by ``id``.
        bucket_of: dict[int, list[int]] = {}
        for index, fragment in enumerate(fragments):
            bucket = bucket_of.get(id(fragment))
            if bucket is not None:
                bucket.append(index)
                continue
            key = keys.get(id(fragment))
            if key is None:  # every bound fragment was keyed by _validate_attested_execution
                raise ValueError(f"transfer plan {side} fragment lacks runtime attestation")
            unique[id(fragment)] = fragment
            placement = fragment.attestation.placement
            active_placements[id(placement)] = placement
            bucket = expected_ops.get(key)
            if bucket is None:
                bucket = expected_ops[key] = [index]
            else:
                bucket.append(index)
            bucket_of[id(fragment)] = bucket
        plan_identity = (self.resource_id, self.revision, self.weight_generation)
        seen_keys: set[tuple[Any, ...]] = set()
        snapshot_owner: dict[Any, RuntimeFragmentSnapshot] = {}
        views: OperationViews = self._operation_views
        # ``id`` of a snapshot object (alive in the executors) -> the attested field dict (alive
        # in the attestation's view) it was proven equal to above.
        proven: dict[int, dict[str, Any]] = {}
        for executor in executors:
            if executor.runtime_lease_id is None:
                raise ValueError(f"{side} executor is missing runtime lease provenance")
            worker_id = executor.worker_id
            key = (
                executor.instance_id,
                executor.placement_id,
                executor.participant_id,
                executor.placement_digest,
                executor.runtime_lease_id,
                worker_id,
                _rank_key(executor.rank),
            )
            if key in seen_keys:
                raise ValueError(f"transfer plan has duplicate {side} executor provenance")
            seen_keys.add(key)
            attestation = executor.attestation
            if attestation is None:
                raise ValueError(f"{side} executor lacks runtime attestation")
            placement = attestation.placement
            if _placement_identity(placement) != plan_identity or (
                id(placement) not in active_placements and placement not in active_placements.values()
            ):
                raise ValueError(f"{side} executor attestation identity differs")
            view = _attested_view(attestation)
            if key != view.key_base + (worker_id, _rank_key(view.part_rank)):
                raise ValueError(f"{side} executor provenance differs from attestation")
            snapshots = executor.fragment_snapshots
            fragment_ids = executor.fragment_ids
            objects = view.objects_by_worker
            every = fragment_ids == view.ids_by_worker.get(worker_id)
            if every and objects is not None:
                # The attested snapshot objects themselves (equal tuples, usually identical).
                if objects[worker_id] != snapshots:
                    raise ValueError(f"{side} executor fragment provenance differs")
            else:
                rows = view.rows_by_worker.get(worker_id, ())
                if not every:
                    wanted = set(fragment_ids)
                    rows = tuple(row for row in rows if row[0] in wanted)
                # The attested snapshots of the executor's fragments, compared field by field.
                expected_states = [row[1] for row in rows]
                if len(rows) != len(snapshots) or not all(map(_snapshot_matches, snapshots, expected_states)):
                    raise ValueError(f"{side} executor fragment provenance differs")
                # Remember which attested field dict each snapshot object was proven equal to.
                proven.update(zip(map(id, snapshots), expected_states))
            for snapshot in snapshots:
                if snapshot.fragment_id in snapshot_owner:
                    raise ValueError(f"{side} executor has duplicate fragment provenance")
                snapshot_owner[snapshot.fragment_id] = snapshot
            actual = views.indices(executor, side)
            if actual != tuple(expected_ops.get(key, ())):
                raise ValueError(f"{side} executor provenance differs from operations")
            if actual:
                used.add(id(executor))
        for key in expected_ops:
            if key not in seen_keys:
                raise ValueError(f"{side} executor provenance differs from operations")
        operation_ids = {fragment.binding.fragment_id for fragment in unique.values()}
        if len(snapshot_owner) != len(operation_ids) or not operation_ids.issuperset(snapshot_owner):
            raise ValueError(f"{side} executor fragment provenance differs from operations")
        # Per attestation (by ``id``; alive in the fragments for the whole call): its view and
        # attested snapshot objects by placement fragment id.
        attested_views: dict[int, tuple[_AttestedView, dict[str, RuntimeFragmentSnapshot]]] = {}
        for fragment in unique.values():
            owned = snapshot_owner[fragment.binding.fragment_id]
            # ``validates`` proved placement and binding fragment equal to the attested pair, so
            # the fragment's snapshot is the attested one when the lease generation agrees.
            attestation = fragment.attestation
            entry = attested_views.get(id(attestation))
            if entry is None:
                view = _attested_view(attestation)  # type: ignore[arg-type]  # checked in step 11
                entry = attested_views[id(attestation)] = (view, view.object_by_pfid())
            view, objects_by_pfid = entry
            pfid = fragment.placement.placement_fragment_id
            attested = view.expected_by_pfid.get(pfid)
            if attested is not None and fragment.lease_generation == view.generation:
                if (
                    owned is objects_by_pfid.get(pfid)
                    or proven.get(id(owned)) is attested
                    or _snapshot_matches(owned, attested)
                ):
                    continue
                raise ValueError(f"{side} executor fragment provenance differs")
            if RuntimeFragmentSnapshot.from_fragment(fragment) != owned:
                raise ValueError(f"{side} executor fragment provenance differs")

    # -- §12.7 ---------------------------------------------------------------------------
    def _validate_bound_target_coverage(
        self, operations: tuple[Any, ...], executors: tuple[ExecutorTransferPlan, ...], used: set[int]
    ) -> None:
        placement = self.target_placement
        parts = {part.participant_id: part for part in placement.parts}
        boxes_by_fragment: dict[Any, list[tuple[tuple[int, ...], tuple[int, ...]]]] = {}
        op_participants: set[str] = set()
        # Participant of every attestation already checked against the target placement, by
        # ``id`` (the attestations stay alive in the fragments for the whole call).
        participant_of: dict[int, str] = {}
        for op in operations:
            target = op.target
            attestation = target.attestation
            # Step 11 (``_validate_attested_execution``) ran on these very fragment objects in
            # this revalidation: every target has an attestation and
            # ``attestation.validates(target.placement, target.binding)`` holds.
            participant = participant_of.get(id(attestation))
            if participant is None:
                if attestation is None or not _is_target_placement(attestation.placement, placement):
                    raise ValueError("bound target fragment differs from target placement")
                # ``validates`` compared the fragment with the entry of the participant's part.
                participant = attestation.evidence.participant_id
                if participant not in parts:
                    raise ValueError("bound target fragment differs from target placement")
                participant_of[id(attestation)] = participant
            op_participants.add(participant)
            boxes_by_fragment.setdefault((participant, target.placement.placement_fragment_id), []).append(
                (op.overlap_offset, op.overlap_shape)
            )
        if not executors:
            raise ValueError("bound plan has no target executor metadata")
        seen: set[tuple[str, str]] = set()
        views: OperationViews = self._operation_views
        digest = placement.digest
        for executor in executors:
            pair = (executor.participant_id, executor.worker_id)
            if pair in seen:
                raise ValueError("bound plan has duplicate target executor")
            seen.add(pair)
            part = parts.get(executor.participant_id)
            attestation = executor.attestation
            if (
                part is None
                or attestation is None
                or executor.rank != part.rank
                or executor.placement_id != placement.placement_id
                or executor.placement_digest != digest
                or not _is_target_placement(attestation.placement, placement)
                or attestation.evidence.participant_id != executor.participant_id
                or attestation.evidence.instance_id != executor.instance_id
                or attestation.evidence.lease_id != executor.runtime_lease_id
            ):
                raise ValueError("bound target executor differs from target placement")
            expected_ids = _attested_view(attestation).evidence_ids_by_worker.get(executor.worker_id, ())
            if executor.fragment_ids != expected_ids:
                raise ValueError("bound target executor fragments differ from target placement")
            # §12.4 proved ``views.indices(executor, "target")`` equal to the executor's
            # expected operations; ``used`` records the executors where it is non-empty.
            if id(executor) not in used:
                raise ValueError("bound target executor operations differ from target placement")
        executor_participants = {executor.participant_id for executor in executors}
        if executor_participants != op_participants:
            raise ValueError("bound target executors differ from planned operations")
        containers: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
        boxes: list[list[tuple[tuple[int, ...], tuple[int, ...]]]] = []
        order: list[str] = []
        for participant in sorted(executor_participants):
            for fragment in parts[participant].fragments:
                offset = fragment.global_offset
                shape = fragment.local_shape
                members = boxes_by_fragment.get((participant, fragment.placement_fragment_id), [])
                if len(members) == 1 and offset and members[0][0] == offset and members[0][1] == shape:
                    continue  # one region equal to the whole (validated, non-empty) fragment box
                containers.append((offset, shape))
                boxes.append(members)
                order.append(fragment.placement_fragment_id)
        if containers:
            failed = exact_cover_failures(containers, boxes)
            if failed is not None:
                raise ValueError(f"bound target fragment is not fully covered: {order[failed]}")

    # -- pickling (spec §13) -------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_operation_views", None)
        return state

    def __setstate__(self, state: Any) -> None:
        if not isinstance(state, dict) or any(name not in state for name in _INIT_FIELDS):
            raise ValueError("transfer plan pickle state is invalid")
        # (every name is stored as an attribute below, as the spec says: a name that is not a
        # str is a damaged state, not object.__setattr__'s TypeError; a str subclass is stored,
        # as object.__setattr__ stores it; F9. issubclass of its type: no __class__ of its own)
        if not all([issubclass(type(name), str) for name in state]):
            raise ValueError("transfer plan pickle state is invalid")
        for name in ("operations", "source_executors", "target_executors"):
            # (the rules make a tuple of each: a value that is not iterable is a damaged state,
            # not a TypeError from deep inside the revalidation; pickle_cases finding)
            try:
                iter(state[name])
            except TypeError:
                raise ValueError("transfer plan pickle state is invalid") from None
        limits = state["planning_limits"]
        if isinstance(limits, PlanningLimits):
            _require_typed_limits(limits)  # (read before the rules: F2)
        for name, value in state.items():
            object.__setattr__(self, name, value)
        try:
            self.__post_init__()
        except AttributeError:
            # a value the rules cannot even read (a crafted state; a target placement that lost a
            # field is refused by the rules themselves: _is_target_placement): a damaged state
            raise ValueError("transfer plan pickle state is invalid") from None

    def __reduce__(self) -> tuple[Any, ...]:
        # The pickle format lives in bound_pickle.py (one concern per file).
        return _reduce_transfer_plan(self)

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        # ``__reduce__``'s record, packed from protocol 5 on (bound_pickle), without the
        # ``object.__reduce_ex__`` hop.
        return _reduce_ex_transfer_plan(self, protocol)

    # -- derived views -------------------------------------------------------------------
    @property
    def total_bytes(self) -> int:
        """Bytes moved by all operations."""
        return sum(op.total_bytes for op in self.operations)

    @property
    def regions(self) -> tuple[ExecutableTransferOperation, ...]:
        """The operations (same tuple)."""
        return self.operations

    @property
    def pipeline_routes(self) -> tuple[PipelineRouteGroup, ...]:
        """Operations grouped by source/target PP rank and pipeline stage (spec §11.9)."""
        views: OperationViews = self._operation_views
        return views.pipeline_routes

    def operation_indices_for_executor(self, executor: ExecutorTransferPlan, side: str) -> tuple[int, ...]:
        """Ascending indices of the operations whose ``side`` fragment belongs to ``executor``."""
        if side not in _SIDES:
            raise ValueError(f"invalid executor side: {side}")
        executors = self.source_executors if side == "source" else self.target_executors
        if executor not in executors:
            raise ValueError(f"{side} executor is not part of this transfer plan")
        views: OperationViews = self._operation_views
        return views.indices(executor, side)


# ---------------------------------------------------------------------------------------
# Revalidation fast path
#
# ``_fast_revalidate`` decides the common case (a live plan whose values all have their exact
# classes) in fewer passes, sharing what every rule derives from one fragment or executor. It
# never raises and never reports which rule failed: it returns False as soon as anything is
# unexpected or any rule fails, and ``TransferPlan._revalidate`` then runs the rule-by-rule
# path, which raises the spec's first failure. It must therefore only return True for values
# the rule-by-rule path accepts (``tests/test_native_revalidate*.py`` compares both).


def _fast_revalidate(
    plan: Any,
    operations: tuple[Any, ...],
    source_executors: tuple[Any, ...],
    target_executors: tuple[Any, ...],
    limits: PlanningLimits,
    check_physical_ranges: bool,
    carried: Any = None,
    sealed: bool = False,
    source_placement: Any = None,
    attested_now: bool = False,
) -> bool:
    """True when ``plan`` passed every rule (its derived fields are then set). ``carried``,
    ``sealed``, ``source_placement`` and ``attested_now``: see
    ``TransferPlan._from_bound_operations`` (None, False, None and False everywhere else).

    The collector is paused throughout (bind and restore pause it already; ``replace()`` and
    direct construction do not): the C passes hold borrowed references across allocations, and
    an automatic collection there would run ``gc.callbacks`` and finalizers, i.e. user code
    that can free what a pass is reading (AUDIT4, ``tests/test_audit24_gc_walk.py``)."""
    try:
        with collector_paused():
            return _fast_revalidate_live(
                plan,
                operations,
                source_executors,
                target_executors,
                limits,
                check_physical_ranges,
                carried,
                sealed,
                source_placement,
                attested_now,
            )
    except Exception:  # any surprise: the rule-by-rule path decides (and raises its own error)
        return False


def _fast_revalidate_live(
    plan: Any,
    operations: tuple[Any, ...],
    source_executors: tuple[Any, ...],
    target_executors: tuple[Any, ...],
    limits: PlanningLimits,
    check_physical_ranges: bool,
    carried: Any = None,
    sealed: bool = False,
    source_placement: Any = None,
    attested_now: bool = False,
) -> bool:
    if not _fields_unshadowed(_STATE_FIELDS):  # (AUDIT39: the reads below are the rules' attributes)
        return False
    state = plan.__dict__
    if not operations or state["source_manifest"] is not None or state["source_manifest_identity"] is not None:
        return False
    target_placement = state["target_placement"]
    if type(target_placement) is not WeightPlacementManifest or not source_executors or not target_executors:
        return False
    plan_identity = (state["resource_id"], state["revision"], state["weight_generation"])
    if _placement_identity(target_placement) != plan_identity:
        return False
    # (Every executor is exactly ExecutorTransferPlan: checked by revalidate_views.)
    # -- per operation: classes, byte bounds, segment budgets (§9.6); distinct fragments ----
    # A bind call's own regions: bind_regions' carried facts, each fragment's binding and
    # nbytes read again (None: anything unusual, the full scan below decides).
    scanned = None
    carried_lists: Any = ()
    if carried is not None:
        carried_lists = carried[2:5] if type(carried) is tuple and len(carried) > 4 else ()
        scanned = _native.revalidate_scan_carried(
            operations,
            carried,
            limits.max_segments_per_region,
            limits.max_total_lowered_segments,
            BoundWeightFragment,
            RuntimeBindingFragment,
        )
        del carried
    # (the distinct fragments are bind_regions' own list: the ones that call made)
    frags_carried = scanned is not None
    if scanned is None:
        scanned = _native.revalidate_scan(
            operations,
            limits.max_segments_per_region,
            limits.max_total_lowered_segments,
            TransferRegion,
            BoundWeightFragment,
        )
    if scanned is None:
        return False
    frags, source_of, target_of, boxes = scanned
    del scanned  # each table is freed as soon as the last pass reading it is done
    # No box tuple per operation is kept (80 B each, alive through bind's peak): revalidate_spaces
    # and revalidate_coverage read each box from its region's own fields (the operations were
    # checked exact TransferRegion by the scan, or are the carried regions themselves), and the
    # Python fallbacks build the list when they run (_operation_boxes). The carried list is this
    # bind call's private value, read by nothing after the scan (recheck_regions reads the
    # carried regions, fragments and proof): it is emptied here, as bind's frame holds it.
    # The positions likewise in large plans: packed (4 bytes per operation where the lists hold a
    # slot each and an int object per distinct position), the carried lists emptied once packed
    # (small plans keep their lists: packing would cost more than it saves).
    packed = _packed_positions(source_of, target_of) if len(operations) > _COMPACT_MIN else None
    scanned_lists = (source_of, target_of, boxes)
    for index, carried_list in enumerate(carried_lists):
        if carried_list is scanned_lists[index] and type(carried_list) is list and (index == 2 or packed is not None):
            carried_list.clear()
    if packed is not None:
        source_of, target_of = packed
    del boxes, carried_lists, scanned_lists, packed
    # §12.4 is not checked for a sealed bind call's own plan whose placements' parts carry their
    # fragments' ranks (_sealed_side_holds: every rule of §12.4 then follows from bind's steps on
    # these very objects, given that every pass below accepts). Its one output, ``used``, is read
    # by §12.7 only, which is then skipped too (_sealed_side_holds includes
    # _sealed_coverage_holds). Decided here, from the placements alone (no foreign code runs in a
    # sealed call, so they are the objects the passes below read), so that the passes do not
    # build what only §12.4 reads: the fragments' provenance keys, the views' runtime maps and
    # ``row_of``.
    side_proven = sealed and _sealed_side_holds(target_placement, source_placement)
    # The attested-dict lookups of §9.6 step 11 are proven, not repeated, for the fragments a
    # sealed call's bind_regions_ordered made (_attested_by_call), when no pass below probes
    # those dicts (§12.4 and §12.7 skipped: side_proven).
    attested_by_call = side_proven and attested_now and frags_carried and _attested_by_call()
    # -- per distinct fragment: §9.6 step 11 (attested execution) ---------------------------
    checked = _native.revalidate_fragments(
        frags,
        PlacementFragment,
        RuntimeBindingFragment,
        RuntimeBindingAttestation,
        WeightPlacementManifest,
        ParallelRank,
        plan_identity,
        _attested_view,
        _AttestedView,
        RuntimeBindingEvidence,
        not side_proven,  # the keys: read by revalidate_side only (None when not built)
        # ``_attested_view``'s common paths run in C (the rest through ``_attested_view_end``),
        # unless another function stands in its place (a test's spy: every view through it)
        (_VIEW_STATE, WeightPlacementPart, _attested_view_end) if _attested_view is _ATTESTED_VIEW else None,
        attested_by_call,
    )
    if checked is None:
        return False
    keys, routes_half, runtime_ids, attested = checked
    del checked
    # -- operation views (§11.9) and executor consistency (§12.4) ---------------------------
    # ``row_of``: per side and fragment position ``runtime.get(runtime_ids[position])``, when
    # revalidate_views found them by address in a large plan (else empty: revalidate_side
    # looks them up). None: not built (no side check runs).
    row_of: Optional[list[Any]] = None if side_proven else []
    # Large plans: each bucket's operation indices packed (one bytes of int64 per bucket, no int
    # object per operation; turned into arrays below); rows keep a non-empty bucket list.
    views = _native.revalidate_views(
        source_executors, target_executors, runtime_ids, routes_half, source_of, target_of, ParallelRank,
        ExecutorTransferPlan, row_of, len(operations) > _COMPACT_MIN,
        # the runtime maps (runtime id -> row): read by revalidate_side only; without them each
        # operation goes to the executor listing its runtime id object, which is the one listing
        # its id when no id is listed twice on a side (step 6; §12.4, proven: _sealed_side_holds)
        not side_proven,
    )
    if views is None:
        return False
    s_runtime, s_rows, s_table, t_runtime, t_rows, t_table, routes = views
    del views, routes_half  # read only by revalidate_views (frees ~5 MiB at 74k operations)
    # -- the field kinds the rules check before reading any attestation (F4) -----------------
    # (``_require_typed_attestations``, the target placement's ``placement_shape_failure``): every
    # placement and evidence the fast path trusts, down to the descriptors and every placement
    # and runtime fragment (the other passes never read most of these fields; a descriptor whose
    # tensor_id was made a str subclass after construction was accepted here, refused by the rules)
    if not _native.revalidate_shapes(target_placement, attested, source_executors, target_executors, _SHAPE_CLASSES):
        return False
    s_row_of, t_row_of = row_of or (None, None)
    large = len(operations) > _COMPACT_MIN
    used: set[int] = set()
    for side_of, runtime, rows, side_row_of in () if side_proven else (
        (source_of, s_runtime, s_rows, s_row_of),
        (target_of, t_runtime, t_rows, t_row_of),
    ):
        # The C version decides the common cases (executors list all their worker's attested
        # fragments, with the attested snapshot objects or equal ones).
        if _native.revalidate_side(
            frags,
            keys,
            runtime_ids,
            side_of,
            runtime,
            rows,
            attested,
            used,
            RuntimeBindingAttestation,
            ParallelRank,
            RuntimeFragmentSnapshot,
            PlacementFragment,
            side_row_of,
        ) is None and not _fast_side_consistent(
            frags, keys, runtime_ids, _position_list(side_of), runtime, rows, attested, used
        ):
            return False
        if large:  # (small plans: nothing worth freeing, and the contract benchmark's median)
            if type(side_row_of) is list:  # read by this side's check only (8 B per fragment)
                side_row_of.clear()
            _drop_object_tables(attested)
    # Read by the side checks only: the per-fragment provenance keys (~100 B per fragment),
    # runtime ids and runtime dicts are freed before the coverage check allocates its own.
    del row_of, s_row_of, t_row_of, keys, runtime_ids, s_runtime, t_runtime, s_rows
    if not side_proven:  # (the loop's names)
        del side_row_of, side_of, runtime, rows
    # -- §12.5 in-place protection, §12.6 target physical ranges ------------------------------
    # The common §12.6 case is decided in C: every operation writes a whole target fragment of
    # its own (one complete stream per fragment, free of budget) and the byte extents of one
    # address space are pairwise disjoint, so the sweep has nothing to report. Not run for a
    # sealed bind call's own plan (§12.6 applied by bind) whose two sides' executors name
    # disjoint instances (_sealed_spaces_apart: no address space then holds allocations of both
    # sides, which is all §12.5 asks).
    spaces: Optional[bool] = True
    if check_physical_ranges or not (side_proven and _sealed_spaces_apart(source_executors, target_executors)):
        spaces = _native.revalidate_spaces(
            frags, source_of, target_of, operations, check_physical_ranges, RuntimeBindingFragment, PlacementFragment
        )
    if spaces is False:  # an in-place overlap, or anything unexpected
        return False
    if spaces is None:  # no in-place overlap; the sweep decides §12.6 (raises on a failure)
        _check_target_physical_ranges(operations, limits.max_total_lowered_segments)
    del source_of, spaces
    # -- §12.7 bound target coverage ----------------------------------------------------------
    # Not run for a sealed bind call's own plan whose placement's part index is its parts
    # (_sealed_coverage_holds: every rule of §12.7 then follows from bind's steps and the passes
    # above, on these very objects).
    if not (side_proven or (sealed and _sealed_coverage_holds(target_placement))) and (
        _native.revalidate_coverage(
            target_placement, frags, target_of, operations, t_rows, attested, used, ParallelRank, PlacementFragment
        )
        is None
        and not _fast_target_coverage(
            target_placement, frags, _position_list(target_of), _operation_boxes(operations), t_rows, attested, used
        )
    ):
        return False
    # (again: a pass may have run Python code, e.g. a view's or an __eq__, that planted one)
    if not _fields_unshadowed(_STATE_FIELDS):
        return False
    object.__setattr__(plan, "source_stored_fragment_snapshots", ())
    # The index tables live as long as the plan (its operation views read them on first use):
    # kept as int64 arrays, the three lists naming each operation index (the side rows' buckets
    # until here) and one int object per index above 256 are freed when this call returns
    # (~30 B per operation less kept by a bound plan). Smaller plans' indices are the cached
    # small ints: their lists are kept (the arrays would save nothing and cost a few µs).
    if len(operations) > _COMPACT_MIN:
        _compact_index_lists(s_table)
        _compact_index_lists(t_table)
        _compact_index_lists(routes)
    object.__setattr__(plan, "_operation_views", OperationViews._deferred(s_table, t_table, routes))
    return True


def _sealed_coverage_holds(placement: Any) -> bool:
    """Whether §12.7 (bound target coverage) holds for the plan a *sealed* bind call built
    (``binding._sealed``: no code but this package's ran in the call, so every object below is as
    the call's steps read it), given that the fast revalidation's earlier passes accepted it.
    Checks the one fact the argument needs that no step proves: the placement's derived part
    index (``_part_index``: step 6 validated the bindings against it, step 7 bound from it,
    step 11 projected through it) is exactly its ``parts`` (which step 2 and §12.7 read), one
    part per participant id. (Since session 29 ``_part_index`` itself returns only such an index,
    building one from ``parts`` when the cache is anything else, so the steps never read a
    forged one (tests/test_lead29_part_index.py); a forged cache left in place makes this check
    fail, and §12.7 then runs.)

    Then, per rule of §12.7 (T the target placement, K the kept target bindings; "part" is the
    part of ``T.parts`` with a binding's participant id, the one the index names):
    1. Each operation target is step 7's bound fragment for its placement fragment id (step 8),
       whose attestation step 6 built with ``placement`` T from a binding of K, whose
       participant is a part of T with fragments (step 6: required <= given <= bindable).
    2. Target executors exist (the fast path's entry).
    3. Step 11 projected one executor per (part, worker), so (participant, worker) is unique;
       its rank, placement id, digest, attestation and the evidence's participant, instance
       and lease are those it was built from. Its fragment ids are all of the worker's attested
       ones: the binding pairs its fragments one to one with the part's (step 6), step 2
       proved every fragment of each selected (= kept) part exactly covered by operations
       naming its id (an empty box list covers no non-empty box, and a zero extent is refused
       there), each such operation's target is that fragment's bound fragment (step 8; ids
       unique per side, step 7), so step 11's selection holds every attested runtime id. Each
       executor then owns an operation (§12.4, passed above or proven by _sealed_side_holds'
       argument: one executor per runtime id).
    4. Executor participants and operation participants are both K's participants (3.).
    5. The boxes §12.7 files under (participant, placement fragment id) are the regions' boxes,
       the logical operations' own (step 8 copies them), filed under the same fragment as step 2
       files them, and the containers are the same fragments: step 2's exact cover.
    A small call's inputs are inert (no code can run); a large call's watch re-decides the plan
    by every rule if any other code ran while the revalidation took this (binding.py)."""
    state = placement.__dict__
    # (an exact dict: read before the passes that check it, so no subclass's get runs here)
    return type(state) is dict and part_index_matches(
        state.get("parts"), state.get("_parts_by_participant"), exact_parts=True
    )


def _sealed_side_holds(target_placement: Any, source_placement: Any) -> bool:
    """Whether §12.4 (executor consistency, both sides) holds for the plan a *sealed* bind call
    built (``binding._sealed``: no code but this package's ran in the call), given that the fast
    revalidation's other passes (scan, fragments, views, shapes) accept it. (It is decided before
    those passes run, so that they do not build what only §12.4 reads: it reads the placements
    alone, which no code of the call changes (sealed); the check is skipped only once they all
    accepted; a forged part-index cache that ``_part_index`` would rebuild meanwhile makes it
    false, and the pass runs.) Checks, for the
    target placement and the source placement (the call's own, ``source_placement``), the facts
    the argument needs that no step proves: the part index is exactly the parts
    (``_sealed_coverage_holds``' check; also what makes §12.7's skip hold, so ``used``, this
    check's one output, read by §12.7 only, is never needed), and every fragment of every part
    has its part's rank (``_native.part_ranks_exact``: the rank object itself, or an exact
    ``ParallelRank`` of the same exact-int fields). O(parts + placement fragments), in C.

    Why the ranks: the plan's fragment keys (§12.4 rule 4, ``revalidate_fragments``) take the
    rank of each bound fragment's placement fragment, step 11 projects executors with the part's
    rank; a placement fragment's (or a source part's) rank edited before the call passes every
    step and only §12.4 refused it (tests/test_skip27_final_guards.py, test_skip29_sealed_side).

    Then, per rule of §12.4 and side (P the side's placement, K its kept bindings, each of a
    part of P with fragments (step 6); A the attestation step 6 built for a binding of K, with
    placement P and evidence E of that binding; "the part" is the part of ``P.parts`` with E's
    participant id, the one the index names):
    1-3. Operations exist, none stored, every fragment bound, executors exist: the fast path's
       entry and scan (live source and target, no manifest).
    4. Every operation fragment has an attestation (step 7 attaches A); its key is E's instance,
       P's placement id, E's participant, P's digest, E's lease, the evidence fragment's worker
       and the placement fragment's rank (``revalidate_fragments`` built it from these objects).
    5. Per executor (step 11 built one per (part, worker) from A over the part, with
       ``part.rank``, E's instance and lease, P's placement id and digest):
       - its lease is E's, which step 6 validated a non-empty str;
       - keys are distinct: (participant, worker) is, participant ids being distinct (the
         index check);
       - its attestation is A, whose placement P has the plan's identity and is the placement
         of the operation fragments of its runtime ids (``revalidate_fragments`` checked each
         fragment's attestation identity; the selected runtime ids are the operations' (step 11),
         runtime ids are unique per side (step 6), so the executor holding id r is the one of
         the binding whose evidence holds r, with that binding's attestation A);
       - its key is A's view key: the view's part rank is the index's part's rank, the part
         step 11 read (the index check; the same objects, no code ran);
       - its snapshots are the attested ones of its worker, sorted by runtime id, restricted to
         the selection (step 11 built them from A's pairs: ``_attested_snapshots`` /
         ``attested_executors``, the objects the views compare in a sealed call);
       - no runtime id is in two executors (unique per side; one executor per (part, worker)).
    6. Each operation fragment f, bound at step 7 from part fragment pf and A's evidence
       fragment e (pf and e have the same placement fragment id), has key (E..., e.worker_id,
       pf.rank); the executor holding e's runtime id is (part, e.worker_id)'s, key (E...,
       e.worker_id, part.rank). They are equal because pf.rank is part.rank (checked here): so
       every operation's view owner (the executor holding its runtime id, §11.9) has the
       operation's key, which for distinct keys is rule 6 (each executor's indices are the
       operations whose key is its key; every expected key has an executor).
    7. The executors' runtime ids are exactly the operations' (step 11: emitted == selected).
    8. The executor's snapshot of f's runtime id is ``from_attested_pair(A's pf', e, E's
       generation)`` with pf' A's placement fragment of that id, and f is (pf, e, E's
       generation) with pf equal to pf' (``revalidate_fragments``: ``validates``), so
       ``from_fragment(f)`` equals it.
    A small call's inputs are inert (no code can run); a large call's watch re-decides the plan
    by every rule if any other code ran while the revalidation took this (binding.py).

    When it holds, the passes do not build what only §12.4 reads (session 30): the fragments'
    provenance keys (``revalidate_fragments(want_keys=False)``: its checks are the same), the views'
    ``row_of`` and runtime maps (``revalidate_views(side_tables=False)``). Without the maps each
    operation goes to the executor listing its runtime id *object* (``rw_ident``, the first one);
    the rules (§11.9) give it to the first executor listing an *equal* id. These are the same
    executor when no runtime id is listed by two executors of a side: step 6 refuses an id given
    twice across a side's bindings, and each executor lists ids of its own binding's evidence
    (rule 5 above); an operation whose id object no executor lists declines (the rules decide).
    Every check of §11.9 still runs in ``revalidate_views`` (exact executor, field and rank
    kinds, distinct view keys: per executor, a few hundred at Kimi scale); its cost is building the
    tables the plan keeps (ids hashed into view keys, operations into buckets), not the checks.
    ``revalidate_shapes`` (F4 field kinds) is not reducible this way: no step proves the exact
    kind of every field (``inert_inputs`` accepts a plain value of the wrong kind and does not run
    on watched calls; a str subclass with str's own methods binds), it reads the same fields any
    cheaper check would, and unselected replicas' fragments are read by no other pass."""
    return all(
        type(placement) is WeightPlacementManifest
        and _sealed_coverage_holds(placement)
        and _native.part_ranks_exact(
            placement.__dict__.get("parts"), WeightPlacementPart, PlacementFragment, ParallelRank
        )
        for placement in (target_placement, source_placement)
    )


def _attested_by_call() -> bool:
    """Whether a sealed bind call's own plan may take the attested-dict lookups of §9.6 step 11
    (``revalidate_fragments(attested_by_call=True)``) as proven, given that the caller checked
    the rest of the premise: the call was sealed (``binding._sealed``), its bound fragments were
    made by ``bind_regions_ordered`` (``attested_now``), the distinct fragments are that call's
    carried list (``revalidate_scan_carried`` took it: exactly those objects), and no later pass
    probes the attestations' dicts (``_sealed_side_holds``: §12.4 and §12.7 not run).

    Why it is sound. ``bind_regions_ordered`` (``bd_ordered_build``) made each bound fragment of
    a part from the part's placement fragment ``p`` and ``r = attestation._binding_dict[pfid]``,
    with ``pfid`` the exact str ``p.placement_fragment_id``, only after finding that
    ``attestation._placement_dict[pfid] is p`` (else it declines), and stored that very
    attestation in the fragment. Both dicts were read with ``getattr`` there, while
    ``revalidate_fragments`` reads the attestation's instance dict: the two are the same value
    when no class of ``RuntimeBindingAttestation``'s MRO defines either name (checked here, with
    the metaclass and ``__getattribute__`` rules of ``fields_unshadowed``). No code but the
    package's ran since (sealed), and the package never writes an attestation's dicts, nor a
    bound or placement fragment's fields, after constructing them. So the lookups of the pass
    would find, for every fragment, the very placement and binding it holds: what they check
    (``rf_equal`` is identity). The plain-key checks of the two dicts guard only probes of them
    (this pass's lookups, and ``revalidate_side`` / ``revalidate_coverage``, not run here), so
    they are skipped with the lookups. Every other check of the pass still runs (exact classes,
    owners, the plan identity of every attested placement, lease and instance against the
    evidence, ranks), and a watch that trips during the revalidation makes bind decide the plan
    again by every rule."""
    return bool(_fields_unshadowed(_ATTESTATION_DICTS))


def _sealed_spaces_apart(source_executors: tuple[Any, ...], target_executors: tuple[Any, ...]) -> bool:
    """Whether §12.5 (in-place protection) holds for the plan a *sealed* bind call built whose
    §12.4 is proven (``_sealed_side_holds``), given that the fast revalidation's passes before
    §12.5 accepted it: every executor of both sides is exactly ``ExecutorTransferPlan`` with an
    exact str ``instance_id`` in an exact instance dict, and no instance id is on both sides.
    O(executors): a few hundred reads at Kimi scale, where the pass it replaces reads every
    bound fragment and its runtime fragment (562k of each).

    The argument (X a side, f an operation fragment of X, A the attestation step 6 built for the
    kept binding f was bound from, E its evidence):
    1. f's ``instance_id`` is E's ``instance_id`` object: step 7 builds every bound fragment
       with the fences read from A's evidence (``_attested_bound_fragments``;
       csrc/binder.c ``bd_bound_new``), and no code but this package's ran since (sealed).
    2. The executor of X listing f's runtime id was built by step 11 from A, with E's
       ``instance_id`` (``_attested_executors``; the argument of ``_sealed_side_holds``, rule 6),
       and every operation fragment's runtime id is listed (rule 7: step 11 emitted exactly the
       selection, the operations' runtime ids).
    So the instance ids of X's operation fragments are among X's executors' ``instance_id``
    values, the same exact str objects read here. An address space is ``(instance_id,
    worker_id, device)``: with no instance id on both sides (exact str equality, as the space
    tuples compare), no space holds a source and a target allocation, so their sets cannot
    intersect. §12.6 is not covered: bind applied it (``check_physical_ranges`` is false in a
    sealed call; the caller runs the pass whenever it is true). Anything else (a shared
    instance, as an in-place reshard within one process would have): False, and the pass runs.
    A large call's watch re-decides the plan by every rule if any other code ran meanwhile."""
    instances: list[set[str]] = []
    for executors in (source_executors, target_executors):
        side: set[str] = set()
        for executor in executors:
            if type(executor) is not ExecutorTransferPlan:
                return False
            state = executor.__dict__
            instance = state.get("instance_id") if type(state) is dict else None
            if type(instance) is not str:
                return False
            side.add(instance)
        instances.append(side)
    return instances[0].isdisjoint(instances[1])


# revalidate_shapes' classes, in its order
_SHAPE_CLASSES = (
    WeightPlacementManifest,
    WeightPlacementPart,
    TensorDescriptor,
    PlacementFragment,
    RuntimeBindingEvidence,
    RuntimeBindingFragment,
    ParallelRank,
    SplitAxis,
    ReplicatedAxis,
    OwnershipAxis,
    _AttestedView,
    ExecutorTransferPlan,
    RuntimeBindingAttestation,
)


# The value classes whose fields the fast revalidation's C passes (and this module's reads of
# ``plan.__dict__``) take from instance state (C-owned layout slots, instance dicts), each with
# its field names: ``_native.fields_unshadowed`` proves per call that each still reads them so as
# an attribute (no descriptor or shadowing value planted on the class or a class of its MRO since
# import, the generic attribute lookup), else the rules decide (AUDIT39,
# tests/test_audit3838_class_descriptors.py). (``_AttestedView``'s slots: rs_view_inert.)
_STATE_FIELDS = tuple(
    (cls, tuple(sys.intern(item.name) for item in fields(cls)))
    for cls in (
        TransferPlan,
        TransferRegion,
        BoundWeightFragment,
        RuntimeBindingFragment,
        PlacementFragment,
        RuntimeFragmentSnapshot,
        ExecutorTransferPlan,
        RuntimeBindingAttestation,
        RuntimeBindingEvidence,
        WeightPlacementManifest,
        WeightPlacementPart,
        TensorDescriptor,
        ParallelRank,
        SplitAxis,
        ReplicatedAxis,
        OwnershipAxis,
    )
) + (
    # ParallelRank's equality and hash as imported (the passes compare ranks field by field:
    # rc_rank_differs, rs_rank_key, rw_rank_tuple), and no ``__ne__`` of its own (COV38/AUDIT39)
    (
        ParallelRank,
        (),
        tuple((name, ParallelRank.__dict__[name]) for name in ("__eq__", "__hash__")),
        ("__ne__",),
    ),
)
_fields_unshadowed = _native.fields_unshadowed
# The attestation's two dicts, read by getattr in bind_regions_ordered (see _attested_by_call)
_ATTESTATION_DICTS = ((RuntimeBindingAttestation, (sys.intern("_placement_dict"), sys.intern("_binding_dict"))),)

# Packed positions: one native int32 per operation (what csrc/revalidate.c reads from a bytes
# in place of a list of ints); None where ``array("i")`` is not 4 bytes wide.
_PACKED_CODE: Optional[str] = "i" if array("i").itemsize == 4 else None


def _packed_positions(source_of: list[int], target_of: list[int]) -> Optional[tuple[bytes, bytes]]:
    """The scan's two position lists packed as bytes of native int32 (the C passes read them
    in place of the lists and check every position against the fragment count, as for the
    lists), or None (an item beyond int32, not an int: the lists are kept)."""
    if _PACKED_CODE is None or type(source_of) is not list or type(target_of) is not list:
        return None
    try:
        return array(_PACKED_CODE, source_of).tobytes(), array(_PACKED_CODE, target_of).tobytes()
    except (OverflowError, TypeError):
        return None


def _compact_carried(carried: Any) -> Any:
    """``bind_regions``' carried facts (its fourth result; ``TransferPlan._from_bound_operations``
    takes them) in the compact form ``revalidate_scan_carried`` also accepts: both position lists
    packed (``_packed_positions``) and no boxes (the fast path reads each box from its region).
    For the bind path to call as soon as ``bind_regions`` returns, so the per-operation lists
    (an int object per distinct position, a box tuple per operation) are not alive through the
    executor projections that follow; the lists are emptied (that call's own, read by nothing
    else). Small plans' facts (``_COMPACT_MIN`` operations at most: packing would cost more
    than it saves) and anything else are returned as they are (the revalidation then decides
    as before)."""
    if type(carried) is not tuple or len(carried) not in (8, 9):
        return carried
    regions = carried[0]
    if type(regions) is not list or len(regions) <= _COMPACT_MIN:
        return carried
    source_of, target_of, boxes = carried[2:5]
    if type(boxes) is not list:
        return carried
    packed = _packed_positions(source_of, target_of)
    if packed is None:
        return carried
    source_of.clear()
    target_of.clear()
    boxes.clear()
    return carried[:2] + packed + (None,) + carried[5:]


def _position_list(positions: Any) -> Any:
    """Positions as the Python fallbacks read them: a list (packed ones unpacked)."""
    if type(positions) is bytes:
        assert _PACKED_CODE is not None
        return memoryview(positions).cast(_PACKED_CODE).tolist()
    return positions


def _operation_boxes(operations: tuple[Any, ...]) -> list[tuple[Any, Any]]:
    """Each operation's ``(overlap_offset, overlap_shape)`` (what ``revalidate_scan`` reads: the
    operations are exact ``TransferRegion`` instances there), for the Python fallbacks."""
    return [(op.overlap_offset, op.overlap_shape) for op in operations]


# Operation counts above which _fast_revalidate_live keeps the index tables as arrays (indices up
# to 256 are CPython's cached small ints).
_COMPACT_MIN = 257


def _compact_index_lists(table: dict[Any, Any]) -> None:
    """Each value of ``table`` (a list of operation indices, or their packed native int64 bytes)
    replaced by an int64 array of the same items, in place (``OperationViews`` reads them with
    ``tuple()``). The fast path's own dict, from ``revalidate_views``."""
    for key, indices in table.items():
        table[key] = array("q", indices)


_Row = tuple[Any, tuple[Any, ...], list[int]]


def _fast_side_consistent(
    frags: list[Any],
    keys: list[Any],
    runtime_ids: list[Any],
    side_of: list[int],
    runtime: dict[Any, _Row],
    rows: list[_Row],
    attested: dict[int, tuple[Any, Any, _AttestedView]],
    used: set[int],
) -> bool:
    """``_validate_executor_consistency`` of one live side (all fragments bound).

    ``attested`` holds the fragments' attestations (by ``id``, alive in the fragments), each
    already checked: exact class, placement of the plan's identity.

    With distinct executor keys, "every executor's view indices equal the operations whose
    fragment key is the executor's key, and every fragment key is an executor's" is exactly
    "every operation's view owner (the row its runtime fragment id selects) has the key of the
    operation's fragment"; both sides of that depend on the fragment only, so it is checked
    once per distinct fragment (keys matched by dict lookup, as the rules do)."""
    by_key = {row[1]: row for row in rows}
    if len(by_key) != len(rows):  # a repeated provenance key
        return False
    unique = list(dict.fromkeys(side_of))
    for position in unique:
        row = runtime.get(runtime_ids[position])
        if row is None or by_key.get(keys[position]) is not row:
            return False
    active = {id(frags[position].attestation.placement) for position in unique}
    snapshot_owner: dict[Any, Any] = {}
    proven: dict[int, dict[str, Any]] = {}
    for estate, key, bucket in rows:
        if not _executor_state_typed(estate):
            return False
        attestation = estate["attestation"]
        if type(attestation) is not RuntimeBindingAttestation:
            return False
        if id(attestation.placement) not in active:  # a placement the fragment loop checked
            return False
        entry = attested.get(id(attestation))
        view = _attested_view(attestation) if entry is None else entry[2]
        worker_id = estate["worker_id"]
        if key != view.key_base + (worker_id, _rank_key(view.part_rank)):
            return False
        snapshots = estate["fragment_snapshots"]
        fragment_ids = estate["fragment_ids"]
        objects = view.objects_by_worker
        every = fragment_ids == view.ids_by_worker.get(worker_id)
        if every and objects is not None:
            # Snapshot ``==`` compares field values: each must first be exactly typed.
            if not all(map(_snapshot_typed, snapshots)) or objects[worker_id] != snapshots:
                return False
        else:
            attested_rows = view.rows_by_worker.get(worker_id, ())
            if not every:
                wanted = set(fragment_ids)
                attested_rows = tuple(row for row in attested_rows if row[0] in wanted)
            expected_states = [row[1] for row in attested_rows]
            if len(attested_rows) != len(snapshots) or not all(
                map(_typed_snapshot_matches, snapshots, expected_states)
            ):
                return False
            proven.update(zip(map(id, snapshots), expected_states))
        for snapshot in snapshots:
            fragment_id = snapshot.fragment_id
            if fragment_id in snapshot_owner:
                return False
            snapshot_owner[fragment_id] = snapshot
        if bucket:
            used.add(id(estate))
    operation_ids = {runtime_ids[position] for position in unique}
    if len(snapshot_owner) != len(operation_ids) or not operation_ids.issuperset(snapshot_owner):
        return False
    for position in unique:
        fragment = frags[position]
        owned = snapshot_owner[runtime_ids[position]]
        view = attested[id(fragment.attestation)][2]
        objects_by_pfid = view.object_by_pfid()
        pfid = fragment.placement.placement_fragment_id
        attested_state = view.expected_by_pfid.get(pfid)
        generation = fragment.lease_generation
        if type(generation) is not int:  # (True or 1.0 forged in place equal 1: the rules refuse them)
            return False
        if attested_state is not None and generation == view.generation:
            if (
                owned is objects_by_pfid.get(pfid)
                or proven.get(id(owned)) is attested_state
                or _typed_snapshot_matches(owned, attested_state)
            ):
                continue
            return False
        if RuntimeFragmentSnapshot.from_fragment(fragment) != owned:
            return False
    return True


def _fast_target_coverage(
    placement: WeightPlacementManifest,
    frags: list[Any],
    target_of: list[int],
    boxes: list[tuple[tuple[int, ...], tuple[int, ...]]],
    rows: list[tuple[Any, tuple[Any, ...], list[int]]],
    attested: dict[int, tuple[Any, Any, _AttestedView]],
    used: set[int],
) -> bool:
    """``_validate_bound_target_coverage`` (executor states stand for the executors in ``used``)."""
    parts: dict[Any, Any] = {part.participant_id: part for part in placement.parts}
    boxes_by_fragment: dict[Any, list[tuple[tuple[int, ...], tuple[int, ...]]]] = {}
    op_participants: set[str] = set()
    participant_of: dict[int, str] = {}
    for index, position in enumerate(target_of):
        fragment = frags[position]
        attestation = fragment.attestation
        participant = participant_of.get(id(attestation))
        if participant is None:
            if not (attestation.placement is placement or attestation.placement == placement):
                return False
            participant = attestation.evidence.participant_id
            if participant not in parts:
                return False
            participant_of[id(attestation)] = participant
        op_participants.add(participant)
        member = (participant, fragment.placement.placement_fragment_id)
        bucket = boxes_by_fragment.get(member)
        if bucket is None:
            boxes_by_fragment[member] = [boxes[index]]
        else:
            bucket.append(boxes[index])
    seen: set[tuple[str, str]] = set()
    digest = placement.digest
    placement_id = placement.placement_id
    executor_participants: set[str] = set()
    for estate, _key, _bucket in rows:
        participant_id = estate["participant_id"]
        pair = (participant_id, estate["worker_id"])
        if pair in seen:
            return False
        seen.add(pair)
        executor_participants.add(participant_id)
        part = parts.get(participant_id)
        attestation = estate["attestation"]
        if (
            part is None
            or attestation is None
            or estate["rank"] != part.rank
            or estate["placement_id"] != placement_id
            or estate["placement_digest"] != digest
            or not (attestation.placement is placement or attestation.placement == placement)
            or attestation.evidence.participant_id != participant_id
            or attestation.evidence.instance_id != estate["instance_id"]
            or attestation.evidence.lease_id != estate["runtime_lease_id"]
        ):
            return False
        entry = attested.get(id(attestation))
        view = _attested_view(attestation) if entry is None else entry[2]
        expected_ids = view.evidence_ids_by_worker.get(estate["worker_id"], ())
        if estate["fragment_ids"] != expected_ids or id(estate) not in used:
            return False
    if executor_participants != op_participants:
        return False
    containers: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
    members_list: list[list[tuple[tuple[int, ...], tuple[int, ...]]]] = []
    for participant in sorted(executor_participants):
        for fragment in parts[participant].fragments:
            offset = fragment.global_offset
            shape = fragment.local_shape
            members = boxes_by_fragment.get((participant, fragment.placement_fragment_id), [])
            if len(members) == 1 and offset and members[0][0] == offset and members[0][1] == shape:
                continue
            containers.append((offset, shape))
            members_list.append(members)
    return not containers or exact_cover_failures(containers, members_list) is None


_INIT_FIELDS = tuple(f.name for f in fields(TransferPlan) if f.init)
# As the generated __init__ is annotated (this module's annotations are strings).
TransferPlan.__init__.__annotations__["return"] = None


def _reduce_transfer_plan(plan: TransferPlan) -> tuple[Any, ...]:
    """``bound_pickle.reduce_transfer_plan``, imported on first use (bound_pickle imports this
    module) and then called directly."""
    global _reduce_transfer_plan
    from .bound_pickle import reduce_transfer_plan

    _reduce_transfer_plan = reduce_transfer_plan
    return reduce_transfer_plan(plan)


def _reduce_ex_transfer_plan(plan: TransferPlan, protocol: Any) -> tuple[Any, ...]:
    """``bound_pickle.reduce_ex_transfer_plan``, imported on first use (as above)."""
    global _reduce_ex_transfer_plan
    from .bound_pickle import reduce_ex_transfer_plan

    _reduce_ex_transfer_plan = reduce_ex_transfer_plan
    return reduce_ex_transfer_plan(plan, protocol)


__all__ = ["ExecutorTransferPlan", "RuntimeFragmentSnapshot", "TransferPlan"]


# ---------------------------------------------------------------------------------------
# Exact field types before the rules of ``_revalidate_rules`` do arithmetic (fuzz finding F2):
# regions, executors and snapshots restored by default pickling (spec §13), or forged with
# ``object.__new__`` + ``__dict__`` and passed to ``dataclasses.replace``, never ran their own
# checks. A field that is absent or not of its constructed type raises the spec message of the
# rule that refuses it (values are left to the rules: the first failure of a well-typed value
# is unchanged). Only the rule-by-rule path runs these (the C fast path declines on odd types).

_REGION_TUPLES = ("overlap_offset", "overlap_shape", "outer_loop_counts", "source_strides", "target_strides")
_REGION_INTS = ("source_base_offset", "target_base_offset", "inner_bytes")


def _int_items(value: Any) -> bool:
    """True for a stored int-tuple field: a tuple (what construction stores) or a list, of
    exact ints (spec §8.4 step 1 message otherwise)."""
    cls = type(value)
    if cls is not tuple and cls is not list:
        return False
    for item in value:
        if type(item) is not int:
            return False
    return True


def _require_typed_fragment(fragment: Any) -> None:
    """The fields of an operation's source or target fragment the rules read (§9.3, §4.4,
    §3.3, §5.2 messages)."""
    if isinstance(fragment, StoredFragmentSnapshot):
        from ..storage_manifest import _require_typed_members

        _require_typed_members((), (fragment,))
        return
    # A bound fragment's set fields (C layout: read from its slots); anything else's instance dict.
    state = (
        _bound_fields_state(fragment)
        if isinstance(fragment, BoundWeightFragment)
        else getattr(fragment, "__dict__", None)
    )
    if type(state) is not dict:
        raise ValueError("bound fragment placement is invalid")
    if not isinstance(state.get("placement"), PlacementFragment):
        raise ValueError("bound fragment placement is invalid")
    if not isinstance(state.get("binding"), RuntimeBindingFragment):
        raise ValueError("bound fragment runtime binding is invalid")
    require_fields(state["placement"], PLACEMENT_FRAGMENT_FIELDS)
    require_fields(state["binding"], RUNTIME_FRAGMENT_FIELDS)
    for name, message in (
        ("instance_id", "bound fragment instance_id must be non-empty"),
        ("runtime_lease_id", "bound fragment runtime_lease_id must be non-empty"),
    ):
        if type(state.get(name)) is not str:
            raise ValueError(message)
    if type(state.get("lease_generation")) is not int:
        raise ValueError("bound fragment lease_generation must fit in an unsigned 64-bit integer")
    attestation = state.get("attestation")
    if attestation is not None and not isinstance(attestation, RuntimeBindingAttestation):
        raise ValueError("bound fragment runtime attestation is invalid")


def _require_attested_fences(operations: tuple[Any, ...]) -> None:
    """Beyond the reference, after every spec rule and the region recheck (so the first
    failure of anything else is unchanged): each bound fragment's fence fields (its slots),
    ``instance_id``, ``runtime_lease_id`` and ``lease_generation``, pass the constructor's
    checks (spec §9.3 steps 6 and 9, in its order, with its messages): a non-empty str, a
    non-empty str, an int in the unsigned 64-bit range, all three equal to its attestation's
    evidence. A field forged in place after construction would otherwise pass (``replace``:
    no spec rule compares the instance id or the lease, and the generation's comparison takes
    ``True`` for ``1``; the fast path's ``revalidate_fragments`` / ``rs_fragment`` decline
    such a fragment). The rules before proved every bound fragment attested."""
    for op in operations:
        for fragment in (op.source, op.target):
            if not isinstance(fragment, BoundWeightFragment):
                continue  # a stored source
            state = _bound_fields_state(fragment)
            instance_id = state.get("instance_id")
            if type(instance_id) is not str or not instance_id:
                raise ValueError("bound fragment instance_id must be non-empty")
            lease = state.get("runtime_lease_id")
            if type(lease) is not str or not lease:
                raise ValueError("bound fragment runtime_lease_id must be non-empty")
            generation = state.get("lease_generation")
            if type(generation) is not int or generation < 0 or generation > _U64_MAX:
                raise ValueError("bound fragment lease_generation must fit in an unsigned 64-bit integer")
            evidence = fragment.attestation.evidence
            if (
                instance_id != evidence.instance_id
                or lease != evidence.lease_id
                or generation != evidence.generation
            ):
                raise ValueError("bound fragment runtime fence differs from attestation")


def _require_typed_region(op: Any, source: Any, target: Any) -> None:
    """Spec §8.4 type rules of one operation (steps 1, 2 and 7, in that order), then its two
    fragments' fields, before ``validate_bounds`` adds them up."""
    for name in _REGION_TUPLES:
        if not _int_items(getattr(op, name, None)):
            raise ValueError(f"transfer region {name} must contain integers")
    tensor_id = getattr(op, "tensor_id", None)
    if type(tensor_id) is not str or not tensor_id:
        if not tensor_id:
            raise ValueError("transfer region tensor_id must not be empty")
        if source is None or getattr(source, "tensor_id", None) != tensor_id:
            raise ValueError("transfer region tensor mismatch")
    for name in _REGION_INTS:
        if type(getattr(op, name, None)) is not int:
            raise ValueError(f"transfer region {name} must be an integer")
    _require_typed_fragment(source)
    _require_typed_fragment(target)


_EXECUTOR_IDS = ("instance_id", "placement_id", "participant_id", "worker_id")


def _require_typed_executor(executor: Any) -> None:
    """Spec §9.5 type rules of one executor (restored from its field dict): every field present
    with its constructed type, snapshots typed (§9.4 follows the source fields' types)."""
    state = getattr(executor, "__dict__", None)
    if type(state) is not dict:
        raise ValueError("transfer plan has invalid canonical executor metadata")
    for name in _EXECUTOR_IDS:
        if type(state.get(name)) is not str:
            raise ValueError("executor plan identifiers must not be empty")
    if type(state.get("placement_digest")) is not str:
        raise ValueError("executor plan placement digest must be SHA-256")
    lease = state.get("runtime_lease_id", 0)  # absent: not None, not a str
    if lease is not None and type(lease) is not str:
        raise ValueError("executor plan runtime lease ID must be non-empty")
    fragment_ids = state.get("fragment_ids")
    if type(fragment_ids) is not tuple or not all(type(item) is str for item in fragment_ids):
        raise ValueError("executor plan identifiers must not be empty")
    if not isinstance(state.get("rank"), ParallelRank) or _rank_type_failure(state["rank"]):
        raise ValueError("rank must be a ParallelRank")
    snapshots = state.get("fragment_snapshots")
    if type(snapshots) is not tuple:
        raise ValueError("executor plan has invalid runtime fragment snapshots")
    for snapshot in snapshots:
        if not isinstance(snapshot, RuntimeFragmentSnapshot) or state_type_failure(
            _snapshot_fields_state(snapshot), _SNAPSHOT_TYPES
        ):
            raise ValueError("executor plan has invalid runtime fragment snapshots")
    if "attestation" not in state:
        raise ValueError("executor plan runtime attestation is invalid")
    attestation = state["attestation"]
    if attestation is not None and not isinstance(attestation, RuntimeBindingAttestation):
        raise ValueError("executor plan runtime attestation is invalid")


_SNAPSHOT_TYPES = (
    ("placement_fragment_id", "str"),
    ("fragment_id", "str"),
    ("tensor_id", "str"),
    ("global_offset", "ints"),
    ("local_shape", "ints"),
    ("address", "int"),
    ("nbytes", "int"),
    ("worker_id", "str"),
    ("endpoint", "str"),
    ("device", "str"),
    ("itemsize", "int"),
    ("strides_bytes", "ints"),
    ("storage_address", "int"),
    ("storage_nbytes", "int"),
    ("storage_offset_bytes", "int"),
    ("lease_generation", "int"),
)


def _rank_type_failure(rank: Any) -> Optional[str]:
    """The message for a rank whose fields are not exact ints (``None`` when they are)."""
    return field_type_failure(rank, _RANK_TYPES)


_RANK_TYPES = (("dp", "int"), ("tp", "int"), ("pp", "int"), ("ep", "int"))
_IDENTITY_STRS = ("namespace", "resource_id", "revision", "group_id", "manifest_key", "content_sha256")


def _require_typed_stored_source(plan: Any) -> None:
    """A source manifest identity restored from its field dict (spec §13) has every field, with
    its type (else the identity is invalid, §9.6 step 5), before it is compared."""
    identity = plan.__dict__.get("source_manifest_identity")
    if identity is None:
        return
    state = getattr(identity, "__dict__", None)
    if (
        type(state) is not dict
        or any(type(state.get(name)) is not str for name in _IDENTITY_STRS)
        or type(state.get("weight_generation")) is not int
    ):
        raise ValueError("transfer plan source manifest identity is invalid")


_LIMIT_NAMES = ("max_transfer_regions", "max_segments_per_region", "max_total_lowered_segments")


def _require_typed_limits(limits: Any) -> None:
    """A ``PlanningLimits`` restored from its field dict has every limit as an exact int (spec
    §8.3 message), before the budgets are compared. Other values: the plan's own rule."""
    if not isinstance(limits, PlanningLimits):
        return
    state = getattr(limits, "__dict__", None)
    for name in _LIMIT_NAMES:
        if type(state) is not dict or type(state.get(name)) is not int:
            raise ValueError(f"planning limit {name} must be a positive integer")


def _require_loop_ranks(operations: tuple[Any, ...]) -> None:
    """Spec §8.4 steps 8-10 before the target physical-range sweep walks the loops (a forged
    region reaches that sweep before its own recheck, and the sweep's kernel refuses negative
    or out-of-range extents with its own message): base offsets non-negative, ``inner_bytes``
    positive, equal loop ranks, positive counts, non-negative strides. With these and
    ``validate_bounds`` every walked extent lies inside its fragment."""
    for op in operations:
        if op.source_base_offset < 0 or op.target_base_offset < 0:
            raise ValueError("transfer region base offsets must be non-negative")
        if op.inner_bytes <= 0:
            raise ValueError("transfer region inner_bytes must be positive")
        outer = op.outer_loop_counts
        source_strides = op.source_strides
        target_strides = op.target_strides
        if not len(outer) == len(source_strides) == len(target_strides):
            raise ValueError("transfer region outer loop rank mismatch")
        if any(count <= 0 for count in outer):
            raise ValueError("transfer region outer loop counts must be positive")
        if any(stride < 0 for stride in source_strides) or any(stride < 0 for stride in target_strides):
            raise ValueError("transfer region strides must be non-negative")


def _require_typed_attestations(operations: tuple[Any, ...], executors: tuple[Any, ...]) -> None:
    """Every attestation the rules below read (operation fragments', executors') holds a
    placement and evidence of the shape its validated-state routine guarantees (an attestation
    edited in place with ``object.__setattr__`` and passed to ``replace``): else the §9.2
    message of the first failure (placement, then evidence) or the field's own."""
    seen: set[int] = set()
    attestations = []
    for op in operations:
        for fragment in (op.source, op.target):
            if isinstance(fragment, BoundWeightFragment):
                attestations.append(_bound_fields_state(fragment).get("attestation"))
    attestations.extend(executor.__dict__.get("attestation") for executor in executors)
    for attestation in attestations:
        if not isinstance(attestation, RuntimeBindingAttestation) or id(attestation) in seen:
            continue
        seen.add(id(attestation))
        state = attestation.__dict__
        placement = state.get("placement")
        if not isinstance(placement, WeightPlacementManifest):
            raise ValueError("runtime attestation placement is invalid")
        evidence = state.get("evidence")
        if not isinstance(evidence, RuntimeBindingEvidence):
            raise ValueError("runtime attestation evidence is invalid")
        failure = evidence_shape_failure(evidence) or placement_shape_failure(placement, declared_tensors=False)
        if failure is not None:
            raise ValueError(failure)

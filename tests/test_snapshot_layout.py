"""``RuntimeFragmentSnapshot`` stored in a C-owned layout (representation change, step 2).

Public behaviour is the dict-backed frozen dataclass's: fields and their order, ``__init__``,
``repr``, ``==``, ``hash``, ``replace``, ``asdict``, copies, frozen errors, weak references, and
pickles byte-equal to those the dict-backed class wrote (``tests/data/snapshot_pickles_r15.json``,
written by the build before the change), loading both ways. The C paths that build or read
snapshots (``attested_executors``, ``restore_executors``, ``encode_record``, the revalidation's
snapshot comparison) read the layout directly when the per-call check accepts the class, and
decline to their original path (or to Python) for anything else: a forged class, a subclass, an
emptied field, a field forged to another value."""

from __future__ import annotations

import copy
import dataclasses
import gc
import pickle
import sys
from typing import Any

import pytest

from layout_classes import check_frozen_value, check_layout_instance, data_fixture, data_module, written_since_r66
from test_native_binder import _part, _world
from test_native_binder_project import CLASSES
from test_native_binder_snapshot_reads import _attestation
from test_binding_attacks import World

from mooncake.reshard import _native
from mooncake.reshard._layout import layout_dataclass, layout_fields, value_base
from mooncake.reshard.weight import RuntimeFragmentSnapshot, TransferPlan
from mooncake.reshard.weight._planner import bound_pickle
from mooncake.reshard.weight._planner.bound_contracts import (
    ExecutorTransferPlan,
    _snapshot_fields_state,
    _snapshot_matches,
)
from mooncake.reshard.weight.types import ParallelRank

FIXTURE = data_fixture("snapshot_pickles_r15")
WRITTEN = written_since_r66("snapshot_pickles_r15")
NAMES = tuple(f.name for f in dataclasses.fields(RuntimeFragmentSnapshot))

# The objects the fixture pickled, built by the script that wrote it (so the same constants are
# shared, and pickle's memo references the same objects).
_maker = data_module("make_snapshot_pickles_r15")
VALUES: dict[str, Any] = _maker.VALUES
SNAP, SNAP2, EXECUTOR = _maker.snap, _maker.snap2, _maker.ex


def _snapshot(**changes: Any) -> RuntimeFragmentSnapshot:
    return RuntimeFragmentSnapshot(**{**VALUES, **changes})


def test_fixture_values() -> None:
    assert {k: list(v) if isinstance(v, tuple) else v for k, v in VALUES.items()} == FIXTURE["values"]


# ---- the class ------------------------------------------------------------------------------


def test_layout_is_pinned_to_the_dataclass_fields() -> None:
    assert layout_fields(RuntimeFragmentSnapshot) == NAMES == tuple(VALUES)
    assert len(NAMES) == 16
    assert _native.layout_check(RuntimeFragmentSnapshot, 16)
    # the C readers' own copies of the names (checked per call against the layout)
    assert bound_pickle._SNAPSHOT_FIELDS == NAMES


def test_instances_have_no_dict_and_are_small() -> None:
    check_layout_instance(_snapshot(), 16)


def test_dataclass_behaviour() -> None:
    snap = _snapshot()
    assert [f.name for f in dataclasses.fields(snap)] == list(NAMES)
    assert snap == _snapshot() and hash(snap) == hash(_snapshot())
    assert snap != _snapshot(address=1) and snap != _snapshot(lease_generation=8)
    assert repr(snap) == "RuntimeFragmentSnapshot(" + ", ".join(f"{k}={v!r}" for k, v in VALUES.items()) + ")"
    assert dataclasses.asdict(snap) == VALUES
    assert dataclasses.replace(snap, device="cuda:1") == _snapshot(device="cuda:1")
    check_frozen_value(snap, "address", "address")
    with pytest.raises(TypeError):
        RuntimeFragmentSnapshot(**{k: v for k, v in VALUES.items() if k != "device"})  # type: ignore[call-arg]
    assert _snapshot_fields_state(snap) == snap.__getstate__() == VALUES
    # the state's keys are the interned field names a dict-backed __dict__ held (same pickle memo)
    assert all(key is sys.intern(key) for key in snap.__getstate__())
    assert all(key is sys.intern(key) for key in _snapshot_fields_state(snap))


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickles_are_byte_equal_to_the_dict_backed_class(protocol: int) -> None:
    snap = _snapshot()
    assert pickle.dumps(snap, protocol).hex() == FIXTURE["snapshot"][str(protocol)]
    # (the executor's rank pickles by default since session 66: the bytes this build writes)
    assert pickle.dumps(EXECUTOR, protocol).hex() == WRITTEN["executor"][str(protocol)]


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_dict_backed_pickles_load(protocol: int) -> None:
    loaded = pickle.loads(bytes.fromhex(FIXTURE["snapshot"][str(protocol)]))
    assert type(loaded) is RuntimeFragmentSnapshot and loaded == _snapshot()
    assert not hasattr(loaded, "__dict__") and loaded.__getstate__() == VALUES
    for written in (FIXTURE, WRITTEN):
        executor = pickle.loads(bytes.fromhex(written["executor"][str(protocol)]))
        assert executor == EXECUTOR
    assert all(not hasattr(s, "__dict__") for s in executor.fragment_snapshots)


def test_partial_and_hostile_states() -> None:
    snap = _snapshot()
    emptied = copy.copy(snap)
    object.__delattr__(emptied, "endpoint")
    state = emptied.__getstate__()
    assert "endpoint" not in state and len(state) == 15
    restored = pickle.loads(pickle.dumps(emptied))
    with pytest.raises(AttributeError):
        restored.endpoint
    assert not _snapshot_matches(emptied, VALUES) and _snapshot_matches(snap, VALUES)
    for key in ("forged", "placement_f1agment_id", "__weakref__", "__dict__", 1, None):
        blank = RuntimeFragmentSnapshot.__new__(RuntimeFragmentSnapshot)
        state = {**VALUES, key: 1}
        with pytest.raises(ValueError, match=r"^RuntimeFragmentSnapshot pickle state is invalid: unknown field"):
            blank.__setstate__(state)
        assert blank.__getstate__() == {}  # refused before anything was stored
    for state in ([1, 2], None, (VALUES, None)):
        with pytest.raises(ValueError, match=r"^RuntimeFragmentSnapshot pickle state is invalid: a \w+, not a dict$"):
            RuntimeFragmentSnapshot.__new__(RuntimeFragmentSnapshot).__setstate__(state)


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickle_with_a_renamed_field_is_refused_with_value_error(protocol: int) -> None:
    # (found by the pickle fuzzer in a dict-format plan pickle: the layout has no __dict__ to hold
    # an unknown state key, and the load must fail as a contract rejection, not AttributeError)
    payload = pickle.dumps(_snapshot(), protocol=protocol)
    forged = payload.replace(b"placement_fragment_id", b"placement_f1agment_id")
    assert forged != payload
    with pytest.raises(ValueError, match="^RuntimeFragmentSnapshot pickle state is invalid: unknown field 'placement_f1agment_id'$"):
        pickle.loads(forged)


# ---- attested_executors: built in the layout; forged classes decline ---------------------------


def _rows(snapshot_cls: type) -> Any:
    placement, bindings = _world(tensors=3)
    binding = bindings[0]
    part = _part(placement, binding)
    identity = (placement.placement_id, part.participant_id, placement.digest, part.rank)
    attestation = _attestation(placement, binding)
    classes = (CLASSES[0], snapshot_cls, *CLASSES[2:5])
    return _native.attested_executors(*classes, attestation, *identity)


def test_attested_executors_build_layout_snapshots() -> None:
    table, rows = _rows(RuntimeFragmentSnapshot)
    assert rows
    for _worker, snapshots, _executor in rows:
        for snap in snapshots:
            assert type(snap) is RuntimeFragmentSnapshot and not hasattr(snap, "__dict__")
            assert list(snap.__getstate__()) == list(NAMES)
            assert not gc.is_tracked(snap)
            assert RuntimeFragmentSnapshot(**snap.__getstate__()) == snap


def _other_layout(names: tuple[str, ...], label: str) -> type:
    annotations = {name: Any for name in names}
    namespace = {"__annotations__": annotations, "__slots__": ("__weakref__",), "__module__": __name__}
    return layout_dataclass(type(label, (value_base(label, names),), namespace))


def test_attested_executors_decline_layouts_they_do_not_accept() -> None:
    reordered = _other_layout(NAMES[1:] + NAMES[:1], "Reordered")
    renamed = _other_layout(NAMES[:-1] + ("generation",), "Renamed")
    shorter = _other_layout(NAMES[:-1], "Shorter")

    class Shadowing(RuntimeFragmentSnapshot):  # a property shadows a field: the check declines
        __slots__ = ()

        @property  # type: ignore[misc]
        def address(self) -> int:  # type: ignore[override]
            return 0

    for cls in (reordered, renamed, shorter, Shadowing):
        assert _rows(cls) is None  # the Python path decides (no dict to fill, no layout to trust)


# ---- restore_executors / encode_record --------------------------------------------------------


@pytest.fixture(scope="module")
def plan() -> TransferPlan:
    return World().bind()


def test_restore_executors_builds_layout_snapshots_and_declines_others(plan: TransferPlan) -> None:
    record = bound_pickle.reduce_transfer_plan(plan)[1]
    table = record[9]
    attestations = [bound_pickle._restore_attestation(record[6][i], record[6][i + 1]) for i in range(0, len(record[6]), 2)]
    names = bound_pickle._EXECUTOR_FIELDS
    got = _native.restore_executors(table, attestations, ExecutorTransferPlan, RuntimeFragmentSnapshot, names, NAMES)
    assert got == bound_pickle._python_restore_executors(table, attestations)
    for executor in got:
        for snap in executor.fragment_snapshots:
            assert type(snap) is RuntimeFragmentSnapshot and not hasattr(snap, "__dict__")
            assert not gc.is_tracked(snap)
    reordered = _other_layout(NAMES[1:] + NAMES[:1], "Reordered2")
    # field names that are not the class's layout: declined (no instance dict to fill)
    assert _native.restore_executors(table, attestations, ExecutorTransferPlan, reordered, names, NAMES) is None
    # the class's own names in another order than given: declined as well
    assert _native.restore_executors(
        table, attestations, ExecutorTransferPlan, RuntimeFragmentSnapshot, names, NAMES[::-1]
    ) is None


def test_encode_record_reads_layout_snapshots_and_declines_emptied_ones(plan: TransferPlan) -> None:
    classes = (
        bound_pickle.TransferRegion, bound_pickle.BoundWeightFragment, ExecutorTransferPlan,
        RuntimeFragmentSnapshot, bound_pickle.RuntimeBindingAttestation,
    )
    field_names = (bound_pickle._REGION_FIELDS, bound_pickle._FRAGMENT_FIELDS, bound_pickle._EXECUTOR_FIELDS, NAMES)
    args = (plan.operations, plan.source_executors, plan.target_executors)
    tables = _native.encode_record(*args, *classes, *field_names)
    state = {name: None for name in bound_pickle._PLAN_FIELDS}
    assert tables is not None and tables == bound_pickle._encode(state, *args)[6:]
    emptied = copy.copy(plan.target_executors[0].fragment_snapshots[0])
    object.__delattr__(emptied, "nbytes")
    executor = plan.target_executors[0]
    forged = copy.copy(executor)
    object.__setattr__(forged, "fragment_snapshots", (emptied,) + executor.fragment_snapshots[1:])
    targets = (forged,) + plan.target_executors[1:]
    assert _native.encode_record(plan.operations, plan.source_executors, targets, *classes, *field_names) is None
    with pytest.raises(bound_pickle._Irregular):
        bound_pickle._encode(state, plan.operations, plan.source_executors, targets)
    # a class whose layout is not the given names: the dict path, which finds no dict (leaf)
    assert _native.encode_record(*args, *classes[:3], _other_layout(NAMES, "Same"), classes[4], *field_names) is None


def test_plan_with_an_emptied_snapshot_field_is_refused_on_load(plan: TransferPlan) -> None:
    executor = plan.target_executors[0]
    emptied = copy.copy(executor.fragment_snapshots[0])
    object.__delattr__(emptied, "device")
    forged_executor = copy.copy(executor)
    object.__setattr__(forged_executor, "fragment_snapshots", (emptied,) + executor.fragment_snapshots[1:])
    forged = copy.copy(plan)
    object.__setattr__(forged, "target_executors", (forged_executor,) + plan.target_executors[1:])
    with pytest.raises(ValueError, match="executor plan has invalid runtime fragment snapshots"):
        pickle.loads(pickle.dumps(forged, protocol=pickle.HIGHEST_PROTOCOL))


def test_restored_plans_hold_layout_snapshots(plan: TransferPlan) -> None:
    for protocol in (2, 4, pickle.HIGHEST_PROTOCOL):
        restored = pickle.loads(pickle.dumps(plan, protocol=protocol))
        assert restored == plan
        for executor in restored.source_executors + restored.target_executors:
            for snap in executor.fragment_snapshots:
                assert type(snap) is RuntimeFragmentSnapshot and not hasattr(snap, "__dict__")



def test_per_call_site_memo_follows_the_class_passed(plan: TransferPlan) -> None:
    """The C call sites remember the class they accepted last (csrc/layout.h mr_layout_memo):
    alternating classes are each built exactly, a declined class is declined on every call."""
    record = bound_pickle.reduce_transfer_plan(plan)[1]
    table = record[9]
    attestations = [bound_pickle._restore_attestation(record[6][i], record[6][i + 1]) for i in range(0, len(record[6]), 2)]
    names = bound_pickle._EXECUTOR_FIELDS

    class Sub(RuntimeFragmentSnapshot):  # same layout, no shadowing: accepted
        __slots__ = ()

    class Shadowing(RuntimeFragmentSnapshot):
        __slots__ = ()

        @property  # type: ignore[misc]
        def device(self) -> str:  # type: ignore[override]
            return "shadowed"

    for cls in (RuntimeFragmentSnapshot, Sub, RuntimeFragmentSnapshot, Shadowing, Shadowing, Sub, RuntimeFragmentSnapshot):
        got = _native.restore_executors(table, attestations, ExecutorTransferPlan, cls, names, NAMES)
        if cls is Shadowing:
            assert got is None
            continue
        assert got is not None
        snaps = [s for executor in got for s in executor.fragment_snapshots]
        assert snaps and all(type(s) is cls for s in snaps)
        reference = bound_pickle._python_restore_executors(table, attestations)
        assert [s.__getstate__() for e in reference for s in e.fragment_snapshots] == [s.__getstate__() for s in snaps]
        for executor in plan.target_executors:
            row = (executor,)
            assert _native.encode_record(
                (), (), row, bound_pickle.TransferRegion, bound_pickle.BoundWeightFragment, ExecutorTransferPlan, cls,
                bound_pickle.RuntimeBindingAttestation, bound_pickle._REGION_FIELDS, bound_pickle._FRAGMENT_FIELDS,
                names, NAMES,
            ) is None or cls is RuntimeFragmentSnapshot  # a snapshot of another class is not described


def test_graph_unpack_untracks_layout_instances_holding_untracked_objects() -> None:
    """csrc/common.h mr_untrack_values: an instance without a __dict__ whose fields hold an
    untracked collector-type object (not a tuple) is judged by its values (it raised
    AttributeError before, materializing a dict the layout does not have)."""
    from layout_classes import SNAPSHOT_FIELDS, SnapshotD, SnapshotL, snapshot_values

    from mooncake.reshard._layout import layout_builder

    build = layout_builder(SnapshotL)
    objects = []
    for i in range(3000):  # a bulk restore (the codec untracks from MR_GC_BULK_MIN objects on)
        values = list(snapshot_values(i))
        values[2] = build(*snapshot_values())  # untracked, of a collector type, not a tuple
        assert not gc.is_tracked(values[2])
        twin = SnapshotD.__new__(SnapshotD)  # the same fields, dict-backed: what graph_pack writes
        twin.__dict__.update(zip(SNAPSHOT_FIELDS, values))
        objects.append(twin)
    packed = _native.graph_pack(tuple(objects), ((SnapshotD, SNAPSHOT_FIELDS, 0),))
    assert packed is not None
    restored = _native.graph_unpack(*packed, ((SnapshotL, SNAPSHOT_FIELDS, 0),))
    assert len(restored) == 3000 and all(type(o) is SnapshotL for o in restored)
    assert not any(gc.is_tracked(o) for o in restored)
    assert [o.__getstate__() for o in restored] == [vars(t) for t in objects]
    # a tracked container value keeps its holder tracked
    values = list(snapshot_values())
    values[2] = [1]
    twin = SnapshotD.__new__(SnapshotD)
    twin.__dict__.update(zip(SNAPSHOT_FIELDS, values))
    packed = _native.graph_pack((twin,) * 1 + tuple(objects), ((SnapshotD, SNAPSHOT_FIELDS, 0),))
    assert packed is not None
    restored = _native.graph_unpack(*packed, ((SnapshotL, SNAPSHOT_FIELDS, 0),))
    assert gc.is_tracked(restored[0]) and restored[0].tensor_id == [1]

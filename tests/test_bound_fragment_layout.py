"""``BoundWeightFragment`` stored in a C-owned layout (representation change, step 3).

Public behaviour is the dict-backed frozen dataclass's: fields and their order, ``__init__`` with
its ``__post_init__`` checks, ``repr`` (without ``owner`` / ``attestation``), ``==`` / ``hash``
(``owner`` and ``attestation`` not compared), ``replace``, ``asdict``, copies, frozen errors,
weak references, and pickles byte-equal to those the dict-backed class wrote
(``tests/data/bound_pickles_r16.json``, written by the build before the change: bound fragments
alone and a whole bound plan, protocols 0-5), loading both ways. The C builders
(``bound_fragments``, ``bound_fragments_ordered``, ``restore_fragments``) store the fields
directly when the per-call check accepts the class and decline a class without an instance dict
they do not accept; the C readers (bind_regions, the revalidation, encode_record, the region
check, the collector's untracking) read the slots, and treat an emptied field as the missing
key it was."""

from __future__ import annotations

import copy
import dataclasses
import gc
import pickle
from typing import Any

import pytest

from layout_classes import check_frozen_value, check_layout_instance, data_fixture, data_module, tuples_unshared, written_since_r66
from layout_classes import unshared_tuples_module  # noqa: F401 (autouse: the fixture pins unshared tuples)
from test_native_binder import _part, _python_bound, _world

from mooncake.reshard import _native
from mooncake.reshard._layout import layout_dataclass, layout_fields, value_base
from mooncake.reshard.weight import TransferPlan
from mooncake.reshard.weight._planner import bound_pickle
from mooncake.reshard.weight._planner.attestation import RuntimeBindingAttestation, RuntimeBindingEvidence
from mooncake.reshard.weight._planner.bound_contracts import _require_typed_fragment
from mooncake.reshard.weight._planner.fragments import (
    _BOUND_LAYOUT,
    BoundWeightFragment,
    _bound_fields_state,
    _trusted_bound_fragment,
)
from mooncake.reshard.weight.types import PlacementFragment
from mooncake.reshard.contracts.fragments import RuntimeBindingFragment

FIXTURE = data_fixture("bound_pickles_r16")
WRITTEN = written_since_r66("bound_pickles_r16")
NAMES = tuple(f.name for f in dataclasses.fields(BoundWeightFragment))

# The objects the fixture pickled, built by the script that wrote it (deterministic addresses).
with tuples_unshared():
    _maker = data_module("make_bound_pickles_r16")


@pytest.fixture(scope="module")
def plan() -> TransferPlan:
    return _maker.bound_plan()


def _bound(plan: TransferPlan) -> BoundWeightFragment:
    return plan.operations[0].target


def _other_layout(names: tuple[str, ...], label: str) -> type:
    annotations = {name: Any for name in names}
    namespace = {"__annotations__": annotations, "__slots__": ("__weakref__",), "__module__": __name__}
    return layout_dataclass(type(label, (value_base(label, names),), namespace))


class _Shadowing(BoundWeightFragment):  # a property shadows a field: the layout check declines
    __slots__ = ()

    @property  # type: ignore[misc]
    def binding(self) -> Any:  # type: ignore[override]
        return None


class _Sub(BoundWeightFragment):  # same layout, nothing shadowed
    __slots__ = ()


# ---- the class ------------------------------------------------------------------------------


def test_layout_is_pinned_to_the_dataclass_fields() -> None:
    # csrc/layout.h MR_BF_* and csrc/common.h MR_BOUND_* index the layout in this order
    assert layout_fields(BoundWeightFragment) == NAMES == _BOUND_LAYOUT == (
        "placement", "binding", "instance_id", "runtime_lease_id", "lease_generation", "owner", "attestation",
    )
    assert _native.layout_check(BoundWeightFragment, 7)
    assert bound_pickle._FRAGMENT_FIELDS == NAMES


def test_instances_have_no_dict_and_are_small(plan: TransferPlan) -> None:
    check_layout_instance(_bound(plan), 7)


def test_dataclass_behaviour(plan: TransferPlan) -> None:
    bound = _bound(plan)
    assert bound.attestation is not None and bound.owner is None
    args = (bound.placement, bound.binding, bound.instance_id, bound.runtime_lease_id, bound.lease_generation)
    bare = BoundWeightFragment(*args)
    assert [f.name for f in dataclasses.fields(bound)] == list(NAMES)
    # owner and attestation are compare=False, repr=False
    assert bare == bound and hash(bare) == hash(bound) and bare.attestation is None
    assert repr(bound) == repr(bare) == (
        f"BoundWeightFragment(placement={bound.placement!r}, binding={bound.binding!r}, "
        f"instance_id={bound.instance_id!r}, runtime_lease_id={bound.runtime_lease_id!r}, "
        f"lease_generation={bound.lease_generation!r})"
    )
    assert bare != dataclasses.replace(bare, runtime_lease_id="other")
    assert dataclasses.asdict(bare) == {
        "placement": dataclasses.asdict(bound.placement),
        "binding": dataclasses.asdict(bound.binding),
        "instance_id": bound.instance_id,
        "runtime_lease_id": bound.runtime_lease_id,
        "lease_generation": bound.lease_generation,
        "owner": None,
        "attestation": None,
    }
    assert _bound_fields_state(bound) == dict(zip(NAMES, (*args, None, bound.attestation)))
    # replace runs __post_init__ (the attestation's fences)
    with pytest.raises(ValueError, match="^bound fragment runtime fence differs from attestation$"):
        dataclasses.replace(bound, runtime_lease_id="other")
    with pytest.raises(ValueError, match="^bound fragment lease_generation must fit"):
        BoundWeightFragment(*args[:4], -1)
    check_frozen_value(bound, "binding", "owner")
    assert copy.copy(bound).attestation is bound.attestation
    # the properties still read through the fields
    assert bound.fragment_id == bound.binding.fragment_id and bound.tensor_id == bound.placement.tensor_id


def test_trusted_builder_and_restore(plan: TransferPlan) -> None:
    bound = _bound(plan)
    args = (bound.placement, bound.binding, bound.instance_id, bound.runtime_lease_id, bound.lease_generation)
    trusted = _trusted_bound_fragment(*args, bound.attestation)
    assert type(trusted) is BoundWeightFragment and trusted == bound and trusted.attestation is bound.attestation
    restored = BoundWeightFragment._restore(*args, bound.attestation)
    assert type(restored) is BoundWeightFragment and _bound_fields_state(restored) == _bound_fields_state(bound)
    sub = _Sub._restore(*args, bound.attestation)
    assert type(sub) is _Sub and _bound_fields_state(sub) == _bound_fields_state(bound)
    # _restore runs the constructor's checks
    other = next(op.target.binding for op in plan.operations if op.target.placement_fragment_id != bound.placement_fragment_id)
    with pytest.raises(ValueError, match="^bound fragment placement identity differs$"):
        BoundWeightFragment._restore(args[0], other, *args[2:], None)
    with pytest.raises(ValueError, match="^bound fragment placement identity differs$"):
        _Sub._restore(args[0], other, *args[2:], None)


# ---- pickles: byte-equal to the dict-backed class's, loading both ways ------------------------------


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickles_are_byte_equal_to_the_dict_backed_class(protocol: int) -> None:
    # Since session 66 the placement graph inside pickles by default: the bytes this build writes.
    # A fresh plan: what other tests cache in the module's plan (digests, strs) changes the bytes.
    with tuples_unshared():
        plan = _maker.bound_plan()
    assert pickle.dumps(_maker.fragments(plan), protocol).hex() == WRITTEN["fragment"][str(protocol)]
    assert pickle.dumps(plan, protocol).hex() == WRITTEN["plan"][str(protocol)]


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
@pytest.mark.parametrize("written", [FIXTURE, WRITTEN], ids=["r16", "r66"])
def test_dict_backed_pickles_load(plan: TransferPlan, protocol: int, written: Any) -> None:
    loaded = pickle.loads(bytes.fromhex(written["fragment"][str(protocol)]))
    expected = _maker.fragments(plan)
    assert loaded == expected
    for got, want in zip(loaded, expected):
        assert type(got) is BoundWeightFragment and not hasattr(got, "__dict__")
        assert (got.attestation is None) == (want.attestation is None)
    restored = pickle.loads(bytes.fromhex(written["plan"][str(protocol)]))
    assert type(restored) is TransferPlan and restored == plan
    for op in restored.operations:
        for fragment in (op.source, op.target):
            assert type(fragment) is BoundWeightFragment and not hasattr(fragment, "__dict__")
    # and the restored plan pickles again into an equal plan (not the very bytes: default
    # pickling restores the field names' strs interned, so a field value equal to a field name
    # is no longer the same str object, and pickle's memo shares strs by identity)
    assert pickle.loads(pickle.dumps(restored, protocol)) == plan


# ---- C builders: layout instances; other classes decline ----------------------------------------


def test_bound_fragments_builds_layout_instances() -> None:
    placement, bindings = _world(tensors=3)
    for binding in bindings:
        part = _part(placement, binding)
        attestation = RuntimeBindingAttestation._from_validated(placement, dataclasses.replace(binding))
        rows = _native.bound_fragments(BoundWeightFragment, RuntimeBindingAttestation, part.fragments, attestation)
        assert rows is not None
        reference = _python_bound(attestation, part)
        assert [row[0] for row in rows] == [row[0] for row in reference]
        for (_pfid, bound), (_, expected) in zip(rows, reference):
            assert type(bound) is BoundWeightFragment and not hasattr(bound, "__dict__")
            assert _bound_fields_state(bound) == _bound_fields_state(expected)
            assert bound.attestation is attestation and gc.is_tracked(bound)
        ordered = _native.bound_fragments_ordered(
            BoundWeightFragment, RuntimeBindingAttestation, bound_pickle.TransferRegion, (part.fragments,),
            (attestation,), (), 0,
        )
        assert ordered is not None
        assert [_bound_fields_state(b) for _, b in ordered[0]] == [_bound_fields_state(b) for _, b in rows]


def test_builders_decline_layouts_they_do_not_accept() -> None:
    placement, bindings = _world(tensors=2)
    part = _part(placement, bindings[0])
    attestation = RuntimeBindingAttestation._from_validated(placement, dataclasses.replace(bindings[0]))
    reordered = _other_layout(NAMES[1:] + NAMES[:1], "ReorderedBound")
    renamed = _other_layout(NAMES[:-1] + ("attested",), "RenamedBound")
    for cls in (reordered, renamed, _Shadowing):
        assert _native.bound_fragments(cls, RuntimeBindingAttestation, part.fragments, attestation) is None
        assert _native.bound_fragments_ordered(
            cls, RuntimeBindingAttestation, bound_pickle.TransferRegion, (part.fragments,), (attestation,), (), 0
        ) is None
    # a subclass of the same layout that shadows nothing is built as itself
    rows = _native.bound_fragments(_Sub, RuntimeBindingAttestation, part.fragments, attestation)
    assert rows is not None and all(type(bound) is _Sub for _, bound in rows)


def _restore_arguments(plan: TransferPlan) -> tuple[Any, list[Any]]:
    record = bound_pickle.reduce_transfer_plan(plan)[1]
    attestations = [
        bound_pickle._restore_attestation(record[6][i], record[6][i + 1]) for i in range(0, len(record[6]), 2)
    ]
    return record[7], attestations


def test_restore_fragments_builds_layout_instances_and_declines_others(plan: TransferPlan) -> None:
    table, attestations = _restore_arguments(plan)
    classes = (bound_pickle._PLACEMENT_FRAGMENT, bound_pickle._RUNTIME_FRAGMENT, RuntimeBindingAttestation,
               RuntimeBindingEvidence)
    got = _native.restore_fragments(table, attestations, BoundWeightFragment, *classes)
    assert got is not None and len(got) == len(table) // 6
    for k, fragment in enumerate(got):
        assert type(fragment) is BoundWeightFragment and not hasattr(fragment, "__dict__")
        row = table[6 * k : 6 * k + 6]
        attestation = None if row[5] is None else attestations[row[5]]
        assert _bound_fields_state(fragment) == dict(zip(NAMES, (*row[:5], None, attestation)))
    for cls in (_other_layout(NAMES[::-1], "BackwardsBound"), _Shadowing):
        assert _native.restore_fragments(table, attestations, cls, *classes) is None
    sub = _native.restore_fragments(table, attestations, _Sub, *classes)
    assert sub is not None and all(type(f) is _Sub for f in sub)


# ---- C readers: an emptied or forged field is what a missing or forged dict entry was ----------


def _with_target(plan: TransferPlan, index: int, target: Any) -> TransferPlan:
    op = copy.copy(plan.operations[index])
    object.__setattr__(op, "target", target)
    forged = copy.copy(plan)
    operations = plan.operations[:index] + (op,) + plan.operations[index + 1 :]
    object.__setattr__(forged, "operations", operations)
    return forged


def test_encode_record_declines_an_emptied_field(plan: TransferPlan) -> None:
    classes = (
        bound_pickle.TransferRegion, BoundWeightFragment, bound_pickle.ExecutorTransferPlan,
        bound_pickle.RuntimeFragmentSnapshot, RuntimeBindingAttestation,
    )
    names = (bound_pickle._REGION_FIELDS, NAMES, bound_pickle._EXECUTOR_FIELDS, bound_pickle._SNAPSHOT_FIELDS)
    args = (plan.operations, plan.source_executors, plan.target_executors)
    tables = _native.encode_record(*args, *classes, *names)
    state = {name: None for name in bound_pickle._PLAN_FIELDS}
    assert tables is not None and tables == bound_pickle._encode(state, *args)[6:]
    emptied = copy.copy(_bound(plan))
    object.__delattr__(emptied, "runtime_lease_id")
    forged = _with_target(plan, 0, emptied)
    forged_args = (forged.operations, plan.source_executors, plan.target_executors)
    assert _native.encode_record(*forged_args, *classes, *names) is None
    with pytest.raises(bound_pickle._Irregular):
        bound_pickle._encode(state, *forged_args)
    # a class whose layout is not the given names: the dict path, which finds no dict
    assert _native.encode_record(*args, classes[0], _other_layout(NAMES, "SameBound"), *classes[2:], *names) is None


# What the dict-backed class's plans did with the key deleted from a target's instance dict
# (measured on the build before the change: tests/data/make_bound_pickles_r16.py's plan). A
# missing owner / attestation read the class default None there; an emptied slot reads None
# at the rules' reads too. (runtime_lease_id: accepted by copy/replace on both builds, a gap
# of the fast paths closed since; placement..lease_generation: pickling raised AttributeError in
# __reduce__ on both builds, now the message below: tests/test_bound_lease_fence.py.)
EMPTIED = {
    "placement": "bound fragment placement is invalid",
    "binding": "bound fragment runtime binding is invalid",
    "instance_id": "bound fragment instance_id must be non-empty",
    "runtime_lease_id": "bound fragment runtime_lease_id must be non-empty",
    "lease_generation": "bound fragment lease_generation must fit in an unsigned 64-bit integer",
    "owner": None,
    "attestation": "transfer plan target fragment lacks an attested runtime binding",
}


@pytest.mark.parametrize("field", sorted(EMPTIED))
def test_plan_with_an_emptied_bound_field(plan: TransferPlan, field: str) -> None:
    """The revalidation's fast paths decline an emptied field (what a missing key of the
    dict-backed class was) and the rules decide as they did for the missing key."""
    emptied = copy.copy(_bound(plan))
    object.__delattr__(emptied, field)
    forged = _with_target(plan, 0, emptied)
    round_trips = [copy.copy, dataclasses.replace, lambda p: pickle.loads(pickle.dumps(p))]
    for round_trip in round_trips:
        if EMPTIED[field] is None:
            assert round_trip(forged) == plan
        else:
            with pytest.raises(ValueError, match=f"^{EMPTIED[field]}$"):
                round_trip(forged)


def test_forged_fields_give_the_dict_backed_outcomes() -> None:
    """Every field of a first / last operation's target / source set to a hostile value or to
    another fragment's, or removed (an emptied slot; the deleted key of the dict-backed class),
    then copy / replace / pickle of the plan: exactly the outcome (acceptance, exception type and
    message) the build before the layout change gave (tests/data/bound_forgeries_r16.json, written
    by it with tests/data/make_bound_forgeries_r16.py)."""
    expected = data_fixture("bound_forgeries_r16")["outcomes"]
    got = data_module("make_bound_forgeries_r16").outcomes()
    assert len(got) == len(expected) == 364
    closed = {key: _gaps_closed(key, outcome) for key, outcome in expected.items()}
    assert sum(closed[key] != outcome for key, outcome in expected.items()) == 120
    expected = closed
    assert {key: value for key, value in got.items() if value != expected[key]} == {}


_LEASE = "ValueError: bound fragment runtime_lease_id must be non-empty"


def _gaps_closed(key: str, outcome: list[str]) -> list[str]:
    """The fixture's outcome (copy, replace, pickle) with the gaps both builds had, closed
    since (tests/test_bound_lease_fence.py): a forged ``runtime_lease_id`` or ``instance_id``,
    or a ``lease_generation`` of another type equal to the attested one (``1.0``, ``True``), is
    refused by ``replace`` as by ``copy`` (a removed lease by all three, with the type rule's
    message), and a removed field pickles as None, refused on load with ``copy``'s message
    instead of an ``AttributeError`` from ``__reduce__``. 120 of the 364 outcomes change (68
    with the lease, 52 with the instance id and generation); the rest are the dict-backed
    build's."""
    copied, replaced, pickled = outcome
    field, label = key.split(".", 1)[1].split("=", 1)
    if field == "runtime_lease_id":
        return [_LEASE] * 3 if label == "gone" else [copied, copied, pickled]
    if label == "gone" and field not in ("owner", "attestation"):
        return [copied, replaced, copied]
    if field == "instance_id" or (field == "lease_generation" and label in ("1.0", "True")):
        return [copied, copied, pickled]
    return outcome


def test_typed_fragment_reads_the_fields(plan: TransferPlan) -> None:
    bound = _bound(plan)
    _require_typed_fragment(bound)
    forged = copy.copy(bound)
    object.__setattr__(forged, "lease_generation", 1.0)
    with pytest.raises(ValueError, match="^bound fragment lease_generation must fit"):
        _require_typed_fragment(forged)
    forged = copy.copy(bound)
    object.__setattr__(forged, "binding", object())
    with pytest.raises(ValueError, match="^bound fragment runtime binding is invalid$"):
        _require_typed_fragment(forged)


def test_region_checks_read_the_slots(plan: TransferPlan) -> None:
    from mooncake.reshard.weight._planner.region_check import _PLAIN_TYPES

    operations = plan.operations
    assert _native.regions_canonical(operations, 0, BoundWeightFragment, _PLAIN_TYPES) == len(operations)
    emptied = copy.copy(operations[0].target)
    object.__delattr__(emptied, "placement")
    forged = _with_target(plan, 0, emptied).operations
    assert _native.regions_canonical(forged, 0, BoundWeightFragment, _PLAIN_TYPES) == 0  # not proven: Python decides
    other = copy.copy(operations[0].target)
    placement = operations[0].target.placement
    object.__setattr__(other, "placement", dataclasses.replace(placement, global_offset=(1,) * len(placement.global_offset)))
    assert _native.regions_canonical(_with_target(plan, 0, other).operations, 0, BoundWeightFragment, _PLAIN_TYPES) == 0


# ---- the collector ---------------------------------------------------------------------------


def test_untrack_bound_regions_reads_the_slots(plan: TransferPlan) -> None:
    assert len(plan.operations) < 1024
    restored = pickle.loads(pickle.dumps(plan))
    # a fresh copy of every target (tracked: built by __reduce__ through the constructor)
    fresh = []
    for op in restored.operations:
        target = copy.copy(op.target)
        assert gc.is_tracked(target)
        region = copy.copy(op)
        object.__setattr__(region, "target", target)
        fresh.append(region)
    emptied = copy.copy(fresh[0].target)
    object.__delattr__(emptied, "attestation")
    owned = copy.copy(fresh[1].target)
    object.__setattr__(owned, "owner", [])  # a tracked container: stays tracked
    object.__setattr__(fresh[0], "target", emptied)
    object.__setattr__(fresh[1], "target", owned)
    regions = fresh * (1024 // len(fresh) + 1)
    _native.untrack_bound_regions(regions, BoundWeightFragment)
    assert gc.is_tracked(emptied) and gc.is_tracked(owned)
    assert not any(gc.is_tracked(region.target) for region in fresh[2:])
    # a class that is not the checked layout: its instances are left as they are
    subs = []
    for region in fresh[2:]:
        sub = _Sub._restore(*(getattr(region.target, name) for name in NAMES[:5]), region.target.attestation)
        assert gc.is_tracked(sub)
        clone = copy.copy(region)
        object.__setattr__(clone, "target", sub)
        subs.append(clone)
    _native.untrack_bound_regions(subs * (1024 // len(subs) + 1), _Shadowing)
    assert all(gc.is_tracked(region.target) for region in subs)
    _native.untrack_bound_regions(subs * (1024 // len(subs) + 1), _Sub)
    assert not any(gc.is_tracked(region.target) for region in subs)


def test_placement_and_binding_classes_are_exact(plan: TransferPlan) -> None:
    bound = _bound(plan)
    assert type(bound.placement) is PlacementFragment and type(bound.binding) is RuntimeBindingFragment

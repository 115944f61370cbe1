"""``TransferRegion`` stored in a C-owned layout (representation change, step 4).

Public behaviour is the dict-backed generic frozen dataclass's: fields and their order,
``__init__`` (with ``__post_init__``'s normalisation and messages), ``repr``, ``==``, ``hash``,
``replace``, ``asdict``, copies, frozen errors, weak references, ``TransferRegion[X, Y]`` and
``typing.get_type_hints``, and pickles byte-equal to those the dict-backed class wrote
(``tests/data/region_pickles_r16.json``, written by the build before the change: standalone logical
and bound regions, logical and bound plans, protocols 0-5), loading both ways. The C paths that
build regions (``plan_regions``, ``bind_regions``, ``restore_regions_carried``, ``restore_regions``,
``build_regions``) store the fields directly, those that read them (``revalidate_scan``,
``operation_views``, ``regions_canonical``, ``encode_record``, ``logical_routes_plain``,
``logical_target_cover``, ``bound_fragments_ordered``, ``untrack_bound_regions``) load them directly
when the per-call check accepts the class, and decline to their original path (or to Python) for
anything else: another layout, a shadowing subclass, an emptied field."""

from __future__ import annotations

import copy
import dataclasses
import gc
import pickle
import sys
import typing
from typing import Any, Union

import pytest

from layout_classes import check_frozen_value, check_layout_instance, data_fixture, data_module, tuples_unshared, written_since_r66
from layout_classes import unshared_tuples_module  # noqa: F401 (autouse: the fixture pins unshared tuples)

from mooncake.reshard import _native
from mooncake.reshard._layout import layout_dataclass, layout_fields, value_base
from mooncake.reshard.weight import (
    BoundWeightFragment,
    LogicalTransferPlan,
    PlacementFragment,
    StoredFragmentSnapshot,
    TransferPlan,
    TransferRegion,
)
from mooncake.reshard.weight._planner import bound_pickle, contracts
from mooncake.reshard.weight._planner.region_check import _PLAIN_TYPES

FIXTURE = data_fixture("region_pickles_r16")
WRITTEN = written_since_r66("region_pickles_r16")
NAMES = tuple(f.name for f in dataclasses.fields(TransferRegion))
BIG = 1 << 62

# The objects the fixture pickled, built by the script that wrote it (deterministic addresses).
with tuples_unshared():
    _maker = data_module("make_region_pickles_r16")
LOGICAL: LogicalTransferPlan = _maker.LOGICAL
BOUND: TransferPlan = _maker.BOUND
OBJECTS: dict[str, Any] = _maker.OBJECTS


def _state(region: Any) -> dict[str, Any]:
    state: dict[str, Any] = region.__getstate__()
    return state


def _emptied(region: Any, name: str) -> Any:
    forged = copy.copy(region)
    object.__delattr__(forged, name)
    return forged


# ---- the class ------------------------------------------------------------------------------


def test_layout_is_pinned_to_the_dataclass_fields() -> None:
    assert layout_fields(TransferRegion) == NAMES == contracts._REGION_LAYOUT
    assert len(NAMES) == 11
    assert _native.layout_check(TransferRegion, 11)
    assert bound_pickle._REGION_FIELDS == NAMES  # the record's (and encode_record's) names


def test_instances_have_no_dict_and_are_small() -> None:
    check_layout_instance(LOGICAL.operations[0], 11)


@pytest.mark.parametrize("which", ["logical", "bound"])
def test_dataclass_behaviour(which: str) -> None:
    region = (LOGICAL if which == "logical" else BOUND).operations[-1]
    values = _state(region)
    assert list(values) == list(NAMES)
    again = TransferRegion(**values)
    assert again == region and hash(again) == hash(region) and again is not region
    assert [f.name for f in dataclasses.fields(region)] == list(NAMES)
    assert repr(region) == "TransferRegion(" + ", ".join(f"{k}={v!r}" for k, v in values.items()) + ")"
    assert dataclasses.asdict(region)["inner_bytes"] == region.inner_bytes
    assert dataclasses.astuple(region)[0] == region.tensor_id
    assert dataclasses.replace(region) == region
    with pytest.raises(ValueError, match="^transfer region loop geometry does not match overlap$"):
        dataclasses.replace(region, inner_bytes=region.inner_bytes + 1)
    check_frozen_value(region, "inner_bytes", "source")
    assert all(key is sys.intern(key) for key in _state(region))  # the same pickle memo as a __dict__'s
    assert contracts._region_fields_state(region) == values


def test_post_init_normalises_and_refuses_as_before() -> None:
    region = LOGICAL.operations[-1]
    values = _state(region)
    listed = TransferRegion(**{**values, "overlap_offset": list(values["overlap_offset"])})
    assert type(listed.overlap_offset) is tuple and listed == region
    with pytest.raises(ValueError, match="^transfer region overlap_shape must contain integers$"):
        TransferRegion(**{**values, "overlap_shape": "ab"})
    with pytest.raises(ValueError, match="^transfer region tensor_id must not be empty$"):
        TransferRegion(**{**values, "tensor_id": ""})
    with pytest.raises(TypeError):
        TransferRegion(**{k: v for k, v in values.items() if k != "target"})  # type: ignore[call-arg]
    # fuzz finding F2: a region restored without a field is refused by the rule's message
    for name, message in (
        ("overlap_offset", "transfer region overlap_offset must contain integers"),
        ("tensor_id", "transfer region tensor_id must not be empty"),
        ("source", "transfer region tensor mismatch"),
        ("inner_bytes", "transfer region inner_bytes must be an integer"),
    ):
        blank = TransferRegion.__new__(TransferRegion)
        blank.__setstate__({k: v for k, v in values.items() if k != name})
        with pytest.raises(ValueError, match=f"^{message}$"):
            TransferRegion.__post_init__(blank)


def test_generic_subscripting_and_type_hints() -> None:
    alias = TransferRegion[PlacementFragment, PlacementFragment]
    assert typing.get_origin(alias) is TransferRegion
    assert typing.get_args(alias) == (PlacementFragment, PlacementFragment)
    assert len(TransferRegion.__parameters__) == 2
    built = alias(**_state(LOGICAL.operations[0]))
    assert type(built) is TransferRegion and built == LOGICAL.operations[0]
    hints = typing.get_type_hints(TransferRegion)
    assert list(hints) == list(NAMES)
    assert hints["overlap_offset"] == tuple[int, ...] and hints["inner_bytes"] is int
    assert hints["source"] is TransferRegion.__parameters__[0]
    assert typing.get_origin(contracts.LogicalTransferOperation) is TransferRegion
    assert typing.get_args(contracts.LogicalTransferOperation)[1] is PlacementFragment
    assert typing.get_args(contracts.LiveTransferOperation) == (BoundWeightFragment, BoundWeightFragment)
    assert typing.get_args(contracts.LogicalTransferOperation)[0] == Union[PlacementFragment, StoredFragmentSnapshot]


# ---- pickles: byte-equal to the dict-backed class's, loading both ways --------------------------


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
@pytest.mark.parametrize("name", ["logical_region", "bound_region", "logical_plan", "bound_plan"])
def test_pickles_are_byte_equal_to_the_dict_backed_class(name: str, protocol: int) -> None:
    # (byte-equal payloads: the dict-backed build loads these exactly as it loads its own; since
    # session 66 the placement graph inside pickles by default: the bytes this build writes)
    assert pickle.dumps(OBJECTS[name], protocol).hex() == WRITTEN[name][str(protocol)]


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
@pytest.mark.parametrize("name", ["logical_region", "bound_region", "logical_plan", "bound_plan"])
@pytest.mark.parametrize("written", [FIXTURE, WRITTEN], ids=["r16", "r66"])
def test_dict_backed_pickles_load(name: str, protocol: int, written: Any) -> None:
    loaded = pickle.loads(bytes.fromhex(written[name][str(protocol)]))
    assert loaded == OBJECTS[name] and type(loaded) is type(OBJECTS[name])
    regions = loaded.operations if name.endswith("plan") else (loaded,)
    for region in regions:
        assert type(region) is TransferRegion and not hasattr(region, "__dict__")
        assert list(_state(region)) == list(NAMES)


def test_hostile_region_states_are_refused() -> None:
    values = _state(LOGICAL.operations[0])
    for key in ("forged", "inner_byte5", "__weakref__", "__dict__", 1, None):
        blank = TransferRegion.__new__(TransferRegion)
        with pytest.raises(ValueError, match=r"^TransferRegion pickle state is invalid: unknown field"):
            blank.__setstate__({**values, key: 1})
        assert _state(blank) == {}  # refused before anything was stored
    with pytest.raises(ValueError, match=r"^TransferRegion pickle state is invalid: a list, not a dict$"):
        TransferRegion.__new__(TransferRegion).__setstate__([1])


@pytest.mark.parametrize("protocol", [2, pickle.HIGHEST_PROTOCOL])
def test_plans_with_an_emptied_region_field_are_refused_on_load(protocol: int) -> None:
    for plan, name, message in (
        (LOGICAL, "overlap_shape", "transfer region overlap_shape must contain integers"),
        (LOGICAL, "inner_bytes", "transfer region inner_bytes must be an integer"),
        (BOUND, "outer_loop_counts", "transfer region outer_loop_counts must contain integers"),
        (BOUND, "target_base_offset", "transfer region target_base_offset must be an integer"),
    ):
        forged = copy.copy(plan)
        object.__setattr__(forged, "operations", (_emptied(plan.operations[0], name),) + plan.operations[1:])
        with pytest.raises(ValueError, match=f"^{message}$"):
            pickle.loads(pickle.dumps(forged, protocol=protocol))


# ---- the builders: regions in their layout --------------------------------------------------


def _assert_layout_regions(regions: Any) -> None:
    for region in regions:
        assert type(region) is TransferRegion and not hasattr(region, "__dict__")
        values = _state(region)
        assert list(values) == list(NAMES)
        assert TransferRegion(**values) == region


def test_planned_bound_and_restored_regions_are_layout_instances() -> None:
    _assert_layout_regions(LOGICAL.operations)
    _assert_layout_regions(BOUND.operations)
    for protocol in (2, 4, pickle.HIGHEST_PROTOCOL):
        _assert_layout_regions(pickle.loads(pickle.dumps(BOUND, protocol=protocol)).operations)
        _assert_layout_regions(pickle.loads(pickle.dumps(LOGICAL, protocol=protocol)).operations)


def _record_tables() -> tuple[Any, Any]:
    """The bound plan's record operation table and its restored bound fragments."""
    record = bound_pickle.reduce_transfer_plan(BOUND)[1]
    attestation_rows = list(bound_pickle._groups(record[6], 2))
    fragments = bound_pickle._restore_bound(attestation_rows, record[7])[1]
    return record[8], tuple(fragments)


def _other_layout(names: tuple[str, ...], label: str) -> type:
    annotations = {name: Any for name in names}
    namespace = {"__annotations__": annotations, "__slots__": ("__weakref__",), "__module__": __name__}
    return layout_dataclass(type(label, (value_base(label, names),), namespace))


class _Shadowing(TransferRegion):  # type: ignore[type-arg]
    """A subclass whose property shadows a field: the per-call check declines it."""

    __slots__ = ()

    @property  # type: ignore[misc]
    def inner_bytes(self) -> int:  # type: ignore[override]
        return 1


def test_restore_builders_store_the_layout_and_decline_other_layouts() -> None:
    table, fragments = _record_tables()
    names = bound_pickle._REGION_FIELDS
    carried = _native.restore_regions_carried(table, fragments, TransferRegion, names, BoundWeightFragment)
    assert carried is not None
    reference = bound_pickle._python_restore_regions(table, fragments)
    plain = _native.restore_regions(table, fragments, TransferRegion, names)
    for regions in (carried[0], plain):
        _assert_layout_regions(regions)
        assert [_state(r) for r in regions] == [_state(r) for r in reference]
        assert all(a is b for r, s in zip(regions, reference) for a, b in zip(_state(r).values(), _state(s).values()))
    reordered = _other_layout(NAMES[1:] + NAMES[:1], "ReorderedRegion")
    # a layout that is not the given names: declined (no instance dict to fill)
    assert _native.restore_regions_carried(table, fragments, reordered, names, BoundWeightFragment) is None
    assert _native.restore_regions(table, fragments, reordered, names) is None


# ---- the readers: direct loads for an accepted class, declines otherwise -----------------------


def _scan(operations: tuple[Any, ...], region_type: type = TransferRegion) -> Any:
    return _native.revalidate_scan(operations, BIG, BIG, region_type, BoundWeightFragment)


def _encode(operations: tuple[Any, ...], region_type: type = TransferRegion) -> Any:
    classes = (
        region_type, BoundWeightFragment, bound_pickle.ExecutorTransferPlan,
        bound_pickle.RuntimeFragmentSnapshot, bound_pickle.RuntimeBindingAttestation,
    )
    names = (bound_pickle._REGION_FIELDS, bound_pickle._FRAGMENT_FIELDS, bound_pickle._EXECUTOR_FIELDS,
             bound_pickle._SNAPSHOT_FIELDS)
    return _native.encode_record(operations, BOUND.source_executors, BOUND.target_executors, *classes, *names)


def _routes(operations: tuple[Any, ...], region_type: type = TransferRegion) -> Any:
    from mooncake.reshard.weight import ParallelRank

    return _native.logical_routes_plain(operations, region_type, PlacementFragment, StoredFragmentSnapshot, ParallelRank)


def test_readers_accept_layout_regions() -> None:
    ops = BOUND.operations
    assert _scan(ops) is not None
    assert _native.regions_canonical(ops, 0, BoundWeightFragment, _PLAIN_TYPES) == len(ops)
    state = {name: None for name in bound_pickle._PLAN_FIELDS}
    assert _encode(ops) == bound_pickle._encode(state, ops, BOUND.source_executors, BOUND.target_executors)[6:]
    assert _routes(LOGICAL.operations) is True
    for plan in (LOGICAL, BOUND):
        assert _views(plan.operations, plan) is not None


def _views(operations: tuple[Any, ...], plan: Any, region_type: type = TransferRegion) -> Any:
    """operation_views (build_operation_views' C loop) on fresh executor indexes."""
    s_logical, s_runtime, _ = contracts._side_index(plan.source_executors)
    t_logical, t_runtime, _ = contracts._side_index(plan.target_executors)
    classes = contracts._view_classes()
    return _native.operation_views(operations, s_logical, s_runtime, t_logical, t_runtime, region_type, *classes[2:])


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("position", [0, -1])
def test_an_emptied_field_declines_every_reader(name: str, position: int) -> None:
    ops = list(BOUND.operations)
    ops[position] = _emptied(ops[position], name)
    bound_ops = tuple(ops)
    logical = list(LOGICAL.operations)
    logical[position] = _emptied(logical[position], name)
    logical_ops = tuple(logical)
    reads_scan = name not in ("tensor_id",)  # revalidate_scan reads every field but the tensor id
    assert (_scan(bound_ops) is None) == reads_scan
    assert _native.regions_canonical(bound_ops, 0, BoundWeightFragment, _PLAIN_TYPES) == position % len(ops)
    assert _encode(bound_ops) is None
    if name in ("source", "target"):
        assert _routes(logical_ops) is None
        assert _views(logical_ops, LOGICAL) is None and _views(bound_ops, BOUND) is None
    else:
        assert _routes(logical_ops) is True
        assert _views(logical_ops, LOGICAL) is not None and _views(bound_ops, BOUND) is not None
    # the rules decide what the dict-backed class's missing key decided
    with pytest.raises(ValueError):
        dataclasses.replace(BOUND, operations=bound_ops)
    with pytest.raises(ValueError):
        dataclasses.replace(LOGICAL, operations=logical_ops)


def test_another_layout_of_the_same_fields_is_read_and_a_reordered_one_declines() -> None:
    same = _other_layout(NAMES, "SameRegion")
    reordered = _other_layout(NAMES[::-1], "ReversedRegion")
    for cls, accepted in ((same, True), (reordered, False), (same, True), (_Shadowing, False), (TransferRegion, True)):
        ops = tuple(cls(**{n: getattr(op, n) for n in layout_fields(cls)}) if cls is not _Shadowing
                    else forged_shadowing(op) for op in BOUND.operations)
        assert (_scan(ops, cls) is not None) is accepted, cls
        assert (_encode(ops, cls) is not None) is accepted, cls
        logical = tuple(cls(**{n: getattr(op, n) for n in layout_fields(cls)}) if cls is not _Shadowing
                        else forged_shadowing(op) for op in LOGICAL.operations)
        assert (_routes(logical, cls) is True) is accepted, cls
        assert (_views(logical, LOGICAL, cls) is not None) is accepted, cls


def forged_shadowing(op: Any) -> Any:
    """op's fields in a _Shadowing instance (stored through the layout base's own member
    descriptors: the subclass's property has no setter)."""
    base = _native.layout_info(TransferRegion)[0]
    forged = object.__new__(_Shadowing)
    for name, value in _state(op).items():
        vars(base)[name].__set__(forged, value)
    return forged


def test_bind_regions_builds_layout_regions_and_declines_a_shadowing_class() -> None:
    classes = (TransferRegion, PlacementFragment, StoredFragmentSnapshot)
    targets = {op.target.placement.placement_fragment_id: op.target for op in BOUND.operations}
    sources = {op.source.placement.placement_fragment_id: op.source for op in BOUND.operations}
    got = _native.bind_regions(*classes, LOGICAL.operations, targets, sources, BoundWeightFragment)
    assert got is not None
    regions = got[0]
    _assert_layout_regions(regions)
    assert tuple(regions) == BOUND.operations
    shadowed = tuple(forged_shadowing(op) for op in LOGICAL.operations)
    assert _native.bind_regions(_Shadowing, *classes[1:], shadowed, targets, sources, BoundWeightFragment) is None
    emptied = (_emptied(LOGICAL.operations[0], "overlap_offset"),) + LOGICAL.operations[1:]
    assert _native.bind_regions(*classes, emptied, targets, sources, BoundWeightFragment) is None


def test_untrack_bound_regions_reads_layout_regions() -> None:
    # a plan's regions are offered to the collector from 1024 on (common.h threshold): fresh
    # (tracked) copies of regions whose bound fragments are untracked are untracked too
    from test_gc_bound import _bind

    plan = _bind(72)[4]
    regions = [copy.copy(op) for op in plan.operations]
    while len(regions) < 1024:
        regions += regions
    assert all(gc.is_tracked(region) for region in regions)
    assert all(not gc.is_tracked(r.source) and not gc.is_tracked(r.target) for r in regions)
    few = regions[:10]
    _native.untrack_bound_regions(few, BoundWeightFragment)
    assert all(gc.is_tracked(region) for region in few)  # below the threshold: left as they are
    _native.untrack_bound_regions(regions, BoundWeightFragment)
    assert not any(gc.is_tracked(region) for region in regions)
    # an emptied field: that region is left tracked
    emptied = [_emptied(r, "overlap_offset") for r in regions[:2]] + regions[2:]
    assert gc.is_tracked(emptied[0])
    _native.untrack_bound_regions(emptied, BoundWeightFragment)
    assert gc.is_tracked(emptied[0]) and gc.is_tracked(emptied[1])

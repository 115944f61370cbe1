"""Regression tests of fuzz findings F2, F3, F4, F10 and F11 (``fuzz/findings/F2``-``F4``,
``F10``, ``F11``; the F2-F4 reproducers ``fuzz/findings/f2_repro.py`` etc. print the same outcomes).

Values restored by default pickling (spec §13) or forged with ``object.__new__`` + ``__dict__``
never ran their own checks. Revalidation (plan pickle formats, ``dataclasses.replace``,
``StoredWeightManifest.__setstate__``) must refuse a field that is absent or of the wrong
type with the ``ValueError`` of the spec rule that refuses it, never with Python's
``TypeError``/``AttributeError``/``KeyError`` from arithmetic on it.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import sys
from typing import Any, Callable

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fuzz", "findings"))

import _pickle_repro as R  # noqa: E402


def _raises(message: str, load: Callable[[], Any]) -> None:
    with pytest.raises(ValueError) as info:
        load()
    assert type(info.value) is ValueError
    assert str(info.value) == message


# -- F2: region and executor fields -------------------------------------------------------------


@pytest.mark.parametrize(
    "index, value, message",
    [
        (7, "4", "transfer region inner_bytes must be an integer"),
        (3, None, "transfer region overlap_offset must contain integers"),
        (9, 6, "transfer region source_strides must contain integers"),
        (5, 1.0, "transfer region source_base_offset must be an integer"),
        (8, {}, "transfer region outer_loop_counts must contain integers"),
    ],
)
def test_f2_record_region_field_of_the_wrong_type(index: int, value: Any, message: str) -> None:
    record = R.record(R.plan())
    row = list(record[8])
    row[index] = value
    record[8] = tuple(row)
    _raises(message, lambda: R.load_record(record))
    _raises(message, lambda: R.load_packed(record))


def test_f2_field_state_and_replace() -> None:
    plan = R.plan()
    op = plan.operations[0]
    state = plan.__getstate__()
    state["operations"] = (R.forged(op, inner_bytes="4"),) + plan.operations[1:]
    _raises("transfer region inner_bytes must be an integer", lambda: R.load_field_state(state))
    _raises(
        "transfer region inner_bytes must be an integer",
        lambda: dataclasses.replace(plan, operations=state["operations"]),
    )
    state["operations"] = (R.forged(op, target_strides=...),) + plan.operations[1:]
    _raises("transfer region target_strides must contain integers", lambda: R.load_field_state(state))
    state["operations"] = (R.forged(op, tensor_id=...),) + plan.operations[1:]
    _raises("transfer region tensor_id must not be empty", lambda: R.load_field_state(state))


def test_f2_executor_fields() -> None:
    plan = R.plan()
    executor = plan.source_executors[0]
    cases = [
        ({"placement_id": ...}, "executor plan identifiers must not be empty"),
        ({"worker_id": ["w"]}, "executor plan identifiers must not be empty"),
        ({"placement_digest": None}, "executor plan placement digest must be SHA-256"),
        ({"runtime_lease_id": 5}, "executor plan runtime lease ID must be non-empty"),
        ({"runtime_lease_id": ...}, "executor plan runtime lease ID must be non-empty"),
        ({"rank": "r"}, "rank must be a ParallelRank"),
        ({"fragment_snapshots": None}, "executor plan has invalid runtime fragment snapshots"),
        ({"attestation": ...}, "executor plan runtime attestation is invalid"),
    ]
    for edit, message in cases:
        executors = (R.forged(executor, **edit),) + plan.source_executors[1:]
        state = plan.__getstate__()
        state["source_executors"] = executors
        _raises(message, lambda: R.load_field_state(state))
        _raises(message, lambda: dataclasses.replace(plan, source_executors=executors))


def test_f2_snapshot_and_limits_and_loop_ranks() -> None:
    plan = R.plan()
    executor = plan.target_executors[0]
    snapshot = executor.fragment_snapshots[0]
    forged = R.forged(executor, fragment_snapshots=(R.forged(snapshot, nbytes="1"),) + executor.fragment_snapshots[1:])
    _raises(
        "executor plan has invalid runtime fragment snapshots",
        lambda: dataclasses.replace(plan, target_executors=(forged,) + plan.target_executors[1:]),
    )
    # (the pickle paths check the limits before the plan's scalar rules compare them)
    limits = R.forged(plan.planning_limits, max_transfer_regions="9")
    state = plan.__getstate__()
    state["planning_limits"] = limits
    _raises("planning limit max_transfer_regions must be a positive integer", lambda: R.load_field_state(state))
    record = R.record(plan)
    record[5] = limits
    _raises("planning limit max_transfer_regions must be a positive integer", lambda: R.load_record(record))
    limits = R.forged(plan.planning_limits, max_segments_per_region=None)
    _raises(
        "planning limit max_segments_per_region must be a positive integer",
        lambda: dataclasses.replace(plan, planning_limits=limits),
    )
    # one more outer loop count than strides: refused before the physical sweep walks it
    op = plan.operations[0]
    forged_op = R.forged(op, outer_loop_counts=tuple(op.outer_loop_counts) + (1,))
    _raises(
        "transfer region outer loop rank mismatch",
        lambda: dataclasses.replace(plan, operations=(forged_op,) + plan.operations[1:]),
    )


def test_f2_field_state_missing_plan_field() -> None:
    plan = R.plan()
    state = plan.__getstate__()
    del state["revision"]
    _raises("transfer plan pickle state is invalid", lambda: R.load_field_state(state))


def test_f2_fragment_box_of_the_wrong_type() -> None:
    """A placement fragment (default-pickled) whose box holds a non-int reaches the region's own
    rule; that rule reads it as the fragment's int tuple."""
    plan = R.plan()
    op = plan.operations[0]
    target = op.target
    bad_placement = R.forged(target.placement, global_offset=(None,) * len(target.placement.global_offset))
    bad_target = R.forged(target, placement=bad_placement)
    _raises(
        "global_offset must contain integers",
        lambda: dataclasses.replace(plan, operations=(R.forged(op, target=bad_target),) + plan.operations[1:]),
    )


# -- F3: placement graph and evidence of restored attestations ----------------------------------


def _with_placement(record: list, placement: Any, forged: Any) -> list:
    edited = list(record)
    edited[4] = forged
    edited[6] = tuple(forged if item is placement else item for item in record[6])
    return edited


def test_f3_part_tensor_id_forged() -> None:
    record = R.record(R.plan())
    placement = record[4]
    part = placement.parts[0]
    tensor = part.tensors[0]
    bad_part = R.forged(part, tensors=(R.forged(tensor, tensor_id="other"),))
    bad_placement = R.forged(placement, parts=(bad_part,) + placement.parts[1:])
    for key in [k for k in bad_placement.__dict__ if k.startswith("_") and k != "_digest_cache"]:
        del bad_placement.__dict__[key]
    edited = _with_placement(record, placement, bad_placement)
    message = f"unknown tensor_id: {part.fragments[0].tensor_id}"
    _raises(message, lambda: R.load_record(edited))
    _raises(message, lambda: R.load_packed(edited))


@pytest.mark.parametrize(
    "parts, message",
    [
        ((1,), "WeightPlacementManifest parts must contain WeightPlacementPart"),
        (None, "WeightPlacementManifest parts must be a sequence"),
    ],
)
def test_f3_parts_of_the_wrong_type(parts: Any, message: str) -> None:
    record = R.record(R.plan())
    placement = record[4]
    value = parts if parts is None else parts + placement.parts[1:]
    bad = R.forged(placement, parts=value)
    for key in [k for k in bad.__dict__ if k.startswith("_") and k != "_digest_cache"]:
        del bad.__dict__[key]
    _raises(message, lambda: R.load_record(_with_placement(record, placement, bad)))


def test_f3_evidence_fields() -> None:
    record = R.record(R.plan())
    index = next(i for i, item in enumerate(record[6]) if type(item).__name__ == "RuntimeBindingEvidence")
    for edit, message in (
        ({"fragments": True}, "WeightRuntimeBindingManifest fragments must be a sequence"),
        ({"fragments": (1,)}, "WeightRuntimeBindingManifest fragments must contain RuntimeBindingFragment"),
        ({"participant_id": ...}, "participant_id must be a non-empty string"),
        ({"generation": "1"}, "generation must be an integer"),
    ):
        edited = list(record)
        table = list(record[6])
        table[index] = R.forged(table[index], **edit)
        edited[6] = tuple(table)
        _raises(message, lambda: R.load_record(edited))


def test_f3_attestation_setstate() -> None:
    """``RuntimeBindingAttestation.__setstate__`` (the field-state path) checks the same shape."""
    from mooncake.reshard.weight._planner.attestation import RuntimeBindingAttestation

    plan = R.plan()
    attestation = plan.operations[0].target.attestation
    evidence = R.forged(attestation.evidence, fragments=True)
    fresh = object.__new__(RuntimeBindingAttestation)
    _raises("WeightRuntimeBindingManifest fragments must be a sequence",
            lambda: fresh.__setstate__((attestation.placement, evidence)))
    placement = R.forged(attestation.placement, parts=(1,))
    placement.__dict__.pop("_parts_by_participant", None)
    _raises("WeightPlacementManifest parts must contain WeightPlacementPart",
            lambda: fresh.__setstate__((placement, attestation.evidence)))
    # the unforged pair is accepted
    fresh.__setstate__((attestation.placement, attestation.evidence))
    assert fresh == attestation


# -- F4: stored snapshots -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "edit, message",
    [
        ({"object_key": ...}, "object_key must be a non-empty string"),
        ({"global_offset": None}, "global_offset must contain integers"),
        ({"nbytes": ...}, "nbytes must be an integer"),
        ({"object_offset": "0"}, "object_offset must be an integer"),
        ({"aliases": [1]}, "aliases must contain non-empty strings"),
        ({"local_shape": (1.0,)}, "local_shape must contain integers"),
    ],
)
def test_f4_stored_snapshot_fields(edit: dict, message: str) -> None:
    plan = R.plan("stored")
    manifest = plan.source_manifest
    snapshot = manifest.fragments[0]
    forged_manifest = R.forged(manifest, fragments=(R.forged(snapshot, **edit),) + manifest.fragments[1:])
    state = plan.__getstate__()
    state["source_manifest"] = forged_manifest
    _raises(message, lambda: R.load_field_state(state))
    _raises(message, lambda: pickle.loads(pickle.dumps(forged_manifest, protocol=4)))


def test_f4_stored_tensor_fields() -> None:
    manifest = R.plan("stored").source_manifest
    tensor = manifest.tensors[0]
    for edit, message in (
        ({"itemsize": "2"}, "itemsize must be an integer"),
        ({"global_shape": None}, "global_shape must contain integers"),
        ({"tensor_id": ...}, "tensor_id must be a non-empty string"),
        ({"parallel_axes": (1,)}, "TensorDescriptor parallel_axes must contain explicit axis values"),
    ):
        forged = R.forged(manifest, tensors=(R.forged(tensor, **edit),) + manifest.tensors[1:])
        _raises(message, lambda: pickle.loads(pickle.dumps(forged, protocol=4)))


def test_unforged_plans_still_round_trip() -> None:
    for name in ("tp2-to-tp3", "stored"):
        plan = R.plan(name)
        assert pickle.loads(pickle.dumps(plan, protocol=4)) == plan
        assert pickle.loads(pickle.dumps(plan, protocol=5)) == plan
        assert dataclasses.replace(plan) == plan


def test_replace_with_forged_limits() -> None:
    """dataclasses.replace with a forged PlanningLimits field: the spec 8.3 message before the
    region budget is compared (was a TypeError from ``len(operations) > None``)."""
    plan = R.plan()
    limits = R.forged(plan.planning_limits, max_transfer_regions=None)
    _raises("planning limit max_transfer_regions must be a positive integer",
            lambda: dataclasses.replace(plan, planning_limits=limits))


def test_new_attestation_refuses_other_classes() -> None:
    """Raw pickle damage can hand the attestation's reduce helper any object as its class
    (found by the pickle fuzzer after F2-F4 were fixed): a ValueError, never TypeError."""
    from mooncake.reshard.weight._planner.attestation import RuntimeBindingAttestation, _new_attestation
    from mooncake.reshard.weight._planner.contracts import PlanningLimits

    for cls in ({}, (), "x", 1, PlanningLimits, int):
        _raises("runtime attestation evidence is invalid", lambda cls=cls: _new_attestation(cls))  # type: ignore[arg-type]
    assert type(_new_attestation(RuntimeBindingAttestation)) is RuntimeBindingAttestation


@pytest.mark.parametrize(
    "edit, message",
    [
        ({"inner_bytes": -(2**63)}, "transfer region inner_bytes must be positive"),
        ({"inner_bytes": -5}, "transfer region inner_bytes must be positive"),
        ({"source_base_offset": -1}, "transfer region base offsets must be non-negative"),
    ],
)
def test_region_values_the_physical_sweep_cannot_walk(edit: dict, message: str) -> None:
    """Found by the atheris pickle target after F2-F4 (F7): a well-typed forged region whose
    extents are negative passes ``validate_bounds`` and reached the target physical-range sweep,
    whose kernel refused it with its own message ("physical_sweep: inner bytes is outside the
    unsigned 64-bit range"). The §8.4 value rules the sweep relies on now run just before it."""
    plan = R.plan()
    op = plan.operations[0]
    operations = (R.forged(op, **edit),) + plan.operations[1:]
    _raises(message, lambda: dataclasses.replace(plan, operations=operations))
    state = plan.__getstate__()
    state["operations"] = operations
    _raises(message, lambda: R.load_field_state(state))


@pytest.mark.parametrize("name", ["max_transfer_regions", "max_segments_per_region", "max_total_lowered_segments"])
@pytest.mark.parametrize("value", [None, "4", 2.0, True, (1,)])
def test_replace_with_any_forged_limit(name: str, value: Any) -> None:
    """Every limit, forged to a non-int through replace: the spec 8.3 message of that limit."""
    plan = R.plan()
    limits = R.forged(plan.planning_limits, **{name: value})
    _raises(f"planning limit {name} must be a positive integer",
            lambda: dataclasses.replace(plan, planning_limits=limits))


# -- F10: a logical plan's placements and tensor tuples -----------------------------------------


def _logical_plan() -> Any:
    from memory_executor import tp_placement  # type: ignore[import-not-found]
    from mooncake.reshard.weight import plan_placement_transfer

    return plan_placement_transfer(tp_placement(2, prefix="s", dp=2), tp_placement(3, prefix="t"))


def _load_logical_state(state: dict) -> Any:
    """A logical plan's field-state pickle: a new ``LogicalTransferPlan``, then its
    ``__setstate__`` (which runs ``__post_init__``)."""
    from mooncake.reshard.weight import LogicalTransferPlan

    class _State:
        def __reduce__(self) -> Any:
            return (object.__new__, (LogicalTransferPlan,), state)

    return pickle.loads(pickle.dumps(_State(), protocol=4))


def _forged_part(placement: Any, **fields: Any) -> Any:
    """``placement`` with its first part forged (the manifest's other fields kept)."""
    parts = (R.forged(placement.parts[0], **fields),) + placement.parts[1:]
    return R.forged(placement, parts=parts)


def _f10_cases(plan: Any) -> list:
    """(changes, message): each change made the rules raise Python's error before F10's fix.
    (A forged value no rule reads, e.g. the target manifest's own ``tensors``, is accepted as
    the rules accept it; one a rule compares, e.g. a target descriptor, gets that rule's
    message.)"""
    target, source = plan.target_placement, plan.source_placement
    part = target.parts[0]
    fragment = part.fragments[0]
    return [
        ({"target_placement": R.forged(target, resource_id=...)}, "resource_id must be a non-empty string"),
        ({"source_placement": R.forged(source, revision=...)}, "revision must be a non-empty string"),
        ({"target_placement": R.forged(target, parts=-1)}, "WeightPlacementManifest parts must be a sequence"),
        (
            {"target_placement": R.forged(target, parts=("x", "y"))},
            "WeightPlacementManifest parts must contain WeightPlacementPart",
        ),
        ({"target_placement": _forged_part(target, fragments=True)}, "WeightPlacementPart fragments must be a sequence"),
        ({"target_placement": _forged_part(target, tensors="x")}, "WeightPlacementPart tensors must be a sequence"),
        ({"target_placement": _forged_part(target, participant_id=[])}, "participant_id must be a non-empty string"),
        ({"target_placement": _forged_part(target, rank=...)}, "placement part rank must be a ParallelRank"),
        (
            {"target_placement": _forged_part(
                target, fragments=(R.forged(fragment, placement_fragment_id=[1]),) + part.fragments[1:]
            )},
            "placement_fragment_id must be a non-empty string",
        ),
        ({"source_placement": R.forged(source, tensors=...)}, "WeightPlacementManifest tensors must be a sequence"),
        ({"source_placement": _forged_part(source, rank=...)}, "placement part rank must be a ParallelRank"),
    ]


def test_f10_logical_plan_placement_graph_forged() -> None:
    """Found by a forgery fuzzer over every object of a logical plan's state (F10): a forged
    placement, part, fragment or tensor descriptor in a ``LogicalTransferPlan`` reached its rules
    as ``AttributeError``/``TypeError`` through ``replace`` and the field-state pickle. The spec
    message of the first mistyped field now replaces Python's error, as for regions (F2)."""
    plan = _logical_plan()
    state = plan.__getstate__()
    for changes, message in _f10_cases(plan):
        _raises(message, lambda: dataclasses.replace(plan, **changes))
        _raises(message, lambda: _load_logical_state({**state, **changes}))


def test_f10_a_well_typed_logical_plan_still_round_trips() -> None:
    """The check runs only after a rule raised Python's error: an intact plan is unchanged."""
    plan = _logical_plan()
    assert pickle.loads(pickle.dumps(plan)) == plan
    assert _load_logical_state(plan.__getstate__()) == plan
    assert dataclasses.replace(plan) == plan


# -- F11: bind's inputs (a default-pickled binding manifest, a logical plan forged in place) ----


def _world() -> Any:
    from test_binding_attacks import World  # type: ignore[import-not-found]

    return World()


def _damaged_binding_pickle(binding: Any, **fields: Any) -> Any:
    """What unpickling a damaged ``WeightRuntimeBindingManifest`` gives: its default pickling
    (spec §13) restores the dict without ``__post_init__``."""
    return pickle.loads(pickle.dumps(R.forged(binding, **fields)))


@pytest.mark.parametrize("side", ["target", "source"])
@pytest.mark.parametrize(
    "fields, message",
    [
        ({"fragments": ...}, "WeightRuntimeBindingManifest fragments must be a sequence"),
        ({"fragments": 0}, "WeightRuntimeBindingManifest fragments must be a sequence"),
        ({"fragments": ("x",)}, "WeightRuntimeBindingManifest fragments must contain RuntimeBindingFragment"),
        ({"fragments": [1]}, "WeightRuntimeBindingManifest fragments must contain RuntimeBindingFragment"),
        ({"generation": ...}, "generation must be an integer"),
        ({"participant_id": []}, "participant_id must be a non-empty string"),
        ({"placement_id": {}}, "placement_id must be a non-empty string"),
        ({"lease_id": ...}, "lease_id must be a non-empty string"),
        ({"placement_digest": ...}, "placement_digest must be a non-empty string"),
    ],
)
def test_f11_damaged_binding_pickle(side: str, fields: dict, message: str) -> None:
    """Found by a forgery run over bind's inputs (F11): runtime binding manifests gathered from
    ranks by pickle restore without their checks, and bind's rules met a missing or mistyped
    field as ``AttributeError``/``TypeError``. The field's §4.9 message replaces it."""
    world = _world()
    bindings = world.target_bindings if side == "target" else world.source_bindings
    damaged = (_damaged_binding_pickle(bindings[0], **fields),) + tuple(bindings[1:])
    if side == "target":
        _raises(message, lambda: world.bind(damaged))
    else:
        _raises(message, lambda: world.bind(source_bindings=damaged))


def test_f11_forged_runtime_fragment_in_a_binding() -> None:
    """A runtime fragment forged in place inside a binding: the fragment field's message."""
    world = _world()
    binding = world.target_bindings[0]
    fragments = (R.forged(binding.fragments[0], address=...),) + binding.fragments[1:]
    damaged = (R.forged(binding, fragments=fragments),) + tuple(world.target_bindings[1:])
    _raises("address must be an integer", lambda: world.bind(damaged))


def test_f11_logical_plan_forged_in_place() -> None:
    """A logical plan whose fields were replaced in place (``object.__new__`` + its dict: its
    ``__post_init__`` never saw them): the construction check's message for an object of another
    class; bind's step 8 message for a non-region operation; the field's message for a forged
    region, fragment, placement or descriptor inside it."""
    world = _world()
    plan = world.logical
    op = plan.operations[0]
    cases = [
        ({"operations": (plan.target_executors[0],)}, "logical transfer operation is not canonical"),
        ({"operations": "x"}, "logical transfer operation is not canonical"),
        ({"planning_limits": None}, "logical transfer plan planning_limits is invalid"),
        ({"target_placement": frozenset({1})}, "logical transfer plan target placement is invalid"),
        ({"source_placement": ()}, "logical transfer plan source placement is invalid"),
        ({"target_executors": (op,)}, "logical transfer plan has invalid canonical executor metadata"),
        ({"source_tensors": [1]}, "logical transfer plan source_tensors must contain TensorDescriptor"),
        (
            {"target_tensors": (R.forged(plan.target_tensors[0], tensor_id=...),)},
            "tensor_id must be a non-empty string",
        ),
        ({"source_tensors": (R.forged(plan.source_tensors[0], itemsize=...),)}, "itemsize must be an integer"),
        ({"source_manifest_identity": ...}, "logical transfer plan source_manifest_identity is invalid"),
        ({"operations": (R.forged(op, overlap_shape=-1),) + plan.operations[1:]},
         "transfer region overlap_shape must contain integers"),
        (
            {"target_placement": _forged_part(plan.target_placement, rank=...)},
            "placement part rank must be a ParallelRank",
        ),
    ]
    for fields, message in cases:
        _raises(message, lambda: world.bind(logical=R.forged(plan, **fields)))


def test_f11_a_container_that_is_not_iterable_keeps_pythons_type_error() -> None:
    """As the constructor's ``tuple()`` step raises it (§1.4: Python's own TypeError), and an
    intact bind is unchanged."""
    world = _world()
    plan = world.logical
    with pytest.raises(TypeError):
        world.bind(logical=R.forged(plan, operations=True))
    with pytest.raises(TypeError):
        dataclasses.replace(plan, operations=True)
    assert world.bind().operations


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"fragments": ...}, "WeightRuntimeBindingManifest fragments must be a sequence"),
        ({"fragments": (None,)}, "WeightRuntimeBindingManifest fragments must contain RuntimeBindingFragment"),
        ({"instance_id": ...}, "instance_id must be a non-empty string"),
        ({"participant_id": {}}, "participant_id must be a non-empty string"),
        ({"placement_id": ...}, "placement_id must be a non-empty string"),
    ],
)
def test_f11_damaged_binding_pickle_in_the_other_entry_points(fields: dict, message: str) -> None:
    """The public calls that take a binding meet the same restored values: validating one or a
    set of bindings against their placement, and resolving a plan's executors for a binding."""
    from mooncake.reshard.weight import validate_runtime_binding, validate_runtime_bindings
    from mooncake.reshard.weight.planner import resolve_executor_plan, resolve_executor_plans

    world = _world()
    plan = world.bind()
    for side, bindings, placement in (
        ("target", world.target_bindings, world.target),
        ("source", world.source_bindings, world.source),
    ):
        damaged = _damaged_binding_pickle(bindings[0], **fields)
        _raises(message, lambda: validate_runtime_binding(placement, damaged))
        _raises(message, lambda: validate_runtime_bindings(placement, (damaged,) + tuple(bindings[1:])))
        _raises(message, lambda: resolve_executor_plan(plan, placement, damaged, side))
        _raises(message, lambda: resolve_executor_plans(plan, placement, damaged, side))


@pytest.mark.parametrize(
    "forge, message, local",
    [
        (lambda p: R.forged(p, resource_id=...), "resource_id must be a non-empty string", True),
        (lambda p: R.forged(p, parts="x"), "WeightPlacementManifest parts must be a sequence", True),
        (lambda p: R.forged(p, tensors="x"), "WeightPlacementManifest tensors must be a sequence", False),
        (lambda p: R.forged(p, tensors=(1,)), "WeightPlacementManifest tensors must contain TensorDescriptor", False),
        (lambda p: _forged_part(p, rank=[1]), "placement part rank must be a ParallelRank", True),
        (lambda p: _forged_part(p, fragments=None), "WeightPlacementPart fragments must be a sequence", True),
        (
            lambda p: R.forged(p, fragments=(R.forged(p.fragments[0], nbytes=b"x"),) + p.fragments[1:]),
            "nbytes must be an integer",
            False,
        ),
    ],
)
def test_f11_placements_forged_in_place_reach_the_planner(
    forge: Callable[[Any], Any], message: str, local: bool
) -> None:
    """The three planning entry points read the placements' fields too (a placement pickle is
    shape-checked when restored; one forged in place is not): the first mistyped field's
    message, never Python's error. (Planning for one local target reads that participant's part,
    not the target manifest's own ``tensors`` and ``fragments``: those forgeries are accepted
    there, as its rules accept them.)"""
    from memory_executor import tp_placement  # type: ignore[import-not-found]
    from mooncake.reshard.weight import (
        plan_placement_transfer,
        plan_placement_transfer_to_local_target,
        plan_stored_transfer_to_target_placement,
    )
    from test_binding_attacks import _stored_world  # type: ignore[import-not-found]

    source, target = tp_placement(2, prefix="s", dp=2), tp_placement(3, prefix="t")
    _raises(message, lambda: plan_placement_transfer(forge(source), target))
    _raises(message, lambda: plan_placement_transfer(source, forge(target)))
    participant = target.parts[0].participant_id
    if local:
        _raises(message, lambda: plan_placement_transfer_to_local_target(source, forge(target), participant))
    stored_target, manifest, _, _ = _stored_world()
    _raises(message, lambda: plan_stored_transfer_to_target_placement(manifest, forge(stored_target)))


def test_f11_found_by_the_forgery_runner() -> None:
    """Two cases ``fuzz/forgery.py`` found after the fixes above: a plan container of a str
    subclass (its items read through str's own iteration: no user code), and a part that no
    longer declares the tensor its fragments name (the catalog lookup's KeyError; §4.7 step 8's
    message)."""
    from memory_executor import tp_placement  # type: ignore[import-not-found]
    from mooncake.reshard.weight import plan_placement_transfer_to_local_target

    class Text(str):
        pass

    world = _world()
    plan = world.logical
    _raises(
        "logical transfer plan has invalid canonical executor metadata",
        lambda: world.bind(logical=R.forged(plan, target_executors=Text("x"))),
    )
    source, target = tp_placement(2, prefix="s", dp=2), tp_placement(3, prefix="t")
    forged = _forged_part(target, tensors=())
    tensor_id = target.parts[0].fragments[0].tensor_id
    _raises(
        f"unknown tensor_id: {tensor_id}",
        lambda: plan_placement_transfer_to_local_target(source, forged, target.parts[0].participant_id),
    )

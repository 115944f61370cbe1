"""What one implementation makes of a plain-data input: the same code runs on ours (in the test
process) and on the reference (in ``reference_server.py``'s process), so the two answers compare
field for field.

Each outcome is JSON-ready: either the values (ids, digests, the wire JSON, the plans in the
known-answer README's canonical form) or ``{"error": [type name, message]}`` for the exception
the inputs raised.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Sequence, Tuple

from known_answers import canonical
from layout_model import Layout, build_fragment, build_placement, build_runtime_bindings, build_tensor


def _error(error: BaseException) -> Dict[str, Any]:
    return {"error": [type(error).__name__, str(error)]}


def _placement_values(placement: Any) -> Dict[str, Any]:
    """A placement's ids, wire JSON, its fragments' ``fragment_id`` and its ``resource_kind``, and
    what its topology answers: its world size and each participant (and an unknown id's refusal)
    by ``participant``."""
    from mooncake.reshard.weight import weight_placement_to_json

    topology = placement.topology
    ids = [participant.participant_id for participant in topology.participants] + ["nobody"]
    return {
        "placement_id": placement.placement_id,
        "digest": placement.digest,
        "json": weight_placement_to_json(placement),
        "world_size": topology.world_size,
        "participants": [_attempt(lambda pid=pid: topology.participant(pid)) for pid in ids],
        "fragment_ids": [fragment.fragment_id for fragment in placement.fragments],
        "resource_kind": str(placement.resource_kind),
    }


# spec/API.md §11.4 check 3; the released reference ends it with the repeated fragment's id
# instead of its tensor id (test_reference.py: as_specified)
DUPLICATE_LOGICAL = "duplicate logical fragment for tensor and parallel rank: "


def placement_outcome(layout: Layout) -> Dict[str, Any]:
    """``WeightPlacementManifest.from_fragments`` of the layout: its ids and wire JSON, or the
    error it raised. With a duplicate-logical-fragment error, also the tensor id of every
    fragment id (``fragment_tensors``: what maps the release's message to the specified one)."""
    try:
        placement = build_placement(layout)
    except Exception as error:  # the answer compared, whatever it is
        outcome = _error(error)
        if str(error).startswith(DUPLICATE_LOGICAL):
            fragments = [build_fragment(layout, f) for f in layout.fragments]
            outcome["fragment_tensors"] = {f.placement_fragment_id: f.tensor_id for f in fragments}
        return outcome
    return _placement_values(placement)


PART_FIELDS = (
    "resource_id", "revision", "weight_generation", "placement_set_id", "topology_id", "participant_id", "rank",
)
CALL_FIELDS = ("resource_id", "revision", "weight_generation", "placement_set_id")


def parts_outcome(layout: Layout, edits: Sequence[Tuple[Any, ...]]) -> Dict[str, Any]:
    """The ``WeightPlacementManifest`` constructor (from parts) on the parts of the layout's
    placement (``from_fragments``) after ``edits``, applied in order (part indices modulo the
    count; each edited part made again by ``dataclasses.replace``, which checks it):

    - ``("order", seed)``: the parts shuffled by ``random.Random(seed)``;
    - ``("drop", p)`` / ``("repeat", p)``: part ``p`` left out / listed twice;
    - ``("part", p, field, value)``: that field of part ``p`` replaced; a ``value`` of
      ``("copy", q)`` is part ``q``'s value of the field;
    - ``("fragment", p, how, i, q)``: fragment ``i`` of part ``p`` dropped (``how`` "drop"),
      listed twice ("repeat") or moved to the end of part ``q`` ("move"); "reverse" reverses
      the part's fragments;
    - ``("tensor", p, how, i)``: the same for the part's tensors ("drop", "repeat", "reverse");
    - ``("call", field, value)``: that argument of the constructor call replaced;
    - ``("placement_id", value)``: passed as ``placement_id`` ("own": the placement's own id).

    The new placement's ids and wire JSON, or the error that ended the sequence (``stage`` says
    where)."""
    import dataclasses
    import random

    from mooncake.reshard.weight import WeightPlacementManifest

    outcome: Dict[str, Any] = {"stage": "placement"}
    try:
        placement = build_placement(layout)
        parts = list(placement.parts)
        call: Dict[str, Any] = {name: getattr(placement, name) for name in CALL_FIELDS}
        call["topology"] = placement.topology
        for number, edit in enumerate(edits):
            outcome["stage"] = f"edit {number}"
            kind = edit[0]
            if kind == "order":
                random.Random(edit[1]).shuffle(parts)
            elif kind == "call":
                call[edit[1]] = edit[2]
            elif kind == "placement_id":
                call["placement_id"] = placement.placement_id if edit[1] == "own" else edit[1]
            elif parts:
                p = edit[1] % len(parts)
                if kind == "drop":
                    del parts[p]
                elif kind == "repeat":
                    parts.append(parts[p])
                elif kind == "part":
                    _, _, field, value = edit
                    if type(value) is tuple and len(value) == 2 and value[0] == "copy":
                        value = getattr(parts[value[1] % len(parts)], field)
                    parts[p] = dataclasses.replace(parts[p], **{field: value})
                else:
                    name = "fragments" if kind == "fragment" else "tensors"
                    items = list(getattr(parts[p], name))
                    how = edit[2]
                    if how == "reverse":
                        items.reverse()
                    elif items:
                        i = edit[3] % len(items)
                        if how == "repeat":
                            items.append(items[i])
                        else:
                            moved = items.pop(i)
                            q = edit[4] % len(parts) if how == "move" else None
                            if q == p:
                                items.append(moved)
                            elif q is not None:
                                parts[q] = dataclasses.replace(parts[q], **{name: getattr(parts[q], name) + (moved,)})
                    parts[p] = dataclasses.replace(parts[p], **{name: tuple(items)})
        outcome["stage"] = "construct"
        result = WeightPlacementManifest(parts=tuple(parts), **call)
        outcome["stage"] = "values"
        values = _placement_values(result)
    except Exception as error:  # the answer compared, whatever it is
        outcome.update(_error(error))
        return outcome
    return values


def plan_outcome(
    source: Layout, target: Layout, participant_id: Optional[str], limits: Optional[Tuple[int, int, int]] = None
) -> Dict[str, Any]:
    """Both placements, ``plan_placement_transfer`` and, with a participant id,
    ``plan_placement_transfer_to_local_target`` for it: each plan in canonical form (as JSON
    text), or the error that ended the sequence. ``limits``: ``(max_transfer_regions,
    max_segments_per_region, max_total_lowered_segments)`` of the ``PlanningLimits`` both plans
    are made with (None: the default limits, ``planning_limits`` not passed)."""
    from mooncake.reshard.weight import (
        PlanningLimits,
        plan_placement_transfer,
        plan_placement_transfer_to_local_target,
    )

    outcome: Dict[str, Any] = {}
    try:
        keywords: Dict[str, Any] = {}
        if limits is not None:
            outcome["stage"] = "limits"
            regions, per_region, total = limits
            keywords["planning_limits"] = PlanningLimits(
                max_transfer_regions=regions, max_segments_per_region=per_region, max_total_lowered_segments=total
            )
        placements = []
        for side, layout in (("source", source), ("target", target)):
            outcome["stage"] = f"{side} placement"
            placements.append(build_placement(layout))
        outcome["stage"] = "plan"
        plan = plan_placement_transfer(placements[0], placements[1], **keywords)
        outcome["plan"] = json.dumps(canonical(plan), sort_keys=True)
        if participant_id is not None:
            outcome["stage"] = "local plan"
            local = plan_placement_transfer_to_local_target(placements[0], placements[1], participant_id, **keywords)
            outcome["local_plan"] = json.dumps(canonical(local), sort_keys=True)
    except Exception as error:  # the answer compared, whatever it is
        outcome.update(_error(error))
        return outcome
    del outcome["stage"]
    return outcome


# The arguments of a planner call: the placements of the drawn pair, or other values.
ARGUMENT_KINDS = ("source", "target", "none", "zero", "text", "source part", "source topology", "dict")
LIMIT_KINDS = ("absent", "none", "default", "zero", "empty dict", "five", "text", "one region")


def planner_call_outcome(
    source: Layout, target: Layout, local: bool, first: str, second: str, participant: Any, limits: str
) -> Dict[str, Any]:
    """A planner called with the arguments ``ARGUMENT_KINDS`` names (``first`` and ``second``,
    made from the pair's placements), ``planning_limits`` as ``LIMIT_KINDS`` names it and, with
    ``local``, ``plan_placement_transfer_to_local_target`` with ``participant``: the plan in
    canonical form, or the error."""
    from mooncake.reshard.weight import (
        PlanningLimits,
        plan_placement_transfer,
        plan_placement_transfer_to_local_target,
    )

    outcome: Dict[str, Any] = {"stage": "placements"}
    try:
        placements = {"source": build_placement(source), "target": build_placement(target)}
        values = {
            **placements,
            "none": None,
            "zero": 0,
            "text": "x",
            "source part": placements["source"].parts[0],
            "source topology": placements["source"].topology,
            "dict": {},
        }
        keywords: Dict[str, Any] = {}
        if limits == "default":
            keywords["planning_limits"] = PlanningLimits()
        elif limits == "one region":
            keywords["planning_limits"] = PlanningLimits(max_transfer_regions=1)
        elif limits != "absent":
            keywords["planning_limits"] = {"none": None, "zero": 0, "empty dict": {}, "five": 5, "text": "x"}[limits]
        outcome["stage"] = "plan"
        if local:
            plan = plan_placement_transfer_to_local_target(values[first], values[second], participant, **keywords)
        else:
            plan = plan_placement_transfer(values[first], values[second], **keywords)
        return {"plan": json.dumps(canonical(plan), sort_keys=True)}
    except Exception as error:  # the answer compared, whatever it is
        outcome.update(_error(error))
        return outcome


def geometry_outcome(name: str, args: Tuple[Any, ...]) -> Dict[str, Any]:
    """``mooncake.reshard.geometry.<name>(*args)``: its value, or the error it raised. For
    ``regions_exactly_cover`` the arguments are ``(offset, shape, boxes)``, passed as a target
    and regions of plain classes with those attributes."""
    from types import SimpleNamespace

    from mooncake.reshard import geometry

    try:
        if name == "regions_exactly_cover":
            offset, shape, boxes = args
            target = SimpleNamespace(global_offset=offset, local_shape=shape)
            regions = [SimpleNamespace(overlap_offset=o, overlap_shape=s) for o, s in boxes]
            value = geometry.regions_exactly_cover(target, regions)
        else:
            value = getattr(geometry, name)(*args)
    except Exception as error:  # the answer compared, whatever it is
        return _error(error)
    return {"value": value}


def helper_outcome(name: str, args: Tuple[Any, ...], tensor: Any = None) -> Dict[str, Any]:
    """``mooncake.reshard.weight.types.<name>(*args)``: its value, or the error it raised. For
    ``validate_fragment_geometry`` the arguments are ``(fragment_id, global_offset, local_shape,
    nbytes)`` with ``tensor`` (a ``layout_model.TensorSpec``) built as the descriptor; for
    ``require_manifest_items`` ``args[2]`` names the item class ("int", "str" or "tuple")."""
    from mooncake.reshard.weight import types

    try:
        if name == "validate_fragment_geometry":
            fragment_id, offset, shape, nbytes = args
            value = types.validate_fragment_geometry(
                build_tensor(tensor), fragment_id=fragment_id, global_offset=offset, local_shape=shape, nbytes=nbytes
            )
        elif name == "require_manifest_items":
            value = types.require_manifest_items(args[0], args[1], {"int": int, "str": str, "tuple": tuple}[args[2]])
        else:
            value = getattr(types, name)(*args)
    except Exception as error:  # the answer compared, whatever it is
        return _error(error)
    return {"value": value}


def _attempt(call: Any) -> Any:
    """``call()``'s value in canonical form, or its error."""
    try:
        return canonical(call())
    except Exception as error:  # the answer compared, whatever it is
        return _error(error)


def _plan_views(plan: Any) -> Dict[str, Any]:
    """Everything a plan derives beyond its compared fields (``canonical`` reads only those):
    its totals and placement ids, pipeline routes, each executor's operation indices, and per
    operation the region's derived values, its segments and its bounds check."""
    views: Dict[str, Any] = {
        "total_bytes": _attempt(lambda: plan.total_bytes),
        "placement_ids": _attempt(lambda: (plan.source_placement_id, plan.target_placement_id)),
        "pipeline_routes": _attempt(lambda: plan.pipeline_routes),
        "source_snapshot": _attempt(plan.validate_source_placement_snapshot),
        "manifest_snapshot": _attempt(plan.validate_source_manifest_snapshot),
        "indices": [
            _attempt(lambda: plan.operation_indices_for_executor(executor, side))
            for side in ("source", "target")
            for executor in getattr(plan, side + "_executors")
        ],
        "wrong_side": _attempt(lambda: plan.operation_indices_for_executor(plan.target_executors[0], "sideways")),
        "foreign": _attempt(lambda: plan.operation_indices_for_executor(plan.target_executors[0], "source")),
    }
    regions = []
    for region in plan.operations:
        regions.append({
            name: _attempt(lambda name=name: getattr(region, name))
            for name in ("nbytes", "repeat", "segment_count", "total_bytes", "source_offset", "target_offset",
                         "source_stride", "target_stride")
        })
        count = region.segment_count
        regions[-1]["segments"] = _attempt(lambda: list(region.iter_segments(max_segments=count)))
        regions[-1]["over_budget"] = _attempt(lambda: list(region.iter_segments(max_segments=max(count - 1, 0))))
        regions[-1]["bounds"] = _attempt(region.validate_bounds)
        regions[-1]["fragment_ids"] = _attempt(lambda: (region.source.fragment_id, region.target.fragment_id))
    views["regions"] = regions
    return views


def plan_views_outcome(source: Layout, target: Layout, participant_id: Optional[str]) -> Dict[str, Any]:
    """``_plan_views`` of ``plan_placement_transfer``'s plan and, with a participant id, of the
    local plan for it (``plan_outcome`` compares the plans' fields), or the error on the way."""
    from mooncake.reshard.weight import plan_placement_transfer, plan_placement_transfer_to_local_target

    outcome: Dict[str, Any] = {"stage": "plans"}
    try:
        placements = (build_placement(source), build_placement(target))
        outcome["plan"] = _plan_views(plan_placement_transfer(*placements))
        if participant_id is not None:
            local = plan_placement_transfer_to_local_target(*placements, participant_id)
            outcome["local_plan"] = _plan_views(local)
    except Exception as error:  # the answer compared, whatever it is
        outcome.update(_error(error))
    return outcome


REGION_FIELDS = (
    "tensor_id", "source", "target", "overlap_offset", "overlap_shape", "source_base_offset", "target_base_offset",
    "inner_bytes", "outer_loop_counts", "source_strides", "target_strides",
)


def _edited(items: Tuple[Any, ...], how: str, i: int, j: int) -> Tuple[Any, ...]:
    """``items`` with item ``i`` dropped, repeated at the end, swapped with item ``j`` or moved
    to the end, or all reversed (indices modulo the count; unchanged when empty)."""
    out = list(items)
    if how == "reverse":
        out.reverse()
    elif out:
        i, j = i % len(out), j % len(out)
        if how == "drop":
            del out[i]
        elif how == "repeat":
            out.append(out[i])
        elif how == "swap":
            out[i], out[j] = out[j], out[i]
        else:
            out.append(out.pop(i))
    return tuple(out)


def plan_edit_outcome(source: Layout, target: Layout, edits: Sequence[Tuple[Any, ...]]) -> Dict[str, Any]:
    """``plan_placement_transfer``'s plan rebuilt by ``dataclasses.replace`` after ``edits``
    (each replace runs the constructor's checks, spec/API.md §8.6; a region's replace its own,
    §8.4), applied in order:

    - ``("operations", how, i, j)``, ``("source_executors", ...)``, ``("target_executors", ...)``,
      ``("source_tensors", ...)``, ``("target_tensors", ...)``: that tuple edited (``_edited``);
    - ``("region", i, field, value)``: that field of operation ``i`` replaced; a ``value`` of
      ``("copy", j)`` is operation ``j``'s value of the field, ``("shift", delta)`` its own int
      (or a tuple's first int) moved;
    - ``("plan", field, value)``: a plan field replaced; the values "source placement", "target
      placement" and "one region" stand for those objects (``PlanningLimits`` with
      ``max_transfer_regions=1``).

    The rebuilt plan in canonical form with ``_plan_views``, or the error on the way."""
    import dataclasses

    from mooncake.reshard.weight import PlanningLimits, plan_placement_transfer

    outcome: Dict[str, Any] = {"stage": "plan"}
    try:
        placements = (build_placement(source), build_placement(target))
        plan = plan_placement_transfer(*placements)
        for number, edit in enumerate(edits):
            outcome["stage"] = f"edit {number}"
            kind = edit[0]
            if kind == "region":
                _, i, field, value = edit
                operations = list(plan.operations)
                if not operations:
                    continue
                i %= len(operations)
                current = getattr(operations[i], field)
                if type(value) is tuple and len(value) == 2 and value[0] == "copy":
                    value = getattr(operations[value[1] % len(operations)], field)
                elif type(value) is tuple and len(value) == 2 and value[0] == "shift":
                    if type(current) is int:
                        value = current + value[1]
                    elif type(current) is tuple and current and type(current[0]) is int:
                        value = (current[0] + value[1],) + current[1:]
                    else:
                        value = current
                operations[i] = dataclasses.replace(operations[i], **{field: value})
                plan = dataclasses.replace(plan, operations=tuple(operations))
            elif kind == "plan":
                _, field, value = edit
                value = {
                    "source placement": placements[0], "target placement": placements[1],
                    "one region": PlanningLimits(max_transfer_regions=1),
                }.get(value, value) if type(value) is str else value
                plan = dataclasses.replace(plan, **{field: value})
            else:
                _, how, i, j = edit
                plan = dataclasses.replace(plan, **{kind: _edited(getattr(plan, kind), how, i, j)})
        outcome["stage"] = "views"
        values = {"plan": json.dumps(canonical(plan), sort_keys=True), "views": _plan_views(plan)}
    except Exception as error:  # the answer compared, whatever it is
        outcome.update(_error(error))
        return outcome
    return values


def pickled_values_outcome(source: Layout, target: Layout, participant_id: Optional[str]) -> Dict[str, bytes]:
    """Pickles (protocols 2 and the highest) of the pair's placements, one of each value type
    they hold, and both plans, keyed by what they are: for the other implementation to load."""
    import pickle

    from mooncake.reshard.weight import plan_placement_transfer, plan_placement_transfer_to_local_target

    placements = (build_placement(source), build_placement(target))
    plan = plan_placement_transfer(*placements)
    values: Dict[str, Any] = {
        "source placement": placements[0], "target placement": placements[1], "plan": plan,
        "part": placements[1].parts[0], "topology": placements[1].topology, "tensor": placements[1].tensors[0],
        "fragment": placements[1].fragments[0], "region": plan.operations[0], "limits": plan.planning_limits,
        "executor": plan.target_executors[0], "route": plan.pipeline_routes[0],
    }
    if participant_id is not None:
        try:
            values["local plan"] = plan_placement_transfer_to_local_target(*placements, participant_id)
        except ValueError:  # (a participant without target fragments)
            pass
    return {
        f"{name} {protocol}": pickle.dumps(value, protocol=protocol)
        for name, value in values.items()
        for protocol in (2, pickle.HIGHEST_PROTOCOL)
    }


def unpickled_outcome(payloads: Dict[str, bytes]) -> Dict[str, Any]:
    """Each payload loaded: its value in canonical form (a plan as JSON text), or the error."""
    import pickle

    outcome: Dict[str, Any] = {}
    for name, payload in payloads.items():
        try:
            outcome[name] = json.dumps(canonical(pickle.loads(payload)), sort_keys=True)
        except Exception as error:  # the answer compared, whatever it is
            outcome[name] = _error(error)
    return outcome


def known_answer_outcome(name: str) -> Dict[str, Any]:
    """A known-answer case's placements (from its wire JSON) and logical plans, as
    ``test_known_answers_logical.py`` computes them."""
    from known_answers import load_case
    from mooncake.reshard.weight import (
        plan_placement_transfer,
        plan_placement_transfer_to_local_target,
        weight_placement_from_json,
    )

    inputs = load_case(name)["inputs"]
    source = weight_placement_from_json(inputs["source_placement_json"])
    target = weight_placement_from_json(inputs["target_placement_json"])
    local = plan_placement_transfer_to_local_target(source, target, inputs["local_target_participant_id"])
    return {
        "source": [source.placement_id, source.digest],
        "target": [target.placement_id, target.digest],
        "logical_plan": json.dumps(canonical(plan_placement_transfer(source, target)), sort_keys=True),
        "local_target_plan": json.dumps(canonical(local), sort_keys=True),
    }


def json_outcome(text: Any) -> Dict[str, Any]:
    """``weight_placement_from_json`` of the text (any value: the function's own checks decide):
    the placement's ids and its wire JSON again, or the error it raised (with
    ``fragment_tensors`` as ``placement_outcome`` gives it)."""
    from mooncake.reshard.weight import weight_placement_from_json

    try:
        placement = weight_placement_from_json(text)
    except Exception as error:  # the answer compared, whatever it is
        outcome = _error(error)
        if str(error).startswith(DUPLICATE_LOGICAL):
            outcome["fragment_tensors"] = _document_fragment_tensors(text)
        return outcome
    return _placement_values(placement)


def _document_fragment_tensors(text: str) -> Dict[str, Any]:
    """The tensor id of each fragment id a placement document lists (the last one wins)."""
    tensors: Dict[str, Any] = {}
    for part in json.loads(text)["parts"]:
        for fragment in part["fragments"]:
            tensors[fragment["placement_fragment_id"]] = fragment["tensor_id"]
    return tensors


# Fields a binding edit may change (RuntimeBindingFragment's, then WeightRuntimeBindingManifest's).
FRAGMENT_FIELDS = (
    "placement_fragment_id", "fragment_id", "address", "nbytes", "worker_id", "endpoint", "device", "itemsize",
    "local_shape", "strides_bytes", "storage_address", "storage_nbytes", "storage_offset_bytes",
)
MANIFEST_FIELDS = (
    "resource_id", "placement_id", "placement_digest", "instance_id", "generation", "lease_id", "revision",
    "participant_id",
)


def binding_outcome(layout: Layout, edits: Sequence[Tuple[Any, ...]]) -> Dict[str, Any]:
    """``validate_runtime_bindings`` of the layout's placement and its canonical bindings
    (``layout_model.build_runtime_bindings``) after ``edits``, applied in order:

    - ``("fragment", b, f, field, value)``: that field of fragment ``f`` of binding ``b``
      replaced (``dataclasses.replace``: the constructors check it), the manifest rebuilt;
    - ``("manifest", b, field, value)``: that field of binding ``b`` replaced;
    - ``("drop", b)`` / ``("repeat", b)``: binding ``b`` left out / listed twice.

    Indices are taken modulo the counts; a ``value`` of ``("copy", b, f)`` is that fragment's (or,
    with ``f`` None, that binding's) value of the same field, one of ``("shift", delta)`` the
    field's own value moved by ``delta`` (an int; a tuple's first int item). ``{"valid": True}``, or the error
    that ended the sequence (``stage`` says where). Once the edits are made, ``each`` holds the
    verdict of ``validate_runtime_binding`` on each binding alone (``{"valid": True}`` or its
    error), in list order."""
    import dataclasses

    from mooncake.reshard.weight import validate_runtime_binding, validate_runtime_bindings

    outcome: Dict[str, Any] = {"stage": "placement"}
    try:
        placement = build_placement(layout)
        bindings = list(build_runtime_bindings(placement))
        for number, edit in enumerate(edits):
            outcome["stage"] = f"edit {number}"
            if not bindings:
                break
            b = edit[1] % len(bindings)
            if edit[0] == "drop":
                del bindings[b]
            elif edit[0] == "repeat":
                bindings.append(bindings[b])
            elif edit[0] == "manifest":
                _, _, field, value = edit
                value = _edit_value(bindings, value, field, None, getattr(bindings[b], field))
                bindings[b] = dataclasses.replace(bindings[b], **{field: value})
            else:
                _, _, f, field, value = edit
                fragments = list(bindings[b].fragments)
                f %= len(fragments)
                value = _edit_value(bindings, value, field, True, getattr(fragments[f], field))
                fragments[f] = dataclasses.replace(fragments[f], **{field: value})
                bindings[b] = dataclasses.replace(bindings[b], fragments=tuple(fragments))
        each: List[Dict[str, Any]] = []
        for binding in bindings:
            try:
                validate_runtime_binding(placement, binding)
            except Exception as error:  # the answer compared, whatever it is
                each.append(_error(error))
            else:
                each.append({"valid": True})
        outcome["each"] = each
        outcome["stage"] = "validate"
        validate_runtime_bindings(placement, tuple(bindings))
    except Exception as error:  # the answer compared, whatever it is
        outcome.update(_error(error))
        return outcome
    return {"each": each, "valid": True}


def _edit_value(bindings: List[Any], value: Any, field: str, of_fragment: Optional[bool], current: Any) -> Any:
    if type(value) is tuple and len(value) == 2 and value[0] == "shift":
        # an int moved by the delta; a tuple of ints with its first item moved (kept when empty)
        if type(current) is int:
            return current + value[1]
        if type(current) is tuple and current and type(current[0]) is int:
            return (current[0] + value[1],) + current[1:]
        return current
    if not (type(value) is tuple and len(value) == 3 and value[0] == "copy"):
        return value
    source = bindings[value[1] % len(bindings)]
    if of_fragment:
        source = source.fragments[(value[2] or 0) % len(source.fragments)]
    return getattr(source, field)


# The value types whose constructors both implementations have (the release has no stored
# manifest of the spec's shape and no PipelineRouteGroup / PlacementExecutorPlan constructors of
# the same fields), in fuzz/pyfuzz.py's order.
CONSTRUCTOR_LABELS = (
    "ParallelRank", "SplitAxis", "ReplicatedAxis", "OwnershipAxis", "TensorDescriptor", "PlacementFragment",
    "RuntimeBindingFragment", "TopologyParticipant", "ParallelTopology", "WeightPlacementPart",
    "WeightPlacementManifest", "WeightRuntimeBindingManifest", "PlanningLimits",
)


def constructor_outcome(seed: int) -> Dict[str, Any]:
    """``fuzz/pyfuzz.py``'s hostile constructor call drawn from ``seed`` (the same call in both
    processes: the hostile values are made afresh by the same generator), over
    ``CONSTRUCTOR_LABELS``: the value in canonical form, or the error (object addresses in a
    message masked)."""
    import random
    import re

    import pyfuzz

    label, factory, kwargs = pyfuzz.hostile_call(random.Random(seed), CONSTRUCTOR_LABELS)
    try:
        value = factory(**kwargs)
    except Exception as error:  # the answer compared, whatever it is
        kind, message = _error(error)["error"]
        return {"label": label, "error": [kind, re.sub(r"0x[0-9a-f]+", "0x", message)]}
    return {"label": label, "value": json.dumps(canonical(value), sort_keys=True, default=repr)}

"""Our answers against the released reference's, on the inputs the test suite's strategies draw.

The reference released so far has placements, runtime-binding validation and logical planning
(not runtime binding), so these compare: ``from_fragments`` (placement id, digest and wire JSON,
or the exact error) on valid, mutated and partial-topology layouts; the constructor from parts
on a placement's own parts, edited; ``weight_placement_from_json`` on mutated wire documents;
``validate_runtime_binding`` and ``validate_runtime_bindings`` on edited canonical bindings; the
value types' constructors on hostile fields; ``plan_placement_transfer`` and
``plan_placement_transfer_to_local_target`` (every field of the plans, or the exact error) on
pairs of placements of the same tensors, the same under planning limits drawn around what the
plans need (the budget refusals), the planners called with arguments of other kinds, what the
plans derive beyond their fields (views, segments, bounds), plans rebuilt after edits, and the
planner's refusals on mismatched pairs; the geometry functions on boxes with positive extents,
and near the 3-D overlap budget; the §4.5 helpers (strides, fragment geometry, digests, item
sequences) on drawn arguments; and, to tie the release to the reference our known answers come
from, the known-answer logical plans computed by the reference itself. Where the release departs
from the spec, ``as_specified`` and ``assert_agrees`` say how the answers are compared.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import sys
from typing import Any, Dict, List, Optional, Tuple

import pytest
from hypothesis import assume, event, given, settings, strategies as st

from known_answers import case_names, load_case
from layout_model import Layout
from outcomes import (
    ARGUMENT_KINDS,
    CALL_FIELDS,
    DUPLICATE_LOGICAL,
    FRAGMENT_FIELDS,
    LIMIT_KINDS,
    MANIFEST_FIELDS,
    PART_FIELDS,
    REGION_FIELDS,
    binding_outcome,
    constructor_outcome,
    geometry_outcome,
    helper_outcome,
    json_outcome,
    parts_outcome,
    placement_outcome,
    plan_edit_outcome,
    plan_outcome,
    plan_views_outcome,
    pickled_values_outcome,
    planner_call_outcome,
    unpickled_outcome,
)
from strategies import any_layouts, valid_layouts
from test_planner_oracle import placement_pairs
from test_spec_geometry import tilings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fuzz"))
import pyfuzz  # noqa: E402  (the wire-document mutators)

Ask = Any


NOT_JSON = "placement manifest is not valid JSON"
RESOURCE_KIND = "placement manifest resource_kind must be model_weight"


def as_specified(answer: Dict[str, Any]) -> Dict[str, Any]:
    """The release's answer with its known departures from spec/API.md's messages undone (found
    by this suite; the other differences it found are in ``assert_agrees`` and
    ``test_constructors_match_the_reference``):

    - §11.4 check 3 names the repeated fragment's tensor id, the release its fragment id;
    - §7.2: a document the JSON parser cannot read is "not valid JSON", and every failure a
      ``ValueError`` (§1.4): the release lets the parser's ``RecursionError`` (deep nesting) and
      its message for an integer of more than 4,300 digits through;
    - §7.2: a ``resource_kind`` that is not the str "model_weight" gives one message; the
      release gives "resource_kind must be a non-empty string" for a non-str or empty one.
    """
    error = answer.get("error")
    if error is None:
        return answer
    kind, message = error
    if message.startswith(DUPLICATE_LOGICAL):
        fragment_id = message[len(DUPLICATE_LOGICAL):]
        return dict(answer, error=[kind, DUPLICATE_LOGICAL + answer["fragment_tensors"][fragment_id]])
    if kind == "RecursionError" and "while decoding a JSON" in message:
        return dict(answer, error=["ValueError", NOT_JSON])
    if kind == "ValueError" and message.startswith("Exceeds the limit (4300 digits) for integer string conversion"):
        return dict(answer, error=["ValueError", NOT_JSON])
    if kind == "ValueError" and message == "resource_kind must be a non-empty string":
        return dict(answer, error=["ValueError", RESOURCE_KIND])
    return answer


CROSS_PARTICIPANT_ID = "duplicate runtime fragment_id across participants: "


def assert_agrees(ours: Dict[str, Any], theirs: Dict[str, Any]) -> None:
    """Our answer equals the release's as specified, but for three cases where we refuse:

    - spec/API.md §4.10 ``validate_runtime_bindings`` step 3 refuses a runtime fragment id
      used by two participants ("unsettled upstream: implement the fail-closed choice"); the
      release has no such step, so it accepts the bindings or reports a fault that step 3 came
      before (a later binding's, a missing participant);
    - ours by our documented limit (docs/manifest.md: shapes and offsets must fit a signed
      64-bit integer), which the spec does not have: the release accepts such a value, or
      refuses the input by another rule;
    - both by an alias-group rule: with two faulty groups the release reports the group a set
      visits first, which varies with the process's hash seed (ours: the first declared).
    """
    theirs = as_specified(theirs)
    our_error, their_error = ours.get("error"), theirs.get("error")
    if our_error is not None and our_error[1].startswith(CROSS_PARTICIPANT_ID):
        if theirs == {"valid": True} or (ours["stage"] == theirs.get("stage") == "validate" and "error" in theirs):
            return
    if our_error is not None and our_error[1].endswith("must fit in a signed 64-bit integer"):
        return
    if our_error is not None and their_error is not None:
        if our_error[1].startswith("alias group ") and their_error[1].startswith("alias group "):
            return
    assert ours == theirs


@given(any_layouts())
def test_placements_match_the_reference(reference: Ask, layout: Layout) -> None:
    assert_agrees(placement_outcome(layout), reference("placement_outcome", layout))


# Values a binding edit may write: wrong kinds, the limits of the ranges, ("copy", b, f):
# another fragment's or binding's value of the same field (shared ids, overlapping ranges), and
# ("shift", delta): the field's own value moved (sizes, shapes and addresses a little off, which
# the constructors accept and the validation must judge).
EDIT_VALUES = st.sampled_from([
    0, 1, -1, 2, 7, 64, 4096, 2**20, 2**63, 2**64 - 1, 2**64, True, None, "", "x", "cuda:1", (), (1,), (2, 2), (0,),
    [1, 2], 1.0,
]) | st.tuples(st.just("copy"), st.integers(0, 9), st.none() | st.integers(0, 9)) | st.tuples(
    st.just("shift"), st.sampled_from([-256, -2, -1, 1, 2, 256, 4096, 2**32])
)
BINDING_EDITS = st.one_of(
    st.tuples(st.just("fragment"), st.integers(0, 9), st.integers(0, 9), st.sampled_from(FRAGMENT_FIELDS), EDIT_VALUES),
    st.tuples(st.just("manifest"), st.integers(0, 9), st.sampled_from(MANIFEST_FIELDS), EDIT_VALUES),
    st.tuples(st.sampled_from(["drop", "repeat"]), st.integers(0, 9)),
)


@given(valid_layouts(max_tensors=2, max_ndim=3), st.lists(BINDING_EDITS, min_size=1, max_size=3))
def test_runtime_bindings_match_the_reference(reference: Ask, layout: Layout, edits: List[Tuple[Any, ...]]) -> None:
    """A placement's canonical runtime bindings with up to three edits: the same verdict of
    ``validate_runtime_binding`` on each binding alone and of ``validate_runtime_bindings`` on
    the set (or the same constructor error on the way)."""
    ours, theirs = binding_outcome(layout, edits), reference("binding_outcome", layout, edits)
    our_each, their_each = ours.pop("each", None), theirs.pop("each", None)
    refused = [one["error"][1].split(":")[0] for one in our_each or () if "error" in one]
    event("each: " + (refused[0] if refused else "not reached" if our_each is None else "all valid"))
    assert (our_each is None) == (their_each is None), (our_each, their_each)
    assert len(our_each or ()) == len(their_each or ())
    for one_of_ours, one_of_theirs in zip(our_each or (), their_each or ()):
        assert_agrees(one_of_ours, one_of_theirs)
    assert_agrees(ours, theirs)


PART_VALUES = st.sampled_from(["", "other", 0, 1, 2, -1, None, True]) | st.tuples(st.just("copy"), st.integers(0, 9))
PART_EDITS = st.one_of(
    st.tuples(st.just("order"), st.integers(0, 2**32)),
    st.tuples(st.sampled_from(["drop", "repeat"]), st.integers(0, 9)),
    st.tuples(st.just("part"), st.integers(0, 9), st.sampled_from(PART_FIELDS), PART_VALUES),
    st.tuples(st.just("fragment"), st.integers(0, 9), st.sampled_from(["drop", "repeat", "move", "reverse"]),
              st.integers(0, 9), st.integers(0, 9)),
    st.tuples(st.just("tensor"), st.integers(0, 9), st.sampled_from(["drop", "repeat", "reverse"]), st.integers(0, 9)),
    st.tuples(st.just("call"), st.sampled_from(CALL_FIELDS), st.sampled_from(["", "other", 0, 2, -1, None, True])),
    st.tuples(st.just("placement_id"), st.sampled_from(["own", None, "", "x", "sha256:" + "0" * 64])),
)


@given(valid_layouts(max_tensors=3, max_ndim=3), st.lists(PART_EDITS, min_size=1, max_size=3))
def test_placements_from_parts_match_the_reference(
    reference: Ask, layout: Layout, edits: List[Tuple[Any, ...]]
) -> None:
    """The constructor from parts on a placement's own parts after up to three edits (order,
    missing, repeated or altered parts; fragments and tensors dropped, repeated, reordered or
    moved between parts; other call arguments or ``placement_id``): the same placement, or the
    same first error."""
    ours, theirs = parts_outcome(layout, edits), reference("parts_outcome", layout, edits)
    event("parts: " + (ours["error"][1].split(":")[0][:60] if "error" in ours else "accepted"))
    if ours.get("stage") == theirs.get("stage") == "construct" and _manifest_check_order(ours, theirs):
        return
    assert_agrees(ours, theirs)


def test_the_release_names_a_repeated_fragment_by_its_id() -> None:
    """as_specified's fragment-id rewrite, on the release's form of the message."""
    answer = {"error": ["ValueError", DUPLICATE_LOGICAL + "frag-003"], "fragment_tensors": {"frag-003": "norm"}}
    assert as_specified(answer)["error"] == ["ValueError", DUPLICATE_LOGICAL + "norm"]
    assert as_specified({"placement_id": "p"}) == {"placement_id": "p"}


def test_the_release_lets_json_parser_errors_through() -> None:
    deep = {"error": ["RecursionError", "maximum recursion depth exceeded while decoding a JSON array from a "
                                        "unicode string"]}
    digits = {"error": ["ValueError", "Exceeds the limit (4300 digits) for integer string conversion: value has "
                                      "5000 digits"]}
    kind = {"error": ["ValueError", "resource_kind must be a non-empty string"]}
    assert as_specified(deep)["error"] == as_specified(digits)["error"] == ["ValueError", NOT_JSON]
    assert as_specified(kind)["error"] == ["ValueError", RESOURCE_KIND]
    other = {"error": ["RecursionError", "maximum recursion depth exceeded"]}  # not the parser's
    assert as_specified(other) == other


def test_only_the_named_refusals_may_differ() -> None:
    limit = {"error": ["ValueError", "global_offset must fit in a signed 64-bit integer"]}
    assert_agrees(limit, {"error": ["ValueError", "fragment is out of bounds: f"]})
    assert_agrees({"error": ["ValueError", "alias group is not declared consistently for tensor: b"]},
                  {"error": ["ValueError", "alias group references unknown tensor: c"]})
    crossing = {"stage": "validate", "error": ["ValueError", CROSS_PARTICIPANT_ID + "r"]}
    assert_agrees(crossing, {"valid": True})
    assert_agrees(crossing, {"stage": "validate", "error": ["ValueError", "missing runtime binding participant: p"]})
    with pytest.raises(AssertionError):  # the fail-closed refusal, where the release refused an edit
        assert_agrees(crossing, {"stage": "edit 0", "error": ["ValueError", "address must be at least 1"]})
    assert_agrees(limit, {"placement_id": "p"})  # (a value the spec accepts)
    with pytest.raises(AssertionError):  # a refusal of ours that is not the limit
        assert_agrees({"error": ["ValueError", "nbytes must be at least 1"]}, {"placement_id": "p"})
    with pytest.raises(AssertionError):
        assert_agrees({"error": ["ValueError", "x"]}, {"error": ["ValueError", "y"]})


def _topology_sizes_at_most(text: str, limit: int) -> bool:
    """False when the text is JSON naming a topology size above ``limit``: the release enumerates
    the ranks a size implies, and a size such as 2**64 - 1 would take the machine."""
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):  # (not JSON to the release either)
        return True
    stack = [document]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                if key in SIZE_KEYS and type(item) is int and item > limit:
                    return False
                stack.append(item)
        elif isinstance(value, list):
            stack.extend(value)
    return True


SIZE_KEYS = ("tp_size", "pp_size", "ep_size", "dp_size")
DOCUMENTS = pyfuzz.seed_documents()


@given(st.integers(0, 2**64 - 1))
def test_placement_documents_match_the_reference(reference: Ask, seed: int) -> None:
    """Mutated wire documents (fuzz/pyfuzz.py's mutators: structured for odd seeds, textual for
    even ones) decode to the same placement, or fail with the same error."""
    rng = random.Random(seed)
    document = json.loads(rng.choice(DOCUMENTS))
    if seed % 2:
        text = pyfuzz.serialize(pyfuzz.mutate_document(document, rng, rounds=rng.randint(1, 3)), rng)
    else:
        text = pyfuzz.mutate_text(pyfuzz.serialize(document, rng), rng)
    assume(_topology_sizes_at_most(text, 4096))
    assert_agrees(json_outcome(text), reference("json_outcome", text))


@given(placement_pairs(), st.data())
def test_plans_match_the_reference(reference: Ask, pair: Tuple[Layout, Layout], data: st.DataObject) -> None:
    source, target = pair
    participant: Optional[str] = data.draw(st.none() | st.sampled_from([pid for pid, _ in target.participants]))
    ours = plan_outcome(source, target, participant)
    # (the strategy draws plannable pairs: a refusal of the whole plan is a finding; a local plan
    # is refused for a participant without target fragments)
    assert "plan" in ours, ours
    assert_agrees(ours, reference("plan_outcome", source, target, participant))


@given(placement_pairs(), st.booleans(), st.sampled_from(ARGUMENT_KINDS), st.sampled_from(ARGUMENT_KINDS),
       st.sampled_from(LIMIT_KINDS), st.data())
def test_planner_arguments_match_the_reference(
    reference: Ask, pair: Tuple[Layout, Layout], local: bool, first: str, second: str, limits: str,
    data: st.DataObject,
) -> None:
    """Either planner called with other values in the placements' places (the other side's
    placement, None, a part, a topology, ...), with ``planning_limits`` absent, None, default,
    tight or of another kind, and for a local plan a participant id of the target, an unknown
    one, or None."""
    source, target = pair
    participant = data.draw(st.sampled_from([pid for pid, _ in target.participants] + ["nobody", None, ""]))
    ours = planner_call_outcome(source, target, local, first, second, participant, limits)
    theirs = reference("planner_call_outcome", source, target, local, first, second, participant, limits)
    event("planner: " + (ours["error"][1].split(":")[0][:60] if "error" in ours else "planned"))
    if _planner_argument_departure(ours, theirs, limits):
        return
    assert_agrees(ours, theirs)


NOT_LIMITS = "planning_limits must be a PlanningLimits"
NOT_TARGET = "target placement manifests must be WeightPlacementManifest"


def _planner_argument_departure(ours: Dict[str, Any], theirs: Dict[str, Any], limits: str) -> bool:
    """Whether the answers differ by one of our two refusals of a planner argument of the wrong
    kind (docs/api.md, "Planning entry points"; spec/API.md §1.4: every validation failure a
    ``ValueError``):

    - ``planning_limits`` neither None nor a ``PlanningLimits``: we refuse it before planning;
      the release plans with the default limits for a false value (0, an empty dict) and fails
      on another where the planning loop reads it (an ``AttributeError``), or first on anything
      the loop finds before that;
    - a target that is not a placement in a local plan: we refuse it as the full planner does;
      the release fails on its first attribute read (an ``AttributeError``).
    """
    error = ours.get("error")
    if error == ["ValueError", NOT_LIMITS]:
        return limits in ("zero", "empty dict", "five", "text")
    if error == ["ValueError", NOT_TARGET]:
        return theirs.get("error", [""])[0] == "AttributeError"
    return False


@given(placement_pairs(), st.data())
def test_plan_views_match_the_reference(reference: Ask, pair: Tuple[Layout, Layout], data: st.DataObject) -> None:
    """What the plans derive beyond their fields: totals, placement ids, pipeline routes, each
    executor's operation indices (and the refusals of a wrong side or a foreign executor), the
    snapshot checks, and per region its derived sizes and strides, every segment
    ``iter_segments`` yields (and its refusal one segment below), and ``validate_bounds``."""
    source, target = pair
    participant: Optional[str] = data.draw(st.none() | st.sampled_from([pid for pid, _ in target.participants]))
    ours = plan_views_outcome(source, target, participant)
    event("plan views: " + (ours["error"][1].split(":")[0] if "error" in ours else "compared"))
    assert ours == reference("plan_views_outcome", source, target, participant)


TUPLE_EDITS = st.tuples(st.sampled_from(["drop", "repeat", "swap", "move", "reverse"]), st.integers(0, 99),
                        st.integers(0, 99))
PLAN_EDITS = st.one_of(
    st.tuples(st.sampled_from(["operations", "operations", "source_executors", "target_executors", "source_tensors",
                               "target_tensors"]), TUPLE_EDITS).map(lambda pair: (pair[0],) + pair[1]),
    st.tuples(st.just("region"), st.integers(0, 99), st.sampled_from(REGION_FIELDS),
              st.tuples(st.just("copy"), st.integers(0, 99))
              | st.tuples(st.just("shift"), st.sampled_from([-2, -1, 1, 2, 64]))
              | st.sampled_from([0, -1, (), (0,), None, "x"])),
    st.tuples(st.just("plan"), st.sampled_from(["resource_id", "revision"]), st.sampled_from(["", "other", None])),
    st.tuples(st.just("plan"), st.sampled_from(["source_placement", "target_placement"]),
              st.sampled_from(["source placement", "target placement", None])),
    st.tuples(st.just("plan"), st.just("planning_limits"), st.sampled_from(["one region", None])),
)


@given(placement_pairs(), st.lists(PLAN_EDITS, min_size=1, max_size=3))
def test_edited_plans_match_the_reference(reference: Ask, pair: Tuple[Layout, Layout],
                                          edits: List[Tuple[Any, ...]]) -> None:
    """A logical plan rebuilt with ``dataclasses.replace`` after up to three edits (operations,
    executors or tensors dropped, repeated, swapped, moved or reversed; a region's field
    replaced, copied from another or moved a little; the plan's identity, placements or limits
    replaced): the constructors' same first refusal, or the same plan and views."""
    source, target = pair
    ours, theirs = plan_edit_outcome(source, target, edits), reference("plan_edit_outcome", source, target, edits)
    event("edited plan: " + (ours["error"][1].split(":")[0][:60] if "error" in ours else "accepted"))
    stage = ours.get("stage", "")
    if (
        stage.startswith("edit ")
        and stage == theirs.get("stage")
        and _not_a_fragment(edits[int(stage.split()[1])])
        and ours.get("error", [""])[0] == "ValueError"
        and theirs.get("error", [""])[0] in ("AttributeError", "TypeError")
    ):
        return  # the failing edit made a region's side a value that is not a fragment
    assert_agrees(ours, theirs)


def _not_a_fragment(edit: Tuple[Any, ...]) -> bool:
    """Whether the edit makes a region's ``source`` or ``target`` a value that is not a
    fragment. We refuse it with a ``ValueError`` (spec/API.md §1.4; the check of §8.4 that reads
    it first gives its message; tests/test_planner_values.py); the release fails on the first
    attribute read (``AttributeError``) or arithmetic (``TypeError``)."""
    return (
        edit[0] == "region"
        and edit[2] in ("source", "target")
        and not (type(edit[3]) is tuple and edit[3][:1] == ("copy",))
    )


@given(placement_pairs(), st.data())
def test_we_load_the_references_pickles(reference: Ask, pair: Tuple[Layout, Layout], data: st.DataObject) -> None:
    """The release's pickles (protocol 2 and the highest) of placements, their parts, topology,
    a tensor, a fragment, both plans, a region, the limits, an executor and a route load here
    into the values the release restores from them."""
    source, target = pair
    participant = data.draw(st.sampled_from([pid for pid, _ in target.participants]))
    payloads = reference("pickled_values_outcome", source, target, participant)
    ours = unpickled_outcome(payloads)
    assert all("error" not in answer for answer in ours.values() if isinstance(answer, dict)), ours
    assert ours == reference("unpickled_outcome", payloads)


@given(placement_pairs(), st.data())
def test_the_reference_loads_our_pickles(reference: Ask, pair: Tuple[Layout, Layout], data: st.DataObject) -> None:
    """Our pickles (protocol 2 and the highest) of the same values load in the release into the
    values we restore from them: default dataclass pickling (spec §13) both ways."""
    source, target = pair
    participant = data.draw(st.sampled_from([pid for pid, _ in target.participants]))
    payloads = pickled_values_outcome(source, target, participant)
    ours = unpickled_outcome(payloads)
    assert all("error" not in answer for answer in ours.values() if isinstance(answer, dict)), ours
    assert reference("unpickled_outcome", payloads) == ours


@st.composite
def mismatched_pairs(draw: Any) -> Tuple[Layout, Layout]:
    """A drawn placement pair made unplannable in one way the planner must refuse: the plan's
    identity fields differ, a tensor's descriptor differs between the sides (dtype, itemsize,
    fingerprint, layer or expert id), or a tensor is on one side only."""
    source, target = draw(placement_pairs())
    how = draw(st.sampled_from(["resource_id", "revision", "weight_generation", "descriptor", "missing"]))
    if how in ("resource_id", "revision"):
        return source, dataclasses.replace(target, **{how: getattr(target, how) + "-other"})
    if how == "weight_generation":
        return source, dataclasses.replace(target, weight_generation=target.weight_generation + 1)
    index = draw(st.integers(0, len(target.tensors) - 1))
    tensor = target.tensors[index]
    if how == "descriptor":
        field = draw(st.sampled_from(["dtype", "itemsize", "layout_fingerprint", "layer_id", "expert_id"]))
        other = {"dtype": "int8", "itemsize": 1, "layout_fingerprint": "other:v1", "layer_id": 99, "expert_id": 99}
        value = other[field]
        if field == "dtype" and tensor.dtype == "int8":
            value = "float64"
        changed = dataclasses.replace(tensor, **{field: value})
        tensors = target.tensors[:index] + (changed,) + target.tensors[index + 1:]
        fragments = target.fragments
        if field == "itemsize":  # (the fragments' byte sizes follow the tensor's)
            fragments = tuple(dataclasses.replace(f, nbytes=None) for f in fragments)
        return source, dataclasses.replace(target, tensors=tensors, fragments=fragments)
    if len(target.tensors) < 2:
        # (a placement needs a tensor, so the target keeps its one and gains a copy of it under
        # a new id, with copies of its fragments: a tensor on the target side only)
        extra = tensor.tensor_id + ".extra"
        copies = tuple(dataclasses.replace(f, tensor_id=extra, fragment_id=None)
                       for f in target.fragments if f.tensor_id == tensor.tensor_id)
        tensors = target.tensors + (dataclasses.replace(tensor, tensor_id=extra),)
        return source, dataclasses.replace(target, tensors=tensors, fragments=target.fragments + copies)
    return source, dataclasses.replace(
        target,
        tensors=target.tensors[:index] + target.tensors[index + 1:],
        fragments=tuple(f for f in target.fragments if f.tensor_id != tensor.tensor_id),
    )


@given(mismatched_pairs())
def test_plan_refusals_match_the_reference(reference: Ask, pair: Tuple[Layout, Layout]) -> None:
    source, target = pair
    assert_agrees(plan_outcome(source, target, None), reference("plan_outcome", source, target, None))


def _requirements(source: Layout, target: Layout, participant_id: Optional[str]) -> List[Tuple[int, int, int]]:
    """What each plan of ``plan_outcome`` needs of the planning limits, by our planner: its
    operation count, largest ``segment_count`` and total of them (the plan, then the local
    plan when a participant is given)."""
    from layout_model import build_placement
    from mooncake.reshard.weight import plan_placement_transfer, plan_placement_transfer_to_local_target

    placements = (build_placement(source), build_placement(target))
    plans = [plan_placement_transfer(*placements)]
    if participant_id is not None:
        plans.append(plan_placement_transfer_to_local_target(*placements, participant_id))
    needs = []
    for plan in plans:
        counts = [operation.segment_count for operation in plan.operations]
        needs.append((len(counts), max(counts, default=0), sum(counts)))
    return needs


DEFAULT_LIMITS = (1_000_000, 1_000_000, 10_000_000)  # spec/API.md §8.3


@st.composite
def budgets(draw: Any, need: int, default: int) -> int:
    """A limit around what a plan needs: exactly it, one below or above, 1, anything up to one
    above, or the default."""
    return draw(st.sampled_from([need, need - 1, need + 1, 1, default]).filter(lambda limit: limit > 0)
                | st.integers(1, max(1, need + 1)))


@given(placement_pairs(), st.data())
def test_plan_budgets_match_the_reference(reference: Ask, pair: Tuple[Layout, Layout], data: st.DataObject) -> None:
    """Both planners under drawn ``PlanningLimits`` around what the plans need (spec/API.md
    §11.1 step 5, items 5 and 9): the same plans, or the same first budget refusal with the same
    figures in its message."""
    source, target = pair
    participant: Optional[str] = data.draw(st.none() | st.sampled_from([pid for pid, _ in target.participants]))
    try:
        needs = _requirements(source, target, participant)
    except ValueError:  # (a local plan refused for a participant without target fragments)
        participant = None
        needs = _requirements(source, target, None)
    need = data.draw(st.sampled_from(needs))  # (around the plan's or the local plan's needs)
    limits = (
        data.draw(budgets(need[0], DEFAULT_LIMITS[0])),
        data.draw(budgets(need[1], DEFAULT_LIMITS[1])),
        data.draw(budgets(need[2], DEFAULT_LIMITS[2])),
    )
    ours = plan_outcome(source, target, participant, limits)
    event("refused: " + ours["error"][1].split(":")[0] if "error" in ours else "planned")
    assert_agrees(ours, reference("plan_outcome", source, target, participant, limits))


@given(st.integers(0, 2**64 - 1))
def test_constructors_match_the_reference(reference: Ask, seed: int) -> None:
    """``fuzz/pyfuzz.py``'s hostile constructor calls (one to three fields replaced by wrong
    kinds, boundary values, objects whose methods raise) on the value types both have."""
    ours, theirs = constructor_outcome(seed), reference("constructor_outcome", seed)
    if ours["label"] == "WeightPlacementManifest" and _manifest_check_order(ours, theirs):
        return
    assert_agrees(ours, theirs)


def _manifest_check_order(ours: Dict[str, Any], theirs: Dict[str, Any]) -> bool:
    """Whether the two answers are a placement manifest's faulty ``placement_set_id`` (ours) and
    faulty ``weight_generation`` (the release's), both in one call: spec/API.md §4.8 checks the
    first in step 1 and the second in step 2; the release checks them the other way round."""
    return ours.get("error", ["", ""])[1].startswith("placement_set_id must") and theirs.get(
        "error", ["", ""]
    )[1].startswith("weight_generation must")


@st.composite
def box_calls(draw: Any) -> Tuple[str, Tuple[Any, ...]]:
    """A call of one of the four geometry functions on boxes of one dimension count (1 to 4),
    small non-negative offsets and positive extents: where both implementations are defined
    (docs/api.md and tests/test_spec_geometry.py say where they are not)."""
    ndim = draw(st.integers(1, 4))

    def box() -> Tuple[Tuple[int, ...], Tuple[int, ...]]:
        offset = tuple(draw(st.integers(0, 5)) for _ in range(ndim))
        return offset, tuple(draw(st.integers(1, 5)) for _ in range(ndim))

    boxes = [box() for _ in range(draw(st.integers(0, 8)))]
    name = draw(st.sampled_from(["box_contains", "boxes_overlap", "boxes_exactly_cover", "regions_exactly_cover"]))
    if name == "box_contains":
        return name, box() + box()
    if name == "boxes_overlap":
        return name, (boxes,)
    if draw(st.booleans()):  # a container and its tiling, perhaps perturbed (mostly true answers)
        return name, draw(tilings())
    return name, box() + (boxes,)


@given(box_calls())
def test_geometry_matches_the_reference(reference: Ask, call: Tuple[str, Tuple[Any, ...]]) -> None:
    name, args = call
    ours = geometry_outcome(name, args)
    event(f"{name}: {ours}")
    assert ours == reference("geometry_outcome", name, args)


@pytest.mark.parametrize("count", [1414, 1415])  # 998,991 and 1,000,405 comparisons without the extra boxes
@settings(max_examples=3)
@given(st.integers(0, 3), st.integers(0, 2**32))
def test_the_overlap_budget_matches_the_reference(reference: Ask, count: int, extra: int, seed: int) -> None:
    """Near the 3-D sweep's budget of 1,000,000 comparisons (spec/API.md §11.3): ``count`` boxes
    that all overlap on the sweep dimension and are pairwise disjoint on the others (about
    count * (count - 1) / 2 comparisons), plus a few drawn boxes that add comparisons, end early
    or overlap one of them: the same answer, or the same refusal."""
    rng = random.Random(seed)
    boxes = [((k, k // 40, k % 40), (count, 1, 1)) for k in range(count)]  # (dim 0: the sweep's)
    for number in range(extra):
        # (in rows of their own: comparisons only, ending early or not; else anywhere)
        row = 40 + number if rng.random() < 0.7 else rng.randrange(40)
        boxes.insert(rng.randrange(len(boxes) + 1),
                     ((rng.randrange(count), row, rng.randrange(40)), (rng.choice([1, 3, count]), 1, 1)))
    ours = geometry_outcome("boxes_overlap", (boxes,))
    event(f"{count} + {extra}: {ours}")
    assert ours == reference("geometry_outcome", "boxes_overlap", (boxes,))


ODD_VALUES = st.sampled_from([
    0, 1, 2, -1, 2**63, 2**64, True, None, "x", "", 1.0, (), [1, 2], b"ab", "a" * 64, "0" * 64, "A" * 64, "g" * 64,
    "0" * 63,
])
SMALL = st.integers(0, 6)


def int_sequences(size: int) -> Any:
    """A tuple of ``size`` small ints (a few odd values among them), sometimes a list or a str."""
    items = st.lists(SMALL | ODD_VALUES, min_size=size, max_size=size)
    return st.one_of(items.map(tuple), items, st.just("x"), st.lists(SMALL, min_size=size, max_size=size).map(tuple))


@st.composite
def helper_calls(draw: Any) -> Tuple[str, Tuple[Any, ...], Any]:
    """A call of one of the helpers spec/API.md §4.5 names, with drawn arguments."""
    from layout_model import TensorSpec

    name = draw(st.sampled_from(
        ["canonical_strides_bytes", "validate_fragment_geometry", "require_sha256_digest", "require_manifest_items"]
    ))
    if name == "canonical_strides_bytes":
        return name, (draw(int_sequences(draw(st.integers(0, 4)))), draw(SMALL | ODD_VALUES)), None
    if name == "require_sha256_digest":
        hex_like = st.text(alphabet="0123456789abcdefA", min_size=63, max_size=65)
        return name, (draw(ODD_VALUES | hex_like), draw(st.sampled_from(["placement_digest", "x"]))), None
    if name == "require_manifest_items":
        value = draw(st.sampled_from([(), (1, 2), [1, "a"], "abc", None, 5, {1: 2}, b"ab", ((1,), (2,)), [(), ()]]))
        return name, (value, "items", draw(st.sampled_from(["int", "str", "tuple"]))), None
    ndim = draw(st.integers(1, 3))
    shape_of_tensor = tuple(draw(st.integers(1, 6)) for _ in range(ndim))
    tensor = TensorSpec("t", shape_of_tensor, itemsize=draw(st.sampled_from([1, 2, 4])))
    offset = draw(int_sequences(draw(st.sampled_from([ndim, ndim, ndim - 1, ndim + 1]))))
    shape = draw(int_sequences(draw(st.sampled_from([ndim, ndim, ndim + 1]))))
    return name, (draw(st.sampled_from(["f", "", None])), offset, shape, draw(SMALL | ODD_VALUES)), tensor


@given(helper_calls())
def test_helpers_match_the_reference(reference: Ask, call: Tuple[str, Tuple[Any, ...], Any]) -> None:
    """``canonical_strides_bytes``, ``validate_fragment_geometry``, ``require_sha256_digest`` and
    ``require_manifest_items`` on drawn arguments, odd kinds included: the same value or error.
    (The reference answers first: a list argument may be changed in place by the call.)"""
    name, args, tensor = call
    theirs = reference("helper_outcome", name, args, tensor)
    ours = helper_outcome(name, args, tensor)
    event(f"{name}: " + (ours["error"][1].split(":")[0][:50] if "error" in ours else "value"))
    assert ours == theirs


# The reference's own view of the known answers (the placement cases: the stored case has no
# source placement).
KNOWN_PLACEMENT_CASES = [name for name in case_names() if "source_placement_json" in load_case(name)["inputs"]]


def test_the_known_answers_have_placement_cases() -> None:
    assert len(KNOWN_PLACEMENT_CASES) >= 6, KNOWN_PLACEMENT_CASES


@pytest.mark.parametrize("name", KNOWN_PLACEMENT_CASES)
def test_the_reference_reproduces_the_known_logical_plans(reference: Ask, name: str) -> None:
    answer = reference("known_answer_outcome", name)
    expected = load_case(name)["expected"]
    assert answer == {
        "source": [expected["source_placement_id"], expected["source_digest"]],
        "target": [expected["target_placement_id"], expected["target_digest"]],
        "logical_plan": json.dumps(expected["logical_plan"], sort_keys=True),
        "local_target_plan": json.dumps(expected["local_target_plan"], sort_keys=True),
    }

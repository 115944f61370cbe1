"""AUDIT41 (items 1 and 3): the entry points AUDIT40 left outside the per-call memo proof
(``mooncake_reshard._memo_proof.memo_proved``). ``resolve_executor_plan(s)`` (csrc/binder.c's
executor projection and ``validate_runtime_binding`` under it) and the rules' path of
``TransferPlan`` replace and pickle restore (``_revalidate_rules``, taken when
``_fast_revalidate_live`` declines: it does on a planted field property) call C helpers that
check a value class's layout through per-call-site memos (csrc/layout.h ``mr_layout_memo``).
Warmed by one call, they ignored a property planted afterwards on a layout field
(PlacementFragment, RuntimeBindingFragment, TransferRegion, BoundWeightFragment; on the class or
on a class put between it and its layout base).

The oracle is a cold process for bound plans (tests/test_audit4040_*: a fresh interpreter; a
bound plan cannot be built there without warming the memos, since bind's C steps fill them):
the fresh interpreter builds the world and binds the plan, then empties every layout memo
(``forge_helpers.memos_emptied``: entering and leaving cold mode empties each memo that ever held
a class, and the memos are then as a fresh process holds them: empty), then forks one child per
case, which plants the property and calls, at cold level 0 (memos fill as in a fresh process)."""

from __future__ import annotations

import dataclasses
import json
import pickle
import sys
from typing import Any, Callable

import pytest

from forge_helpers import cold_oracle, cold_summary, forked_answers, memos_emptied, outcome, sized_world

from mooncake.reshard.contracts.fragments import RuntimeBindingFragment
from mooncake.reshard.weight import bind_logical_transfer_plan, resolve_executor_plan, resolve_executor_plans
from mooncake.reshard.weight._planner import bound_contracts as bc
from mooncake.reshard.weight._planner.fragments import BoundWeightFragment
from mooncake.reshard.weight.types import PlacementFragment

from test_audit39_class_descriptors import _next, _other, _planter
from test_audit4040_bind_cold_memos import outcome_while_planted

CLASSES = {
    "PlacementFragment": PlacementFragment,
    "RuntimeBindingFragment": RuntimeBindingFragment,
    "TransferRegion": bc.TransferRegion,
    "BoundWeightFragment": BoundWeightFragment,
}
EDITS = {"next": _next, "other": _other}


def _world() -> dict[str, Any]:
    logical, targets, sources, memory = sized_world(2)
    plan = bind_logical_transfer_plan(logical, targets, source_bindings=sources)
    return {
        "plan": plan, "pickle": pickle.dumps(plan, 4), "pickle5": pickle.dumps(plan, 5), "targets": targets, "sources": sources, "memory": memory,
        "target_placement": logical.target_placement, "source_placement": logical.source_placement,
    }


OPS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "resolve_target": lambda w: resolve_executor_plan(w["plan"], w["target_placement"], w["targets"][0], "target"),
    "resolve_sources": lambda w: resolve_executor_plans(w["plan"], w["source_placement"], w["sources"][0], "source"),
    "replace": lambda w: dataclasses.replace(w["plan"]),
    "restore": lambda w: pickle.loads(w["pickle"]),
    "restore5": lambda w: pickle.loads(w["pickle5"]),
}
ALL_FIELDS = {name: tuple(field.name for field in dataclasses.fields(cls)) for name, cls in CLASSES.items()}


def _all_cases() -> list[tuple[str, ...]]:
    """Every (op, class, field, edit, place) tried (the discovery set; CASES keeps those whose warm
    outcome differed from the cold one on the start build)."""
    cases = []
    for op in OPS:
        for cls_name, fields in ALL_FIELDS.items():
            if op.startswith("resolve") and cls_name not in ("PlacementFragment", "RuntimeBindingFragment"):
                continue
            for field in fields:
                for edit in EDITS:
                    for place in ("class", "base"):
                        cases.append((op, cls_name, field, edit, place))
    return cases


CASES = _all_cases()


def _planted(case: tuple[str, ...], world: dict[str, Any]) -> list[str]:
    op, cls_name, field, edit, place = case
    return cold_summary(outcome_while_planted(CLASSES[cls_name], field, EDITS[edit], place, lambda: OPS[op](world)))


def _cold_outcomes() -> dict[str, list[str]]:
    world = _world()
    memos_emptied()
    return forked_answers(CASES, lambda case: _planted(case, world))


cold = cold_oracle(__file__)


@pytest.fixture(scope="module")
def world() -> dict[str, Any]:
    return _world()


@pytest.mark.parametrize("case", CASES, ids=["-".join(case) for case in CASES])
def test_a_warm_call_decides_a_planted_property_as_a_cold_process(case, cold, world):
    for _ in range(2):  # (warms the memos; a replace's second view of an attestation is recorded)
        outcome(lambda: OPS[case[0]](world))
    assert _planted(case, world) == cold["|".join(case)]
    assert cold_summary(outcome(lambda: OPS[case[0]](world)))[0] == "value"  # (nothing left behind)


def test_a_view_recorded_through_a_planted_property_is_not_taken_once_it_is_gone(cold):
    """AUDIT40's report (item 3): with a property planted on ``RuntimeBindingFragment.local_shape``,
    cold mode accepted ``dataclasses.replace(plan)`` while the warm process refused it ("source
    executor fragment provenance differs"). A fresh process accepts it (the oracle): the warm
    refusal was left behind by an earlier planted case. The rules' attested view of an
    attestation is recorded on it from its second build (``_VIEW_KEY``, taken back while the state
    it was derived from is unchanged: ``deps_unchanged``); a view built through a planted property
    was recorded too, and taken by every later replace (fast path or rules) once the property was
    gone, its state being unchanged: a valid plan refused for good. (Cold mode declined the record
    by chance: ``deps_unchanged``'s runtime-fragment memo was empty.) A view is now recorded and
    taken back only while no field is shadowed (``_fields_unshadowed(_STATE_FIELDS)``)."""
    world = _world()
    plan = world["plan"]
    dataclasses.replace(plan)  # (the attestations' first views: remembered, not recorded)
    undo = _planter(PlacementFragment, "tensor_id", _next)()
    try:
        outcome(lambda: dataclasses.replace(plan))  # (the second views, through the property)
    finally:
        undo()
    assert cold_summary(outcome(lambda: dataclasses.replace(plan))) == ["value", "TransferPlan"]
    case = ("replace", "RuntimeBindingFragment", "local_shape", "next", "class")
    assert cold["|".join(case)] == ["value", "TransferPlan"]
    assert _planted(case, world) == cold["|".join(case)]


if __name__ == "__main__":
    json.dump(_cold_outcomes(), sys.stdout)

"""AUDIT41 (item 2): the other public entry points that reach a C step checking a value class's
layout through a per-call-site memo (csrc/layout.h ``mr_layout_memo``), against a cold process
(the oracle of tests/test_audit4141_rules_cold_memos.py: a fresh interpreter builds the world,
empties every memo, forks one child per case, which plants the property and calls).

``WeightPlacementManifest.from_fragments`` (assembly: csrc/canonical.c, table.c build and check
the fragments) ignored a property planted on a PlacementFragment field once warmed (it returned a
placement a cold process refuses, or refused with another error): it now runs under
``memo_proved``. Those cases fail on the start build (7bb15b5). The other entry points here
decided as a cold process already on the start build and are kept as regression cases:
placement construction, JSON load and dump, placement pickle restore, runtime binding manifest
replace and pickle restore, a logical plan's pickle dump (payload length), a bound plan's derived
views. (Not here: a bound plan's pickle dump, whose payload holds the process's addresses.) (Covered elsewhere: bind, planning, validate_runtime_binding(s),
LogicalTransferPlan replace/restore: AUDIT40; resolve_executor_plan(s), TransferPlan replace and
restore: tests/test_audit4141_rules_cold_memos.py.)"""

from __future__ import annotations

import dataclasses
import json
import pickle
import sys
from typing import Any, Callable

import pytest

from forge_helpers import cold_oracle, cold_summary, forked_answers, memos_emptied, outcome, sized_world

from mooncake.reshard.contracts.fragments import RuntimeBindingFragment
from mooncake.reshard.weight import (
    WeightPlacementManifest,
    bind_logical_transfer_plan,
    weight_placement_from_json,
    weight_placement_to_json,
)
from mooncake.reshard.weight.types import PlacementFragment

from test_audit39_class_descriptors import _next, _other
from test_audit4040_bind_cold_memos import outcome_while_planted

CLASSES = {"PlacementFragment": PlacementFragment, "RuntimeBindingFragment": RuntimeBindingFragment}
EDITS = {"next": _next, "other": _other}


def _world() -> dict[str, Any]:
    logical, targets, sources, memory = sized_world(2)
    plan = bind_logical_transfer_plan(logical, targets, source_bindings=sources)
    target = logical.target_placement
    return {
        "logical": logical, "plan": plan, "target": target, "targets": targets, "memory": memory,
        "json": weight_placement_to_json(target), "target_pickle": pickle.dumps(target),
        "binding_pickle": pickle.dumps(targets[0]),
    }


def _from_fragments(w: dict[str, Any]) -> Any:
    t = w["target"]
    return WeightPlacementManifest.from_fragments(
        resource_id=t.resource_id, revision=t.revision, weight_generation=t.weight_generation,
        placement_set_id=t.placement_set_id, topology=t.topology, tensors=t.tensors, fragments=t.fragments,
    )


def _construct(w: dict[str, Any]) -> Any:
    t = w["target"]
    return WeightPlacementManifest(
        resource_id=t.resource_id, revision=t.revision, weight_generation=t.weight_generation,
        placement_set_id=t.placement_set_id, topology=t.topology, parts=t.parts,
    )


OPS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "from_fragments": _from_fragments,
    "construct": _construct,
    "from_json": lambda w: weight_placement_from_json(w["json"]),
    "to_json": lambda w: len(weight_placement_to_json(w["target"])),
    "placement_restore": lambda w: pickle.loads(w["target_pickle"]),
    "binding_replace": lambda w: dataclasses.replace(w["targets"][0]),
    "binding_restore": lambda w: pickle.loads(w["binding_pickle"]),
    "logical_dump": lambda w: len(pickle.dumps(w["logical"])),
    "plan_views": lambda w: (len(w["plan"].pipeline_routes), w["plan"].total_bytes),
}
_FIELDS = {name: tuple(field.name for field in dataclasses.fields(cls)) for name, cls in CLASSES.items()}
# every from_fragments case; the regression cases with one edit and place each
CASES = [
    ("from_fragments", "PlacementFragment", field, edit, place)
    for field in _FIELDS["PlacementFragment"] for edit in EDITS for place in ("class", "base")
] + [
    (op, cls, field, "next", "class")
    for op in OPS if op != "from_fragments" for cls, fields in _FIELDS.items() for field in fields
]


def _summary(result: Any) -> list[str]:
    if isinstance(result, (int, tuple)) and not (isinstance(result, tuple) and isinstance(result[0], str)):
        return ["value", repr(result)]
    return cold_summary(result)


def _planted(case: tuple[str, ...], world: dict[str, Any]) -> list[str]:
    op, cls_name, field, edit, place = case
    return _summary(outcome_while_planted(CLASSES[cls_name], field, EDITS[edit], place, lambda: OPS[op](world)))


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
    for _ in range(2):  # (warms the memos)
        outcome(lambda: OPS[case[0]](world))
    assert _planted(case, world) == cold["|".join(case)]
    assert _summary(outcome(lambda: OPS[case[0]](world)))[0] == "value"  # (nothing left behind)


if __name__ == "__main__":
    json.dump(_cold_outcomes(), sys.stdout)

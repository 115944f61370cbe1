"""Known answers (spec/known-answers): logical plans reproduce field for field in canonical form.

The canonical form is the one the known-answer README defines: dataclasses become objects of
their ``compare=True`` fields, tuples/lists arrays, sets sorted arrays, dicts ``str``-keyed
objects, scalars stay, anything else ``str()``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Dict

import pytest

from mooncake.reshard.weight.planner import (
    LogicalTransferPlan,
    plan_placement_transfer,
    plan_placement_transfer_to_local_target,
    plan_stored_transfer_to_target_placement,
)
from mooncake.reshard.weight.serde import weight_placement_from_json
from mooncake.reshard.weight.storage_manifest import StoredWeightManifest

KA_DIR = "/work/shared/spec/known-answers"
if not os.path.isdir(KA_DIR):  # pragma: no cover - the tree also carries a copy for CI
    KA_DIR = os.path.join(os.path.dirname(__file__), "known_answers")

CASES = sorted(name[:-5] for name in os.listdir(KA_DIR) if name.endswith(".json")) if os.path.isdir(KA_DIR) else []


def canonical(value: Any) -> Any:
    """The canonical form of the known-answer README."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: canonical(getattr(value, f.name)) for f in dataclasses.fields(value) if f.compare}
    if isinstance(value, (tuple, list)):
        return [canonical(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((canonical(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    if isinstance(value, dict):
        return {str(k): canonical(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def load(case: str) -> Dict[str, Any]:
    with open(os.path.join(KA_DIR, case + ".json"), encoding="utf-8") as handle:
        return json.load(handle)


def plan_for(inputs: Dict[str, Any]) -> LogicalTransferPlan:
    target = weight_placement_from_json(inputs["target_placement_json"])
    if "stored_manifest_json" in inputs:
        return plan_stored_transfer_to_target_placement(StoredWeightManifest.from_json(inputs["stored_manifest_json"]), target)
    return plan_placement_transfer(weight_placement_from_json(inputs["source_placement_json"]), target)


def test_all_seven_cases_present() -> None:
    assert len(CASES) == 7


@pytest.mark.parametrize("case", CASES)
def test_logical_plan_matches_known_answer(case: str) -> None:
    data = load(case)
    plan = plan_for(data["inputs"])
    expected = data["expected"]["logical_plan"]
    got = canonical(plan)
    assert set(got) == set(expected)
    for key in expected:
        assert got[key] == expected[key], key
    assert got == expected


@pytest.mark.parametrize("case", CASES)
def test_local_target_plan_matches_known_answer(case: str) -> None:
    data = load(case)
    inputs = data["inputs"]
    if "local_target_plan" not in data["expected"]:
        assert "stored_manifest_json" in inputs  # only the stored case has no local plan
        return
    source = weight_placement_from_json(inputs["source_placement_json"])
    target = weight_placement_from_json(inputs["target_placement_json"])
    plan = plan_placement_transfer_to_local_target(source, target, inputs["local_target_participant_id"])
    assert canonical(plan) == data["expected"]["local_target_plan"]


@pytest.mark.parametrize("case", CASES)
def test_known_answer_plans_are_deterministic_and_round_trip(case: str) -> None:
    import copy
    import pickle

    inputs = load(case)["inputs"]
    first = plan_for(inputs)
    second = plan_for(inputs)
    assert first == second
    assert canonical(first) == canonical(second)
    restored = pickle.loads(pickle.dumps(first, protocol=pickle.HIGHEST_PROTOCOL))
    assert restored == first
    assert restored.pipeline_routes == first.pipeline_routes
    assert copy.copy(first) == first
    assert dataclasses.replace(first) == first
    assert "_operation_views" not in first.__getstate__()

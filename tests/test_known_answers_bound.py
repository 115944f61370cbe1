"""Known answers (spec/known-answers): the bound operations and counts of every case reproduce
field for field in canonical form, and the bound plan survives pickling."""

from __future__ import annotations

import copy
import dataclasses
import enum
import json
import pickle
from typing import Any, Dict

import pytest

from mooncake.reshard.weight import RuntimeBindingFragment, StoredWeightManifest, WeightRuntimeBindingManifest
from mooncake.reshard.weight.planner import (
    bind_logical_transfer_plan,
    plan_placement_transfer,
    plan_stored_transfer_to_target_placement,
)
from mooncake.reshard.weight.serde import weight_placement_from_json

from known_answers import case_names, load_case

CASES = case_names()


def canonical(value: Any) -> Any:
    """The README's canonical form."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: canonical(getattr(value, f.name)) for f in dataclasses.fields(value) if f.compare}
    if isinstance(value, (tuple, list)):
        return [canonical(item) for item in value]
    if isinstance(value, (set, frozenset)):
        items = [canonical(item) for item in value]
        return sorted(items, key=lambda item: json.dumps(item, sort_keys=True))
    if isinstance(value, dict):
        return {str(key): canonical(item) for key, item in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)) and not isinstance(value, enum.Enum):
        return value
    return str(value)


def _binding(raw: Dict[str, Any]) -> WeightRuntimeBindingManifest:
    fields = dict(raw)
    fields["fragments"] = tuple(
        RuntimeBindingFragment(
            **{k: (tuple(v) if isinstance(v, list) else v) for k, v in fragment.items()}
        )
        for fragment in raw["fragments"]
    )
    return WeightRuntimeBindingManifest(**fields)


def _bind(case: Dict[str, Any]) -> Any:
    inputs = case["inputs"]
    target = weight_placement_from_json(inputs["target_placement_json"])
    target_bindings = tuple(_binding(raw) for raw in inputs["target_bindings"])
    if "stored_manifest_json" in inputs:
        manifest = StoredWeightManifest.from_json(inputs["stored_manifest_json"])
        logical = plan_stored_transfer_to_target_placement(manifest, target)
        return bind_logical_transfer_plan(logical, target_bindings, source_manifest=manifest)
    source = weight_placement_from_json(inputs["source_placement_json"])
    logical = plan_placement_transfer(source, target)
    source_bindings = tuple(_binding(raw) for raw in inputs["source_bindings"])
    return bind_logical_transfer_plan(logical, target_bindings, source_bindings=source_bindings)


@pytest.fixture(scope="module", params=CASES)
def case(request: Any) -> Dict[str, Any]:
    loaded: Dict[str, Any] = copy.deepcopy(load_case(request.param))
    return loaded


def test_cases_present() -> None:
    assert len(CASES) == 7


def test_bound_operations_reproduce(case: Dict[str, Any]) -> None:
    plan = _bind(case)
    expected = case["expected"]["transfer_plan_operations"]
    actual = canonical(plan.operations)
    assert len(actual) == len(expected)
    for index, (got, want) in enumerate(zip(actual, expected)):
        assert got == want, f"operation {index} differs"


def test_bound_counts_reproduce(case: Dict[str, Any]) -> None:
    plan = _bind(case)
    counts = case["expected"]["transfer_plan_counts"]
    actual = {"operations": len(plan.operations), "target_executors": len(plan.target_executors)}
    if "source_executors" in counts:
        actual["source_executors"] = len(plan.source_executors)
    assert actual == counts


def test_bound_plan_pickle_round_trip(case: Dict[str, Any]) -> None:
    plan = _bind(case)
    restored = pickle.loads(pickle.dumps(plan, protocol=pickle.HIGHEST_PROTOCOL))
    assert restored == plan
    assert canonical(restored.operations) == case["expected"]["transfer_plan_operations"]
    assert restored.source_stored_fragment_snapshots == plan.source_stored_fragment_snapshots
    for executor in restored.source_executors + restored.target_executors:
        assert executor.attestation is not None
        assert all(fragment.owner is None for fragment in executor.attestation.evidence.fragments)

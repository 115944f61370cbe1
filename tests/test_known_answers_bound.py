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

from known_answers import bind_inputs, case_names, load_case

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


@pytest.fixture(scope="module", params=CASES)
def case(request: Any) -> Dict[str, Any]:
    loaded: Dict[str, Any] = copy.deepcopy(load_case(request.param))
    return loaded


def test_cases_present() -> None:
    assert len(CASES) == 7


def test_bound_operations_reproduce(case: Dict[str, Any]) -> None:
    plan = bind_inputs(case["inputs"])
    expected = case["expected"]["transfer_plan_operations"]
    actual = canonical(plan.operations)
    assert len(actual) == len(expected)
    for index, (got, want) in enumerate(zip(actual, expected)):
        assert got == want, f"operation {index} differs"


def test_bound_counts_reproduce(case: Dict[str, Any]) -> None:
    plan = bind_inputs(case["inputs"])
    counts = case["expected"]["transfer_plan_counts"]
    actual = {"operations": len(plan.operations), "target_executors": len(plan.target_executors)}
    if "source_executors" in counts:
        actual["source_executors"] = len(plan.source_executors)
    assert actual == counts


def test_bound_plan_pickle_round_trip(case: Dict[str, Any]) -> None:
    plan = bind_inputs(case["inputs"])
    restored = pickle.loads(pickle.dumps(plan, protocol=pickle.HIGHEST_PROTOCOL))
    assert restored == plan
    assert canonical(restored.operations) == case["expected"]["transfer_plan_operations"]
    assert restored.source_stored_fragment_snapshots == plan.source_stored_fragment_snapshots
    for executor in restored.source_executors + restored.target_executors:
        assert executor.attestation is not None
        assert all(fragment.owner is None for fragment in executor.attestation.evidence.fragments)

"""Bind hands the C heap's free pages back to the system on large plans (``_native.trim_heap``).

The call changes no value: the plans bound with and without it are equal. It runs three times in
a bind of at least ``_TRIM_MIN_OPERATIONS`` operations (after ``bind_regions``, before the new
plan's revalidation, after it) and never below that size. The memory it saves is measured by the
benchmarks (``benchmarks/scale.py``), not here."""

from __future__ import annotations

import pickle
from typing import Any, List

import pytest
from known_answers import bind_inputs, case_names, load_case

from mooncake.reshard import _native
from mooncake.reshard.weight._planner import binding


def test_trim_heap_reports_a_bool() -> None:
    assert _native.trim_heap() in (True, False)
    assert _native.trim_heap.__doc__ and "malloc_trim" in _native.trim_heap.__doc__


def _counting(monkeypatch: pytest.MonkeyPatch) -> List[int]:
    calls: List[int] = []
    original = _native.trim_heap

    def counted() -> Any:
        calls.append(1)
        return original()

    monkeypatch.setattr(_native, "trim_heap", counted)
    return calls


@pytest.mark.parametrize("name", case_names())
def test_large_binds_trim_three_times_and_bind_the_same_plan(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    inputs = load_case(name)["inputs"]
    untrimmed = bind_inputs(inputs)
    calls = _counting(monkeypatch)
    monkeypatch.setattr(binding, "_TRIM_MIN_OPERATIONS", 1)
    trimmed = bind_inputs(inputs)
    assert len(calls) == 3
    assert trimmed == untrimmed
    assert pickle.loads(pickle.dumps(trimmed)) == untrimmed


def test_small_binds_do_not_trim(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting(monkeypatch)
    for name in case_names():
        plan = bind_inputs(load_case(name)["inputs"])
        assert len(plan.operations) < binding._TRIM_MIN_OPERATIONS
    assert calls == []

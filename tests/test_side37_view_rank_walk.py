"""revalidate_views reads an executor rank's values in the walk that checks its dict (SIDE37).

``rw_side`` takes the rank's ``dp``, ``tp``, ``pp``, ``ep`` in the walk that checks the rank's
instance dict plain (plain_dict.h ``pd_instance_values``) instead of looking each up after it; a
key equal to a field name but another str object is looked up right after the walk, as Python
finds it. Oracle: the rules, and revalidate_views' answer (the C check decides, not None) where
the rank's values are the same."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank
from mooncake.reshard.weight._planner import bound_contracts as bc

from test_sound25_plain_dicts import _plan, _ruled, _same
from forge_helpers import outcome


def _rekeyed_rank(rank: Any, how: str) -> Any:
    forged = object.__new__(ParallelRank)
    items = list(vars(rank).items())
    if how == "reversed":
        items.reverse()
    for name, value in items:
        key = "".join(list(name)) if how == "copies" else name  # equal str, another object
        if how == "missing" and name == "pp":
            continue
        if how == "changed" and name == "tp":
            value = value + 1
        forged.__dict__[key] = value
    return forged


def _views_answers(plan: Any) -> tuple[Any, list[Any]]:
    answers: list[Any] = []
    native_views = _native.revalidate_views

    def views(*args: Any, **kwargs: Any) -> Any:
        answer = native_views(*args, **kwargs)
        answers.append(answer is not None)
        return answer

    original = bc._native.revalidate_views
    bc._native.revalidate_views = views
    try:
        result = outcome(lambda: dataclasses.replace(plan))
    finally:
        bc._native.revalidate_views = original
    return result, answers


@pytest.mark.parametrize("how", ["copies", "reversed", "missing", "changed"])
def test_a_rekeyed_rank_reads_as_before(how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = _plan()
    for executor in plan.source_executors + plan.target_executors:
        vars(executor)["rank"] = _rekeyed_rank(executor.rank, how)
    expected = _ruled(lambda: dataclasses.replace(plan), monkeypatch)
    result, answers = _views_answers(plan)
    _same(result, expected)
    if how in ("copies", "reversed", "changed"):
        assert answers and answers[0]  # the values read: the C pass decides
    else:
        assert answers and not answers[0]  # a value missing: declined (the rules decide)

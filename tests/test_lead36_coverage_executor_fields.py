"""revalidate_coverage's executor rows read every executor field before comparing any (session 36).

``rc_executor`` (csrc/revalidate.c) compares an executor's fields with the placement's and the
attestation's. A comparison of a value that is not an exact str runs that value's own methods:
Python code, after which no C pass may probe the dict it checked before (plain_dict.h). Before,
the row read its fields one by one between the comparisons, so a ``placement_id`` whose ``__ne__``
planted a colliding key in front of a field read later had that key's ``__eq__`` run inside the
pass (found by session 36's MEMO36). Now the fields are read right after the dict is checked,
before any comparison. (revalidate_views declines an executor whose placement id is
not an exact str, so the id is swapped by a profile hook between that pass and the coverage
pass, where code may run.)
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from mooncake.reshard import _native

from test_sound25_plain_dicts import Colliding, _plan, _ruled, _same, _Watch, _watched

# The executor fields rc_executor reads after its first comparison (the placement id's).
_LATER_FIELDS = ("placement_digest", "instance_id", "runtime_lease_id", "fragment_ids")


class _PlantingId(str):
    """A placement id equal to the real one whose first ``!=`` plants a ``Colliding`` key in
    front of ``field`` in ``state`` (the executor's own dict)."""

    state: dict[Any, Any]
    field: str
    planted: bool

    def __ne__(self, other: object) -> bool:
        if not self.planted and self.field in self.state:
            self.planted = True
            after = [(key, self.state.pop(key)) for key in list(self.state)[list(self.state).index(self.field) :]]
            self.state[Colliding(f"{self.field}~planted")] = None
            for key, value in after:
                self.state[key] = value
        return str.__ne__(self, other)

    __hash__ = str.__hash__


class _SwapWatch(_Watch):
    """The sound25 watch that, at the call of revalidate_coverage, puts ``value`` under
    ``placement_id`` in ``state`` (once)."""

    def __init__(self, state: dict[Any, Any], value: Any) -> None:
        super().__init__()
        self.swap: Any = (state, value)
        self.swapped = False

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if event == "c_call" and arg is _native.revalidate_coverage and not self.swapped:
            state, value = self.swap
            state["placement_id"] = value
            self.swapped = True
        super().__call__(frame, event, arg)


@pytest.mark.parametrize("field", _LATER_FIELDS)
def test_a_comparison_planting_a_key_is_not_followed_by_a_probe(field: str, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = _plan()
    state = vars(plan.target_executors[0])  # (the coverage pass checks the target side's rows)
    assert field in state
    expected = _ruled(lambda: dataclasses.replace(plan), monkeypatch)  # before the swap: a plan
    sly = _PlantingId(state["placement_id"])
    sly.state, sly.field, sly.planted = state, field, False
    watch = _SwapWatch(state, sly)
    result, hits = _watched(lambda: dataclasses.replace(plan), watch)
    assert watch.swapped and sly.planted  # the pass compared the swapped id
    assert hits == []
    # The swap comes after the passes that check the executor's field kinds: the pass compares
    # the swapped id as the equal str it is, and decides as on the values those passes saw.
    _same(result, expected)

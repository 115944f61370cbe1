"""revalidate_side's executor rows read every executor field before comparing any (SIDE37).

``rs_executor`` (csrc/revalidate.c) compares an executor's provenance key with its view's
``key_base`` items: ``==`` of a value that is not an exact str runs that value's own methods
(Python code), after which no C pass may probe the dict it checked before (plain_dict.h).
Before, the row read ``fragment_snapshots`` and ``fragment_ids`` from the executor's dict after
that comparison, so a ``key_base`` item whose ``__eq__`` planted a colliding key in front of
them had that key's ``__eq__`` run inside the pass. Now the fields are read (taken in the walk
that checks the dict) right after the check, before any comparison. (The views are the fast
path's own objects: the item is swapped in by a profile hook at the pass's call.)
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from mooncake.reshard import _native

from test_sound25_plain_dicts import Colliding, _plan, _ruled, _same, _Watch, _watched

# The executor fields rs_executor read after the key's comparison.
_LATER_FIELDS = ("fragment_snapshots", "fragment_ids")


class _PlantingItem(str):
    """A ``key_base`` item equal to the real one whose first ``==`` plants a ``Colliding`` key in
    front of ``field`` in every executor dict of ``states``."""

    states: list[dict[Any, Any]]
    field: str
    planted: bool

    def __eq__(self, other: object) -> bool:
        if not self.planted:
            self.planted = True
            for state in self.states:
                if self.field not in state:
                    continue
                after = [(key, state.pop(key)) for key in list(state)[list(state).index(self.field) :]]
                state[Colliding(f"{self.field}~planted")] = None
                for key, value in after:
                    state[key] = value
        return str.__eq__(self, other)

    __hash__ = str.__hash__


class _SwapWatch(_Watch):
    """The sound25 watch that, at the first call of revalidate_side, puts ``item`` first in the
    ``key_base`` of every view of the fast path's ``attested`` table (once)."""

    def __init__(self, item: _PlantingItem) -> None:
        super().__init__()
        self.item = item
        self.swapped = False

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if event == "c_call" and arg is _native.revalidate_side and not self.swapped:
            attested = frame.f_locals.get("attested")
            if isinstance(attested, dict):
                for entry in attested.values():
                    view = entry[2]
                    base = view.key_base
                    if base and type(base[0]) is str and str.__eq__(base[0], str(self.item)) is True:
                        view.key_base = (self.item,) + tuple(base[1:])
                        self.swapped = True
        super().__call__(frame, event, arg)


@pytest.mark.parametrize("field", _LATER_FIELDS)
def test_a_key_comparison_planting_a_key_is_not_followed_by_a_probe(field: str, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = _plan()
    dataclasses.replace(plan)  # (the views cached: the watched call reuses them)
    states = [vars(e) for e in plan.source_executors + plan.target_executors]
    assert all(field in state for state in states)
    expected = _ruled(lambda: dataclasses.replace(plan), monkeypatch)
    instance = next(iter(states))["instance_id"]
    sly = _PlantingItem(instance)
    sly.states, sly.field, sly.planted = states, field, False
    watch = _SwapWatch(sly)
    result, hits = _watched(lambda: dataclasses.replace(plan), watch)
    assert watch.swapped and sly.planted  # the pass compared the swapped item
    assert hits == []
    _same(result, expected)

"""Keys planted in the attested views' by-pfid tables before ``revalidate_side`` (AUDIT8,
session 28).

``revalidate_side``'s ``rs_fragment`` probes three tables of each attestation's view with the
fragment's placement fragment id: ``attested_pfids`` (membership), ``object_by_pfid()`` (the
``_objects_by_pfid`` cache, or built from binding's snapshot objects) and ``expected_by_pfid``
(``_rows[0]``). The views are built before the pass (``revalidate_fragments`` keeps them in the
``attested`` dict it returns) and are mutable objects: a profile hook (or a signal handler, or
another thread) running between the passes reaches them through ``_fast_revalidate_live``'s
frame and can plant a str subclass with a colliding hash in those tables, or swap the
snapshots' ``placement_fragment_id`` the object table is built from. Its ``__eq__`` would then
run inside the pass's probes (user code while the pass holds borrowed references). The pass now
checks each table plain (plain_dict.h) once per view and call, when it fetches it, and declines
otherwise: the rules decide, with the same outcome.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import pytest

from forge_helpers import sized_world
from test_sound25_plain_dicts import Colliding, _plan, _PlantAfter, _ruled, _same, _watched

from mooncake.reshard.weight import bind_logical_transfer_plan



def _planted_dict(table: dict[Any, Any]) -> None:
    """A ``Colliding`` key in front of every key of ``table`` (in place)."""
    items = list(table.items())
    table.clear()
    for key, value in items:
        table[Colliding(f"{key}~planted")] = None
        table[key] = value


def _plant_tables(view: Any) -> int:
    """Colliding keys in the view's by-pfid tables that exist now; the number of tables."""
    planted = 0
    rows = view._rows
    if type(rows) is tuple and rows and type(rows[0]) is dict and rows[0]:
        _planted_dict(rows[0])  # expected_by_pfid (also attested_pfids when the view has no objects)
        planted += 1
    if type(view._objects_by_pfid) is dict and view._objects_by_pfid:
        _planted_dict(view._objects_by_pfid)
        planted += 1
    if type(view.attested_pfids) is set:
        view.attested_pfids = {Colliding(f"{key}~planted") for key in view.attested_pfids} | view.attested_pfids
        planted += 1
    return planted


class _PlantViews(_PlantAfter):
    """A ``_PlantAfter`` that, when ``revalidate_shapes`` (the pass before ``revalidate_side``)
    returns to ``_fast_revalidate_live``, plants with ``plant`` in every view of the frame's
    ``attested`` dict."""

    def __init__(self, plant: Callable[[Any], int]) -> None:
        super().__init__(None, "revalidate_shapes")
        self.plant = plant

    def plant_now(self, frame: Any) -> int:
        return sum(self.plant(entry[2]) for entry in list(frame.f_locals["attested"].values()))


def _run(plant: Callable[[Any], int], call: Callable[[], Any]) -> tuple[Any, _PlantViews]:
    watch = _PlantViews(plant)
    result, _ = _watched(call, watch)
    return result, watch


def test_tables_planted_before_the_side_pass_replace(monkeypatch: pytest.MonkeyPatch) -> None:
    """``replace()``: views without binding's objects (``expected_by_pfid`` is also the
    ``attested_pfids`` probed first)."""
    plan = _plan()
    result, watch = _run(_plant_tables, lambda: dataclasses.replace(plan))
    assert watch.planted > 0
    assert watch.hits == []
    _same(result, _ruled(lambda: dataclasses.replace(plan), monkeypatch))


def test_tables_planted_before_the_side_pass_unsealed_bind(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bind (unsealed by the hook) revalidating the plan it built."""
    logical, targets, sources, _memory = sized_world(2)

    def bind() -> Any:
        return bind_logical_transfer_plan(logical, targets, source_bindings=sources)

    result, watch = _run(_plant_tables, bind)
    assert watch.planted > 0
    assert watch.hits == []
    _same(result, _ruled(bind, monkeypatch))


class _Generation(int):
    """A view's generation whose ``==`` (Python code the pass runs when comparing it, as a hook
    could at any such point) plants keys in ``table`` at its second call: the view's second
    fragment, after the pass checked and probed the table for the first."""

    def __eq__(self, other: object) -> bool:
        self.calls += 1
        if self.calls == 2:
            _planted_dict(self.table)
        return int(self) == other

    __hash__ = int.__hash__


def _swap_generation(view: Any) -> int:
    if type(view.attested_pfids) is not dict or not view.attested_pfids:
        return 0
    generation = _Generation(view.generation)
    generation.table = view.attested_pfids  # (also ``expected_by_pfid``: ``_rows[0]``)
    generation.calls = 0
    view.generation = generation
    return 1


def test_tables_planted_inside_the_side_pass_between_two_fragments(monkeypatch: pytest.MonkeyPatch) -> None:
    plan = _plan()
    result, watch = _run(_swap_generation, lambda: dataclasses.replace(plan))
    assert watch.planted > 0
    assert watch.hits == []
    _same(result, _ruled(lambda: dataclasses.replace(plan), monkeypatch))

"""The planner's tensor columns taken in catalog order (session 18): ``FragmentTable.first_tensors``
against ``dict.fromkeys`` (the oracle), and plans made with the table path against plans made
with it declined (``core._first_table`` returning None: the previous, first-appearance path),
byte-equal pickles or the same error, on random placement pairs and the known answers."""

from __future__ import annotations

import pickle
from typing import Any, Callable, Optional

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import known_answers
from layout_model import Layout, build_placement
from test_native_table import Layout as TableLayout
from test_planner_oracle import placement_pairs

from mooncake.reshard.weight import PlanningLimits
from mooncake.reshard.weight._planner import core
from mooncake.reshard.weight.planner import plan_placement_transfer


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 12), st.lists(st.integers(0, 11), max_size=40), st.booleans())
def test_first_tensors_is_dict_fromkeys(ntensors: int, rows: list[int], per_fragment: bool) -> None:
    lay = TableLayout([(4,)] * ntensors)
    for r, t in enumerate(rows):
        if t < ntensors:
            lay.add(t, (0,), (4,), (r, 0, 0, 0))
    table = lay.pack()
    names = [f"t{k}" for k in range(ntensors)]
    values = list(range(100, 100 + ntensors))
    order = list(dict.fromkeys(lay.tensor_index))
    frag = [object() for _ in lay.tensor_index]
    got = table.first_tensors(frag if per_fragment else None, names, values)
    first_rows = [lay.tensor_index.index(t) for t in order]
    assert got[0] == ([frag[r] for r in first_rows] if per_fragment else None)
    assert all(a is frag[r] for a, r in zip(got[0] or [], first_rows))
    assert got[1] == [names[t] for t in order]
    assert got[2] == [values[t] for t in order]


def test_first_tensors_refuses_bad_arguments() -> None:
    lay = TableLayout([(4,), (4,)])
    lay.add(1, (0,), (4,), (0, 0, 0, 0))
    table = lay.pack()
    assert table.first_tensors(None) == (None,)
    assert table.first_tensors(["x"], ["a", "b"]) == (["x"], ["b"])
    with pytest.raises(TypeError, match="per_fragment"):
        table.first_tensors()
    with pytest.raises(ValueError, match="per_fragment has the wrong length"):
        table.first_tensors(["x", "y"])
    with pytest.raises(ValueError, match="per_tensor has the wrong length"):
        table.first_tensors(None, ["a"])
    with pytest.raises(TypeError, match="per_fragment must be a list"):
        table.first_tensors(("x",))
    with pytest.raises(TypeError, match="per_tensor must be a list"):
        table.first_tensors(None, None)


_FIRST_TABLE = core._first_table
_LIMITS = PlanningLimits(max_transfer_regions=10**6, max_segments_per_region=10**6, max_total_lowered_segments=10**7)


def _any_size(placement: Any, fragments: Any, tensor_ids: list[str]) -> Any:
    """``core._first_table`` from one fragment on (the planner's takes it from ``_BULK``)."""
    if placement is None or fragments is not placement.fragments:
        return None
    table = placement._fragments_table()
    return table if table is not None and len(table) == len(tensor_ids) else None


def _outcome(call: Callable[[], Any]) -> Any:
    try:
        return ("ok", pickle.dumps(call(), protocol=5))
    except ValueError as exc:
        return ("error", str(exc))


def _both(call: Callable[[], Any], monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any, int]:
    taken = []
    columns = core._tensor_columns_by_catalog

    def spy(*args: Any) -> Optional[Any]:
        result = columns(*args)
        taken.append(result is not None)
        return result

    with monkeypatch.context() as m:
        m.setattr(core, "_first_table", _any_size)
        m.setattr(core, "_tensor_columns_by_catalog", spy)
        fast = _outcome(call)
    with monkeypatch.context() as m:
        m.setattr(core, "_first_table", lambda *args: None)
        exact = _outcome(call)
    return fast, exact, sum(taken)


@settings(max_examples=60, deadline=None)
@given(placement_pairs())
def test_random_pairs_plan_alike(pair: tuple[Layout, Layout]) -> None:
    source, target = (build_placement(side) for side in pair)
    monkeypatch = pytest.MonkeyPatch()
    try:
        fast, exact, _ = _both(lambda: plan_placement_transfer(source, target, planning_limits=_LIMITS), monkeypatch)
    finally:
        monkeypatch.undo()
    assert fast == exact


def test_known_answers_plan_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    placements = known_answers.placements()
    used = 0
    for source in placements:
        for target in placements:
            fast, exact, taken = _both(
                lambda: plan_placement_transfer(source, target, planning_limits=_LIMITS), monkeypatch
            )
            assert fast == exact
            used += taken
    assert used > 0  # the catalog path decided some of them


def test_a_tensor_that_stops_the_pass_is_reported_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    placements = known_answers.placements()
    checked = 0
    for source in placements:
        for target in placements:
            if source is target or {t.tensor_id for t in source.tensors} != {t.tensor_id for t in target.tensors}:
                continue
            fast, exact, _ = _both(
                lambda: plan_placement_transfer(source, target, planning_limits=_LIMITS), monkeypatch
            )
            assert fast == exact
            checked += 1
    assert checked > 0

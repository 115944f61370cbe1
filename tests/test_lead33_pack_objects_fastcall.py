"""``FragmentTable.pack_objects`` is called as METH_FASTCALL since session 33: its wrapper
(common.h ``MR_COLLECTOR_PAUSED_FAST``) pauses the collector and only then builds the argument
tuple the pass parses, so no allocation of the call happens before the pause (a METH_VARARGS
call's tuple was allocated after a profiler's ``c_call`` event; test_lead29_collector_memos).
Checked here: the call accepts and refuses what it did (3 to 5 positional arguments, no
keywords, the same messages), gives the same table, and leaves the collector as it found it,
enabled or not, on success and on error."""

from __future__ import annotations

import gc
from typing import Any

import pytest

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank, PlacementFragment

_FRAGMENTS = [PlacementFragment("a", (2 * r, 0), (2, 4), 16, ParallelRank(tp=r)) for r in range(2)]


def _pack(*args: Any, **kwargs: Any) -> Any:
    return _native.FragmentTable.pack_objects(*args, **kwargs)


def test_same_table_with_three_four_and_five_arguments() -> None:
    three = _pack([(4, 4)], {"a": 0}, _FRAGMENTS)
    four = _pack([(4, 4)], {"a": 0}, _FRAGMENTS, None)
    five = _pack([(4, 4)], {"a": 0}, _FRAGMENTS, None, PlacementFragment)
    for table, increasing, aliases in (three, four, five):
        assert isinstance(table, _native.FragmentTable)
        assert (increasing, aliases) == (three[1], three[2])
        assert table.duplicate_logical_fragment() == -1
        assert table.overlapping_rank_group() == -1


@pytest.mark.parametrize("count", [0, 1, 2, 6])
def test_wrong_argument_counts_raise_the_parser_error(count: int) -> None:
    args = ([(4, 4)], {"a": 0}, _FRAGMENTS, None, PlacementFragment, None)[:count]
    with pytest.raises(TypeError, match="pack_placement_fragments"):
        _pack(*args)


def test_keywords_are_refused() -> None:
    with pytest.raises(TypeError, match="keyword"):
        _pack([(4, 4)], {"a": 0}, _FRAGMENTS, rows=None)


@pytest.mark.parametrize("enabled", [True, False])
def test_collector_state_restored_on_success_and_error(enabled: bool) -> None:
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        _pack([(4, 4)], {"a": 0}, _FRAGMENTS)
        assert gc.isenabled() is enabled
        with pytest.raises(TypeError):
            _pack([(4, 4)], 7, _FRAGMENTS)  # neither a dict nor an (ids, positions) pair
        assert gc.isenabled() is enabled
        with pytest.raises(TypeError):
            _pack([(4, 4)])
        assert gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()

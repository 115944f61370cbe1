"""``project_executors``' used ids given as a list: the first lookups scan the list's items for the
id's pointer, and past a scan budget (a few reads per item) the pointers are sorted once and
searched (session 28; before, they were always sorted). Membership must stay that of
``set(list)``, in both regimes: a pointer hit counts only where the list holds that very object
when it is looked up, so a list changed between parts (ids moved, replaced by equal copies,
removed) must give what the rules give on the list as it is at each part."""

from __future__ import annotations

import sys
from typing import Any, List

import pytest

from test_plan_executor_tuples import _outcome, _Part, _python
from test_plan6_used_set import _copy

from mooncake.reshard.weight import ParallelRank, PlacementFragment
from test_plan_order_r19_executors import _fragment


def _parts(count: int, size: int) -> List[_Part]:
    parts = []
    for p in range(count):
        rank = ParallelRank(tp=p)
        parts.append(_Part(f"p{p}", rank, tuple(_fragment(f"sha256:{p:03d}{k:05d}", rank) for k in range(size))))
    return parts


@pytest.mark.parametrize("count", [2, 12, 40])  # few lookups (scans) to many (past the budget: sorted)
@pytest.mark.parametrize("size", [3, 600])
def test_scans_and_the_sorted_table_give_set_membership(count: int, size: int) -> None:
    parts = _parts(count, size)
    ids = [f.placement_fragment_id for part in parts for f in part.fragments]
    firsts = [part.fragments[0].placement_fragment_id for part in parts]
    filler = [_copy(f"x{k}") for k in range(50)]
    cases = [
        # every part's first id, last in the list (each scan reads it all), in reverse order
        filler + firsts[::-1],
        # the same ids as equal copies (every pointer misses: the set decides)
        filler + [_copy(fid) for fid in firsts[::-1]],
        # every other part used, by its last id (the scan misses the first ids of all parts)
        [part.fragments[-1].placement_fragment_id for part in parts[::2]],
        # pointers and copies mixed, with duplicates
        firsts[: count // 2] + [_copy(fid) for fid in firsts[count // 2 :]] + firsts[:3],
        ids[::-1],
    ]
    for used in cases:
        counts = [sys.getrefcount(fid) for fid in ids]
        fast = _outcome(parts, list(used), PlacementFragment)
        assert fast == _outcome(parts, list(used))
        assert [(key, list(state["placement_fragment_ids"])) for key, state in fast] == _python(parts, set(used))
        del fast
        assert [sys.getrefcount(fid) for fid in ids] == counts


class _MovingPart(_Part):
    """A part whose participant read changes the used list first (Python code between lookups)."""

    def __init__(self, part: _Part, used: List[Any], change: Any) -> None:
        super().__init__(part.participant_id, part.rank, part.fragments)
        self._participant = part.participant_id
        self._used = used
        self._change = change
        self.seen: List[Any] = []

    @property  # type: ignore[override]
    def participant_id(self) -> str:
        self._change(self._used)
        self.seen.append(list(self._used))
        return self._participant

    @participant_id.setter
    def participant_id(self, value: str) -> None:
        self._participant = value


def _rotate(used: List[Any]) -> None:
    if used:
        used.append(used.pop(0))  # every id moves: recorded positions go stale


def _copy_first(used: List[Any]) -> None:
    if used and type(used[0]) is str:
        used[0] = _copy(used[0])  # the same value, another object


def _drop_first(used: List[Any]) -> None:
    if used:
        del used[0]


def _expected(parts: List[_MovingPart], initial: List[Any]) -> List[Any]:
    """The pass's membership when the list changes under it (the rules' form reads set(list) once;
    no caller's list can change during the pass, a hostile hook's can): an id counts when the
    list still holds that very object at a position it had when the pass started; otherwise the
    set of the list's values at the first such miss decides, then and for every later lookup."""
    built = None
    out = []
    for part in parts:
        now = part.seen[0]  # the list as the part's participant read left it
        used = False
        for fid in (f.placement_fragment_id for f in part.fragments):
            if built is None:
                if any(x is fid and i < len(now) and now[i] is fid for i, x in enumerate(initial)):
                    used = True
                    break
                built = set(now)
            if fid in built:
                used = True
                break
        if used:
            rank = part.rank
            out.append(((rank.dp, rank.pp, rank.ep, rank.tp), sorted(f.placement_fragment_id for f in part.fragments)))
    return out


def _swap_then_drop(used: List[Any]) -> None:
    """Odd calls swap the first two items (recorded positions go stale, the values stay),
    even calls drop the last (a value goes): a frozen set and the live list then differ."""
    calls = getattr(_swap_then_drop, "calls", 0) + 1
    _swap_then_drop.calls = calls  # type: ignore[attr-defined]
    if calls % 2 and len(used) > 1:
        used[0], used[1] = used[1], used[0]
    elif used:
        del used[-1]


@pytest.mark.parametrize("count", [3, 40])
@pytest.mark.parametrize("change", [_rotate, _copy_first, _drop_first, _swap_then_drop])
def test_a_list_changed_between_parts_gives_the_membership_of_the_recorded_positions(count: int, change: Any) -> None:
    _swap_then_drop.calls = 0  # type: ignore[attr-defined]
    base = _parts(count, 3)
    firsts = [part.fragments[0].placement_fragment_id for part in base]
    # filler ahead of the ids: a scan reads past other items before its hit
    used: List[Any] = list(firsts[:2]) + [_copy(f"x{k}") for k in range(8)] + list(firsts[2:])
    initial = list(used)
    parts = [_MovingPart(part, used, change) for part in base]
    fast = _outcome(parts, used, PlacementFragment)
    assert isinstance(fast, list)
    assert [(key, list(state["placement_fragment_ids"])) for key, state in fast] == _expected(parts, initial)

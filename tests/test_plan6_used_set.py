"""``project_executors``' used ids given as a list: the set of its values, built on the first miss
by pointer, is made by C adds with the items asked for ahead (session 26) instead of
``PySet_New(list)``. Membership must stay that of ``set(list)``: value-equal copies of the ids
(every pointer lookup misses), and items whose hash changes the list while the set is built
(appending an id, emptying the list), as the list iterator of ``set(list)`` sees them."""

from __future__ import annotations

import sys
from typing import Any, Callable, List

import pytest

from test_plan_executor_tuples import _outcome, _Part, _python

from mooncake.reshard.weight import ParallelRank, PlacementFragment
from mooncake.reshard.weight._planner import core
from test_plan_order_r19_executors import _fragment


def _parts(size: int) -> List[_Part]:
    parts = []
    for p in range(3):
        rank = ParallelRank(tp=p)
        parts.append(_Part(f"p{p}", rank, tuple(_fragment(f"sha256:{p:02d}{k:05d}", rank) for k in range(size))))
    return parts


def _copy(text: str) -> str:
    """An exact str equal to ``text`` that is another object."""
    made = "".join(list(text))
    assert made == text and made is not text and type(made) is str
    return made


@pytest.mark.parametrize("size", [3, 600])
def test_value_equal_copies_are_members(size: int) -> None:
    parts = _parts(size)
    ids = [f.placement_fragment_id for part in parts for f in part.fragments]
    for used in ([_copy(ids[-1])], [_copy(i) for i in ids[:size]], [ids[0], _copy(ids[-1])], ["nope", _copy(ids[size])]):
        counts = [sys.getrefcount(fid) for fid in ids]
        fast = _outcome(parts, used, PlacementFragment)
        assert fast == _outcome(parts, used)
        assert [(key, list(state["placement_fragment_ids"])) for key, state in fast] == _python(parts, set(used))
        del fast
        assert [sys.getrefcount(fid) for fid in ids] == counts


class _Hostile(str):
    """A str whose first hash runs ``action`` on the list that holds it."""

    def __new__(cls, text: str, action: Callable[[List[Any]], None]) -> "_Hostile":
        made = super().__new__(cls, text)
        made.action = action  # type: ignore[attr-defined]
        made.home = None  # type: ignore[attr-defined]
        return made

    def __hash__(self) -> int:
        home = self.home  # type: ignore[attr-defined]
        if home is not None:
            self.home = None  # type: ignore[attr-defined]
            self.action(home)  # type: ignore[attr-defined]
        return str.__hash__(self)

    def __eq__(self, other: object) -> bool:
        return str.__eq__(self, other)


def _hostile_list(ids: List[str], action: Callable[[List[Any]], None], after: List[str]) -> List[Any]:
    item = _Hostile("zz-hostile", action)
    used: List[Any] = [ids[0], item, *after]
    item.home = used  # type: ignore[attr-defined]
    return used


@pytest.mark.parametrize("size", [3, 600])
@pytest.mark.parametrize("kind", ["append", "clear", "shrink"])
def test_a_hash_that_changes_the_list_is_seen_as_set_of_the_list_sees_it(size: int, kind: str) -> None:
    parts = _parts(size)
    ids = [f.placement_fragment_id for part in parts for f in part.fragments]
    actions = {
        "append": lambda home: home.append(_copy(ids[-1])),  # the last part used, through the appended copy
        "clear": lambda home: home.clear(),  # the items after it never added
        "shrink": lambda home: home.pop(),  # the last item never added
    }
    after = [_copy(ids[size + 1]), _copy(ids[2 * size + 1])]
    # the rule: set(list) of an equal list, its hostile item's action on that list
    reference = set(_hostile_list(ids, actions[kind], list(after)))
    # the hostile item is a str subclass: its hash would run inside the C pass, which declines
    # when it builds the set (AUDIT5 F4) without hashing it; the Python form decides, as set(list)
    used = _hostile_list(ids, actions[kind], list(after))
    assert _outcome(parts, used, PlacementFragment) == ("declined",) == _outcome(parts, list(used))
    assert used[1].home is used  # (its hash never ran)
    placement = type("P", (), {"parts": tuple(parts), "placement_id": "sha256:" + "0" * 64})()
    executors = core._project_executors_python(placement, used, "target")  # type: ignore[arg-type]
    got = [((e.rank.dp, e.rank.pp, e.rank.ep, e.rank.tp), list(e.placement_fragment_ids)) for e in executors]
    assert got == sorted(_python(parts, reference))

"""``FragmentTable.pack_objects`` and ``canonical_parts_json`` keep per-call memos of rank
objects (table.c ``tbl_rank_memo``: a rank's dp/tp/pp/ep; canonical.c ``pfl_rank``: a rank's
encoded text), read once per call each. A memo is the value a read gives only while no Python
code has run since it was filled. The passes run none of their own, but CPython (>= 3.11) keeps
a fresh instance's attributes inline until its ``__dict__`` is asked for: the passes' first read
of such a rank makes its dict, an allocation that can run the collector, whose callbacks and
finalizers are Python code (and could change a rank already remembered). So both calls run with
the automatic collector off (session 29; found by PLAN9 while adding the planner's rank memos,
csrc/rank_memo.h). Checked here: no collector callback runs inside either call, at every
threshold from 1 to 40, with ranks whose dicts the call itself makes (before the pause, the
callback ran inside both calls), and the results are those of the same inputs with dicts made
beforehand."""

from __future__ import annotations

import gc
import sys
from typing import Any, Callable

import pytest

from mooncake.reshard.weight import ParallelRank
from mooncake.reshard.weight.validation import pack_placement_fragments
from mooncake.reshard.weight._canonical import placement_wire_json
from collector_hooks import collector_armed
from memory_executor import tp_placement


def _dictless_rank(rank: Any) -> ParallelRank:
    """A copy of rank whose attributes are still inline (no instance dict yet)."""
    fresh = object.__new__(ParallelRank)
    for name in ("dp", "tp", "pp", "ep"):
        object.__setattr__(fresh, name, getattr(rank, name))
    return fresh


def _has_dict(obj: Any) -> bool:
    return any(type(x) is dict for x in gc.get_referents(obj))


def _collector_ran_inside(name: str, call: Callable[[], Any]) -> bool:
    """Whether a collector callback started while the C function ``name`` ran, at any threshold
    from 1 to 40; call() gives the C function ranks whose dicts it makes itself."""
    ran_inside = False
    for threshold in range(1, 41):
        inside = [False]

        def callback(phase: str, info: Any) -> None:
            nonlocal ran_inside
            if phase == "start" and inside[0]:
                ran_inside = True

        def profile(frame: Any, event: str, arg: Any) -> None:
            if getattr(arg, "__name__", None) == name and event in ("c_call", "c_return", "c_exception"):
                inside[0] = event == "c_call"

        with collector_armed(threshold, callback, profile):  # a rank's dict is a fresh allocation
            call()
    return ran_inside


def _with_dictless_ranks(placement: Any) -> list:
    """Every fragment of placement, each rank object replaced by a dict-less copy (one per rank
    object, so the fragments still share them)."""
    copies: dict[int, Any] = {}
    fragments = []
    for part in placement.parts:
        for fragment in part.fragments:
            fresh = copies.setdefault(id(fragment.rank), _dictless_rank(fragment.rank))
            object.__setattr__(fragment, "rank", fresh)
            fragments.append(fragment)
    assert not any(_has_dict(rank) for rank in copies.values())
    return fragments


_NEW_RANKS = pytest.mark.skipif(
    sys.version_info < (3, 11), reason="inline attributes (no dict until asked for) are 3.11+"
)


def _placement() -> Any:
    return tp_placement(4, prefix="s", dp=2, shape=(8, 8), tensors=("wa", "wb", "wc"))


@_NEW_RANKS
def test_pack_objects_runs_no_collector() -> None:
    placement = _placement()
    results = []

    def call() -> None:
        fragments = _with_dictless_ranks(placement)
        results.append(pack_placement_fragments(placement.tensors, fragments))

    assert not _collector_ran_inside("pack_objects", call)
    assert all(table is not None for table in results)  # the packed path ran


@_NEW_RANKS
def test_canonical_parts_json_runs_no_collector() -> None:
    placement = _placement()
    expected = placement_wire_json(placement, sha256=True)
    results = []

    def call() -> None:
        _with_dictless_ranks(placement)
        results.append(placement_wire_json(placement, sha256=True))

    assert not _collector_ran_inside("canonical_parts_json", call)
    assert results == [expected] * len(results)

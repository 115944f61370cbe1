"""``project_executors`` reads a part's fragment ids from the C-owned layout's slot (session 19).

For parts whose fragments are an exact tuple of exactly the fragment class, the ids were read
with ``getattr`` in address order; they are now loaded from the ``placement_fragment_id`` slot
when the class is a C-owned PlacementFragment layout that ``getattr`` reads from (checked in
full on each call: generic getattr, no class in the MRO before the layout base defining a
field). Every outcome must stay that of ``getattr``: the in-order reads (no fragment class) and
the Python rules, also when a class attribute shadows the field and when a slot is empty."""

from __future__ import annotations

import inspect
import sys
from typing import Any, Iterator, List

import pytest

from spec_helpers import field_state, store_state
from test_plan_executor_tuples import _outcome, _Part, _python

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank, PlacementExecutorPlan, PlacementFragment


def _fragment(fid: str, rank: ParallelRank) -> PlacementFragment:
    return PlacementFragment(tensor_id="w", global_offset=(0,), local_shape=(4,), nbytes=8, rank=rank,
                             placement_fragment_id=fid)


def _parts(size: int = 600) -> List[_Part]:
    """Three parts of ``size`` fragments (the slot reads start at 512 fragments a part)."""
    parts = []
    for p in range(3):
        rank = ParallelRank(tp=p)
        ids = [f"sha256:{p:02d}{k:04d}" for k in range(size)]
        parts.append(_Part(f"p{p}", rank, tuple(_fragment(fid, rank) for fid in ids)))
    return parts


@pytest.fixture
def shadowed_ids() -> Iterator[None]:
    """PlacementFragment.placement_fragment_id shadowed by a property (ids prefixed "z")."""
    assert "placement_fragment_id" not in vars(PlacementFragment)  # the layout base's member
    member = inspect.getattr_static(PlacementFragment, "placement_fragment_id")
    PlacementFragment.placement_fragment_id = property(lambda self: "z" + member.__get__(self))  # type: ignore[assignment,misc]
    try:
        yield
    finally:
        del PlacementFragment.placement_fragment_id  # type: ignore[misc]


def test_slot_reads_equal_getattr() -> None:
    parts = _parts()
    every = [f.placement_fragment_id for part in parts for f in part.fragments]
    for used in ({every[3]}, [every[615]], set(every), list(every), {"nope"}):
        counts = [sys.getrefcount(fid) for fid in every]
        fast = _outcome(parts, used, PlacementFragment)
        assert fast == _outcome(parts, used)
        assert [(key, list(state["placement_fragment_ids"])) for key, state in fast] == _python(parts, set(used))
        stored = [fid for _, state in fast for fid in state["placement_fragment_ids"]]
        assert {id(fid) for fid in stored} <= {id(fid) for fid in every}  # the slots' own objects
        del fast, stored
        assert [sys.getrefcount(fid) for fid in every] == counts  # nothing kept, nothing lost


@pytest.mark.parametrize("size", [12, 600])
def test_a_shadowing_class_attribute_is_what_getattr_reads(shadowed_ids: None, size: int) -> None:
    parts = _parts(size)
    every = [f.placement_fragment_id for part in parts for f in part.fragments]
    assert all(fid.startswith("zsha256:") for fid in every)
    for used in ({every[0]}, set(every), list(every), {every[0][1:]}):
        fast = _outcome(parts, used, PlacementFragment)
        assert fast == _outcome(parts, used)
        assert [(key, list(state["placement_fragment_ids"])) for key, state in fast] == _python(parts, set(used))
    assert _outcome(parts, {every[0]}, PlacementFragment) != []  # the shadowed ids are the used ones


def test_an_empty_slot_reports_as_getattr() -> None:
    parts = _parts()
    broken = parts[1].fragments[5]
    state = dict(field_state(broken))
    del state["placement_fragment_id"]
    store_state(broken, replace=True, state=state)
    with pytest.raises(AttributeError):
        broken.placement_fragment_id
    fast = _outcome(parts, {"sha256:000000"}, PlacementFragment)
    assert fast == _outcome(parts, {"sha256:000000"})
    assert fast[0] == "AttributeError"

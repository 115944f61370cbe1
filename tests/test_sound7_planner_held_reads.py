"""The planner's in-order C loops hold what they read across reads that can run Python code
(session 27, SOUND7).

``fragment_columns``' in-order loop (its fragment), ``project_executors`` (each part) and
``tensor_columns`` (each tensor id) took their item borrowed from a private list copy and read it
again after an attribute read. Such a read can run Python code (a property of a class the pass
accepts, a planted key's ``__eq__``) that finds the copy through the collector
(``gc.get_objects()``), empties it and drops the caller's references: the item was then freed
under the pass (a use after free: wrong values or a crash here, a report under ASan). Each loop
now holds its item for the iteration; the results are those of the undisturbed reads."""

from __future__ import annotations

import gc
from typing import Any, Callable, Optional

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank, PlacementFragment
from mooncake.reshard.weight._planner.contracts import PlacementExecutorPlan


def _empty_lists_of(cls: type) -> None:
    """Empty every list holding only instances of cls (the caller's and the pass's copy; cls is
    this file's own class: no other test's lists)."""
    for obj in gc.get_objects():
        if type(obj) is list and obj and all(type(x) is cls for x in obj):
            obj.clear()


class _Loose:
    """Not a PlacementFragment: fragment_columns' in-order loop reads it by attribute."""

    def __init__(self, fid: str, on_read: Optional[Callable[[], None]] = None) -> None:
        self.fid, self.on_read, self.tensor_id, self.rank = fid, on_read, "w", ParallelRank(dp=3)

    @property
    def placement_fragment_id(self) -> str:
        if self.on_read is not None:
            self.on_read()
        return self.fid


def test_fragment_columns_in_order_loop_holds_its_fragment() -> None:
    fragments = [_Loose("a"), _Loose("b", lambda: _empty_lists_of(_Loose))]
    got = _native.fragment_columns(fragments, PlacementFragment, ParallelRank)
    assert fragments == []  # the property ran and emptied the caller's list
    assert got[:4] == (["a", "b"], ["w", "w"], [3, 3], 1) and got[4] is None


class _Part:
    """A placement part read by project_executors (any class: attribute reads)."""

    def __init__(self, on_read: Optional[Callable[[], None]] = None) -> None:
        self.on_read = on_read
        self.fragments = (PlacementFragment(tensor_id="w", global_offset=(0,), local_shape=(4,), nbytes=8,
                                            rank=ParallelRank(dp=1), placement_fragment_id="a"),)
        self.rank = ParallelRank(dp=1, tp=2)

    @property
    def participant_id(self) -> str:
        if self.on_read is not None:
            self.on_read()
        return "p0"


def test_project_executors_holds_its_part() -> None:
    for ftype in (None, PlacementFragment):
        parts = [_Part(lambda: _empty_lists_of(_Part))]
        got = _native.project_executors(PlacementExecutorPlan, "placement", parts, {"a"}, None, ftype)
        assert parts == []
        assert got is not None and len(got) == 1
        key, executor = got[0]
        assert key == (1, 0, 0, 2)
        assert executor.participant_id == "p0" and executor.placement_fragment_ids == ("a",)
        assert executor.rank == ParallelRank(dp=1, tp=2)


class _Descriptor:
    """A tensor descriptor read by tensor_columns (any class: attribute reads)."""

    def __init__(self, on_read: Optional[Callable[[], None]] = None) -> None:
        self.on_read = on_read
        self.global_shape, self.dtype, self.itemsize, self.layer_id = (4, 6), "float32", 4, 0
        self.tensor_id = "w"

    @property
    def layout_fingerprint(self) -> Any:
        if self.on_read is not None:
            self.on_read()
        return "fp"

    def __getattr__(self, name: str) -> Any:
        return None  # any other compared field


def _tid() -> str:
    """The tensor id "w0" as its own object, distinct from the maps' keys."""
    tid = "".join(["w", "0"])
    assert tid == "w0" and id(tid) != id("w0")
    return tid


_TID: list[int] = []  # the address of the test's own id object


def _empty_id_lists() -> None:
    """Empty the lists holding just the test's id object (the caller's and the pass's copy)."""
    for obj in gc.get_objects():
        if type(obj) is list and len(obj) == 1 and id(obj[0]) in _TID:
            obj.clear()


def test_tensor_columns_holds_its_tensor_id() -> None:
    """The maps probed by key (not by position: they hold one more tensor than the ids), the
    target's first compared field empties the ids' lists: the signature is still looked up
    with the id held."""
    tid = "w0"
    sources = {tid: _Descriptor(), "w1": _Descriptor()}
    targets = {tid: _Descriptor(_empty_id_lists), "w1": _Descriptor()}
    signatures = {tid: (("tp",), True), "w1": (("tp",), True)}
    ids = [_tid()]
    _TID[:] = [id(ids[0])]
    try:
        got = _native.tensor_columns(ids, sources, targets, signatures)
    finally:
        _TID.clear()
    assert ids == []
    assert got == ([2], [4], [True], 1)


class _DictFragment:
    """A fragment class with an instance dict, given to project_executors as its fragment type
    (the planner gives PlacementFragment, whose instances have none)."""

    def __init__(self, fid: str) -> None:
        self.placement_fragment_id = fid


class _IdKey(str):
    __hash__ = str.__hash__
    hooks: list[Callable[[], None]] = []

    def __eq__(self, other: object) -> bool:
        for hook in _IdKey.hooks:
            hook()
        return False


def test_project_executors_reads_a_planted_fragment_in_list_order() -> None:
    """A str-subclass key with the hash of "placement_fragment_id" in the lower fragment's dict
    renames the higher one: the address-order read (lower first) saw the new id, the rules
    (list order, higher first) the old one. The pass now declines such a fragment before
    reading it; the in-order loop reads in list order."""
    for container in (list, tuple):
        one, two = _DictFragment("a"), _DictFragment("b")
        high, low = (one, two) if id(one) > id(two) else (two, one)
        high.placement_fragment_id, low.placement_fragment_id = "b", "a"
        state = low.__dict__
        state.clear()
        state[_IdKey("placement_fragment_id")] = "x"
        state["placement_fragment_id"] = "a"

        def rename() -> None:
            _IdKey.hooks.clear()
            high.__dict__["placement_fragment_id"] = "z"

        part = _Part()
        part.fragments = container([high, low])
        _IdKey.hooks[:] = [rename]
        try:
            got = _native.project_executors(PlacementExecutorPlan, "placement", [part], {"a"}, None, _DictFragment)
        finally:
            _IdKey.hooks.clear()
        assert got is not None and got[0][1].placement_fragment_ids == ("a", "b")  # as read in list order


def _read_every_tuple() -> None:
    """What a memory profiler in a hook may do: read every item of every tracked tuple (an
    empty slot of a tuple still being filled would crash here)."""
    for obj in gc.get_objects():
        if type(obj) is tuple:
            for _item in obj:
                pass


class _TupleScanKey(str):
    """A key with the hash of its text whose __eq__ scans the tuples (once)."""

    __hash__ = str.__hash__
    armed: list[bool] = []

    def __eq__(self, other: object) -> bool:
        if _TupleScanKey.armed:
            _TupleScanKey.armed.clear()
            _read_every_tuple()
        return False


def _plant_scan(rank: Any, name: str) -> None:
    state = rank.__dict__
    saved = dict(state)
    state.clear()
    state[_TupleScanKey(name)] = -1
    state.update(saved)


def test_project_executors_rank_key_is_not_seen_half_made() -> None:
    part = _Part()
    _plant_scan(part.rank, "dp")
    _TupleScanKey.armed[:] = [True]
    try:
        got = _native.project_executors(PlacementExecutorPlan, "placement", [part], {"a"}, None, None)
    finally:
        _TupleScanKey.armed.clear()
    assert got is not None and got[0][0] == (1, 0, 0, 2)


def test_owner_minimums_values_are_not_seen_half_made() -> None:
    from mooncake.reshard.weight._planner.ownership import _owner_minimums

    ranks = [ParallelRank(dp=d, tp=t) for d in range(2) for t in range(2)]
    fragments = [PlacementFragment(tensor_id=f"t{k}", global_offset=(0,), local_shape=(4,), nbytes=8, rank=rank,
                                   placement_fragment_id=f"f{k}{r}") for k in range(3) for r, rank in enumerate(ranks)]
    expected = _owner_minimums(fragments, ("tp",))
    _plant_scan(ranks[1], "tp")
    _TupleScanKey.armed[:] = [True]
    try:
        got = _native.owner_minimums(fragments, ("tp",), PlacementFragment, ParallelRank, False)
    finally:
        _TupleScanKey.armed.clear()
    assert got == expected

"""Sweep (growth per decade) session 11: the executor projection takes the used ids as a list
looked up by object (membership is that of the set of its values), planning hands it the ids
it read when they are exact str, assembly reads the tensor ids once (the duplicate-id error
still comes first)."""

from __future__ import annotations

from typing import Any, Callable, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import known_answers
from layout_model import Layout, build_placement
from test_planner_oracle import placement_pairs

from mooncake.reshard import _native
from mooncake.reshard.weight import (
    ParallelRank,
    ParallelTopology,
    PlacementExecutorPlan,
    PlacementFragment,
    TensorDescriptor,
    TopologyParticipant,
    WeightPlacementManifest,
    plan_placement_transfer,
)
from mooncake.reshard.weight._planner import core
from mooncake.reshard.weight.types import SplitAxis


def _executors(placement: Any, used: Any, participants: Any = None) -> Any:
    pairs = _native.project_executors(
        PlacementExecutorPlan, placement.placement_id, placement.parts, used, participants, PlacementFragment
    )
    return [(key, executor.__dict__) for key, executor in pairs]


def _copies(ids: list[str]) -> list[str]:
    """Equal str values in new objects (every lookup by object misses)."""
    return ["".join(list(value)) if len(value) > 1 else (value + "x")[:-1] for value in ids]


@settings(max_examples=40, deadline=None)
@given(placement_pairs(), st.data())
def test_project_executors_list_equals_the_set_of_its_values(pair: Tuple[Layout, Layout], data: Any) -> None:
    for layout in pair:
        placement = build_placement(layout)
        ids = [f.placement_fragment_id for f in placement.fragments]
        picked = data.draw(st.lists(st.sampled_from(ids), max_size=len(ids))) if ids else []
        copies = _copies(ids)
        assert all(a == b and a is not b for a, b in zip(copies, ids) if len(a) > 0)
        for used in (ids, ids[::3], ids[1::2], picked, copies, copies[::2], [], ["nope"], ids + ["nope"]):
            assert _executors(placement, list(used)) == _executors(placement, set(used))
        first = {placement.parts[0].participant_id}
        assert _executors(placement, list(ids), first) == _executors(placement, set(ids), first)


def test_project_executors_list_known_answers() -> None:
    for name in known_answers.case_names():
        for build in (known_answers.source_placement, known_answers.target_placement):
            try:
                placement = build(name)
            except Exception:  # stored-source cases have no source placement
                continue
            ids = [f.placement_fragment_id for f in placement.fragments]
            for used in (ids, _copies(ids), ids[:1], ids[-1:], []):
                assert _executors(placement, list(used)) == _executors(placement, set(used))
            # the Python reference takes the list too
            assert core._project_executors_python(placement, list(ids), "target") == core.project_executors(
                placement, set(ids), "target"
            )
            assert core.project_executors(placement, list(ids), "target") == core.project_executors(
                placement, set(ids), "target"
            )


def test_project_executors_list_hostile() -> None:
    placement = known_answers.target_placement(known_answers.case_names()[0])
    parts = placement.parts
    for bad in (("x",), frozenset(), {"x": 1}, None, 3):
        if isinstance(bad, frozenset):  # any set is accepted, as before
            assert _native.project_executors(PlacementExecutorPlan, "p", parts, bad, None) == []
            continue
        with pytest.raises(TypeError):
            _native.project_executors(PlacementExecutorPlan, "p", parts, bad, None)

    class Sub(list):  # type: ignore[type-arg]
        pass

    with pytest.raises(TypeError):  # exactly a list (a subclass could hook its items)
        _native.project_executors(PlacementExecutorPlan, "p", parts, Sub(["x"]), None)
    # a miss builds the set of the list's values: a value that is not an exact str (its hash would
    # run inside the pass, AUDIT5 F4) declines; the Python form's set() raises for an unhashable one
    assert _native.project_executors(PlacementExecutorPlan, "p", parts, [["unhashable"]], None) is None
    with pytest.raises(TypeError):
        set([["unhashable"]])


def test_project_executors_list_changed_during_the_call() -> None:
    """A part hook that empties the caller's list: lookups by object trust only what the list
    still holds (then nothing is used), and nothing crashes."""
    placement = known_answers.target_placement(known_answers.case_names()[0])
    ids = [f.placement_fragment_id for f in placement.fragments]
    used = list(ids)

    class Part:
        def __init__(self, real: Any) -> None:
            self._real = real
            self.participant_id = real.participant_id
            self.rank = real.rank

        @property
        def fragments(self) -> Any:
            used.clear()
            return self._real.fragments

    parts = [Part(part) for part in placement.parts]
    pairs = _native.project_executors(PlacementExecutorPlan, "p", parts, used, None, PlacementFragment)
    assert pairs == []


@pytest.fixture
def bulk_from_zero() -> Any:
    """The bulk forms of core.py for every size (they start at _BULK items otherwise)."""
    saved = core._BULK
    core._BULK = 0
    try:
        yield
    finally:
        core._BULK = saved


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(max_size=3), max_size=12, unique=True), st.data())
def test_used_ids_list_only_for_exact_strs(ids: list[str], data: Any) -> None:
    rows = sorted(data.draw(st.sets(st.integers(0, max(len(ids) - 1, 0)), max_size=len(ids)))) if ids else []
    saved = core._BULK
    try:
        core._BULK = 0
        listed = core._used_ids(ids, rows, True)
        assert type(listed) is list and listed == [ids[r] for r in rows]
        assert core._used_ids(ids, rows, False) == {ids[r] for r in rows}
        assert core._used_ids(ids, rows) == {ids[r] for r in rows}
    finally:
        core._BULK = saved
    # below the bulk size: the set
    assert core._used_ids(ids, rows, True) == {ids[r] for r in rows}


def test_used_ids_bulk_threshold() -> None:
    ids = [f"id-{i:05d}" for i in range(core._BULK + 5)]
    rows = list(range(len(ids)))
    assert type(core._used_ids(ids, rows, True)) is list
    assert type(core._used_ids(ids, rows[: core._BULK - 1], True)) is set
    assert type(core._used_ids(ids, rows, False)) is set


def test_sorted_ranks_exact_flag() -> None:
    assert core._sorted_ranks_exact(["b", "a", "c"])[1] is True
    assert core._sorted_ranks_exact(["x", "x"])[1] is True  # repeated exact strs: the dict, still exact
    assert core._sorted_ranks_exact([3, 1, 2])[1] is False

    class S(str):
        pass

    assert core._sorted_ranks_exact(["b", S("a")])[1] is False
    for ids in (["b", "a", "c"], ["x", "x"], [3, 1, 2]):
        assert core._sorted_ranks_exact(ids)[0] == core._sorted_ranks(ids)  # type: ignore[arg-type]


@settings(max_examples=25, deadline=None)
@given(placement_pairs())
def test_plans_equal_with_the_used_sets(pair: Tuple[Layout, Layout]) -> None:
    """Whole plans (executors included, bulk forms at every size) equal those planned with the
    used ids as sets and the distinct tensor ids from dict.fromkeys."""
    source, target = (build_placement(layout) for layout in pair)

    def outcome(call: Callable[[], Any]) -> Any:
        try:
            plan = call()
        except ValueError as error:
            return ("error", str(error))
        return ("ok", plan.operations, plan.source_executors, plan.target_executors)

    saved = core._BULK
    original = core._used_ids
    try:
        core._BULK = 0
        listed = outcome(lambda: plan_placement_transfer(source, target))
        core._BULK = 1 << 62
        core._used_ids = lambda ids, rows, exact=False: original(ids, rows, False)  # type: ignore[assignment]
        assert outcome(lambda: plan_placement_transfer(source, target)) == listed
    finally:
        core._used_ids = original
        core._BULK = saved


# ---- assembly ------------------------------------------------------------------------------


def _topology(ranks: list[ParallelRank], ep: int = 1, tp: int = 1) -> ParallelTopology:
    return ParallelTopology(
        tp_size=tp,
        pp_size=1,
        ep_size=ep,
        dp_size=1,
        participants=tuple(TopologyParticipant(f"w{i}", rank) for i, rank in enumerate(ranks)),
    )


def _assemble(tensors: Any, fragments: Any, topology: ParallelTopology) -> Any:
    try:
        placement = WeightPlacementManifest.from_fragments(
            resource_id="model",
            revision="r",
            weight_generation=1,
            placement_set_id="s",
            topology=topology,
            tensors=tuple(tensors),
            fragments=tuple(fragments),
        )
    except (ValueError, AttributeError, TypeError) as error:
        return (type(error).__name__, str(error))
    return ("ok", placement.placement_id, placement.digest)


def _descriptor(tensor_id: str, shape: Any = (4, 2), axes: Any = None) -> TensorDescriptor:
    return TensorDescriptor(
        tensor_id=tensor_id,
        global_shape=shape,
        dtype="int8",
        itemsize=1,
        shard_dims=(0,),
        layout_fingerprint="f",
        parallel_axes=axes if axes is not None else (SplitAxis("tp", 0),),
    )


def _fragment(tensor_id: str, offset: Any, shape: Any, rank: ParallelRank) -> PlacementFragment:
    return PlacementFragment(tensor_id=tensor_id, global_offset=offset, local_shape=shape, nbytes=shape[0] * shape[1], rank=rank)


def test_duplicate_tensor_id_is_still_the_first_error() -> None:
    ranks = [ParallelRank(tp=0), ParallelRank(tp=1)]
    topology = _topology(ranks, tp=2)
    tensors = [_descriptor("a"), _descriptor("a"), _descriptor("b")]
    stranger = ParallelRank(tp=7)  # no participant: a later error
    fragments = [_fragment("a", (0, 0), (2, 2), ranks[0]), _fragment("zz", (2, 0), (2, 2), stranger)]
    assert _assemble(tensors, fragments, topology) == ("ValueError", "duplicate tensor_id in placement tensors")
    # a forged descriptor without its tensor_id raises from the same place as before
    forged = _descriptor("c")
    del forged.__dict__["tensor_id"]
    got = _assemble([_descriptor("a"), forged], fragments, topology)
    assert got[0] == "AttributeError"
    got = _assemble([_descriptor("a"), _descriptor("a"), forged], fragments, topology)
    assert got == ("ValueError", "duplicate tensor_id in placement tensors")


def test_assembly_columns_tensor_positions() -> None:
    ranks = [ParallelRank(tp=0), ParallelRank(tp=1)]
    topology = _topology(ranks, tp=2)
    ids = ["b", "a", "c10", "c9", "\u00e9", "B"]
    tensors = tuple(_descriptor(tid) for tid in ids)
    fragments = tuple(
        _fragment(tid, (2 * k, 0), (2, 2), ranks[k]) for tid in ids for k in range(2)
    )
    from mooncake.reshard.weight import placement as placement_module

    columns = placement_module._assembly_columns(tensors, fragments, topology)
    assert columns is not None
    positions, groups, keys, sorted_tensors, _, _ = columns
    assert [t.tensor_id for t in sorted_tensors] == sorted(ids)
    assert positions == [sorted(ids).index(f.tensor_id) for f in fragments]
    assert keys == [f.placement_fragment_id for f in fragments]
    assert _assemble(tensors, fragments, topology)[0] == "ok"
    assert _assemble(tensors[::-1], fragments[::-1], topology) == _assemble(tensors, fragments, topology)


# ---- first occurrences by identity ---------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "ab", "", "\u00e9", "\U0001f600"]), max_size=30), st.data())
def test_distinct_in_order_equals_dict_fromkeys(values: list[str], data: Any) -> None:
    saved = core._BULK
    core._BULK = 0
    try:
        _distinct_case(values, data)
    finally:
        core._BULK = saved


def _distinct_case(values: list[str], data: Any) -> None:
    # some items are equal copies in new objects: value repeats across distinct objects
    mixed = [
        "".join(list(v)) + "" if (v and data.draw(st.booleans())) else v for v in values
    ]
    want = list(dict.fromkeys(mixed))
    got = core._distinct_in_order(mixed)
    assert got == want and all(a is b for a, b in zip(got, want))  # the very key objects
    distinct = _native.distinct_objects(mixed)
    assert len({id(x) for x in distinct}) == len(distinct)
    assert {id(x) for x in distinct} == {id(x) for x in mixed}
    firsts: list[Any] = []
    for item in mixed:
        if not any(item is seen for seen in firsts):
            firsts.append(item)
    assert all(a is b for a, b in zip(distinct, firsts)) and len(distinct) == len(firsts)


def test_distinct_in_order_other_values(bulk_from_zero: Any) -> None:
    class S(str):
        pass

    class Eq:
        def __eq__(self, other: object) -> bool:
            raise RuntimeError("compared")

        def __hash__(self) -> int:
            return 1

    nan = float("nan")
    for values in ([1, 1.0, True, "1"], [nan, nan, float("nan")], [S("a"), "a", S("a")], [(1,), (1,)], [], [None]):
        want = list(dict.fromkeys(values))
        got = core._distinct_in_order(values)  # type: ignore[arg-type]
        assert len(got) == len(want) and all(a is b for a, b in zip(got, want))
    one = Eq()
    assert core._distinct_in_order([one, one]) == [one]  # same object: never compared
    with pytest.raises(RuntimeError):
        core._distinct_in_order([one, Eq()])  # as dict.fromkeys
    with pytest.raises(TypeError):
        core._distinct_in_order([[1], [1]])  # unhashable, as dict.fromkeys
    with pytest.raises(TypeError):
        _native.distinct_objects(("a", "a"))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        _native.distinct_objects(None)  # type: ignore[arg-type]
    big = [str(i % 1000) for i in range(20000)]
    assert core._distinct_in_order(big) == list(dict.fromkeys(big))

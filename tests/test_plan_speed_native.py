"""The planner's C entry points of issue 5 (``csrc/planobj.c``): ``select_sources`` (spec §11.1
step 4 for placement sources plus the source packing) and ``project_executors`` (step 7).

Each is compared with the Python code it replaces (the oracle: ``core._members_exact`` and the
packing loop; ``core._project_executors_python``) on random placement pairs and on every
known-answer case, and fed hostile inputs (wrong types and lengths, huge and negative ints,
values out of range) that must raise or fall back (``None``), never crash or wrap."""

from __future__ import annotations

from array import array
from typing import Any, Callable, List, Optional, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import known_answers
from layout_model import Layout, build_placement
from test_planner_oracle import placement_pairs
from spec_helpers import field_state

from mooncake.reshard import _native
from mooncake.reshard.weight import PlacementExecutorPlan
from mooncake.reshard.weight._planner import core
from mooncake.reshard.weight.planner import plan_placement_transfer, plan_placement_transfer_to_local_target


def _q(values: List[int]) -> bytes:
    return array("q", values).tobytes()


def _unpack(data: bytes, code: str = "q") -> List[int]:
    out = array(code)
    out.frombytes(data)
    return list(out)


def _outcome(call: Callable[[], Any]) -> Any:
    try:
        return ("ok", call())
    except ValueError as exc:
        return ("error", str(exc))


def _oracle(args: Tuple[Any, ...]) -> Tuple[List[Any], List[int], List[int], List[int], List[int], List[int], List[int], List[Any]]:
    """What the Python path selects and packs from the inputs of ``_select_placed_native``."""
    fragments, tensor_index, _ndim, complete_ranks, cover_keys, signatures, dp_owners, complete = args
    replicas = len(complete_ranks)
    tensor_list = list(tensor_index)
    needed = {}
    for cover, key in enumerate(cover_keys):
        position, slot = divmod(key, replicas + 1)
        needed[(tensor_list[position], None if slot == replicas else complete_ranks[slot])] = cover
    members: List[List[Any]] = [[] for _ in needed]
    core._members_exact(members, fragments, False, needed, {k[0] for k in needed}, signatures, dp_owners, complete)
    objects: List[Any] = []
    tensor: List[int] = []
    offsets: List[int] = []
    shapes: List[int] = []
    nbytes: List[int] = []
    starts = [0]
    for cover_list in members:
        for fragment in cover_list:
            objects.append(fragment)
            tensor.append(tensor_index[fragment.tensor_id])
            offsets.extend(fragment.global_offset)
            shapes.extend(fragment.local_shape)
            nbytes.append(fragment.nbytes if 0 < fragment.nbytes < 1 << 64 else 0)
        starts.append(len(objects))
    ids = [f.placement_fragment_id for f in objects]
    return objects, tensor, offsets, shapes, nbytes, starts, list(range(len(objects))), ids


def _check_calls(calls: List[Tuple[Tuple[Any, ...], Any]]) -> int:
    checked = 0
    for args, result in calls:
        if result is None:
            continue
        objects, tensor, offsets, shapes, nbytes, starts, members, ids = result
        expected = _oracle(args)
        assert [id(f) for f in objects] == [id(f) for f in expected[0]]
        assert _unpack(tensor) == expected[1]
        assert _unpack(offsets) == expected[2]
        assert _unpack(shapes) == expected[3]
        assert _unpack(nbytes, "Q") == expected[4]
        assert _unpack(starts) == expected[5]
        assert _unpack(members) == expected[6]
        assert ids == expected[7]
        # Any inventory order: the minimum key wins, geometries in first-occurrence order.
        for order in (list(reversed(args[0])), sorted(args[0], key=lambda f: f.placement_fragment_id)):
            again = core._select_placed_native(order, *args[1:])
            oracle = _oracle((order, *args[1:]))
            assert again is not None
            assert [id(f) for f in again[0]] == [id(f) for f in oracle[0]]
            assert _unpack(again[5]) == oracle[5]
        checked += 1
    return checked


def _spy_plan(plan: Callable[[], Any]) -> Tuple[Any, List[Tuple[Tuple[Any, ...], Any]]]:
    calls: List[Tuple[Tuple[Any, ...], Any]] = []
    native = core._select_placed_native

    def spy(*args: Any) -> Any:
        result = native(*args)
        calls.append((args, result))
        return result

    core._select_placed_native = spy
    try:
        got = _outcome(plan)
    finally:
        core._select_placed_native = native
    return got, calls


def _python_plan(plan: Callable[[], Any]) -> Any:
    native = core._select_placed_native
    project = core.project_executors
    core._select_placed_native = lambda *args: None
    core.project_executors = core._project_executors_python
    try:
        return _outcome(plan)
    finally:
        core._select_placed_native = native
        core.project_executors = project


def _compare(plan: Callable[[], Any]) -> int:
    got, calls = _spy_plan(plan)
    assert got == _python_plan(plan)
    return _check_calls(calls)


@settings(max_examples=150, deadline=None)
@given(placement_pairs())
def test_native_selection_equals_the_exact_selection(pair: Tuple[Layout, Layout]) -> None:
    source = build_placement(pair[0])
    target = build_placement(pair[1])
    _compare(lambda: plan_placement_transfer(source, target))
    participant = target.parts[0].participant_id
    _compare(lambda: plan_placement_transfer_to_local_target(source, target, participant))


def test_native_selection_on_the_known_answer_cases() -> None:
    ran = 0
    for name in known_answers.placement_case_names():
        source, target = known_answers.source_placement(name), known_answers.target_placement(name)
        ran += _compare(lambda: plan_placement_transfer(source, target))
    assert ran > 0


# --- project_executors -------------------------------------------------------------------


def _executors_outcome(call: Callable[[], Any]) -> Any:
    try:
        return ("ok", [(type(e), dict(e.__dict__)) for e in call()])
    except ValueError as exc:
        return ("error", str(exc))


@settings(max_examples=100, deadline=None)
@given(placement_pairs(), st.data())
def test_native_projection_equals_the_python_projection(pair: Tuple[Layout, Layout], data: st.DataObject) -> None:
    placement = build_placement(pair[0])
    ids = [f.placement_fragment_id for f in placement.fragments]
    used = set(data.draw(st.lists(st.sampled_from(ids + ["unknown"]), max_size=len(ids) + 1)))
    participants: Optional[set[str]] = None
    if data.draw(st.booleans()):
        pids = [p.participant_id for p in placement.parts]
        participants = set(data.draw(st.lists(st.sampled_from(pids), max_size=len(pids))))
    got = _executors_outcome(lambda: core.project_executors(placement, used, "source", participants))
    expected = _executors_outcome(lambda: core._project_executors_python(placement, used, "source", participants))
    assert got == expected
    if got[0] == "ok":
        for executor in core.project_executors(placement, used, "source", participants):
            assert type(executor) is PlacementExecutorPlan
            assert executor == PlacementExecutorPlan(**executor.__dict__)  # constructor agrees


def test_native_projection_reports_the_first_duplicate_rank() -> None:
    name = known_answers.case_names()[0]
    placement = known_answers.target_placement(name)
    parts = placement.parts
    forged = object.__new__(type(placement))
    object.__setattr__(forged, "__dict__", dict(placement.__dict__))
    # Two parts with the same rank (a forged manifest): the first repeat is reported.
    object.__setattr__(forged, "parts", (*parts, parts[0]))
    used = {f.placement_fragment_id for f in placement.fragments}
    expected = _executors_outcome(lambda: core._project_executors_python(forged, used, "target"))
    assert expected[0] == "error" and expected[1].startswith("duplicate target placement executor rank: ")
    assert _executors_outcome(lambda: core.project_executors(forged, used, "target")) == expected


class _Rank:
    def __init__(self, dp: Any = 0, tp: Any = 0, pp: Any = 0, ep: Any = 0) -> None:
        self.dp, self.tp, self.pp, self.ep = dp, tp, pp, ep


class _Fragment:
    def __init__(self, fid: Any, offset: Any = (0,), shape: Any = (4,), nbytes: Any = 8, rank: Any = None,
                 tensor_id: Any = "w") -> None:
        self.placement_fragment_id = fid
        self.tensor_id = tensor_id
        self.global_offset = offset
        self.local_shape = shape
        self.nbytes = nbytes
        self.rank = rank if rank is not None else _Rank()


class _Part:
    def __init__(self, fragments: Any) -> None:
        self.participant_id = "p0"
        self.fragments = fragments
        self.rank = _Rank()


# --- select_sources: hostile inputs ---------------------------------------------------------


def _select(fragments: Any, **overrides: Any) -> Any:
    # One 1-D tensor "w", one complete replica (dp 0) choosing the owner () (no owner kinds):
    # every dp-0 fragment is eligible.
    args = dict(
        fragments=fragments,
        tensor_index={"w": 0},
        tensor_ndim=_q([1]),
        kinds=[()],
        dp_owners=[None],
        slots=[{"w": ()}],
        replica_dps=_q([0]),
        cover_keys=_q([0]),
    )
    args.update(overrides)
    return _native.select_sources(*args.values())


def test_select_sources_accepts_a_plain_case() -> None:
    a = _Fragment("b", rank=_Rank(tp=1))
    b = _Fragment("a", rank=_Rank(tp=1))
    c = _Fragment("c", rank=_Rank(tp=0))
    d = _Fragment("d", offset=(4,), rank=_Rank(dp=1))  # dp 1 is not a complete replica
    e = _Fragment("e", tensor_id="other")  # not a needed tensor
    result = _select([a, b, c, d, e])
    assert result is not None
    objects, tensor, offsets, shapes, nbytes, starts, members, ids = result
    assert objects == [c] and ids == ["c"]  # least (dp, pp, ep, tp) wins
    assert _unpack(tensor) == [0] and _unpack(offsets) == [0] and _unpack(shapes) == [4]
    assert _unpack(nbytes, "Q") == [8] and _unpack(starts) == [0, 1] and _unpack(members) == [0]
    # Equal rank keys: the least placement_fragment_id wins, the first on a tie.
    assert _select([a, b])[0] == [b]
    assert _select([b, a])[0] == [b]
    twin = _Fragment("b", rank=_Rank(tp=1))
    assert _select([twin, a])[0] == [twin]
    # Tuples work like lists; nothing needed: nothing selected.
    assert _select((a, b))[0] == [b]
    assert _select([e])[0] == []


@pytest.mark.parametrize(
    "fragment",
    [
        _Fragment("x", offset=(1 << 63,)),  # beyond int64
        _Fragment("x", shape=(-(1 << 70),)),
        _Fragment("x", offset=[0]),  # not a tuple
        _Fragment("x", offset=(0, 0)),  # rank count mismatch
        _Fragment("x", offset=(0.0,)),
        _Fragment("x", rank=_Rank(dp=1 << 64)),
        _Fragment("x", rank=_Rank(tp="0")),
        _Fragment("x", nbytes=8.0),
    ],
)
def test_select_sources_falls_back_on_unusual_values(fragment: Any) -> None:
    assert _select([fragment]) is None


def test_select_sources_packs_nbytes_outside_u64_as_zero() -> None:
    for value, packed in ((0, 0), (-5, 0), (1 << 64, 0), ((1 << 64) - 1, (1 << 64) - 1), (True, 1)):
        result = _select([_Fragment("x", nbytes=value)])
        assert _unpack(result[4], "Q") == [packed]


def test_select_sources_falls_back_on_non_str_ids_only_when_compared() -> None:
    assert _select([_Fragment(1)]) is not None
    assert _select([_Fragment(1), _Fragment(2)]) is None


def test_select_sources_rejects_hostile_tables() -> None:
    f = [_Fragment("x")]
    with pytest.raises(TypeError):
        _select(5)
    with pytest.raises(TypeError):
        _select(f, tensor_index=[("w", 0)])
    with pytest.raises(TypeError):
        _select(f, kinds=((),))
    with pytest.raises(TypeError):
        _select(f, dp_owners=(None,))
    with pytest.raises(TypeError):
        _select(f, slots=({"w": ()},))
    with pytest.raises(TypeError):
        _select(f, tensor_ndim=[1])
    with pytest.raises(ValueError):
        _select(f, tensor_ndim=b"\x01\x00")  # not a multiple of 8
    with pytest.raises(ValueError):
        _select(f, kinds=[(), ()])  # wrong length
    with pytest.raises(ValueError):
        _select(f, dp_owners=[])
    with pytest.raises(ValueError):
        _select(f, slots=[])
    with pytest.raises(ValueError):
        _select(f, tensor_ndim=_q([-1]))
    with pytest.raises(ValueError):
        _select(f, tensor_ndim=_q([1 << 40]))
    with pytest.raises(ValueError):
        _select(f, replica_dps=_q([1, 0]), slots=[{}, {}])  # not increasing
    with pytest.raises(ValueError):
        _select(f, cover_keys=_q([2]))  # out of range
    with pytest.raises(ValueError):
        _select(f, cover_keys=_q([-1]))
    with pytest.raises(ValueError):
        _select(f, cover_keys=_q([0, 0]))  # duplicate
    with pytest.raises(AttributeError):
        _select([object()])
    # Values this path does not take: the caller selects exactly in Python.
    assert _select(f, tensor_index={"w": "0"}) is None
    assert _select(f, tensor_index={"w": 1}) is None
    assert _select(f, tensor_index={"w": -1}) is None
    assert _select(f, tensor_index={"w": 1 << 80}) is None
    assert _select(f, tensor_index={"w": 0, "v": 0}) is None  # two tensors on one index
    assert _select(f, kinds=[("zz",)], slots=[{"w": (("zz", 0),)}]) is None
    assert _select(f, kinds=[("tp",) * 5]) is None
    assert _select(f, kinds=[["tp"]]) is None
    assert _select(f, kinds=[("tp",)], slots=[{"w": (("tp", 1 << 70),)}]) is None
    assert _select(f, kinds=[("tp",)], slots=[{"w": (("pp", 0),)}]) is None
    assert _select(f, kinds=[("tp",)], slots=[{"w": [("tp", 0)]}]) is None
    assert _select(f, kinds=[("tp",)], slots=[{"w": (("tp", "0"),)}]) is None
    assert _select(f, kinds=[("tp",)], slots=[{"w": (("tp", 0, 1),)}]) is None
    assert _select(f, slots=[5]) is None
    assert _select(f, kinds=[("dp",)], dp_owners=[(("dp", -(1 << 64)),)], cover_keys=_q([1])) is None


def test_select_sources_owner_tables_decide_eligibility() -> None:
    # Owner kinds (tp,): the replica of dp 0 chose tp=1.
    a = _Fragment("a", rank=_Rank(tp=0))
    b = _Fragment("b", rank=_Rank(tp=1))
    assert _select([a, b], kinds=[("tp",)], slots=[{"w": (("tp", 1),)}])[0] == [b]
    # No chosen owner for the tensor: nothing eligible.
    assert _select([a, b], slots=[{}])[0] == []
    # DP-owned tensor: slot R = 1, its owner dp=3.
    c = _Fragment("c", rank=_Rank(dp=3))
    routed = _select([a, c], kinds=[("dp",)], dp_owners=[(("dp", 3),)], cover_keys=_q([1]))
    assert routed[0] == [c]
    # A cover nobody needs: nothing selected.
    assert _select([a, b], cover_keys=_q([]))[0] == []
    assert _unpack(_select([a, b], cover_keys=_q([]))[5]) == [0]
    # Owner values compare as ints (bool True is 1).
    assert _select([a, b], kinds=[("tp",)], slots=[{"w": (("tp", True),)}])[0] == [b]


def test_project_executors_rejects_hostile_inputs() -> None:
    name = known_answers.case_names()[0]
    placement = known_answers.target_placement(name)
    parts = placement.parts
    with pytest.raises(TypeError):
        _native.project_executors(int, "p", parts, set(), None)  # not a heap type
    with pytest.raises(TypeError):
        _native.project_executors(PlacementExecutorPlan, "p", parts, ("x",), None)  # not a set or a list
    # parts not an exact tuple or list: not decided in C (its __iter__ would run inside the pass,
    # AUDIT5 F4); the Python form raises
    assert _native.project_executors(PlacementExecutorPlan, "p", 5, set(), None) is None
    with pytest.raises(TypeError):
        core._project_executors_python(type("P", (), {"parts": 5, "placement_id": "p"})(), set(), "target")  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        _native.project_executors(PlacementExecutorPlan, "p", [object()], set(), None)
    # participants not an exact set of exact strs: not decided in C (a container's dunders would
    # run inside the pass, AUDIT5 F4); the Python form raises
    assert _native.project_executors(PlacementExecutorPlan, "p", parts, set(), 5) is None
    with pytest.raises(TypeError):
        core._project_executors_python(placement, set(), "target", 5)  # type: ignore[arg-type]
    # an unhashable fragment id (not an exact str): not decided in C; the Python form raises
    # against the used set
    odd_parts = [_Part([_Fragment([1])])]
    assert _native.project_executors(PlacementExecutorPlan, "p", odd_parts, {"x"}, None) is None
    with pytest.raises(TypeError):
        core._project_executors_python(type("P", (), {"parts": odd_parts, "placement_id": "p"})(), {"x"}, "target")  # type: ignore[arg-type]
    assert _native.project_executors(PlacementExecutorPlan, "p", parts, set(), None) == []
    assert _native.project_executors(PlacementExecutorPlan, "p", (), {"x"}, None) == []


def test_default_planning_limits_equal_the_constructor() -> None:
    from mooncake.reshard.weight._planner import api
    from mooncake.reshard.weight._planner.contracts import PlanningLimits

    first = api._limits(None)
    second = api._limits(None)
    assert type(first) is PlanningLimits and first == PlanningLimits() and first.__dict__ == PlanningLimits().__dict__
    assert first is not second  # never shared between plans (a plan's limits can be forged)
    object.__setattr__(first, "max_transfer_regions", 1)
    assert api._limits(None) == PlanningLimits()


# --- owner_minimums ----------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(placement_pairs(), st.sampled_from([(), ("tp",), ("pp", "ep"), ("dp", "tp", "pp", "ep"), ("ep", "tp")]))
def test_owner_minimums_equal_the_python_form(pair: Tuple[Layout, Layout], kinds: Tuple[str, ...]) -> None:
    from mooncake.reshard.weight._planner import ownership

    for placement in (build_placement(pair[0]), build_placement(pair[1])):
        fragments = placement.fragments
        assert _native.owner_minimums(fragments, kinds) == ownership._owner_minimums(fragments, kinds)
        assert _native.owner_minimums(list(reversed(fragments)), kinds) == ownership._owner_minimums(fragments, kinds)


def test_owner_minimums_hostile_inputs() -> None:
    from mooncake.reshard.weight._planner import ownership

    a = _Fragment("a", rank=_Rank(dp=0, tp=1 << 80))
    b = _Fragment("b", rank=_Rank(dp=0, tp=-(1 << 90)))
    assert _native.owner_minimums([a, b], ("tp",)) == {("w", 0): (-(1 << 90),)}  # big ints compare exactly
    assert _native.owner_minimums((), ("tp",)) == {}
    with pytest.raises(TypeError):
        _native.owner_minimums(5, ("tp",))
    with pytest.raises(TypeError):
        _native.owner_minimums([a], ["tp"])  # kinds must be a tuple
    with pytest.raises(TypeError):
        _native.owner_minimums([a], (5,))  # attribute names are str
    with pytest.raises(AttributeError):
        _native.owner_minimums([a], ("zz",))
    with pytest.raises(AttributeError):
        _native.owner_minimums([object()], ("tp",))
    # values not of their exact kinds (compared or hashed by user code): not decided in C (None),
    # the Python form decides (AUDIT5 F4)
    unorderable = [_Fragment("c", rank=_Rank(tp="x")), _Fragment("d", rank=_Rank(tp=1))]
    assert _native.owner_minimums(unorderable, ("tp",)) is None
    with pytest.raises(TypeError):
        ownership._owner_minimums(unorderable, ("tp",))
    unhashable = [_Fragment("c", tensor_id=[1])]
    assert _native.owner_minimums(unhashable, ("tp",)) is None
    with pytest.raises(TypeError):
        ownership._owner_minimums(unhashable, ("tp",))


# --- fragment_columns ----------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(placement_pairs(), st.randoms(use_true_random=False))
def test_fragment_columns_equal_the_python_reads(pair: Tuple[Layout, Layout], rnd: Any) -> None:
    for placement in (build_placement(pair[0]), build_placement(pair[1])):
        fragments = list(placement.fragments)
        for order in (fragments, list(reversed(fragments)), rnd.sample(fragments, len(fragments))):
            ids, tids, dps, in_order = _native.fragment_columns(order)
            assert ids == [f.placement_fragment_id for f in order]
            assert tids == [f.tensor_id for f in order]
            assert dps == [f.rank.dp for f in order]
            assert in_order == (1 if ids == sorted(ids) else 0)
            assert _native.fragment_columns(tuple(order)) == (ids, tids, dps, in_order)


def test_fragment_columns_hostile_inputs() -> None:
    assert _native.fragment_columns([]) == ([], [], [], 1)
    a, b = _Fragment("a"), _Fragment("b")
    assert _native.fragment_columns([a, b])[3] == 1
    assert _native.fragment_columns([b, a])[3] == 0
    assert _native.fragment_columns([a, a])[3] == 1  # equal ids do not decrease
    assert _native.fragment_columns([_Fragment(2), _Fragment(1)])[3] == -1  # not str: caller decides
    assert _native.fragment_columns([a, _Fragment(1)])[3] == -1
    big = _Fragment("x", rank=_Rank(dp=1 << 80))
    assert _native.fragment_columns([big])[2] == [1 << 80]  # values pass through unchanged
    with pytest.raises(TypeError):
        _native.fragment_columns(5)
    with pytest.raises(TypeError):
        _native.fragment_columns(iter([a]))
    with pytest.raises(AttributeError):
        _native.fragment_columns([object()])
    with pytest.raises(AttributeError):
        _native.fragment_columns([_Fragment("x", rank=object())])


# --- plan_regions ---------------------------------------------------------------------------


def _two_step(region_type: Any, sources: List[Any], targets: List[Any], tensor_ids: Any = None, **kernel: Any) -> Any:
    """The oracle of ``plan_region_objects``: the records, then ``build_regions`` (which reads
    the targets' tensor ids itself)."""
    if tensor_ids is not None:
        assert tensor_ids == [t.tensor_id for t in targets]
    from mooncake.reshard.weight._planner import geometry

    records = geometry.plan_overlap_regions(**kernel)
    # (the planner passes a placement's fragment tuple as it is; build_regions takes lists)
    regions = _native.build_regions(region_type, records, list(sources), list(targets))
    return regions, sorted({r[0] for r in records}), sorted({r[1] for r in records})


def _plan_with(builder: Any, plan: Callable[[], Any]) -> Any:
    saved = core.plan_region_objects
    calls: List[Any] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        out = builder(*args, **kwargs)
        calls.append(out)
        return out

    core.plan_region_objects = spy
    try:
        return _outcome(plan), calls
    finally:
        core.plan_region_objects = saved


@settings(max_examples=100, deadline=None)
@given(placement_pairs(), st.integers(1, 40))
def test_plan_regions_equals_records_then_build_regions(pair: Tuple[Layout, Layout], limit: int) -> None:
    from mooncake.reshard.weight import PlanningLimits

    source = build_placement(pair[0])
    target = build_placement(pair[1])
    for limits in (None, PlanningLimits(max_transfer_regions=limit), PlanningLimits(max_total_lowered_segments=limit)):
        got, native_calls = _plan_with(core.plan_region_objects, lambda: plan_placement_transfer(source, target, planning_limits=limits))
        expected, oracle_calls = _plan_with(_two_step, lambda: plan_placement_transfer(source, target, planning_limits=limits))
        assert got == expected
        assert [(tuple(map(dict, map(field_state, c[0]))), list(c[1]), list(c[2])) for c in native_calls] == [
            (tuple(map(dict, map(field_state, c[0]))), c[1], c[2]) for c in oracle_calls
        ]
        if got[0] == "ok":
            assert all(type(op) is type(got[1].operations[0]) for op in got[1].operations)


def test_plan_regions_rejects_hostile_inputs() -> None:
    from mooncake.reshard.weight._planner.contracts import TransferRegion

    name = known_answers.case_names()[0]
    source = known_answers.source_placement(name)
    target = known_answers.target_placement(name)
    captured: List[Any] = []
    saved = core.plan_region_objects

    def spy(region_type: Any, sources: List[Any], targets: List[Any], tensor_ids: Any = None, **kernel: Any) -> Any:
        from mooncake.reshard.weight._planner import geometry

        captured.append((sources, targets, geometry._kernel_arguments(*[kernel[k] for k in (
            "tensor_ndim", "tensor_itemsize", "source", "source_order", "cover_start", "cover_members", "target",
            "target_cover", "nprocess", "max_transfer_regions", "max_segments_per_region",
            "max_total_lowered_segments", "target_packed", "source_packed", "tensor_ndim_packed")])))
        return saved(region_type, sources, targets, tensor_ids, **kernel)

    core.plan_region_objects = spy
    try:
        plan = plan_placement_transfer(source, target)
    finally:
        core.plan_region_objects = saved
    sources, targets, args = captured[0]
    regions, used_s, used_t = _native.plan_regions(TransferRegion, sources, targets, None, *args)
    assert regions == plan.operations
    tids = [t.tensor_id for t in targets]
    assert _native.plan_regions(TransferRegion, sources, targets, tids, *args) == (regions, used_s, used_t)
    with pytest.raises(ValueError):
        _native.plan_regions(TransferRegion, sources, targets, tids[:-1], *args)  # not parallel to targets
    with pytest.raises(TypeError):
        _native.plan_regions(TransferRegion, sources, targets, tuple(tids), *args)
    assert list(used_s) == sorted(set(used_s)) and list(used_t) == sorted(set(used_t))
    with pytest.raises(TypeError):
        _native.plan_regions(TransferRegion, sources, targets, None, *args[:-1])
    with pytest.raises(TypeError):
        _native.plan_regions(int, sources, targets, None, *args)
    # exact tuples are indexed as they are (no private copy: they cannot change)
    assert _native.plan_regions(TransferRegion, tuple(sources), tuple(targets), None, *args) == (regions, used_s, used_t)

    class Tuple(tuple):  # type: ignore[type-arg]
        pass

    with pytest.raises(TypeError):
        _native.plan_regions(TransferRegion, Tuple(sources), targets, None, *args)
    with pytest.raises(TypeError):
        _native.plan_regions(TransferRegion, sources, iter(targets), None, *args)
    with pytest.raises(ValueError):
        _native.plan_regions(TransferRegion, sources[:-1], targets, None, *args)  # not one per packed source
    with pytest.raises(ValueError):
        _native.plan_regions(TransferRegion, sources, [], None, *args)  # fewer targets than processed
    bad = list(args)
    bad[-3] = 1 << 70  # a limit beyond 64 bits saturates (above every count), never wraps
    assert _native.plan_regions(TransferRegion, sources, targets, None, *bad)[0] == plan.operations
    bad = list(args)
    bad[-3] = -1
    with pytest.raises(ValueError):
        _native.plan_regions(TransferRegion, sources, targets, None, *bad)
    bad = list(args)
    bad[-4] = len(targets) + 1  # nprocess beyond the packed targets
    with pytest.raises(ValueError):
        _native.plan_regions(TransferRegion, sources, targets, None, *bad)
    bad = list(args)
    bad[0] = b"\x00" * 7  # not a multiple of 8 bytes
    with pytest.raises(ValueError):
        _native.plan_regions(TransferRegion, sources, targets, None, *bad)
    bad = list(args)
    bad[-3] = 1  # max_transfer_regions 1: the kernel's error tuple passes through
    assert _native.plan_regions(TransferRegion, sources, targets, None, *bad)[0] == 2


# --- owner_signatures -----------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(placement_pairs())
def test_owner_signatures_equal_the_python_form(pair: Tuple[Layout, Layout]) -> None:
    from mooncake.reshard.weight._planner import ownership
    from mooncake.reshard.weight.types import OwnershipAxis

    for placement in (build_placement(pair[0]), build_placement(pair[1])):
        tensors = {t.tensor_id: t for t in placement.tensors}
        native = _native.owner_signatures(tensors, OwnershipAxis)
        expected = ownership._tensor_signatures(tensors)
        assert native == expected and list(native) == list(expected)
        assert ownership.tensor_signatures(tensors) == expected


def test_owner_signatures_hostile_inputs() -> None:
    from mooncake.reshard.weight.types import OwnershipAxis, ReplicatedAxis

    class _T:
        def __init__(self, axes: Any) -> None:
            self.parallel_axes = axes

    own_dp, own_ep, rep = OwnershipAxis("dp"), OwnershipAxis("ep"), ReplicatedAxis("tp")
    assert _native.owner_signatures({"a": _T((own_ep, rep, own_dp))}, OwnershipAxis) == {"a": (("ep", "dp"), True)}
    assert _native.owner_signatures({"a": _T(())}, OwnershipAxis) == {"a": ((), False)}
    assert _native.owner_signatures({}, OwnershipAxis) == {}
    assert _native.owner_signatures({"a": _T([own_dp])}, OwnershipAxis) is None  # not a tuple
    with pytest.raises(TypeError):
        _native.owner_signatures([("a", _T(()))], OwnershipAxis)
    with pytest.raises(TypeError):
        _native.owner_signatures({"a": _T((own_dp,))}, 5)  # not a type
    with pytest.raises(AttributeError):
        _native.owner_signatures({"a": object()}, OwnershipAxis)
    with pytest.raises(AttributeError):
        _native.owner_signatures({"a": _T((object(),))}, object)  # an "owner" without kind


# --- tensor_columns -------------------------------------------------------------------------


def _tensor_columns_oracle(ids: List[str], sources: Any, targets: Any, signatures: Any) -> Any:
    ndims: List[int] = []
    itemsizes: List[Any] = []
    routed: List[bool] = []
    for i, tid in enumerate(ids):
        target = targets[tid]
        source = sources.get(tid)
        if source is None or core._compatibility_error(source, target) is not None:
            return ndims, itemsizes, routed, i
        ndims.append(len(target.global_shape))
        itemsizes.append(target.itemsize)
        routed.append(bool(signatures[tid][1]))
    return ndims, itemsizes, routed, len(ids)


@settings(max_examples=80, deadline=None)
@given(placement_pairs(), st.data())
def test_tensor_columns_equal_the_python_loop(pair: Tuple[Layout, Layout], data: st.DataObject) -> None:
    import dataclasses

    from mooncake.reshard.weight._planner import ownership

    source = build_placement(pair[0])
    target = build_placement(pair[1])
    sources = {t.tensor_id: t for t in source.tensors}
    targets = {t.tensor_id: t for t in target.tensors}
    signatures = ownership.tensor_signatures(sources)
    ids = list(targets)
    assert _native.tensor_columns(ids, sources, targets, signatures) == _tensor_columns_oracle(
        ids, sources, targets, signatures
    )
    # A missing or differing source descriptor stops the pass at the first such tensor.
    victim = data.draw(st.sampled_from(ids))
    field = data.draw(st.sampled_from(["layout_fingerprint", "dtype", "itemsize", "layer_id", "expert_id", None]))
    broken = dict(sources)
    if field is None:
        del broken[victim]
    else:
        value = {"layout_fingerprint": "other", "dtype": "other", "itemsize": 99, "layer_id": 99, "expert_id": 99}[field]
        forged = object.__new__(type(sources[victim]))
        object.__setattr__(forged, "__dict__", {**sources[victim].__dict__, field: value})
        broken[victim] = forged
    got = _native.tensor_columns(ids, broken, targets, signatures)
    assert got == _tensor_columns_oracle(ids, broken, targets, signatures)
    assert got[3] == ids.index(victim)
    del dataclasses


def test_tensor_columns_hostile_inputs() -> None:
    class _D:
        def __init__(self, **fields: Any) -> None:
            base = dict(layout_fingerprint="l", global_shape=(2, 3), dtype="f", itemsize=2, layer_id=None, expert_id=None)
            base.update(fields)
            self.__dict__.update(base)

    sig = {"a": ((), False), "b": (("dp",), True)}
    a, b = _D(), _D(itemsize=1 << 80)
    assert _native.tensor_columns(["a", "b"], {"a": a, "b": b}, {"a": a, "b": b}, sig) == (
        [2, 2], [2, 1 << 80], [False, True], 2)  # values pass through unchanged
    assert _native.tensor_columns([], {}, {}, {}) == ([], [], [], 0)
    assert _native.tensor_columns(["a"], {}, {"a": a}, sig)[3] == 0  # no source descriptor
    assert _native.tensor_columns(["a"], {"a": _D(global_shape=(3, 2))}, {"a": a}, sig)[3] == 0
    with pytest.raises(KeyError):
        _native.tensor_columns(["a"], {"a": a}, {}, sig)  # target_tensors[id] first, as the loop
    with pytest.raises(KeyError):
        _native.tensor_columns(["a"], {}, {}, sig)
    with pytest.raises(KeyError):
        _native.tensor_columns(["a"], {"a": a}, {"a": a}, {})
    with pytest.raises(TypeError):
        _native.tensor_columns(("a",), {"a": a}, {"a": a}, sig)
    odd = _D(global_shape=5)
    # a shape that is not an exact tuple stops the pass (its len() is the caller's loop's, which
    # raises TypeError for an int)
    assert _native.tensor_columns(["a"], {"a": odd}, {"a": odd}, sig) == ([], [], [], 0)
    with pytest.raises(AttributeError):
        _native.tensor_columns(["a"], {"a": object()}, {"a": a}, sig)
    with pytest.raises(TypeError):
        _native.tensor_columns(["a"], {"a": a}, {"a": a}, {"a": 5})  # signature not a sequence


# --- pack_targets with the caller's tensor ids and DP ranks -------------------------------------


@settings(max_examples=60, deadline=None)
@given(placement_pairs(), st.integers(0, 3), st.booleans())
def test_pack_targets_with_given_columns_equals_reading_them(
    pair: Tuple[Layout, Layout], replicas: int, routed: bool
) -> None:
    target = build_placement(pair[1])
    fragments = list(target.fragments)
    tensor_index = {t.tensor_id: i for i, t in enumerate(target.tensors)}
    ndim = _q([len(t.global_shape) for t in target.tensors])
    routes = _q([1 if routed else 0] * len(target.tensors))
    tids = [f.tensor_id for f in fragments]
    dps = [f.rank.dp for f in fragments]
    expected = _native.pack_targets(fragments, tensor_index, ndim, routes, replicas)
    assert _native.pack_targets(fragments, tensor_index, ndim, routes, replicas, tids, dps) == expected
    assert _native.pack_targets(fragments, tensor_index, ndim, routes, replicas, tids, None) == expected
    assert _native.pack_targets(fragments, tensor_index, ndim, routes, replicas, None, dps) == expected
    # the placement's own tuple, as the planner passes it, packs the same
    assert _native.pack_targets(tuple(fragments), tensor_index, ndim, routes, replicas, tids, dps) == expected
    assert _native.pack_targets(tuple(fragments), tensor_index, ndim, routes, replicas) == expected


def test_pack_targets_given_columns_hostile_inputs() -> None:
    f = [_Fragment("x")]
    args = (f, {"w": 0}, _q([1]), _q([0]), 1)
    assert _native.pack_targets(*args, ["w"], [0]) is not None
    assert _native.pack_targets(*args, ["v"], [0]) is None  # an unknown tensor: not this path
    assert _native.pack_targets(*args, ["w"], [1 << 70]) is None  # DP rank beyond int64
    assert _native.pack_targets(*args, ["w"], [-1]) is None
    assert _native.pack_targets(*args, ["w"], ["0"]) is None
    assert _native.pack_targets(f, {"w": 1 << 80}, _q([1]), _q([0]), 1) is None  # index beyond int64
    with pytest.raises(IndexError):
        _native.pack_targets(*args, [], [0])  # shorter than the fragments
    with pytest.raises(IndexError):
        _native.pack_targets(*args, ["w"], [])
    with pytest.raises(TypeError):
        _native.pack_targets(*args, ("w",), [0])
    with pytest.raises(TypeError):
        _native.pack_targets(*args, ["w"], (0,))
    with pytest.raises(TypeError):
        _native.pack_targets(*args, {"w"}, None)

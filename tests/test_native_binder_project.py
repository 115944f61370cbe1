"""``_native.project_attested``: the attested-part loop of binding's executor projection (spec
§12.3, binding step 11) in one C call.

It may only return the very executors the Python loop returns, or ``None`` (the loop then runs
and raises the first failure). Tested against the Python loop as the oracle (same executors, in
the same order, or the same failure) over generated placements with single- and multi-worker
bindings and random selections, forged parts and selections, and hostile arguments."""

from __future__ import annotations

import dataclasses
from typing import Any, List, Optional, Tuple

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from layout_model import Layout, build_placement, build_runtime_bindings
from test_planner_oracle import placement_pairs

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank, RuntimeBindingFragment, WeightRuntimeBindingManifest
from mooncake.reshard.weight._planner import binding as binding_module
from mooncake.reshard.weight._planner.attestation import RuntimeBindingAttestation, RuntimeBindingEvidence
from mooncake.reshard.weight._planner.binding import _bind_side, _build_executor_plans_with
from mooncake.reshard.weight._planner.bound_contracts import ExecutorTransferPlan, RuntimeFragmentSnapshot
from mooncake.reshard.weight._planner.bound_validation import _attestation_values

CLASSES = (
    ExecutorTransferPlan,
    RuntimeFragmentSnapshot,
    RuntimeBindingAttestation,
    RuntimeBindingEvidence,
    RuntimeBindingFragment,
    ParallelRank,
)


def split_workers(bindings: Tuple[Any, ...], every: int) -> Tuple[Any, ...]:
    """The bindings with every ``every``-th fragment of a binding on a second worker."""
    out = []
    for binding in bindings:
        fragments = tuple(
            dataclasses.replace(fragment, worker_id=fragment.worker_id + "-b") if i % every == every - 1 else fragment
            for i, fragment in enumerate(binding.fragments)
        )
        out.append(dataclasses.replace(binding, fragments=fragments))
    return tuple(out)


def project(placement: Any, kept: List[Any], attestations: Any, selected: Any) -> Optional[Tuple[Any, ...]]:
    by_key = {(b.placement_id, b.participant_id): b for b in kept}
    result: Optional[Tuple[Any, ...]] = _native.project_attested(
        *CLASSES,
        _attestation_values,
        placement,
        placement.parts,
        placement._part_index(),
        by_key,
        attestations,
        placement.placement_id,
        placement.digest,
        selected,
    )
    return result


def python_loop(placement: Any, kept: List[Any], attestations: Any, selected: Any) -> Any:
    """The Python loop alone (the C call switched off): the oracle. Returns the executors or
    the failure message."""
    original = _native.project_attested
    _native.project_attested = lambda *args: None  # type: ignore[attr-defined]
    try:
        return _build_executor_plans_with((placement,), kept, "target", selected, attestations)
    except ValueError as exc:
        return str(exc)
    finally:
        _native.project_attested = original  # type: ignore[attr-defined]


def draw_selection(data: st.DataObject, choice: str, ids: List[str]) -> Any:
    """A selection of the runtime fragment ids ``ids`` (sorted) of the kind ``choice``."""
    if choice == "none":
        return None
    if choice == "all":
        return frozenset(ids)
    if choice == "subset":
        return frozenset(data.draw(st.lists(st.sampled_from(ids), unique=True)))
    if choice == "extra":
        return frozenset(ids) | {"not-a-runtime-fragment"}
    if choice == "list":
        return ids  # not a frozenset: the C call declines
    raise ValueError(choice)


def with_c(placement: Any, kept: List[Any], attestations: Any, selected: Any) -> Any:
    try:
        return _build_executor_plans_with((placement,), kept, "target", selected, attestations)
    except ValueError as exc:
        return str(exc)


def _side(pair: Tuple[Layout, Layout], every: int) -> Tuple[Any, List[Any], Any]:
    placement = build_placement(pair[1])
    bindings = build_runtime_bindings(placement)
    assume(bindings)
    if every:
        bindings = split_workers(bindings, every)
    required = {b.participant_id for b in bindings}
    kept, attestations = _bind_side("target", placement, bindings, required)
    return placement, kept, attestations


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(placement_pairs(), st.sampled_from([0, 0, 2, 3]), st.data())
def test_same_executors_as_the_python_loop(pair: Tuple[Layout, Layout], every: int, data: st.DataObject) -> None:
    placement, kept, attestations = _side(pair, every)
    ids = sorted(f.fragment_id for b in kept for f in b.fragments)
    choice = data.draw(st.sampled_from(["none", "all", "subset", "extra", "list"]))
    selected = draw_selection(data, choice, ids)
    expected = python_loop(placement, kept, attestations, selected)
    direct = project(placement, kept, attestations, selected)
    if direct is not None:
        assert isinstance(expected, tuple) and direct == expected
        assert all(a is b for a, b in zip(direct, expected))  # the very cached executors
    assert with_c(placement, kept, attestations, selected) == expected
    if every == 0 and choice in ("none", "all"):
        assert direct is not None  # the common case is decided in C


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(placement_pairs(), st.integers(0, 1000), st.sampled_from(["rank", "rank-object", "worker", "attestation"]))
def test_forged_inputs_fail_first_as_the_python_loop(pair: Tuple[Layout, Layout], index: int, forgery: str) -> None:
    placement, kept, attestations = _side(pair, 0)
    parts = [p for p in placement.parts if p.fragments]
    assume(len(parts) >= 2)
    a, b = parts[index % len(parts)], parts[(index + 1) % len(parts)]
    if forgery == "rank":
        # Two parts with one rank: with one worker name, a duplicate executor.
        object.__setattr__(a, "rank", b.rank)
    elif forgery == "rank-object":
        object.__setattr__(a, "rank", dataclasses.replace(a.rank))  # equal, but not the executor's
    elif forgery == "worker":
        key = (placement.placement_id, a.participant_id)
        attestations[key] = attestations[(placement.placement_id, b.participant_id)]
    else:
        del attestations[(placement.placement_id, a.participant_id)]
    expected = python_loop(placement, kept, attestations, None)
    assert with_c(placement, kept, attestations, None) == expected


# ---------------------------------------------------------------------------------------
# Hostile arguments


@pytest.fixture(scope="module")
def side() -> Tuple[Any, List[Any], Any]:
    from layout_model import TensorSpec
    from planner_helpers import tp_placement

    placement = tp_placement("dst", TensorSpec("w", (8, 4)), 4, 0)
    bindings = build_runtime_bindings(placement)
    kept, attestations = _bind_side("target", placement, bindings, {b.participant_id for b in bindings})
    return placement, kept, attestations


def _args(side: Tuple[Any, List[Any], Any], **replace: Any) -> List[Any]:
    placement, kept, attestations = side
    values = {
        "values_of": _attestation_values,
        "placement": placement,
        "parts": placement.parts,
        "part_index": placement._part_index(),
        "by_key": {(b.placement_id, b.participant_id): b for b in kept},
        "attestations": attestations,
        "placement_id": placement.placement_id,
        "digest": placement.digest,
        "selected": None,
    }
    values.update(replace)
    return [*CLASSES, *values.values()]


def test_accepts_and_matches(side: Tuple[Any, List[Any], Any]) -> None:
    result = _native.project_attested(*_args(side))
    assert result is not None and result == python_loop(*side, None)


def test_wrong_arguments_raise_type_error(side: Tuple[Any, List[Any], Any]) -> None:
    args = _args(side)
    with pytest.raises(TypeError):
        _native.project_attested(*args[:-1])
    with pytest.raises(TypeError):
        _native.project_attested(*args, None, None, None)  # the two optional arguments, then one more
    for carried in ("carrier", 1, object()):  # not the carrier attest_many returns
        with pytest.raises((TypeError, ValueError)):
            _native.project_attested(*args, None, carried)
    with pytest.raises(TypeError):
        _native.project_attested(*args, int)  # the optional class given, not a heap type
    for k in range(len(CLASSES)):
        for bad in (None, "cls", int):  # int: not a heap type
            broken = list(args)
            broken[k] = bad
            with pytest.raises(TypeError):
                _native.project_attested(*broken)
    with pytest.raises(TypeError):
        _native.project_attested(*_args(side, values_of=None))


@pytest.mark.parametrize(
    "name", ["parts", "part_index", "by_key", "attestations", "placement_id", "selected"]
)
@pytest.mark.parametrize("value", [None, [], "x", 1 << 80, set()])
def test_wrong_containers_decline(side: Tuple[Any, List[Any], Any], name: str, value: Any) -> None:
    if name == "selected" and value is None:
        return  # None is the no-selection value
    if name == "placement_id" and value == "x":
        # a str: no binding is keyed by it, so nothing is projected
        assert _native.project_attested(*_args(side, **{name: value})) == ()
        return
    assert _native.project_attested(*_args(side, **{name: value})) is None


def test_other_hostile_values(side: Tuple[Any, List[Any], Any]) -> None:
    placement = side[0]
    # another placement object, a foreign part index, a values function returning junk
    assert _native.project_attested(*_args(side, placement=object())) is None
    assert _native.project_attested(*_args(side, part_index={})) is None
    assert _native.project_attested(*_args(side, values_of=lambda attestation: [])) is None
    with pytest.raises(ZeroDivisionError):
        _native.project_attested(*_args(side, values_of=lambda attestation: 1 // 0))
    # no binding at all: nothing projected, nothing selected
    assert _native.project_attested(*_args(side, by_key={})) == ()
    assert _native.project_attested(*_args(side, by_key={}, selected=frozenset({"x"}))) is None
    # bindings of parts without their attestation: validated in Python
    assert _native.project_attested(*_args(side, attestations={})) is None
    assert isinstance(placement.parts, tuple)


def test_hostile_ranks_decline(side: Tuple[Any, List[Any], Any]) -> None:
    placement, kept, attestations = side
    fresh = build_runtime_bindings(placement)
    kept2, attestations2 = _bind_side("target", placement, fresh, {b.participant_id for b in fresh})
    part = next(p for p in placement.parts if p.fragments)
    original = part.rank
    try:
        for dp in (1 << 63, 1 << 80):
            rank = ParallelRank()
            object.__setattr__(rank, "dp", dp)
            object.__setattr__(part, "rank", rank)
            assert _native.project_attested(*_args((placement, kept2, attestations2))) is None
    finally:
        object.__setattr__(part, "rank", original)
    assert isinstance(WeightRuntimeBindingManifest, type)


# ---------------------------------------------------------------------------------------
# _build_executor_plans (no attestations given): the fused attestation, then the C projection


def projections(placement: Any, bindings: Any, selected: Any, fused: bool) -> Any:
    saved = (_native.attest_many, _native.project_attested)
    if not fused:
        _native.attest_many = _native.project_attested = lambda *args: None  # type: ignore[attr-defined]
    try:
        return binding_module._build_executor_plans((placement,), bindings, "target", selected_fragment_ids=selected)
    except ValueError as exc:
        return str(exc)
    finally:
        _native.attest_many, _native.project_attested = saved  # type: ignore[attr-defined]


PROJECTION_FORGERIES = ["none", "digest", "nbytes", "other-placement", "unknown-participant", "same-objects"]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(
    placement_pairs(),
    st.sampled_from([0, 0, 2]),
    st.sampled_from(PROJECTION_FORGERIES),
    st.integers(0, 1000),
    st.sampled_from(["none", "all", "half"]),
)
def test_projections_without_attestations_match_the_python_loop(
    pair: Tuple[Layout, Layout], every: int, forgery: str, index: int, choice: str
) -> None:
    placement = build_placement(pair[1])
    results = []
    for fused in (False, True):
        bindings = build_runtime_bindings(placement)  # fresh objects per run
        assume(bindings)
        if every:
            bindings = split_workers(bindings, every)
        bindings = list(bindings)
        k = index % len(bindings)
        if forgery == "digest":
            object.__setattr__(bindings[k], "placement_digest", "0" * 64)
        elif forgery == "nbytes":
            fragment = bindings[k].fragments[0]
            object.__setattr__(fragment, "nbytes", fragment.nbytes + 1)
        elif forgery == "other-placement":
            object.__setattr__(bindings[k], "placement_id", "sha256:" + "1" * 64)
        elif forgery == "unknown-participant":
            object.__setattr__(bindings[k], "participant_id", "nobody")
        ids = sorted(f.fragment_id for b in bindings for f in b.fragments)
        selected: Any = None
        if choice == "all":
            selected = frozenset(ids)
        elif choice == "half":
            selected = frozenset(ids[::2])
        if forgery == "same-objects":
            projections(placement, bindings, selected, fused)  # proofs remembered by a first call
        results.append(projections(placement, bindings, selected, fused))
    slow, fast = results
    assert fast == slow

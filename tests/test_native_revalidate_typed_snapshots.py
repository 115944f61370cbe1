"""Executor snapshots holding a value equal to the attested one but of another type.

The rules (``_require_typed_executor``) reject an executor whose runtime fragment snapshot has a
field that is not exactly of its stored type (exact ``str``, exact ``int``, exact ``tuple`` of
exact ``int``) with "executor plan has invalid runtime fragment snapshots", before any
comparison. The fast revalidation paths (``revalidate_side`` in C, ``_fast_side_consistent`` in
Python) compare snapshots with the attested values by ``==``; they must answer "unsure" for such
a value so the rules decide (same first failure and message) on every entry: ``replace``,
``copy.copy``, ``copy.deepcopy``, a pickle round trip, and the fast call itself."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any, Callable, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_executor import HostMemory, host_bindings, tp_placement

from mooncake.reshard.weight import ParallelRank
from mooncake.reshard.weight._planner import bound_contracts as bc
from mooncake.reshard.weight.planner import TransferPlan, bind_logical_transfer_plan, plan_placement_transfer
from test_native_revalidate import _forge

MESSAGE = "executor plan has invalid runtime fragment snapshots"


class IntSub(int):
    pass


class StrSub(str):
    pass


class TupleSub(tuple):  # type: ignore[type-arg]
    pass


def _plan() -> TransferPlan:
    source = tp_placement(2, prefix="s", dp=2, shape=(4, 7), tensors=("v", "w"))
    target = tp_placement(3, prefix="t", shape=(4, 7), tensors=("v", "w"))
    logical = plan_placement_transfer(source, target)
    memory = HostMemory()
    return bind_logical_transfer_plan(
        logical,
        host_bindings(target, memory, prefix="dst"),
        source_bindings=host_bindings(source, memory, prefix="src"),
    )


_BOUND = _plan()
_PLANS = {"bound": _BOUND, "unpickled": pickle.loads(pickle.dumps(_BOUND))}

_KINDS = dict(bc._SNAPSHOT_TYPES)


# Each variant maps a typed value to an equal (``==``) value of another type, or None when the
# variant does not apply to the value (a bool equals only 0 and 1).
def _int_variants() -> dict[str, Callable[[int], Optional[Any]]]:
    return {
        "float": float,
        "bool": lambda v: bool(v) if v in (0, 1) else None,
        "int-subclass": IntSub,
    }


def _item_variant(make: Callable[[int], Optional[Any]], where: str) -> Callable[[tuple[int, ...]], Optional[Any]]:
    def variant(values: tuple[int, ...]) -> Optional[Any]:
        if not values:
            return None
        index = 0 if where == "first" else len(values) - 1
        item = make(values[index])
        if item is None:
            return None
        items = list(values)
        items[index] = item
        return tuple(items)

    return variant


_VARIANTS: dict[str, dict[str, Callable[[Any], Optional[Any]]]] = {
    "str": {"str-subclass": StrSub},
    "int": _int_variants(),
    "ints": {
        "tuple-subclass": TupleSub,
        "list": list,
        **{
            f"{where}-item-{name}": _item_variant(make, where)
            for where in ("first", "last")
            for name, make in _int_variants().items()
        },
    },
}

_SNAPSHOTS = [s for e in _BOUND.source_executors + _BOUND.target_executors for s in e.fragment_snapshots]
# Every (field, variant) that applies to some snapshot of the plan (a bool equals only 0 and 1).
_CASES = [
    (name, variant)
    for name, kind in bc._SNAPSHOT_TYPES
    for variant, make in _VARIANTS[kind].items()
    if any(make(getattr(snapshot, name)) is not None for snapshot in _SNAPSHOTS)
]


def _forged_plan(plan: TransferPlan, side: str, executor_index: int, snapshot_index: int, name: str, variant: str) -> Optional[TransferPlan]:
    executors = list(getattr(plan, side))
    executor = executors[executor_index % len(executors)]
    snapshots = list(executor.fragment_snapshots)
    position = snapshot_index % len(snapshots)
    snapshot = snapshots[position]
    value = _VARIANTS[_KINDS[name]][variant](getattr(snapshot, name))
    if value is None:
        return None
    assert type(value) is list or value == getattr(snapshot, name)  # equal (a list: equal items)
    snapshots[position] = _forge(snapshot, **{name: value})
    executors[executor_index % len(executors)] = _forge(executor, fragment_snapshots=tuple(snapshots))
    return _forge(plan, **{side: tuple(executors)})


def _fast_accepts(plan: TransferPlan) -> bool:
    candidate = _forge(plan)
    return bool(
        bc._fast_revalidate_live(
            candidate, plan.operations, plan.source_executors, plan.target_executors, plan.planning_limits, True
        )
    )


def _rules_message(plan: TransferPlan) -> Optional[str]:
    candidate = _forge(plan)
    try:
        candidate._revalidate_rules(
            plan.operations, plan.source_executors, plan.target_executors, plan.planning_limits, True
        )
    except ValueError as error:
        return str(error)
    return None


_ENTRIES: dict[str, Callable[[TransferPlan], Any]] = {
    "replace": dataclasses.replace,
    "copy": copy.copy,
    "deepcopy": copy.deepcopy,
    "pickle": lambda plan: pickle.loads(pickle.dumps(plan)),
}


def _assert_refused(forged: TransferPlan, message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rules reject ``forged`` with ``message``; every entry raises exactly it; the fast
    call declines, and so does the C side check alone."""
    assert _rules_message(forged) == message
    for entry, run in _ENTRIES.items():
        with pytest.raises(ValueError) as caught:
            run(forged)
        assert str(caught.value) == message, entry
    assert not _fast_accepts(forged)
    with monkeypatch.context() as patch:
        patch.setattr(bc, "_fast_side_consistent", lambda *args: False)
        assert not _fast_accepts(forged)  # the C side check alone does not accept


def test_genuine_plans_are_accepted_by_the_c_side_check(monkeypatch: pytest.MonkeyPatch) -> None:
    # The Python side check never runs for a genuine plan: the C one decides it.
    monkeypatch.setattr(bc, "_fast_side_consistent", lambda *args: pytest.fail("C side check declined"))
    for plan in _PLANS.values():
        assert _fast_accepts(plan)


@pytest.mark.parametrize("plan_name", sorted(_PLANS))
@pytest.mark.parametrize(("name", "variant"), _CASES)
def test_equal_value_of_another_type_is_refused_on_every_entry(
    plan_name: str, name: str, variant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = _PLANS[plan_name]
    tried = 0
    for side in ("source_executors", "target_executors"):
        for executor_index, snapshot_index in ((0, 0), (-1, -1)):
            forged = _forged_plan(plan, side, executor_index, snapshot_index, name, variant)
            if forged is None:
                continue
            tried += 1
            _assert_refused(forged, MESSAGE, monkeypatch)
    if not tried:  # the one value of the field the variant applies to is elsewhere
        for executor_index, executor in enumerate(plan.target_executors):
            for snapshot_index in range(len(executor.fragment_snapshots)):
                forged = _forged_plan(plan, "target_executors", executor_index, snapshot_index, name, variant)
                if forged is not None:
                    tried += 1
                    _assert_refused(forged, MESSAGE, monkeypatch)
    assert tried


def test_typed_snapshot_matches_declines_an_untyped_expected_value() -> None:
    executor = _BOUND.target_executors[0]
    snapshot = executor.fragment_snapshots[0]
    expected = snapshot.__getstate__()
    assert bc._typed_snapshot_matches(snapshot, dict(expected))
    for name, kind in bc._SNAPSHOT_TYPES:
        for variant, make in _VARIANTS[kind].items():
            value = make(expected[name])
            if value is None:
                continue
            if type(value) is not list:
                assert bc._snapshot_matches(snapshot, {**expected, name: value}), (name, variant)
            assert not bc._typed_snapshot_matches(snapshot, {**expected, name: value}), (name, variant)
            assert not bc._typed_snapshot_matches(_forge(snapshot, **{name: value}), dict(expected)), (name, variant)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    plan_name=st.sampled_from(sorted(_PLANS)),
    side=st.sampled_from(("source_executors", "target_executors")),
    edits=st.lists(
        st.tuples(st.integers(0, 7), st.integers(0, 7), st.sampled_from(_CASES)), min_size=1, max_size=3
    ),
)
def test_fast_path_and_rules_agree_on_forged_snapshots(
    plan_name: str, side: str, edits: list[tuple[int, int, tuple[str, str]]]
) -> None:
    plan = _PLANS[plan_name]
    forged_any = False
    for executor_index, snapshot_index, (name, variant) in edits:
        forged = _forged_plan(plan, side, executor_index, snapshot_index, name, variant)
        if forged is not None:
            plan = forged
            forged_any = True
    message = _rules_message(plan)
    if forged_any:
        assert message == MESSAGE
    fast = _fast_accepts(plan)
    if fast:
        assert message is None, "the fast path accepted a plan the rules reject"
    if message is None:
        assert dataclasses.replace(plan) == plan
    else:
        with pytest.raises(ValueError) as caught:
            dataclasses.replace(plan)
        assert str(caught.value) == message


# ---------------------------------------------------------------------------------------
# Executor fields: the fast side checks look executors up and compare their keys by ``==``.


class _RankSub(ParallelRank):
    pass

_EXECUTOR_CASES: dict[str, tuple[Callable[[Any], dict[str, Any]], str]] = {
    **{
        f"{name}-str-subclass": (
            (lambda name: lambda e: {name: StrSub(getattr(e, name))})(name),
            "executor plan identifiers must not be empty",
        )
        for name in ("instance_id", "placement_id", "participant_id", "worker_id")
    },
    "digest-str-subclass": (
        lambda e: {"placement_digest": StrSub(e.placement_digest)},
        "executor plan placement digest must be SHA-256",
    ),
    "lease-str-subclass": (
        lambda e: {"runtime_lease_id": StrSub(e.runtime_lease_id)},
        "executor plan runtime lease ID must be non-empty",
    ),
    "fragment-ids-tuple-subclass": (
        lambda e: {"fragment_ids": TupleSub(e.fragment_ids)},
        "executor plan identifiers must not be empty",
    ),
    "fragment-ids-first-item-str-subclass": (
        lambda e: {"fragment_ids": (StrSub(e.fragment_ids[0]),) + e.fragment_ids[1:]},
        "executor plan identifiers must not be empty",
    ),
    "fragment-ids-last-item-str-subclass": (
        lambda e: {"fragment_ids": e.fragment_ids[:-1] + (StrSub(e.fragment_ids[-1]),)},
        "executor plan identifiers must not be empty",
    ),
    "snapshots-tuple-subclass": (lambda e: {"fragment_snapshots": TupleSub(e.fragment_snapshots)}, MESSAGE),
    "snapshots-list": (lambda e: {"fragment_snapshots": list(e.fragment_snapshots)}, MESSAGE),
    **{
        f"rank-{field}-{variant}": (
            (lambda field, make: lambda e: {"rank": _forge(e.rank, **{field: make(getattr(e.rank, field))})})(
                field, make
            ),
            "rank must be a ParallelRank",
        )
        for field in ("dp", "tp", "pp", "ep")
        for variant, make in (("float", float), ("int-subclass", IntSub))
    },
    "rank-bool": (
        lambda e: {"rank": _forge(e.rank, pp=bool(e.rank.pp))},  # pp is 0 in these plans
        "rank must be a ParallelRank",
    ),
    "rank-subclass": (
        lambda e: {"rank": _RankSub(dp=e.rank.dp, tp=e.rank.tp, pp=e.rank.pp, ep=e.rank.ep)},
        "{side} executor provenance differs from attestation",
    ),
}


@pytest.mark.parametrize("plan_name", sorted(_PLANS))
@pytest.mark.parametrize("case", sorted(_EXECUTOR_CASES))
def test_executor_field_of_another_type_is_refused_on_every_entry(
    plan_name: str, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    make, message = _EXECUTOR_CASES[case]
    plan = _PLANS[plan_name]
    for side in ("source_executors", "target_executors"):
        for index in (0, -1):
            executors = list(getattr(plan, side))
            executors[index] = _forge(executors[index], **make(executors[index]))
            forged = _forge(plan, **{side: tuple(executors)})
            _assert_refused(forged, message.format(side=side.split("_")[0]), monkeypatch)


def test_rank_bool_case_forges_a_zero() -> None:
    assert all(e.rank.pp == 0 for e in _BOUND.source_executors + _BOUND.target_executors)

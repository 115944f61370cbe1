"""Session 32 (lead): ``_native.plain_executor_keys``, the C form of
``validation._plain_executor_keys`` (the target checks skip building the plan's executor views
when both sides' executor keys are plain and distinct).

It was a Python loop that read every placement fragment id's type and hashed every id again in
the tuple key (about 5 % of binding at 10^6 fragments). The C call reads each id once and
decides distinctness by the participant id's hash, comparing full keys only within a run of equal
hashes. ``_oracle`` below is the Python loop it replaced: on executors with plain instance dicts
the two agree exactly; on an instance dict with a key that is not an exact str the C call says
False (the views are then built, the full path), where the loop would have read on.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank
from mooncake.reshard.weight._planner.contracts import PlacementExecutorPlan
from mooncake.reshard.weight.planner import plan_placement_transfer

from memory_executor import tp_placement


def _oracle(executors: Any) -> bool:
    """The rule-by-rule form (session 31's ``_plain_executor_keys``)."""
    if type(executors) is not tuple:
        return False
    seen: set[tuple[Any, ...]] = set()
    for executor in executors:
        if type(executor) is not PlacementExecutorPlan:
            return False
        state = executor.__dict__
        placement_id = state.get("placement_id")
        participant_id = state.get("participant_id")
        rank = state.get("rank")
        ids = state.get("placement_fragment_ids")
        if type(placement_id) is not str or type(participant_id) is not str or type(ids) is not tuple:
            return False
        if type(rank) is not ParallelRank:
            return False
        rank_state = rank.__dict__
        rank_key = (rank_state.get("dp"), rank_state.get("tp"), rank_state.get("pp"), rank_state.get("ep"))
        if not all(type(value) is int for value in rank_key) or not all(type(i) is str for i in ids):
            return False
        key = (placement_id, participant_id, rank_key, ids)
        if key in seen:
            return False
        seen.add(key)
    return True


def _c(executors: Any) -> bool:
    return _native.plain_executor_keys(executors, PlacementExecutorPlan, ParallelRank)


class _Text(str):
    pass


class _Rank(ParallelRank):
    pass


class _Executor(PlacementExecutorPlan):
    pass


@pytest.fixture(scope="module")
def executors() -> tuple[Any, ...]:
    tensors = tuple(f"t{i}" for i in range(6))
    source = tp_placement(2, prefix="s", dp=2, shape=(4, 7), tensors=tensors)
    target = tp_placement(3, prefix="t", shape=(4, 7), tensors=tensors)
    plan = plan_placement_transfer(source, target)
    return tuple(plan.source_executors) + tuple(plan.target_executors)


def _copy(executor: Any) -> Any:
    """A distinct executor object with a copy of the instance dict (and its rank's)."""
    clone = object.__new__(type(executor))
    clone.__dict__.update(executor.__dict__)
    rank = executor.__dict__.get("rank")
    if isinstance(rank, ParallelRank):  # (copied without its checks: the value may be an edited one)
        rank_clone = object.__new__(type(rank))
        rank_clone.__dict__.update(rank.__dict__)
        clone.__dict__["rank"] = rank_clone
    return clone


def test_plans_executors_are_plain(executors: tuple[Any, ...]) -> None:
    assert len(executors) >= 4
    assert _c(executors) is True and _oracle(executors) is True
    assert _c(()) is True and _oracle(()) is True


def _edit(executor: Any, field: str, value: Any) -> Any:
    clone = _copy(executor)
    if field in ("dp", "tp", "pp", "ep"):
        clone.rank.__dict__[field] = value
    else:
        clone.__dict__[field] = value
    return clone


def _drop(executor: Any, field: str) -> Any:
    clone = _copy(executor)
    del (clone.rank if field in ("dp", "tp", "pp", "ep") else clone).__dict__[field]
    return clone


_EDITS = [
    ("placement_id", 7),
    ("placement_id", _Text("p")),
    ("participant_id", None),
    ("participant_id", _Text("x")),
    ("placement_fragment_ids", ["a", "b"]),
    ("placement_fragment_ids", ("a", _Text("b"))),
    ("placement_fragment_ids", ("a", 3)),
    ("rank", (0, 0, 0, 0)),
    ("dp", True),
    ("tp", 1.0),
    ("ep", _Text("0")),
]


@pytest.mark.parametrize("field,value", _EDITS)
def test_each_field_edit_is_decided_like_the_oracle(executors: tuple[Any, ...], field: str, value: Any) -> None:
    for at in (0, len(executors) - 1):
        edited = executors[:at] + (_edit(executors[at], field, value),) + executors[at + 1:]
        assert _oracle(edited) is False
        assert _c(edited) is False


@pytest.mark.parametrize("field", ["placement_id", "participant_id", "placement_fragment_ids", "rank", "dp", "pp"])
def test_a_missing_field_is_not_plain(executors: tuple[Any, ...], field: str) -> None:
    edited = (_drop(executors[0], field),) + executors[1:]
    assert _oracle(edited) is False and _c(edited) is False


def test_classes_and_containers_must_be_exact(executors: tuple[Any, ...]) -> None:
    assert _c(list(executors)) is False
    sub = _Executor(executors[0].placement_id, executors[0].participant_id, executors[0].rank, ("a",))
    assert _oracle((sub,)) is False and _c((sub,)) is False
    rank = executors[0].rank
    odd = _edit(executors[0], "rank", _Rank(dp=rank.dp, tp=rank.tp, pp=rank.pp, ep=rank.ep))
    assert _oracle((odd,)) is False and _c((odd,)) is False
    with pytest.raises(TypeError):
        _native.plain_executor_keys(executors, PlacementExecutorPlan)
    with pytest.raises(TypeError):
        _native.plain_executor_keys(executors, PlacementExecutorPlan, 3)


def test_equal_keys_are_refused_wherever_they_are(executors: tuple[Any, ...]) -> None:
    n = len(executors)
    for i in range(n):
        for twin in (executors[i], _copy(executors[i])):  # the same object, an equal one
            for at in (0, i, n):
                edited = executors[:at] + (twin,) + executors[at:]
                assert _oracle(edited) is False
                assert _c(edited) is False


def test_one_participant_with_keys_differing_in_one_field(executors: tuple[Any, ...]) -> None:
    """Same participant id (one run of equal hashes): the full keys decide."""
    base = executors[0]
    variants = [
        _edit(base, "placement_id", base.placement_id + "-other"),
        _edit(base, "placement_fragment_ids", base.placement_fragment_ids + ("extra",)),
        _edit(base, "placement_fragment_ids", ()),
        _edit(base, "dp", base.rank.dp + 1),
        _edit(base, "ep", base.rank.ep + 5),
    ]
    group = (base, *variants)
    assert _oracle(group) is True and _c(group) is True
    for k in range(len(group)):
        again = group + (_copy(group[k]),)
        assert _oracle(again) is False and _c(again) is False


def test_a_key_that_is_not_an_exact_str_declines(executors: tuple[Any, ...]) -> None:
    """Stricter than the loop: a probe of such a dict may compare with user code."""
    edited = _copy(executors[0])
    edited.__dict__[1] = "odd key"
    assert _oracle((edited,)) is True
    assert _c((edited,)) is False
    rank_odd = _copy(executors[0])
    rank_odd.rank.__dict__[2] = 0
    assert _c((rank_odd,)) is False


_FIELD_VALUES = {
    "placement_id": st.sampled_from(["p0", "p1", _Text("p0"), 0]),
    "participant_id": st.sampled_from(["w0", "w1", "w2", _Text("w1"), None]),
    "placement_fragment_ids": st.sampled_from([(), ("a",), ("a", "b"), ("b", "a"), ["a"], ("a", _Text("b")), (1,)]),
    "dp": st.sampled_from([0, 1, True, 2**70]),
    "tp": st.sampled_from([0, 1, -1]),
}


@settings(max_examples=300, deadline=None)
@given(data=st.data(), count=st.integers(min_value=0, max_value=7))
def test_random_executor_sets_agree_with_the_oracle(executors: tuple[Any, ...], data: Any, count: int) -> None:
    made = []
    for _ in range(count):
        pick = data.draw(st.sampled_from(executors))
        if data.draw(st.booleans()):
            made.append(pick)  # as it is (possibly the same object twice)
            continue
        clone = _copy(pick)
        for field, values in _FIELD_VALUES.items():
            if data.draw(st.booleans()):
                clone = _edit(clone, field, data.draw(values))
        made.append(clone)
    group = tuple(made)
    assert _c(group) is _oracle(group)

"""COV37 (session 37): ``_native.revalidate_coverage`` takes an executor row's fields, and the
fields of the two ranks it compares, in the walk that checks each dict's keys (plain_dict.h
pd_plain_values / pd_instance_values), by identity with the interned field name, and looks up
any name not met by identity.

The call is captured from a real ``dataclasses.replace`` of a bound plan and then repeated on
edited dicts (the executor's instance dict the row carries, the executor's rank, the rank of its
placement part). Oracle: the same edit under the interned keys (what the pass looked up before).
- keys re-made as equal strs that are other objects (not interned): the same answer (True);
- a field of the wrong value or kind under such a key: the same answer as under the interned key;
- a str subclass key with the hash of a field name whose ``__eq__`` records that it ran: the same
  answer as with it planted among interned keys, and ``__eq__`` never runs (the walk refuses the
  dict before any probe).
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from forge_helpers import sized_world

from mooncake.reshard import _native
from mooncake.reshard.weight import bind_logical_transfer_plan

_CALLS: list[int] = []


class _Colliding(str):
    """A key equal to nothing, hashed as ``name``; its ``__eq__`` records that it ran."""

    def __new__(cls, name: str) -> "_Colliding":
        made = super().__new__(cls, "colliding-" + name)
        made._target = hash(name)  # type: ignore[attr-defined]
        return made

    def __hash__(self) -> int:
        return self._target  # type: ignore[attr-defined,no-any-return]

    def __eq__(self, other: object) -> bool:
        _CALLS.append(1)
        return False


class _Int(int):
    """An int subclass: not an exact int (the rank comparison takes the generic path)."""


def _captured() -> tuple[Any, tuple[Any, ...]]:
    """A bound plan and the arguments of the revalidate_coverage call its replace() makes."""
    logical, targets, sources, _memory = sized_world(2)
    plan = bind_logical_transfer_plan(logical, targets, source_bindings=sources)
    seen: list[tuple[Any, ...]] = []
    real = _native.revalidate_coverage

    def spy(*args: Any) -> Any:
        seen.append(args)
        return real(*args)

    setattr(_native, "revalidate_coverage", spy)
    try:
        dataclasses.replace(plan)
    finally:
        setattr(_native, "revalidate_coverage", real)
    assert seen, "the fast path calls revalidate_coverage"
    return plan, seen[-1]


def _outcome(args: tuple[Any, ...]) -> Any:
    try:
        return ("returned", _native.revalidate_coverage(*args))
    except Exception as error:  # noqa: BLE001 -- the outcome is compared, whatever it is
        return ("raised", type(error).__name__, str(error))


def _dicts(plan: Any, args: tuple[Any, ...]) -> dict[str, tuple[dict[Any, Any], str, Any]]:
    """Dicts the pass walks: (dict, a checked field, a wrong value for it)."""
    rows = args[4]
    state = rows[-1][0]
    executor = next(e for e in plan.target_executors if vars(e) is state)
    part = next(p for p in plan.target_placement.parts if p.participant_id == state["participant_id"])
    if executor.rank is part.rank:  # (shared: the executor gets an equal rank of its own)
        state["rank"] = copy.copy(part.rank)
    assert executor.rank == part.rank and executor.rank is not part.rank
    return {
        "executor": (state, "instance_id", "other-instance"),
        "executor-lease": (state, "runtime_lease_id", "other-lease"),
        "executor-rank": (vars(executor.rank), "tp", 99),
        "executor-rank-kind": (vars(executor.rank), "dp", _Int(executor.rank.dp)),
        "part-rank": (vars(part.rank), "ep", 99),
        "part-rank-kind": (vars(part.rank), "pp", "0"),
    }


def _rekey(d: dict[Any, Any], fresh: bool, edit: Any = None, planted: Any = None) -> dict[Any, Any]:
    """Re-make dict d: keys as equal non-identical strs when fresh; edit = (name, value) set under
    that key; planted: an extra key, stored first. Returns the original items to restore."""
    items = dict(d)
    d.clear()
    if planted is not None:  # (first: a lookup of its hash meets it before the field's own key)
        d[planted] = None
    for key, value in items.items():
        new_key = "".join(list(key)) if fresh else key
        if fresh:
            assert new_key == key and new_key is not key
        if edit is not None and key == edit[0]:
            value = edit[1]
        d[new_key] = value
    return items


def _restore(d: dict[Any, Any], items: dict[Any, Any]) -> None:
    d.clear()
    d.update(items)


def test_unedited_call_holds():
    plan, args = _captured()
    assert _outcome(args) == ("returned", True)
    assert all(isinstance(row[0], dict) for row in args[4])
    _dicts(plan, args)  # (every edited dict found)


def test_fresh_keys_are_found():
    plan, args = _captured()
    for name, (d, _field, _wrong) in _dicts(plan, args).items():
        items = _rekey(d, True)
        try:
            assert _outcome(args) == ("returned", True), name
        finally:
            _restore(d, items)
    assert _outcome(args) == ("returned", True)


_EQUAL_EDITS = ("executor-rank-kind",)


def test_wrong_value_under_fresh_key_as_under_interned():
    plan, args = _captured()
    for name, (d, field, wrong) in _dicts(plan, args).items():
        answers = []
        for fresh in (False, True):
            items = _rekey(d, fresh, edit=(field, wrong))
            try:
                answers.append(_outcome(args))
            finally:
                _restore(d, items)
        assert answers[0] == answers[1], (name, answers)
        # (an equal int subclass: the generic comparison finds the ranks equal)
        assert (answers[0] == ("returned", True)) == (name in _EQUAL_EDITS), (name, answers)
    assert _outcome(args) == ("returned", True)


def test_colliding_key_runs_no_code():
    plan, args = _captured()
    for name, (d, field, _wrong) in _dicts(plan, args).items():
        answers = []
        for fresh in (False, True):
            items = _rekey(d, fresh, planted=_Colliding(field))
            _CALLS.clear()  # (planting it compared it with the field's key)
            try:
                answers.append(_outcome(args))
            finally:
                _restore(d, items)
            assert _CALLS == [], name
        assert answers[0] == answers[1], (name, answers)
        assert answers[0] != ("returned", True), (name, answers)
    assert _outcome(args) == ("returned", True)


_NAMES = ("executor", "executor-lease", "executor-rank", "executor-rank-kind", "part-rank", "part-rank-kind")


@settings(max_examples=40, deadline=None)
@given(
    fresh=st.sets(st.sampled_from(_NAMES)),
    wrong=st.one_of(st.none(), st.sampled_from(_NAMES)),
    planted=st.one_of(st.none(), st.sampled_from(_NAMES)),
)
def test_any_mix_agrees_with_interned_keys(fresh, wrong, planted):
    # oracle: the same edits with every key interned (the lookups the pass made before COV37)
    plan, args = _captured()
    dicts = _dicts(plan, args)
    answers = []
    for use_fresh in (False, True):
        saved = []
        done: set[int] = set()
        try:
            for name in _NAMES:
                d, field, bad = dicts[name]
                edit = (field, bad) if name == wrong else None
                plant = _Colliding(field) if name == planted else None
                refresh = use_fresh and name in fresh
                if edit is None and plant is None and not refresh:
                    continue
                saved.append((d, _rekey(d, refresh and id(d) not in done, edit, plant)))
                done.add(id(d))
            _CALLS.clear()  # (planting compared the key with the field's key)
            answers.append(_outcome(args))
            assert _CALLS == []
        finally:
            for d, items in reversed(saved):
                _restore(d, items)
    assert answers[0] == answers[1]
    if planted is not None:
        assert answers[0] != ("returned", True)
    elif wrong is None or wrong in _EQUAL_EDITS:
        assert answers[0] == ("returned", True)
    else:
        assert answers[0] != ("returned", True)


def test_a_shared_rank_is_walked_once_with_the_same_answers():
    # the executor's rank object is its part's (as bound): one walk of its dict serves both
    plan, args = _captured_shared()
    state = args[4][-1][0]
    rank = state["rank"]
    part = next(p for p in plan.target_placement.parts if p.participant_id == state["participant_id"])
    assert part.rank is rank
    d = vars(rank)
    assert _outcome(args) == ("returned", True)
    for edit, planted, holds in (
        (None, None, True),
        (("tp", 99), None, True),  # (the same object on both sides: still equal)
        (("dp", "0"), None, True),  # (not an exact int: the generic comparison, of one object)
        (None, _Colliding("ep"), False),
    ):
        answers = []
        for fresh in (False, True):
            items = _rekey(d, fresh, edit, planted)
            _CALLS.clear()
            try:
                answers.append(_outcome(args))
            finally:
                _restore(d, items)
            assert _CALLS == []
        assert answers[0] == answers[1], (edit, answers)
        assert (answers[0] == ("returned", True)) == holds, (edit, answers)


def _captured_shared() -> tuple[Any, tuple[Any, ...]]:
    plan, args = _captured()
    state = args[4][-1][0]
    part = next(p for p in plan.target_placement.parts if p.participant_id == state["participant_id"])
    if state["rank"] is not part.rank:  # (bound plans share it; made so if not)
        state["rank"] = part.rank
    return plan, args

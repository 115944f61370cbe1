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
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from forge_helpers import CollidingKey, rekeyed_answers
from test_memo36_shape_walk_values import _CALLS, _Colliding
from test_memo36_shape_walk_values import _captured as _captured_call
from test_memo36_shape_walk_values import _rekey as _rekey_dict
from test_memo36_shape_walk_values import _restore

from mooncake.reshard import _native


class _Int(int):
    """An int subclass: not an exact int (the rank comparison takes the generic path)."""


def _captured() -> tuple[Any, tuple[Any, ...]]:
    """A bound plan and the arguments of the revalidate_coverage call its replace() makes."""
    return _captured_call("revalidate_coverage")


def _outcome(args: tuple[Any, ...]) -> Any:
    try:
        return ("returned", _native.revalidate_coverage(*args))
    except Exception as error:  # noqa: BLE001 -- the outcome is compared, whatever it is
        return ("raised", type(error).__name__, str(error))


def _dicts(plan: Any, args: tuple[Any, ...]) -> dict[str, tuple[Any, str, Any]]:
    """Objects whose dict the pass walks: (object, a checked field, a wrong value for it)."""
    rows = args[4]
    state = rows[-1][0]
    executor = next(e for e in plan.target_executors if vars(e) is state)
    part = next(p for p in plan.target_placement.parts if p.participant_id == state["participant_id"])
    if executor.rank is part.rank:  # (shared: the executor gets an equal rank of its own)
        state["rank"] = copy.copy(part.rank)
    assert executor.rank == part.rank and executor.rank is not part.rank
    return {
        "executor": (executor, "instance_id", "other-instance"),
        "executor-lease": (executor, "runtime_lease_id", "other-lease"),
        "executor-rank": (executor.rank, "tp", 99),
        "executor-rank-kind": (executor.rank, "dp", _Int(executor.rank.dp)),
        "part-rank": (part.rank, "ep", 99),
        "part-rank-kind": (part.rank, "pp", "0"),
    }


def _rekey(obj: Any, fresh: bool, edit: Any = None, planted: Any = None) -> dict[Any, Any]:
    """MEMO36's re-keying of obj's instance dict (fresh keys, an edit), with the planted key
    stored first: a lookup of its hash meets it before the field's own key. Returns the
    original items to restore."""
    items = _rekey_dict(obj, fresh, edit)
    if planted is not None:
        d = vars(obj)
        rest = dict(d)
        d.clear()
        d[planted] = None
        d.update(rest)
    return items


def test_unedited_call_holds():
    plan, args = _captured()
    assert _outcome(args) == ("returned", True)
    assert all(isinstance(row[0], dict) for row in args[4])
    _dicts(plan, args)  # (every edited dict found)


def test_fresh_keys_are_found():
    plan, args = _captured()
    for name, (obj, _field, _wrong) in _dicts(plan, args).items():
        items = _rekey(obj, True)
        try:
            assert _outcome(args) == ("returned", True), name
        finally:
            _restore(obj, items)
    assert _outcome(args) == ("returned", True)


_EQUAL_EDITS = ("executor-rank-kind",)


def test_wrong_value_under_fresh_key_as_under_interned():
    plan, args = _captured()
    for name, (obj, field, wrong) in _dicts(plan, args).items():
        answers = rekeyed_answers(obj, lambda: _outcome(args), _rekey, edit=(field, wrong))
        assert answers[0] == answers[1], (name, answers)
        # (an equal int subclass: the generic comparison finds the ranks equal)
        assert (answers[0] == ("returned", True)) == (name in _EQUAL_EDITS), (name, answers)
    assert _outcome(args) == ("returned", True)


def test_colliding_key_runs_no_code():
    plan, args = _captured()
    for name, (obj, field, _wrong) in _dicts(plan, args).items():
        answers = rekeyed_answers(obj, lambda: _outcome(args), _rekey, planted=CollidingKey(field))
        assert answers[0] == answers[1], (name, answers)
        assert answers[0] != ("returned", True), (name, answers)
    assert _outcome(args) == ("returned", True)


_NAMES = ("executor", "executor-lease", "executor-rank", "executor-rank-kind", "part-rank", "part-rank-kind")


_ONE = st.one_of(st.none(), st.sampled_from(_NAMES))


@settings(max_examples=40, deadline=None)
@given(mix=st.tuples(st.sets(st.sampled_from(_NAMES)), _ONE, _ONE))
def test_any_mix_agrees_with_interned_keys(mix):
    # oracle: the same edits with every key interned (the lookups the pass made before COV37);
    # mix: (dicts re-keyed fresh, the dict given a wrong value, the dict given a colliding key)
    fresh, wrong, planted = mix
    plan, args = _captured()
    dicts = _dicts(plan, args)
    answers = []
    for use_fresh in (False, True):
        saved = []
        done: set[int] = set()
        try:
            for name in _NAMES:
                obj, field, bad = dicts[name]
                edit = (field, bad) if name == wrong else None
                plant = _Colliding(field) if name == planted else None
                refresh = use_fresh and name in fresh
                if edit is None and plant is None and not refresh:
                    continue
                saved.append((obj, _rekey(obj, refresh and id(obj) not in done, edit, plant)))
                done.add(id(obj))
            _CALLS.clear()  # (planting compared the key with the field's key)
            answers.append(_outcome(args))
            assert _CALLS == []
        finally:
            for obj, items in reversed(saved):
                _restore(obj, items)
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
    obj = rank
    assert _outcome(args) == ("returned", True)
    for edit, planted, holds in (
        (None, None, True),
        (("tp", 99), None, True),  # (the same object on both sides: still equal)
        (("dp", "0"), None, True),  # (not an exact int: the generic comparison, of one object)
        (None, _Colliding("ep"), False),
    ):
        answers = []
        for fresh in (False, True):
            items = _rekey(obj, fresh, edit, planted)
            _CALLS.clear()
            try:
                answers.append(_outcome(args))
            finally:
                _restore(obj, items)
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

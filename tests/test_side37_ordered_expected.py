"""revalidate_side's comparison of a snapshot with an expected field dict (SIDE37).

An expected field dict (``_AttestedView.rows()``) that holds exactly the snapshot field names,
in field order, as the interned name objects, has its values taken in one walk of the dict
(plain_dict.h ``pd_ordered_values``) instead of one lookup per field. Any other dict (keys in
another order, a key that is an equal str subclass or another str object, a missing or extra
key) is looked up field by field as before. Oracle: the rules (``_revalidate_rules``) and the
expected outcome of the C side check itself (True when the dicts are equal, None otherwise)."""

from __future__ import annotations

import pickle
import random
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mooncake.reshard.weight._planner import bound_contracts as bc
from test_native_revalidate import _fast, _slow
from test_native_revalidate_typed_snapshots import _BOUND  # (its small bound plan)


class StrSub(str):
    pass


class Recorder(str):
    """A str subclass whose ``__eq__`` is Python code (recorded)."""

    calls: list[str] = []

    def __eq__(self, other: object) -> bool:
        Recorder.calls.append(str(self))
        return str.__eq__(self, other)

    def __hash__(self) -> int:
        return str.__hash__(self)




def _rekeyed(expected: dict[str, Any], order: list[int], planted: set[int], kind: type) -> dict[str, Any]:
    items = list(expected.items())
    out: dict[Any, Any] = {}
    for k in order:
        name, value = items[k]
        # an equal key of another object: a copy of the str, or a str subclass
        key = kind(name) if k in planted else name
        if kind is str and k in planted:
            key = "".join(list(name))  # another exact str object, equal (not interned)
        out[key] = value
    return out


def _run(transform: Callable[[dict[str, Any]], dict[str, Any]], monkeypatch: Any) -> tuple[bool, bool, list[Any]]:
    """(fast accepted, rules accepted, revalidate_side's answers) for a fresh copy of the plan
    whose views' expected field dicts are rewritten by ``transform`` (in place)."""
    plan = pickle.loads(pickle.dumps(_BOUND))  # fresh attestations: views built from rows
    python_rows = bc._python_attested_rows

    def rows(state: Any, evidence: Any, generation: Any) -> Any:
        built = python_rows(state, evidence, generation)
        for expected in built[0].values():
            rewritten = transform(dict(expected))
            expected.clear()
            expected.update(rewritten)
        return built

    answers: list[Any] = []
    native_side = bc._native.revalidate_side

    def side(*args: Any) -> Any:
        answer = native_side(*args)
        answers.append(answer)
        return answer

    with monkeypatch.context() as patch:
        patch.setattr(bc._native, "attested_rows", lambda *args: None)
        patch.setattr(bc, "_python_attested_rows", rows)
        patch.setattr(bc._native, "revalidate_side", side)
        fast, _ = _fast(plan, True)
        slow, _ = _slow(plan, True)
    return fast, slow, answers


def test_field_order_dicts_take_the_walk_and_accept(monkeypatch):
    fast, slow, answers = _run(lambda expected: expected, monkeypatch)
    assert slow and fast
    assert answers and all(answer is True for answer in answers)


@pytest.mark.parametrize("kind", [str, StrSub])
def test_rekeyed_dicts_are_looked_up_as_before(monkeypatch, kind):
    n = len(bc._SNAPSHOT_TYPES)
    cases = [
        (list(reversed(range(n))), set()),  # another order
        (list(range(n)), {0}),  # first key another equal object
        (list(range(n)), {n - 1}),  # last key
        (list(range(n)), set(range(n))),  # every key
    ]
    for order, planted in cases:
        fast, slow, answers = _run(lambda e: _rekeyed(e, order, planted, kind), monkeypatch)
        assert slow and fast
        assert answers and all(answer is True for answer in answers)


def test_a_planted_key_with_python_eq_runs_as_before(monkeypatch):
    """A key of the dict that is a str subclass with its own ``__eq__``: not the field name
    object, so the walk is not taken; the lookups find it as Python does."""
    Recorder.calls.clear()
    fast, slow, answers = _run(lambda e: _rekeyed(e, list(range(len(e))), {1}, Recorder), monkeypatch)
    assert slow and fast
    assert answers and all(answer is True for answer in answers)


def test_a_changed_value_declines(monkeypatch):
    def changed(expected: dict[str, Any]) -> dict[str, Any]:
        out = dict(expected)
        out["address"] = out["address"] + 1
        return out

    fast, slow, answers = _run(changed, monkeypatch)
    assert not slow and not fast
    assert None in answers and True not in answers[-1:]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 2**32 - 1),
    planted=st.sets(st.integers(0, 15), max_size=3),
    drop=st.booleans(),
    change=st.sampled_from([None, "address", "nbytes", "worker_id", "local_shape"]),
    kind=st.sampled_from([str, StrSub]),
)
def test_rewritten_dicts_agree_with_the_rules(monkeypatch, seed, planted, drop, change, kind):
    def transform(expected: dict[str, Any]) -> dict[str, Any]:
        order = list(range(len(expected)))
        rng = random.Random(seed)
        if rng.random() < 0.5:
            rng.shuffle(order)
        out = _rekeyed(expected, order, planted, kind)
        if drop:
            out.pop(next(iter(out)))
        if change is not None:
            for key in out:
                if key == change:
                    value = out[key]
                    out[key] = value + 1 if type(value) is int else (value + "x" if type(value) is str else value + (1,))
        return out

    fast, slow, answers = _run(transform, monkeypatch)
    assert fast == slow
    equal = not drop and change is None
    assert fast == equal
    if equal:
        assert answers and all(answer is True for answer in answers)

"""``_native.restore_executors`` (the executor tables of a ``TransferPlan`` pickle record) against
its Python reference ``bound_pickle._python_restore_executors``: equal objects for every table of
the record's shape, ``None`` (the reference then raises the record's message) for anything else,
including hostile counts and indices (wrong types, huge ints, negatives, truncation)."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from test_binding_attacks import World

from mooncake.reshard import _native
from mooncake.reshard.weight._planner import bound_pickle
from mooncake.reshard.weight._planner.bound_contracts import ExecutorTransferPlan, RuntimeFragmentSnapshot
from mooncake.reshard.weight._planner.bound_pickle import (
    _EXECUTOR_FIELDS,
    _SNAPSHOT_FIELDS,
    _python_restore_executors,
    reduce_transfer_plan,
)

_INVALID = "transfer plan pickle state is invalid"


def _native_restore(table: Any, attestations: Any) -> Any:
    return _native.restore_executors(
        table, attestations, ExecutorTransferPlan, RuntimeFragmentSnapshot, _EXECUTOR_FIELDS, _SNAPSHOT_FIELDS
    )


@pytest.fixture(scope="module")
def record() -> tuple[Any, ...]:
    plan = World().bind()
    reduced = reduce_transfer_plan(plan)
    assert reduced[0] is bound_pickle._restore_transfer_plan
    return tuple(reduced[1])


def _attestations(record: tuple[Any, ...]) -> list[Any]:
    table = record[6]
    return [bound_pickle._restore_attestation(table[i], table[i + 1]) for i in range(0, len(table), 2)]


def _assert_same(native: Any, python: Any) -> None:
    assert type(native) is tuple and len(native) == len(python)
    for mine, theirs in zip(native, python):
        assert type(mine) is type(theirs) is ExecutorTransferPlan
        assert list(mine.__dict__.items()) == list(theirs.__dict__.items())
        assert mine.attestation is theirs.attestation
        for a, b in zip(mine.fragment_snapshots, theirs.fragment_snapshots):
            assert type(a) is type(b) is RuntimeFragmentSnapshot
            assert list(a.__dict__.items()) == list(b.__dict__.items())
            for name in _SNAPSHOT_FIELDS:
                assert getattr(a, name) is getattr(b, name)


def _outcome_python(table: Any, attestations: list[Any]) -> Any:
    try:
        return ("ok", _python_restore_executors(table, attestations))
    except ValueError as error:
        return ("error", str(error))


def _check(table: Any, attestations: list[Any]) -> bool:
    """Native and reference agree; True when the table was accepted."""
    native = _native_restore(table, attestations)
    expected = _outcome_python(table, attestations)
    if native is None:
        assert expected == ("error", _INVALID)
        return False
    assert expected[0] == "ok"
    _assert_same(native, expected[1])
    return True


def test_record_tables_equal_the_reference(record: tuple[Any, ...]) -> None:
    attestations = _attestations(record)
    for table in (record[9], record[10], ()):
        assert _check(table, attestations)
    restored = pickle.loads(pickle.dumps(World().bind()))
    assert restored.source_executors and restored.target_executors


def _head_edits(table: tuple[Any, ...], attestation_count: int) -> list[tuple[Any, ...]]:
    size = len(_SNAPSHOT_FIELDS)
    count = table[9]
    edits: list[tuple[Any, ...]] = []
    for value in (-1, count + 1, count - 1 if count else 1, 2**63, 2**64, -(2**70), True, 1.0, "1", None):
        edits.append(table[:9] + (value,) + table[10:])
    for value in (-1, attestation_count, 2**63, 2**65, True, "0", 0.0):
        edits.append(table[:8] + (value,) + table[9:])
    edits += [table[:-1], table[: 10 + size * count - 1], table[:5], table + (None,), table + table[:9]]
    return edits


def test_hostile_tables_decline_and_the_reference_raises(record: tuple[Any, ...]) -> None:
    attestations = _attestations(record)
    declined = 0
    for table in (record[9], record[10]):
        for edited in _head_edits(table, len(attestations)):
            declined += not _check(edited, attestations)
    assert declined > 30
    for value in (None, [1, 2], list(record[9]), "table"):
        assert _native_restore(value, attestations) is None
        assert _outcome_python(value, attestations) == ("error", _INVALID)
    # The attestations must be an exact list (the record's restore passes one).
    assert _native_restore(record[9], tuple(attestations)) is None


def test_wrong_arguments_raise(record: tuple[Any, ...]) -> None:
    attestations = _attestations(record)
    with pytest.raises(TypeError):
        _native.restore_executors(record[9], attestations, ExecutorTransferPlan, RuntimeFragmentSnapshot)
    with pytest.raises(TypeError):
        _native.restore_executors(record[9], attestations, int, RuntimeFragmentSnapshot, _EXECUTOR_FIELDS, _SNAPSHOT_FIELDS)
    with pytest.raises(TypeError):
        _native.restore_executors(record[9], attestations, ExecutorTransferPlan, "cls", _EXECUTOR_FIELDS, _SNAPSHOT_FIELDS)
    for names in (_EXECUTOR_FIELDS[:9], list(_EXECUTOR_FIELDS), _EXECUTOR_FIELDS[:9] + (1,)):
        with pytest.raises(TypeError):
            _native.restore_executors(
                record[9], attestations, ExecutorTransferPlan, RuntimeFragmentSnapshot, names, _SNAPSHOT_FIELDS
            )
    for names in ((), list(_SNAPSHOT_FIELDS), (b"x",)):
        with pytest.raises(TypeError):
            _native.restore_executors(
                record[9], attestations, ExecutorTransferPlan, RuntimeFragmentSnapshot, _EXECUTOR_FIELDS, names
            )


_ITEM = st.one_of(st.none(), st.integers(-3, 40), st.integers(2**62, 2**66), st.booleans(), st.text(max_size=2))


@settings(max_examples=300, deadline=None)
@given(
    executors=st.lists(
        st.tuples(
            st.lists(_ITEM, min_size=8, max_size=8),
            st.one_of(st.none(), st.integers(-2, 4), st.booleans()),
            st.integers(0, 3),
            st.integers(-1, 1),
        ),
        max_size=4,
    ),
    tail=st.lists(_ITEM, max_size=12),
)
def test_generated_tables_agree_with_the_reference(
    executors: list[tuple[list[Any], Any, int, int]], tail: list[Any]
) -> None:
    """Random tables close to the record's shape (counts off by one, junk indices, trailing
    items): native and reference always agree."""
    attestations: list[Any] = ["a0", "a1", "a2"]
    size = len(_SNAPSHOT_FIELDS)
    items: list[Any] = []
    for head, index, count, skew in executors:
        items += head
        items += [index, count + skew if skew else count]
        items += list(range(size * count))
    if tail and len(tail) % 2:
        items += tail
    _check(tuple(items), attestations)

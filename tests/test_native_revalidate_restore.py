"""``_native.restore_executors`` (the executor tables of a ``TransferPlan`` pickle record) against
its Python reference ``bound_pickle._python_restore_executors``: equal objects for every table of
the record's shape, ``None`` (the reference then raises the record's message) for anything else,
including hostile counts and indices (wrong types, huge ints, negatives, truncation)."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spec_helpers import field_state
from test_binding_attacks import World
from spec_helpers import field_state

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
            assert not hasattr(a, "__dict__") and not hasattr(b, "__dict__")  # C layouts
            assert list(a.__getstate__().items()) == list(b.__getstate__().items())
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


# --- restore_fragments ------------------------------------------------------------------------

from mooncake.reshard.contracts.fragments import RuntimeBindingFragment  # noqa: E402
from mooncake.reshard.weight._planner.attestation import (  # noqa: E402
    RuntimeBindingAttestation,
    RuntimeBindingEvidence,
)
from mooncake.reshard.weight._planner.fragments import BoundWeightFragment  # noqa: E402
from mooncake.reshard.weight.types import PlacementFragment  # noqa: E402


def _native_fragments(table: Any, attestations: Any) -> Any:
    return _native.restore_fragments(
        table,
        attestations,
        BoundWeightFragment,
        PlacementFragment,
        RuntimeBindingFragment,
        RuntimeBindingAttestation,
        RuntimeBindingEvidence,
    )


def _reference_fragments(table: Any, attestations: list[Any]) -> Any:
    """``BoundWeightFragment._restore`` per row (the attestations already restored)."""
    try:
        if type(table) is not tuple or len(table) % 6:
            raise ValueError(_INVALID)
        rows = []
        for start in range(0, len(table), 6):
            index = table[start + 5]
            if index is not None and (type(index) is not int or not 0 <= index < len(attestations)):
                raise ValueError(_INVALID)
            attestation = None if index is None else attestations[index]
            rows.append(BoundWeightFragment._restore(*table[start : start + 5], attestation))
        return ("ok", tuple(rows))
    except ValueError as error:
        return ("error", str(error))


def _check_fragments(table: Any, attestations: list[Any]) -> bool:
    native = _native_fragments(table, attestations)
    expected = _reference_fragments(table, attestations)
    if native is None:
        return False
    assert expected[0] == "ok", expected
    assert type(native) is tuple and len(native) == len(expected[1])
    for mine, theirs in zip(native, expected[1]):
        assert type(mine) is BoundWeightFragment
        assert list(field_state(mine)) == list(field_state(theirs))
        for name, value in field_state(theirs).items():
            assert field_state(mine)[name] is value, name
    return True


def test_record_fragments_equal_the_reference(record: tuple[Any, ...]) -> None:
    attestations = _attestations(record)
    assert _check_fragments(record[7], attestations)
    assert _check_fragments((), attestations)


def _fragment_edits(table: tuple[Any, ...], attestations: list[Any]) -> list[tuple[Any, ...]]:
    placement, binding, instance_id, lease_id, generation, index = table[:6]
    rest = table[6:]
    other = next(i for i in range(0, len(table), 6) if table[i + 5] != index)
    forged_binding = copy.copy(binding)
    object.__setattr__(forged_binding, "nbytes", binding.nbytes + 1)
    renamed = copy.copy(placement)
    object.__setattr__(renamed, "placement_fragment_id", "other")
    owned = copy.copy(binding)
    object.__setattr__(owned, "owner", object())
    rows = [
        (placement, binding, instance_id, lease_id, generation, None),
        (copy.copy(placement), binding, instance_id, lease_id, generation, index),
        (placement, copy.copy(binding), instance_id, lease_id, generation, index),
        (placement, forged_binding, instance_id, lease_id, generation, index),
        (renamed, binding, instance_id, lease_id, generation, index),
        (placement, owned, instance_id, lease_id, generation, index),
        (placement, binding, "", lease_id, generation, index),
        (placement, binding, "elsewhere", lease_id, generation, index),
        (placement, binding, instance_id, "stolen", generation, index),
        (placement, binding, instance_id, None, generation, index),
        (placement, binding, instance_id, lease_id, generation + 1, index),
        (placement, binding, instance_id, lease_id, -1, index),
        (placement, binding, instance_id, lease_id, 2**64, index),
        (placement, binding, instance_id, lease_id, 2**70, index),
        (placement, binding, instance_id, lease_id, True, index),
        (placement, binding, instance_id, lease_id, generation, table[other + 5]),
        (placement, binding, instance_id, lease_id, generation, len(attestations)),
        (placement, binding, instance_id, lease_id, generation, -1),
        (placement, binding, instance_id, lease_id, generation, 2**64),
        (placement, binding, instance_id, lease_id, generation, True),
        (binding, placement, instance_id, lease_id, generation, index),
        ("placement", binding, instance_id, lease_id, generation, index),
    ]
    return [row + rest for row in rows] + [table[:-1], table + table[:5]]


def test_hostile_fragment_rows_decline_or_equal_the_reference(record: tuple[Any, ...]) -> None:
    attestations = _attestations(record)
    declined = 0
    for edited in _fragment_edits(record[7], attestations):
        if not _check_fragments(edited, attestations):
            declined += 1
    # Everything above except the copies of equal objects (left to Python) and the
    # attestation-free row (accepted: no attestation to check) declines.
    assert declined >= 19
    assert _native_fragments(list(record[7]), attestations) is None
    assert _native_fragments(record[7], tuple(attestations)) is None
    forged = copy.copy(attestations[record[7][5]])
    object.__setattr__(forged, "_placement_dict", dict(forged._placement_dict))
    forged._placement_dict.pop(record[7][0].placement_fragment_id)
    swapped = list(attestations)
    swapped[record[7][5]] = forged
    assert _native_fragments(record[7], swapped) is None
    assert _reference_fragments(record[7], swapped)[0] == "error"
    with pytest.raises(TypeError):
        _native.restore_fragments(record[7], attestations, BoundWeightFragment, PlacementFragment)
    with pytest.raises(TypeError):
        _native.restore_fragments(record[7], attestations, int, PlacementFragment, RuntimeBindingFragment,
                                  RuntimeBindingAttestation, RuntimeBindingEvidence)


def test_first_failure_order_is_kept(record: tuple[Any, ...]) -> None:
    """A bad fragment before the first use of a bad attestation: the fragment's message, as the
    one-at-a-time reference reports it (the fast path never decides the order)."""
    plan_record = list(record)
    fragments = list(record[7])
    fragments[2] = ""  # the first fragment's instance id
    last = max(i for i in range(5, len(fragments), 6) if fragments[i] is not None)
    late = fragments[last]
    if all(fragments[i] != late for i in range(5, 6 * 1, 6)):
        attestation_table = list(record[6])
        evidence = copy.copy(attestation_table[2 * late + 1])
        object.__setattr__(evidence, "lease_id", "")
        attestation_table[2 * late + 1] = evidence
        plan_record[6] = tuple(attestation_table)
    plan_record[7] = tuple(fragments)
    with pytest.raises(ValueError, match="bound fragment instance_id must be non-empty"):
        bound_pickle._restore_transfer_plan(*plan_record)


# --- restore_regions --------------------------------------------------------------------------

from mooncake.reshard.weight._planner.bound_pickle import _REGION_FIELDS, _python_restore_regions  # noqa: E402
from mooncake.reshard.weight._planner.contracts import TransferRegion  # noqa: E402


def _check_regions(table: Any, fragments: tuple[Any, ...]) -> bool:
    native = _native.restore_regions(table, fragments, TransferRegion, _REGION_FIELDS)
    try:
        expected: Any = ("ok", _python_restore_regions(table, list(fragments)))
    except ValueError as error:
        expected = ("error", str(error))
    if native is None:
        assert expected == ("error", _INVALID)
        return False
    assert expected[0] == "ok"
    assert type(native) is tuple and len(native) == len(expected[1])
    for mine, theirs in zip(native, expected[1]):
        assert type(mine) is TransferRegion
        assert list(field_state(mine)) == list(field_state(theirs))
        for name, value in field_state(theirs).items():
            assert field_state(mine)[name] is value
    return True


def test_record_regions_equal_the_reference_and_hostile_tables_decline(record: tuple[Any, ...]) -> None:
    attestations = _attestations(record)
    fragments = _native_fragments(record[7], attestations)
    assert fragments is not None
    table = record[8]
    assert _check_regions(table, fragments) and _check_regions((), fragments)
    size = len(_REGION_FIELDS)
    declined = 0
    for position in (1, 2):
        for value in (-1, len(fragments), 2**63, 2**64, -(2**66), True, 1.0, None, "0"):
            edited = table[:position] + (value,) + table[position + 1 :]
            declined += not _check_regions(edited, fragments)
            later = table[: size + position] + (value,) + table[size + position + 1 :]
            declined += not _check_regions(later, fragments)
    for edited in (table[:-1], table + (None,), list(table), None):
        declined += not _check_regions(edited, fragments)
    assert declined == 40
    assert _native.restore_regions(table, list(fragments), TransferRegion, _REGION_FIELDS) is None
    for names in ((), list(_REGION_FIELDS), _REGION_FIELDS[:10] + (3,)):
        with pytest.raises(TypeError):
            _native.restore_regions(table, fragments, TransferRegion, names)
    with pytest.raises(TypeError):
        _native.restore_regions(table, fragments, int, _REGION_FIELDS)

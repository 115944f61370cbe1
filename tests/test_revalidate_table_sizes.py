"""The identity tables of ``_native.revalidate_side`` and ``_native.revalidate_coverage`` are sized
by what they hold (session 17: these two calls held bind's traced-memory peak): the side's
``hits`` is a keys-only set sized by the side's distinct fragments, its ``proven`` table is
allocated by the first snapshot proven equal to an attested state, the coverage's table of
filed placement fragments is an index of 32-bit entry numbers (at most two thirds full) over one
32-byte entry per filed object, and its attestation table starts small
and grows with the participants instead of one slot pair per operation. ``revalidate_spaces``
looks each target allocation up in its address space's source allocations instead of building
a set of every target allocation to intersect.

Answers are unchanged: sides and coverage of plans with more attestations than the initial
table holds (it grows several times) are decided as the Python versions decide, and the
traced peak inside each call stays below bounds the previous sizing exceeded (plans of fixed
shape, so the power-of-two table sizes are the same on every run; measured on CPython 3.10.13
and 3.11.7, previous sizing / this one, bytes per fragment or operation: source side 108.8 /
69.1, target side 221-234 / 182-195, coverage 169.4 / 68.6, spaces 162.9-181.9 / 71.6-83.6)."""

from __future__ import annotations

import pickle
import tracemalloc
from typing import Any, Callable

import pytest

from test_native_revalidate import _bound_plan, _coverage_tables, _scan
from test_native_revalidate_coverage_identity import _decide, _python
from test_native_revalidate_side_batched import _both, _sides

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank, RuntimeBindingFragment
from mooncake.reshard.weight._planner import bound_contracts as bc
from mooncake.reshard.weight._planner.bound_contracts import RuntimeBindingAttestation
from mooncake.reshard.weight.types import PlacementFragment

# target participants: one attestation each, more than the coverage table's initial 16 (grown
# at 32 and at 64 entries)
TARGET_TP = 64


def _plan(tensors: int, restored: bool) -> Any:
    plan = _bound_plan(
        target_tp=TARGET_TP, shape=(4, 2 * TARGET_TP), tensors=tuple(f"t{i}" for i in range(tensors))
    )
    return pickle.loads(pickle.dumps(plan)) if restored else plan


@pytest.fixture(scope="module")
def large() -> Any:
    return _plan(200, restored=False)


def _traced_peak(call: Callable[[], Any]) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        answer = call()
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    return answer, peak


@pytest.mark.parametrize("restored", [False, True])
def test_sides_decided_as_python(restored: bool) -> None:
    plan = _plan(3, restored)
    with bc._ViewScope():
        for args in _sides(plan):
            native, python, native_used, python_used = _both(args)
            assert native is True and python is True
            assert native_used == python_used


@pytest.mark.parametrize("restored", [False, True])
def test_coverage_with_many_attestations(restored: bool) -> None:
    plan = _plan(3, restored)
    assert len({id(op.target.attestation) for op in plan.operations}) == TARGET_TP
    with bc._ViewScope():
        tables = _coverage_tables(plan)
        assert tables is not None
        assert _decide(tables) is True  # identity and string keyed alike, and the Python version


@pytest.mark.parametrize("at", [0, -1])
def test_coverage_with_many_attestations_declines_a_partial_box(at: int) -> None:
    plan = _plan(3, restored=False)
    with bc._ViewScope():
        tables = list(_coverage_tables(plan))
        boxes = list(tables[3])
        offset, shape = boxes[at]
        boxes[at] = (offset, tuple(1 for _ in shape))  # no longer the whole target fragment
        tables[3] = boxes
        assert _decide(tuple(tables)) is None
        assert _python(tuple(tables)) is not True


def test_side_peaks(large: Any) -> None:
    with bc._ViewScope():
        (source, target) = _sides(large)
        peaks = []
        for args in (source, target):
            answer, peak = _traced_peak(
                lambda: _native.revalidate_side(
                    *args, set(), RuntimeBindingAttestation, ParallelRank, bc.RuntimeFragmentSnapshot, PlacementFragment
                )
            )
            assert answer is True
            peaks.append(peak / len(args[0]))
    assert peaks[0] < 90, peaks
    assert peaks[1] < 210, peaks


def test_coverage_peak(large: Any) -> None:
    with bc._ViewScope():
        tables = _coverage_tables(large)
        answer, peak = _traced_peak(lambda: _native.revalidate_coverage(*tables, ParallelRank, PlacementFragment))
    assert answer is True
    assert peak / len(large.operations) < 100, peak / len(large.operations)


@pytest.mark.parametrize("physical", [True, False])
def test_spaces_peak(large: Any, physical: bool) -> None:
    tables = _scan(large.operations)
    answer, peak = _traced_peak(
        lambda: _native.revalidate_spaces(*tables, physical, RuntimeBindingFragment, PlacementFragment)
    )
    assert answer is True  # every operation writes a whole target fragment of its own
    assert peak / len(large.operations) < 120, peak / len(large.operations)

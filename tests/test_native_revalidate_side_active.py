"""``_native.revalidate_side`` tracks the attestations' placements of a side in a set sized for
8 of them (session 14: the call held bind's traced-memory peak while that set had a slot pair
per fragment). A bound or restored plan names one placement per side; a side whose
attestations name more than 8 distinct placement objects is not decided in C (None), and no
answer may differ from the Python version's where C decides."""

from __future__ import annotations

import copy
import pickle
from typing import Any, Optional

import pytest

from test_native_revalidate import _bound_plan
from test_native_revalidate_side_batched import _sides

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank
from mooncake.reshard.weight._planner import bound_contracts as bc
from mooncake.reshard.weight._planner.bound_contracts import RuntimeBindingAttestation

# target participants: one attestation each, more than the set's 8
TARGET_TP = 16


def _plan() -> Any:
    return _bound_plan(target_tp=TARGET_TP, shape=(4, 2 * TARGET_TP))


def _native_side(args: tuple[Any, ...]) -> Optional[bool]:
    used: set[int] = set()
    answer: Optional[bool] = _native.revalidate_side(
        *args, used, RuntimeBindingAttestation, ParallelRank, bc.RuntimeFragmentSnapshot
    )
    return answer


def _python_side(args: tuple[Any, ...]) -> Any:
    try:
        return bc._fast_side_consistent(*args, set())
    except Exception as error:  # the Python version's own failure: C must not accept then
        return type(error)


def _target_attestations(plan: Any) -> list[Any]:
    seen: dict[int, Any] = {}
    for op in plan.operations:
        seen.setdefault(id(op.target.attestation), op.target.attestation)
    return list(seen.values())


@pytest.mark.parametrize("restored", [False, True])
def test_one_placement_per_side_is_decided(restored: bool) -> None:
    plan = _plan()
    if restored:
        plan = pickle.loads(pickle.dumps(plan))
    assert len(_target_attestations(plan)) == TARGET_TP
    with bc._ViewScope():
        for args in _sides(plan):
            assert _native_side(args) is True
            assert _python_side(args) is True


@pytest.mark.parametrize("distinct", [2, 8, 9, TARGET_TP])
def test_attestations_naming_distinct_placements(distinct: int) -> None:
    """The first ``distinct - 1`` target attestations get their own equal copy of the
    placement: up to 8 distinct objects fit the set (C decides, and never against Python);
    more decline."""
    plan = _plan()
    attestations = _target_attestations(plan)
    for attestation in attestations[: distinct - 1]:
        object.__setattr__(attestation, "placement", copy.copy(attestation.placement))
    assert len({id(a.placement) for a in attestations}) == distinct
    with bc._ViewScope():
        target_args = _sides(plan)[1]
        native = _native_side(target_args)
        python = _python_side(target_args)
    if distinct > 8:
        assert native is None
    if native is True:
        assert python is True

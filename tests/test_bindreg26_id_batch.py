"""``_native.bind_regions``' step 11 selections with runtime_cls given (nine arguments and more):
the ids its views read are added in batches of 16 (csrc/binder.c ``bd_id_batch``), a few
operations after they were read. The selections must stay exactly what
``_native.bound_fragment_ids`` returns for the regions built (the seven-argument form, which adds
through attribute reads one by one), wherever a forged id sits relative to the batch boundaries:
an id that is not an exact non-empty str leaves them undecided (None) without running any of its
code, and a binding the view does not read (not an exact runtime fragment) is added in order."""

from __future__ import annotations

from typing import Any

import pytest

from forge_helpers import tp3_bound_plan
from spec_helpers import field_state, forged_instance

from mooncake.reshard import _native
from mooncake.reshard.contracts.fragments import RuntimeBindingFragment
from mooncake.reshard.weight import StoredFragmentSnapshot
from mooncake.reshard.weight._planner.contracts import TransferRegion
from mooncake.reshard.weight._planner.fragments import BoundWeightFragment
from mooncake.reshard.weight.types import PlacementFragment

CLASSES = (TransferRegion, PlacementFragment, StoredFragmentSnapshot)
BATCH = 16


LOGICAL, PLAN, _MEMORY = tp3_bound_plan(tuple(f"t{k}" for k in range(16)))
N = len(PLAN.operations)


def _tables() -> tuple[dict[str, Any], dict[str, Any]]:
    targets = {op.target.placement_fragment_id: op.target for op in PLAN.operations}
    sources = {op.source.placement_fragment_id: op.source for op in PLAN.operations}
    return targets, sources


def _forge(value: Any, **changes: Any) -> Any:
    return forged_instance(type(value), {**field_state(value), **changes})


class _Watched(str):
    """A str subclass whose comparison and hash are counted (none may run inside the call)."""

    calls = 0

    def __hash__(self) -> int:
        type(self).calls += 1
        return str.__hash__(self)

    def __eq__(self, other: object) -> bool:
        type(self).calls += 1
        return str.__eq__(self, other)


class _OtherBinding:
    """A binding the view does not read (not an exact runtime fragment): added by attribute reads."""

    def __init__(self, fragment_id: Any) -> None:
        self.fragment_id = fragment_id


def _selections(targets: Any, sources: Any, nargs: int) -> Any:
    operations = LOGICAL.operations
    if nargs == 7:
        result = _native.bind_regions(*CLASSES, operations, targets, sources, BoundWeightFragment)
    elif nargs == 9:
        result = _native.bind_regions(
            *CLASSES, operations, targets, sources, BoundWeightFragment, RuntimeBindingFragment, 1_000_000
        )
    else:
        result = _native.bind_regions(
            *CLASSES, operations, targets, sources, BoundWeightFragment, RuntimeBindingFragment, 1_000_000,
            True, True,
        )
    if result is None:
        return "regions undecided"
    regions, selections = result[0], result[1]
    expected = _native.bound_fragment_ids(regions, TransferRegion, BoundWeightFragment, StoredFragmentSnapshot)
    assert selections == expected
    assert selections is None or all(type(item) is frozenset for item in selections)
    return selections


def test_the_plan_spans_several_batches() -> None:
    assert N > 3 * BATCH
    targets, sources = _tables()
    for nargs in (9, 11):
        selections = _selections(targets, sources, nargs)
        assert selections == _selections(targets, sources, 7)
        assert selections[0] == frozenset(op.source.binding.fragment_id for op in PLAN.operations)
        assert selections[1] == frozenset(op.target.binding.fragment_id for op in PLAN.operations)


POSITIONS = sorted({0, 1, BATCH - 2, BATCH - 1, BATCH, BATCH + 1, 2 * BATCH - 1, 2 * BATCH, N - 2, N - 1})


def _variants() -> list[tuple[str, Any]]:
    return [
        ("str subclass", lambda fid: _Watched(fid)),
        ("empty", lambda fid: ""),
        ("int", lambda fid: 7),
        ("other binding", None),
        ("other binding, str subclass id", "sub"),
        ("another id", lambda fid: fid + "-other"),
    ]


@pytest.mark.parametrize("side", ["source", "target"])
@pytest.mark.parametrize("position", POSITIONS)
@pytest.mark.parametrize("variant", [name for name, _ in _variants()])
def test_a_forged_id_at_any_batch_position(side: str, position: int, variant: str) -> None:
    targets, sources = _tables()
    table = targets if side == "target" else sources
    op = PLAN.operations[position]
    bound = op.target if side == "target" else op.source
    key = bound.placement_fragment_id
    fid = bound.binding.fragment_id
    if variant == "other binding":
        forged = _forge(bound, binding=_OtherBinding(fid))
    elif variant == "other binding, str subclass id":
        forged = _forge(bound, binding=_OtherBinding(_Watched(fid)))
    else:
        make = dict(_variants())[variant]
        forged = _forge(bound, binding=_forge(bound.binding, fragment_id=make(fid)))
    table = dict(table)
    table[key] = forged
    args = (table, sources) if side == "target" else (targets, table)
    _Watched.calls = 0
    got = [_selections(*args, nargs) for nargs in (9, 11)]
    # No code of the forged id ran inside the passes (bound_fragment_ids refuses it unread too).
    assert _Watched.calls == 0
    reference = _selections(*args, 7)
    assert got == [reference, reference]
    if variant in ("str subclass", "empty", "int", "other binding, str subclass id"):
        assert reference is None
    else:
        assert reference is not None


def test_several_forged_ids_in_one_batch_and_across() -> None:
    targets, sources = _tables()
    targets = dict(targets)
    sources = dict(sources)
    # another id (kept) in one batch, an id the view does not read in the next, then a refused one
    for position, table, side, make in (
        (3, targets, "target", lambda b: _forge(b.binding, fragment_id=b.binding.fragment_id + "-x")),
        (BATCH + 2, sources, "source", lambda b: _OtherBinding(b.binding.fragment_id + "-y")),
        (BATCH + 5, targets, "target", lambda b: _OtherBinding(b.binding.fragment_id)),
    ):
        op = PLAN.operations[position]
        bound = op.target if side == "target" else op.source
        table[bound.placement_fragment_id] = _forge(bound, binding=make(bound))
    decided = [_selections(targets, sources, nargs) for nargs in (7, 9, 11)]
    assert decided[0] is not None and decided[0] == decided[1] == decided[2]
    op = PLAN.operations[2 * BATCH + 3]
    targets[op.target.placement_fragment_id] = _forge(
        op.target, binding=_forge(op.target.binding, fragment_id=_Watched(op.target.binding.fragment_id))
    )
    _Watched.calls = 0
    assert [_selections(targets, sources, nargs) for nargs in (7, 9, 11)] == [None, None, None]
    assert _Watched.calls == 0

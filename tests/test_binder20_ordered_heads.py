"""``_native.bound_fragments_ordered`` finds the fragments the operations name among the parts' next
fragments first (the operations of a plan name the targets in a merge of the parts' id orders),
and by address only for the others.

Whatever the operations' order (the plan's, shuffled, partly repeated, some left out, the other
side's), the allocation order must stay "first use along the operations, then part order" and the
rows must equal the per-part kernel's; with more parts than the heads take, the table alone
decides."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_executor import tp_placement
from test_native_binder_ordered import World, _allocated_bound, _check_equal_to_per_part, _ordered


def _expected_order(result: Any, operations: Any, which: int) -> list[Any]:
    """First-use order: each operation's fragment gives its first row's bound fragment (part
    order; a fragment in two parts is bound by its first), once; the rows not used follow."""
    by_placement: dict[int, Any] = {}
    for rows in result:
        for _, bound in rows:
            by_placement.setdefault(id(bound.placement), bound)
    expected: list[Any] = []
    seen: set[int] = set()
    for op in operations:
        bound = by_placement.get(id(getattr(op, "target" if which == 0 else "source", None)))
        if bound is not None and id(bound) not in seen:
            seen.add(id(bound))
            expected.append(bound)
    for rows in result:
        for _, bound in rows:
            if id(bound) not in seen:
                seen.add(id(bound))
                expected.append(bound)
    return expected


def _check(world: World, operations: Any, which: int) -> None:
    parts, attestations = world.side(which)
    _check_equal_to_per_part(parts, attestations, operations, which)
    result, created = _allocated_bound(lambda: _ordered(parts, attestations, operations, which))
    expected = _expected_order(result, operations, which)
    assert len(created) == len(expected) == sum(len(rows) for rows in result)
    assert all(a is b for a, b in zip(created, expected))


WORLDS = {
    "few": World(
        tp_placement(2, prefix="s", dp=2, shape=(8, 24), tensors=tuple(f"x{k}" for k in range(5))),
        tp_placement(4, prefix="t", shape=(8, 24), dim=1, tensors=tuple(f"x{k}" for k in range(5))),
    ),
    "many": World(  # more target parts than the heads take
        tp_placement(2, prefix="s", dp=2, shape=(4, 80), tensors=("a", "b")),
        tp_placement(40, prefix="t", shape=(4, 80), dim=1, tensors=("a", "b")),
    ),
}


@pytest.mark.parametrize("name", sorted(WORLDS))
@pytest.mark.parametrize("which", [0, 1])
def test_plan_order_and_reversed(name: str, which: int) -> None:
    world = WORLDS[name]
    operations = world.logical.operations
    _check(world, operations, which)
    _check(world, operations[::-1], which)


@settings(deadline=None, max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(WORLDS)), st.sampled_from([0, 1]), st.data())
def test_any_operation_order_keeps_first_use_order(name: str, which: int, data: st.DataObject) -> None:
    world = WORLDS[name]
    _check(world, _mutated_operations(world.logical.operations, data, window=8), which)


def _mutated_operations(operations: Any, data: st.DataObject, *, window: int) -> tuple[Any, ...]:
    """Up to three drawn edits of ``operations``: shuffled (all, or a window of ``window``), one
    dropped, one repeated, a foreign object inserted (it gives no hint)."""
    operations = list(operations)
    for _ in range(data.draw(st.integers(0, 3))):
        kind = data.draw(st.sampled_from(["shuffle", "shuffle-window", "drop", "repeat", "foreign"]))
        rng = random.Random(data.draw(st.integers(0, 10_000)))
        if kind == "shuffle":
            rng.shuffle(operations)
        elif kind == "shuffle-window" and operations:
            at = rng.randrange(len(operations))
            shuffled = operations[at : at + window]
            rng.shuffle(shuffled)
            operations[at : at + window] = shuffled
        elif kind == "drop" and operations:
            del operations[rng.randrange(len(operations))]
        elif kind == "repeat" and operations:
            at = rng.randrange(len(operations))
            operations.insert(rng.randrange(len(operations) + 1), operations[at])
        elif kind == "foreign":
            operations.insert(rng.randrange(len(operations) + 1), object())
    return tuple(operations)

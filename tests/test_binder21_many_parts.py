"""More parts than a linear scan of their next fragments suits (over 32: the Kimi-class target has
128): ``logical_target_cover``'s merge of the placement's fragments with the parts' and
``bound_fragments_ordered``'s heads keep the parts' next fragments by address as well.

Whatever the order of the operations or the listed fragments, the answers must be the ones the
tables by id and address give (the twelve-argument cover call; the per-part rows and the
first-use allocation order), and an object that is two parts' next fragment at once must leave
the decision to the tables."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_executor import tp_placement
from test_binder20_cover_merge import _agree, _copy, _world
from test_binder20_ordered_heads import _check, _expected_order, _mutated_operations
from test_native_binder_ordered import World, _allocated_bound, _check_equal_to_per_part, _ordered

WIDE = _world(70, 2)
HEADS = World(
    tp_placement(2, prefix="s", dp=2, shape=(4, 140), tensors=("a", "b")),
    tp_placement(70, prefix="t", shape=(4, 140), dim=1, tensors=("a", "b")),
)


def test_many_parts_merge_and_decide_as_the_tables() -> None:
    source, target, plan = WIDE
    assert len(target.parts) == 70
    assert _agree(WIDE) == (True, True)
    # the placement's tuple in part order (not a merge of id orders): the same fragments
    listed = tuple(f for part in target.parts for f in part.fragments)
    assert _agree(WIDE, target_fragments=listed) == (True, True)


def test_an_object_first_in_two_parts_declines_as_the_tables_do() -> None:
    source, target, plan = WIDE
    parts = list(target.parts)
    shared = parts[0].fragments[0]
    parts[41] = _copy(parts[41], fragments=(shared,) + parts[41].fragments)
    listed = sorted((f for part in parts for f in part.fragments), key=lambda f: f.placement_fragment_id)
    assert _agree(WIDE, parts=tuple(parts), target_fragments=tuple(listed)) is None


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_forgeries_with_many_parts_agree_with_the_unmerged_call(data: st.DataObject) -> None:
    source, target, plan = WIDE
    operations = list(plan.operations)
    parts = list(target.parts)
    listed = list(target.fragments)
    for _ in range(data.draw(st.integers(0, 3))):
        kind = data.draw(st.sampled_from(["shuffle-ops", "shuffle-listed", "drop-op", "swap-listed", "drop-listed",
                                          "clash", "shared", "copy-target"]))
        rng = random.Random(data.draw(st.integers(0, 10_000)))
        if kind == "shuffle-ops":
            rng.shuffle(operations)
        elif kind == "shuffle-listed":
            at = rng.randrange(len(listed))
            window = listed[at : at + 40]
            rng.shuffle(window)
            listed[at : at + 40] = window
        elif kind == "drop-op" and operations:
            operations.pop(rng.randrange(len(operations)))
        elif kind == "swap-listed" and len(listed) > 1:
            at = rng.randrange(len(listed) - 1)
            listed[at], listed[at + 1] = listed[at + 1], listed[at]
        elif kind == "drop-listed" and listed:
            listed.pop(rng.randrange(len(listed)))
        elif kind == "clash":
            p = rng.randrange(len(parts) - 1)
            a, b = parts[p], parts[p + 1]
            clash = _copy(b.fragments[0], placement_fragment_id=a.fragments[-1].placement_fragment_id)
            parts[p + 1] = _copy(b, fragments=tuple(sorted(
                (clash,) + b.fragments[1:], key=lambda f: f.placement_fragment_id)))
            listed = sorted((f for part in parts for f in part.fragments), key=lambda f: f.placement_fragment_id)
        elif kind == "shared":
            p, q = rng.sample(range(len(parts)), 2)
            shared = parts[p].fragments[rng.randrange(len(parts[p].fragments))]
            parts[q] = _copy(parts[q], fragments=tuple(sorted(
                parts[q].fragments + (shared,), key=lambda f: f.placement_fragment_id)))
            listed = sorted((f for part in parts for f in part.fragments), key=lambda f: f.placement_fragment_id)
        elif kind == "copy-target" and operations:
            at = rng.randrange(len(operations))
            operations[at] = _copy(operations[at], target=_copy(operations[at].target))
    _agree(WIDE, operations=tuple(operations), parts=tuple(parts), target_fragments=tuple(listed))


@pytest.mark.parametrize("which", [0, 1])
def test_many_heads_plan_order_and_reversed(which: int) -> None:
    assert len(HEADS.target.parts) == 70
    operations = HEADS.logical.operations
    _check(HEADS, operations, which)
    _check(HEADS, operations[::-1], which)


@settings(deadline=None, max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([0, 1]), st.data())
def test_many_heads_any_operation_order_keeps_first_use_order(which: int, data: st.DataObject) -> None:
    _check(HEADS, _mutated_operations(HEADS.logical.operations, data, window=16), which)


@pytest.mark.parametrize("twice", [0, 35, 69])
def test_a_part_listed_twice_leaves_the_order_to_the_table(twice: int) -> None:
    """Part `twice` given again as the last part: its fragments are two parts' next fragments at
    once. The table decides: an operation's fragment gives its first entry (part order), once;
    the rest follow in part order."""
    parts, attestations = HEADS.side(0)
    parts = parts + (parts[twice],)
    attestations = attestations + (attestations[twice],)
    operations = HEADS.logical.operations
    result = _check_equal_to_per_part(parts, attestations, operations, 0)
    result, created = _allocated_bound(lambda: _ordered(parts, attestations, operations, 0))
    expected = _expected_order(result, operations, 0)
    assert len(created) == len(expected) == sum(len(rows) for rows in result)
    assert all(a is b for a, b in zip(created, expected))


@pytest.mark.parametrize("twice", [0, 35, 69])
def test_a_part_that_becomes_another_parts_next_fragments(twice: int) -> None:
    """A last part holding part `twice`'s fragments after its first: an object becomes two parts'
    next fragment only once the walk has passed that first one. The rows stay the per-part
    kernel's and every bound fragment is made once."""
    parts, attestations = HEADS.side(0)
    parts = parts + (parts[twice][1:],)
    attestations = attestations + (attestations[twice],)
    for operations in (HEADS.logical.operations, HEADS.logical.operations[::-1]):
        _check_equal_to_per_part(parts, attestations, operations, 0)
        result, created = _allocated_bound(lambda: _ordered(parts, attestations, operations, 0))
        made = [bound for rows in result for _, bound in rows]
        assert len(created) == len(made) and {id(b) for b in created} == {id(b) for b in made}

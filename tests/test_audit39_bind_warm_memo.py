"""AUDIT39 (item 3), closed by AUDIT40 (_memo_proof.memo_proved;
tests/test_audit4040_bind_cold_memos.py extends the cases to every field bind's C steps read,
planted on the class and on a base). Bind's
C steps (csrc/binder.c, regioncheck.c, exact.c) check a value class's C-owned layout through
per-call-site memos (layout.h ``mr_layout_memo``: "a class attribute added later that shadows a
field does not matter to these readers"), while the steps they stand for are rules that read
attributes. In a process that has bound once (the memos warm), a property planted afterwards on
a layout field is ignored by those steps: bind then returns a plan that the rules refuse while the
property stands (PlacementFragment.tensor_id, RuntimeBindingFragment.address), or refuses with
another step's message than the cold call (the rules: the layout check declines, the Python steps
run). The revalidation's per-call proof (``_native.fields_unshadowed``) does not reach these
memos; a fix needs the same proof at bind's entry and the memo'd steps to decline when it fails
(the memo sites are inside binder.c's per-operation code, which BIND39 is reworking)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from forge_helpers import outcome, rules_only, sized_world

from mooncake.reshard.contracts.fragments import RuntimeBindingFragment
from mooncake.reshard.weight import bind_logical_transfer_plan
from mooncake.reshard.weight.types import PlacementFragment

from test_audit39_class_descriptors import _next, _other, _planter


def _bind(world: Any) -> Any:
    logical, targets, sources, _memory = world
    return outcome(lambda: bind_logical_transfer_plan(logical, targets, source_bindings=sources))


def _rules(plan: Any) -> Any:
    return rules_only(lambda: dataclasses.replace(plan))


@pytest.mark.parametrize(
    "cls,field,edit", [(PlacementFragment, "tensor_id", _next), (RuntimeBindingFragment, "address", _other)]
)
def test_a_warm_bind_returns_no_plan_the_rules_refuse(cls, field, edit):
    _bind(sized_world(2))  # (warms the memos)
    world = sized_world(2)
    undo = _planter(cls, field, edit)()
    try:
        plan = _bind(world)
        verdict = _rules(plan) if not isinstance(plan, tuple) else None
    finally:
        undo()
    assert isinstance(plan, tuple) or not isinstance(verdict, tuple), verdict


def test_a_warm_bind_refuses_as_the_rules_do():
    _bind(sized_world(2))
    world = sized_world(2)
    undo = _planter(PlacementFragment, "global_offset", _next)()
    try:
        result = _bind(world)
    finally:
        undo()
    # (what a cold process's bind answers: the layout check declines, the Python step refuses)
    assert result == ("ValueError", "logical target fragment is not fully covered: t-w000-d0t0")

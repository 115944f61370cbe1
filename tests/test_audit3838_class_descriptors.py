"""AUDIT38 (session 38), an open soundness hole, recorded (strict xfail: fix it, then drop the
marker): the fast revalidation's C passes read the fields of the value classes from their
instance state (C-owned layout slots, or the instance dict), while the rule-by-rule path reads
them as attributes. A data descriptor (a property) set on the class after import for a field
makes the two differ: the C passes see the stored value and accept, the rules see the
descriptor's value and refuse. ``csrc/layout.h`` (mr_layout_memo) states this choice for state
readers ("a class attribute added later that shadows a field does not matter to these
readers"), but the rules are attribute readers. No Python code runs in the passes for these
reads (the descriptor is never called there), so this is not the mid-pass class of
tests/test_audit3838_fragment_reads.py; a fix needs a per-call proof that no class between each
value class and its layout base (or in a dict-backed class's MRO) holds a field name.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import pytest

from forge_helpers import sized_world

from mooncake.reshard.contracts.fragments import RuntimeBindingFragment
from mooncake.reshard.weight import bind_logical_transfer_plan
from mooncake.reshard.weight._planner import bound_contracts as bc


def _plan() -> Any:
    logical, targets, sources, _memory = sized_world(2)
    return bind_logical_transfer_plan(logical, targets, source_bindings=sources)


def _stored(cls: type, field: str) -> Callable[[Any], Any]:
    for klass in cls.__mro__:
        if field in klass.__dict__:
            slot = klass.__dict__[field]
            return lambda obj: slot.__get__(obj, cls)
    return lambda obj: obj.__dict__[field]


CASES = [
    # (half: a larger nbytes is refused only when it reaches a neighbour's bytes, which depends on
    # where the allocator put the memory: the 3.10 run of CI accepted a thousandfold one)
    (RuntimeBindingFragment, "nbytes", lambda v: v // 2),
    (RuntimeBindingFragment, "worker_id", lambda v: v + "x"),
    (bc.ExecutorTransferPlan, "runtime_lease_id", lambda v: v + "x"),
]


@pytest.mark.parametrize("cls,field,edit", CASES, ids=[f"{c.__name__}.{f}" for c, f, _ in CASES])
def test_a_planted_field_descriptor_is_refused_as_by_the_rules(cls, field, edit):
    plan = _plan()
    stored = _stored(cls, field)
    own = cls.__dict__.get(field)
    setattr(cls, field, property(lambda self: edit(stored(self))))
    try:
        real = bc._fast_revalidate_live
        bc._fast_revalidate_live = lambda *args, **kwargs: False
        try:
            with pytest.raises(ValueError):  # the rules refuse
                dataclasses.replace(plan)
        finally:
            bc._fast_revalidate_live = real
        with pytest.raises(ValueError):  # the fast path must too (it accepts: the hole)
            dataclasses.replace(plan)
    finally:
        if own is None:
            delattr(cls, field)
        else:
            setattr(cls, field, own)
    # (a fresh plan: views the rules cached on this one while the descriptor stood keep its values)
    dataclasses.replace(_plan())

"""Foreign code inside the unsealed fast revalidation, through instance-dict keys (session 24).

The fast revalidation's C passes read the instance dicts of exact package objects by key
(``PyDict_GetItemWithError`` with the interned field names). A dict probe compares a stored key
whose hash matches with ``==``; when that stored key is a str subclass, its ``__eq__`` (user code)
runs inside the pass. A sealed bind refuses such keys at entry (``inert_graph``) or trips its
watch, but ``dataclasses.replace()`` and direct construction are unsealed, so the code runs while
the passes hold borrowed references and take their decisions (it could edit what a pass already
checked, or drop what it is reading). The same holds on ``18a3c67`` for parts, ranks, placements
and attestations (``revalidate_shapes`` added the descriptors and axes).

Pinned as a strict xfail until the unsealed fast path refuses such dicts (or gates like bind).
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any, Callable

import pytest

from forge_helpers import sized_world

from mooncake.reshard.weight import bind_logical_transfer_plan


def _plan() -> Any:
    logical, targets, sources, _memory = sized_world(2)
    return bind_logical_transfer_plan(logical, targets, source_bindings=sources)


_TARGETS: dict[str, tuple[Callable[[Any], Any], str]] = {
    "descriptor": (lambda plan: plan.target_placement.parts[0].tensors[0], "tensor_id"),
    "part": (lambda plan: plan.target_placement.parts[0], "participant_id"),
    "rank": (lambda plan: plan.target_placement.parts[0].rank, "tp"),
    "placement": (lambda plan: plan.target_placement, "placement_id"),
}


def _fast_path_callers(which: str) -> list[str]:
    """Replaces ``which``'s instance dict key by itself after a str-subclass key of the same
    hash (so every probe for it compares that key first), runs ``replace()``, and returns the
    functions from which the key's ``__eq__`` was called inside the fast revalidation."""
    plan = _plan()
    reach, name = _TARGETS[which]
    callers: list[str] = []

    class CollidingKey(str):
        __slots__ = ()

        def __hash__(self) -> int:
            return hash(name)

        def __eq__(self, other: object) -> bool:
            caller = sys._getframe(1).f_code.co_name
            if caller == "_fast_revalidate_live":
                callers.append(caller)
            return False

    state = reach(plan).__dict__
    value = state.pop(name)
    state[CollidingKey("colliding")] = None
    state[name] = value
    assert type(dataclasses.replace(plan)).__name__ == "TransferPlan"
    return callers


def test_the_probe_sees_foreign_code_in_a_plain_key_order() -> None:
    """The probe's own check: with the colliding key inserted after the real one, probes find
    the real key first and no foreign code runs (so the xfails below test the key order)."""
    plan = _plan()
    part = plan.target_placement.parts[0]
    ran: list[str] = []

    class Later(str):
        __slots__ = ()

        def __hash__(self) -> int:
            return hash("participant_id")

        def __eq__(self, other: object) -> bool:
            ran.append(sys._getframe(1).f_code.co_name)
            return False

    part.__dict__[Later("later")] = None
    assert type(dataclasses.replace(plan)).__name__ == "TransferPlan"
    assert "_fast_revalidate_live" not in ran


@pytest.mark.parametrize("which", sorted(_TARGETS))
def test_no_foreign_code_runs_inside_the_unsealed_fast_revalidation(which: str) -> None:
    assert _fast_path_callers(which) == []

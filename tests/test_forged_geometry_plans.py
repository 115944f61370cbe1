"""Forged region geometry inside revalidated plans (spec §13 gap, issue 5).

``TransferRegion`` is pickled by default dataclass pickling, so a region whose fields were set
with ``object.__setattr__`` is not revalidated by its own ``__post_init__`` when the plan holding
it is unpickled, copied or replaced; the plan rules only call ``validate_bounds()``. The final
``recheck_regions`` step rejects such a plan with the region's own message (what
``TransferRegion(...)`` construction raises for the forged values), while a forgery that an
earlier spec rule already rejects keeps that rule's message.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any, Callable

import pytest

from test_binding_attacks import World, _stored_world

from mooncake.reshard.weight import bind_logical_transfer_plan, plan_stored_transfer_to_target_placement
from mooncake.reshard.weight._planner.contracts import TransferRegion


def _logical() -> Any:
    return World().logical


def _bound() -> Any:
    return World().bind()


def _stored_logical() -> Any:
    target, manifest, _targets, _memory = _stored_world()
    return plan_stored_transfer_to_target_placement(manifest, target)


def _stored_bound() -> Any:
    target, manifest, targets, _memory = _stored_world()
    logical = plan_stored_transfer_to_target_placement(manifest, target)
    return bind_logical_transfer_plan(logical, targets, source_manifest=manifest)


PLANS: dict[str, Callable[[], Any]] = {
    "logical": _logical,
    "stored-logical": _stored_logical,
    "bound": _bound,
    "stored-bound": _stored_bound,
}

ROUND_TRIPS: dict[str, Callable[[Any], Any]] = {
    "pickle": lambda plan: pickle.loads(pickle.dumps(plan, protocol=pickle.HIGHEST_PROTOCOL)),
    "pickle-2": lambda plan: pickle.loads(pickle.dumps(plan, protocol=2)),
    "copy": copy.copy,
    "replace": dataclasses.replace,
}

# Forgeries the plan rules before the recheck accept: the region's own message is expected.
GEOMETRY_FORGERIES: dict[str, Callable[[Any], Any]] = {
    "target_base_offset": lambda op: -1,
    "source_base_offset": lambda op: op.source_base_offset + (2 if op.source_base_offset < 2 else -2),
    "source_strides": lambda op: tuple(s - 2 for s in op.source_strides),
    "target_strides": lambda op: tuple(0 for _ in op.target_strides),
    "outer_loop_counts": lambda op: tuple(c - 1 for c in op.outer_loop_counts),
    "inner_bytes": lambda op: op.inner_bytes - 2,
    "tensor_id": lambda op: "other",
}

# Forgeries an earlier spec rule (target coverage) already rejects: that message stays first.
OVERLAP_FORGERIES: dict[str, Callable[[Any], Any]] = {
    "overlap_offset": lambda op: tuple(v + (1 if i == len(op.overlap_offset) - 1 else 0) for i, v in enumerate(op.overlap_offset)),
    "overlap_shape": lambda op: tuple(v - (1 if i == len(op.overlap_shape) - 1 else 0) for i, v in enumerate(op.overlap_shape)),
}


def _region_message(op: Any, name: str, value: Any) -> str:
    fields = {f.name: getattr(op, f.name) for f in dataclasses.fields(TransferRegion)}
    fields[name] = value
    with pytest.raises(ValueError) as info:
        TransferRegion(**fields)
    return str(info.value)


@pytest.mark.parametrize("how", sorted(ROUND_TRIPS))
@pytest.mark.parametrize("kind", sorted(PLANS))
def test_unforged_plans_still_revalidate(kind: str, how: str) -> None:
    plan = PLANS[kind]()
    again = ROUND_TRIPS[how](plan)
    assert again == plan
    assert again.operations == plan.operations


@pytest.mark.parametrize("how", sorted(ROUND_TRIPS))
@pytest.mark.parametrize("name", sorted(GEOMETRY_FORGERIES))
@pytest.mark.parametrize("kind", sorted(PLANS))
def test_forged_region_geometry_is_rejected_with_the_region_message(kind: str, name: str, how: str) -> None:
    plan = PLANS[kind]()
    for index in (0, len(plan.operations) - 1):
        plan = PLANS[kind]()
        op = plan.operations[index]
        value = GEOMETRY_FORGERIES[name](op)
        expected = _region_message(op, name, value)
        object.__setattr__(op, name, value)
        op.validate_bounds()  # the plan rules' own check passes: only the recheck can catch it
        with pytest.raises(ValueError) as info:
            ROUND_TRIPS[how](plan)
        assert type(info.value) is ValueError
        assert str(info.value) == expected, (kind, index, name, how)


@pytest.mark.parametrize("how", sorted(ROUND_TRIPS))
@pytest.mark.parametrize("name", sorted(OVERLAP_FORGERIES))
@pytest.mark.parametrize("kind", sorted(PLANS))
def test_forgeries_the_spec_already_rejects_keep_their_first_message(kind: str, name: str, how: str) -> None:
    plan = PLANS[kind]()
    op = plan.operations[0]
    value = OVERLAP_FORGERIES[name](op)
    region_message = _region_message(op, name, value)
    object.__setattr__(op, name, value)
    side = "bound" if kind.endswith("bound") else "logical"
    with pytest.raises(ValueError) as info:
        ROUND_TRIPS[how](plan)
    assert str(info.value).startswith(f"{side} target fragment is not fully covered")
    assert str(info.value) != region_message


@pytest.mark.parametrize("kind", sorted(PLANS))
def test_the_first_forged_operation_is_reported(kind: str) -> None:
    plan = PLANS[kind]()
    first, last = plan.operations[0], plan.operations[-1]
    expected = _region_message(last, "target_base_offset", -1)
    object.__setattr__(last, "target_base_offset", -1)
    object.__setattr__(first, "inner_bytes", first.inner_bytes)  # unchanged value: still valid
    with pytest.raises(ValueError) as info:
        dataclasses.replace(plan)
    assert str(info.value) == expected

"""``TransferPlan.__init__`` is written out (the generated one's ``object.__setattr__`` per field
was about half of ``dataclasses.replace``'s own cost): the same signature, the same instance
dict, ``__post_init__`` run the same way, and a subclass still set through ``object.__setattr__``."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest
from forge_helpers import tp3_bound_plan

from mooncake.reshard.weight import PlanningLimits, TransferPlan
from mooncake.reshard.weight._planner import bound_contracts as bc


def _generated_twin() -> Any:
    """A frozen dataclass with TransferPlan's fields and annotations whose __init__ the
    dataclass machinery generates (what TransferPlan had before its __init__ was written out)."""
    namespace: dict[str, Any] = {"__annotations__": dict(TransferPlan.__annotations__)}
    for item in dataclasses.fields(TransferPlan):
        namespace[item.name] = dataclasses.field(
            default=item.default, default_factory=item.default_factory, init=item.init
        )
    namespace["__annotations__"].pop("_operation_views", None)
    namespace["__module__"] = TransferPlan.__module__
    return dataclasses.dataclass(frozen=True)(type("TransferPlan", (), namespace))


def test_signature_is_the_generated_one() -> None:
    assert inspect.signature(TransferPlan) == inspect.signature(_generated_twin())
    assert str(inspect.signature(TransferPlan)).endswith("source_manifest_identity: 'Optional[StoredManifestIdentity]' = None) -> None")
    assert [f.name for f in dataclasses.fields(TransferPlan)] == [f.name for f in dataclasses.fields(_generated_twin())]


def test_replace_and_constructor_set_every_field_in_field_order() -> None:
    _, plan, _ = tp3_bound_plan(("w",))
    again = dataclasses.replace(plan)
    assert again == plan and again is not plan
    names = [f.name for f in dataclasses.fields(TransferPlan)]
    # (the generated __init__ set the init fields in field order; revalidation adds the rest)
    assert [name for name in again.__dict__ if name in names] == names
    for name in names:
        assert again.__dict__[name] is plan.__dict__[name] or name == "source_stored_fragment_snapshots"
    positional = TransferPlan(*(getattr(plan, f.name) for f in dataclasses.fields(TransferPlan) if f.init))
    assert positional == plan


def test_default_planning_limits_are_a_fresh_default_object() -> None:
    _, plan, _ = tp3_bound_plan(("w",))
    first = TransferPlan(plan.resource_id, plan.revision, plan.weight_generation, plan.target_placement,
                         plan.operations, source_executors=plan.source_executors,
                         target_executors=plan.target_executors)
    second = dataclasses.replace(first, planning_limits=bc._FACTORY_DEFAULT)
    assert type(first.planning_limits) is PlanningLimits and first.planning_limits == PlanningLimits()
    assert second.planning_limits == PlanningLimits() and second.planning_limits is not first.planning_limits


def test_post_init_runs_and_refuses() -> None:
    _, plan, _ = tp3_bound_plan(("w",))
    with pytest.raises(ValueError, match="transfer plan identifiers must not be empty"):
        dataclasses.replace(plan, resource_id="")
    with pytest.raises(ValueError, match="transfer plan weight_generation must be non-negative"):
        dataclasses.replace(plan, weight_generation=-1)


def test_subclass_fields_go_through_object_setattr() -> None:
    """A subclass (not a dataclass of its own) with a data descriptor under a field name: the
    generated __init__ called the descriptor's setter; so does the written-out one."""
    _, plan, _ = tp3_bound_plan(("w",))
    seen: list[Any] = []

    class Watched(TransferPlan):
        @property
        def revision(self) -> Any:
            return self.__dict__["revision"]

        @revision.setter
        def revision(self, value: Any) -> None:
            seen.append(value)
            self.__dict__["revision"] = value

    watched = Watched(*(getattr(plan, f.name) for f in dataclasses.fields(TransferPlan) if f.init))
    assert seen == [plan.revision]
    assert watched.operations is plan.operations


def test_subclass_post_init_override_runs() -> None:
    _, plan, _ = tp3_bound_plan(("w",))
    calls: list[str] = []

    class Counted(TransferPlan):
        def __post_init__(self) -> None:
            calls.append("post")
            super().__post_init__()

    Counted(*(getattr(plan, f.name) for f in dataclasses.fields(TransferPlan) if f.init))
    assert calls == ["post"]

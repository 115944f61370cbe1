"""``_native.logical_target_cover`` reads each fragment's and each operation's fields from one
scan of its instance dict (keys matched to the interned field names by identity, an equal key
looked up, a dict with a key that is not an exact str read attribute by attribute as before) and
keeps them for its later passes. Forged dicts (reordered, extra, equal-but-not-interned and
non-str keys, missing fields) at several positions decide exactly as the genuine objects or as
the attribute reads do (declining where a field is missing), in the 11-, 12- and 14-argument
forms; accepted plans pass the Python checks."""

from __future__ import annotations

from typing import Any, Callable, Optional

import pytest

from memory_executor import tp_placement
from spec_helpers import field_state, forged_copy, store_state

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank, PlacementFragment, StoredFragmentSnapshot, TensorDescriptor
from mooncake.reshard.weight._planner import validation
from mooncake.reshard.weight._planner.contracts import PlacementExecutorPlan, TransferRegion
from mooncake.reshard.weight._planner.validation import validate_logical_target_coverage
from mooncake.reshard.weight.part import WeightPlacementPart
from mooncake.reshard.weight.planner import plan_placement_transfer

CLASSES = (TransferRegion, PlacementFragment, WeightPlacementPart, PlacementExecutorPlan, ParallelRank, TensorDescriptor)

SOURCE = tp_placement(2, prefix="s", dp=2, shape=(4, 6), tensors=tuple(f"t{k}" for k in range(6)))
TARGET = tp_placement(3, prefix="t", shape=(4, 6), tensors=tuple(f"t{k}" for k in range(6)))
PLAN = plan_placement_transfer(SOURCE, TARGET)


def _forged(value: Any, state: dict[Any, Any]) -> Any:
    """A new instance of value's class holding state: its instance dict, or, for a class stored in
    a C-owned layout (TransferRegion: no instance dict), each item stored in state's order with
    object.__setattr__ (a key that is not a field cannot be stored: AttributeError / TypeError)."""
    forged = object.__new__(type(value))
    if hasattr(forged, "__dict__"):
        store_state(forged, state)
    else:
        for key, item in state.items():
            object.__setattr__(forged, key, item)
    return forged


# (placement fragments and regions are stored in C layouts: fields stored in another order or
# through an equal name that is not the interned one are the genuine state; an extra or a
# non-str key cannot be stored at all)


def reordered(value: Any) -> Any:
    return _forged(value, dict(reversed(list(field_state(value).items()))))


def extra(value: Any) -> Any:
    return _forged(value, {"zz_extra": 1, **field_state(value), "aa_extra": 2})


def not_interned(value: Any) -> Any:
    return _forged(value, {"".join(list(key)): item for key, item in field_state(value).items()})


def non_str_key(value: Any) -> Any:
    state: dict[Any, Any] = dict(field_state(value))
    state[7] = "seven"
    return _forged(value, state)


def without(name: str) -> Callable[[Any], Any]:
    def forge(value: Any) -> Any:
        return _forged(value, {k: v for k, v in field_state(value).items() if k != name})

    forge.__name__ = f"without_{name}"
    return forge


def _calls(operations: tuple[Any, ...], parts: tuple[Any, ...]) -> tuple[Any, Any, Any]:
    common = (operations, parts, PLAN.target_executors, PLAN.target_tensors, PLAN.target_placement.placement_id, *CLASSES)
    fragments = tuple(fragment for part in parts for fragment in part.fragments)
    source_fragments = tuple(fragment for part in PLAN.source_placement.parts for fragment in part.fragments)
    return (
        _native.logical_target_cover(*common),
        _native.logical_target_cover(*common, StoredFragmentSnapshot),
        _native.logical_target_cover(*common, StoredFragmentSnapshot, fragments, source_fragments),
    )


GENUINE = _calls(PLAN.operations, PLAN.target_placement.parts)


def _with_fragment(position: int, forge: Callable[[Any], Any]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """The plan's operations and parts with the target fragment at position replaced by its forgery
    (in its part and as every operation's target)."""
    fragments = [fragment for part in PLAN.target_placement.parts for fragment in part.fragments]
    old = fragments[position % len(fragments)]
    new = forge(old)
    parts = tuple(
        _forged(part, {**field_state(part), "fragments": tuple(new if f is old else f for f in part.fragments)})
        if any(f is old for f in part.fragments)
        else part
        for part in PLAN.target_placement.parts
    )
    operations = tuple(forged_copy(op, target=new) if op.target is old else op for op in PLAN.operations)
    return operations, parts


def _with_operation(position: int, forge: Callable[[Any], Any]) -> tuple[Any, ...]:
    ops = list(PLAN.operations)
    ops[position % len(ops)] = forge(ops[position % len(ops)])
    return tuple(ops)


def test_genuine_plan_is_accepted() -> None:
    assert GENUINE[0] is True and GENUINE[1] is True and GENUINE[2] == (True, True)
    assert len(PLAN.operations) > 20


@pytest.mark.parametrize("forge", [reordered, not_interned])
@pytest.mark.parametrize("position", [0, 1, 5, -1])
def test_benign_forged_fragment_dicts_decide_as_genuine(forge: Callable[[Any], Any], position: int) -> None:
    operations, parts = _with_fragment(position, forge)
    assert _calls(operations, parts) == GENUINE


@pytest.mark.parametrize("forge", [reordered, not_interned])
@pytest.mark.parametrize("position", [0, 1, 5, -1])
def test_benign_forged_operation_dicts_decide_as_genuine(forge: Callable[[Any], Any], position: int) -> None:
    # (a region is stored in its C layout: fields stored in another order or through an equal
    # name that is not the interned one are the genuine state)
    assert _calls(_with_operation(position, forge), PLAN.target_placement.parts) == GENUINE


@pytest.mark.parametrize("forge", [extra, non_str_key])
def test_an_operation_cannot_hold_a_key_that_is_not_a_field(forge: Callable[[Any], Any]) -> None:
    # what an instance dict could hold besides the fields has no place in the region's (or a
    # placement fragment's) C layout
    with pytest.raises((AttributeError, TypeError)):
        forge(PLAN.operations[0])
    with pytest.raises((AttributeError, TypeError)):
        forge(PLAN.target_placement.parts[0].fragments[0])


@pytest.mark.parametrize("name", ["global_offset", "local_shape", "placement_fragment_id"])
def test_fragment_missing_a_read_field_declines(name: str) -> None:
    operations, parts = _with_fragment(3, without(name))
    assert _calls(operations, parts) == (None, None, None)


@pytest.mark.parametrize("name", ["rank", "pipeline_stage_id"])
def test_fragment_missing_a_route_field_keeps_the_checks(name: str) -> None:
    # only the fused route answer reads these: the checks still pass, the routes are not plain
    operations, parts = _with_fragment(3, without(name))
    first, routes, fused = _calls(operations, parts)
    assert first is True and routes is False and fused[0] is False


@pytest.mark.parametrize("name", ["target", "overlap_offset", "overlap_shape"])
def test_operation_missing_a_read_field_declines(name: str) -> None:
    assert _calls(_with_operation(4, without(name)), PLAN.target_placement.parts) == (None, None, None)


def test_operation_missing_its_source_keeps_the_checks() -> None:
    first, routes, fused = _calls(_with_operation(4, without("source")), PLAN.target_placement.parts)
    assert first is None or first is True
    assert routes in (None, False) and fused in (None, (False, False))


def test_shifted_box_in_a_forged_dict_is_still_checked() -> None:
    def shifted(op: Any) -> Any:
        state = dict(reversed(list(field_state(op).items())))
        state["overlap_offset"] = tuple(x + 1 for x in op.overlap_offset)
        return _forged(op, state)

    assert _calls(_with_operation(2, shifted), PLAN.target_placement.parts) == (None, None, None)


def test_accepted_plans_pass_the_python_checks() -> None:
    original = validation._target_checks_accepted
    validation._target_checks_accepted = lambda plan, target: False  # type: ignore[assignment]
    try:
        validate_logical_target_coverage(PLAN)
    finally:
        validation._target_checks_accepted = original  # type: ignore[assignment]

"""Binding step 5's snapshot check decided in step 2's C call (``logical_target_cover`` with 14
arguments: the target and source placements' ``fragments``; ``binding._recheck_logical_target``
asks for it through ``validation._FUSED_STEP5``). The fused answer may be True only where
``operations_snapshots`` with the placements' fragment indexes returns True; binding with and
without the fused answer reports identical outcomes (plans, first errors), and step 5 runs as
before whenever the objects it would read are not the very ones the fused call read."""

from __future__ import annotations

from typing import Any, Optional

import pytest

from memory_executor import HostMemory, host_bindings, tp_placement

from spec_helpers import field_state, store_state

from mooncake.reshard import _native
from mooncake.reshard.weight import StoredFragmentSnapshot
from mooncake.reshard.weight._planner import binding as binding_module
from mooncake.reshard.weight._planner import validation
from mooncake.reshard.weight._planner.contracts import TransferRegion
from mooncake.reshard.weight.planner import bind_logical_transfer_plan, plan_placement_transfer
from mooncake.reshard.weight.types import PlacementFragment

from test_native_binder_routes import _copy


def _world(target_parts: int = 3) -> tuple[Any, Any, Any]:
    source = tp_placement(2, prefix="s", dp=2, shape=(4, 6), tensors=("v", "w"))
    target = tp_placement(target_parts, prefix="t", shape=(4, 6), tensors=("v", "w"))
    logical = plan_placement_transfer(source, target)
    memory = HostMemory()
    return logical, host_bindings(target, memory, prefix="dst"), host_bindings(source, memory, prefix="src")


def _classes() -> tuple[Any, ...]:
    if not validation._COVER_CLASSES:
        genuine = _world()[0]
        assert validation._target_checks_accepted(genuine, genuine.target_placement)
    return tuple(validation._COVER_CLASSES[:6])


def _fused(plan: Any, target_fragments: Any = None, source_fragments: Any = None) -> Any:
    state = field_state(plan)
    target = plan.target_placement
    return _native.logical_target_cover(
        state["operations"],
        target.parts,
        state["target_executors"],
        state["target_tensors"],
        target.placement_id,
        *_classes(),
        StoredFragmentSnapshot,
        target.fragments if target_fragments is None else target_fragments,
        plan.source_placement.fragments if source_fragments is None else source_fragments,
    )


def _separate(plan: Any, target_fragments: Any = None, source_fragments: Any = None) -> Optional[bool]:
    target_fragments = plan.target_placement.fragments if target_fragments is None else target_fragments
    source_fragments = plan.source_placement.fragments if source_fragments is None else source_fragments
    try:
        target_index = {f.placement_fragment_id: f for f in target_fragments}
        source_index = {f.placement_fragment_id: f for f in source_fragments}
    except Exception:
        return None
    return _native.operations_snapshots(
        plan.operations, TransferRegion, PlacementFragment, target_index, source_index
    )


def _check(plan: Any, target_fragments: Any = None, source_fragments: Any = None) -> Any:
    fused = _fused(plan, target_fragments, source_fragments)
    if fused is None:
        return None
    assert type(fused) is tuple and len(fused) == 2
    if fused[1] is True:
        assert _separate(plan, target_fragments, source_fragments) is True
    return fused[1]


def test_genuine_plan_is_decided() -> None:
    logical, _, _ = _world()
    assert _check(logical) is True
    target = logical.target_placement
    # the parts' fragments in another order: the same index
    assert _check(logical, target_fragments=target.fragments[::-1]) is True


def test_forged_fragment_lists_decline() -> None:
    logical, _, _ = _world()
    target, source = logical.target_placement, logical.source_placement
    tf, sf = target.fragments, source.fragments
    used = logical.operations[1].source
    cases = [
        (tf[:-1], sf),
        (tf + tf[:1], sf),
        (tf[:-1] + tf[:1], sf),
        (tf[:-1] + (_copy(tf[-1]),), sf),
        (list(tf), sf),
        (tf, list(sf)),
        (tf, tuple(f for f in sf if f is not used)),
        (tf, sf + (_copy(used),)),  # the last one with an id wins: not the operation's object
        (tf, sf + (object(),)),
        (tf, sf[:1] + (_copy(sf[0], placement_fragment_id=1),) + sf[1:]),
        (tf, (object.__new__(type("Fragment", (PlacementFragment,), {})),) + sf),
    ]
    for target_fragments, source_fragments in cases:
        assert _check(logical, target_fragments, source_fragments) is not True
    assert _check(logical, tf, sf + (_copy(sf[0], placement_fragment_id="spare"),)) is True


@pytest.mark.parametrize(
    "forgery",
    ["source_equal_copy", "source_other", "source_stored", "source_missing", "source_subclass", "source_id_int"],
)
def test_forged_operations_agree(forgery: str) -> None:
    logical, _, _ = _world()
    op = logical.operations[2]
    if forgery == "source_equal_copy":
        object.__setattr__(op, "source", _copy(op.source))
    elif forgery == "source_other":
        object.__setattr__(op, "source", logical.operations[0].target)
    elif forgery == "source_stored":
        object.__setattr__(op, "source", object.__new__(StoredFragmentSnapshot))
    elif forgery == "source_missing":
        object.__delattr__(op, "source")
    elif forgery == "source_subclass":
        forged = object.__new__(type("Fragment", (PlacementFragment,), {}))
        store_state(forged, field_state(op.source))
        object.__setattr__(op, "source", forged)
    else:
        object.__setattr__(op, "source", _copy(op.source, placement_fragment_id=7))
    assert _check(logical) is False


def test_hostile_arguments() -> None:
    logical, _, _ = _world()
    state = field_state(logical)
    target = logical.target_placement
    args = (state["operations"], target.parts, state["target_executors"], state["target_tensors"],
            target.placement_id, *_classes(), StoredFragmentSnapshot)
    with pytest.raises(TypeError):
        _native.logical_target_cover(*args, target.fragments)
    with pytest.raises(TypeError):
        _native.logical_target_cover(*args, target.fragments, (), ())
    for bad in (None, 1, "x", [], {}):
        assert _native.logical_target_cover(*args, bad, logical.source_placement.fragments) == (True, False)
        assert _native.logical_target_cover(*args, target.fragments, bad) == (True, False)
    assert _native.logical_target_cover((), *args[1:], target.fragments, ()) is None


# ---------------------------------------------------------------------------------------
# Binding with and without the fused step 5


def _outcome(logical: Any, targets: Any, sources: Any) -> Any:
    try:
        plan = bind_logical_transfer_plan(logical, targets, source_bindings=sources)
        return ("plan", len(plan.operations))
    except Exception as exc:  # the first failure, compared by type and message
        return (type(exc), str(exc))


def _snapshots_spy(patch: pytest.MonkeyPatch) -> list[Any]:
    calls: list[Any] = []
    original = _native.operations_snapshots

    def spy(*args: Any) -> Any:
        calls.append(args)
        return original(*args)

    patch.setattr(binding_module._native, "operations_snapshots", spy)
    return calls


def test_binding_takes_the_fused_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    logical, targets, sources = _world()
    with monkeypatch.context() as patch:
        calls = _snapshots_spy(patch)
        fused = bind_logical_transfer_plan(logical, targets, source_bindings=sources)
        assert calls == []  # step 5 decided at step 2
        assert validation._FUSED_STEP5.request is None
    with monkeypatch.context() as patch:
        patch.setattr(binding_module, "_fused_step5_request", lambda plan: None)
        calls = _snapshots_spy(patch)
        plain = bind_logical_transfer_plan(logical, targets, source_bindings=sources)
        assert len(calls) == 1
    assert fused == plain


def _forge(logical: Any, forgery: str) -> None:
    op = logical.operations[2]
    source, target = logical.source_placement, logical.target_placement
    if forgery == "source_equal_copy":
        object.__setattr__(op, "source", _copy(op.source))
    elif forgery == "source_unequal_copy":
        object.__setattr__(op, "source", _copy(op.source, pipeline_stage_id=5))
    elif forgery == "source_stored":
        object.__setattr__(op, "source", object.__new__(StoredFragmentSnapshot))
    elif forgery == "target_equal_copy":
        object.__setattr__(op, "target", _copy(op.target))
    elif forgery == "source_fragments_short":
        object.__setattr__(source, "fragments", tuple(f for f in source.fragments if f is not op.source))
    elif forgery == "source_fragments_list":
        object.__setattr__(source, "fragments", list(source.fragments))
    elif forgery == "target_fragments_short":
        object.__setattr__(target, "fragments", tuple(f for f in target.fragments if f is not op.target))
    elif forgery == "step4_first":
        # a step 4 failure (tensor catalogs) with a step 5 one: step 4's is reported
        object.__setattr__(op, "source", _copy(op.source, pipeline_stage_id=5))
        object.__setattr__(logical, "source_tensors", logical.source_tensors[:1])
    else:
        raise AssertionError(forgery)


@pytest.mark.parametrize(
    "forgery",
    [
        "source_equal_copy",
        "source_unequal_copy",
        "source_stored",
        "target_equal_copy",
        "source_fragments_short",
        "source_fragments_list",
        "target_fragments_short",
        "step4_first",
    ],
)
def test_forged_plans_give_the_same_outcome(monkeypatch: pytest.MonkeyPatch, forgery: str) -> None:
    outcomes = []
    for fused in (True, False):
        logical, targets, sources = _world()
        _forge(logical, forgery)
        with monkeypatch.context() as patch:
            if not fused:
                patch.setattr(binding_module, "_fused_step5_request", lambda plan: None)
            outcomes.append(_outcome(logical, targets, sources))
    assert outcomes[0] == outcomes[1], (forgery, outcomes)


@pytest.mark.parametrize("swap", ["operations", "source_fragments", "target_fragments", "source_placement"])
def test_objects_replaced_after_step_2_run_step_5(monkeypatch: pytest.MonkeyPatch, swap: str) -> None:
    # an object step 5 reads replaced (by an equal one) between steps 2 and 5: the fused answer
    # is for other objects, so step 5 runs itself
    logical, targets, sources = _world()
    original = binding_module._tensor_snapshots_match  # step 4 (an exact plan's first call there)

    def edit(*args: Any) -> Any:
        if swap == "operations":
            object.__setattr__(logical, "operations", tuple(list(logical.operations)))
        elif swap == "source_fragments":
            placement = logical.source_placement
            object.__setattr__(placement, "fragments", tuple(list(placement.fragments)))
        elif swap == "target_fragments":
            placement = logical.target_placement
            object.__setattr__(placement, "fragments", tuple(list(placement.fragments)))
        return original(*args)

    with monkeypatch.context() as patch:
        patch.setattr(binding_module, "_tensor_snapshots_match", edit)
        calls = _snapshots_spy(patch)
        if swap == "source_placement":
            request = binding_module._fused_step5_request

            def other(plan: Any) -> Any:
                made = request(plan)
                if made is not None:
                    made[5] = _copy(made[5])  # as if another source placement had been read
                return made

            patch.setattr(binding_module, "_fused_step5_request", other)
        assert _outcome(logical, targets, sources)[0] == "plan"
        assert len(calls) == 1


def test_request_is_taken_by_its_own_plan_only() -> None:
    logical, _, _ = _world()
    other, _, _ = _world()
    request = binding_module._fused_step5_request(logical)
    assert request is not None
    validation._FUSED_STEP5.request = request
    try:
        validation.validate_logical_target_coverage(other)
        assert validation._FUSED_STEP5.request is request and request[3] is None
        validation.validate_logical_target_coverage(logical)
        assert validation._FUSED_STEP5.request is None and request[3] is True
    finally:
        validation._FUSED_STEP5.request = None
    assert binding_module._fused_step5_request(object()) is None

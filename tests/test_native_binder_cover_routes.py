"""``logical_target_cover`` with its twelfth argument (``stored_cls``): the route check of
``logical_routes_plain`` fused into the cover's passes over the fragments and operations (one C
call, so every read observes the same state). The fused answer must be exactly the two separate
calls' combination: None where the cover declines, else True when ``logical_routes_plain``
returns True and False when it returns None. ``validate_logical_target_coverage`` and binding
give the views path's outcome either way (tests/test_native_binder_routes.py)."""

from __future__ import annotations

from typing import Any, Optional

import pytest

from memory_executor import HostMemory, host_bindings, tp_placement

from spec_helpers import field_state, store_state

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank, StoredFragmentSnapshot
from mooncake.reshard.weight._planner import validation
from mooncake.reshard.weight._planner.contracts import TransferRegion
from mooncake.reshard.weight.planner import bind_logical_transfer_plan, plan_placement_transfer
from mooncake.reshard.weight.types import PlacementFragment

from test_native_binder_routes import _copy, _Unhashable


def _world(target_parts: int = 3) -> tuple[Any, Any, Any]:
    source = tp_placement(2, prefix="s", dp=2, shape=(4, 6), tensors=("v", "w"))
    target = tp_placement(target_parts, prefix="t", shape=(4, 6), tensors=("v", "w"))
    logical = plan_placement_transfer(source, target)
    memory = HostMemory()
    return logical, host_bindings(target, memory, prefix="dst"), host_bindings(source, memory, prefix="src")


def _args(plan: Any) -> tuple[Any, ...]:
    state = field_state(plan)
    target = plan.target_placement
    if not validation._COVER_CLASSES:  # filled by the first call, on a genuine plan
        genuine = _world()[0]
        assert validation._target_checks_accepted(genuine, genuine.target_placement)
    return (
        state.get("operations"),
        target.parts,
        state.get("target_executors"),
        state.get("target_tensors"),
        target.placement_id,
        *validation._COVER_CLASSES[:6],
    )


def _separate(plan: Any) -> Optional[bool]:
    args = _args(plan)
    if _native.logical_target_cover(*args) is None:
        return None
    routes = _native.logical_routes_plain(
        field_state(plan).get("operations"), TransferRegion, PlacementFragment, StoredFragmentSnapshot, ParallelRank
    )
    return routes is True


def _fused(plan: Any) -> Optional[bool]:
    return _native.logical_target_cover(*_args(plan), StoredFragmentSnapshot)


def _agree(plan: Any) -> Optional[bool]:
    fused = _fused(plan)
    assert fused is _separate(plan)
    return fused


def _forge(logical: Any, forgery: str) -> None:
    op = logical.operations[1]
    rank = op.source.rank

    def source(**changes: Any) -> None:
        object.__setattr__(op, "source", _copy(op.source, **changes))

    if forgery == "source_pp_str":
        source(rank=_copy(rank, pp="0"))
    elif forgery == "source_pp_big":
        source(rank=_copy(rank, pp=1 << 80))
    elif forgery == "source_rank_none":
        source(rank=None)
    elif forgery == "source_stage_str":
        source(pipeline_stage_id="1")
    elif forgery == "source_stage_int":
        source(pipeline_stage_id=3)
    elif forgery == "source_pfid_empty":
        source(placement_fragment_id="")
    elif forgery == "source_subclass":
        forged = object.__new__(type("Fragment", (PlacementFragment,), {}))
        store_state(forged, field_state(op.source))
        object.__setattr__(op, "source", forged)
    elif forgery == "source_missing":
        object.__delattr__(op, "source")
    elif forgery == "source_stored":
        stored = object.__new__(StoredFragmentSnapshot)
        object.__setattr__(op, "source", stored)
    elif forgery == "source_shared_after":
        # two consecutive operations with one source object, edited: the shortcut keeps reading
        object.__setattr__(logical.operations[2], "source", op.source)
        object.__setattr__(op.source, "pipeline_stage_id", "x")
    elif forgery == "target_stage_str":
        object.__setattr__(op.target, "pipeline_stage_id", "2")
    elif forgery == "target_rank_list":
        object.__setattr__(op.target, "rank", [0, 0, 0, 0])
    elif forgery == "target_pp_missing":
        rank_copy = _copy(op.target.rank)
        object.__delattr__(rank_copy, "pp")
        object.__setattr__(op.target, "rank", rank_copy)
    elif forgery == "target_stage_missing":
        object.__delattr__(op.target, "pipeline_stage_id")
    elif forgery == "last_target_stage_str":
        object.__setattr__(logical.operations[-1].target, "pipeline_stage_id", "2")
    elif forgery == "target_executor_rank_shared":
        executor = logical.target_executors[0]
        part = logical.target_placement._part_index()[executor.participant_id]
        shared = _Unhashable()
        object.__setattr__(part, "rank", shared)
        object.__setattr__(executor, "rank", shared)
    elif forgery == "cover_declines":
        object.__setattr__(logical, "target_executors", logical.target_executors[:-1])
    else:
        raise AssertionError(forgery)


FORGERIES = [
    "source_pp_str",
    "source_pp_big",
    "source_rank_none",
    "source_stage_str",
    "source_stage_int",
    "source_pfid_empty",
    "source_subclass",
    "source_missing",
    "source_stored",
    "source_shared_after",
    "target_stage_str",
    "target_rank_list",
    "target_pp_missing",
    "target_stage_missing",
    "last_target_stage_str",
    "target_executor_rank_shared",
    "cover_declines",
]


@pytest.mark.parametrize("parts", [2, 3])
def test_genuine_plans_are_plain(parts: int) -> None:
    logical, _, _ = _world(parts)
    assert _agree(logical) is True


@pytest.mark.parametrize("forgery", FORGERIES)
def test_forged_plans_agree_with_the_separate_calls(forgery: str) -> None:
    logical, _, _ = _world()
    _forge(logical, forgery)
    _agree(logical)


@pytest.mark.parametrize("forgery", ["source_stage_str", "target_stage_str", "source_pp_str", "cover_declines"])
def test_forged_plans_give_the_same_outcome_everywhere(forgery: str) -> None:
    # _target_checks_accepted, the coverage check and binding: the same outcome as with the
    # separate route check (that function's own answer: tests/test_native_binder_routes.py)
    outcomes = []
    for fused in (True, False):
        logical, targets, sources = _world()
        _forge(logical, forgery)
        original = _native.logical_target_cover

        def separate(*args: Any) -> Any:
            if len(args) == 12:
                found = original(*args[:11])
                if found is None:
                    return None
                routes = _native.logical_routes_plain(
                    args[0], TransferRegion, PlacementFragment, StoredFragmentSnapshot, ParallelRank
                )
                return routes is True
            return original(*args)

        row = []
        with pytest.MonkeyPatch.context() as patch:
            if not fused:
                patch.setattr(validation._native, "logical_target_cover", separate)
            for call in (
                lambda: validation._target_checks_accepted(logical, logical.target_placement),
                lambda: validation.validate_logical_target_coverage(logical),
                lambda: len(bind_logical_transfer_plan(logical, targets, source_bindings=sources).operations),
            ):
                try:
                    row.append(("ok", call()))
                except Exception as exc:  # compared by type and message
                    row.append((type(exc), str(exc)))
        outcomes.append(row)
    assert outcomes[0] == outcomes[1]


def test_unreferenced_fragments_do_not_count() -> None:
    # a fragment no operation targets (its part is not selected): only the cover's own checks
    # read it; its route half does not decide the fused answer
    logical, _, _ = _world()
    placement = logical.target_placement
    first = placement.parts[0]
    spare = _copy(
        first,
        participant_id="spare",
        fragments=tuple(
            _copy(f, placement_fragment_id=f.placement_fragment_id + "-spare", pipeline_stage_id="x")
            for f in first.fragments
        ),
    )
    object.__setattr__(placement, "parts", placement.parts + (spare,))
    assert _agree(logical) is True
    # the same value on a targeted fragment decides it
    object.__setattr__(first.fragments[0], "pipeline_stage_id", "x")
    assert _agree(logical) is False


def test_hostile_arguments() -> None:
    logical, _, _ = _world()
    args = _args(logical)
    for bad in (None, "StoredFragmentSnapshot", 3, int):
        with pytest.raises(TypeError):
            _native.logical_target_cover(*args, bad)
    with pytest.raises(TypeError):
        _native.logical_target_cover(*args, StoredFragmentSnapshot, StoredFragmentSnapshot)
    assert _native.logical_target_cover((), *args[1:], StoredFragmentSnapshot) is None
    assert _native.logical_target_cover(list(args[0]), *args[1:], StoredFragmentSnapshot) is None
    assert _native.logical_target_cover((object(),) + args[0][1:], *args[1:], StoredFragmentSnapshot) is None

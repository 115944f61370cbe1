"""The per-executor index check of the logical target self-checks (spec §11.6, re-run by binding
step 2) decided without building the plan's operation views: once ``logical_target_cover``
accepted, every target executor has an operation, so the views are built only when building them
could fail (``_native.logical_routes_plain``, fused into ``logical_target_cover``'s call, and exact
executor keys decide that). The outcome
(True / False / the same exception) equals the views path on genuine and forged plans, and
``validate_logical_target_coverage`` and binding report the same first failure."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from memory_executor import HostMemory, host_bindings, tp_placement

from spec_helpers import field_state, store_state

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank, StoredFragmentSnapshot
from mooncake.reshard.weight._planner import validation
from mooncake.reshard.weight._planner.contracts import TransferRegion
from mooncake.reshard.weight.planner import bind_logical_transfer_plan, plan_placement_transfer
from mooncake.reshard.weight.types import PlacementFragment


def _world() -> tuple[Any, Any, Any]:
    source = tp_placement(2, prefix="s", dp=2, shape=(4, 6), tensors=("v", "w"))
    target = tp_placement(3, prefix="t", shape=(4, 6), tensors=("v", "w"))
    logical = plan_placement_transfer(source, target)
    memory = HostMemory()
    return logical, host_bindings(target, memory, prefix="dst"), host_bindings(source, memory, prefix="src")


def _outcome(call: Callable[[], Any]) -> Any:
    try:
        return ("ok", call())
    except Exception as exc:  # compared by type and message
        return (type(exc), str(exc))


def _views_path(patch: pytest.MonkeyPatch) -> None:
    """logical_target_cover's fused route check reports "not decided" (False where it accepted
    with plain routes): the views are built, as when logical_routes_plain returned None."""
    original = _native.logical_target_cover

    def cover(*args: Any) -> Any:
        result = original(*args)
        return False if result is True else result

    patch.setattr(validation._native, "logical_target_cover", cover)


def _both(call: Callable[[], Any], monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    shortcut = _outcome(call)
    with monkeypatch.context() as patch:
        _views_path(patch)
        views = _outcome(call)
    return shortcut, views


def _check(logical: Any, monkeypatch: pytest.MonkeyPatch, targets: Any = None, sources: Any = None) -> Any:
    accepted = _both(lambda: validation._target_checks_accepted(logical, logical.target_placement), monkeypatch)
    assert accepted[0] == accepted[1]
    checked = _both(lambda: validation.validate_logical_target_coverage(logical), monkeypatch)
    assert checked[0] == checked[1]
    if targets is not None:
        bound = _both(lambda: bind_logical_transfer_plan(logical, targets, source_bindings=sources), monkeypatch)
        assert type(bound[0][1]) is type(bound[1][1])
        if bound[0][0] == "ok":
            assert bound[0][1] == bound[1][1]
        else:
            assert bound[0] == bound[1]
    _SEEN.append((accepted[0], checked[0]))
    return accepted[0]


_SEEN: list[Any] = []


def _copy(value: Any, **changes: Any) -> Any:
    copy = object.__new__(type(value))
    store_state(copy, field_state(value))
    store_state(copy, changes)
    return copy


def test_genuine_plan_takes_the_shortcut(monkeypatch: pytest.MonkeyPatch) -> None:
    logical, targets, sources = _world()
    calls: list[Any] = []
    original = type(logical)._views

    def counting(self: Any) -> Any:
        calls.append(self)
        return original(self)

    assert _check(logical, monkeypatch, targets, sources) == ("ok", True)
    monkeypatch.setattr(type(logical), "_views", counting)
    assert validation._target_checks_accepted(logical, logical.target_placement) is True
    assert calls == []  # decided without building the views
    ops = logical.operations
    assert _native.logical_routes_plain(ops, TransferRegion, PlacementFragment, StoredFragmentSnapshot, ParallelRank)


class _Unhashable:
    __hash__ = None  # type: ignore[assignment]


def _forge_source(logical: Any, **changes: Any) -> None:
    op = logical.operations[1]
    object.__setattr__(op, "source", _copy(op.source, **changes))


@pytest.mark.parametrize(
    "forgery",
    [
        "source_pp_str",
        "source_pp_none",
        "source_rank_none",
        "source_rank_tuple",
        "source_stage_str",
        "source_stage_float",
        "source_pfid_list",
        "source_pfid_empty",
        "source_subclass",
        "target_stage_str",
        "target_rank_list",
        "source_executor_duplicate",
        "source_executor_rank_list",
        "source_executor_ids_list",
        "source_executors_list",
        "target_executor_rank_shared_list",
        "target_executor_rank_pp_bool",
    ],
)
def test_forged_plans_give_the_views_outcome(monkeypatch: pytest.MonkeyPatch, forgery: str) -> None:
    logical, targets, sources = _world()
    op = logical.operations[1]
    rank = op.source.rank
    if forgery == "source_pp_str":
        _forge_source(logical, rank=_copy(rank, pp="0"))
    elif forgery == "source_pp_none":
        _forge_source(logical, rank=_copy(rank, pp=None))
    elif forgery == "source_rank_none":
        _forge_source(logical, rank=None)
    elif forgery == "source_rank_tuple":
        _forge_source(logical, rank=(0, 0, 0, 0))
    elif forgery == "source_stage_str":
        _forge_source(logical, pipeline_stage_id="1")
    elif forgery == "source_stage_float":
        _forge_source(logical, pipeline_stage_id=1.0)
    elif forgery == "source_pfid_list":
        _forge_source(logical, placement_fragment_id=["x"])
    elif forgery == "source_pfid_empty":
        _forge_source(logical, placement_fragment_id="")
    elif forgery == "source_subclass":
        sub = type("Fragment", (PlacementFragment,), {})
        forged = object.__new__(sub)
        store_state(forged, field_state(op.source))
        object.__setattr__(op, "source", forged)
    elif forgery == "target_stage_str":
        object.__setattr__(op.target, "pipeline_stage_id", "2")
    elif forgery == "target_rank_list":
        object.__setattr__(op.target, "rank", [0, 0, 0, 0])
    elif forgery == "source_executor_duplicate":
        executors = logical.source_executors
        object.__setattr__(logical, "source_executors", executors + executors[:1])
    elif forgery == "source_executor_rank_list":
        first = logical.source_executors[0]
        object.__setattr__(first, "rank", [0, 0, 0, 0])
    elif forgery == "source_executor_ids_list":
        first = logical.source_executors[0]
        object.__setattr__(first, "placement_fragment_ids", list(first.placement_fragment_ids))
    elif forgery == "source_executors_list":
        object.__setattr__(logical, "source_executors", list(logical.source_executors))
    elif forgery == "target_executor_rank_shared_list":
        # the part's rank and its executor's rank: one unhashable object (identical ranks pass
        # logical_target_cover; the views' key hashing raises)
        executor = logical.target_executors[0]
        part = logical.target_placement._part_index()[executor.participant_id]
        shared = _Unhashable()
        object.__setattr__(part, "rank", shared)
        object.__setattr__(executor, "rank", shared)
    else:
        executor = logical.target_executors[0]
        object.__setattr__(executor, "rank", _copy(executor.rank, pp=True))
    _check(logical, monkeypatch, targets, sources)


def test_hostile_arguments() -> None:
    logical, _, _ = _world()
    ops = logical.operations
    classes = (TransferRegion, PlacementFragment, StoredFragmentSnapshot, ParallelRank)
    with pytest.raises(TypeError):
        _native.logical_routes_plain(ops, *classes[:3])  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        _native.logical_routes_plain(ops, *classes, ParallelRank)  # type: ignore[call-arg]
    for bad in (None, "TransferRegion", 3, TransferRegion.__init__):
        with pytest.raises(TypeError):
            _native.logical_routes_plain(ops, bad, *classes[1:])
        with pytest.raises(TypeError):
            _native.logical_routes_plain(ops, *classes[:3], bad)
    assert _native.logical_routes_plain(list(ops), *classes) is None
    assert _native.logical_routes_plain((object(),), *classes) is None
    assert _native.logical_routes_plain((), *classes) is True
    assert _native.logical_routes_plain(ops, PlacementFragment, *classes[1:]) is None
    op = ops[0]
    object.__setattr__(op.target, "rank", _copy(op.target.rank, pp=1 << 80))  # any exact int
    assert _native.logical_routes_plain(ops, *classes) is True
    object.__delattr__(op.target, "pipeline_stage_id")
    assert _native.logical_routes_plain(ops, *classes) is None

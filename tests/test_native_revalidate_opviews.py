"""``_native.operation_views`` (the per-operation loop of ``contracts.build_operation_views``)
against the Python loop as the oracle: for genuine logical and bound plans (placement and stored
sources) and for forged operations, fragments, ranks and executors, the views built through C
equal the views the Python loop builds, or both raise the same error; hostile arguments are
refused or declined, never crash."""

from __future__ import annotations

import copy
from typing import Any, Callable

import pytest
from spec_helpers import field_state, forged_instance

from mooncake.reshard import _native
from mooncake.reshard.contracts.fragments import RuntimeBindingFragment
from mooncake.reshard.weight import ParallelRank, StoredWeightManifest, WeightRuntimeBindingManifest
from mooncake.reshard.weight._planner import contracts as ct
from mooncake.reshard.weight._planner.contracts import TransferRegion, build_operation_views
from mooncake.reshard.weight._planner.fragments import BoundWeightFragment
from mooncake.reshard.weight.planner import (
    bind_logical_transfer_plan,
    plan_placement_transfer,
    plan_stored_transfer_to_target_placement,
)
from mooncake.reshard.weight.serde import weight_placement_from_json
from mooncake.reshard.weight.storage_manifest import StoredFragmentSnapshot
from mooncake.reshard.weight.types import PlacementFragment

from known_answers import case_names, load_case
from spec_helpers import field_state, forged_instance

CASES = case_names()


def _binding(raw: dict[str, Any]) -> WeightRuntimeBindingManifest:
    fields = dict(raw)
    fields["fragments"] = tuple(
        RuntimeBindingFragment(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in fragment.items()})
        for fragment in raw["fragments"]
    )
    return WeightRuntimeBindingManifest(**fields)


def _plans(name: str) -> tuple[Any, Any]:
    """(logical plan, bound plan) of one known-answer case."""
    inputs = copy.deepcopy(load_case(name)["inputs"])
    target = weight_placement_from_json(inputs["target_placement_json"])
    target_bindings = tuple(_binding(raw) for raw in inputs["target_bindings"])
    if "stored_manifest_json" in inputs:
        manifest = StoredWeightManifest.from_json(inputs["stored_manifest_json"])
        logical = plan_stored_transfer_to_target_placement(manifest, target)
        return logical, bind_logical_transfer_plan(logical, target_bindings, source_manifest=manifest)
    source = weight_placement_from_json(inputs["source_placement_json"])
    logical = plan_placement_transfer(source, target)
    source_bindings = tuple(_binding(raw) for raw in inputs["source_bindings"])
    return logical, bind_logical_transfer_plan(logical, target_bindings, source_bindings=source_bindings)


_ALL = {name: _plans(name) for name in CASES}
_ALL_PLANS = [(name, side) for name in CASES for side in (0, 1)]


def _outcome(call: Callable[[], Any]) -> Any:
    try:
        views = call()
    except Exception as exc:  # the oracle relation compares the errors too
        return ("raised", type(exc), str(exc))
    views._materialise()
    return ("views", views._source, views._target, views._routes)


def _both(operations: tuple[Any, ...], sources: tuple[Any, ...], targets: tuple[Any, ...]) -> tuple[Any, Any]:
    """(views through the C loop, views through the Python loop): a list skips the C call."""
    fast = _outcome(lambda: build_operation_views(tuple(operations), sources, targets))
    slow = _outcome(lambda: build_operation_views(list(operations), sources, targets))
    return fast, slow


def _decided(operations: tuple[Any, ...], sources: tuple[Any, ...], targets: tuple[Any, ...]) -> Any:
    """The C loop's own verdict on fresh tables (None: declined)."""
    s_logical, s_runtime, _ = ct._side_index(sources)
    t_logical, t_runtime, _ = ct._side_index(targets)
    return _native.operation_views(
        tuple(operations),
        s_logical,
        s_runtime,
        t_logical,
        t_runtime,
        TransferRegion,
        PlacementFragment,
        BoundWeightFragment,
        RuntimeBindingFragment,
        ParallelRank,
        StoredFragmentSnapshot,
    )


def _forge(value: Any, **changes: Any) -> Any:
    return forged_instance(type(value), {**field_state(value), **changes})


def _without(value: Any, name: str) -> Any:
    return forged_instance(type(value), {k: v for k, v in field_state(value).items() if k != name})


@pytest.mark.parametrize("name,which", _ALL_PLANS)
def test_genuine_plans_are_decided_in_c_and_equal_the_loop(name: str, which: int) -> None:
    plan = _ALL[name][which]
    args = (plan.operations, plan.source_executors, plan.target_executors)
    assert _decided(*args) is not None
    fast, slow = _both(*args)
    assert fast[0] == "views"
    assert fast == slow
    # Same as the views the plan itself exposes.
    for executor in plan.target_executors:
        assert fast[2][ct._executor_key(executor)] == plan.operation_indices_for_executor(executor, "target")
    assert fast[3] == plan.pipeline_routes


class _RegionSubclass(TransferRegion):  # type: ignore[type-arg]
    pass


class _FragmentSubclass(PlacementFragment):
    pass


class _RankSubclass(ParallelRank):
    pass


class _Weird:
    """No field at all (attribute reads raise AttributeError in the Python loop)."""


def _rank_forgeries(rank: Any) -> list[Any]:
    state = dict(rank.__dict__)
    return [
        _forge(rank, pp=True),
        _forge(rank, pp=2**80),
        _forge(rank, pp=None),
        _forge(rank, pp="1"),
        _forge(rank, pp=1.0),
        _forge(rank, pp=[1]),  # unhashable route value
        _without(rank, "pp"),
        _RankSubclass(**state),
        (state["dp"], state["tp"], state["pp"], state["ep"]),
        _Weird(),
    ]


def _placement_forgeries(fragment: Any) -> list[Any]:
    out: list[Any] = [_forge(fragment, rank=rank) for rank in _rank_forgeries(fragment.rank)]
    out += [
        _forge(fragment, pipeline_stage_id=3),
        _forge(fragment, pipeline_stage_id=2**70),
        _forge(fragment, pipeline_stage_id="0"),
        _forge(fragment, pipeline_stage_id=[0]),
        _forge(fragment, placement_fragment_id="unknown"),
        _forge(fragment, placement_fragment_id=7),
        _forge(fragment, placement_fragment_id=["x"]),  # unhashable id
        _without(fragment, "pipeline_stage_id"),
        _without(fragment, "rank"),
        _without(fragment, "placement_fragment_id"),
    ]
    sub = forged_instance(_FragmentSubclass, dict(field_state(fragment)))
    out.append(sub)
    return out


def _fragment_forgeries(fragment: Any) -> list[Any]:
    if type(fragment) is PlacementFragment:
        return _placement_forgeries(fragment)
    if type(fragment) is BoundWeightFragment:
        out = [_forge(fragment, placement=p) for p in _placement_forgeries(fragment.placement)]
        binding = fragment.binding
        out += [
            _forge(fragment, binding=_forge(binding, fragment_id="unknown")),
            _forge(fragment, binding=_forge(binding, fragment_id=5)),
            _forge(fragment, binding=_without(binding, "fragment_id")),
            _forge(fragment, binding=_Weird()),
            _forge(fragment, placement=_Weird()),
            _without(fragment, "binding"),
            _without(fragment, "placement"),
        ]
        return out
    return [_Weird(), None]


def _forged_operations(plan: Any) -> list[tuple[Any, ...]]:
    operations = plan.operations
    variants: list[tuple[Any, ...]] = []
    for index in sorted({0, len(operations) // 2, len(operations) - 1}):
        op = operations[index]

        def put(value: Any, index: int = index) -> tuple[Any, ...]:
            return operations[:index] + (value,) + operations[index + 1 :]

        sub = forged_instance(_RegionSubclass, dict(field_state(op)))
        variants += [put(sub), put(_without(op, "source")), put(_without(op, "target")), put(_Weird())]
        variants += [put(_forge(op, source=fragment)) for fragment in _fragment_forgeries(op.source)]
        variants += [put(_forge(op, target=fragment)) for fragment in _fragment_forgeries(op.target)]
        variants.append(put(_forge(op, target=op.source)))
        variants.append(put(_forge(op, source=op.target)))
    return variants


@pytest.mark.parametrize("name,which", _ALL_PLANS)
def test_forged_operations_agree_with_the_loop(name: str, which: int) -> None:
    plan = _ALL[name][which]
    declined = 0
    for operations in _forged_operations(plan):
        fast, slow = _both(operations, plan.source_executors, plan.target_executors)
        assert fast == slow
        if _decided(operations, plan.source_executors, plan.target_executors) is None:
            declined += 1
    assert declined > 0


@pytest.mark.parametrize("name,which", _ALL_PLANS)
def test_forged_executors_agree_with_the_loop(name: str, which: int) -> None:
    plan = _ALL[name][which]
    for side in ("source_executors", "target_executors"):
        executors = getattr(plan, side)
        if not executors:
            continue
        first = executors[0]
        ids_field = "placement_fragment_ids" if which == 0 else "fragment_ids"
        ids = getattr(first, ids_field)
        forged_sets = [
            executors + (first,),  # a repeated key
            (_forge(first, **{ids_field: ids + (ids[0],)}),) + executors[1:],
            (_forge(first, **{ids_field: tuple(reversed(ids))}),) + executors[1:],
            (_forge(first, **{ids_field: ()}),) + executors[1:],
            (_forge(first, **{ids_field: (1, 2)}),) + executors[1:],
            executors[1:] + (first,),
            executors[:1],
        ]
        for forged in forged_sets:
            args = (
                (plan.operations, forged, plan.target_executors)
                if side == "source_executors"
                else (plan.operations, plan.source_executors, forged)
            )
            fast, slow = _both(*args)
            assert fast == slow


class _BadEq(str):
    pass


def test_hostile_arguments() -> None:
    _, plan = _ALL[CASES[0]]
    operations = plan.operations
    classes = (TransferRegion, PlacementFragment, BoundWeightFragment, RuntimeBindingFragment, ParallelRank,
               StoredFragmentSnapshot)
    empty = ({}, {}, {}, {})
    with pytest.raises(TypeError):
        _native.operation_views(list(operations), *empty, *classes)
    with pytest.raises(TypeError):
        _native.operation_views(operations, *empty, *classes[:-1])
    with pytest.raises(TypeError):
        _native.operation_views(operations, [], {}, {}, {}, *classes)
    with pytest.raises(TypeError):
        _native.operation_views(operations, *empty, *classes[:-1], "not a class")
    with pytest.raises(TypeError):
        _native.operation_views()
    # Empty plans: no route.
    assert _native.operation_views((), *empty, *classes) == {}
    # Buckets that are not exact lists decline.
    s_logical, s_runtime, _ = ct._side_index(plan.source_executors)
    t_logical, t_runtime, _ = ct._side_index(plan.target_executors)
    t_runtime = {key: tuple(value) for key, value in t_runtime.items()}
    assert _native.operation_views(operations, s_logical, s_runtime, t_logical, t_runtime, *classes) is None
    # Tables with keys that are not exact strs decline (a key's __eq__ would run in a probe:
    # AUDIT5 F5); the Python loop decides them.
    odd = {_BadEq("x"): [], 2**90: [], (1, 2): []}
    assert _native.operation_views(operations, odd, odd, odd, odd, *classes) is None
    for plain in ({2**90: []}, {(1, 2): []}, {_BadEq("x"): []}):
        assert _native.operation_views(operations, plain, {}, {}, {}, *classes) is None
    # Wrong classes: everything declines.
    assert _native.operation_views(operations, *empty, *reversed(classes)) is None
    assert _native.operation_views((object(),), *empty, *classes) is None
    assert _native.operation_views((None,), *empty, *classes) is None

"""Property tests: random field-type forgeries of regions, executors, snapshots, attestation
graphs (placement, parts, tensors, fragments, ranks, evidence) and stored manifests (snapshots,
tensors, identity) are refused with ``ValueError`` (any message) or accepted, never with another
exception type (fuzz findings F2-F4).

A forgery replaces one field of one object with a hostile value, or removes it, the way a
forged default-pickled dict restores it (``object.__new__`` + ``__dict__``, or field by field for a
value stored in a C-owned layout, which has no ``__dict__``); every occurrence of
the object in the plan graph is replaced, so shared objects stay shared. The forged graph is
then revalidated through every path that applies: ``dataclasses.replace`` (operations and
executors), the field-state format (``TransferPlan.__setstate__``), the compact record
(protocol 4) and the packed record (protocol 5).
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import sys
from typing import Any, Callable, Optional

from hypothesis import assume, given, settings
from hypothesis import strategies as st

_FUZZ = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fuzz")
sys.path.insert(0, os.path.join(_FUZZ, "findings"))
sys.path.insert(0, _FUZZ)

import _pickle_repro as R  # noqa: E402

from mooncake.reshard import _native  # noqa: E402
from mooncake.reshard._layout import layout_state_reader  # noqa: E402
from mooncake.reshard.weight import ParallelRank  # noqa: E402

_GONE = ...  # "remove the field"

HOSTILE = st.sampled_from(
    [
        _GONE, None, True, 0, -1, 1.5, float("inf"), 2**70, -(2**70), "", "x", b"x", (), (None,), ("x",),
        (1.5,), (2**70,), [1], [], {}, {"a": 1}, frozenset({1}), ParallelRank(), (ParallelRank(),), object,
    ]
)

# Classes whose objects are forged (by name: several live in private modules).
_CLASSES = {
    "TransferRegion", "ExecutorTransferPlan", "RuntimeFragmentSnapshot", "BoundWeightFragment",
    "PlacementFragment", "WeightPlacementManifest", "WeightPlacementPart", "TensorDescriptor",
    "ParallelRank", "RuntimeBindingEvidence", "PlanningLimits", "StoredWeightManifest",
    "StoredFragmentSnapshot", "StoredManifestIdentity", "ParallelTopology", "TopologyParticipant",
    "SplitAxis", "ReplicatedAxis", "OwnershipAxis", "PlacementExecutorPlan",
}


def _state(value: Any) -> Optional[dict]:
    """The field state of ``value``: its instance dict, or the set fields of a value stored in a
    C-owned layout (``mooncake_reshard/_layout.py``: no instance dict); None for anything else."""
    state = getattr(value, "__dict__", None)
    if isinstance(state, dict):
        return state
    if _native.layout_info(type(value)) is not None:
        return layout_state_reader(type(value))(value)
    return None


def _clone(value: Any, state: dict) -> Any:
    """A new instance of ``value``'s class holding ``state`` (forged: no ``__post_init__``)."""
    clone = object.__new__(type(value))
    if isinstance(getattr(clone, "__dict__", None), dict):
        clone.__dict__.update(state)
    else:  # a C-owned layout: field by field
        for name, field_value in state.items():
            object.__setattr__(clone, name, field_value)
    return clone


def _forgeable(value: Any, classes: Optional[set] = None) -> bool:
    return type(value).__name__ in (_CLASSES if classes is None else classes) and _state(value) is not None


def _collect(root: Any, kinds: Optional[set] = None, follow: Optional[set] = None) -> list:
    """Every forgeable object reachable from ``root`` (tuples, lists, dicts, object dicts;
    attestations are followed through their placement and evidence; ``follow``: the class names
    walked into, default ``_CLASSES``), in a stable order."""
    out: list = []
    seen: set = set()
    stack = [root]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if type(item) in (tuple, list):
            stack.extend(reversed(item))
            continue
        if type(item) is dict:
            stack.extend(reversed(list(item.values())))
            continue
        name = type(item).__name__
        if name == "RuntimeBindingAttestation":
            stack.extend((item.evidence, item.placement))
            continue
        if _forgeable(item, follow):
            if kinds is None or name in kinds:
                out.append(item)
            stack.extend(reversed([v for k, v in _state(item).items() if not k.startswith("_")]))
    return out


def _substitute(
    value: Any, old: Any, new: Any, memo: dict, attestations: bool = True, follow: Optional[set] = None
) -> Any:
    """``value`` with every occurrence of ``old`` (identity) replaced by ``new``; containers and
    forgeable objects on the way are copied only when something below them changed."""
    if value is old:
        return new
    if not attestations and type(value).__name__ == "RuntimeBindingAttestation":
        return value  # replace() keeps attestation objects (only pickles restore them)
    key = id(value)
    if key in memo:
        return memo[key]
    memo[key] = value  # cycles: keep the original
    result = value
    if type(value) in (tuple, list):
        items = [_substitute(item, old, new, memo, attestations, follow) for item in value]
        if any(a is not b for a, b in zip(items, value)):
            result = type(value)(items)
    elif type(value) is dict:
        items = {k: _substitute(v, old, new, memo, attestations, follow) for k, v in value.items()}
        if any(items[k] is not value[k] for k in value):
            result = items
    elif type(value).__name__ == "RuntimeBindingAttestation":
        placement = _substitute(value.placement, old, new, memo)
        evidence = _substitute(value.evidence, old, new, memo)
        if placement is not value.placement or evidence is not value.evidence:
            from mooncake.reshard.weight._planner.attestation import RuntimeBindingAttestation

            clone = object.__new__(RuntimeBindingAttestation)
            # what a pickle carrying this forged pair restores: (placement, evidence), revalidated
            clone.__dict__.update({"placement": placement, "evidence": evidence})
            result = clone
    elif _forgeable(value, follow):
        own = _state(value)
        state = {k: _substitute(v, old, new, memo, attestations, follow) for k, v in own.items()}
        if any(state[k] is not own[k] for k in state):
            result = _clone(value, state)
    memo[key] = result
    return result


def _forge(obj: Any, field: str, hostile: Any) -> Any:
    state = dict(_state(obj) or {})
    if hostile is _GONE:
        state.pop(field, None)
    else:
        state[field] = hostile
    for key in [k for k in state if k.startswith("_") and k != "_digest_cache"]:
        del state[key]  # derived caches are never pickled
    return _clone(obj, state)


def _expect_value_error_or_plan(load: Callable[[], Any], label: str) -> None:
    try:
        load()
    except ValueError as exc:
        assert type(exc) is ValueError, (label, exc)
    except pickle.PicklingError:
        pass  # the forged value itself cannot be pickled: nothing to restore
    # any other exception type propagates and fails the property


class _State:
    """Pickles as the field-state format: a new ``TransferPlan``, then ``__setstate__``."""

    def __init__(self, state: dict) -> None:
        self.state = state

    def __reduce__(self) -> Any:
        from mooncake.reshard.weight import TransferPlan

        return (object.__new__, (TransferPlan,), self.state)


def _dumped(write: Callable[[], bytes]) -> Optional[bytes]:
    """The pickle bytes, or None when the forged value cannot even be written (pickling reads
    fields too, e.g. a bound fragment's reduce: nothing is restored then)."""
    try:
        return write()
    except Exception:  # noqa: BLE001 - dump side only; restores are checked by the caller
        return None


def _paths(forged_state: dict, forged_record: Optional[list]) -> list:
    import pickle_cases
    from mooncake.reshard.weight._planner import bound_pickle

    writers: list = [("field state", lambda: pickle.dumps(_State(forged_state), protocol=4))]
    if forged_record is not None:
        writers.append(("record p4", lambda: pickle_cases.repickle("_restore_transfer_plan", tuple(forged_record), 4)))

        def packed() -> bytes:
            data = bound_pickle._graph_pack(tuple(forged_record), bound_pickle._GRAPH_REGISTRY)
            if data is None:
                raise pickle.PicklingError("not packable")
            return pickle_cases.repickle("_restore_packed_transfer_plan", data, 5)

        writers.append(("record p5", packed))
    paths = []
    for label, write in writers:
        data = _dumped(write)
        if data is not None:
            paths.append((label, lambda data=data: pickle.loads(data)))
    return paths


def _check_forgery(plan_name: str, kinds: set, pick: int, field_pick: int, hostile: Any, replace_too: bool) -> None:
    plan = R.plan(plan_name)
    state = plan.__getstate__()
    record = R.record(plan) if plan_name != "stored" else None
    candidates = _collect(tuple(state.values()), kinds)
    assume(candidates)
    obj = candidates[pick % len(candidates)]
    names = [k for k in _state(obj) if not k.startswith("_")]
    assume(names)
    field = names[field_pick % len(names)]
    forged = _forge(obj, field, hostile)
    forged_state = _substitute(state, obj, forged, {})
    forged_record = None if record is None else _substitute(record, obj, forged, {})
    for label, load in _paths(forged_state, forged_record):
        _expect_value_error_or_plan(load, f"{label}: {type(obj).__name__}.{field}={hostile!r}")
    if replace_too:
        replaced = _substitute(state, obj, forged, {}, attestations=False)
        changes = {
            name: replaced[name]
            # (planning_limits: replace() compares a forged limit in TransferPlan._revalidate_scoped
            # before any type check: test_forged_regressions.test_replace_with_forged_limits)
            for name in ("operations", "source_executors", "target_executors")
            if replaced[name] is not state[name]
        }
        if changes:
            _expect_value_error_or_plan(
                lambda: dataclasses.replace(plan, **changes), f"replace: {type(obj).__name__}.{field}={hostile!r}"
            )


PICKS = st.integers(min_value=0, max_value=10_000)
PLANS = st.sampled_from(["tp2-to-tp3", "tied-tp1-to-tp2", "tp2dp2-to-tp1"])


@settings(max_examples=120, deadline=None)
@given(PLANS, PICKS, PICKS, HOSTILE)
def test_forged_regions_and_their_fragments(plan_name: str, pick: int, field_pick: int, hostile: Any) -> None:
    kinds = {"TransferRegion", "BoundWeightFragment", "PlacementFragment"}
    _check_forgery(plan_name, kinds, pick, field_pick, hostile, replace_too=True)


@settings(max_examples=100, deadline=None)
@given(PLANS, PICKS, PICKS, HOSTILE)
def test_forged_executors_and_snapshots(plan_name: str, pick: int, field_pick: int, hostile: Any) -> None:
    kinds = {"ExecutorTransferPlan", "RuntimeFragmentSnapshot", "PlanningLimits"}
    _check_forgery(plan_name, kinds, pick, field_pick, hostile, replace_too=True)


@settings(max_examples=120, deadline=None)
@given(PLANS, PICKS, PICKS, HOSTILE)
def test_forged_attestation_graphs(plan_name: str, pick: int, field_pick: int, hostile: Any) -> None:
    kinds = {
        "WeightPlacementManifest", "WeightPlacementPart", "TensorDescriptor", "PlacementFragment",
        "ParallelRank", "RuntimeBindingEvidence", "ParallelTopology", "TopologyParticipant",
        "SplitAxis", "ReplicatedAxis", "OwnershipAxis",
    }
    _check_forgery(plan_name, kinds, pick, field_pick, hostile, replace_too=False)


@settings(max_examples=100, deadline=None)
@given(PICKS, PICKS, HOSTILE)
def test_forged_stored_snapshots(pick: int, field_pick: int, hostile: Any) -> None:
    kinds = {"StoredWeightManifest", "StoredFragmentSnapshot", "StoredManifestIdentity", "TensorDescriptor"}
    _check_forgery("stored", kinds, pick, field_pick, hostile, replace_too=True)


@settings(max_examples=60, deadline=None)
@given(PICKS, PICKS, HOSTILE)
def test_forged_stored_manifest_pickle(pick: int, field_pick: int, hostile: Any) -> None:
    """The manifest's own pickle (``StoredWeightManifest.__setstate__`` re-runs its checks)."""
    manifest = R.plan("stored").source_manifest
    candidates = _collect(manifest.fragments + manifest.tensors)
    obj = candidates[pick % len(candidates)]
    names = [k for k in _state(obj) if not k.startswith("_")]
    field = names[field_pick % len(names)]
    forged = _substitute(manifest, obj, _forge(obj, field, hostile), {})
    data = _dumped(lambda: pickle.dumps(forged, protocol=4))
    if data is not None:
        _expect_value_error_or_plan(lambda: pickle.loads(data), f"{field}={hostile!r}")


_LOGICAL: list = []


def _logical_plan() -> Any:
    if not _LOGICAL:
        from test_binding_attacks import World  # type: ignore[import-not-found]

        _LOGICAL.append(World().logical)
    return _LOGICAL[0]


@settings(max_examples=100, deadline=None)
@given(PICKS, PICKS, HOSTILE)
def test_forged_logical_plans(pick: int, field_pick: int, hostile: Any) -> None:
    """``LogicalTransferPlan`` revalidation (replace and its field-state pickle) refuses forged
    regions, fragments, executors and limits with ValueError too."""
    plan = _logical_plan()
    state = dict(plan.__dict__)
    state.pop("_operation_views", None)
    kinds = {"TransferRegion", "PlacementFragment", "PlacementExecutorPlan", "PlanningLimits", "ParallelRank"}
    roots = tuple(state[name] for name in ("operations", "source_executors", "target_executors", "planning_limits"))
    candidates = _collect(roots, kinds)
    obj = candidates[pick % len(candidates)]
    names = [k for k in _state(obj) if not k.startswith("_")]
    assume(names)
    field = names[field_pick % len(names)]
    forged = _forge(obj, field, hostile)
    changes = {
        name: _substitute(state[name], obj, forged, {}, attestations=False)
        for name in ("operations", "source_executors", "target_executors", "planning_limits")
    }
    changes = {name: value for name, value in changes.items() if value is not state[name]}
    assume(changes)
    label = f"{type(obj).__name__}.{field}={hostile!r}"
    _expect_value_error_or_plan(lambda: dataclasses.replace(plan, **changes), f"replace: {label}")
    _expect_logical_state_refused({**state, **changes}, label)


def _expect_logical_state_refused(forged_state: dict, label: str) -> None:
    """A logical plan's field-state pickle (a new ``LogicalTransferPlan``, then its
    ``__setstate__``) of ``forged_state``: ValueError or a plan."""
    from mooncake.reshard.weight import LogicalTransferPlan

    class _Logical:
        def __reduce__(self) -> Any:
            return (object.__new__, (LogicalTransferPlan,), forged_state)

    data = _dumped(lambda: pickle.dumps(_Logical(), protocol=4))
    if data is not None:
        _expect_value_error_or_plan(lambda: pickle.loads(data), f"field state: {label}")


@settings(max_examples=150, deadline=None)
@given(PICKS, PICKS, HOSTILE)
def test_forged_logical_plan_placements(pick: int, field_pick: int, hostile: Any) -> None:
    """The same for every object reachable from a logical plan's placements and tensor tuples
    (placements, parts, fragments, descriptors, ranks, topology, axes): ValueError or a plan
    (fuzz finding F10), through replace and the field-state pickle."""
    plan = _logical_plan()
    state = dict(plan.__dict__)
    state.pop("_operation_views", None)
    names = ("source_placement", "target_placement", "source_tensors", "target_tensors")
    candidates = _collect(tuple(state[name] for name in names))
    obj = candidates[pick % len(candidates)]
    fields = [k for k in _state(obj) if not k.startswith("_")]
    assume(fields)
    field = fields[field_pick % len(fields)]
    forged = _forge(obj, field, hostile)
    changes = {name: _substitute(state[name], obj, forged, {}, attestations=False) for name in names}
    changes = {name: value for name, value in changes.items() if value is not state[name]}
    assume(changes)
    label = f"{type(obj).__name__}.{field}={hostile!r}"
    _expect_value_error_or_plan(lambda: dataclasses.replace(plan, **changes), f"replace: {label}")
    _expect_logical_state_refused({**state, **changes}, label)


_BIND_WORLD: list = []
_PLAN_CONTAINERS = ("operations", "source_executors", "target_executors", "source_tensors", "target_tensors")


@settings(max_examples=200, deadline=None)
@given(PICKS, PICKS, HOSTILE)
def test_forged_bind_inputs(pick: int, field_pick: int, hostile: Any) -> None:
    """``bind_logical_transfer_plan`` on inputs with one object forged (fuzz finding F11): the
    logical plan itself or anything it holds, a runtime binding manifest (what its default
    pickling restores) or a runtime fragment. ValueError or a plan; Python's TypeError only for a
    plan container replaced by a value that is not iterable (as the constructor's ``tuple()``
    raises it)."""
    if not _BIND_WORLD:
        from test_binding_attacks import World  # type: ignore[import-not-found]

        _BIND_WORLD.append(World())
    world = _BIND_WORLD[0]
    roots = (world.logical, tuple(world.target_bindings), tuple(world.source_bindings))
    kinds = _CLASSES | {"LogicalTransferPlan", "WeightRuntimeBindingManifest", "RuntimeBindingFragment"}
    candidates = _collect(roots, kinds, follow=kinds)
    obj = candidates[pick % len(candidates)]
    fields = [k for k in _state(obj) if not k.startswith("_")]
    assume(fields)
    field = fields[field_pick % len(fields)]
    forged = _forge(obj, field, hostile)
    memo: dict = {}
    logical, targets, sources = (
        _substitute(root, obj, forged, memo, attestations=False, follow=kinds) for root in roots
    )
    label = f"{type(obj).__name__}.{field}={hostile!r}"
    try:
        world.bind(targets, logical=logical, source_bindings=sources)
    except ValueError as exc:
        assert type(exc) is ValueError, (label, exc)
    except TypeError as exc:
        not_iterable = not isinstance(hostile, (tuple, list, str, bytes, set, frozenset, dict))
        plan_container = type(obj).__name__ == "LogicalTransferPlan" and field in _PLAN_CONTAINERS
        assert plan_container and not_iterable, (label, exc)


@settings(max_examples=100, deadline=None)
@given(PLANS, PICKS, PICKS, HOSTILE)
def test_attestation_graphs_forged_in_place_then_replaced(plan_name: str, pick: int, field_pick: int, hostile: Any) -> None:
    """An object of an attestation's graph (or of the plan's own) edited in place with
    ``object.__setattr__`` (spec §1.2), then ``dataclasses.replace(plan)``: ValueError or
    accepted. A fresh copy of the seed plan is edited each time (nothing cached survives)."""
    plan = pickle.loads(pickle.dumps(R.plan(plan_name), protocol=4))
    kinds = {
        "WeightPlacementManifest", "WeightPlacementPart", "TensorDescriptor", "PlacementFragment",
        "ParallelRank", "RuntimeBindingEvidence", "ExecutorTransferPlan", "RuntimeFragmentSnapshot",
        "TransferRegion", "BoundWeightFragment",
    }
    candidates = _collect(tuple(plan.__dict__.values()), kinds)
    obj = candidates[pick % len(candidates)]
    names = [k for k in _state(obj) if not k.startswith("_")]
    assume(names)
    field = names[field_pick % len(names)]
    if hostile is _GONE:
        if isinstance(getattr(obj, "__dict__", None), dict):
            del obj.__dict__[field]
        else:  # a C-owned layout: the slot is emptied
            object.__delattr__(obj, field)
    else:
        object.__setattr__(obj, field, hostile)
    _expect_value_error_or_plan(lambda: dataclasses.replace(plan), f"{type(obj).__name__}.{field}={hostile!r}")

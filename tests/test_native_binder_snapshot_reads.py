"""``attested_executors`` / ``project_attested`` with their optional trailing placement fragment
class: a placement fragment of exactly that class has its snapshot fields read from its own
instance dict instead of four generic getattr calls.

The class may change nothing but the speed: every result equals the call without the class
(genuine plans, forged placement fragments: a field removed from the dict, a subclass that
overrides a field, wrong-typed fields, a dict subclass as ``__dict__``), snapshots hold every
field in field order (in their C layout: no instance dict) and stay untracked by the garbage
collector."""

from __future__ import annotations

import dataclasses
import gc
from typing import Any, Callable, List, Optional

import pytest

from test_native_binder import _forge, _multi_worker_binding, _part, _world
from test_native_binder_project import CLASSES, _args

from spec_helpers import field_state, store_state

from mooncake.reshard import _native
from mooncake.reshard.weight import PlacementFragment
from mooncake.reshard.weight._planner.attestation import RuntimeBindingAttestation
from mooncake.reshard.weight._planner.binding import _bind_side
from mooncake.reshard.weight._planner.bound_contracts import RuntimeFragmentSnapshot

SNAPSHOT_FIELDS = [field.name for field in dataclasses.fields(RuntimeFragmentSnapshot)]


def _executors(placement: Any, part: Any, attestation: Any, *extra: Any) -> Any:
    identity = (placement.placement_id, part.participant_id, placement.digest, part.rank)
    return _native.attested_executors(*CLASSES[:5], attestation, *identity, *extra)


def _attestation(placement: Any, binding: Any) -> Any:
    return RuntimeBindingAttestation._from_validated(placement, dataclasses.replace(binding))


def _snapshot_state(result: Any) -> Any:
    """The rows as comparable data: per worker, each snapshot's (field name, value id) pairs in
    dict order, its GC tracking, and the executor's fragment ids."""
    if result is None:
        return None
    table, rows = result
    state = []
    for worker_id, snapshots, executor in rows:
        assert table[worker_id] is snapshots
        state.append(
            (
                worker_id,
                [
                    (type(s), [(k, id(v)) for k, v in s.__getstate__().items()], gc.is_tracked(s))
                    for s in snapshots
                ],
                executor.fragment_ids,
                gc.is_tracked(executor),
            )
        )
    return state


def _compare(placement: Any, part: Any, make_attestation: Callable[[], Any]) -> Any:
    """attested_executors with the class, with None and without it: the same result (equal
    values, the very same field objects, the same tracking)."""
    outcomes = []
    for extra in ((PlacementFragment,), (None,), ()):
        attestation = make_attestation()
        result = _executors(placement, part, attestation, *extra)
        outcomes.append((result, _snapshot_state(result)))
    (with_cls, with_state), (with_none, none_state), (without, without_state) = outcomes
    assert with_cls == without and with_none == without
    assert with_state == without_state and none_state == without_state
    return with_cls


@pytest.mark.parametrize("spread", [False, True])
def test_genuine_attestations_agree(spread: bool) -> None:
    placement, bindings = _world(tensors=4)
    for binding in bindings:
        if spread:
            binding = _multi_worker_binding(binding)
        part = _part(placement, binding)
        result = _compare(placement, part, lambda: _attestation(placement, binding))
        assert result is not None
        for _worker, snapshots, _executor in result[1]:
            for snapshot in snapshots:
                # stored in the C layout (no instance dict), every field set, in field order
                assert not hasattr(snapshot, "__dict__")
                assert list(snapshot.__getstate__()) == SNAPSHOT_FIELDS
                assert not gc.is_tracked(snapshot)
                fragment = part.fragments[[f.placement_fragment_id for f in part.fragments].index(
                    snapshot.placement_fragment_id)]
                assert snapshot.tensor_id is fragment.tensor_id
                assert snapshot.global_offset is fragment.global_offset
                assert snapshot.local_shape is fragment.local_shape


class _Overriding(PlacementFragment):
    """A subclass whose tensor_id is a property (getattr does not read the instance dict)."""

    @property  # type: ignore[misc]
    def tensor_id(self) -> str:  # type: ignore[override]
        return "overridden"


class _PlainSubclass(PlacementFragment):
    pass


class _DictSubclass(dict):  # type: ignore[type-arg]
    pass


def _without(fragment: Any, name: str) -> Any:
    clone = _forge(fragment)
    object.__delattr__(clone, name)
    return clone


def _retyped(fragment: Any, cls: type) -> Any:
    clone = object.__new__(cls)
    store_state(clone, field_state(fragment))
    return clone


def _dict_subclass(fragment: Any) -> Any:
    clone = _forge(fragment)
    store_state(clone, replace=True, state=_DictSubclass(field_state(fragment)))
    return clone


FORGERIES: List[Callable[[Any], Any]] = [
    lambda f: _without(f, "tensor_id"),
    lambda f: _without(f, "global_offset"),
    lambda f: _without(f, "local_shape"),
    lambda f: _without(f, "placement_fragment_id"),
    lambda f: _without(f, "nbytes"),  # not a snapshot field: no effect
    lambda f: _retyped(f, _PlainSubclass),
    lambda f: _retyped(f, _Overriding),
    lambda f: _forge(f, global_offset=[0, 0]),
    lambda f: _forge(f, local_shape="shape", tensor_id=7),
    lambda f: _forge(f, placement_fragment_id=None),
    lambda f: _forge(f, tensor_id=2**80, global_offset=(-1, 2**70)),
    _dict_subclass,
]


@pytest.mark.parametrize("forge", range(len(FORGERIES)))
@pytest.mark.parametrize("position", [0, -1])
def test_forged_placement_fragments_agree(forge: int, position: int) -> None:
    placement, bindings = _world(tensors=3)
    binding = _multi_worker_binding(bindings[0])
    part = _part(placement, binding)

    forged = dict(_attestation(placement, binding)._placement_dict)
    pfid = list(forged)[position]
    forged[pfid] = FORGERIES[forge](forged[pfid])  # one forgery shared by the three calls

    def make() -> Any:
        attestation = _attestation(placement, binding)
        object.__setattr__(attestation, "_placement_dict", dict(forged))
        return attestation

    _compare(placement, part, make)


def test_missing_field_falls_back_like_getattr() -> None:
    placement, bindings = _world()
    binding = bindings[0]
    part = _part(placement, binding)

    forged = {pfid: _without(f, "tensor_id") for pfid, f in _attestation(placement, binding)._placement_dict.items()}

    def make() -> Any:
        attestation = _attestation(placement, binding)
        object.__setattr__(attestation, "_placement_dict", dict(forged))
        return attestation

    assert _compare(placement, part, make) is None  # getattr raises AttributeError: not decided


def test_overriding_subclass_reads_the_property() -> None:
    placement, bindings = _world()
    binding = bindings[0]
    part = _part(placement, binding)

    forged = {pfid: _retyped(f, _Overriding) for pfid, f in _attestation(placement, binding)._placement_dict.items()}

    def make() -> Any:
        attestation = _attestation(placement, binding)
        object.__setattr__(attestation, "_placement_dict", dict(forged))
        return attestation

    result = _compare(placement, part, make)
    assert result is not None
    assert {s.tensor_id for _w, snapshots, _e in result[1] for s in snapshots} == {"overridden"}


def test_argument_errors() -> None:
    placement, bindings = _world()
    binding = bindings[0]
    part = _part(placement, binding)
    attestation = _attestation(placement, binding)
    for bad in (int, "cls", 3):  # given and not a heap type (None is "not given")
        with pytest.raises(TypeError):
            _executors(placement, part, attestation, bad)
    with pytest.raises(TypeError):
        _executors(placement, part, attestation, PlacementFragment, None)


# ---------------------------------------------------------------------------------------
# project_attested


def _project(*extra: Any, forge: Optional[Callable[[Any], Any]] = None) -> Any:
    """project_attested over a freshly bound side (its attestations cache nothing yet)."""
    from layout_model import TensorSpec, build_runtime_bindings
    from planner_helpers import tp_placement

    placement = tp_placement("dst", TensorSpec("w", (8, 4)), 4, 0)
    bindings = build_runtime_bindings(placement)
    kept, attestations = _bind_side("target", placement, bindings, {b.participant_id for b in bindings})
    if forge is not None:
        for attestation in attestations.values():
            forged = {pfid: forge(f) for pfid, f in attestation._placement_dict.items()}
            object.__setattr__(attestation, "_placement_dict", forged)
    result = _native.project_attested(*_args((placement, kept, attestations)), *extra)
    if result is None:
        return None
    return [
        (e, [([k for k in s.__getstate__()], gc.is_tracked(s)) for s in e.fragment_snapshots], gc.is_tracked(e))
        for e in result
    ]


@pytest.mark.parametrize("forge", [None, *range(len(FORGERIES))])
def test_project_attested_agrees(forge: Optional[int]) -> None:
    make = None if forge is None else FORGERIES[forge]
    with_cls = _project(PlacementFragment, forge=make)
    assert with_cls == _project(forge=make) == _project(None, forge=make)
    if forge is None:
        assert with_cls is not None and with_cls
        for _executor, snapshots, _tracked in with_cls:
            assert all(keys == SNAPSHOT_FIELDS and not is_tracked for keys, is_tracked in snapshots)


def test_project_attested_argument_errors() -> None:
    with pytest.raises(TypeError):
        _project(int)
    with pytest.raises(TypeError):
        _project(PlacementFragment, None, None)  # one more than the optional class and carrier

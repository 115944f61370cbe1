"""Library objects that cannot form a reference cycle are kept out of CPython's cyclic garbage
collector (csrc/common.h ``mr_untrack_inert``; ``_native.untrack_inert`` from the input value
constructors): every full collection scanned the millions of frozen placements, plan regions
and snapshots the library built.

An instance of an exact library class is untracked when every field value is inert: an object
of a type without collector support (int, str, None, ...), a tuple of inert items, or an
untracked object other than a dict. Anything that may still take part in a cycle (a list, a
dict, a tracked object, a user subclass instance) keeps the instance tracked. Forging a cycle
through an untracked instance (``object.__setattr__``) leaks it; it never crashes.
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import pickle
import weakref
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memory_executor import HostWorld, tp_placement
from spec_helpers import field_state

from spec_helpers import field_state

from mooncake.reshard import _native
from mooncake.reshard.weight import (
    OwnershipAxis,
    ParallelRank,
    PlacementFragment,
    ReplicatedAxis,
    RuntimeBindingFragment,
    SplitAxis,
    TensorDescriptor,
    WeightRuntimeBindingManifest,
)

_DIGEST = "0" * 64


def _tracked(*objects: Any) -> list[bool]:
    return [gc.is_tracked(obj) for obj in objects]


def _untracked_with_fields(obj: Any) -> None:
    """obj, its instance dict and every tuple field are out of the collector."""
    assert not gc.is_tracked(obj)
    if hasattr(obj, "__dict__"):
        assert not gc.is_tracked(obj.__dict__)
        state = obj.__dict__
    else:  # a value stored in a C layout: its fields are all there is
        state = obj.__getstate__()
    for value in state.values():
        if type(value) is tuple:
            assert not gc.is_tracked(value)


def _rank() -> ParallelRank:
    return ParallelRank(dp=1, tp=2)


def _tensor() -> TensorDescriptor:
    return TensorDescriptor(
        tensor_id="w",
        global_shape=[64, 32],  # a list: normalized to a tuple
        dtype="bfloat16",
        itemsize=2,
        shard_dims=(0,),
        layout_fingerprint="row-major",
        parallel_axes=(SplitAxis("tp", 0), ReplicatedAxis("dp"), OwnershipAxis("pp")),
    )


def _fragment(**changes: Any) -> PlacementFragment:
    arguments: dict[str, Any] = dict(
        tensor_id="w", global_offset=(0, 0), local_shape=(32, 32), nbytes=32 * 32 * 2, rank=_rank()
    )
    arguments.update(changes)
    return PlacementFragment(**arguments)


def _runtime(**changes: Any) -> RuntimeBindingFragment:
    arguments: dict[str, Any] = dict(
        placement_fragment_id="pf-1",
        fragment_id="rt-1",
        address=1 << 40,
        nbytes=4096,
        worker_id="worker-0",
        endpoint="endpoint-0",
        device="cuda:0",
        itemsize=2,
        local_shape=(32, 64),
        strides_bytes=(128, 2),
        storage_address=1 << 40,
        storage_nbytes=4096,
        storage_offset_bytes=0,
    )
    arguments.update(changes)
    return RuntimeBindingFragment(**arguments)


def _manifest(fragments: tuple[RuntimeBindingFragment, ...]) -> WeightRuntimeBindingManifest:
    return WeightRuntimeBindingManifest(
        resource_id="model",
        placement_id="placement",
        placement_digest=_DIGEST,
        instance_id="instance",
        generation=1,
        lease_id="lease",
        revision="rev",
        participant_id="p0",
        fragments=fragments,
    )


def _constructed() -> list[Any]:
    runtime = _runtime()
    return [
        _rank(),
        SplitAxis("tp", 1),
        ReplicatedAxis("dp"),
        OwnershipAxis("ep"),
        _tensor(),
        _fragment(),
        _fragment(placement_fragment_id="explicit-id", aliases=("w", "w.alias")),
        runtime,
        _manifest((runtime,)),
    ]


# ---------------------------------------------------------------------------------------------
# Constructed input values


def test_constructed_input_values_are_untracked() -> None:
    # fresh (tracked) tuples as inputs: the constructors untrack them with the instance
    offset = tuple([0, 0])
    assert gc.is_tracked(offset) or offset == (0, 0)
    for value in _constructed() + [_fragment(global_offset=offset, local_shape=tuple([32, 32]))]:
        _untracked_with_fields(value)


def test_values_holding_a_possibly_cyclic_value_stay_tracked() -> None:
    class Owner:
        pass

    assert _tracked(_runtime(owner=Owner())) == [True]
    assert _tracked(_runtime(owner=[1, 2])) == [True]
    # an untracked (still empty) dict re-tracks itself when a container is inserted later
    empty: dict[str, Any] = {}
    assert not gc.is_tracked(empty)
    assert _tracked(_runtime(owner=empty)) == [True]
    # an owner that cannot hold references does not keep the fragment tracked
    assert _tracked(_runtime(owner="framework-handle"), _runtime(owner=7)) == [False, False]


def test_user_subclasses_stay_tracked() -> None:
    class MyRank(ParallelRank):
        pass

    class MyFragment(PlacementFragment):
        pass

    class MyRuntime(RuntimeBindingFragment):
        pass

    class MyTensor(TensorDescriptor):
        pass

    rank = MyRank(dp=1)
    assert gc.is_tracked(rank)
    # an exact fragment holding a subclass rank: the rank may hold anything, so tracked too
    assert gc.is_tracked(_fragment(rank=rank))
    fragment = MyFragment(tensor_id="w", global_offset=(0, 0), local_shape=(32, 32), nbytes=2048, rank=_rank())
    assert gc.is_tracked(fragment)
    assert gc.is_tracked(MyRuntime(*[getattr(_runtime(), f.name) for f in dataclasses.fields(RuntimeBindingFragment)]))
    tensor = _tensor()
    assert gc.is_tracked(MyTensor(**{f.name: getattr(tensor, f.name) for f in dataclasses.fields(TensorDescriptor)}))
    # a manifest holding a subclass fragment stays tracked as well
    runtime = MyRuntime(*[getattr(_runtime(), f.name) for f in dataclasses.fields(RuntimeBindingFragment)])
    assert gc.is_tracked(_manifest((runtime,)))


@pytest.mark.parametrize("protocol", [2, 4, pickle.HIGHEST_PROTOCOL])
def test_untracked_values_survive_pickle_copy_and_replace(protocol: int) -> None:
    for value in _constructed():
        assert not gc.is_tracked(value)
        restored = pickle.loads(pickle.dumps(value, protocol=protocol))
        assert restored == value and type(restored) is type(value)
        assert field_state(restored) == field_state(value) or type(value) is RuntimeBindingFragment
        # (a runtime binding manifest is restored by default pickling, outside its constructor)
        assert not gc.is_tracked(restored) or type(value) is WeightRuntimeBindingManifest
        for clone in (copy.copy(value), copy.deepcopy(value)):
            assert clone == value
    fragment = _fragment()
    moved = dataclasses.replace(fragment, global_offset=(32, 0))
    assert moved.global_offset == (32, 0) and moved.rank == fragment.rank and not gc.is_tracked(moved)
    runtime = dataclasses.replace(_runtime(), fragment_id="rt-2")
    assert runtime.fragment_id == "rt-2" and not gc.is_tracked(runtime)
    rank = dataclasses.replace(_rank(), ep=3)
    assert rank == ParallelRank(dp=1, tp=2, ep=3) and not gc.is_tracked(rank)


def test_untracked_values_are_weakly_referenceable_and_freed() -> None:
    freed: list[str] = []
    values = _constructed()
    count = len(values)
    while values:
        value = values.pop()
        name = type(value).__name__
        ref = weakref.ref(value, lambda _ref, name=name: freed.append(name))
        assert ref() is value
        del value
        assert ref() is None, name  # freed by reference counting (subtype_dealloc), no collection
    assert len(freed) == count


def test_a_forged_cycle_through_an_untracked_value_leaks_but_never_crashes() -> None:
    fragment = _fragment()
    assert not gc.is_tracked(fragment)
    holder: list[Any] = [fragment]
    object.__setattr__(fragment, "aliases", (holder,))  # forging: a frozen field edited in place
    assert not gc.is_tracked(fragment)  # its C layout has no dict to re-track on the store
    ref = weakref.ref(fragment)
    del fragment, holder
    for _ in range(3):
        gc.collect()
    leaked = ref()
    assert leaked is not None  # the cycle runs through an untracked object: never collected
    assert leaked.tensor_id == "w"
    leaked.aliases[0].clear()  # broken by hand, it is freed by reference counting
    del leaked
    assert ref() is None
    gc.collect()


def test_collections_with_untracked_values_alive() -> None:
    values = [_constructed() for _ in range(200)]
    for _ in range(3):
        gc.collect()
    assert all(group[5] == _fragment() for group in values)
    referrers = gc.get_referrers(values[0][5])  # untracked referrers are not found; no crash
    assert isinstance(referrers, list)


# ---------------------------------------------------------------------------------------------
# _native.untrack_inert and its rule, against a Python oracle


@dataclasses.dataclass(frozen=True)
class _Holder:
    a: Any
    b: Any = None


def _oracle(value: Any, depth: int) -> bool:
    """mr_gc_inert in Python, read before the call (which untracks tuples)."""
    if not gc.is_tracked(value) and type(value) is not tuple and not isinstance(value, dict):
        return True  # no collector support, or untracked (not a dict)
    if type(value) is tuple:
        if not gc.is_tracked(value):
            return True
        return depth > 0 and all(_oracle(item, depth - 1) for item in value)
    return False


_ATOMS = st.one_of(
    st.integers(min_value=-(1 << 70), max_value=1 << 70),
    st.text(max_size=3),
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False),
    st.binary(max_size=3),
)


def _containers(children: Any) -> Any:
    return st.one_of(
        st.lists(children, max_size=3).map(tuple),
        st.lists(children, max_size=2),
        st.dictionaries(st.text(max_size=2), children, max_size=2),
        st.just(frozenset()),
        children.map(lambda item: _Holder(item)),
    )


_VALUES = st.recursive(_ATOMS, _containers, max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(a=_VALUES, b=_VALUES)
def test_untrack_inert_follows_the_rule(a: Any, b: Any) -> None:
    # fresh tuples (the strategy builds them at run time, so they start tracked)
    holder = _Holder(a, b)
    expected = _oracle(a, 4) and _oracle(b, 4)
    assert _native.untrack_inert(holder, _Holder) is expected
    assert gc.is_tracked(holder) is not expected
    if expected:
        assert not gc.is_tracked(holder.__dict__)
        for value in (a, b):
            if type(value) is tuple:
                assert not gc.is_tracked(value)
    assert holder == _Holder(a, b)


def test_untrack_inert_depth_limit() -> None:
    nested: Any = 1
    for _ in range(6):
        nested = tuple([nested])  # built at run time: tracked
    assert gc.is_tracked(nested)
    assert _native.untrack_inert(_Holder(nested), _Holder) is False  # deeper than 4 tuple levels
    shallow = tuple([tuple([tuple([tuple([1])])])])
    assert _native.untrack_inert(_Holder(shallow), _Holder) is True
    assert not gc.is_tracked(shallow)
    # once untracked, a deep tuple counts as inert wherever it appears
    assert _native.untrack_inert(_Holder(tuple([shallow, shallow])), _Holder) is True


def test_untrack_inert_hostile_arguments() -> None:
    holder = _Holder(1)
    with pytest.raises(TypeError):
        _native.untrack_inert(holder)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        _native.untrack_inert(holder, _Holder, 3)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        _native.untrack_inert(holder, "not a class")  # type: ignore[arg-type]

    class Sub(_Holder):
        pass

    sub = Sub(1)
    assert _native.untrack_inert(sub, _Holder) is False and gc.is_tracked(sub)  # exact class only
    assert _native.untrack_inert(5, int) is False  # a static type, no instance dict
    assert _native.untrack_inert(1 << 80, int) is False

    class Slotted:
        __slots__ = ("x",)

    slotted = Slotted()
    assert _native.untrack_inert(slotted, Slotted) is False and gc.is_tracked(slotted)

    class Mapped:
        pass

    mapped = Mapped()
    mapped.__dict__["x"] = {}
    assert _native.untrack_inert(mapped, Mapped) is False and gc.is_tracked(mapped)
    plain = Mapped()
    plain.x = (1, "s")
    assert _native.untrack_inert(plain, Mapped) is True and not gc.is_tracked(plain)
    assert _native.untrack_inert(plain, Mapped) is True  # idempotent
    # a mutable class: the user creates a cycle through the untracked instance, which leaks
    # (documented) and never crashes: the instance stays untracked and the collector keeps it
    plain.x = [plain]
    assert not gc.is_tracked(plain) and plain.x[0] is plain
    alive = weakref.ref(plain)
    del plain
    gc.collect()
    leaked = alive()
    assert leaked is not None and leaked.x[0] is leaked
    leaked.x = None
    # an untracked instance dict re-tracks itself when a tracked value is inserted into it
    # (csrc/common.h: why an untracked dict is never inert; on CPython 3.13 an attribute store
    # into an instance's inline values leaves its materialized dict's tracking as it was)
    fresh = Mapped()
    fresh.x = (1, "s")
    assert _native.untrack_inert(fresh, Mapped) is True and not gc.is_tracked(fresh.__dict__)
    fresh.__dict__["x"] = [fresh]
    assert gc.is_tracked(fresh.__dict__) and not gc.is_tracked(fresh)
    fresh.__dict__["x"] = None


# ---------------------------------------------------------------------------------------------
# Planner, binder and pickle restore results


def _world(parts: int = 48) -> HostWorld:
    source = tp_placement(parts, prefix="s", shape=(96, 96), dim=0)
    return HostWorld(source, tp_placement(parts, prefix="t", shape=(96, 96), dim=1))


def test_plan_bind_and_restore_results_are_untracked() -> None:
    world = _world()
    source, target = world.source, world.target
    for fragment in source.fragments + target.fragments:
        assert not gc.is_tracked(fragment)
    logical = world.logical  # planned here, after the check above
    operations = logical.operations
    assert len(operations) >= 2048
    assert not gc.is_tracked(operations)
    for region in operations:
        _untracked_with_fields(region)
    for executor in logical.source_executors + logical.target_executors:
        assert not gc.is_tracked(executor)
    plan = world.bind()
    snapshots = [s for executor in plan.source_executors + plan.target_executors for s in executor.fragment_snapshots]
    assert len(snapshots) == len(source.fragments) + len(target.fragments)
    for snapshot in snapshots:
        _untracked_with_fields(snapshot)
    for region in plan.operations:
        # a bound fragment holds its attestation, which holds the placement and private maps:
        # not provably acyclic, so bound fragments and the regions holding them stay tracked
        assert gc.is_tracked(region.target) and gc.is_tracked(region)
        assert not gc.is_tracked(region.target.placement) and not gc.is_tracked(region.target.binding)
    payload = pickle.dumps(plan, protocol=pickle.HIGHEST_PROTOCOL)
    restored = pickle.loads(payload)
    assert restored == plan
    for region in restored.operations:
        for fragment in (region.source.placement, region.target.placement, region.source.binding, region.target.binding):
            assert not gc.is_tracked(fragment)
    for executor in restored.source_executors + restored.target_executors:
        for snapshot in executor.fragment_snapshots:
            _untracked_with_fields(snapshot)
    for fragment in restored.target_placement.fragments:
        assert not gc.is_tracked(fragment)
    # the results behave as before a full collection and after it
    gc.collect()
    assert pickle.loads(payload) == restored == plan
    assert world.bind() == plan


def test_results_holding_tracked_values_stay_tracked() -> None:
    """A planner region whose fragment is a tracked object (a user subclass of
    PlacementFragment) stays tracked, and so does the tuple holding it."""

    class MyFragment(PlacementFragment):
        pass

    logical = _world().logical
    records: list[Any] = []
    sources: list[Any] = []
    targets: list[Any] = []
    for index, op in enumerate(logical.operations):
        fragment = op.source
        if index == 7:
            fragment = MyFragment(
                fragment.tensor_id, fragment.global_offset, fragment.local_shape, fragment.nbytes, fragment.rank,
                fragment.pipeline_stage_id, fragment.aliases, fragment.placement_fragment_id,
            )
            assert gc.is_tracked(fragment)
        sources.append(fragment)
        targets.append(op.target)
        records.append(
            (index, index, op.overlap_offset, op.overlap_shape, op.source_base_offset, op.target_base_offset,
             op.inner_bytes, op.outer_loop_counts, op.source_strides, op.target_strides, 1)
        )
    built = _native.build_regions(type(logical.operations[0]), records, sources, targets)
    assert len(built) >= 1024
    assert [index for index, region in enumerate(built) if gc.is_tracked(region)] == [7]
    assert gc.is_tracked(built)
    assert built[8] == logical.operations[8]

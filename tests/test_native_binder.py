"""binder.c (issue 5): ``bind_views``, ``attest`` and ``attested_executors``.

Each kernel returns exactly the value of the Python code it accelerates, or None ("not decided
here", the Python code then runs and raises its own message). The tests compare every result
with that Python code (the kernel patched out) on valid and forged inputs, and drive the C
argument checks and fallbacks with hostile values (wrong types, huge and negative ints,
non-str ids, missing attributes)."""

from __future__ import annotations

import dataclasses
import gc
import sys
from typing import Any, Callable, Optional

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_executor import HostMemory, host_bindings, tp_placement
from spec_helpers import field_state, forged_instance

from mooncake.reshard import _native
from mooncake.reshard.weight import (
    PlacementFragment,
    RuntimeBindingFragment,
    TensorDescriptor,
    WeightRuntimeBindingManifest,
)
from mooncake.reshard.weight._planner import binding as planner_binding
from mooncake.reshard.weight._planner.attestation import RuntimeBindingAttestation, RuntimeBindingEvidence
from mooncake.reshard.weight._planner.bound_contracts import ExecutorTransferPlan, RuntimeFragmentSnapshot
from mooncake.reshard.weight._planner.bound_validation import _attestation_values
from mooncake.reshard.weight.binding import _binding_views

U64_MAX = (1 << 64) - 1


def _world(tensors: int = 3, tp: int = 2, shape: tuple[int, ...] = (4, 6)) -> tuple[Any, tuple[Any, ...]]:
    names = tuple(f"w{index}" for index in range(tensors))
    placement = tp_placement(tp, prefix="p", shape=shape, tensors=names)
    bindings = host_bindings(placement, HostMemory(), prefix="b")
    return placement, bindings


def _part(placement: Any, binding: Any) -> Any:
    return placement._part_index()[binding.participant_id]


def _forge(obj: Any, **changes: Any) -> Any:
    """A copy of the frozen ``obj`` with field values set behind its validation."""
    clone = forged_instance(type(obj), dict(field_state(obj)))
    for name, value in changes.items():
        object.__setattr__(clone, name, value)
    return clone


def _outcome(function: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return ("value", function())
    except (ValueError, KeyError, AttributeError, TypeError) as exc:
        return (type(exc).__name__, str(exc))


def _without(monkeypatch: pytest.MonkeyPatch, name: str, function: Callable[[], Any]) -> tuple[str, Any]:
    """The outcome of ``function`` with the kernel ``name`` patched to "not decided"."""
    with monkeypatch.context() as patch:
        patch.setattr(_native, name, lambda *args: None)
        return _outcome(function)


# ---------------------------------------------------------------------------------------
# bind_views


def _views_kernel(placement: Any, binding: Any) -> Optional[list[Any]]:
    part = _part(placement, binding)
    result: Optional[list[Any]] = _native.bind_views(
        binding.instance_id,
        part.fragments,
        binding.fragments,
        part.tensors,
        PlacementFragment,
        RuntimeBindingFragment,
        TensorDescriptor,
    )
    return result


def test_bind_views_decides_valid_bindings_exactly() -> None:
    placement, bindings = _world()
    for binding in bindings:
        views = _views_kernel(placement, binding)
        assert views is not None
        part = _part(placement, binding)
        tensors = {tensor.tensor_id: tensor for tensor in part.tensors}
        expected = [
            (binding.instance_id, runtime, logical, tensors[logical.tensor_id])
            for logical, runtime in zip(part.fragments, binding.fragments)
        ]
        assert len(views) == len(expected)
        for got, want in zip(views, expected):
            assert all(a is b for a, b in zip(got, want))


_RUNTIME_FORGERIES: list[dict[str, Any]] = [
    {"nbytes": 1 << 70},
    {"nbytes": -1},
    {"nbytes": 2.0},
    {"nbytes": True},
    {"local_shape": [4, 3]},
    {"local_shape": (4, 1 << 80)},
    {"local_shape": (4, "3")},
    {"local_shape": (4,)},
    {"itemsize": 1 << 65},
    {"itemsize": -2},
    {"itemsize": 2.0},
    {"itemsize": 3},
    {"strides_bytes": [6, 2]},
    {"strides_bytes": (6, 2, 1)},
    {"strides_bytes": (1 << 90, 2)},
    {"strides_bytes": (-6, 2)},
    {"strides_bytes": (6.0, 2)},
    {"strides_bytes": (2, 8)},
    {"placement_fragment_id": ""},
    {"placement_fragment_id": 7},
    {"placement_fragment_id": "zz-unknown"},
    {"placement_fragment_id": "\ud800"},
]


@pytest.mark.parametrize("changes", _RUNTIME_FORGERIES, ids=repr)
def test_bind_views_matches_python_on_forged_runtime_fragments(
    monkeypatch: pytest.MonkeyPatch, changes: dict[str, Any]
) -> None:
    placement, bindings = _world()
    binding = bindings[0]
    forged_fragment = _forge(binding.fragments[-1], **changes)
    forged = _forge(binding, fragments=binding.fragments[:-1] + (forged_fragment,))
    with_kernel = _outcome(lambda: _binding_views(placement, forged))
    without = _without(monkeypatch, "bind_views", lambda: _binding_views(placement, forged))
    assert with_kernel == without


def test_bind_views_falls_back_on_shapes_it_does_not_decide() -> None:
    placement, bindings = _world()
    binding = bindings[0]
    part = _part(placement, binding)
    args = (binding.instance_id, part.fragments, binding.fragments, part.tensors)
    classes = (PlacementFragment, RuntimeBindingFragment, TensorDescriptor)
    # Not tuples, other lengths, other exact classes, reversed order, unsorted or duplicate tensors.
    assert _native.bind_views(args[0], list(args[1]), args[2], args[3], *classes) is None
    assert _native.bind_views(args[0], args[1], list(args[2]), args[3], *classes) is None
    assert _native.bind_views(args[0], args[1], args[2], list(args[3]), *classes) is None
    assert _native.bind_views(args[0], args[1], args[2][:-1], args[3], *classes) is None
    assert _native.bind_views(args[0], args[1][::-1], args[2][::-1], args[3], *classes) is None
    assert _native.bind_views(args[0], args[1], args[2], args[3][::-1], *classes) is None
    assert _native.bind_views(args[0], args[1], args[2], args[3] + args[3][-1:], *classes) is None
    assert _native.bind_views(args[0], args[1], args[2], args[3][1:], *classes) is None
    assert _native.bind_views(args[0], args[1], args[2], args[3], TensorDescriptor, RuntimeBindingFragment, TensorDescriptor) is None
    assert _native.bind_views(args[0], args[1], args[2], args[3], PlacementFragment, PlacementFragment, TensorDescriptor) is None
    # Missing attributes fall back (the Python code raises in its own order).
    stripped = _forge(binding.fragments[0])
    object.__delattr__(stripped, "nbytes")
    assert _native.bind_views(args[0], args[1], (stripped,) + args[2][1:], args[3], *classes) is None
    # A subclass instance is not the exact class.
    tensor = part.tensors[0]
    odd = type("OddDescriptor", (TensorDescriptor,), {})
    subclassed = _forge(tensor)
    object.__setattr__(subclassed, "__class__", odd)
    assert _native.bind_views(args[0], args[1], args[2], (subclassed,) + args[3][1:], *classes) is None
    # The empty part pairs with the empty binding.
    assert _native.bind_views(args[0], (), (), (), *classes) == []


def test_bind_views_rank_limit_and_overflowing_strides_fall_back() -> None:
    placement, bindings = _world(tensors=1, tp=1, shape=(2,) * 3)
    binding = bindings[0]
    part = _part(placement, binding)
    classes = (PlacementFragment, RuntimeBindingFragment, TensorDescriptor)
    logical = part.fragments[0]
    runtime = binding.fragments[0]
    big_shape = (2,) * 65
    forged_logical = _forge(logical, local_shape=big_shape)
    forged_runtime = _forge(runtime, local_shape=big_shape, strides_bytes=(1,) * 65)
    assert _native.bind_views("i", (forged_logical,), (forged_runtime,), part.tensors, *classes) is None
    huge = (1 << 40, 1 << 40, 1 << 40)
    forged_logical = _forge(logical, local_shape=huge)
    forged_runtime = _forge(runtime, local_shape=huge, strides_bytes=(1 << 81, 1 << 41, 2))
    assert _native.bind_views("i", (forged_logical,), (forged_runtime,), part.tensors, *classes) is None


def test_bind_views_argument_errors() -> None:
    with pytest.raises(TypeError):
        _native.bind_views()
    with pytest.raises(TypeError):
        _native.bind_views("i", (), (), (), PlacementFragment, RuntimeBindingFragment)
    with pytest.raises(TypeError):
        _native.bind_views("i", (), (), (), "not a class", RuntimeBindingFragment, TensorDescriptor)
    with pytest.raises(TypeError):
        _native.bind_views("i", (), (), (), int, RuntimeBindingFragment, TensorDescriptor)  # not a heap type


@settings(max_examples=60, deadline=None)
@given(
    tensors=st.integers(1, 4),
    tp=st.integers(1, 3),
    field=st.sampled_from(["nbytes", "local_shape", "itemsize", "strides_bytes", "placement_fragment_id"]),
    value=st.one_of(
        st.integers(-(1 << 70), 1 << 70),
        st.tuples(st.integers(-3, 1 << 66), st.integers(-3, 1 << 66)),
        st.text(max_size=4),
        st.none(),
    ),
    index=st.integers(0, 8),
    reorder=st.booleans(),
)
def test_bind_views_property_against_the_python_path(
    tensors: int, tp: int, field: str, value: Any, index: int, reorder: bool
) -> None:
    placement, bindings = _world(tensors=tensors, tp=tp, shape=(3, 6))
    binding = bindings[index % len(bindings)]
    fragments = list(binding.fragments)
    position = index % len(fragments)
    fragments[position] = _forge(fragments[position], **{field: value})
    if reorder:
        fragments.reverse()
    forged = _forge(binding, fragments=tuple(fragments))
    with_kernel = _outcome(lambda: _binding_views(placement, forged))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_native, "bind_views", lambda *args: None)
        without = _outcome(lambda: _binding_views(placement, forged))
    assert with_kernel == without


# ---------------------------------------------------------------------------------------
# attest


def _attest_kernel(placement: Any, binding: Any, part_fragments: Any = "part") -> Any:
    if part_fragments == "part":
        part = placement._part_index().get(binding.participant_id)
        part_fragments = None if part is None else part.fragments
    return _native.attest(
        RuntimeBindingAttestation, RuntimeBindingEvidence, RuntimeBindingFragment, placement, binding, part_fragments
    )


def _attestation_state(attestation: Any) -> dict[str, Any]:
    state = dict(field_state(attestation))
    state.pop("_mooncake_attestation", None)
    for name in ("_placement_by_id", "_binding_by_id"):
        state[name] = dict(state[name])
    evidence = state["evidence"]
    state["evidence"] = (type(evidence), dict(field_state(evidence)))
    return state


def test_attest_builds_the_python_attestation() -> None:
    placement, bindings = _world()
    for binding in bindings:
        built = _attest_kernel(placement, binding)
        assert type(built) is RuntimeBindingAttestation
        reference = object.__new__(RuntimeBindingAttestation)
        reference._set_validated_state(placement, RuntimeBindingEvidence.from_binding(binding), binding, validated=True)
        assert _attestation_state(built) == _attestation_state(reference)
        assert list(field_state(built)) == list(field_state(reference))
        assert list(field_state(built.evidence)) == [field.name for field in dataclasses.fields(RuntimeBindingEvidence)]
        assert built == reference
        assert built.evidence.fragments is binding.fragments
        assert built.evidence == RuntimeBindingEvidence.from_binding(binding)
        with pytest.raises(TypeError):
            built._placement_by_id["x"] = None  # type: ignore[index]
    # No part: empty placement map.
    built = _attest_kernel(placement, bindings[0], None)
    assert dict(built._placement_by_id) == {}


_BINDING_FORGERIES: list[dict[str, Any]] = [
    {"resource_id": ""},
    {"placement_id": 3},
    {"instance_id": None},
    {"lease_id": ""},
    {"revision": b"rev"},
    {"participant_id": ""},
    {"placement_digest": "0" * 63},
    {"placement_digest": "A" * 64},
    {"placement_digest": "g" * 64},
    {"placement_digest": "\ud800" * 64},
    {"placement_digest": 5},
    {"generation": -1},
    {"generation": U64_MAX + 1},
    {"generation": 1 << 200},
    {"generation": True},
    {"generation": 1.0},
    {"fragments": []},
]


@pytest.mark.parametrize("changes", _BINDING_FORGERIES, ids=repr)
def test_attest_falls_back_on_forged_scalars(changes: dict[str, Any]) -> None:
    placement, bindings = _world()
    forged = _forge(bindings[0], **changes)
    assert _attest_kernel(placement, forged) is None


def test_attest_accepts_the_u64_bounds() -> None:
    placement, bindings = _world()
    for generation in (0, U64_MAX):
        built = _attest_kernel(placement, _forge(bindings[0], generation=generation))
        assert built is not None and built.evidence.generation == generation


def test_attest_falls_back_on_forged_fragments() -> None:
    placement, bindings = _world(tensors=3)
    binding = bindings[0]
    fragments = binding.fragments
    assert len(fragments) >= 2
    cases = [
        fragments[::-1],  # not sorted by placement fragment id
        fragments[:1] * 2,  # duplicate placement fragment id
        (fragments[0], _forge(fragments[1], fragment_id=fragments[0].fragment_id)),  # duplicate runtime id
        (_forge(fragments[0], owner=object()),) + fragments[1:],  # an owner
        (_forge(fragments[0], fragment_id=5),) + fragments[1:],  # non-str runtime id
        (_forge(fragments[0], placement_fragment_id=""),) + fragments[1:],
        (placement.fragments[0],) + fragments[1:],  # not a runtime fragment
    ]
    for case in cases:
        assert _attest_kernel(placement, _forge(binding, fragments=tuple(case))) is None
    # A part whose fragments are not a tuple / have no usable id.
    assert _attest_kernel(placement, binding, list(_part(placement, binding).fragments)) is None
    assert _attest_kernel(placement, binding, (_forge(_part(placement, binding).fragments[0], placement_fragment_id=1),)) is None


def test_attest_argument_errors() -> None:
    placement, bindings = _world()
    with pytest.raises(TypeError):
        _native.attest(RuntimeBindingAttestation, RuntimeBindingEvidence, RuntimeBindingFragment, placement, bindings[0])
    with pytest.raises(TypeError):
        _native.attest(1, RuntimeBindingEvidence, RuntimeBindingFragment, placement, bindings[0], None)
    # Missing attributes on a non-binding: not decided.
    assert _native.attest(
        RuntimeBindingAttestation, RuntimeBindingEvidence, RuntimeBindingFragment, placement, object(), None
    ) is None


def test_from_validated_with_and_without_the_kernel_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    placement, bindings = _world()
    for binding in bindings:
        fresh = dataclasses.replace(binding)
        with_kernel = RuntimeBindingAttestation._from_validated(placement, fresh)
        with monkeypatch.context() as patch:
            patch.setattr(_native, "attest", lambda *args: None)
            without = RuntimeBindingAttestation._from_validated(placement, dataclasses.replace(binding))
        assert _attestation_state(with_kernel) == _attestation_state(without)


# ---------------------------------------------------------------------------------------
# attested_executors


def _executors_kernel(placement: Any, part: Any, attestation: Any, **overrides: Any) -> Any:
    values = dict(
        placement_id=placement.placement_id,
        participant_id=part.participant_id,
        digest=placement.digest,
        rank=part.rank,
    )
    values.update(overrides)
    return _native.attested_executors(
        ExecutorTransferPlan,
        RuntimeFragmentSnapshot,
        RuntimeBindingAttestation,
        RuntimeBindingEvidence,
        RuntimeBindingFragment,
        attestation,
        values["placement_id"],
        values["participant_id"],
        values["digest"],
        values["rank"],
    )


def _python_rows(placement: Any, part: Any, attestation: Any) -> Any:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_native, "attested_executors", lambda *args: None)
        return planner_binding._attested_executors(placement, part, attestation)


def _multi_worker_binding(binding: Any) -> Any:
    """The binding with its fragments spread over two workers, runtime ids in reverse order."""
    fragments = []
    count = len(binding.fragments)
    for index, fragment in enumerate(binding.fragments):
        fragments.append(
            _forge(fragment, worker_id=f"worker-{index % 2}", fragment_id=f"rt-{count - index:03d}")
        )
    return WeightRuntimeBindingManifest(
        resource_id=binding.resource_id,
        placement_id=binding.placement_id,
        placement_digest=binding.placement_digest,
        instance_id=binding.instance_id,
        generation=binding.generation,
        lease_id=binding.lease_id,
        revision=binding.revision,
        participant_id=binding.participant_id,
        fragments=tuple(fragments),
    )


@pytest.mark.parametrize("spread", [False, True])
def test_attested_executors_equal_the_python_rows(spread: bool) -> None:
    placement, bindings = _world(tensors=4)
    for binding in bindings:
        if spread:
            binding = _multi_worker_binding(binding)
        part = _part(placement, binding)
        attestation = RuntimeBindingAttestation._from_validated(placement, binding)
        built = _executors_kernel(placement, part, attestation)
        assert built is not None
        table, rows = built
        reference_attestation = RuntimeBindingAttestation._from_validated(placement, dataclasses.replace(binding))
        reference = _python_rows(placement, part, reference_attestation)
        assert rows == reference
        assert [row[0] for row in rows] == sorted(table)
        for worker_id, snapshots, executor in rows:
            assert table[worker_id] is snapshots
            assert executor.fragment_snapshots is snapshots
            assert executor.attestation is attestation
            assert executor.fragment_ids == tuple(snapshot.fragment_id for snapshot in snapshots)
            assert list(snapshots) == sorted(snapshots, key=lambda snapshot: snapshot.fragment_id)
            assert list(field_state(executor)) == [field.name for field in dataclasses.fields(ExecutorTransferPlan)]
            for snapshot in snapshots:
                assert type(snapshot) is RuntimeFragmentSnapshot
                assert not hasattr(snapshot, "__dict__")  # stored in its C layout
                assert list(snapshot.__getstate__()) == [field.name for field in dataclasses.fields(RuntimeFragmentSnapshot)]
        # The table is the one the revalidation reads for this attestation.
        assert _attestation_values(reference_attestation)["snapshots_by_worker"] == table


def test_attested_executors_fall_back_when_a_post_init_check_is_not_visible() -> None:
    placement, bindings = _world()
    binding = bindings[0]
    part = _part(placement, binding)
    attestation = RuntimeBindingAttestation._from_validated(placement, binding)
    assert _executors_kernel(placement, part, attestation, placement_id="") is None
    assert _executors_kernel(placement, part, attestation, participant_id=7) is None
    assert _executors_kernel(placement, part, attestation, digest="0" * 64 + "0") is None
    assert _executors_kernel(placement, part, attestation, digest="Z" * 64) is None
    assert _executors_kernel(placement, part, attestation, digest=None) is None
    assert _executors_kernel(placement, part, object()) is None

    def forged_attestation(**evidence_changes: Any) -> Any:
        fresh = RuntimeBindingAttestation._from_validated(placement, dataclasses.replace(binding))
        object.__setattr__(fresh, "evidence", _forge(fresh.evidence, **evidence_changes))
        return fresh

    assert _executors_kernel(placement, part, forged_attestation(instance_id="")) is None
    assert _executors_kernel(placement, part, forged_attestation(lease_id=None)) is None
    assert _executors_kernel(placement, part, forged_attestation(fragments=list(binding.fragments))) is None
    duplicate = (binding.fragments[0], _forge(binding.fragments[1], fragment_id=binding.fragments[0].fragment_id))
    assert _executors_kernel(placement, part, forged_attestation(fragments=duplicate)) is None
    nameless = (_forge(binding.fragments[0], worker_id=""),) + binding.fragments[1:]
    assert _executors_kernel(placement, part, forged_attestation(fragments=nameless)) is None
    odd = (_forge(binding.fragments[0], fragment_id=3),) + binding.fragments[1:]
    assert _executors_kernel(placement, part, forged_attestation(fragments=odd)) is None
    fresh = RuntimeBindingAttestation._from_validated(placement, dataclasses.replace(binding))
    object.__setattr__(fresh, "_placement_dict", dict(fresh._placement_dict).items())
    assert _executors_kernel(placement, part, fresh) is None
    # Evidence fragments without an attested placement fragment get no snapshot.
    fresh = RuntimeBindingAttestation._from_validated(placement, dataclasses.replace(binding))
    object.__setattr__(fresh, "_placement_dict", {})
    assert _executors_kernel(placement, part, fresh) == ({}, ())


def test_attested_executors_argument_errors() -> None:
    with pytest.raises(TypeError):
        _native.attested_executors()
    with pytest.raises(TypeError):
        _native.attested_executors(*(["x"] * 10))


def test_projection_with_and_without_the_kernels_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    placement, bindings = _world(tensors=3, tp=3)

    def project() -> Any:
        return planner_binding._build_executor_plans(
            (placement,), tuple(dataclasses.replace(binding) for binding in bindings), "target"
        )

    with_kernels = project()
    with monkeypatch.context() as patch:
        for name in ("bind_views", "attest", "attested_executors"):
            patch.setattr(_native, name, lambda *args: None)
        without = project()
    assert with_kernels == without


def test_repeated_calls_do_not_leak_references() -> None:
    placement, bindings = _world()
    binding = bindings[0]
    part = _part(placement, binding)
    watched = (binding, binding.fragments, binding.fragments[0], part.fragments[0], part.tensors[0], binding.instance_id)

    def run() -> None:
        for _ in range(200):
            _views_kernel(placement, binding)
            attestation = _attest_kernel(placement, binding)
            _executors_kernel(placement, part, attestation)
            _native.bind_views("i", list(part.fragments), binding.fragments, part.tensors,
                               PlacementFragment, RuntimeBindingFragment, TensorDescriptor)
            _attest_kernel(placement, _forge(binding, generation=-1))

    run()
    gc.collect()
    before = [sys.getrefcount(item) for item in watched]
    run()
    gc.collect()
    assert [sys.getrefcount(item) for item in watched] == before


# ---------------------------------------------------------------------------------------
# bound_fragments


def _bound_kernel(part: Any, attestation: Any) -> Any:
    from mooncake.reshard.weight._planner.fragments import BoundWeightFragment

    return _native.bound_fragments(BoundWeightFragment, RuntimeBindingAttestation, part.fragments, attestation)


def _python_bound(attestation: Any, part: Any) -> Any:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_native, "bound_fragments", lambda *args: None)
        return planner_binding._attested_bound_fragments(attestation, part)


def test_bound_fragments_equal_the_python_rows() -> None:
    placement, bindings = _world(tensors=3)
    for binding in bindings:
        part = _part(placement, binding)
        attestation = RuntimeBindingAttestation._from_validated(placement, binding)
        rows = _bound_kernel(part, attestation)
        assert rows is not None
        reference = _python_bound(
            RuntimeBindingAttestation._from_validated(placement, dataclasses.replace(binding)), part
        )
        assert [row[0] for row in rows] == [row[0] for row in reference]
        for (fragment_id, bound), (_, expected) in zip(rows, reference):
            assert bound == expected
            assert field_state(bound).keys() == field_state(expected).keys()
            assert bound.attestation is attestation and bound.owner is None
            assert bound.placement is attestation._placement_dict[fragment_id]
            assert bound.binding is attestation._binding_dict[fragment_id]
            assert (bound.instance_id, bound.runtime_lease_id, bound.lease_generation) == (
                binding.instance_id,
                binding.lease_id,
                binding.generation,
            )
    assert _bound_kernel(_part(placement, bindings[0]), RuntimeBindingAttestation._from_validated(placement, bindings[0])) is not None


def test_bound_fragments_fall_back_off_the_trusted_path() -> None:
    placement, bindings = _world(tensors=2)
    binding = bindings[0]
    part = _part(placement, binding)
    from mooncake.reshard.weight._planner.fragments import BoundWeightFragment

    def fresh() -> Any:
        return RuntimeBindingAttestation._from_validated(placement, dataclasses.replace(binding))

    # A placement fragment equal to, but not the very object of, the attested one.
    copied = tuple(_forge(fragment) for fragment in part.fragments)
    assert _native.bound_fragments(BoundWeightFragment, RuntimeBindingAttestation, copied, fresh()) is None
    assert _native.bound_fragments(BoundWeightFragment, RuntimeBindingAttestation, list(part.fragments), fresh()) is None
    assert _native.bound_fragments(BoundWeightFragment, RuntimeBindingAttestation, part.fragments, object()) is None
    attestation = fresh()
    object.__setattr__(attestation, "_binding_dict", {})
    assert _native.bound_fragments(BoundWeightFragment, RuntimeBindingAttestation, part.fragments, attestation) is None
    attestation = fresh()
    object.__setattr__(attestation, "_placement_dict", dict(attestation._placement_dict).items())
    assert _native.bound_fragments(BoundWeightFragment, RuntimeBindingAttestation, part.fragments, attestation) is None
    attestation = fresh()
    object.__delattr__(attestation, "_binding_dict")
    assert _native.bound_fragments(BoundWeightFragment, RuntimeBindingAttestation, part.fragments, attestation) is None
    # Without the kernel the Python path raises its own error for that attestation.
    with pytest.raises(KeyError):
        _python_bound(attestation, part)
    nameless = (_forge(part.fragments[0], placement_fragment_id=4),) + part.fragments[1:]
    assert _native.bound_fragments(BoundWeightFragment, RuntimeBindingAttestation, nameless, fresh()) is None
    assert _native.bound_fragments(BoundWeightFragment, RuntimeBindingAttestation, (), fresh()) == ()
    with pytest.raises(TypeError):
        _native.bound_fragments(BoundWeightFragment, RuntimeBindingAttestation, part.fragments)
    with pytest.raises(TypeError):
        _native.bound_fragments(None, RuntimeBindingAttestation, part.fragments, fresh())


# ---------------------------------------------------------------------------------------
# bind_regions and whole bindings


class _Plans:
    def __init__(self) -> None:
        from mooncake.reshard.weight.planner import plan_placement_transfer

        self.source, self.source_bindings = _world(tensors=2, tp=2)
        target_names = ("w0", "w1")
        self.target = tp_placement(3, prefix="t", shape=(4, 6), tensors=target_names)
        self.target_bindings = host_bindings(self.target, HostMemory(), prefix="d")
        self.logical = plan_placement_transfer(self.source, self.target)

    def bind(self, logical: Any = None) -> Any:
        from mooncake.reshard.weight.planner import bind_logical_transfer_plan

        return bind_logical_transfer_plan(
            self.logical if logical is None else logical,
            tuple(dataclasses.replace(binding) for binding in self.target_bindings),
            source_bindings=tuple(dataclasses.replace(binding) for binding in self.source_bindings),
        )


def _all_kernels_off(patch: pytest.MonkeyPatch) -> None:
    for name in ("bind_views", "attest", "attested_executors", "bound_fragments", "bind_regions"):
        patch.setattr(_native, name, lambda *args: None)


def test_binding_with_and_without_the_kernels_agree() -> None:
    plans = _Plans()
    with_kernels = plans.bind()
    with pytest.MonkeyPatch.context() as patch:
        _all_kernels_off(patch)
        without = plans.bind()
    assert with_kernels == without
    assert with_kernels.source_executors == without.source_executors
    assert with_kernels.target_executors == without.target_executors
    for got, want in zip(with_kernels.operations, without.operations):
        assert list(field_state(got)) == list(field_state(want))


def _forged_plan(plans: _Plans, index: int, **changes: Any) -> Any:
    logical = plans.logical
    operations = list(logical.operations)
    operations[index] = _forge(operations[index], **changes)
    forged = _forge(logical, operations=tuple(operations))
    return forged


@pytest.mark.parametrize(
    "make",
    [
        lambda plans: _forge(plans.logical, operations=plans.logical.operations + (object(),)),
        lambda plans: _forged_plan(plans, 0, source=plans.target.fragments[0]),
        lambda plans: _forged_plan(plans, 1, source="runtime"),
        lambda plans: _forged_plan(plans, 0, target=_forge(plans.logical.operations[0].target, placement_fragment_id="nope")),
        lambda plans: _forge(plans.logical, operations=list(plans.logical.operations)),
    ],
)
def test_binding_failures_with_and_without_the_kernels_agree(make: Callable[[_Plans], Any]) -> None:
    plans = _Plans()
    forged = make(plans)
    with_kernels = _outcome(lambda: plans.bind(forged))
    with pytest.MonkeyPatch.context() as patch:
        _all_kernels_off(patch)
        without = _outcome(lambda: plans.bind(forged))
    assert with_kernels == without
    assert with_kernels[0] != "value" or with_kernels[1] == without[1]


def test_bind_regions_decides_and_falls_back() -> None:
    from mooncake.reshard.weight import StoredFragmentSnapshot
    from mooncake.reshard.weight._planner.contracts import TransferRegion

    plans = _Plans()
    operations = plans.logical.operations
    classes = (TransferRegion, PlacementFragment, StoredFragmentSnapshot)
    targets = {op.target.placement_fragment_id: ("bound-target", op.target) for op in operations}
    sources = {op.source.placement_fragment_id: ("bound-source", op.source) for op in operations}
    regions = _native.bind_regions(*classes, operations, targets, sources)
    assert regions is not None and len(regions) == len(operations)
    for region, op in zip(regions, operations):
        assert type(region) is TransferRegion
        assert list(field_state(region)) == [field.name for field in dataclasses.fields(TransferRegion)]
        assert region.target == ("bound-target", op.target)
        assert region.source == ("bound-source", op.source)
        for name in field_state(region):
            if name not in ("source", "target"):
                assert field_state(region)[name] is getattr(op, name)
    assert _native.bind_regions(*classes, list(operations), targets, sources) is None
    assert _native.bind_regions(*classes, operations, dict(list(targets.items())[1:]), sources) is None
    assert _native.bind_regions(*classes, operations, targets, {}) is None
    assert _native.bind_regions(*classes, operations, targets.items(), sources) is None
    assert _native.bind_regions(*classes, (operations[0], object()), targets, sources) is None
    stripped = _forge(operations[0])
    object.__delattr__(stripped, "inner_bytes")  # emptied in its C layout
    assert _native.bind_regions(*classes, (stripped,), targets, sources) is None
    assert _native.bind_regions(*classes, (), targets, sources) == []
    with pytest.raises(TypeError):
        _native.bind_regions(*classes, operations, targets)
    with pytest.raises(TypeError):
        _native.bind_regions(TransferRegion, "x", StoredFragmentSnapshot, operations, targets, sources)


# ---------------------------------------------------------------------------------------
# Projections against a brute-force oracle (spec §12.3)


def _projection_oracle(placement: Any, bindings: Any, selected: Optional[frozenset[str]]) -> list[Any]:
    by_participant = {binding.participant_id: binding for binding in bindings}
    out = []
    for part in placement.parts:
        binding = by_participant.get(part.participant_id)
        if binding is None or not part.fragments:
            continue
        logical = {fragment.placement_fragment_id: fragment for fragment in part.fragments}
        per_worker: dict[str, list[Any]] = {}
        for runtime in binding.fragments:
            if selected is not None and runtime.fragment_id not in selected:
                continue
            snapshot = RuntimeFragmentSnapshot.from_attested_pair(
                logical[runtime.placement_fragment_id], runtime, lease_generation=binding.generation
            )
            per_worker.setdefault(runtime.worker_id, []).append(snapshot)
        for worker_id in sorted(per_worker):
            snapshots = tuple(sorted(per_worker[worker_id], key=lambda snapshot: snapshot.fragment_id))
            out.append(
                ExecutorTransferPlan(
                    instance_id=binding.instance_id,
                    placement_id=placement.placement_id,
                    participant_id=part.participant_id,
                    placement_digest=placement.digest,
                    runtime_lease_id=binding.lease_id,
                    worker_id=worker_id,
                    rank=part.rank,
                    fragment_ids=tuple(snapshot.fragment_id for snapshot in snapshots),
                    fragment_snapshots=snapshots,
                )
            )
    out.sort(key=lambda executor: (executor.rank.dp, executor.rank.pp, executor.rank.ep, executor.rank.tp))
    return out


@settings(max_examples=40, deadline=None)
@given(
    tensors=st.integers(1, 4),
    tp=st.integers(1, 3),
    spread=st.booleans(),
    mask=st.one_of(st.none(), st.integers(0, (1 << 12) - 1)),
    as_set=st.booleans(),
    reuse=st.booleans(),
)
def test_projection_property_against_the_oracle(
    tensors: int, tp: int, spread: bool, mask: Optional[int], as_set: bool, reuse: bool
) -> None:
    placement, bindings = _world(tensors=tensors, tp=tp)
    if spread:
        bindings = tuple(_multi_worker_binding(binding) for binding in bindings)
    runtime_ids = [fragment.fragment_id for binding in bindings for fragment in binding.fragments]
    selected: Optional[frozenset[str]] = None
    if mask is not None:
        selected = frozenset(fid for index, fid in enumerate(runtime_ids) if mask >> (index % 12) & 1)
    expected = _projection_oracle(placement, bindings, selected)
    given_selection: Any = selected if not as_set or selected is None else set(selected)
    if reuse:  # remembered attestations and cached executors from an earlier projection
        planner_binding._build_executor_plans((placement,), bindings, "source")
    else:
        bindings = tuple(dataclasses.replace(binding) for binding in bindings)
    if selected is not None and not set(runtime_ids) >= selected:  # pragma: no cover - by construction
        raise AssertionError
    result = planner_binding._build_executor_plans((placement,), bindings, "source", selected_fragment_ids=given_selection)
    assert list(result) == expected
    for executor in result:
        assert executor.attestation is not None
        assert executor.attestation.validates(
            placement._part_index()[executor.participant_id].fragments[0],
            executor.attestation.binding_fragment(
                placement._part_index()[executor.participant_id].fragments[0].placement_fragment_id
            ),
        )
    if selected is not None:
        with pytest.raises(ValueError, match="^missing selected source runtime fragment$"):
            planner_binding._build_executor_plans(
                (placement,), bindings, "source", selected_fragment_ids=selected | {"no-such-runtime-fragment"}
            )


# ---------------------------------------------------------------------------------------
# address_ranges_clear


def _range_views(specs: list[tuple[str, str, str, int, int, int, int]]) -> list[Any]:
    """Views of runtime fragments forged with (instance, worker, device, address, nbytes,
    storage_address, storage_nbytes); the placement side is one real fragment (never read
    unless two views overlap)."""
    placement, bindings = _world(tensors=1, tp=1)
    base = bindings[0].fragments[0]
    logical = placement.fragments[0]
    tensor = placement.tensors[0]
    views = []
    for index, (instance, worker, device, address, nbytes, storage, storage_nbytes) in enumerate(specs):
        runtime = _forge(
            base,
            fragment_id=f"rt-{index}",
            worker_id=worker,
            device=device,
            address=address,
            nbytes=nbytes,
            storage_address=storage,
            storage_nbytes=storage_nbytes,
        )
        views.append((instance, runtime, logical, tensor))
    return views


def _ranges_outcome(views: list[Any]) -> tuple[str, Any]:
    from mooncake.reshard.weight._address_ranges import validate_runtime_address_ranges

    return _outcome(lambda: validate_runtime_address_ranges(views))


_SPACE = st.tuples(st.sampled_from(["i0", "i1"]), st.sampled_from(["w0", "w1"]), st.sampled_from(["cuda:0", "cpu"]))


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(_SPACE, st.integers(1, 40), st.integers(0, 12), st.integers(0, 6), st.integers(0, 30)),
        min_size=0,
        max_size=7,
    )
)
def test_address_ranges_clear_property_against_the_python_rule(rows: list[Any]) -> None:
    from mooncake.reshard.weight import RuntimeBindingFragment as Fragment

    specs = [
        (instance, worker, device, address, nbytes, max(1, address - before), nbytes + before + extra)
        for (instance, worker, device), address, nbytes, before, extra in rows
    ]
    views = _range_views(specs)
    clear = _native.address_ranges_clear(views, Fragment)
    assert clear in (True, False)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_native, "address_ranges_clear", lambda *args: False)
        python = _ranges_outcome(views)
    assert _ranges_outcome(views) == python
    if clear:
        assert python == ("value", None)
    # Brute force: clear exactly when no two views of one space overlap and no two
    # allocations of one space partially overlap.
    expected = True
    for a in range(len(specs)):
        for b in range(a + 1, len(specs)):
            sa, sb = specs[a], specs[b]
            if sa[:3] != sb[:3]:
                continue
            if sa[3] < sb[3] + sb[4] and sb[3] < sa[3] + sa[4]:
                expected = False
            alloc_a, alloc_b = (sa[5], sa[5] + sa[6]), (sb[5], sb[5] + sb[6])
            if alloc_a != alloc_b and alloc_a[0] < alloc_b[1] and alloc_b[0] < alloc_a[1]:
                expected = False
    if len(specs) >= 2:
        assert clear == expected
    else:
        assert clear is True


def test_address_ranges_clear_hostile_inputs() -> None:
    from mooncake.reshard.weight import RuntimeBindingFragment as Fragment

    good = _range_views([("i", "w", "d", 10, 4, 10, 4), ("i", "w", "d", 20, 4, 20, 4)])
    assert _native.address_ranges_clear(good, Fragment) is True
    assert _native.address_ranges_clear(tuple(good), Fragment) is False
    assert _native.address_ranges_clear([list(good[0]), good[1]], Fragment) is False
    assert _native.address_ranges_clear([good[0][:3], good[1]], Fragment) is False
    assert _native.address_ranges_clear([(7,) + good[0][1:], good[1]], Fragment) is False
    assert _native.address_ranges_clear([("i", object()) + good[0][2:], good[1]], Fragment) is False
    for changes in ({"address": 1 << 64}, {"address": -1}, {"nbytes": 2.0}, {"worker_id": 3},
                    {"device": None}, {"storage_nbytes": (1 << 64) - 1}, {"address": (1 << 64) - 2, "nbytes": 5}):
        runtime = _forge(good[0][1], **changes)
        views = [(good[0][0], runtime) + good[0][2:], good[1]]
        assert _native.address_ranges_clear(views, Fragment) is False
    stripped = _forge(good[0][1])
    object.__delattr__(stripped, "storage_address")
    assert _native.address_ranges_clear([(good[0][0], stripped) + good[0][2:], good[1]], Fragment) is False
    assert _native.address_ranges_clear([], Fragment) is True
    with pytest.raises(TypeError):
        _native.address_ranges_clear(good)
    with pytest.raises(TypeError):
        _native.address_ranges_clear(good, "not a class")


# ---------------------------------------------------------------------------------------
# The bound name table


def test_field_reads_from_instance_dicts_equal_getattr() -> None:
    """binder.c reads fields of exact RuntimeBindingFragment / PlacementFragment /
    TensorDescriptor instances from their __dict__: no data descriptor on those classes may
    shadow a field name (getattr would prefer it)."""
    names = {
        RuntimeBindingFragment: [field.name for field in dataclasses.fields(RuntimeBindingFragment)],
        PlacementFragment: ["placement_fragment_id", "tensor_id", "nbytes", "local_shape"],
        TensorDescriptor: ["tensor_id", "itemsize"],
    }
    for cls, fields in names.items():
        # (a class stored in a C-owned layout: its layout base's member descriptors are the fields)
        info = _native.layout_info(cls)
        for name in fields:
            for klass in cls.__mro__:
                if info is not None and klass is info[0]:
                    continue
                attribute = vars(klass).get(name)
                assert attribute is None or not hasattr(type(attribute), "__set__"), (cls, name)


def test_the_bound_table_is_private() -> None:
    """The kernels are bound to an opaque capsule holding their field names and field-dict
    templates (nothing Python code could alter)."""
    for name in ("bind_views", "attest", "attested_executors", "bound_fragments", "bind_regions", "address_ranges_clear"):
        table = getattr(_native, name).__self__
        assert type(table).__name__ == "PyCapsule"
        assert table is _native.attest.__self__


# ---------------------------------------------------------------------------------------
# attest_binding (validate_runtime_binding + attest in one call)


def _fused(placement: Any, binding: Any, **overrides: Any) -> Any:
    part = placement.parts[0] if not hasattr(binding, "participant_id") else placement._part_index()[binding.participant_id]
    values = dict(
        part_fragments=part.fragments,
        part_tensors=part.tensors,
        resource_id=placement.resource_id,
        placement_id=placement.placement_id,
        digest=placement.digest,
        revision=placement.revision,
    )
    values.update(overrides)
    return _native.attest_binding(
        RuntimeBindingAttestation,
        RuntimeBindingEvidence,
        RuntimeBindingFragment,
        PlacementFragment,
        TensorDescriptor,
        placement,
        binding,
        values["part_fragments"],
        values["part_tensors"],
        values["resource_id"],
        values["placement_id"],
        values["digest"],
        values["revision"],
    )


def _attest_outcome(placement: Any, binding: Any) -> tuple[str, Any]:
    from mooncake.reshard.weight._planner.attestation import _attest

    kind, value = _outcome(lambda: _attest(placement, binding))
    return (kind, _attestation_state(value) if kind == "value" else value)


def test_attest_binding_equals_validation_then_attest() -> None:
    placement, bindings = _world(tensors=3, tp=2)
    for binding in bindings:
        built = _fused(placement, dataclasses.replace(binding))
        assert built is not None
        reference = RuntimeBindingAttestation._from_validated(placement, dataclasses.replace(binding))
        assert _attestation_state(built) == _attestation_state(reference)


def _overlapping(binding: Any) -> Any:
    fragments = list(binding.fragments)
    first = fragments[0]
    fragments[1] = _forge(fragments[1], address=first.address, storage_address=first.storage_address)
    return _forge(binding, fragments=tuple(fragments))


@pytest.mark.parametrize(
    "forge",
    [
        lambda binding: binding,
        lambda binding: _forge(binding, resource_id="other"),
        lambda binding: _forge(binding, placement_id="other"),
        lambda binding: _forge(binding, placement_digest="0" * 64),
        lambda binding: _forge(binding, revision="rev-2"),
        lambda binding: _forge(binding, participant_id="nobody"),
        lambda binding: _forge(binding, instance_id=""),
        lambda binding: _forge(binding, generation=-5),
        lambda binding: _forge(binding, fragments=binding.fragments[::-1]),
        lambda binding: _forge(binding, fragments=binding.fragments[1:]),
        lambda binding: _forge(binding, fragments=(_forge(binding.fragments[0], nbytes=3),) + binding.fragments[1:]),
        lambda binding: _forge(binding, fragments=(_forge(binding.fragments[0], owner=object()),) + binding.fragments[1:]),
        _overlapping,
    ],
)
def test_attest_with_and_without_the_fused_kernel_agree(forge: Callable[[Any], Any]) -> None:
    placement, bindings = _world(tensors=3, tp=2)
    forged = forge(dataclasses.replace(bindings[0]))
    with_kernel = _attest_outcome(placement, forged)
    again = forge(dataclasses.replace(bindings[0]))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_native, "attest_binding", lambda *args: None)
        without = _attest_outcome(placement, again)
    if with_kernel[0] == "value":
        with_kernel[1]["evidence"][1].pop("fragments")
        without[1]["evidence"][1].pop("fragments")
        for state in (with_kernel[1], without[1]):
            state.pop("_binding_by_id")
            state.pop("_binding_dict")
    assert with_kernel == without


def test_attest_binding_falls_back_and_checks_its_arguments() -> None:
    placement, bindings = _world(tensors=2)
    binding = bindings[0]
    assert _fused(placement, binding, resource_id="x") is None
    assert _fused(placement, binding, revision=None) is None
    assert _fused(placement, binding, digest=b"0" * 64) is None
    assert _fused(placement, binding, part_tensors=()) is None
    assert _fused(placement, binding, part_fragments=list(_part(placement, binding).fragments)) is None
    assert _fused(placement, _overlapping(binding)) is None
    assert _fused(placement, object()) is None
    with pytest.raises(TypeError):
        _native.attest_binding(RuntimeBindingAttestation)
    with pytest.raises(TypeError):
        _native.attest_binding(*(["x"] * 13))


# ---------------------------------------------------------------------------------------
# attested_rows (offered to the revalidation's attested views)


def _rows_kernel(attestation: Any) -> Any:
    return _native.attested_rows(RuntimeBindingAttestation, RuntimeBindingEvidence, RuntimeBindingFragment, attestation)


@pytest.mark.parametrize("spread", [False, True])
def test_attested_rows_equal_the_attested_view(spread: bool) -> None:
    # The Python derivation (the view itself now takes its rows from the kernel).
    from mooncake.reshard.weight._planner.bound_contracts import _python_attested_rows

    placement, bindings = _world(tensors=4, tp=2)
    for binding in bindings:
        if spread:
            binding = _multi_worker_binding(binding)
        attestation = RuntimeBindingAttestation._from_validated(placement, binding)
        built = _rows_kernel(attestation)
        assert built is not None
        expected_by_pfid, rows_by_worker, ids_by_worker, complete = built
        state = field_state(attestation)
        expected = _python_attested_rows(state, state["evidence"], state["evidence"].generation)
        assert complete is True
        assert (expected_by_pfid, rows_by_worker, ids_by_worker, complete) == expected
        for rows in rows_by_worker.values():
            for fragment_id, expected in rows:
                assert list(expected) == [field.name for field in dataclasses.fields(RuntimeFragmentSnapshot)]
                assert expected is expected_by_pfid[expected["placement_fragment_id"]]
        # New dicts on every call (never shared with a snapshot object or an earlier call).
        again = _rows_kernel(attestation)[0]
        assert all(again[key] is not value for key, value in expected_by_pfid.items())


def test_attested_rows_incomplete_and_fallbacks() -> None:
    placement, bindings = _world(tensors=3)
    binding = bindings[0]

    def fresh() -> Any:
        return RuntimeBindingAttestation._from_validated(placement, dataclasses.replace(binding))

    attestation = fresh()
    missing = binding.fragments[0].placement_fragment_id
    object.__setattr__(attestation, "_placement_dict", {k: v for k, v in attestation._placement_dict.items() if k != missing})
    expected_by_pfid, rows_by_worker, ids_by_worker, complete = _rows_kernel(attestation)
    assert complete is False and missing not in expected_by_pfid
    assert sum(len(ids) for ids in ids_by_worker.values()) == len(binding.fragments) - 1
    assert _rows_kernel(object()) is None
    attestation = fresh()
    object.__setattr__(attestation, "_placement_dict", list(attestation._placement_dict.items()))
    assert _rows_kernel(attestation) is None
    attestation = fresh()
    object.__setattr__(attestation, "evidence", _forge(attestation.evidence, fragments=list(binding.fragments)))
    assert _rows_kernel(attestation) is None
    attestation = fresh()
    odd = (_forge(binding.fragments[0], worker_id=4),) + binding.fragments[1:]
    object.__setattr__(attestation, "evidence", _forge(attestation.evidence, fragments=odd))
    assert _rows_kernel(attestation) is None
    with pytest.raises(TypeError):
        _native.attested_rows(RuntimeBindingAttestation, RuntimeBindingEvidence, RuntimeBindingFragment)
    with pytest.raises(TypeError):
        _native.attested_rows("a", "b", "c", fresh())

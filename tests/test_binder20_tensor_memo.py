"""``_native.attest_many`` shares the tensors it has loaded across the bindings of one call.

Every part of a tensor-parallel placement lists the same tensor objects, so ``attest_many`` reads
each tensor's id and itemsize once per call (a table by address) instead of once per binding. The
oracle is ``_native.attest_binding`` called on each binding alone (it loads every tensor itself):
``attest_many`` must decide exactly the bindings it decides, with equal attestations, also when a
shared tensor is forged, has no itemsize, or a part lists its tensors out of order, and a second
call must see a change made after the first."""

from __future__ import annotations

from typing import Any, List, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from layout_model import FragmentSpec, TensorSpec, build_placement, build_runtime_bindings
from planner_helpers import Coord, grid_fragments, layout, own, split

from mooncake.reshard import _native
from mooncake.reshard.weight import PlacementFragment, RuntimeBindingFragment, TensorDescriptor
from mooncake.reshard.weight import WeightPlacementPart, WeightRuntimeBindingManifest
from mooncake.reshard.weight._planner.attestation import RuntimeBindingAttestation, RuntimeBindingEvidence

CLASSES = (RuntimeBindingAttestation, RuntimeBindingEvidence, RuntimeBindingFragment, PlacementFragment, TensorDescriptor)


def shared_placement(tensors: int, tp: int) -> Any:
    """``tensors`` tensors, each split over ``tp`` participants: every part lists every tensor."""
    specs = [TensorSpec(f"w{i:04d}", (4 * tp, 4), axes=(split("tp", 0),)) for i in range(tensors)]
    ranks = [Coord(tp=t) for t in range(tp)]
    frags = [f for spec in specs for f in grid_fragments(spec, ranks, {"tp": 0}, {"tp": tp})]
    return build_placement(layout("dst", (tp, 1, 1, 1), specs, frags))


def owned_placement(experts: int, tensors: int) -> Any:
    """``tensors`` tensors per expert, each owned by one participant: no part shares a tensor."""
    specs = [TensorSpec(f"e{e:03d}-w{t:03d}", (4, 4), axes=(own("ep"),)) for e in range(experts) for t in range(tensors)]
    frags = [FragmentSpec(spec.tensor_id, (0, 0), (4, 4), Coord(ep=int(spec.tensor_id[1:4]))) for spec in specs]
    return build_placement(layout("dst", (1, 1, experts, 1), specs, frags))


def many(placement: Any, bindings: Tuple[Any, ...]) -> List[Any]:
    return _native.attest_many(
        *CLASSES, WeightRuntimeBindingManifest, placement, placement._part_index(), bindings,
        placement.resource_id, placement.placement_id, placement.digest, placement.revision, None, WeightPlacementPart,
    )


def alone(placement: Any, binding: Any) -> Any:
    """The oracle: attest_binding on this binding only (its own tensor loads)."""
    part = placement._part_index()[binding.participant_id]
    return _native.attest_binding(
        *CLASSES, placement, binding, part.fragments, part.tensors,
        placement.resource_id, placement.placement_id, placement.digest, placement.revision,
    )


def same_as_alone(placement: Any, bindings: Tuple[Any, ...]) -> List[Any]:
    result = many(placement, bindings)
    expected = [alone(placement, binding) for binding in bindings]
    assert [r is None for r in result] == [e is None for e in expected]
    assert result == expected
    for attestation in result:
        if attestation is not None:
            assert attestation.placement is placement
    return result


@pytest.mark.parametrize(("tensors", "tp"), [(16, 2), (100, 4), (300, 3)])
def test_shared_tensors_decide_every_binding(tensors: int, tp: int) -> None:
    placement = shared_placement(tensors, tp)
    assert len({id(t) for part in placement.parts for t in part.tensors}) == tensors  # shared objects
    bindings = build_runtime_bindings(placement)
    result = same_as_alone(placement, bindings)
    assert all(type(a) is RuntimeBindingAttestation for a in result)
    assert result == [RuntimeBindingAttestation(placement, binding) for binding in bindings]


def test_a_change_after_a_call_is_seen_by_the_next_call() -> None:
    placement = shared_placement(40, 4)
    bindings = build_runtime_bindings(placement)
    first = same_as_alone(placement, bindings)
    assert all(a is not None for a in first)
    tensor = placement.parts[0].tensors[7]
    object.__setattr__(tensor, "itemsize", tensor.itemsize * 2)  # every part lists it
    assert same_as_alone(placement, bindings) == [None] * len(bindings)
    object.__setattr__(tensor, "itemsize", tensor.itemsize // 2)
    assert same_as_alone(placement, bindings) == first


def test_a_missing_itemsize_declines_every_part_that_needs_it() -> None:
    placement = shared_placement(40, 4)
    bindings = build_runtime_bindings(placement)
    tensor = placement.parts[0].tensors[3]
    itemsize = tensor.__dict__.pop("itemsize")  # getattr now fails: no value is remembered for it
    try:
        assert same_as_alone(placement, bindings) == [None] * len(bindings)
    finally:
        tensor.__dict__["itemsize"] = itemsize
    assert all(a is not None for a in same_as_alone(placement, bindings))


def test_a_part_with_unsorted_tensors_declines_alone() -> None:
    placement = shared_placement(40, 4)
    bindings = build_runtime_bindings(placement)
    part = placement._part_index()[bindings[2].participant_id]
    tensors = part.tensors
    object.__setattr__(part, "tensors", tensors[1:2] + tensors[:1] + tensors[2:])
    try:
        result = same_as_alone(placement, bindings)
    finally:
        object.__setattr__(part, "tensors", tensors)
    assert [a is None for a in result] == [k == 2 for k in range(len(bindings))]


FORGERIES = ["none", "itemsize", "no-itemsize", "tensor-id", "swap", "duplicate"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(16, 140),
    st.integers(2, 4),
    st.lists(st.tuples(st.sampled_from(FORGERIES), st.integers(0, 1000), st.integers(0, 3)), max_size=3),
)
def test_forged_shared_tensors_match_the_per_binding_oracle(
    tensors: int, tp: int, forgeries: List[Tuple[str, int, int]]
) -> None:
    placement = shared_placement(tensors, tp)
    bindings = build_runtime_bindings(placement)
    parts = placement.parts
    for kind, index, which in forgeries:
        part = parts[which % len(parts)]
        listed = part.tensors
        tensor = listed[index % len(listed)]
        if kind == "itemsize":
            object.__setattr__(tensor, "itemsize", tensor.itemsize + 2)
        elif kind == "no-itemsize":
            tensor.__dict__.pop("itemsize", None)
        elif kind == "tensor-id":
            object.__setattr__(tensor, "tensor_id", tensor.tensor_id + "x")
        elif kind == "swap" and len(listed) > 1:
            k = index % (len(listed) - 1)
            object.__setattr__(part, "tensors", listed[:k] + (listed[k + 1], listed[k]) + listed[k + 2:])
        elif kind == "duplicate" and len(listed) > 1:
            k = index % (len(listed) - 1)
            object.__setattr__(part, "tensors", listed[:k] + (listed[k], listed[k]) + listed[k + 2:])
    same_as_alone(placement, bindings)


def test_parts_that_share_no_tensor_stop_using_the_memo_and_decide_alike() -> None:
    """Past the trial bindings without a shared tensor the memo is off: the later bindings load
    their tensors themselves, and a forged tensor there is still seen."""
    placement = owned_placement(12, 17)
    assert len({id(t) for part in placement.parts for t in part.tensors}) == 12 * 17  # nothing shared
    bindings = build_runtime_bindings(placement)
    assert len(bindings) == 12
    result = same_as_alone(placement, bindings)
    assert all(a is not None for a in result)
    late = placement._part_index()[bindings[10].participant_id].tensors[5]
    object.__setattr__(late, "itemsize", late.itemsize + 2)
    result = same_as_alone(placement, bindings)
    assert [a is None for a in result] == [k == 10 for k in range(len(bindings))]

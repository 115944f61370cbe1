"""Property tests: plans over generated layouts (uneven TP splits on any dimension, DP replicas,
1-D to 3-D, itemsizes 1/2/4/8, shared or separate allocations) and Store-sourced plans bind,
execute on real host memory and leave every target byte equal to the global tensor; the bound
plan survives pickle and ``replace``."""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any, List, Tuple

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_executor import HostWorld, split_range, stored_manifest, tp_placement

from mooncake.reshard.weight import StoredFragmentSnapshot, StoredWeightManifest
from mooncake.reshard.weight.planner import plan_placement_transfer_to_local_target, resolve_executor_plan


@st.composite
def layouts(draw: Any) -> Tuple[Any, ...]:
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 6)) for _ in range(ndim))
    itemsize = draw(st.sampled_from([1, 2, 4, 8]))
    tensors = draw(st.sampled_from([("w",), ("a", "b")]))
    tied = len(tensors) == 2 and draw(st.booleans())

    def side(prefix: str) -> Any:
        dim = draw(st.integers(0, ndim - 1))
        tp = draw(st.integers(1, max(1, min(3, shape[dim]))))
        dp = draw(st.integers(1, 2))
        return tp_placement(tp, prefix=prefix, shape=shape, dim=dim, dp=dp, tensors=tensors, tied=tied, itemsize=itemsize)

    return side("s"), side("t"), draw(st.booleans()), draw(st.booleans())


def _roundtrip(plan: Any) -> None:
    restored = pickle.loads(pickle.dumps(plan, protocol=pickle.HIGHEST_PROTOCOL))
    assert restored == plan
    assert dataclasses.replace(plan) == plan
    assert restored.pipeline_routes == plan.pipeline_routes


@settings(deadline=None)
@given(layouts())
def test_bound_plans_execute_exactly(layout: Tuple[Any, ...]) -> None:
    source, target, shared_source, shared_target = layout
    world = HostWorld(source, target, fill=True, shared_source=shared_source, shared_target=shared_target)
    plan = world.bind()
    moved, _checked = world.execute_and_check(plan)
    assert moved == plan.total_bytes
    targets = world.target_bindings
    selected_dp = {executor.rank.dp for executor in plan.source_executors}
    assert len(selected_dp) == 1 or len({e.rank.dp for e in plan.target_executors}) > 1
    assert len(plan.target_executors) == len(targets)
    for binding in targets:
        assert resolve_executor_plan(plan, target, binding, "target").participant_id == binding.participant_id
    _roundtrip(plan)


@settings(deadline=None)
@given(layouts(), st.data())
def test_local_target_plans_execute_exactly(layout: Tuple[Any, ...], data: Any) -> None:
    source, target, shared_source, shared_target = layout
    participant = data.draw(st.sampled_from([part.participant_id for part in target.parts if part.fragments]))
    world = HostWorld(
        source,
        target,
        logical=plan_placement_transfer_to_local_target(source, target, participant),
        fill=True,
        shared_source=shared_source,
        shared_target=shared_target,
        target_participants=[participant],
    )
    plan = world.bind()
    world.execute_and_check(plan)
    _roundtrip(plan)


def _stored(target: Any, pieces: int) -> StoredWeightManifest:
    fragments: List[StoredFragmentSnapshot] = []
    offset = 0
    for tensor in target.tensors:
        rows = tensor.global_shape[0]
        for index in range(min(pieces, rows)):
            begin, size = split_range(rows, min(pieces, rows), index)
            shape = (size,) + tuple(tensor.global_shape[1:])
            nbytes = tensor.itemsize
            for extent in shape:
                nbytes *= extent
            fragments.append(
                StoredFragmentSnapshot(
                    f"{tensor.tensor_id}-{index}",
                    tensor.tensor_id,
                    (begin,) + (0,) * (len(shape) - 1),
                    shape,
                    f"g/payload/{index % 2}",
                    offset,
                    nbytes,
                    aliases=tensor_aliases(target, tensor.tensor_id),
                )
            )
            offset += nbytes
    return stored_manifest(target, fragments)


def tensor_aliases(placement: Any, tensor_id: str) -> Tuple[str, ...]:
    for fragment in placement.fragments:
        if fragment.tensor_id == tensor_id:
            return tuple(fragment.aliases)
    return ()


@settings(deadline=None)
@given(layouts(), st.integers(1, 3))
def test_store_sourced_plans_execute_exactly(layout: Tuple[Any, ...], pieces: int) -> None:
    _source, target, _shared_source, shared_target = layout
    manifest = _stored(target, pieces)
    world = HostWorld(manifest, target, fill=True, shared_target=shared_target)
    plan = world.bind()
    assert plan.source_executors == ()
    assert {s.fragment_id for s in plan.source_stored_fragment_snapshots} <= {f.fragment_id for f in manifest.fragments}
    world.execute_and_check(plan)
    _roundtrip(plan)

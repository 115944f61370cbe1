"""Issue 6: determinism. IDs, digests, JSON and plans are identical across processes with different
``PYTHONHASHSEED`` values, and across input orders the spec treats as equal (inventory order of
participants, tensors, fragments, axes, aliases and bindings)."""

from __future__ import annotations

import hashlib
import os
import random
import subprocess
import sys
import textwrap
from typing import Any, List, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from layout_model import Layout, build_fragment, build_runtime_bindings, build_tensor, build_topology
from memory_executor import tp_placement
from strategies import valid_layouts

from mooncake.reshard.weight import (
    RuntimeBindingFragment,
    TensorDescriptor,
    WeightPlacementManifest,
    WeightRuntimeBindingManifest,
    bind_logical_transfer_plan,
    plan_placement_transfer,
    weight_placement_to_json,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FINGERPRINT = textwrap.dedent(
    """
    import hashlib, pickle, sys
    sys.path.insert(0, "tests")
    from memory_executor import tp_placement
    from layout_model import build_runtime_bindings
    from spec_helpers import ka_placement
    from mooncake.reshard.weight import (
        ParallelRank, PlacementFragment, StoredFragmentSnapshot, StoredWeightManifest, SplitAxis,
        TensorDescriptor, bind_logical_transfer_plan, plan_placement_transfer,
        plan_stored_transfer_to_target_placement, weight_placement_to_json)

    out = []
    def emit(label, value):
        out.append(label + "=" + (value if isinstance(value, str) else repr(value)))

    ka = ka_placement()
    emit("ka", (ka.placement_id, ka.digest, weight_placement_to_json(ka)))
    emit("frag", PlacementFragment("w\\u00e4", (0, 1), (2, 3), 12, ParallelRank(tp=1), 3, ("w\\u00e4", "z")).placement_fragment_id)
    source = tp_placement(2, prefix="s", shape=(8, 6), dim=1, dp=2, tensors=("b", "a", "\\u00e4"), tied=True)
    target = tp_placement(3, prefix="t", shape=(8, 6), dim=0, tensors=("b", "a", "\\u00e4"), tied=True)
    emit("placements", (source.placement_id, source.digest, target.placement_id, target.digest))
    emit("json", weight_placement_to_json(source) + weight_placement_to_json(target))
    plan = plan_placement_transfer(source, target)
    emit("plan", plan.operations)
    emit("executors", (plan.source_executors, plan.target_executors, plan.pipeline_routes))
    bound = bind_logical_transfer_plan(plan, build_runtime_bindings(target, base_address=1 << 30),
                                       source_bindings=build_runtime_bindings(source))
    emit("bound", (bound.operations, bound.source_executors, bound.target_executors))
    tensor = TensorDescriptor(tensor_id="w", global_shape=(8, 4), dtype="bf16", itemsize=2, shard_dims=(0,),
                              layout_fingerprint="fp", parallel_axes=(SplitAxis("tp", 0),))
    stored = StoredWeightManifest(namespace="n", resource_id="model", revision="rev-1", weight_generation=1,
                                  group_id="g", manifest_key="g/manifest", tensors=(tensor,),
                                  fragments=tuple(StoredFragmentSnapshot(fragment_id=f"s{i}", tensor_id="w",
                                      global_offset=(4 * i, 0), local_shape=(4, 4), object_key=f"g/payload/{i}",
                                      object_offset=0, nbytes=32, aliases=()) for i in (1, 0)),
                                  created_at="2026-01-01T00:00:00Z")
    emit("stored", stored.manifest_digest)
    print(hashlib.sha256("\\n".join(out).encode("utf-8", "surrogatepass")).hexdigest())
    """
)


def fingerprint(seed: str) -> str:
    env = dict(os.environ, PYTHONHASHSEED=seed)
    result = subprocess.run([sys.executable, "-c", FINGERPRINT], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_identical_across_hash_seeds() -> None:
    prints = {seed: fingerprint(seed) for seed in ("0", "1", "4242", "random")}
    assert len(set(prints.values())) == 1, prints


# ------------------------------------------------------------------------------------------------
# input orders the spec treats as equal


def shuffled_placement(layout: Layout, rng: random.Random) -> WeightPlacementManifest:
    participants = list(layout.participants)
    rng.shuffle(participants)
    tensors = []
    for t in layout.tensors:
        d = build_tensor(t)
        axes = list(d.parallel_axes)
        rng.shuffle(axes)
        tensors.append(TensorDescriptor(tensor_id=d.tensor_id, global_shape=list(d.global_shape), dtype=d.dtype,
                                        itemsize=d.itemsize, shard_dims=d.shard_dims,
                                        layout_fingerprint=d.layout_fingerprint, parallel_axes=axes,
                                        layer_id=d.layer_id, expert_id=d.expert_id))
    rng.shuffle(tensors)
    fragments = []
    for f in layout.fragments:
        frag = build_fragment(layout, f)
        aliases = list(frag.aliases)
        rng.shuffle(aliases)
        fragments.append(type(frag)(frag.tensor_id, list(frag.global_offset), frag.local_shape, frag.nbytes,
                                    frag.rank, frag.pipeline_stage_id, aliases,
                                    None if f.fragment_id is None else frag.placement_fragment_id))
    rng.shuffle(fragments)
    return WeightPlacementManifest.from_fragments(
        resource_id=layout.resource_id, revision=layout.revision, weight_generation=layout.weight_generation,
        placement_set_id=layout.placement_set_id, topology=build_topology(layout, participants),
        tensors=tensors, fragments=fragments)


@settings(max_examples=25)
@given(layout=valid_layouts(max_tensors=3, max_ndim=3), seed=st.integers(0, 2**32))
def test_inventory_order_does_not_matter(layout: Layout, seed: int) -> None:
    rng = random.Random(seed)
    first = shuffled_placement(layout, rng)
    second = shuffled_placement(layout, rng)
    assert first == second
    assert first.placement_id == second.placement_id
    assert first.digest == second.digest
    assert weight_placement_to_json(first) == weight_placement_to_json(second)
    assert first.topology.topology_id == second.topology.topology_id
    outcomes = []
    for a, b in ((first, second), (second, first), (first, first)):
        try:
            outcomes.append(plan_placement_transfer(a, b))
        except ValueError as exc:  # e.g. an ambiguous DP owner: the same message every time
            outcomes.append(str(exc))
    assert outcomes[0] == outcomes[1] == outcomes[2]


def shuffled_bindings(bindings: Sequence[WeightRuntimeBindingManifest], rng: random.Random) -> List[Any]:
    out = []
    for b in bindings:
        frags: List[RuntimeBindingFragment] = list(b.fragments)
        rng.shuffle(frags)
        out.append(WeightRuntimeBindingManifest(
            resource_id=b.resource_id, placement_id=b.placement_id, placement_digest=b.placement_digest,
            instance_id=b.instance_id, generation=b.generation, lease_id=b.lease_id, revision=b.revision,
            participant_id=b.participant_id, fragments=frags))
    rng.shuffle(out)
    return out


def test_binding_order_does_not_matter() -> None:
    source = tp_placement(4, prefix="s", shape=(8, 12), dim=1, dp=2, tensors=("a", "b", "c"), tied=True)
    target = tp_placement(3, prefix="t", shape=(8, 12), dim=0, tensors=("a", "b", "c"), tied=True)
    plan = plan_placement_transfer(source, target)
    sources = build_runtime_bindings(source)
    targets = build_runtime_bindings(target, base_address=1 << 30)
    reference = bind_logical_transfer_plan(plan, targets, source_bindings=sources)
    rng = random.Random(3)
    for _ in range(5):
        again = bind_logical_transfer_plan(plan, shuffled_bindings(targets, rng),
                                           source_bindings=shuffled_bindings(sources, rng))
        assert again == reference
        assert again.operations == reference.operations
        assert again.source_executors == reference.source_executors
        assert again.target_executors == reference.target_executors


def test_plans_are_reproducible_in_process() -> None:
    source = tp_placement(2, prefix="s", shape=(6, 10), dim=1, dp=2)
    target = tp_placement(5, prefix="t", shape=(6, 10), dim=1)
    plans = [plan_placement_transfer(source, target) for _ in range(3)]
    digests = {hashlib.sha256(repr(p.operations).encode()).hexdigest() for p in plans}
    assert len(digests) == 1

#!/usr/bin/env python3
"""Reproducible contract benchmark of ``mooncake.reshard`` (spec/API.md section 14).

Source TP4/PP1/EP1/DP2 -> target TP8/PP2/EP2/DP1 for one ``(4096, 4096)`` bf16 tensor
``layers.2.experts.3.w1`` split on dim 1. It measures Python-side contract costs only:
no memory is allocated for the weights, no Store or Transfer Engine is contacted, and the
figures must not be read as transfer throughput.

Run from a source checkout (or against any installed ``mooncake.reshard``)::

    python benchmarks/runtime_binding.py [--warmup 5] [--repeats 31]
        [--physical-rows 128] [--physical-regions 128]

It prints ONE JSON document on stdout. The counts and accept/reject verdicts are computed
from the objects and checked against section 14; on a mismatch the document is still
printed, the mismatches are listed under ``"contract_mismatches"`` and the exit status is 1.

Only the names section 14 lists are used: public names of ``mooncake.reshard.weight`` and
the two private functions ``_validate_target_physical_ranges`` and ``_build_executor_plans``.
This file is self-contained on purpose (no import of the other benchmark modules).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import gc
import json
import os
import pickle
import platform
import statistics
import sys
import time
import tracemalloc
from typing import Any, Callable, Dict, List, Sequence, Tuple

from mooncake.reshard.weight import (
    OwnershipAxis,
    ParallelRank,
    ParallelTopology,
    PlacementFragment,
    ReplicatedAxis,
    RuntimeBindingFragment,
    SplitAxis,
    TensorDescriptor,
    TopologyParticipant,
    WeightPlacementManifest,
    WeightRuntimeBindingManifest,
    plan_placement_transfer,
)

# The binding names (bind_logical_transfer_plan, _build_executor_plans,
# _validate_target_physical_ranges) are imported in main(): the placement builders import against
# a package without runtime binding, such as the released reference that
# benchmarks/reference_side_by_side.py runs.

TENSOR_ID = "layers.2.experts.3.w1"
GLOBAL_SHAPE = (4096, 4096)
ITEMSIZE = 2
RESOURCE_ID = "benchmark-model"
REVISION = "rev-1"
WEIGHT_GENERATION = 7
LAYOUT_FINGERPRINT = "benchmark:bf16:row-major:v1"

# DESIGN.md section 6: the pure-Python reference on this machine class (CPython 3.11), medians in ms.
REFERENCE_MEDIANS_MS: Dict[str, float] = {
    "logical_planning": 0.995,
    "runtime_binding": 2.756,
    "transfer_plan_revalidation": 0.700,
    "pickle_dump": 0.341,
    "pickle_restore": 2.521,
    "physical_validation": 84.4,
    "selected_source_projection": 0.568,
    "complete_source_projection": 0.657,
}
REFERENCE_BINDING_PEAK_TRACED_MEMORY_BYTES = 51_888

# DESIGN.md section 6: required speedup over the reference, per median.
TARGET_SPEEDUP: Dict[str, float] = {name: 10.0 for name in REFERENCE_MEDIANS_MS}
TARGET_SPEEDUP["pickle_dump"] = 3.0
TARGET_SPEEDUP["physical_validation"] = 200.0

# spec/API.md section 14: expected counts and verdicts (default physical workload).
EXPECTED_COUNTS: Dict[str, Any] = {
    "source_fragments": 8,
    "target_fragments": 8,
    "operations": 8,
    "selected_source_executors": 4,
    "target_executors": 8,
    "complete_source_executors": 8,
    "unselected_source_executors": 4,
    "operation_nbytes": [1024] * 8,
    "operation_repeat": [4096] * 8,
    "total_bytes": 33_554_432,
}
EXPECTED_LOGICAL_REQUIRED_SEGMENTS = 32_768


def _tensor() -> TensorDescriptor:
    return TensorDescriptor(
        tensor_id=TENSOR_ID,
        global_shape=GLOBAL_SHAPE,
        dtype="bfloat16",
        itemsize=ITEMSIZE,
        shard_dims=(1,),
        layout_fingerprint=LAYOUT_FINGERPRINT,
        parallel_axes=(
            ReplicatedAxis("dp"),
            OwnershipAxis("pp"),
            OwnershipAxis("ep"),
            SplitAxis("tp", 1),
        ),
        layer_id=2,
        expert_id=3,
    )


def _placement(
    prefix: str,
    ranks: Sequence[ParallelRank],
    *,
    tp_size: int,
    pp_size: int,
    ep_size: int,
    dp_size: int,
) -> WeightPlacementManifest:
    """One participant and one TP shard (split on dim 1) per rank."""
    tensor = _tensor()
    columns = GLOBAL_SHAPE[1] // tp_size
    participants = tuple(
        TopologyParticipant(f"{prefix}-dp{rank.dp}-pp{rank.pp}-ep{rank.ep}-tp{rank.tp}", rank)
        for rank in ranks
    )
    topology = ParallelTopology(
        tp_size=tp_size, pp_size=pp_size, ep_size=ep_size, dp_size=dp_size, participants=participants
    )
    fragments = tuple(
        PlacementFragment(
            tensor_id=TENSOR_ID,
            global_offset=(0, rank.tp * columns),
            local_shape=(GLOBAL_SHAPE[0], columns),
            nbytes=GLOBAL_SHAPE[0] * columns * ITEMSIZE,
            rank=rank,
        )
        for rank in ranks
    )
    return WeightPlacementManifest.from_fragments(
        resource_id=RESOURCE_ID,
        revision=REVISION,
        weight_generation=WEIGHT_GENERATION,
        placement_set_id=f"{prefix}-placement-set",
        topology=topology,
        tensors=(tensor,),
        fragments=fragments,
    )


def contract_placements() -> Tuple[WeightPlacementManifest, WeightPlacementManifest]:
    """The contract's source (TP4 x DP2) and target (TP8 x PP2 x EP2) placements."""
    source_ranks = [ParallelRank(dp=dp, tp=tp) for dp in range(2) for tp in range(4)]
    target_ranks = [ParallelRank(tp=tp, pp=1, ep=1) for tp in range(8)]
    source = _placement("source", source_ranks, tp_size=4, pp_size=1, ep_size=1, dp_size=2)
    target = _placement("target", target_ranks, tp_size=8, pp_size=2, ep_size=2, dp_size=1)
    return source, target


def _bindings(
    placement: WeightPlacementManifest, prefix: str, address_base: int
) -> Tuple[WeightRuntimeBindingManifest, ...]:
    """One runtime fragment per participant, each on its own worker, instance and lease.

    Addresses are fake but valid and non-overlapping: every fragment gets its own 1 GiB
    window above ``address_base``; canonical strides, ``storage_offset_bytes=0``.
    """
    participant_by_rank = {p.rank: p.participant_id for p in placement.topology.participants}
    bindings: List[WeightRuntimeBindingManifest] = []
    for index, fragment in enumerate(placement.fragments):
        participant_id = participant_by_rank[fragment.rank]
        address = address_base + index * (1 << 30)
        rows, columns = fragment.local_shape
        runtime_fragment = RuntimeBindingFragment(
            placement_fragment_id=fragment.placement_fragment_id,
            fragment_id=f"{prefix}-runtime-{index}",
            address=address,
            nbytes=fragment.nbytes,
            worker_id=f"{prefix}-worker-{index}",
            endpoint=f"{prefix}-endpoint-{index}",
            device=f"cuda:{index % 8}",
            itemsize=ITEMSIZE,
            local_shape=(rows, columns),
            strides_bytes=(columns * ITEMSIZE, ITEMSIZE),
            storage_address=address,
            storage_nbytes=fragment.nbytes,
            storage_offset_bytes=0,
        )
        bindings.append(
            WeightRuntimeBindingManifest(
                resource_id=placement.resource_id,
                placement_id=placement.placement_id,
                placement_digest=placement.digest,
                instance_id=f"{prefix}-instance-{index}",
                generation=index + 1,
                lease_id=f"{prefix}-lease-{index}",
                revision=placement.revision,
                participant_id=participant_id,
                fragments=(runtime_fragment,),
            )
        )
    return tuple(bindings)


def _median_ms(function: Callable[[], object], *, warmup: int, repeats: int) -> float:
    for _ in range(warmup):
        function()
    samples: List[int] = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        function()
        samples.append(time.perf_counter_ns() - start)
    return statistics.median(samples) / 1e6


def _median_ms_fresh(
    setup: Callable[[], Any], function: Callable[[Any], object], *, warmup: int, repeats: int
) -> float:
    """Like ``_median_ms`` but every call gets fresh inputs from ``setup`` (built untimed).

    The package keeps no proof of an earlier validation (every call validates what it is
    given), but objects that were used before are warm in the caches of the CPU and may carry
    derived values that are cheap to rebuild; fresh, equal objects measure the first use, as an
    adapter binding new bindings meets it."""
    for _ in range(warmup):
        function(setup())
    samples: List[int] = []
    for _ in range(repeats):
        inputs = setup()
        start = time.perf_counter_ns()
        function(inputs)
        samples.append(time.perf_counter_ns() - start)
    return statistics.median(samples) / 1e6


def _accepts(function: Callable[[], object]) -> bool:
    try:
        function()
    except ValueError:
        return False
    return True


def _machine() -> Dict[str, Any]:
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "cpu_count": os.cpu_count(),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=31)
    parser.add_argument("--physical-rows", type=int, default=128)
    parser.add_argument("--physical-regions", type=int, default=128)
    args = parser.parse_args(argv)
    if args.warmup < 0 or args.repeats < 1 or args.physical_rows < 1 or args.physical_regions < 1:
        parser.error("--warmup must be >= 0; --repeats, --physical-rows, --physical-regions >= 1")

    from mooncake.reshard.weight import bind_logical_transfer_plan
    from mooncake.reshard.weight._planner.binding import _build_executor_plans
    from mooncake.reshard.weight._planner.bound_validation import _validate_target_physical_ranges

    source, target = contract_placements()
    source_bindings = _bindings(source, "source", 1 << 40)
    target_bindings = _bindings(target, "target", 1 << 44)

    def plan() -> object:
        return plan_placement_transfer(source, target)

    logical_plan = plan_placement_transfer(source, target)

    def bind() -> Any:
        return bind_logical_transfer_plan(logical_plan, target_bindings, source_bindings=source_bindings)

    transfer_plan = bind()
    payload = pickle.dumps(transfer_plan, protocol=pickle.HIGHEST_PROTOCOL)
    restored = pickle.loads(payload)

    # Physical validation: hand-made one-column regions on the bound operation whose
    # source and target both start at the tensor origin (target tp0 reads source tp0).
    base = next(
        op
        for op in transfer_plan.operations
        if tuple(op.target.global_offset) == (0, 0) and tuple(op.source.global_offset) == (0, 0)
    )
    rows = args.physical_rows
    itemsize = base.target.binding.itemsize
    src_row_bytes = base.source.local_shape[1] * itemsize
    tgt_row_bytes = base.target.local_shape[1] * itemsize
    physical_regions = tuple(
        dataclasses.replace(
            base,
            overlap_offset=(0, c),
            overlap_shape=(rows, 1),
            source_base_offset=c * 2,
            target_base_offset=c * 2,
            inner_bytes=2,
            outer_loop_counts=(rows,),
            source_strides=(src_row_bytes,),
            target_strides=(tgt_row_bytes,),
        )
        for c in range(args.physical_regions)
    )
    physical_segments = sum(region.segment_count for region in physical_regions)

    selected_ids = frozenset(op.source.fragment_id for op in transfer_plan.operations)

    def selected_projection() -> Tuple[Any, ...]:
        return _build_executor_plans(
            (source,), source_bindings, "source", selected_fragment_ids=selected_ids
        )

    def complete_projection() -> Tuple[Any, ...]:
        return _build_executor_plans((source,), source_bindings, "source")

    selected = selected_projection()
    complete = complete_projection()

    # Budgets.
    required_segments = sum(op.segment_count for op in logical_plan.operations)

    def with_logical_budget(budget: int) -> Callable[[], object]:
        def run() -> object:
            limits = dataclasses.replace(logical_plan.planning_limits, max_total_lowered_segments=budget)
            return dataclasses.replace(logical_plan, planning_limits=limits)

        return run

    def with_physical_budget(budget: int) -> Callable[[], object]:
        return lambda: _validate_target_physical_ranges(physical_regions, max_segment_checks=budget)

    budgets = {
        "logical": {
            "required_segments": required_segments,
            "accepted_at_required": _accepts(with_logical_budget(required_segments)),
            "rejected_below_required": not _accepts(with_logical_budget(required_segments - 1)),
        },
        "physical": {
            "regions": len(physical_regions),
            "segments": physical_segments,
            "accepted_at_required": _accepts(with_physical_budget(physical_segments)),
            "rejected_below_required": not _accepts(with_physical_budget(physical_segments - 1)),
        },
    }

    def fresh_bindings() -> Tuple[Any, Any, Any]:
        # Equal values, new objects (the logical plan is a revalidated copy, the bindings are
        # rebuilt through their constructors): the first use of every value.
        return (
            copy.copy(logical_plan),
            _bindings(target, "target", 1 << 44),
            _bindings(source, "source", 1 << 40),
        )

    def bind_fresh(inputs: Tuple[Any, Any, Any]) -> Any:
        plan_copy, targets, sources = inputs
        return bind_logical_transfer_plan(plan_copy, targets, source_bindings=sources)

    def selected_projection_fresh(inputs: Tuple[Any, Any, Any]) -> Tuple[Any, ...]:
        return _build_executor_plans((source,), inputs[2], "source", selected_fragment_ids=selected_ids)

    def complete_projection_fresh(inputs: Tuple[Any, Any, Any]) -> Tuple[Any, ...]:
        return _build_executor_plans((source,), inputs[2], "source")

    # Peak traced memory of one binding of fresh inputs (Python allocator only; C malloc is
    # not traced).
    fresh = fresh_bindings()
    gc.collect()
    tracemalloc.start()
    bind_fresh(fresh)
    binding_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()

    timing = {"warmup": args.warmup, "repeats": args.repeats}
    medians = {
        "logical_planning": _median_ms(plan, **timing),
        "runtime_binding": _median_ms(bind, **timing),
        "transfer_plan_revalidation": _median_ms(lambda: dataclasses.replace(transfer_plan), **timing),
        "pickle_dump": _median_ms(
            lambda: pickle.dumps(transfer_plan, protocol=pickle.HIGHEST_PROTOCOL), **timing
        ),
        "pickle_restore": _median_ms(lambda: pickle.loads(payload), **timing),
        "physical_validation": _median_ms(with_physical_budget(physical_segments), **timing),
        "selected_source_projection": _median_ms(selected_projection, **timing),
        "complete_source_projection": _median_ms(complete_projection, **timing),
    }

    medians_fresh = {
        "runtime_binding": _median_ms_fresh(fresh_bindings, bind_fresh, **timing),
        "selected_source_projection": _median_ms_fresh(fresh_bindings, selected_projection_fresh, **timing),
        "complete_source_projection": _median_ms_fresh(fresh_bindings, complete_projection_fresh, **timing),
    }

    counts = {
        "source_fragments": len(source.fragments),
        "target_fragments": len(target.fragments),
        "operations": len(transfer_plan.operations),
        "selected_source_executors": len(transfer_plan.source_executors),
        "target_executors": len(transfer_plan.target_executors),
        "complete_source_executors": len(complete),
        "unselected_source_executors": len(complete) - len(selected),
        "operation_nbytes": [op.nbytes for op in transfer_plan.operations],
        "operation_repeat": [op.repeat for op in transfer_plan.operations],
        "total_bytes": transfer_plan.total_bytes,
    }

    mismatches: List[str] = []
    for key, expected in EXPECTED_COUNTS.items():
        if counts[key] != expected:
            mismatches.append(f"counts.{key}: expected {expected!r}, got {counts[key]!r}")
    if len(selected) != counts["selected_source_executors"]:
        mismatches.append(
            f"selected projection has {len(selected)} executors, the plan {counts['selected_source_executors']}"
        )
    if restored != transfer_plan:
        mismatches.append("pickle round trip changed the TransferPlan")
    if required_segments != EXPECTED_LOGICAL_REQUIRED_SEGMENTS:
        mismatches.append(
            f"budgets.logical.required_segments: expected {EXPECTED_LOGICAL_REQUIRED_SEGMENTS}, got {required_segments}"
        )
    expected_physical = args.physical_regions * args.physical_rows
    if physical_segments != expected_physical:
        mismatches.append(f"budgets.physical.segments: expected {expected_physical}, got {physical_segments}")
    for side in ("logical", "physical"):
        for verdict in ("accepted_at_required", "rejected_below_required"):
            if budgets[side][verdict] is not True:
                mismatches.append(f"budgets.{side}.{verdict}: expected true")

    default_workload = args.physical_rows == 128 and args.physical_regions == 128
    speedup = {name: REFERENCE_MEDIANS_MS[name] / max(value, 1e-9) for name, value in medians.items()}
    document: Dict[str, Any] = {
        "benchmark": "runtime_binding",
        "python": {
            "implementation": platform.python_implementation(),
            "version": platform.python_version(),
        },
        "machine": _machine(),
        "arguments": vars(args),
        "counts": counts,
        "medians_ms": medians,
        "binding_peak_traced_memory_bytes": binding_peak,
        "budgets": budgets,
        "reference_medians_ms": dict(REFERENCE_MEDIANS_MS),
        "reference_binding_peak_traced_memory_bytes": REFERENCE_BINDING_PEAK_TRACED_MEMORY_BYTES,
        "speedup_vs_reference": speedup,
        # The same stages with fresh, equal input objects for every call: the first use of
        # every value, the comparison that flatters nothing.
        "medians_fresh_inputs_ms": medians_fresh,
        "speedup_fresh_inputs_vs_reference": {
            name: REFERENCE_MEDIANS_MS[name] / max(value, 1e-9) for name, value in medians_fresh.items()
        },
        "target_speedup": dict(TARGET_SPEEDUP),
        "targets_met": {
            name: (min(speedup[name], REFERENCE_MEDIANS_MS[name] / max(medians_fresh.get(name, 0.0), 1e-9))
                   >= TARGET_SPEEDUP[name])
            if (default_workload or name != "physical_validation")
            else None
            for name in medians
        },
        "contract_mismatches": mismatches,
    }
    json.dump(document, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")
    if mismatches:
        for mismatch in mismatches:
            print(f"runtime_binding: contract mismatch: {mismatch}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

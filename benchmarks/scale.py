#!/usr/bin/env python3
"""Scale benchmarks of ``mooncake.reshard`` (the workload families of DESIGN.md section 6).

Families (``--families`` selects a subset, comma-separated):

* ``construction``: cost of building input values (``PlacementFragment``,
  ``RuntimeBindingFragment``) against a plain frozen dataclass with the same fields;
* ``independent_experts``: a Kimi-K2-class MoE model, ``--layers`` x ``--experts`` x 3 matrices
  (w1/w3 ``(2048, 7168)``, w2 ``(7168, 2048)``, bf16) as independent tensors, training EP48 x DP2
  -> serving EP16 x expert-TP8 (about 550k target fragments at 61 layers);
* ``grouped_experts``: one ``[E, ...]`` tensor per layer and matrix, EP on dim 0 (x DP2) ->
  EP16 x TP8 on the matrix dimension;
* ``orthogonal_tp``: TP splits on dim 0 over N ranks -> dim 1 over M ranks (N x M regions per tensor);
* ``grid_3d``: one tensor covered by an n x n x n grid of boxes (assembly / coverage cost);
* ``sweep``: the same small-expert workload from ``--min-fragments`` (10**3) up to
  ``--max-fragments`` fragments, by decades,
  with the growth factor per decade (``--sweep-repeats N``: each point's fastest of N runs).
  Before it, ``_visit_probe.py`` times object visits in creation and in random order at the same
  sizes (``machine.visit_probe``): how much dearer a scattered visit gets per decade on this
  machine, a floor under the growth of every pass that visits fragments in id order.

Each workload runs in its own child process, so the reported peak RSS (``ru_maxrss``) is the
peak of that workload alone (interpreter and package included; the baseline after imports is
reported beside it). Before its timed stages each child runs the whole pipeline once on a
``WARMUP_FRAGMENTS``-fragment sweep workload (untimed), so that the one-time costs of a process's
first calls (lazy imports, the first large bind's collection of the package's code objects) are
not charged to the workload: about 8 ms, which at 10^3 fragments is most of the pipeline and
flattered the sweep's first decades. ``--cold`` times the first calls instead. Stages are timed
with wall-clock and process CPU time. Progress goes to stderr; the JSON document goes to
``--json PATH`` (``-`` or omitted: stdout) and a readable table to stdout (to stderr when the
JSON is on stdout).

    python benchmarks/scale.py --preset small          # seconds
    python benchmarks/scale.py --preset full --json scale.json
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import gc
import io
import json
import os
import pickle
import platform
import pstats
import resource
import statistics
import subprocess
import sys
import time
import traceback
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

FAMILIES = ("construction", "independent_experts", "grouped_experts", "orthogonal_tp", "grid_3d", "sweep")

PRESETS: Dict[str, Dict[str, Any]] = {
    "small": {
        "layers": 1,
        "experts": 48,
        "orthogonal": {"tensors": 2, "rows": 1024, "cols": 1024, "source_tp": 8, "target_tp": 8},
        "grid_cells_per_dim": 10,
        "max_fragments": 10_000,
        "construction_count": 2_000,
    },
    "full": {
        "layers": 61,
        "experts": 384,
        "orthogonal": {"tensors": 16, "rows": 8192, "cols": 8192, "source_tp": 64, "target_tp": 64},
        "grid_cells_per_dim": 100,
        "max_fragments": 1_000_000,
        "construction_count": 200_000,
    },
}

# DESIGN.md section 6 targets.
TARGET_PIPELINE_CPU_S = 2.0  # assemble both placements + plan + bind, Kimi-K2-class, 61 layers
TARGET_PEAK_RSS_BYTES = 1 << 30
TARGET_GROWTH_PER_DECADE = 12.0
TARGET_CONSTRUCTION_RATIO = 1.5
TARGET_SPEEDUP_VS_REFERENCE = 30.0

# Limits generous enough for whole-model plans: expert w2 shards split on the inner dimension
# lower to thousands of segments each (about 1.3e9 in total for the full Kimi-class model).
PLANNING_LIMITS = {
    "max_transfer_regions": 100_000_000,
    "max_segments_per_region": 1_000_000_000,
    "max_total_lowered_segments": 1_000_000_000_000,
}

PIPELINE_STAGES = ("assemble", "plan", "bind")

# The warm-up workload each child runs before its timed stages (unless --cold): large enough
# that its bind is watched like a large one (binding._WATCH_MIN operations and more: 664 here).
WARMUP_FRAGMENTS = 996


def _progress(message: str) -> None:
    print(f"[scale {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


# ---------------------------------------------------------------------------------------------
# Child side: run one workload and report its stages.

class _Stages:
    """Times named stages (wall and CPU), optionally under cProfile."""

    def __init__(self, label: str, profile_top: int) -> None:
        self.label = label
        self.profile_top = profile_top
        self.results: Dict[str, Dict[str, float]] = {}
        self.profiles: Dict[str, List[str]] = {}

    def run(self, name: str, function: Callable[[], Any]) -> Any:
        _progress(f"{self.label}: {name} ...")
        # Process CPU time, not wall time: on a shared machine other processes' load would
        # otherwise inflate whichever functions happened to run while it peaked.
        profiler = cProfile.Profile(time.process_time) if self.profile_top else None
        wall = time.perf_counter()
        cpu = time.process_time()
        usage = resource.getrusage(resource.RUSAGE_SELF)
        if profiler is not None:
            profiler.enable()
        try:
            return function()
        finally:
            if profiler is not None:
                profiler.disable()
            cpu = time.process_time() - cpu
            wall = time.perf_counter() - wall
            after = resource.getrusage(resource.RUSAGE_SELF)
            # Kernel time (page faults: first touch of fresh memory) is part of the CPU time;
            # reported apart so that allocation churn is visible.
            system = after.ru_stime - usage.ru_stime
            faults = after.ru_minflt - usage.ru_minflt
            self.results[name] = {
                "wall_s": wall,
                "cpu_s": cpu,
                "system_s": system,
                "minor_faults": faults,
                "peak_rss_after_bytes": _rss_bytes(),
            }
            _progress(f"{self.label}: {name} {wall:.3f} s wall, {cpu:.3f} s cpu ({system:.3f} s system, {faults} faults)")
            if profiler is not None:
                self.profiles[name] = _top_functions(profiler, self.profile_top)


def _top_functions(profiler: cProfile.Profile, count: int) -> List[str]:
    stream = io.StringIO()
    stats = pstats.Stats(profiler, stream=stream)
    rows = []
    for (filename, line, function), (_, ncalls, tottime, cumtime, _) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append((tottime, cumtime, ncalls, f"{os.path.basename(filename)}:{line}({function})"))
    rows.sort(reverse=True)
    return [f"{name}: tottime {tot:.3f}s cumtime {cum:.3f}s calls {n}" for tot, cum, n, name in rows[:count]]


def _limits() -> Any:
    from mooncake.reshard.weight import PlanningLimits

    return PlanningLimits(**PLANNING_LIMITS)


def _run_pipeline(label: str, build: Callable[[], Any], profile_top: int) -> Dict[str, Any]:
    import _workloads as w
    from mooncake.reshard.weight import bind_logical_transfer_plan, plan_placement_transfer

    stages = _Stages(label, profile_top)
    inputs = stages.run("build_inputs", build)

    def assemble() -> Tuple[Any, Any]:
        source = w.assemble(inputs.source)
        target = w.assemble(inputs.target)
        _ = (source.digest, target.digest)  # bindings need them; computed once, then cached
        return source, target

    source, target = stages.run("assemble", assemble)
    logical = stages.run("plan", lambda: plan_placement_transfer(source, target, planning_limits=_limits()))
    source_bindings, target_bindings = stages.run(
        "build_bindings",
        lambda: (w.bindings(source, prefix="src", window=0), w.bindings(target, prefix="dst", window=4096)),
    )
    plan = stages.run(
        "bind", lambda: bind_logical_transfer_plan(logical, target_bindings, source_bindings=source_bindings)
    )
    payload = stages.run("pickle_dump", lambda: pickle.dumps(plan, protocol=pickle.HIGHEST_PROTOCOL))
    restored = stages.run("pickle_load", lambda: pickle.loads(payload))
    if len(restored.operations) != len(plan.operations):
        raise RuntimeError("pickle round trip lost operations")
    counts = {
        "tensors": len(target.tensors),
        "source_fragments": len(source.fragments),
        "target_fragments": len(target.fragments),
        "fragments": len(source.fragments) + len(target.fragments),
        "source_participants": len(source.parts),
        "target_participants": len(target.parts),
        "operations": len(plan.operations),
        "lowered_segments": sum(op.segment_count for op in logical.operations),
        "total_bytes": plan.total_bytes,
        "source_executors": len(plan.source_executors),
        "target_executors": len(plan.target_executors),
        "pickle_bytes": len(payload),
    }
    return {"stages": stages.results, "profiles": stages.profiles, "counts": counts}


def warm_up(fragments: int) -> Dict[str, Any]:
    """Runs every stage once, untimed by the stages' table, on a small sweep workload: what a
    process pays only on its first calls is then paid here. Returns its fragment count and CPU
    seconds (recorded, so that the one-time cost stays visible)."""
    import _workloads as w
    from mooncake.reshard.weight import bind_logical_transfer_plan, plan_placement_transfer

    cpu = time.process_time()
    inputs = w.sweep(fragments=fragments)
    source, target = w.assemble(inputs.source), w.assemble(inputs.target)
    _ = (source.digest, target.digest)
    logical = plan_placement_transfer(source, target, planning_limits=_limits())
    plan = bind_logical_transfer_plan(logical, w.bindings(target, prefix="dst", window=4096),
                                      source_bindings=w.bindings(source, prefix="src", window=0))
    restored = pickle.loads(pickle.dumps(plan, protocol=pickle.HIGHEST_PROTOCOL))
    if len(restored.operations) != len(plan.operations):
        raise RuntimeError("warm-up: pickle round trip lost operations")
    return {"fragments": len(source.fragments) + len(target.fragments), "cpu_s": time.process_time() - cpu}


def _run_grid(cells_per_dim: int, profile_top: int) -> Dict[str, Any]:
    import _workloads as w

    stages = _Stages("grid_3d", profile_top)
    side = stages.run("build_inputs", lambda: w.grid_3d(cells_per_dim=cells_per_dim))

    def assemble() -> Any:
        placement = w.assemble(side)
        _ = placement.digest
        return placement

    placement = stages.run("assemble", assemble)
    return {
        "stages": stages.results,
        "profiles": stages.profiles,
        "counts": {"boxes": len(placement.fragments), "cells_per_dim": cells_per_dim},
    }


def _median_of(repeats: int, function: Callable[[], Any]) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _run_construction(count: int) -> Dict[str, Any]:
    """Input-value construction against plain frozen dataclasses with the same fields."""
    from mooncake.reshard.weight import ParallelRank, PlacementFragment, RuntimeBindingFragment

    plain_fragment = dataclasses.make_dataclass(
        "PlainPlacementFragment",
        ["tensor_id", "global_offset", "local_shape", "nbytes", "rank", "pipeline_stage_id", "aliases",
         "placement_fragment_id"],
        frozen=True,
    )
    plain_runtime = dataclasses.make_dataclass(
        "PlainRuntimeBindingFragment",
        ["placement_fragment_id", "fragment_id", "address", "nbytes", "worker_id", "endpoint", "device",
         "itemsize", "local_shape", "strides_bytes", "storage_address", "storage_nbytes",
         "storage_offset_bytes", ("owner", object, dataclasses.field(default=None))],
        frozen=True,
    )
    ranks = [ParallelRank(ep=i % 16, tp=i % 8) for i in range(128)]
    fragment_args = [
        (f"layers.{i // 1152}.mlp.experts.{(i // 3) % 384}.w{i % 3 + 1}", (256 * (i % 8), 0), (256, 7168),
         256 * 7168 * 2, ranks[i % 128], None, (), f"fragment-{i}")
        for i in range(count)
    ]
    runtime_args = [
        (f"fragment-{i}", f"runtime-{i}", (1 << 40) + i * 4096, 4096, "worker-0", "endpoint-0", "cuda:0", 2,
         (32, 64), (128, 2), (1 << 40) + i * 4096, 4096, 0)
        for i in range(count)
    ]
    _progress(f"construction: {count} values of each kind")
    kinds: Dict[str, Callable[[], Any]] = {
        "plain_fragment_s": lambda: [plain_fragment(*a) for a in fragment_args],
        "placement_fragment_explicit_id_s": lambda: [PlacementFragment(*a) for a in fragment_args],
        "placement_fragment_derived_id_s": lambda: [PlacementFragment(*a[:7]) for a in fragment_args],
        "plain_runtime_s": lambda: [plain_runtime(*a) for a in runtime_args],
        "runtime_binding_fragment_s": lambda: [RuntimeBindingFragment(*a) for a in runtime_args],
    }
    # Interleave the kinds and keep each kind's best run: on a shared, noisy machine the
    # minimum is the most stable estimate of the intrinsic cost, and interleaving exposes every
    # kind to the same background load.
    samples: Dict[str, List[float]] = {name: [] for name in kinds}
    for _ in range(5):
        for name, function in kinds.items():
            samples[name].append(_median_of(1, function))
    figures = {name: min(values) for name, values in samples.items()}
    ratios = {
        "placement_fragment_explicit_id": figures["placement_fragment_explicit_id_s"] / figures["plain_fragment_s"],
        "placement_fragment_derived_id": figures["placement_fragment_derived_id_s"] / figures["plain_fragment_s"],
        "runtime_binding_fragment": figures["runtime_binding_fragment_s"] / figures["plain_runtime_s"],
    }
    per_value_us = {name: value / count * 1e6 for name, value in figures.items()}
    return {"counts": {"values": count}, "seconds": figures, "per_value_us": per_value_us,
            "ratio_vs_plain_dataclass": ratios}


def _child(job: Dict[str, Any]) -> Dict[str, Any]:
    import _workloads as w

    kind = job["kind"]
    # (construction times medians of many calls: warm by itself)
    warmup = warm_up(job["warmup_fragments"]) if job.get("warmup_fragments") and kind != "construction" else None
    baseline = _rss_bytes()
    profile_top = job.get("profile_top", 0)
    if kind == "construction":
        result = _run_construction(job["count"])
    elif kind == "independent_experts":
        result = _run_pipeline(
            kind, lambda: w.independent_experts(layers=job["layers"], experts=job["experts"]), profile_top
        )
    elif kind == "grouped_experts":
        result = _run_pipeline(
            kind, lambda: w.grouped_experts(layers=job["layers"], experts=job["experts"]), profile_top
        )
    elif kind == "orthogonal_tp":
        result = _run_pipeline(kind, lambda: w.orthogonal_tp(**job["orthogonal"]), profile_top)
    elif kind == "grid_3d":
        result = _run_grid(job["cells_per_dim"], profile_top)
    elif kind == "sweep_point":
        result = _run_pipeline(f"sweep {job['fragments']}", lambda: w.sweep(fragments=job["fragments"]),
                               profile_top)
    else:
        raise ValueError(f"unknown job kind: {kind}")
    stages = result.get("stages", {})
    if all(name in stages for name in PIPELINE_STAGES):
        result["pipeline"] = {
            "stages": list(PIPELINE_STAGES),
            "wall_s": sum(stages[name]["wall_s"] for name in PIPELINE_STAGES),
            "cpu_s": sum(stages[name]["cpu_s"] for name in PIPELINE_STAGES),
            # the kernel's share (first touch of fresh memory, whose cost per page depends on the
            # VM's history: "Machine and method" in docs/performance.md)
            "system_s": sum(stages[name]["system_s"] for name in PIPELINE_STAGES),
        }
    result["memory"] = {"baseline_rss_bytes": baseline, "peak_rss_bytes": _rss_bytes()}
    result["warmup"] = warmup
    result["job"] = job
    return result


def _child_main(raw: str) -> int:
    job = json.loads(raw)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    try:
        result = _child(job)
    except Exception as exc:  # reported to the parent, which fails the run
        traceback.print_exc(file=sys.stderr)
        result = {"job": job, "error": f"{type(exc).__name__}: {exc}"}
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


# ---------------------------------------------------------------------------------------------
# Parent side.

def _run_job(job: Dict[str, Any], in_process: bool) -> Dict[str, Any]:
    if in_process:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        return _child(job)
    completed = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", json.dumps(job)],
        stdout=subprocess.PIPE,
        text=True,
    )
    lines = [line for line in completed.stdout.splitlines() if line.strip()]
    if completed.returncode != 0 or not lines:
        return {"job": job, "error": f"child process exited with status {completed.returncode}"}
    return json.loads(lines[-1])


def _best_of(job: Dict[str, Any], in_process: bool, repeats: int) -> Dict[str, Any]:
    """The job run ``repeats`` times (each in a fresh child process unless in-process), keeping
    the run with the least pipeline CPU time; every run's pipeline CPU time is recorded in
    ``pipeline_cpu_s_runs``. On a shared machine one reading of the 10^6 point moves by up to
    1.6x between identical processes (cache and memory-bandwidth contention from the other
    core), which a single reading per point passes straight into the growth factor; the
    fastest of a few readings is the least disturbed one. A failed run fails the point."""
    runs = [_run_job(job, in_process) for _ in range(max(1, repeats))]
    failed = [run for run in runs if "error" in run or "pipeline" not in run]
    if failed:
        return failed[0]
    best = min(runs, key=lambda run: run["pipeline"]["cpu_s"])
    best["pipeline_cpu_s_runs"] = [run["pipeline"]["cpu_s"] for run in runs]
    return best


def _user_s(figures: Dict[str, Any]) -> float:
    """CPU seconds minus kernel seconds (never below 0: the two are read by different clocks)."""
    return max(float(figures["cpu_s"] - figures["system_s"]), 0.0)


def _growth(points: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    rows = []
    ok = [p for p in points if "error" not in p]
    for previous, current in zip(ok, ok[1:]):
        row: Dict[str, Any] = {
            "from_fragments": previous["counts"]["fragments"],
            "to_fragments": current["counts"]["fragments"],
        }
        size_factor = current["counts"]["fragments"] / previous["counts"]["fragments"]
        row["size_factor"] = size_factor
        row["pipeline_cpu_factor"] = current["pipeline"]["cpu_s"] / max(previous["pipeline"]["cpu_s"], 1e-9)
        # user time alone (CPU minus kernel): the package's own work, apart from the page faults'
        # cost per page, which on these VMs grows with the memory a process touches. Reported
        # beside the target's factor, never instead of it.
        row["pipeline_user_cpu_factor"] = _user_s(current["pipeline"]) / max(_user_s(previous["pipeline"]), 1e-9)
        row["stage_cpu_factor"] = {
            name: current["stages"][name]["cpu_s"] / max(previous["stages"][name]["cpu_s"], 1e-9)
            for name in current["stages"]
        }
        rows.append(row)
    return rows


def _targets(document: Dict[str, Any]) -> Dict[str, Any]:
    results = document["results"]
    targets: Dict[str, Any] = {}
    kimi = results.get("independent_experts")
    full_model = document["parameters"]["layers"] == 61 and document["parameters"]["experts"] == 384
    if kimi and "error" not in kimi:
        targets["kimi_pipeline_cpu_under_2s"] = {
            "measured_s": kimi["pipeline"]["cpu_s"],
            "target_s": TARGET_PIPELINE_CPU_S,
            "met": kimi["pipeline"]["cpu_s"] < TARGET_PIPELINE_CPU_S if full_model else None,
            "note": None if full_model else "scaled-down model: target applies to 61 layers x 384 experts",
        }
        pipeline_peak = kimi["stages"]["bind"]["peak_rss_after_bytes"]
        targets["kimi_peak_rss_under_1GiB"] = {
            "measured_bytes": pipeline_peak,
            "target_bytes": TARGET_PEAK_RSS_BYTES,
            "met": pipeline_peak < TARGET_PEAK_RSS_BYTES if full_model else None,
            "note": "peak RSS of the child process by the end of binding (before the pickle round trip), "
                    "including the interpreter and the input values the adapter built",
        }
        targets["kimi_30x_below_reference"] = {
            "target_speedup": TARGET_SPEEDUP_VS_REFERENCE,
            "met": None,
            "note": "not measured here: benchmarks/reference_side_by_side.py runs the released reference "
                    "(placements and planning: it has no runtime binding) on the same workload",
        }
    sweep = results.get("sweep")
    if sweep and sweep.get("growth"):
        worst = max(row["pipeline_cpu_factor"] / (row["size_factor"] / 10.0) for row in sweep["growth"])
        targets["growth_per_decade_at_most_12x"] = {
            "worst_factor_per_decade": worst,
            "target": TARGET_GROWTH_PER_DECADE,
            "met": worst <= TARGET_GROWTH_PER_DECADE,
        }
    construction = results.get("construction")
    if construction and "error" not in construction:
        ratios = construction["ratio_vs_plain_dataclass"]
        targets["construction_at_most_1_5x_plain_dataclass"] = {
            "ratios": ratios,
            "target": TARGET_CONSTRUCTION_RATIO,
            "met": max(ratios["placement_fragment_explicit_id"], ratios["runtime_binding_fragment"])
            <= TARGET_CONSTRUCTION_RATIO,
            "note": "judged on explicit-id fragments; a derived id adds one SHA-256 per fragment",
        }
    return targets


def _table(document: Dict[str, Any]) -> str:
    lines = [f"mooncake.reshard scale benchmark (preset {document['preset']}, "
             f"Python {document['python']['version']}, {document['machine']['cpu_count']} CPUs)"]
    probe = document["machine"].get("fault_probe")
    if probe:
        lines.append(f"first touch of fresh memory at the start: {probe['small_pages']['system_s_per_gib']:.2f} s/GiB "
                     f"system time in 4 KiB pages, {probe['huge_pages']['system_s_per_gib']:.2f} s/GiB with huge "
                     "pages advised (varies with the machine's history: benchmarks/_fault_probe.py)")
    warmup = document["parameters"].get("warmup_fragments")
    lines.append(f"each process ran one untimed {warmup}-fragment pipeline before its timed stages"
                 if warmup else "cold processes: each workload's first calls timed, one-time costs included (--cold)")
    visits = document["machine"].get("visit_probe")
    if visits:
        lines.append("object visit, ns (sequential / random order; benchmarks/_visit_probe.py): " + ", ".join(
            f"{point['objects']} objects {point['sequential_ns']:.0f} / {point['random_ns']:.0f}"
            for point in visits["points"]))
    header = f"{'family':<22} {'stage':<16} {'wall s':>10} {'cpu s':>10}"
    for name, result in document["results"].items():
        lines.append("")
        if "error" in result:
            lines.append(f"{name}: ERROR {result['error']}")
            continue
        if name == "sweep":
            lines.append(f"{'sweep fragments':>16} {'ops':>9} {'assemble':>9} {'plan':>9} {'bind':>9} "
                         f"{'pipeline':>9} {'system':>8} {'growth':>7} {'user growth':>11}")
            growth = {row["to_fragments"]: row for row in result.get("growth", [])}
            for point in result["points"]:
                if "error" in point:
                    lines.append(f"{point['job']['fragments']:>16} ERROR {point['error']}")
                    continue
                stages, counts = point["stages"], point["counts"]
                factor = growth.get(counts["fragments"])
                lines.append(
                    f"{counts['fragments']:>16} {counts['operations']:>9} {stages['assemble']['cpu_s']:>9.3f} "
                    f"{stages['plan']['cpu_s']:>9.3f} {stages['bind']['cpu_s']:>9.3f} "
                    f"{point['pipeline']['cpu_s']:>9.3f} {point['pipeline']['system_s']:>8.3f} "
                    + (f"{factor['pipeline_cpu_factor']:>6.2f}x {factor['pipeline_user_cpu_factor']:>10.2f}x"
                       if factor else f"{'':>7} {'':>11}")
                )
            continue
        if name == "construction":
            lines.append(f"construction ({result['counts']['values']} values): per value, us")
            for key, value in result["per_value_us"].items():
                lines.append(f"  {key:<36} {value:>8.2f}")
            for key, value in result["ratio_vs_plain_dataclass"].items():
                lines.append(f"  ratio {key:<30} {value:>8.2f}x")
            continue
        lines.append(header)
        for stage, figures in result["stages"].items():
            lines.append(f"{name:<22} {stage:<16} {figures['wall_s']:>10.3f} {figures['cpu_s']:>10.3f}")
        if "pipeline" in result:
            lines.append(f"{name:<22} {'assemble+plan+bind':<16} {result['pipeline']['wall_s']:>10.3f} "
                         f"{result['pipeline']['cpu_s']:>10.3f}")
        counts = ", ".join(f"{k}={v}" for k, v in result["counts"].items())
        lines.append(f"  counts: {counts}")
        memory = result["memory"]
        lines.append(f"  peak RSS {memory['peak_rss_bytes'] / 2**20:.1f} MiB "
                     f"(baseline after imports{' and warm-up' if result.get('warmup') else ''} "
                     f"{memory['baseline_rss_bytes'] / 2**20:.1f} MiB)")
    lines.append("")
    lines.append("targets (DESIGN.md section 6):")
    for name, target in document["targets"].items():
        verdict = {True: "met", False: "MISSED", None: "n/a"}[target["met"]]
        detail = {k: v for k, v in target.items() if k != "met"}
        lines.append(f"  {name}: {verdict} {json.dumps(detail)}")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--preset", choices=sorted(PRESETS), default="small")
    parser.add_argument("--families", default=",".join(FAMILIES),
                        help=f"comma-separated subset of: {', '.join(FAMILIES)}")
    parser.add_argument("--layers", type=int, help="layers of the expert models (preset: small 1, full 61)")
    parser.add_argument("--experts", type=int, help="experts per layer (multiple of 48; preset: small 48, full 384)")
    parser.add_argument("--min-fragments", type=int, default=1_000,
                        help="smallest sweep point (fragments, source + target; default 1000)")
    parser.add_argument("--max-fragments", type=int, help="largest sweep point (fragments, source + target)")
    parser.add_argument("--grid-cells", type=int, help="cells per dimension of the 3-D grid family")
    parser.add_argument("--sweep-repeats", type=int, default=1, metavar="N",
                        help="run each sweep point N times (fresh processes) and keep the fastest "
                             "pipeline (default 1); every reading is in the JSON")
    parser.add_argument("--json", metavar="PATH", help="write the JSON document here ('-' = stdout, the default)")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="run stages under cProfile (process CPU time) and record the top N functions by own time")
    parser.add_argument("--in-process", action="store_true", help="run every workload in this process")
    parser.add_argument("--cold", action="store_true",
                        help=f"time each workload's first calls in its process (one-time costs included) "
                             f"instead of after a {WARMUP_FRAGMENTS}-fragment warm-up pipeline")
    args = parser.parse_args(argv)
    if args.child is not None:
        return _child_main(args.child)

    families = [name.strip() for name in args.families.split(",") if name.strip()]
    unknown = [name for name in families if name not in FAMILIES]
    if unknown:
        parser.error(f"unknown families: {', '.join(unknown)}")
    preset = PRESETS[args.preset]
    parameters: Dict[str, Any] = {
        "layers": args.layers if args.layers is not None else preset["layers"],
        "experts": args.experts if args.experts is not None else preset["experts"],
        "min_fragments": args.min_fragments,
        "max_fragments": args.max_fragments if args.max_fragments is not None else preset["max_fragments"],
        "grid_cells_per_dim": args.grid_cells if args.grid_cells is not None else preset["grid_cells_per_dim"],
        "sweep_repeats": args.sweep_repeats,
        # each child's untimed warm-up pipeline (sweep fragments; 0: --cold, none)
        "warmup_fragments": 0 if args.cold else WARMUP_FRAGMENTS,
        "orthogonal": preset["orthogonal"],
        "construction_count": preset["construction_count"],
        "planning_limits": PLANNING_LIMITS,
    }
    profile_top = args.profile
    # (before the workloads: what fresh memory costs at the start of this run; see _fault_probe)
    from _fault_probe import fault_probe

    faults = fault_probe()
    sweep_sizes: List[int] = []
    while (args.min_fragments * 10 ** len(sweep_sizes)) <= parameters["max_fragments"]:
        sweep_sizes.append(args.min_fragments * 10 ** len(sweep_sizes))
    visits: Optional[Dict[str, Any]] = None
    if "sweep" in families and sweep_sizes:
        # (what a scattered object visit costs at the sweep's sizes: its growth sets a floor
        # under the sweep's; see _visit_probe)
        from _visit_probe import visit_probe

        _progress("visit probe")
        visits = visit_probe(sweep_sizes)
    results: Dict[str, Any] = {}
    for family in families:
        _progress(f"family {family}")
        if family == "sweep":
            points = []
            for fragments in sweep_sizes:
                points.append(_best_of(
                    {"kind": "sweep_point", "fragments": fragments, "profile_top": profile_top,
                     "warmup_fragments": parameters["warmup_fragments"]},
                    args.in_process, args.sweep_repeats,
                ))
            results["sweep"] = {"points": points, "growth": _growth(points)}
            if any("error" in point for point in points):
                results["sweep"]["error"] = "a sweep point failed"
            continue
        job: Dict[str, Any] = {"kind": family, "profile_top": profile_top,
                               "warmup_fragments": parameters["warmup_fragments"]}
        if family == "construction":
            job["count"] = parameters["construction_count"]
        elif family in ("independent_experts", "grouped_experts"):
            job.update(layers=parameters["layers"], experts=parameters["experts"])
        elif family == "orthogonal_tp":
            job["orthogonal"] = parameters["orthogonal"]
        elif family == "grid_3d":
            job["cells_per_dim"] = parameters["grid_cells_per_dim"]
        results[family] = _run_job(job, args.in_process)

    document: Dict[str, Any] = {
        "benchmark": "scale",
        "preset": args.preset,
        "python": {"implementation": platform.python_implementation(), "version": platform.python_version()},
        "machine": {"platform": platform.platform(), "machine": platform.machine(),
                    "processor": platform.processor(), "cpu_count": os.cpu_count(),
                    "fault_probe": faults, "visit_probe": visits},
        "parameters": parameters,
        "results": results,
    }
    document["targets"] = _targets(document)
    text = json.dumps(document, indent=2)
    table = _table(document)
    if args.json and args.json != "-":
        with open(args.json, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
        print(table)
    else:
        print(text)
        print(table, file=sys.stderr)
    failed = [name for name, result in results.items() if "error" in result]
    if failed:
        print(f"scale: failed families: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Growth of planning per decade, an older build against the current one, in one process.

    git worktree add --detach /tmp/old <rev> && (cd /tmp/old && python setup.py build_ext --inplace)
    python benchmarks/plan_growth.py --old /tmp/old --points 100000,1000000 --reps 3 [--passes]

Both packages build their own ``sweep`` workload at each point (``_workloads`` loaded a second
time against the old package, as ``plan_ab.py`` does), then ``plan_placement_transfer`` runs
alternately (old first on even pairs, new first on odd ones; one warm-up pair dropped). Prints,
per point, the CPU-time medians of both builds and the median of the per-pair ratios new/old,
then each build's growth of the median from one point to the next, scaled to a decade.
``--passes`` also times every call into ``_native`` and the planner's own Python frames by
cProfile (own time, CPU clock) in one more run per build and point, and prints each pass's
time and growth per decade for both builds (cProfile adds a constant per call: the passes are
one or two calls each). ``--workload experts`` takes ``independent_experts`` at the given layer
counts instead (``--points 8,30``)."""

from __future__ import annotations

import argparse
import cProfile
import gc
import importlib
import math
import os
import pstats
import statistics
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))


def _passes(run: Any) -> dict[str, float]:
    """Own CPU time per function of one run, for the native calls and the planner's frames."""
    profile = cProfile.Profile(time.process_time)
    profile.enable()
    result = run()
    profile.disable()
    del result
    gc.collect()
    stats = pstats.Stats(profile)
    out: dict[str, float] = {}
    for (filename, _, name), (_, _, own, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        if "_native" in name or "FragmentTable" in name:
            key = name.replace("<built-in method ", "").replace("<method ", "").rstrip(">")
            key = key.split(" of ")[0].replace("mooncake.reshard._native.", "").replace("mooncake_reshard_old._native.", "")
        elif "_planner" in filename:
            key = f"{os.path.basename(filename)}:{name}"
        else:
            key = "(other)"
        out[key] = out.get(key, 0.0) + own
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="root of a worktree holding the older build")
    parser.add_argument("--points", default="100000,1000000", help="sweep fragments (or layers), comma-separated")
    parser.add_argument("--workload", choices=("sweep", "experts"), default="sweep")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--passes", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, HERE)
    import _workloads as new_workloads  # noqa: E402
    import plan_ab  # noqa: E402
    import scale  # noqa: E402

    import mooncake.reshard.weight as new_weight

    old_package = plan_ab._load_package(args.old, "mooncake_reshard_old")
    old_weight = importlib.import_module("mooncake_reshard_old.weight")
    old_workloads = plan_ab._workloads_for(old_package, "_workloads_old")
    points = [int(p) for p in args.points.split(",")]
    medians: dict[str, list[float]] = {"old": [], "new": []}
    passes: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
    for point in points:
        builds = {}
        for label, workloads, weight in (("old", old_workloads, old_weight), ("new", new_workloads, new_weight)):
            if args.workload == "sweep":
                inputs = workloads.sweep(fragments=point)
            else:
                inputs = workloads.independent_experts(layers=point, experts=384)
            source, target = workloads.assemble(inputs.source), workloads.assemble(inputs.target)
            limits = weight.PlanningLimits(**scale.PLANNING_LIMITS)
            builds[label] = (lambda w=weight, s=source, t=target, lim=limits: w.plan_placement_transfer(
                s, t, planning_limits=lim))
            del inputs
        gc.collect()
        gc.disable()
        times: dict[str, list[float]] = {"old": [], "new": []}
        for i in range(args.reps + 1):
            order = ["old", "new"] if i % 2 == 0 else ["new", "old"]
            for label in order:
                cpu = time.process_time()
                result = builds[label]()
                cpu = time.process_time() - cpu
                del result
                gc.collect()
                if i:
                    times[label].append(cpu)
        if args.passes:
            for label in ("old", "new"):
                passes[label].append(_passes(builds[label]))
        gc.enable()
        ratios = [n / o for o, n in zip(times["old"], times["new"])]
        for label in ("old", "new"):
            medians[label].append(statistics.median(times[label]))
        print(
            f"point {point}: old median {medians['old'][-1]:.4f} s, new median {medians['new'][-1]:.4f} s, "
            f"new/old per-pair median {statistics.median(ratios):.3f} (min {min(ratios):.3f}, "
            f"max {max(ratios):.3f}, n={len(ratios)})",
            flush=True,
        )
        del builds
        gc.collect()
    for k in range(1, len(points)):
        decades = math.log10(points[k] / points[k - 1])
        growth = {label: (medians[label][k] / medians[label][k - 1]) ** (1 / decades) for label in medians}
        print(f"growth per decade {points[k - 1]} -> {points[k]}: old {growth['old']:.1f}x, new {growth['new']:.1f}x")
    if args.passes:
        names = sorted(set().union(*passes["old"], *passes["new"]), key=lambda n: -passes["new"][-1].get(n, 0.0))
        header = " ".join(f"{'old ' + str(p):>12} {'new ' + str(p):>12}" for p in points)
        print(f"{'pass (own CPU s)':<44} {header}  growth/decade (old, new) last step")
        for name in names:
            cells = " ".join(f"{passes['old'][k].get(name, 0.0):12.4f} {passes['new'][k].get(name, 0.0):12.4f}"
                             for k in range(len(points)))
            growth = ""
            if len(points) > 1:
                decades = math.log10(points[-1] / points[-2])
                parts = []
                for label in ("old", "new"):
                    a, b = passes[label][-2].get(name, 0.0), passes[label][-1].get(name, 0.0)
                    parts.append(f"{(b / a) ** (1 / decades):.1f}x" if a > 0 and b > 0 else "-")
                growth = " ".join(parts)
            print(f"{name[:44]:<44} {cells}  {growth}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""A/B of single planning passes: the arguments of ``_native`` calls captured in one plan, the
call replayed with an older build's function and the current one, interleaved, in one process.

    git worktree add --detach /tmp/old <rev> && (cd /tmp/old && python setup.py build_ext --inplace)
    python benchmarks/plan_pass_ab.py --old /tmp/old --point 1000000 --passes select_sources --reps 5
    python benchmarks/plan_pass_ab.py --old /tmp/old --workload experts --point 8 --passes pack_targets

The current package plans the workload once (``sweep`` at ``--point`` fragments, or
``independent_experts`` at ``--point`` layers) with the named ``_native`` functions wrapped to
keep their first call's arguments; each function then runs on those arguments, old and new
alternately (old first on even pairs; the first pair dropped), CPU time per call. Prints whether
both builds return the same result (lists compared item by item by identity or equality) and the
medians and per-pair median ratio new/old. The arguments are the current package's objects: a
pass whose arguments changed shape between the builds cannot be compared this way."""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import statistics
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(x is y or _same(x, y) for x, y in zip(a, b))
    return bool(a is b or a == b)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="root of a worktree holding the older build")
    parser.add_argument("--point", type=int, default=100000, help="sweep fragments (or layers with --workload experts)")
    parser.add_argument("--workload", choices=("sweep", "experts"), default="sweep")
    parser.add_argument("--passes", default="select_sources", help="_native function names, comma-separated")
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    sys.path.insert(0, HERE)
    import _workloads as workloads  # noqa: E402
    import plan_ab  # noqa: E402
    import scale  # noqa: E402

    import mooncake.reshard.weight as weight
    from mooncake.reshard import _native as new_native

    plan_ab._load_package(args.old, "mooncake_reshard_old")
    old_native = importlib.import_module("mooncake_reshard_old._native")
    if args.workload == "sweep":
        inputs = workloads.sweep(fragments=args.point)
    else:
        inputs = workloads.independent_experts(layers=args.point, experts=384)
    source, target = workloads.assemble(inputs.source), workloads.assemble(inputs.target)
    limits = weight.PlanningLimits(**scale.PLANNING_LIMITS)
    names = args.passes.split(",")
    captured: dict[str, tuple[Any, Any]] = {}
    originals = {name: getattr(new_native, name) for name in names}

    def wrapped(name: str) -> Any:
        def call(*a: Any, **k: Any) -> Any:
            captured.setdefault(name, (a, k))
            return originals[name](*a, **k)

        return call

    for name in names:
        setattr(new_native, name, wrapped(name))
    try:
        plan = weight.plan_placement_transfer(source, target, planning_limits=limits)
    finally:
        for name in names:
            setattr(new_native, name, originals[name])
    del plan
    gc.collect()
    gc.disable()
    for name in names:
        if name not in captured:
            print(f"{name}: not called")
            continue
        a, k = captured[name]
        old_fn, new_fn = getattr(old_native, name), originals[name]
        same = _same(old_fn(*a, **k), new_fn(*a, **k))
        times: dict[str, list[float]] = {"old": [], "new": []}
        for i in range(args.reps + 1):
            order = [("old", old_fn), ("new", new_fn)]
            if i % 2:
                order.reverse()
            for label, fn in order:
                cpu = time.process_time()
                result = fn(*a, **k)
                cpu = time.process_time() - cpu
                del result
                if i:
                    times[label].append(cpu)
        ratios = [n / o for o, n in zip(times["old"], times["new"])]
        print(
            f"{name} {args.workload} {args.point}: same result {same}; old median {statistics.median(times['old']):.4f} s, "
            f"new median {statistics.median(times['new']):.4f} s, new/old per-pair median {statistics.median(ratios):.3f} "
            f"(min {min(ratios):.3f}, max {max(ratios):.3f}, n={len(ratios)})",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

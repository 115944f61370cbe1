"""A/B of ``plan_placement_transfer`` in one process: an older build of the package (a git worktree,
built in place) against the package ``mooncake.reshard`` resolves to, interleaved.

    git worktree add /tmp/old <rev> && (cd /tmp/old && python setup.py build_ext --inplace)
    python benchmarks/plan_ab.py --old /tmp/old --layers 8 --reps 14 [--check]
    python benchmarks/plan_ab.py --old /tmp/old --sweep 1000000 --reps 8

Both packages build their own independent_experts workload (``_workloads`` is loaded a second
time against the old package), then the two plans run alternately (old first on even pairs,
new first on odd ones); the first pair is dropped. Prints the CPU-time medians and the median of
the per-pair ratios new/old. ``--check`` first compares the two plans' operations and executors
field by field (the old package's objects against the new one's, by value)."""

from __future__ import annotations

import argparse
import dataclasses
import gc
import importlib.util
import os
import statistics
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))


def _load_package(root: str, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(root, "mooncake_reshard", "__init__.py"),
        submodule_search_locations=[os.path.join(root, "mooncake_reshard")],
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _workloads_for(package: Any, alias: str) -> Any:
    """A second copy of ``_workloads`` whose ``mooncake.reshard`` imports see ``package``."""
    saved = {k: sys.modules[k] for k in list(sys.modules) if k == "mooncake.reshard" or k.startswith("mooncake.reshard.")}
    for k in saved:
        del sys.modules[k]
    sys.modules["mooncake.reshard"] = package
    prefix = package.__name__ + "."
    for k in list(sys.modules):
        if k.startswith(prefix):
            sys.modules["mooncake.reshard." + k[len(prefix):]] = sys.modules[k]
    try:
        spec = importlib.util.spec_from_file_location(alias, os.path.join(HERE, "_workloads.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[alias] = module
        spec.loader.exec_module(module)
        return module
    finally:
        for k in list(sys.modules):
            if k == "mooncake.reshard" or k.startswith("mooncake.reshard."):
                del sys.modules[k]
        sys.modules.update(saved)


def _flat(plan: Any) -> list[Any]:
    def value(v: Any) -> Any:
        return repr(v) if dataclasses.is_dataclass(v) else v

    return [tuple(value(getattr(op, f.name)) for f in dataclasses.fields(op)) for op in plan.operations]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="root of a worktree holding the older build")
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--sweep", type=int, metavar="FRAGMENTS", help="the sweep workload at this size instead")
    parser.add_argument("--experts", type=int, default=384)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, HERE)
    import _workloads as new_workloads  # noqa: E402
    import scale  # noqa: E402

    import mooncake.reshard.weight as new_weight

    old_package = _load_package(args.old, "mooncake_reshard_old")
    old_weight = importlib.import_module("mooncake_reshard_old.weight")
    old_workloads = _workloads_for(old_package, "_workloads_old")

    def setup(workloads: Any) -> tuple[Any, Any]:
        if args.sweep:
            inputs = workloads.sweep(fragments=args.sweep)
        else:
            inputs = workloads.independent_experts(layers=args.layers, experts=args.experts)
        return workloads.assemble(inputs.source), workloads.assemble(inputs.target)

    old_src, old_tgt = setup(old_workloads)
    new_src, new_tgt = setup(new_workloads)
    old_limits = old_weight.PlanningLimits(**scale.PLANNING_LIMITS)
    new_limits = new_weight.PlanningLimits(**scale.PLANNING_LIMITS)

    def run_old() -> Any:
        return old_weight.plan_placement_transfer(old_src, old_tgt, planning_limits=old_limits)

    def run_new() -> Any:
        return new_weight.plan_placement_transfer(new_src, new_tgt, planning_limits=new_limits)

    if args.check:
        a, b = run_old(), run_new()
        assert _flat(a) == _flat(b), "operations differ"
        for side in ("source_executors", "target_executors"):
            assert [repr(e) for e in getattr(a, side)] == [repr(e) for e in getattr(b, side)], side
        print(f"same plan: {len(b.operations)} operations")
        del a, b
    gc.collect()
    gc.disable()
    old_times: list[float] = []
    new_times: list[float] = []
    for i in range(args.reps + 1):
        order = [(run_old, old_times), (run_new, new_times)]
        if i % 2:
            order.reverse()
        for run, times in order:
            cpu = time.process_time()
            result = run()
            cpu = time.process_time() - cpu
            del result
            gc.collect()
            if i:
                times.append(cpu)
    ratios = [n / o for o, n in zip(old_times, new_times)]
    print(
        f"{f'sweep={args.sweep}' if args.sweep else f'layers={args.layers}'} old median {statistics.median(old_times):.4f} s, new median "
        f"{statistics.median(new_times):.4f} s, new/old per-pair median {statistics.median(ratios):.3f} "
        f"(min {min(ratios):.3f}, max {max(ratios):.3f}, n={len(ratios)})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python3
"""Placement assembly (both sides of a workload, and their digests) timed old against new.

One measurement: a fresh process builds the workload's inputs, then assembles the source and
the target placement and reads both digests (what ``scale.py``'s "assemble" stage does), ``--reps``
times, and prints the smallest process CPU time. ``--pairs`` alternates such processes between an
old build and this checkout: the old build is a worktree at another revision built in place
(``git worktree add --detach /tmp/x-base REV``, ``python setup.py build_ext --inplace`` there) made
importable as ``mooncake.reshard`` through a shim directory (``mkdir -p /tmp/x-shim/mooncake && ln -s
/tmp/x-base/mooncake_reshard /tmp/x-shim/mooncake/reshard``)::

    python benchmarks/assembly_ab.py --layers 30 --pairs 3 --old /tmp/x-base --old-shim /tmp/x-shim
    python benchmarks/assembly_ab.py --sweep 1000000 --pairs 2 --old /tmp/x-base --old-shim /tmp/x-shim
    python benchmarks/assembly_ab.py --layers 8 --profile 20      # this checkout, cProfile top 20

Ratios are new/old per pair (CPU time, so other processes' load matters less than for wall time,
but the shared caches and memory bandwidth still do: compare pairs, not single runs).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from typing import Any, List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))


def _inputs(args: argparse.Namespace) -> Any:
    sys.path.insert(0, HERE)
    import _workloads as w

    if args.sweep:
        return w, w.sweep(fragments=args.sweep)
    return w, w.independent_experts(layers=args.layers, experts=args.experts)


def _child(args: argparse.Namespace) -> int:
    w, inputs = _inputs(args)

    def assemble() -> Any:
        source = w.assemble(inputs.source)
        target = w.assemble(inputs.target)
        _ = (source.digest, target.digest)
        return source, target

    if args.profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile(time.process_time)
        profiler.enable()
        assemble()
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(args.profile)
        return 0
    best = None
    for _ in range(args.reps):
        start = time.process_time()
        result = assemble()
        elapsed = time.process_time() - start
        del result
        best = elapsed if best is None else min(best, elapsed)
    print(f"{best:.4f}")
    return 0


def _run(cwd: str, shim: Optional[str], argv: Sequence[str]) -> float:
    env = dict(os.environ)
    if shim:
        env["PYTHONPATH"] = shim + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    out = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", *argv],
        cwd=cwd, env=env, check=True, stdout=subprocess.PIPE, text=True,
    ).stdout
    return float(out.strip().splitlines()[-1])


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=8, help="independent_experts layers (default 8)")
    parser.add_argument("--experts", type=int, default=384)
    parser.add_argument("--sweep", type=int, default=0, help="the sweep workload with about this many fragments")
    parser.add_argument("--reps", type=int, default=2, help="assemblies per process (the smallest counts)")
    parser.add_argument("--pairs", type=int, default=0, help="alternating old/new processes")
    parser.add_argument("--old", help="directory of the old build's worktree (its cwd)")
    parser.add_argument("--old-shim", help="directory holding mooncake/reshard -> the old build")
    parser.add_argument("--profile", type=int, default=0, help="cProfile top N of one assembly (this checkout)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child or args.profile or not args.pairs:
        return _child(args)
    if not (args.old and args.old_shim):
        parser.error("--pairs needs --old and --old-shim")
    forwarded: List[str] = ["--layers", str(args.layers), "--experts", str(args.experts), "--reps", str(args.reps)]
    if args.sweep:
        forwarded += ["--sweep", str(args.sweep)]
    ratios = []
    for pair in range(1, args.pairs + 1):
        old = _run(args.old, args.old_shim, forwarded)
        new = _run(os.path.dirname(HERE), None, forwarded)
        ratios.append(new / old)
        print(f"pair {pair}: old {old:.4f} s, new {new:.4f} s, new/old {new / old:.3f}", flush=True)
    print(f"median new/old {statistics.median(ratios):.3f} over {len(ratios)} pairs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python3
"""Instructions per call of the contract benchmark's hot stages, counted by callgrind.

The machines these figures come from are shared and switch between a fast and a slow state
within seconds, so wall-clock medians of two builds are only comparable inside one run. An
instruction count is repeatable: the same build, inputs and ``PYTHONHASHSEED`` give the same
total whatever else the machine does. This script runs the contract workload of
``runtime_binding.py`` (TP4 x DP2 -> TP8 x PP2 x EP2, 8 operations) under
``valgrind --tool=callgrind`` twice, once with 0 and once with N calls of each stage, and prints
``(total(N) - total(0)) / N`` per stage: setup, imports and warm-up cancel out.

    python benchmarks/instruction_counts.py                    # replace, restore, bind
    python benchmarks/instruction_counts.py --stages replace --calls 200 --functions 30
    python benchmarks/instruction_counts.py --stages bind,bind_fresh --calls 200 --functions 40

``bind_fresh`` is ``bind`` on fresh, equal inputs for every call, as runtime_binding.py's
``medians_fresh_inputs_ms`` times it (a ``copy.copy`` of the logical plan, source and target
bindings rebuilt through their constructors): both of its profiles build the same N sets of
inputs, so only the N bind calls differ.

``--functions K`` also prints the K functions with the largest inclusive count per call (the
difference of the two profiles' ``callgrind_annotate --inclusive=yes`` listings) among those
whose ``file:function`` matches ``--match`` (default ``csrc/``: the package's own C), which is
how the per-pass figures of ``docs/performance.md`` are read. Needs valgrind on ``PATH``; the
package is imported as ``python`` would import it (installed, or the in-place build on
``PYTHONPATH``).

``--loop STAGE N [BUILDS]`` (internal; BUILDS defaults to N) runs the workload itself; the script calls itself that way under
callgrind.
"""

from __future__ import annotations

import argparse
import collections
import copy
import dataclasses
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Callable, Dict, List, Sequence

STAGES = ("replace", "restore", "bind", "bind_fresh")
_TOTALS = re.compile(r"^\s*([\d,]+)\s.*PROGRAM TOTALS")
_ROW = re.compile(r"^\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*)$")


def _stage_calls() -> Dict[str, Callable[[], object]]:
    """The stages on the contract workload, built as runtime_binding.py builds it (``bind_fresh``
    is a setup that returns the fresh inputs and the bind call that takes them)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import runtime_binding as rb  # the benchmark's own builders: one workload, one definition

    from mooncake.reshard.weight import bind_logical_transfer_plan, plan_placement_transfer

    source, target = rb.contract_placements()
    source_bindings = rb._bindings(source, "source", 1 << 40)
    target_bindings = rb._bindings(target, "target", 1 << 44)
    logical = plan_placement_transfer(source, target)
    plan = bind_logical_transfer_plan(logical, target_bindings, source_bindings=source_bindings)
    payload = pickle.dumps(plan, protocol=pickle.HIGHEST_PROTOCOL)

    def fresh() -> Callable[[], object]:
        # runtime_binding.py's fresh_bindings: equal values, new objects
        plan_copy = copy.copy(logical)
        targets = rb._bindings(target, "target", 1 << 44)
        sources = rb._bindings(source, "source", 1 << 40)
        return lambda: bind_logical_transfer_plan(plan_copy, targets, source_bindings=sources)

    return {
        "replace": lambda: dataclasses.replace(plan),
        "restore": lambda: pickle.loads(payload),
        "bind": lambda: bind_logical_transfer_plan(logical, target_bindings, source_bindings=source_bindings),
        "bind_fresh": fresh,
    }


def _loop(stage: str, calls: int, builds: int) -> None:
    stages = _stage_calls()
    for _ in range(3):  # warm every stage's caches the same way in both profiles
        for name, run in stages.items():
            run()() if name == "bind_fresh" else run()
    run = stages[stage]
    if stage == "bind_fresh":
        # both profiles build ``builds`` sets of fresh inputs; only the counted one binds them
        for index in range(builds):
            bind = run()
            if index < calls:
                bind()
            del bind
        return
    for _ in range(calls):
        run()


def _profile(stage: str, calls: int, builds: int, out: str) -> None:
    env = dict(os.environ, PYTHONHASHSEED="0")
    command = [
        "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
        sys.executable, os.path.abspath(__file__), "--loop", stage, str(calls), str(builds),
    ]
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _annotate(path: str, inclusive: bool) -> List[str]:
    command = ["callgrind_annotate", "--threshold=100"] + (["--inclusive=yes"] if inclusive else []) + [path]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout.splitlines()


def _total(path: str) -> int:
    for line in _annotate(path, inclusive=False):
        match = _TOTALS.match(line)
        if match:
            return int(match.group(1).replace(",", ""))
    raise RuntimeError(f"no PROGRAM TOTALS in {path}")


def _functions(path: str) -> Dict[str, int]:
    counts: Dict[str, int] = collections.Counter()
    for line in _annotate(path, inclusive=True):
        match = _ROW.match(line)
        # function rows read "file:function [object]"; call lines ("=>") and source lines are skipped
        if match and ":" in match.group(2) and "=>" not in match.group(2) and "PROGRAM TOTALS" not in line:
            counts[match.group(2).split(" [")[0]] += int(match.group(1).replace(",", ""))
    return counts


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stages", default=",".join(STAGES), help="comma-separated: " + ", ".join(STAGES))
    parser.add_argument("--calls", type=int, default=50, help="calls in the counted profile (default 50)")
    parser.add_argument("--functions", type=int, default=0, help="also list the K largest functions per call")
    parser.add_argument(
        "--match", default="csrc/", help="list only functions whose file:name matches this regex (default csrc/)"
    )
    parser.add_argument("--loop", nargs="+", metavar="STAGE N [BUILDS]", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.loop:
        if len(args.loop) not in (2, 3):
            parser.error("--loop takes STAGE N [BUILDS]")
        _loop(args.loop[0], int(args.loop[1]), int(args.loop[-1]))
        return 0
    stages = [name for name in args.stages.split(",") if name]
    unknown = [name for name in stages if name not in STAGES]
    if unknown or args.calls < 1 or args.functions < 0:
        parser.error(f"stages must be among {STAGES} (got {unknown}); --calls >= 1; --functions >= 0")
    if shutil.which("valgrind") is None or shutil.which("callgrind_annotate") is None:
        print("instruction_counts: valgrind (callgrind) is not on PATH", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as work:
        for stage in stages:
            empty, counted = os.path.join(work, f"{stage}.0"), os.path.join(work, f"{stage}.n")
            _profile(stage, 0, args.calls, empty)
            _profile(stage, args.calls, args.calls, counted)
            per_call = (_total(counted) - _total(empty)) / args.calls
            print(f"{stage}: {per_call:,.0f} instructions per call ({args.calls} calls)")
            if args.functions:
                before, after = _functions(empty), _functions(counted)
                wanted = re.compile(args.match)
                rows = sorted(
                    ((after[name] - before.get(name, 0)) / args.calls, name) for name in after if wanted.search(name)
                )
                for count, name in rows[::-1][: args.functions]:
                    print(f"  {count:12,.0f}  {name[-100:]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

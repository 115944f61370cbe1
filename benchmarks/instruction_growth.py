#!/usr/bin/env python3
"""Does a stage grow by doing more work, or by waiting longer for memory? (issue 5)

Runs one stage (``bind`` or ``plan``) of the sweep workload at two sizes, each size twice in
fresh processes: once natively, timing the stage's CPU seconds, and once under ``valgrind
--tool=callgrind`` with instrumentation switched on for the stage alone (``callgrind_control``),
counting its instructions. Prints both growth factors and their quotient: instructions growing
about as the size does while CPU time grows faster means each instruction waits longer at the
large size (cache and TLB misses), not that the code does more per fragment. The inputs are
built as ``perf_growth.py`` builds them (``prepare_stage``).

Needs valgrind (``callgrind_control`` on ``PATH``); the 10^6 bind takes several minutes under it.

    python benchmarks/instruction_growth.py --stage bind --points 99996,999996
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional, Sequence

HERE = Path(__file__).resolve().parent
_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def collected(valgrind_log: str) -> int:
    """The instruction count callgrind reports as collected (its ``Collected : N`` line)."""
    match = _COLLECTED.search(valgrind_log)
    if match is None:
        raise ValueError("no 'Collected' line in callgrind's output")
    return int(match.group(1))


def _child(stage: str, fragments: int, counted: bool) -> None:
    """Builds the inputs, runs ``stage`` once; with ``counted``, switches callgrind's
    instrumentation on around it, else prints its CPU seconds."""
    sys.path.insert(0, str(HERE))
    from perf_growth import prepare_stage

    run = prepare_stage(stage, fragments)
    if counted:
        subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], check=True, stdout=subprocess.DEVNULL)
    started = time.process_time()
    result = run()
    elapsed = time.process_time() - started
    if counted:
        subprocess.run(["callgrind_control", "-i", "off", str(os.getpid())], check=True, stdout=subprocess.DEVNULL)
    del result
    print(elapsed)


def _cpu_seconds(stage: str, fragments: int) -> float:
    completed = subprocess.run([sys.executable, __file__, "--child", stage, str(fragments), "time"],
                               stdout=subprocess.PIPE, text=True, check=True)
    return float(completed.stdout.split()[-1])


def _instructions(stage: str, fragments: int, directory: str) -> int:
    out = os.path.join(directory, f"{stage}_{fragments}.callgrind")
    completed = subprocess.run(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
         sys.executable, __file__, "--child", stage, str(fragments), "count"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=True)
    return collected(completed.stderr)


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--child"]:
        _child(argv[1], int(argv[2]), argv[3] == "count")
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stage", choices=("bind", "plan"), default="bind")
    parser.add_argument("--points", default="99996,999996", help="two sweep sizes, small first")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("instruction_growth: valgrind (callgrind_control) is not on PATH", file=sys.stderr)
        return 2
    small_n, large_n = (int(part) for part in args.points.split(","))
    with tempfile.TemporaryDirectory() as directory:
        rows = []
        for fragments in (small_n, large_n):
            seconds = _cpu_seconds(args.stage, fragments)
            instructions = _instructions(args.stage, fragments, directory)
            print(f"[instruction_growth] {args.stage} at {fragments}: {seconds:.3f} s CPU, "
                  f"{instructions:,} instructions", file=sys.stderr)
            rows.append((fragments, seconds, instructions))
    (_, small_s, small_i), (_, large_s, large_i) = rows
    time_factor, work_factor = large_s / small_s, large_i / small_i
    print(f"{args.stage}, {small_n} -> {large_n} fragments (x{large_n / small_n:.1f}): CPU time x{time_factor:.2f}, "
          f"instructions x{work_factor:.2f}, time per instruction x{time_factor / work_factor:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

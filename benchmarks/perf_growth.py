#!/usr/bin/env python3
"""Which functions make a stage grow faster than linearly (issue 5, growth per decade).

Runs one stage (``assemble``, ``plan``, ``bind`` or ``restore``: the pickle round trip's load of
the bound plan) of the sweep workload at two sizes, each in a fresh process under ``perf record
-e cpu-clock`` (attached for that stage only, after its inputs are built), and prints, per
symbol, its seconds at both sizes, its growth factor and its excess over linear growth: seconds
at the large size minus ``size ratio`` x seconds at the small one.
Kernel symbols count too: on these VMs the first touch of fresh memory (``clear_page_erms``)
costs far more per page in a large process than in a small one ("Machine and method" in
docs/performance.md).

Needs Linux ``perf`` (cpu-clock sampling works where hardware counters are not exposed).

    python benchmarks/perf_growth.py --stage bind --points 99996,999996 [--top 30]
"""

from __future__ import annotations

import argparse
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

HERE = Path(__file__).resolve().parent

STAGES = ("assemble", "plan", "bind", "restore")


def parse_report(text: str, total_s: float) -> Dict[str, float]:
    """Seconds per symbol from ``perf report --no-children --sort sym`` text (its percentages of
    the samples, scaled to the stage's CPU seconds ``total_s``)."""
    seconds: Dict[str, float] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 3 or line.lstrip().startswith("#") or not fields[0].endswith("%"):
            continue
        try:
            share = float(fields[0][:-1]) / 100.0
        except ValueError:
            continue
        symbol = " ".join(fields[2:])  # (fields[1] is perf's [.] user / [k] kernel mark)
        seconds[symbol] = seconds.get(symbol, 0.0) + share * total_s
    return seconds


def excess_rows(small: Dict[str, float], large: Dict[str, float], ratio: float) -> List[Tuple[str, float, float, float]]:
    """(symbol, excess over linear s, small s, large s) for every symbol, largest excess first."""
    rows = [(symbol, large.get(symbol, 0.0) - ratio * small.get(symbol, 0.0), small.get(symbol, 0.0), large.get(symbol, 0.0))
            for symbol in set(small) | set(large)]
    rows.sort(key=lambda row: (-row[1], row[0]))
    return rows


def prepare_stage(stage: str, fragments: int) -> Callable[[], Any]:
    """The sweep workload's inputs for ``stage`` at ``fragments``: see ``prepare_stage_on``."""
    sys.path.insert(0, str(HERE))
    import _workloads as w

    return prepare_stage_on(stage, w.sweep(fragments=fragments))


def prepare_stage_on(stage: str, inputs: Any) -> Callable[[], Any]:
    """The call that runs ``stage`` (one of ``STAGES``) once on a workload's ``inputs``
    (``_workloads.WorkloadInputs``) and returns its result, with what the stage takes built first
    as ``scale.py`` builds it (placements assembled with their digests, a plan made, bindings
    built; for ``restore``, the bound plan pickled, and held while it is loaded, as ``scale.py``'s
    ``pickle_load`` stage runs), after ``scale.py``'s untimed warm-up pipeline (a process's
    one-time first-call costs, about 8 ms, are then not in the recorded stage: they would count
    ten times over in the excess over linear growth)."""
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; expected one of {', '.join(STAGES)}")
    sys.path.insert(0, str(HERE))
    import _workloads as w
    from scale import WARMUP_FRAGMENTS, _limits, warm_up

    warm_up(WARMUP_FRAGMENTS)
    from mooncake.reshard.weight import bind_logical_transfer_plan, plan_placement_transfer

    def assemble() -> Tuple[Any, Any]:
        source, target = w.assemble(inputs.source), w.assemble(inputs.target)
        _ = (source.digest, target.digest)  # (scale.py's assemble stage computes them too)
        return source, target

    if stage == "assemble":
        return assemble
    source, target = assemble()
    # (the plan and the bindings are built for both stages: plan then runs a second time, in a
    # process holding what bind's would hold)
    logical = plan_placement_transfer(source, target, planning_limits=_limits())
    source_bindings = w.bindings(source, prefix="src", window=0)
    target_bindings = w.bindings(target, prefix="dst", window=4096)
    if stage == "plan":
        return lambda: plan_placement_transfer(source, target, planning_limits=_limits())

    def bind() -> Any:
        return bind_logical_transfer_plan(logical, target_bindings, source_bindings=source_bindings)

    if stage == "bind":
        return bind
    bound = bind()  # (stage "restore")
    payload = pickle.dumps(bound, protocol=pickle.HIGHEST_PROTOCOL)

    def restore() -> Any:
        _ = bound  # (held: the process holds what scale.py's holds when it loads the payload)
        return pickle.loads(payload)

    return restore


def record_stage(run: Callable[[], Any], data: str, options: Sequence[str] = ("-F", "4000")) -> float:
    """Runs ``run()`` once under ``perf record -e cpu-clock`` (attached to this process for that
    call alone, with ``options``; samples written to ``data``) and returns its CPU seconds."""
    recorder = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", *options, "-p", str(os.getpid()),
                                 "-o", data], stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # (perf attaches asynchronously)
    started = time.process_time()
    result = run()
    elapsed = time.process_time() - started
    recorder.send_signal(signal.SIGINT)
    recorder.wait()  # (the result is freed after the recording ends: its deallocation is not the stage's)
    del result
    # (perf record re-raises the SIGINT it stopped on once the data is written)
    if recorder.returncode not in (0, -signal.SIGINT):
        raise SystemExit(f"perf record exited with status {recorder.returncode}")
    return elapsed


def _child(stage: str, fragments: int, data: str) -> None:
    """Builds the inputs, then records ``stage`` alone; prints its CPU seconds."""
    print(record_stage(prepare_stage(stage, fragments), data))


def _measure(stage: str, fragments: int, directory: str) -> Dict[str, float]:
    data = os.path.join(directory, f"{stage}_{fragments}.data")
    completed = subprocess.run([sys.executable, __file__, "--child", stage, str(fragments), data],
                               stdout=subprocess.PIPE, text=True, check=True)
    total = float(completed.stdout.split()[-1])
    report = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "sym", "--stdio"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, check=True)
    print(f"[perf_growth] {stage} at {fragments}: {total:.3f} s CPU", file=sys.stderr)
    return parse_report(report.stdout, total)


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--child"]:
        _child(argv[1], int(argv[2]), argv[3])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stage", choices=STAGES, default="bind")
    parser.add_argument("--points", default="99996,999996", help="two sweep sizes, small first")
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args(argv)
    small_n, large_n = (int(part) for part in args.points.split(","))
    with tempfile.TemporaryDirectory() as directory:
        small = _measure(args.stage, small_n, directory)
        large = _measure(args.stage, large_n, directory)
    ratio = large_n / small_n
    print(f"{args.stage}: {sum(small.values()):.3f} s at {small_n}, {sum(large.values()):.3f} s at {large_n}; "
          f"excess over {ratio:.1f}x linear {sum(large.values()) - ratio * sum(small.values()):.3f} s")
    print(f"{'excess s':>9} {'small s':>9} {'large s':>9} {'growth':>8}  symbol")
    for symbol, excess, small_s, large_s in excess_rows(small, large, ratio)[: args.top]:
        growth = f"{large_s / small_s:7.1f}x" if small_s > 0 else f"{'new':>8}"
        print(f"{excess:>9.3f} {small_s:>9.4f} {large_s:>9.3f} {growth}  {symbol}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

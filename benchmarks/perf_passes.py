#!/usr/bin/env python3
"""Where one stage of the Kimi-K2-class workload goes, call by call (issue 5, the 2 s target).

Builds the ``independent_experts`` inputs as ``scale.py`` does, then records one stage
(``assemble``, ``plan``, ``bind`` or ``restore``, the load of the pickled bound plan) alone in a
fresh process under ``perf record -e cpu-clock --call-graph dwarf`` (attached for that call
only, after its inputs are built: the same recorder as ``perf_growth.py``). It prints two tables from ``perf report``:

- the extension's functions by inclusive share: the samples in a function and in everything it
  calls. The top-level C calls of the stage are its passes. A function the compiler inlined
  everywhere has no symbol of its own: it is not listed, and its samples count in its callers.
- every symbol by its own (self) share, the flat profile.

Shares are of all the stage's samples. Samples whose stack perf could not unwind count in the
self table, but in no inclusive row of a function they ran under, so inclusive shares are lower
bounds (``perf report`` lists those samples under ``0xffffffffffffffff``).

Needs Linux ``perf`` and ``nm``; the extension must keep its symbol table (the default build
does).

    python benchmarks/perf_passes.py --stage bind [--layers 61] [--experts 384] [--top 25]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Set, Tuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import perf_growth  # noqa: E402  (benchmarks/ on the path first)

STAGES = perf_growth.STAGES


def parse_children_report(text: str) -> Dict[str, Tuple[float, float]]:
    """(inclusive %, self %) per symbol from ``perf report --children --sort sym -g none`` text.

    Data lines read ``  20.34%   5.97%  [.] symbol``. perf prints an inlined function as
    ``name (inlined)``, one line per inlined copy; those copies are summed under ``name
    (inlined)``."""
    shares: Dict[str, Tuple[float, float]] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 4 or line.lstrip().startswith("#"):
            continue
        if not (fields[0].endswith("%") and fields[1].endswith("%")):
            continue
        try:
            children, own = float(fields[0][:-1]), float(fields[1][:-1])
        except ValueError:
            continue
        symbol = " ".join(fields[3:])  # (fields[2] is perf's [.] user / [k] kernel mark)
        before = shares.get(symbol, (0.0, 0.0))
        shares[symbol] = (before[0] + children, before[1] + own)
    return shares


def extension_symbols(nm_output: str) -> Set[str]:
    """The function names defined in a shared object, from ``nm`` output (text symbols, global
    ``T`` or local ``t``). A compiler clone such as ``name.constprop.0`` is kept as it is:
    perf names it that way too."""
    names: Set[str] = set()
    for line in nm_output.splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[1] in ("T", "t"):
            names.add(fields[2])
    return names


def pass_rows(shares: Dict[str, Tuple[float, float]], ours: Set[str]) -> List[Tuple[str, float, float]]:
    """(symbol, inclusive %, self %) of the extension's own functions, largest inclusive share
    first (ties by name)."""
    rows = [(symbol, children, own) for symbol, (children, own) in shares.items() if symbol in ours]
    rows.sort(key=lambda row: (-row[1], row[0]))
    return rows


def flat_rows(shares: Dict[str, Tuple[float, float]]) -> List[Tuple[str, float]]:
    """(symbol, self %) of every symbol with samples of its own, largest first (ties by name)."""
    rows = [(symbol, own) for symbol, (_, own) in shares.items() if own > 0]
    rows.sort(key=lambda row: (-row[1], row[0]))
    return rows


def _child(stage: str, layers: int, experts: int, data: str) -> None:
    """Builds the inputs, then records ``stage`` alone; prints its CPU seconds."""
    import _workloads as w

    run = perf_growth.prepare_stage_on(stage, w.independent_experts(layers=layers, experts=experts))
    print(perf_growth.record_stage(run, data, ("-F", "2000", "--call-graph", "dwarf,8192")))


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--child"]:
        _child(argv[1], int(argv[2]), int(argv[3]), argv[4])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stage", choices=STAGES, default="bind")
    parser.add_argument("--layers", type=int, default=61, help="layers of the model (default 61)")
    parser.add_argument("--experts", type=int, default=384, help="experts per layer, a multiple of 48 (default 384)")
    parser.add_argument("--top", type=int, default=25, help="rows of each table (default 25)")
    args = parser.parse_args(argv)
    import mooncake.reshard._native as native  # (the build the child process imports too)

    symbols = subprocess.run(["nm", native.__file__], stdout=subprocess.PIPE, text=True, check=True).stdout
    ours = extension_symbols(symbols)
    if not ours:
        raise SystemExit(f"nm found no function symbols in {native.__file__} (a stripped build?)")
    with tempfile.TemporaryDirectory() as directory:
        data = str(Path(directory) / "stage.data")
        completed = subprocess.run(
            [sys.executable, __file__, "--child", args.stage, str(args.layers), str(args.experts), data],
            stdout=subprocess.PIPE, text=True, check=True)
        seconds = float(completed.stdout.split()[-1])
        report = subprocess.run(
            ["perf", "report", "-i", data, "--children", "--sort", "sym", "--stdio", "-g", "none"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, check=True).stdout
    shares = parse_children_report(report)
    print(f"{args.stage} (independent_experts, {args.layers} layers x {args.experts} experts): "
          f"{seconds:.3f} s CPU under perf")
    print(f"\nthe extension's functions by inclusive share\n{'incl %':>7} {'self %':>7}  function")
    for symbol, children, own in pass_rows(shares, ours)[: args.top]:
        print(f"{children:>7.2f} {own:>7.2f}  {symbol}")
    print(f"\nevery symbol by self share\n{'self %':>7}  symbol")
    for symbol, own in flat_rows(shares)[: args.top]:
        print(f"{own:>7.2f}  {symbol}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python3
"""Where bind's resident-set peak sits: RSS and its high-water mark at the C calls of
``bind_logical_transfer_plan`` (issue 5, peak memory).

Builds the Kimi-class independent-expert workload (``--layers`` x ``--experts``), assembles,
plans and builds the bindings, then binds under a profile hook that reads ``VmRSS`` and
``VmHWM`` (``/proc/self/status``) at every C call and return and keeps the events where either
moved by ``--step`` MiB or more. ``ru_maxrss``, which ``scale.py`` reports, is the last
``VmHWM``. Unlike ``bind_call_peaks.py`` (tracemalloc: requested bytes), this sees what the
allocators keep resident, e.g. freed C heap pages that nothing reuses.

``--trim-after-every-call`` runs glibc ``malloc_trim(0)`` after every C call of bind as well, so
that RSS follows live memory: the lower bound any placement of ``_native.trim_heap`` could reach.

Prints one JSON document: the RSS after each stage (MiB) and the bind events
``[event, function, caller, rss_mib, hwm_mib]``. Linux only (reads ``/proc``).

    python benchmarks/bind_rss_curve.py --layers 61 [--experts 384] [--step 3] [--trim-after-every-call]
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _workloads as w  # noqa: E402
import scale  # noqa: E402

from mooncake.reshard.weight import bind_logical_transfer_plan, plan_placement_transfer  # noqa: E402


def _rss_hwm_mib() -> Tuple[int, int]:
    values: Dict[str, int] = {}
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(("VmRSS:", "VmHWM:")):
                name, rest = line.split(":", 1)
                values[name] = int(rest.split()[0]) // 1024
    return values["VmRSS"], values["VmHWM"]


def measure(layers: int, experts: int, step: int, trim_every_call: bool) -> Dict[str, Any]:
    trim = ctypes.CDLL("libc.so.6").malloc_trim if trim_every_call else None
    stages: Dict[str, List[int]] = {}

    def mark(stage: str) -> None:
        gc.collect()
        stages[stage] = list(_rss_hwm_mib())

    inputs = w.independent_experts(layers=layers, experts=experts)
    mark("inputs")
    source, target = w.assemble(inputs.source), w.assemble(inputs.target)
    mark("assemble")
    logical = plan_placement_transfer(source, target, planning_limits=scale._limits())
    mark("plan")
    source_bindings = w.bindings(source, prefix="src", window=0)
    target_bindings = w.bindings(target, prefix="dst", window=4096)
    mark("bindings")
    events: List[List[Any]] = []
    last = list(_rss_hwm_mib())

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event not in ("c_call", "c_return", "c_exception"):
            return
        if trim is not None and event != "c_call":
            trim(0)
        rss, hwm = _rss_hwm_mib()
        if abs(rss - last[0]) >= step or hwm - last[1] >= step:
            name = getattr(arg, "__qualname__", None) or getattr(arg, "__name__", repr(arg))
            caller = f"{frame.f_code.co_name}:{frame.f_lineno}"
            events.append([event, name, caller, rss, hwm])
            last[0], last[1] = rss, hwm

    sys.setprofile(hook)
    try:
        plan = bind_logical_transfer_plan(logical, target_bindings, source_bindings=source_bindings)
    finally:
        sys.setprofile(None)
    mark("bind")
    return {
        "benchmark": "bind_rss_curve",
        "arguments": {"layers": layers, "experts": experts, "step": step, "trim_after_every_call": trim_every_call},
        "operations": len(plan.operations),
        "stages_rss_hwm_mib": stages,
        "bind_events": events,
        "bind_peak_mib": stages["bind"][1],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=1)
    parser.add_argument("--experts", type=int, default=384)
    parser.add_argument("--step", type=int, default=3, help="report moves of at least this many MiB")
    parser.add_argument("--trim-after-every-call", action="store_true")
    args = parser.parse_args()
    if args.layers < 1 or args.experts < 48 or args.experts % 48 or args.step < 1:
        parser.error("--layers >= 1, --experts a multiple of 48, --step >= 1")
    json.dump(measure(args.layers, args.experts, args.step, args.trim_after_every_call), sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

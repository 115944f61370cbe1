#!/usr/bin/env python3
"""Where bind's traced-memory peak sits: the peak reached inside each C call of
``bind_logical_transfer_plan`` (issue 5, memory).

Builds the Kimi-class independent-expert workload (``--layers`` x ``--experts``), assembles,
plans and builds the bindings untraced, then binds under ``tracemalloc`` with a profile hook
that resets the traced peak at every ``c_call`` event and reads it at the matching
``c_return``: the peak inside a C call includes its own temporaries, which the call/return
events of Python functions never see. Prints one JSON document: the operations, the bytes per
operation bind keeps, and the top ``--top`` C functions by the peak reached inside them (bytes
per operation above the traced memory at bind's start; a function called several times
reports its largest).

    python benchmarks/bind_call_peaks.py --layers 1 [--experts 384] [--top 8]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tracemalloc
from pathlib import Path
from typing import Any, Dict

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _workloads as w  # noqa: E402
import scale  # noqa: E402

from mooncake.reshard.weight import bind_logical_transfer_plan, plan_placement_transfer  # noqa: E402


def measure(layers: int, experts: int, top: int) -> Dict[str, Any]:
    inputs = w.independent_experts(layers=layers, experts=experts)
    source, target = w.assemble(inputs.source), w.assemble(inputs.target)
    logical = plan_placement_transfer(source, target, planning_limits=scale._limits())
    source_bindings = w.bindings(source, prefix="src", window=0)
    target_bindings = w.bindings(target, prefix="dst", window=4096)
    operations = len(logical.operations)
    gc.collect()
    tracemalloc.start()
    start = tracemalloc.get_traced_memory()[0]
    peaks: Dict[str, int] = {}

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event == "c_call":
            tracemalloc.reset_peak()
        elif event in ("c_return", "c_exception"):
            name = getattr(arg, "__qualname__", None) or getattr(arg, "__name__", repr(arg))
            peak = tracemalloc.get_traced_memory()[1] - start
            if peak > peaks.get(name, -1):
                peaks[name] = peak

    sys.setprofile(hook)
    try:
        plan = bind_logical_transfer_plan(logical, target_bindings, source_bindings=source_bindings)
    finally:
        sys.setprofile(None)
    kept = tracemalloc.get_traced_memory()[0] - start
    tracemalloc.stop()
    ranked = sorted(peaks.items(), key=lambda item: -item[1])[:top]
    return {
        "benchmark": "bind_call_peaks",
        "arguments": {"layers": layers, "experts": experts, "top": top},
        "operations": operations,
        "kept_bytes_per_op": kept / operations,
        "peaks": [{"function": name, "peak_bytes_per_op": peak / operations} for name, peak in ranked],
        "result_operations": len(plan.operations),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=1)
    parser.add_argument("--experts", type=int, default=384, help="experts per layer (multiple of 48)")
    parser.add_argument("--top", type=int, default=8)
    args = parser.parse_args()
    print(json.dumps(measure(args.layers, args.experts, args.top), indent=1))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Pickle size and speed of a placement and of a bound plan, at protocols 4 and 5.

One process builds the sweep workload of ``--fragments`` fragments (``_workloads.sweep``: both
placements, the logical plan, the bound ``TransferPlan``), then pickles the target placement and
the plan ``--repeats`` times each way and prints one JSON document: the median process CPU
seconds of each dump and load, and the payload sizes. It measures whichever package
``mooncake.reshard`` imports, so two builds are compared by running it alternately with each on
the path (a worktree of the other revision built in place, made importable through a shim
directory as ``benchmarks/assembly_ab.py`` describes)::

    python benchmarks/pickle_formats.py --fragments 100000
    for i in 1 2 3; do
      PYTHONPATH=/tmp/x-shim python benchmarks/pickle_formats.py > old-$i.json
      python benchmarks/pickle_formats.py > new-$i.json
    done

A placement pickles by default dataclass pickling (spec §13); a ``TransferPlan`` as its private
record, packed by the C codec at protocol 5 (the path ``scale.py`` and ``runtime_binding.py``
time).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import sys
import time
from typing import Any, Callable, Dict, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))


def _median_cpu(function: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.process_time()
        function()
        times.append(time.process_time() - start)
    return statistics.median(times)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fragments", type=int, default=100000, help="sweep workload size")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per figure (median)")
    args = parser.parse_args(argv)
    sys.path.insert(0, HERE)
    import _workloads as w

    import mooncake.reshard as package
    from mooncake.reshard.weight import bind_logical_transfer_plan, plan_placement_transfer

    inputs = w.sweep(fragments=args.fragments)
    source, target = w.assemble(inputs.source), w.assemble(inputs.target)
    _ = (source.digest, target.digest)
    logical = plan_placement_transfer(source, target)
    plan = bind_logical_transfer_plan(
        logical,
        w.bindings(target, prefix="dst", window=4096),
        source_bindings=w.bindings(source, prefix="src", window=0),
    )
    figures: Dict[str, Any] = {"package": os.path.dirname(package.__file__), "fragments": args.fragments}
    for name, value in (("placement", target), ("plan", plan)):
        for protocol in (4, 5):
            payload = pickle.dumps(value, protocol=protocol)
            if pickle.loads(payload) != value:
                raise RuntimeError(f"{name} changed in a protocol {protocol} round trip")
            figures[f"{name}_p{protocol}_bytes"] = len(payload)
            figures[f"{name}_p{protocol}_dump_s"] = _median_cpu(lambda: pickle.dumps(value, protocol=protocol), args.repeats)
            figures[f"{name}_p{protocol}_load_s"] = _median_cpu(lambda: pickle.loads(payload), args.repeats)
    print(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

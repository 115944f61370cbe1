#!/usr/bin/env python3
"""``mooncake.reshard`` side by side with the released pure-Python reference.

The reference is Mooncake's pure-Python ``mooncake.reshard`` as PyPI ships it inside the
``mooncake-transfer-engine`` wheel (``REFERENCE_WHEEL``). That release carries the placement
contracts and the logical planner (``plan_placement_transfer``) but not yet runtime binding
(``bind_logical_transfer_plan``, ``TransferPlan``), so what can run side by side is:

* ``contract``: the logical-planning median of ``runtime_binding.py``'s workload (its placements,
  ``--warmup`` / ``--repeats`` as there; wall-clock medians, as the reference figures are);
* ``independent_experts`` (Kimi-K2-class: 384 experts, ``--layers`` of them; the target's
  workload is ``--layers 61``), ``grouped_experts`` (``--layers`` too) and ``orthogonal_tp``:
  building the inputs, assembling both placements and planning (process CPU seconds), the
  workloads and limits of ``scale.py``'s full preset.

The reference's planner checks each operation's target fragment against its participant's
fragments one by one (``_validate_logical_target_coverage``), so its plan stage grows with the
square of the layers: about a minute in all at the default ``--layers 8``, about half an hour
at 61.

Both packages are named ``mooncake.reshard``, so each measurement runs in a child process of its
own, the reference's with only its directory added to ``sys.path``; the child reports which
package it imported and the parent refuses a run whose children did not import the intended
one. Children alternate (reference, ours, reference, ...) ``--processes`` times per workload;
each figure is the fastest of its processes. Both implementations must produce the same logical
plan: every child reports a SHA-256 over the placements' ids and digests and each operation's
fields, and the parent reports a mismatch and exits 1 if they differ.

The Kimi-class target of DESIGN.md section 6 ("assembling both placements, planning and binding
together ... at least 30x below the reference") cannot be measured whole against this release.
Reported instead: the reference's assemble + plan against ours (like for like) and against our
assemble + plan + bind (``scale.py``'s pipeline). As the reference's own binding would only add
to its time, the second ratio is a lower bound of the target's.

    python benchmarks/reference_side_by_side.py --fetch /tmp/reference   # once: download, unpack
    python benchmarks/reference_side_by_side.py --reference /tmp/reference --json side.json
    python benchmarks/reference_side_by_side.py --reference /tmp/reference --layers 61 \
        --workloads independent_experts                                    # half an hour

``--fetch DIR`` runs ``pip download`` of ``REFERENCE_WHEEL`` (no dependencies) and unpacks its
``mooncake/reshard`` package alone into ``DIR`` (with an empty ``mooncake/__init__.py``: the
wheel's own imports the transfer engine's native libraries, which planning does not need).
Progress goes to stderr; the JSON document to ``--json PATH`` (``-`` or omitted: stdout) and a
readable table to stdout (stderr when the JSON is on stdout).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from typing import Any, Dict, List, Optional, Sequence

REFERENCE_WHEEL = "mooncake-transfer-engine==0.3.13.post1"
REFERENCE_PACKAGE = "mooncake/reshard/"
WORKLOADS = ("contract", "independent_experts", "grouped_experts", "orthogonal_tp")
HERE = os.path.dirname(os.path.abspath(__file__))


def _progress(message: str) -> None:
    print(f"[side-by-side {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Fetching the reference.


def fetch(directory: str) -> Dict[str, Any]:
    """Downloads ``REFERENCE_WHEEL`` and unpacks its ``mooncake/reshard`` into ``directory``."""
    with tempfile.TemporaryDirectory() as download:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--dest", download,
                   REFERENCE_WHEEL]
        subprocess.run(command, check=True)
        wheels = [name for name in os.listdir(download) if name.endswith(".whl")]
        if len(wheels) != 1:
            raise RuntimeError(f"pip download of {REFERENCE_WHEEL} gave {wheels!r}, not one wheel")
        wheel = os.path.join(download, wheels[0])
        digest = hashlib.sha256()
        with open(wheel, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        with zipfile.ZipFile(wheel) as archive:
            members = [name for name in archive.namelist() if name.startswith(REFERENCE_PACKAGE)]
            if not any(name == REFERENCE_PACKAGE + "weight/_planner/api.py" for name in members):
                raise RuntimeError(f"{wheels[0]} has no {REFERENCE_PACKAGE}weight/_planner/api.py")
            archive.extractall(directory, members)
    with open(os.path.join(directory, "mooncake", "__init__.py"), "w", encoding="utf-8") as handle:
        handle.write(f'"""Only mooncake.reshard of {wheels[0]} (see benchmarks/reference_side_by_side.py)."""\n')
    return {"wheel": wheels[0], "sha256": digest.hexdigest(), "files": len(members)}


# ---------------------------------------------------------------------------------------------
# Child side: one workload on whichever mooncake.reshard this process imports.


def _implementation() -> Dict[str, Any]:
    """Where the imported ``mooncake.reshard`` lies and whether it has our C core (a file
    ``_native*`` in its directory: an import lookup of the submodule could be answered by an
    editable install's finder whatever package was imported)."""
    import mooncake.reshard.weight as weight

    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(weight.__file__)))
    return {
        "package_dir": package_dir,
        "native": any(name.startswith("_native") for name in os.listdir(package_dir)),
    }


def plan_fingerprint(source: Any, target: Any, plan: Any) -> str:
    """SHA-256 over the placements' ids and digests and every operation's fields, in order
    (fragments by their placement fragment ids)."""
    digest = hashlib.sha256()
    for placement in (source, target):
        digest.update(json.dumps([placement.placement_id, placement.digest]).encode())
    for op in plan.operations:
        row = [
            op.tensor_id, op.source.placement_fragment_id, op.target.placement_fragment_id,
            list(op.overlap_offset), list(op.overlap_shape), op.source_base_offset, op.target_base_offset,
            op.inner_bytes, list(op.outer_loop_counts), list(op.source_strides), list(op.target_strides),
        ]
        digest.update(json.dumps(row).encode())
    return digest.hexdigest()


def _child_contract(warmup: int, repeats: int) -> Dict[str, Any]:
    import runtime_binding

    from mooncake.reshard.weight import plan_placement_transfer

    source, target = runtime_binding.contract_placements()
    for _ in range(warmup):
        plan_placement_transfer(source, target)
    samples: List[int] = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        plan = plan_placement_transfer(source, target)
        samples.append(time.perf_counter_ns() - start)
    return {
        "logical_planning_median_ms": statistics.median(samples) / 1e6,
        "operations": len(plan.operations),
        "fingerprint": plan_fingerprint(source, target, plan),
    }


def _child_scale(workload: str, layers: int) -> Dict[str, Any]:
    import _workloads as w
    import scale

    from mooncake.reshard.weight import PlanningLimits, plan_placement_transfer

    full = scale.PRESETS["full"]
    builders = {
        "independent_experts": lambda: w.independent_experts(layers=layers, experts=full["experts"]),
        "grouped_experts": lambda: w.grouped_experts(layers=layers, experts=full["experts"]),
        "orthogonal_tp": lambda: w.orthogonal_tp(**full["orthogonal"]),
    }
    cpu: Dict[str, float] = {}

    def timed(name: str, function: Any) -> Any:
        start = time.process_time()
        value = function()
        cpu[name] = time.process_time() - start
        _progress(f"{workload}: {name} {cpu[name]:.3f} s cpu")
        return value

    inputs = timed("build_inputs", builders[workload])

    def assemble() -> Any:
        source, target = w.assemble(inputs.source), w.assemble(inputs.target)
        _ = (source.digest, target.digest)
        return source, target

    source, target = timed("assemble", assemble)
    limits = PlanningLimits(**scale.PLANNING_LIMITS)
    plan = timed("plan", lambda: plan_placement_transfer(source, target, planning_limits=limits))
    return {
        "cpu_s": cpu,
        "fragments": len(source.fragments) + len(target.fragments),
        "operations": len(plan.operations),
        "fingerprint": plan_fingerprint(source, target, plan),
    }


def _child(args: argparse.Namespace) -> int:
    sys.path.insert(0, HERE)
    result = {"implementation": _implementation()}
    if args.child == "contract":
        result.update(_child_contract(args.warmup, args.repeats))
    else:
        result.update(_child_scale(args.child, args.layers))
    print(json.dumps(result))
    return 0


# ---------------------------------------------------------------------------------------------
# Parent side.


def _run_child(workload: str, args: argparse.Namespace, reference: Optional[str]) -> Dict[str, Any]:
    env = dict(os.environ)
    if reference is not None:  # the reference's directory alone before the standard paths
        env["PYTHONPATH"] = reference
    command = [sys.executable, os.path.abspath(__file__), "--child", workload, "--layers", str(args.layers),
               "--warmup", str(args.warmup), "--repeats", str(args.repeats)]
    done = subprocess.run(command, env=env, stdout=subprocess.PIPE, check=True, text=True)
    result: Dict[str, Any] = json.loads(done.stdout)
    package = os.path.realpath(result["implementation"]["package_dir"])
    if reference is not None:
        inside = package.startswith(os.path.realpath(reference) + os.sep)
        if not inside or result["implementation"]["native"]:
            raise RuntimeError(f"the reference child imported {package} (native: "
                               f"{result['implementation']['native']}), not the reference in {reference}")
    elif not result["implementation"]["native"]:
        raise RuntimeError(f"our child imported {package}, which has no mooncake.reshard._native")
    return result


def _best(results: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The fastest figure of each kind over a workload's processes."""
    first = results[0]
    best: Dict[str, Any] = {"processes": len(results), "implementation": first["implementation"]}
    if "logical_planning_median_ms" in first:
        best["logical_planning_median_ms"] = min(r["logical_planning_median_ms"] for r in results)
    else:
        best["cpu_s"] = {name: min(r["cpu_s"][name] for r in results) for name in first["cpu_s"]}
        best["cpu_s"]["assemble_plus_plan"] = min(r["cpu_s"]["assemble"] + r["cpu_s"]["plan"] for r in results)
        best["fragments"] = first["fragments"]
    best["operations"] = first["operations"]
    best["fingerprints"] = sorted({r["fingerprint"] for r in results})
    return best


def _our_pipeline(layers: int) -> Dict[str, Any]:
    """Our Kimi-class assemble + plan + bind, as scale.py measures it (one warm child)."""
    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "scale.json")
        command = [sys.executable, os.path.join(HERE, "scale.py"), "--preset", "full", "--families",
                   "independent_experts", "--layers", str(layers), "--json", path]
        subprocess.run(command, stdout=subprocess.DEVNULL, check=True)  # (its table: not ours to print)
        with open(path, encoding="utf-8") as handle:
            result = json.load(handle)["results"]["independent_experts"]
    return {name: result["stages"][name]["cpu_s"] for name in ("assemble", "plan", "bind")}


def _table(document: Dict[str, Any]) -> str:
    lines = ["workload | figure | reference | ours | ratio", "---|---|---:|---:|---:"]
    for workload, entry in document["results"].items():
        if workload == "contract":
            ref, ours = entry["reference"], entry["ours"]
            lines.append(f"contract | logical planning median (ms) | {ref['logical_planning_median_ms']:.3f} | "
                         f"{ours['logical_planning_median_ms']:.3f} | {entry['ratio']:.1f}x")
            continue
        ref, ours = entry["reference"]["cpu_s"], entry["ours"]["cpu_s"]
        for name in ("build_inputs", "assemble", "plan", "assemble_plus_plan"):
            lines.append(f"{workload} | {name} (CPU s) | {ref[name]:.3f} | {ours[name]:.3f} | "
                         f"{entry['ratios'][name]:.1f}x")
        if "pipeline_lower_bound" in entry:
            bound = entry["pipeline_lower_bound"]
            lines.append(f"{workload} | reference assemble + plan against our assemble + plan + bind | "
                         f"{ref['assemble_plus_plan']:.3f} | {bound['ours_cpu_s']:.3f} | "
                         f"at least {bound['ratio']:.1f}x")
    for problem in document["mismatches"]:
        lines.append(f"MISMATCH: {problem}")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fetch", metavar="DIR", help="download and unpack the reference into DIR, then exit")
    parser.add_argument("--reference", metavar="DIR", help="a directory made by --fetch")
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated subset of "
                        + ", ".join(WORKLOADS))
    parser.add_argument("--layers", type=int, default=8,
                        help="model layers of the expert workloads (the Kimi-class target: 61)")
    parser.add_argument("--processes", type=int, default=1, help="processes per implementation and workload")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=31)
    parser.add_argument("--json", default="-", metavar="PATH")
    parser.add_argument("--child", choices=WORKLOADS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.layers < 1 or args.processes < 1 or args.warmup < 0 or args.repeats < 1:
        parser.error("--layers, --processes and --repeats must be >= 1, --warmup >= 0")
    if args.child:
        return _child(args)
    if args.fetch:
        fetched = fetch(args.fetch)
        _progress(f"unpacked {fetched['files']} files of {fetched['wheel']} (sha256 {fetched['sha256']}) "
                  f"into {args.fetch}")
        return 0
    if not args.reference:
        parser.error("--reference DIR is required (make DIR with --fetch DIR first)")
    workloads = [name for name in args.workloads.split(",") if name]
    unknown = sorted(set(workloads) - set(WORKLOADS))
    if unknown:
        parser.error(f"unknown workloads: {', '.join(unknown)}")
    if not os.path.isfile(os.path.join(args.reference, REFERENCE_PACKAGE, "weight", "_planner", "api.py")):
        parser.error(f"{args.reference} holds no reference package (make it with --fetch)")

    document: Dict[str, Any] = {
        "benchmark": "reference_side_by_side",
        "reference": REFERENCE_WHEEL,
        "machine": {"platform": platform.platform(), "processor": platform.processor(),
                    "cpu_count": os.cpu_count(), "python": platform.python_version()},
        "parameters": {"layers": args.layers, "processes": args.processes, "warmup": args.warmup,
                       "repeats": args.repeats},
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "results": {},
        "mismatches": [],
    }
    for workload in workloads:
        runs: Dict[str, List[Dict[str, Any]]] = {"reference": [], "ours": []}
        for index in range(args.processes):
            for side, directory in (("reference", args.reference), ("ours", None)):
                _progress(f"{workload}: {side}, process {index + 1} of {args.processes}")
                runs[side].append(_run_child(workload, args, directory))
        entry: Dict[str, Any] = {side: _best(results) for side, results in runs.items()}
        fingerprints = set(entry["reference"]["fingerprints"]) | set(entry["ours"]["fingerprints"])
        if len(fingerprints) != 1:
            document["mismatches"].append(f"{workload}: the logical plans differ ({sorted(fingerprints)})")
        if workload == "contract":
            entry["ratio"] = (entry["reference"]["logical_planning_median_ms"]
                              / entry["ours"]["logical_planning_median_ms"])
        else:
            ref, ours = entry["reference"]["cpu_s"], entry["ours"]["cpu_s"]
            entry["ratios"] = {name: ref[name] / max(ours[name], 1e-9) for name in ref}
        if workload == "independent_experts":
            _progress("independent_experts: our assemble + plan + bind (scale.py)")
            stages = _our_pipeline(args.layers)
            ours_total = sum(stages.values())
            entry["pipeline_lower_bound"] = {
                "ours_stages_cpu_s": stages,
                "ours_cpu_s": ours_total,
                "ratio": entry["reference"]["cpu_s"]["assemble_plus_plan"] / ours_total,
                "note": "the reference release has no runtime binding: its assemble + plan against our "
                        "assemble + plan + bind, a lower bound of the ratio the target names",
            }
        document["results"][workload] = entry
    text = json.dumps(document, indent=2)
    table = _table(document)
    if args.json == "-":
        print(text)
        print(table, file=sys.stderr)
    else:
        with open(args.json, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
        print(table)
    return 1 if document["mismatches"] else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""What a smaller instance representation would save: bytes per object of the package's
high-count value types in three layouts, and how many of each the Kimi-class pipeline holds.

Layouts (each built in its own child process, all field values shared objects, so only the
per-instance container is measured):

* ``dict``    today's layout: ``object.__new__(cls)``, then the instance's own ``__dict__``
              (``PyObject_GenericGetDict``) filled item by item in field order, as
              ``mr_new_instance`` in ``csrc/common.h`` does (a key-sharing dict);
* ``dict_cold`` the same in a process where no instance was built through ``__init__`` first
              (differs on 3.10 only, where the shared keys are then never filled);
* ``combined`` ``object.__new__(cls)`` + ``__dict__ = {...}`` (``mr_instance_with_dict``), for
              comparison;
* ``slots``   the same fields as ``@dataclass(frozen=True, slots=True)`` (``make_dataclass``),
              filled with ``object.__setattr__``;
* ``slots_weakref`` a frozen dataclass with a hand-written ``__slots__`` (fields + ``__weakref__``);
* ``inline``  (CPython 3.11+) ``object.__new__(cls)`` + ``object.__setattr__`` per field in field
              order on the real class, ``__dict__`` never read: the values stay in the instance's
              values array and no dict object exists;
* ``tuple``   a plain tuple of the same length (a floor for comparison).

Figures per object: ``tracemalloc`` bytes (requested sizes) and the resident-set growth
(``/proc/self/statm``, includes pymalloc rounding), over ``--count`` objects.

``bind-peak`` finds the profile event of bind with the most traced memory, then (same run in a
fresh process) snapshots there and lists the allocation sites alive at that peak that bind frees
before returning.

``census`` walks the objects reachable after each stage of the independent-experts workload at
``--layers`` and counts distinct instances of each type created in that stage.

    python benchmarks/repr_memory.py sizes [--count 200000]
    python benchmarks/repr_memory.py census [--layers 1] [--trace]
    python benchmarks/repr_memory.py bind-peak [--layers 1] [--top 10]
    python benchmarks/repr_memory.py project --sizes S.json --census C.json [--scale 61]
        [--layout slots] [--types TransferRegion,...]   # projected stage RSS, arithmetic shown
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import subprocess
import sys
import tracemalloc
from typing import Any, Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
TYPES = {
    "TransferRegion": "mooncake.reshard.weight._planner.contracts",
    "BoundWeightFragment": "mooncake.reshard.weight._planner.fragments",
    "RuntimeFragmentSnapshot": "mooncake.reshard.weight._planner.bound_contracts",
    "PlacementFragment": "mooncake.reshard.weight.types",
    "RuntimeBindingFragment": "mooncake.reshard.contracts.fragments",
}
LAYOUTS = ("dict", "dict_cold", "combined", "slots", "slots_weakref", "inline", "tuple")


def _real_class(name: str) -> type:
    import importlib

    return getattr(importlib.import_module(TYPES[name]), name)


def _rss() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _slotted_class(type_name: str, names: List[str], weakref: bool) -> type:
    """The fields as ``@dataclass(frozen=True, slots=True)``; with weakref, a frozen dataclass
    with a hand-written ``__slots__`` of the fields plus ``__weakref__`` (3.10 has no
    ``weakref_slot``)."""
    if not weakref:
        return dataclasses.make_dataclass("Slotted" + type_name, [(n, Any) for n in names],
                                          frozen=True, slots=True)
    namespace = {"__slots__": tuple(names) + ("__weakref__",), "__annotations__": dict.fromkeys(names, Any)}
    return dataclasses.dataclass(frozen=True)(type("Slotted" + type_name, (), namespace))


def _builder(type_name: str, layout: str) -> Any:
    cls = _real_class(type_name)
    names = [f.name for f in dataclasses.fields(cls)]
    values = [(i, f"value-{i}") for i in range(len(names))]  # shared, one per field
    new = object.__new__
    setter = object.__setattr__
    if layout in ("dict", "dict_cold", "inline"):
        if layout == "dict":
            # As in a process where the dataclass __init__ (object.__setattr__ per field) has
            # built instances first: on 3.10 only that path adds keys to the class's shared keys;
            # PyDict_SetItem of a key the shared keys lack turns the dict into a combined one.
            for _ in range(10):
                warm = new(cls)
                for name, value in zip(names, values):
                    setter(warm, name, value)
        own_dict = layout != "inline"

        def build() -> Any:
            obj = new(cls)
            if own_dict:  # materialize the instance dict first, fill it (mr_new_instance)
                own = obj.__dict__
                for name, value in zip(names, values):
                    own[name] = value
            else:  # values stay in the instance's values array (3.11+), no dict object
                for name, value in zip(names, values):
                    setter(obj, name, value)
            return obj
    elif layout == "combined":
        def build() -> Any:
            obj = new(cls)
            setter(obj, "__dict__", dict(zip(names, values)))
            return obj
    elif layout in ("slots", "slots_weakref"):
        slotted = _slotted_class(type_name, names, weakref=layout == "slots_weakref")

        def build() -> Any:
            obj = new(slotted)
            for name, value in zip(names, values):
                setter(obj, name, value)
            return obj
    elif layout == "tuple":
        def build() -> Any:
            return tuple(values)
    else:
        raise ValueError(layout)
    return build


def _measure(type_name: str, layout: str, count: int) -> Dict[str, Any]:
    build = _builder(type_name, layout)
    for _ in range(1000):  # warm the class's shared keys / caches outside the measurement
        build()
    gc.collect()
    gc.disable()
    objs: List[Any] = [None] * count
    rss0 = _rss()
    for i in range(count):
        objs[i] = build()
    rss1 = _rss()
    objs = [None] * count
    gc.collect()
    tracemalloc.start()
    t0 = tracemalloc.get_traced_memory()[0]
    for i in range(count):
        objs[i] = build()
    t1 = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    sample = objs[0]
    if layout in ("dict", "dict_cold", "combined"):
        getsizeof = sys.getsizeof(sample) + sys.getsizeof(sample.__dict__)
    else:
        getsizeof = sys.getsizeof(sample)  # (inline: the values array is not counted here)
    return {
        "type": type_name,
        "layout": layout,
        "fields": len(dataclasses.fields(_real_class(type_name))),
        "traced_bytes_per_object": (t1 - t0) / count,
        "rss_bytes_per_object": (rss1 - rss0) / count,
        "getsizeof": getsizeof,
        "has_dict": hasattr(sample, "__dict__") and layout != "inline",
    }


def sizes(count: int) -> List[Dict[str, Any]]:
    rows = []
    for type_name in TYPES:
        for layout in LAYOUTS:
            out = subprocess.run(
                [sys.executable, __file__, "_child", type_name, layout, str(count)],
                check=True, capture_output=True, text=True,
            ).stdout
            rows.append(json.loads(out))
    return rows


def _walk_new(roots: Tuple[Any, ...], seen: set, classes: Dict[type, str],
              nbytes: Dict[str, int]) -> Dict[str, int]:
    """Count distinct new instances of the studied types reachable from roots; add every new
    object's ``sys.getsizeof`` (instance dicts under "instance dicts") to nbytes by type name."""
    counts = {name: 0 for name in TYPES}
    stack = list(roots)
    while stack:
        obj = stack.pop()
        key = id(obj)
        if key in seen:
            continue
        seen.add(key)
        kind = type(obj)
        if kind is not type:
            nbytes[kind.__name__] = nbytes.get(kind.__name__, 0) + sys.getsizeof(obj)
        if kind in (str, int, bool, float, bytes, type(None)):
            continue
        name = classes.get(kind)
        if name is not None:
            counts[name] += 1
        if kind in (tuple, list, frozenset, set):
            stack.extend(obj)
        elif kind is dict:
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            for field in dataclasses.fields(obj):
                stack.append(getattr(obj, field.name, None))
            extra = getattr(obj, "__dict__", None)
            if extra is not None:
                nbytes["instance dicts"] = nbytes.get("instance dicts", 0) + sys.getsizeof(extra)
            if extra:
                stack.extend(v for k, v in extra.items())
    return counts


def census(layers: int, trace_stages: bool = False) -> Dict[str, Any]:
    sys.path.insert(0, HERE)
    import _workloads as w  # noqa: E402
    import scale  # noqa: E402
    from mooncake.reshard.weight import bind_logical_transfer_plan, plan_placement_transfer

    classes = {_real_class(name): name for name in TYPES}
    seen: set = set()
    stages: Dict[str, Dict[str, int]] = {}
    sizes_by_stage: Dict[str, Dict[str, int]] = {}

    def walk(stage: str, roots: Tuple[Any, ...]) -> None:
        nbytes: Dict[str, int] = {}
        stages[stage] = _walk_new(roots, seen, classes, nbytes)
        top = sorted(nbytes.items(), key=lambda item: -item[1])[:10]
        sizes_by_stage[stage] = dict(top, total=sum(nbytes.values()))

    inputs = w.independent_experts(layers=layers, experts=384)
    walk("inputs", (inputs,))
    source, target = w.assemble(inputs.source), w.assemble(inputs.target)
    walk("assemble", (source, target))
    traced: Dict[str, Dict[str, float]] = {}

    def trace(stage: str, function: Any) -> Any:
        # tracemalloc (Python allocators, PyMem_* included): bytes the stage retains and its
        # peak above the start, per operation of the final plan (filled in below)
        if not trace_stages:
            return function()
        tracemalloc.start()
        try:
            out = function()
            current, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        traced[stage] = {"retained_bytes": current, "peak_bytes": peak}
        return out

    logical = trace("plan", lambda: plan_placement_transfer(source, target, planning_limits=scale._limits()))
    walk("plan", (logical,))
    sb = w.bindings(source, prefix="src", window=0)
    tb = w.bindings(target, prefix="dst", window=4096)
    walk("build_bindings", (sb, tb))
    plan = trace("bind", lambda: bind_logical_transfer_plan(logical, tb, source_bindings=sb))
    walk("bind", (plan,))
    return {"layers": layers, "operations": len(plan.operations), "new_instances_per_stage": stages,
            "new_getsizeof_bytes_per_stage": sizes_by_stage, "traced": traced}


STAGES = ("inputs", "assemble", "plan", "build_bindings", "bind")


def _bind_peak_pass(layers: int, target: int, top: int) -> Dict[str, Any]:
    """One pass of ``bind-peak`` (run in its own process). target 0: a profile hook reads the
    traced memory at every call/return event of bind and reports the event with the maximum;
    target > 0: one tracemalloc snapshot at that event, compared with the end of bind (the
    allocation sites alive at the peak that bind frees before returning)."""
    sys.path.insert(0, HERE)
    import _workloads as w  # noqa: E402
    import scale  # noqa: E402
    from mooncake.reshard.weight import bind_logical_transfer_plan, plan_placement_transfer

    inputs = w.independent_experts(layers=layers, experts=384)
    source, target_placement = w.assemble(inputs.source), w.assemble(inputs.target)
    logical = plan_placement_transfer(source, target_placement, planning_limits=scale._limits())
    sb = w.bindings(source, prefix="src", window=0)
    tb = w.bindings(target_placement, prefix="dst", window=4096)
    state: Dict[str, Any] = {"i": 0, "max": 0, "at": None, "snapshot": None}
    stack: List[str] = []

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            stack.append(f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_code.co_name}")
        elif event == "return" and stack:
            stack.pop()
        state["i"] += 1
        if not target:
            current = tracemalloc.get_traced_memory()[0]
            if current > state["max"]:
                name = getattr(arg, "__name__", "") if event.startswith("c_") else ""
                state.update(max=current, at=[state["i"], event, name, stack[-5:]])
        elif state["i"] == target:
            state["snapshot"] = tracemalloc.take_snapshot()
            state["max"] = tracemalloc.get_traced_memory()[0]

    tracemalloc.start(10)
    sys.setprofile(hook)
    plan = bind_logical_transfer_plan(logical, tb, source_bindings=sb)
    sys.setprofile(None)
    current, peak = tracemalloc.get_traced_memory()
    n = len(plan.operations)
    out: Dict[str, Any] = {"operations": n, "retained_bytes_per_op": current / n,
                           "peak_bytes_per_op": peak / n, "event": state["at"] if not target else target,
                           "traced_at_event_bytes_per_op": state["max"] / n}
    if target and state["snapshot"] is not None:
        after = tracemalloc.take_snapshot()
        exclude = [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, __file__)]
        diff = after.filter_traces(exclude).compare_to(state["snapshot"].filter_traces(exclude), "traceback")
        freed = sorted((s for s in diff if s.size_diff < 0), key=lambda s: s.size_diff)
        out["freed_after_event_bytes_per_op"] = sum(-s.size_diff for s in freed) / n
        out["sites"] = [{"bytes_per_op": -s.size_diff / n, "blocks": -s.count_diff,
                         "traceback": s.traceback.format(most_recent_first=True)[:6]} for s in freed[:top]]
    tracemalloc.stop()
    return out


def bind_peak(layers: int, top: int) -> Dict[str, Any]:
    """Where bind's transient peak sits: pass 1 finds the event, pass 2 (a fresh process, the
    same deterministic run) snapshots there."""
    def child(target: int) -> Dict[str, Any]:
        out = subprocess.run([sys.executable, __file__, "_peak", str(layers), str(target), str(top)],
                             check=True, capture_output=True, text=True).stdout
        return json.loads(out)

    first = child(0)
    second = child(first["event"][0])
    return {"layers": layers, "pass1": first, "pass2": second}


def project(sizes_doc: Dict[str, Any], census_doc: Dict[str, Any], scale: float,
            rss_mib: Dict[str, float], layout: str, types: List[str]) -> List[Dict[str, Any]]:
    """Peak RSS after each stage if the listed types used ``layout`` instead of ``dict``: the
    measured RSS minus, cumulatively, (instances created by the stage x scale) x (traced bytes
    of ``dict`` - traced bytes of ``layout``). Assumes every such instance is still alive at the
    stage's peak (true of the benchmark, which keeps inputs, placements and plans)."""
    size = {(r["type"], r["layout"]): r["traced_bytes_per_object"] for r in sizes_doc["rows"]}
    rows = []
    saved_total = 0.0
    for stage in STAGES:
        saved = 0.0
        terms = []
        for type_name, count in census_doc["new_instances_per_stage"][stage].items():
            if not count or type_name not in types:
                continue
            each = size[(type_name, "dict")] - size[(type_name, layout)]
            saved += count * scale * each
            terms.append(f"{type_name} {round(count * scale):,} x {each:.0f} B")
        saved_total += saved
        rows.append({"stage": stage, "rss_mib": rss_mib[stage], "saved_by_stage_mib": saved / 2**20,
                     "saved_cumulative_mib": saved_total / 2**20,
                     "projected_rss_mib": rss_mib[stage] - saved_total / 2**20, "terms": terms})
    return rows


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "_peak":
        print(json.dumps(_bind_peak_pass(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))))
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "_child":
        print(json.dumps(_measure(sys.argv[2], sys.argv[3], int(sys.argv[4]))))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_sizes = sub.add_parser("sizes")
    p_sizes.add_argument("--count", type=int, default=200_000)
    p_census = sub.add_parser("census")
    p_census.add_argument("--layers", type=int, default=1)
    p_census.add_argument("--trace", action="store_true",
                          help="tracemalloc retained and peak bytes of the plan and bind stages")
    p_project = sub.add_parser("project", help="projected stage RSS (arithmetic on the two documents)")
    p_project.add_argument("--sizes", required=True, help="JSON of the sizes command")
    p_project.add_argument("--census", required=True, help="JSON of the census command")
    p_project.add_argument("--scale", type=float, default=61.0, help="multiplier of the census counts")
    p_project.add_argument("--rss", default="inputs=329,assemble=495,plan=791,build_bindings=1043,bind=1722",
                           help="measured peak RSS (MiB) after each stage at the projected size")
    p_project.add_argument("--layout", default="slots")
    p_project.add_argument("--types", default=",".join(TYPES))
    p_peak = sub.add_parser("bind-peak", help="allocation sites alive at bind's traced-memory peak")
    p_peak.add_argument("--layers", type=int, default=1)
    p_peak.add_argument("--top", type=int, default=10)
    args = parser.parse_args()
    if args.command == "bind-peak":
        print(json.dumps(bind_peak(args.layers, args.top), indent=1))
    elif args.command == "project":
        with open(args.sizes) as handle:
            sizes_doc = json.load(handle)
        with open(args.census) as handle:
            census_doc = json.load(handle)
        rss = {k: float(v) for k, v in (item.split("=") for item in args.rss.split(","))}
        rows = project(sizes_doc, census_doc, args.scale, rss, args.layout, args.types.split(","))
        print(json.dumps({"layout": args.layout, "types": args.types.split(","), "scale": args.scale,
                          "rows": rows}, indent=1))
    elif args.command == "sizes":
        rows = sizes(args.count)
        print(json.dumps({"python": sys.version.split()[0], "count": args.count, "rows": rows}, indent=1))
    else:
        print(json.dumps(census(args.layers, args.trace), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

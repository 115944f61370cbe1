"""Compare two builds of the C extension in one process, alternating (for C-only changes).

On this shared 2-core machine two processes of the same build differ by more than most single
changes save (and the machine switches between two speed states for minutes at a time), so
old-against-new figures taken from separate processes need many pairs. This script loads a second
build's ``_native`` (``--base``: the ``_native*.so`` of another worktree) beside the package's own,
and runs one pipeline stage of a workload repeatedly, pointing the package at one build and then
the other, in alternating order, on the same inputs. It reports thread CPU per stage and per
top-level C call, as new/base ratios.

Only the C extension is swapped: the package's Python code is this tree's for both builds, so the
base must accept the calls this tree makes (same functions, same arguments). Use it for changes to
``csrc/`` only; when the Python layer changed too, alternate processes (``scale.py``) instead.
Each stage's result must be the same under both builds (checked: placement ids and digests,
operation counts and plan equality); a base that declines a fast path this tree's calls rely on
would time the fallback instead, which the per-call table shows.

    python benchmarks/native_ab.py --base /tmp/old/mooncake_reshard/_native.abi3.so \\
        --stage bind --sweep 99996 --repeats 7
    python benchmarks/native_ab.py --base ... --stage plan --layers 20   # Kimi-class, 20 layers
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import statistics
import sys
import time
from types import ModuleType
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import _workloads as w

STAGES = ("assemble", "plan", "bind")


def _load_base(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("native_ab_base._native", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load a module from {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Swapper:
    """Points every ``mooncake`` module's reference to the extension (the module itself, or one of
    its functions bound to a global name) at one build or the other."""

    def __init__(self, new: ModuleType, base: ModuleType) -> None:
        self.builds = {"new": new, "base": base}
        self.sites: List[Tuple[ModuleType, str, str]] = []  # (module, global name, attribute or "")
        for name, module in list(sys.modules.items()):
            if not name.startswith("mooncake") or module is new:
                continue
            for key, value in list(vars(module).items()):
                if value is new:
                    self.sites.append((module, key, ""))
                elif getattr(value, "__self__", None) is new and callable(value):
                    attribute = getattr(value, "__name__", "")
                    if not hasattr(base, attribute):
                        raise SystemExit(f"the base build has no {attribute} ({name}.{key})")
                    self.sites.append((module, key, attribute))

    def use(self, which: str, wrap: Optional[Callable[[Any], Any]] = None) -> None:
        """Point every site at build ``which``; with ``wrap``, at ``wrap`` of each of its
        functions (a module site gets a ``_WrappedModule``)."""
        build = self.builds[which]
        wrapped = _WrappedModule(build, wrap) if wrap is not None else build
        for module, key, attribute in self.sites:
            if attribute:
                function = getattr(build, attribute)
                setattr(module, key, wrap(function) if wrap is not None else function)
            else:
                setattr(module, key, wrapped)


class _WrappedModule:
    """A build's module with its functions wrapped (classes and other values as they are)."""

    def __init__(self, module: ModuleType, wrap: Callable[[Any], Any]) -> None:
        self._module = module
        self._wrap = wrap
        self._functions: Dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._module, name)
        if not callable(value) or isinstance(value, type):
            return value
        function = self._functions.get(name)
        if function is None:
            function = self._functions[name] = self._wrap(value)
        return function


class CallTimer:
    """Thread CPU per top-level C call (nested calls count in their caller). ``hook``: through
    ``sys.setprofile``, which also times the C types' methods (``FragmentTable.pack_objects``);
    otherwise (the bind stage) by wrapping the extension's functions where the package reads
    them: a profile hook is foreign code to a bind call, which then revalidates everything
    instead of taking its carried facts (``binding._sealed``), so it would time another path."""

    def __init__(self, hook: bool = True) -> None:
        self.hook = hook
        self.totals: Dict[str, float] = {}
        self._stack: List[Tuple[Any, float]] = []
        self._depth = 0

    def wrap(self, function: Any) -> Any:
        """``function`` timed into ``totals`` when called outside another timed call."""
        name = getattr(function, "__qualname__", None) or getattr(function, "__name__", "?")

        def timed(*args: Any, **kwargs: Any) -> Any:
            if self._depth:
                return function(*args, **kwargs)
            self._depth += 1
            started = time.thread_time()
            try:
                return function(*args, **kwargs)
            finally:
                self._depth -= 1
                self.totals[name] = self.totals.get(name, 0.0) + time.thread_time() - started

        return timed

    def _hook(self, frame: Any, event: str, arg: Any) -> None:
        if event == "c_call":
            self._stack.append((arg, time.thread_time()))
        elif event in ("c_return", "c_exception") and self._stack:
            function, started = self._stack.pop()
            if not self._stack:
                name = getattr(function, "__qualname__", None) or getattr(function, "__name__", "?")
                self.totals[name] = self.totals.get(name, 0.0) + time.thread_time() - started

    def run(self, function: Callable[[], Any]) -> Tuple[Any, float]:
        self.totals = {}
        self._stack = []
        if self.hook:
            sys.setprofile(self._hook)
        started = time.thread_time()
        try:
            result = function()
        finally:
            elapsed = time.thread_time() - started
            if self.hook:
                sys.setprofile(None)
        return result, elapsed


def _stage_runner(stage: str, inputs: Any) -> Tuple[Callable[[], Any], Callable[[Any], Any]]:
    """The stage to time (on inputs built once, with this tree's build) and a summary of its
    result that must not depend on the build."""
    from mooncake.reshard.weight import bind_logical_transfer_plan, plan_placement_transfer
    from scale import _limits

    source, target = w.assemble(inputs.source), w.assemble(inputs.target)
    if stage == "assemble":
        def assemble() -> Any:
            return w.assemble(inputs.source), w.assemble(inputs.target)
        return assemble, lambda r: tuple((p.placement_id, p.digest) for p in r)
    _ = (source.digest, target.digest)
    if stage == "plan":
        return (lambda: plan_placement_transfer(source, target, planning_limits=_limits()),
                lambda plan: (len(plan.operations), plan.operations[0], plan.operations[-1]))
    logical = plan_placement_transfer(source, target, planning_limits=_limits())
    source_bindings = w.bindings(source, prefix="src", window=0)
    target_bindings = w.bindings(target, prefix="dst", window=4096)
    return (lambda: bind_logical_transfer_plan(logical, target_bindings, source_bindings=source_bindings),
            lambda plan: plan)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the other build's _native*.so")
    parser.add_argument("--stage", choices=STAGES, default="bind")
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--sweep", type=int, metavar="FRAGMENTS", help="the sweep workload (default 99996)")
    size.add_argument("--layers", type=int, help="the Kimi-class workload (384 experts) with this many layers")
    parser.add_argument("--repeats", type=int, default=5, help="runs of each build (alternating order)")
    parser.add_argument("--top", type=int, default=12, help="C calls listed")
    args = parser.parse_args(argv)

    from mooncake.reshard import _native as new

    base = _load_base(args.base)
    if getattr(base, "__file__", None) == new.__file__:
        raise SystemExit("--base is this tree's own build")
    if args.layers is not None:
        inputs, label = w.independent_experts(layers=args.layers, experts=384), f"Kimi-class {args.layers} layers"
    else:
        fragments = args.sweep or 99996
        inputs, label = w.sweep(fragments=fragments), f"sweep {fragments}"
    stage, summary = _stage_runner(args.stage, inputs)
    swapper = Swapper(new, base)
    timer = CallTimer(hook=args.stage != "bind")
    if not timer.hook:
        # A large bind call is watched for frames of code other than the package's (see
        # binding._sealed): the timers' own frames are admitted, or every timed call would be
        # decided as an unsealed one.
        from mooncake.reshard.weight._planner import exactness

        timed = next(c for c in CallTimer.wrap.__code__.co_consts if getattr(c, "co_name", None) == "timed")
        exactness._EXTRA_CODES = (CallTimer.wrap.__code__, timed, _WrappedModule.__getattr__.__code__)
    totals: Dict[str, List[float]] = {"base": [], "new": []}
    calls: Dict[str, Dict[str, List[float]]] = {"base": {}, "new": {}}
    summaries: Dict[str, Any] = {}
    try:
        for repeat in range(args.repeats):
            for which in ("base", "new") if repeat % 2 == 0 else ("new", "base"):
                swapper.use(which, None if timer.hook else timer.wrap)
                gc.collect()
                result, elapsed = timer.run(stage)
                totals[which].append(elapsed)
                for name, seconds in timer.totals.items():
                    calls[which].setdefault(name, []).append(seconds)
                summaries.setdefault(which, summary(result))
                del result
    finally:
        swapper.use("new")
    if summaries["base"] != summaries["new"]:
        print("the two builds' results differ: the comparison is void", file=sys.stderr)
        return 1
    base_median, new_median = statistics.median(totals["base"]), statistics.median(totals["new"])
    pairs = sorted(n / b for n, b in zip(totals["new"], totals["base"]))
    print(f"{args.stage} on {label}, {args.repeats} runs of each build (thread CPU, medians):")
    print(f"  stage: base {base_median:.4f} s, new {new_median:.4f} s, new/base {new_median / base_median:.3f}"
          f" (pairs {pairs[0]:.3f}..{pairs[-1]:.3f})")
    names = sorted(calls["base"], key=lambda name: -statistics.median(calls["base"][name]))[: args.top]
    for name in names:
        b = statistics.median(calls["base"][name])
        n = statistics.median(calls["new"].get(name, [0.0]))
        ratio = f"{n / b:.3f}" if b else "-"
        print(f"  {name:44s} base {b * 1e3:9.2f} ms  new {n * 1e3:9.2f} ms  {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

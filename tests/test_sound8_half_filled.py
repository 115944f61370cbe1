"""Lists and tuples a C pass makes with empty slots are never seen half-filled (session 28,
SOUND8).

``PyList_New(n)`` and ``PyTuple_New(n)`` return containers the collector tracks from the start,
with NULL slots. A pass that fills one while code can run (a collection at an allocation, with
its ``gc.callbacks``; an attribute hook; a finalizer or weakref callback at a release) lets that
code reach it through ``gc.get_objects()``: reading a NULL item crashes the process, and a
tuple whose reference count went up makes the pass's own ``PyTuple_SetItem`` fail. SOUND7 fixed
four such containers in the planner; these tests cover the pipeline's other passes
(``plan_regions``, ``attest_many``, ``bound_fragments``, ``bind_regions``, ``attested_view``,
the restore passes) and ``build_regions``' result, which each kept one tracked while filling it.

The pipeline cases run in a child process with the collector forced on inside the passes (a
profile hook re-enables it at every call: the package's pause holds only between hooks) at a low
threshold, and a gc callback that looks for NULL slots in every young tracked list and tuple by
reading the slots' pointers (ctypes, never the items). ``read`` does what a memory profiler's
callback may do, reading every item: a crash on a half-filled container."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from mooncake.reshard import _native

_CHILD = textwrap.dedent(
    """
    import ctypes, dataclasses, gc, pickle, sys, traceback
    from memory_executor import HostMemory, host_bindings, tp_placement
    from mooncake.reshard import _native
    from mooncake.reshard.weight import WeightPlacementManifest, bind_logical_transfer_plan, plan_placement_transfer

    stage, mode = sys.argv[1], sys.argv[2]
    P = ctypes.sizeof(ctypes.c_void_p)
    found = {}

    def slots(obj):
        n = len(obj)
        if n == 0:
            return []
        if type(obj) is tuple:
            return (ctypes.c_void_p * n).from_address(id(obj) + 3 * P)[:]
        items = ctypes.c_void_p.from_address(id(obj) + 3 * P).value
        return [] if items is None else (ctypes.c_void_p * n).from_address(items)[:]

    def in_generator_tuple():
        # CPython's own tuple(generator) fills its tuple while the generator runs (a state
        # gc.get_referrers' documentation warns about): not a pass of the package's
        frame = sys._getframe(2)
        while frame is not None:
            if frame.f_code.co_name == "<genexpr>":
                return True
            frame = frame.f_back
        return False

    def callback(phase, info):
        # only inside a pass of the package's (CPython's own builtins fill such containers too:
        # map's and zip's iterator tuples while they take the iterators)
        if phase != "start" or not (calls and calls[-1]) or in_generator_tuple():
            return
        for obj in gc.get_objects(generation=0) + gc.get_objects(generation=1):
            if type(obj) is tuple or type(obj) is list:
                if mode == "read":
                    for _item in obj:
                        pass
                elif None in slots(obj):
                    where = tuple(f"{f.name}:{f.lineno}" for f in traceback.extract_stack(sys._getframe(1), limit=3))
                    found[(type(obj).__name__,) + where] = 1

    calls = []  # per running call (as the profile hook sees them): is it a pass of _native's

    def hook(frame, event, arg):
        if not gc.isenabled():
            gc.enable()
        if frame.f_code in own:
            return  # the callback's own calls
        if event == "c_call":
            calls.append(getattr(arg, "__self__", None) is _native)
        elif event == "call":
            calls.append(False)
        elif calls and event in ("c_return", "c_exception", "return"):
            calls.pop()

    own = {callback.__code__, in_generator_tuple.__code__, slots.__code__}
    names = tuple(f"w{index:03d}" for index in range(300))
    worlds = []
    for tp_source, tp_target in ((2, 3), (2, 2)):
        source = tp_placement(tp_source, prefix="s", dp=2, shape=(4, 6), tensors=names)
        target = tp_placement(tp_target, prefix="t", shape=(4, 6), tensors=names)
        memory = HostMemory()
        worlds.append((source, target, memory, host_bindings(target, memory, prefix="dst"),
                       host_bindings(source, memory, prefix="src")))
    prepared = []
    for source, target, memory, targets, sources in worlds:
        logical = plan_placement_transfer(source, target)
        plan = bind_logical_transfer_plan(logical, targets, source_bindings=sources)
        prepared.append((source, target, logical, targets, sources, plan, pickle.dumps(plan)))

    # from_fragments' arguments (the helper's own tuple(generator)s made outside the watch)
    captured = []
    from_fragments = WeightPlacementManifest.__dict__["from_fragments"]
    WeightPlacementManifest.from_fragments = classmethod(lambda cls, **kw: captured.append(kw))
    tp_placement(3, prefix="a", dp=2, shape=(4, 6), tensors=names)
    WeightPlacementManifest.from_fragments = from_fragments
    assembled = captured[0]

    gc.set_threshold(100)
    gc.callbacks.append(callback)
    sys.setprofile(hook)
    for source, target, logical, targets, sources, plan, data in prepared:
        if stage == "assemble":
            for threshold in (7, 13, 31, 100):  # (collections at different allocations)
                gc.set_threshold(threshold)
                WeightPlacementManifest.from_fragments(**assembled)
        elif stage == "plan":
            plan_placement_transfer(source, target)
        elif stage == "bind":
            bind_logical_transfer_plan(logical, targets, source_bindings=sources)
        elif stage == "restore":
            pickle.loads(data)
        elif stage == "logical":
            pickle.loads(pickle.dumps(logical))
        else:
            dataclasses.replace(plan)
    sys.setprofile(None)
    gc.callbacks.remove(callback)
    for key in sorted(found):
        print("half-filled", key)
    print("finished")
    """
)


def _child(*argv: str) -> subprocess.CompletedProcess[str]:
    tests = Path(__file__).resolve().parent
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tests), *sys.path) if p)
    return subprocess.run([sys.executable, "-c", _CHILD, *argv], cwd=tests.parent, env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.parametrize("stage", ["assemble", "plan", "bind", "restore", "logical", "replace"])
def test_no_pass_leaves_a_half_filled_container_to_a_gc_callback(stage: str) -> None:
    child = _child(stage, "detect")
    assert child.returncode == 0, (child.returncode, child.stderr[-2000:])
    assert child.stdout.endswith("finished\n"), child.stdout[-2000:]
    assert "half-filled" not in child.stdout, child.stdout


@pytest.mark.parametrize("stage", ["assemble", "plan", "bind", "restore", "logical", "replace"])
def test_a_gc_callback_reading_every_item_does_not_crash(stage: str) -> None:
    child = _child(stage, "read")
    assert child.returncode == 0, (child.returncode, child.stderr[-2000:])
    assert child.stdout.endswith("finished\n"), child.stdout[-2000:]


_BUILD_REGIONS_CHILD = textwrap.dedent(
    """
    import gc
    from test_planner_objects import _plan, _records
    from mooncake.reshard import _native
    from mooncake.reshard.weight._planner.contracts import TransferRegion

    class Target:
        # a target whose tensor_id is a property: build_regions reads it while filling its result
        reads = 0
        def __init__(self, target):
            self.target = target
        @property
        def tensor_id(self):
            Target.reads += 1
            if Target.reads == 2:
                for obj in gc.get_objects():
                    if type(obj) is tuple:
                        for _item in obj:
                            pass
            return self.target.tensor_id

    records, sources, targets = _records(_plan())
    built = _native.build_regions(TransferRegion, records, sources, [Target(t) for t in targets])
    plain = _native.build_regions(TransferRegion, records, sources, targets)
    assert Target.reads == len(records) > 1
    assert [(r.tensor_id, r.source, r.target.target) for r in built] == [(r.tensor_id, r.source, r.target) for r in plain]
    print("finished")
    """
)


def test_build_regions_result_is_not_seen_half_filled() -> None:
    tests = Path(__file__).resolve().parent
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tests), *sys.path) if p)
    child = subprocess.run([sys.executable, "-c", _BUILD_REGIONS_CHILD], cwd=tests.parent, env=env,
                           capture_output=True, text=True, timeout=300)
    assert child.returncode == 0, (child.returncode, child.stderr[-2000:])
    assert child.stdout.endswith("finished\n"), child.stdout


class _Described:
    """A catalog descriptor whose tensor_id read can run code (once armed)."""

    armed: list[Any] = []

    def __init__(self, tid: str) -> None:
        self.tid = tid

    @property
    def tensor_id(self) -> str:
        if _Described.armed:
            _Described.armed.pop()()
        return self.tid


def _empty_key_lists(ids: list[str]) -> None:
    """Empty every list holding exactly these key objects (catalog_matches' private copy)."""
    for obj in gc.get_objects():
        if type(obj) is list and obj is not ids and len(obj) == len(ids) and all(a is b for a, b in zip(obj, ids)):
            obj.clear()


def test_catalog_matches_never_returns_with_an_exception_set() -> None:
    """catalog_matches copies the dict's keys into a private list before it reads the ids (which
    can run code). Code that emptied that list made it return False with an IndexError set (a
    SystemError from the interpreter). The copy is out of the collector's reach now; the result
    is the undisturbed one."""
    ids = [f"sound8-catalog-{k}" for k in range(4)]
    catalog = tuple(_Described(tid) for tid in ids)
    tensors = dict(zip(ids, catalog))
    assert _native.catalog_matches(tensors, catalog) is True
    _Described.armed[:] = [lambda: _empty_key_lists(ids)]
    try:
        got = _native.catalog_matches(tensors, catalog)
    finally:
        _Described.armed.clear()
    assert got is True

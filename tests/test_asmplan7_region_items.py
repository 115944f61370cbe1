"""plan_regions indexes C arrays of its sources', targets' and tensor ids' items (session 27).

The pass reads the three sequences at random positions (regions come in target order), so it
copies their item pointers into C arrays it can prefetch from. Those are borrowed references:
they stay valid only if no Python code can change the sequences they were read from while the
pass runs. An exact tuple cannot change; a list is copied first (a private copy), and the copy is
untracked, so Python code that runs inside the pass (an attribute read of a target's tensor id
when the caller gives none, a gc callback or finalizer of a collection that a region's allocation
starts) cannot find it through the collector and clear it.

These tests are that forgery: hooks that run inside the pass look for the private copies with
gc.get_objects() and clear every one they find. The pass must give the same regions as without
the hooks (on a build whose copies are reachable the hook clears them and the pass raises
IndexError)."""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from mooncake.reshard import _native
from mooncake.reshard.weight import plan_placement_transfer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import _workloads as w  # noqa: E402

FIELDS = (
    "tensor_id", "source", "target", "overlap_offset", "overlap_shape", "source_base_offset",
    "target_base_offset", "inner_bytes", "outer_loop_counts", "source_strides", "target_strides",
)


def _captured_call(fragments: int) -> tuple[Any, list[Any], list[Any], list[Any], tuple[Any, ...]]:
    """The planner's plan_regions arguments for the sweep workload."""
    seen: list[Any] = []
    original = _native.plan_regions

    def wrapper(cls: Any, sources: Any, targets: Any, tids: Any, *rest: Any) -> Any:
        seen.append((cls, list(sources), list(targets), tids, rest))
        return original(cls, sources, targets, tids, *rest)

    mp = pytest.MonkeyPatch()
    mp.setattr(_native, "plan_regions", wrapper)
    try:
        inputs = w.sweep(fragments=fragments)
        plan_placement_transfer(w.assemble(inputs.source), w.assemble(inputs.target))
    finally:
        mp.undo()
    assert len(seen) == 1
    cls, sources, targets, tids, rest = seen[0]
    assert tids is not None
    return cls, sources, targets, list(tids), rest


def _clear_copies(originals: list[list[Any]], found: list[int]) -> None:
    """Clears every list (not one of originals) holding the same items as one of originals."""
    keep = {id(o) for o in originals}
    for obj in gc.get_objects():
        if type(obj) is not list or id(obj) in keep:
            continue
        for original in originals:
            if len(obj) == len(original) > 0 and obj[0] is original[0] and obj[-1] is original[-1]:
                found.append(len(obj))
                obj.clear()
                break


def _fields(regions: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    return [tuple(getattr(region, name) for name in FIELDS) for region in regions]


def _same(expected: tuple[Any, ...], got: tuple[Any, ...], target_of: Callable[[Any], Any]) -> None:
    assert len(got) == len(expected)
    for e, g in zip(_fields(expected), _fields(got)):
        assert g[0] == e[0]
        assert g[1] is e[1]
        assert target_of(g[2]) is e[2]
        assert g[3:] == e[3:]


class _HookedTarget:
    """A target whose tensor_id read (plan_regions reads it when the caller gives no tensor ids)
    runs the hook on the first read."""

    hook: Callable[[], None] = staticmethod(lambda: None)
    armed = False

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    @property
    def tensor_id(self) -> Any:
        if _HookedTarget.armed:
            _HookedTarget.armed = False
            _HookedTarget.hook()
        return self.inner.tensor_id


def test_attribute_read_cannot_reach_the_item_copies() -> None:
    cls, sources, targets, tids, rest = _captured_call(3000)
    expected, used_s, used_t = _native.plan_regions(cls, sources, targets, tids, *rest)
    assert len(expected) >= 1024
    hooked = [_HookedTarget(t) for t in targets]
    found: list[int] = []
    _HookedTarget.hook = staticmethod(lambda: _clear_copies([sources, hooked], found))
    _HookedTarget.armed = True
    try:
        got, got_s, got_t = _native.plan_regions(cls, sources, hooked, None, *rest)
    finally:
        _HookedTarget.armed = False
    assert not _HookedTarget.armed  # the hook ran, inside the pass
    assert found == []  # no private copy was reachable
    _same(expected, got, lambda target: target.inner)
    assert list(got_s) == list(used_s) and list(got_t) == list(used_t)


def test_gc_callback_cannot_reach_the_item_copies() -> None:
    cls, sources, targets, tids, rest = _captured_call(3000)
    expected, used_s, used_t = _native.plan_regions(cls, sources, targets, tids, *rest)
    found: list[int] = []
    calls: list[str] = []
    inside = [False]

    def callback(phase: str, info: dict[str, Any]) -> None:
        if inside[0] and phase == "start":
            calls.append(phase)
            _clear_copies([sources, targets, tids], found)

    threshold = gc.get_threshold()
    gc.callbacks.append(callback)
    gc.set_threshold(200)  # collections start inside the pass's region allocations
    try:
        inside[0] = True
        got, got_s, got_t = _native.plan_regions(cls, sources, targets, tids, *rest)
    finally:
        inside[0] = False
        gc.set_threshold(*threshold)
        gc.callbacks.remove(callback)
    assert len(calls) >= 3  # the callback ran inside the pass, also while it built regions
    assert found == []
    _same(expected, got, lambda target: target)
    assert list(got_s) == list(used_s) and list(got_t) == list(used_t)


def test_tuples_are_indexed_as_given() -> None:
    cls, sources, targets, tids, rest = _captured_call(3000)
    expected, _, _ = _native.plan_regions(cls, sources, targets, tids, *rest)
    got, _, _ = _native.plan_regions(cls, tuple(sources), tuple(targets), tids, *rest)
    _same(expected, got, lambda target: target)
    # the caller's lists stay tracked and whole: only the private copies are untracked
    assert gc.is_tracked(sources) and gc.is_tracked(targets)
    assert len(sources) and len(targets) and len(tids)

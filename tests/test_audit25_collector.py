"""gc callbacks inside the fast revalidation's later passes (AUDIT5, session 25).

``_fast_revalidate`` pauses the collector (``collector_paused()``) for the whole fast revalidation
because the C passes hold borrowed references across allocations (AUDIT4,
tests/test_audit24_gc_walk.py); only ``revalidate_shapes`` also disables it itself for its walk.
Python code that runs between the passes (a profile or trace hook; foreign code inside an
earlier pass, tests/test_audit25_value_channels.py) can call ``gc.enable()``: the pause is a
process-wide flag, not a property of the passes. ``revalidate_side``, ``revalidate_spaces`` and
``revalidate_coverage`` then allocate with the collector on, and every automatic collection runs
``gc.callbacks`` (user code) inside them.

Closed (lead, session 25): every revalidation pass disables the collector for its own duration
(``MR_COLLECTOR_PAUSED``, csrc/common.h: the revalidation passes and the region checks after them,
as ``revalidate_shapes`` does); a regression test now.
"""

from __future__ import annotations

import dataclasses
import gc
import sys
from typing import Any

import pytest

from forge_helpers import outcome, sized_world

from mooncake.reshard import _native
from mooncake.reshard.weight import TransferPlan, bind_logical_transfer_plan

_NATIVE = _native.__name__


def test_no_gc_callback_runs_inside_a_pass() -> None:
    logical, targets, sources, _memory = sized_world(8)
    plan = bind_logical_transfer_plan(logical, targets, source_bindings=sources)
    running: list[list[Any]] = []  # [function, collections seen while it ran]
    inside: list[str] = []

    def callback(phase: str, info: Any) -> None:
        if phase == "start" and running:
            running[-1][1] += 1

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event == "c_call" and getattr(arg, "__module__", None) == _NATIVE:
            running.append([arg, 0])
        elif event in ("c_return", "c_exception") and running and running[-1][0] is arg:
            _function, collections = running.pop()
            # One collection may come from the call's own argument tuple, built after the c_call
            # event and before the function's body (METH_VARARGS); a body running with the
            # collector on, at threshold 1, collects at nearly every allocation it makes.
            if collections > 1:
                inside.append(arg.__name__)
            if arg is _native.revalidate_shapes:
                gc.enable()  # (between two passes)
                gc.set_threshold(1)

    threshold = gc.get_threshold()
    was_enabled = gc.isenabled()
    gc.callbacks.append(callback)
    sys.setprofile(hook)
    try:
        result = outcome(lambda: dataclasses.replace(plan))
    finally:
        sys.setprofile(None)
        gc.callbacks.remove(callback)
        gc.set_threshold(*threshold)
        if not was_enabled:
            gc.disable()
    assert isinstance(result, TransferPlan)
    assert inside == []

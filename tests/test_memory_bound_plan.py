"""A bound plan's objects built in C (binder.c, revalidate.c restore) fill each instance's own
key-sharing dict (csrc/common.h ``mr_new_instance``): the traced bytes a bound plan keeps per
operation stay well below what instances with private dicts installed as ``__dict__`` cost
(about 850 bytes an operation in this layout on CPython 3.11, against about 510)."""

from __future__ import annotations

import gc
import pickle
import tracemalloc

from memory_executor import HostWorld, tp_placement


def test_bound_plan_fits_a_per_operation_bound() -> None:
    source = tp_placement(32, prefix="s", shape=(64, 64), dim=0)
    world = HostWorld(source, tp_placement(32, prefix="t", shape=(64, 64), dim=1))
    world.bind()  # warmed up (and the logical plan planned)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        plan = world.bind()
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
        restored = pickle.loads(pickle.dumps(plan, protocol=pickle.HIGHEST_PROTOCOL))
        gc.collect()
        kept_restored = tracemalloc.get_traced_memory()[0] - before - kept
    finally:
        tracemalloc.stop()
    assert len(plan.operations) == 1024 and restored == plan
    assert kept / len(plan.operations) < 680, kept / len(plan.operations)
    assert kept_restored / len(plan.operations) < 680, kept_restored / len(plan.operations)

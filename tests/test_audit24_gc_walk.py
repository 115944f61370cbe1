"""AUDIT4 (session 24): ``_native.revalidate_shapes`` (csrc/revalidate.c, 957b68d) claims that
no Python code runs during its walk, but in an unsealed revalidation (``dataclasses.replace``:
the collector is not paused) CPython 3.11 runs a cyclic collection inline at an allocation, and
with it ``gc.callbacks`` and finalizers. ``sh_evidence`` passes the evidence's ``fragments``
(borrowed from the evidence's instance dict) to ``sh_items_hinted``, whose ``PySequence_Tuple``
allocates the copy of a list (>= 20 items: no free list) and may collect; a callback that
replaces the evidence's ``fragments`` there frees the list being copied: a use after free
(SIGSEGV in ``_PyTuple_FromArray``, also without ASan).

The walk runs in a child process (a crash must not take the suite down); the test asks for a
clean exit with an outcome (a plan or the rules' ``ValueError``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

_CHILD = textwrap.dedent(
    """
    import dataclasses, gc, sys
    from forge_helpers import sized_world
    from mooncake.reshard.weight import bind_logical_transfer_plan
    from mooncake.reshard.weight._planner import bound_contracts

    logical, targets, sources, _memory = sized_world(130)
    plan = bind_logical_transfer_plan(logical, targets, source_bindings=sources)
    executors = plan.source_executors + plan.target_executors
    evidences = {id(e.attestation.evidence): e.attestation.evidence for e in executors}
    for evidence in evidences.values():  # (a list: the rules accept one)
        object.__setattr__(evidence, "fragments", list(evidence.fragments))
    fired = []

    def inside_walk(frame):
        # the C walk's caller: the fast path, at a call of revalidate_shapes
        if frame.f_code.co_name != "_fast_revalidate_live":
            return False
        line = bound_contracts.__loader__.get_source(bound_contracts.__name__).splitlines()[frame.f_lineno - 1]
        return "revalidate_shapes" in line

    def callback(phase, info):
        if phase == "start" and not fired and inside_walk(sys._getframe(1)):
            fired.append(True)
            for evidence in evidences.values():
                object.__setattr__(evidence, "fragments", ())

    gc.callbacks.append(callback)
    gc.set_threshold(1)
    try:
        result = dataclasses.replace(plan)
        print("outcome", type(result).__name__)
    except ValueError as exc:
        print("outcome", "ValueError", exc)
    finally:
        gc.set_threshold(700, 10, 10)
        gc.callbacks.remove(callback)
    print("fired", bool(fired))
    """
)


def test_a_collection_inside_the_shape_walk_does_not_crash():
    tests = Path(__file__).resolve().parent
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tests), env.get("PYTHONPATH", "")) if p)
    child = subprocess.run(
        [sys.executable, "-c", _CHILD], cwd=tests.parent, env=env, capture_output=True, text=True, timeout=300
    )
    assert child.returncode == 0, (child.returncode, child.stdout[-2000:], child.stderr[-2000:])
    assert "outcome TransferPlan" in child.stdout, child.stdout[-2000:]
    assert "outcome TransferPlan" in child.stdout or "outcome ValueError" in child.stdout, child.stdout


def test_the_shape_walk_restores_the_collector_state_it_found():
    """revalidate_shapes pauses the collector for its walk and leaves it as it found it."""
    import gc

    from forge_helpers import sized_world
    from mooncake.reshard import _native
    from mooncake.reshard.weight import bind_logical_transfer_plan
    from mooncake.reshard.weight._planner import bound_contracts

    logical, targets, sources, _memory = sized_world(4)
    plan = bind_logical_transfer_plan(logical, targets, source_bindings=sources)
    args = (plan.target_placement, {}, plan.source_executors, plan.target_executors, bound_contracts._SHAPE_CLASSES)
    was = gc.isenabled()
    try:
        for enabled in (True, False):
            (gc.enable if enabled else gc.disable)()
            assert _native.revalidate_shapes(*args) is True
            assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()

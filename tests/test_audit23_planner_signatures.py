"""Audit (session 23), reviewing 155dde4 (``_native.owner_signatures``, csrc/planobj.c): the pass
iterates a private copy of the tensors dict with ``PyDict_Next`` and keeps the borrowed ``key``
(and ``tensor``) across Python code (the ``parallel_axes`` / ``kind`` reads, ``isinstance``). The
copy is a GC-tracked dict (it holds the descriptors), so that code can reach it through
``gc.get_objects()`` and clear it: the key is freed while the pass still uses it (inserted into the
result map, or, on 155dde4's switch from the shared run, ``Py_INCREF``-ed then released). The map
then holds a freed key; with the debug allocator (or ASan) the process crashes. Present on the
session's base 93f7d49 too (the insert-by-insert path); 155dde4's shared run holds no borrowed
key, but its switch from the shared run ``Py_INCREF``s a key that may be freed already (two
tensors, the second clearing: only ASan sees that one).

Suggested fix: take strong references to ``key`` and ``tensor`` right after ``PyDict_Next``
(released at the end of the iteration), or untrack the private copy (``PyObject_GC_UnTrack``,
stable ABI) so no Python code can reach it. The Python form (``ownership._tensor_signatures``)
raises ``RuntimeError: dictionary changed size during iteration`` on the same input.

Run in a child process (PYTHONMALLOC=debug: freed memory is overwritten, so the freed key is
observed deterministically)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

_SCRIPT = r"""
import gc, sys
from mooncake.reshard import _native
from mooncake.reshard.weight._planner import ownership
from mooncake.reshard.weight.types import OwnershipAxis, ReplicatedAxis

count, trigger, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
state = {"done": False}

class Tensor:
    def __init__(self, axes, fire):
        self._axes, self._fire = axes, fire

    @property
    def parallel_axes(self):
        if self._fire and not state["done"]:
            state["done"] = True
            # the pass's private copy (same keys, not the caller's dict), then the caller's
            for obj in gc.get_objects():
                if type(obj) is dict and obj is not tensors and obj.keys() == tensors.keys():
                    obj.clear()
            tensors.clear()
            gc.collect()
        return self._axes

def build():
    global tensors
    state["done"] = False
    tensors = {}
    for i in range(count):
        key = "".join(["tensor-", str(i), "-" * 40])  # built: only the dicts hold it
        axes = (OwnershipAxis("tp"),) if i == 0 else (OwnershipAxis("ep"), ReplicatedAxis("dp"))
        tensors[key] = Tensor(axes, i == trigger)

def run(function):
    build()
    try:
        result = function(tensors, OwnershipAxis) if function is _native.owner_signatures else function(tensors)
    except Exception as exc:
        return ["raised", type(exc).__name__]
    if result is None:
        return ["declined"]
    return ["map", sorted(key[:7] for key in result), all(type(key) is str and key.startswith("tensor-") for key in result)]

python = run(ownership._tensor_signatures)
print(repr((run(_native.owner_signatures) if mode == "both" else None, python, state["done"])))
"""


def _child(count: int, trigger: int, mode: str = "both") -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONMALLOC="debug")
    return subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(count), str(trigger), mode],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=os.path.dirname(os.path.abspath(__file__)),
    )


def test_the_python_form_raises_on_the_cleared_dict():
    """The premise (the child runs, the hook fires): the Python form refuses the input."""
    done = _child(3, 2, "python")
    assert done.returncode == 0, done.stderr[-500:]
    _native_outcome, python, fired = eval(done.stdout.strip().splitlines()[-1])  # noqa: S307 (our own repr)
    assert fired and python == ["raised", "RuntimeError"]


def test_a_cleared_private_copy_is_not_a_use_after_free():
    """(A strict xfail until session 23: owner_signatures kept PyDict_Next's borrowed key across
    Python code that could reach the GC-tracked private copy and clear it; the copy is now
    untracked.) Three tensors (the first alone in its signature, so the map is built insert by insert),
    the third clearing both dicts while the pass holds its borrowed key."""
    done = _child(3, 2)
    assert done.returncode == 0, f"child died: {done.returncode} {done.stderr[-500:]}"
    native, python, fired = eval(done.stdout.strip().splitlines()[-1])  # noqa: S307 (our own repr)
    assert fired and python == ["raised", "RuntimeError"]
    # the native pass may raise, decline or return a map, but only of live, valid keys
    assert native[0] in ("raised", "declined") or native[2], native

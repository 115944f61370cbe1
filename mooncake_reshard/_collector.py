"""Pausing Python's cyclic garbage collector around bulk object creation, thread-safely.

Assembling, planning and binding large placements create many acyclic objects and keep them;
automatic collections triggered by those allocations would rescan the whole heap again and
again. ``collector_paused()`` disables the collector for the duration and restores the state
it found. The state is shared by the whole process, so concurrent and nested users are
counted: the first to enter records the state and disables, the last to leave restores it
(a naive save/restore per call could leave the collector disabled when two threads interleave).

The counting lives in C (``_native.collector_pause``, ``csrc/collector.c``): every revalidation,
bind and restore enters it, and a Python class with a lock cost ~8k instructions per use.
"""

from __future__ import annotations

from . import _native

__all__ = ["collector_paused"]

_PAUSE = _native.collector_pause


def collector_paused() -> _native.CollectorPause:
    """Disable the cyclic collector while the ``with`` block runs; restore it when the last
    user leaves."""
    return _PAUSE

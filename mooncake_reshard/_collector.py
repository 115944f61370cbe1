"""Pausing Python's cyclic garbage collector around bulk object creation, thread-safely.

Assembling, planning and binding large placements create many acyclic objects and keep them;
automatic collections triggered by those allocations would rescan the whole heap again and
again. ``collector_paused()`` disables the collector for the duration and restores the state
it found. The state is shared by the whole process, so concurrent and nested users are
counted: the first to enter records the state and disables, the last to leave restores it
(a naive save/restore per call could leave the collector disabled when two threads interleave).

A plain class rather than ``contextlib.contextmanager``: the planner enters it on every call,
and a generator-based manager costs several times more per use.
"""

from __future__ import annotations

import gc
import threading
from types import TracebackType
from typing import Optional

__all__ = ["collector_paused"]

_lock = threading.Lock()
_depth = 0
_restore = False


class _CollectorPause:
    __slots__ = ()

    def __enter__(self) -> None:
        global _depth, _restore
        with _lock:
            if _depth == 0:
                _restore = gc.isenabled()
                gc.disable()
            _depth += 1

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        global _depth
        with _lock:
            _depth -= 1
            if _depth == 0 and _restore:
                gc.enable()


_PAUSE = _CollectorPause()


def collector_paused() -> _CollectorPause:
    """Disable the cyclic collector while the ``with`` block runs; restore it when the last
    user leaves."""
    return _PAUSE

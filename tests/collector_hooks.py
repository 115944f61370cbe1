"""Running a call with the cyclic collector armed to start inside it (tests that check what a C
pass does when a collection, and the user callbacks in ``gc.callbacks``, run mid-pass)."""

from __future__ import annotations

import contextlib
import gc
import sys
from typing import Any, Callable, Iterator, Optional


@contextlib.contextmanager
def collector_armed(
    threshold: int,
    callback: Callable[[str, Any], None],
    profile: Optional[Callable[[Any, str, Any], Any]] = None,
) -> Iterator[None]:
    """Inside the block: generation 0 collects after ``threshold`` allocations, ``callback`` is
    a ``gc.callbacks`` entry and ``profile`` (if given) the profile hook (to tell whether a
    collection started inside a given C call). The collector starts from empty generations and
    with the dicts' free list emptied, so the first dict a C pass creates is a fresh allocation
    (one that may collect). Everything is restored afterwards, the enabled state included."""
    saved = gc.get_threshold()
    was_enabled = gc.isenabled()
    gc.disable()
    gc.collect()
    hold = [dict() for _ in range(200)]  # holds dicts the free list would otherwise hand out
    gc.collect()
    gc.callbacks.append(callback)
    if profile is not None:
        sys.setprofile(profile)
    gc.set_threshold(threshold)
    gc.enable()
    try:
        yield
    finally:
        if profile is not None:
            sys.setprofile(None)
        gc.set_threshold(*saved)
        gc.callbacks.remove(callback)
        if not was_enabled:
            gc.disable()
        del hold

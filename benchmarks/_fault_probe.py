"""What a first touch of fresh memory costs on this machine, right now.

The machines here are virtual, and their first touch of a page is expensive and variable: the
host backs guest memory lazily, so a page the guest has never used costs a host fault as well
(seen here on one fresh machine, touching 4 GiB at a time with a C loop: 3 s per GiB the first
time, 1.3 s the second, then 0.45 s; with transparent huge pages 0.09 s). Every stage that
allocates fresh memory pays it as system time, so the same build's figures move with the
machine's history (the "fast" and "slow" states of docs/performance.md). The scale benchmark
records this probe beside its figures so that runs can be compared knowingly.
"""

from __future__ import annotations

import mmap
import resource
import time
from typing import Any, Dict

PAGE = mmap.PAGESIZE


def _touch(size: int, huge: bool) -> Dict[str, Any]:
    region = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        advised = False
        if huge and hasattr(region, "madvise") and hasattr(mmap, "MADV_HUGEPAGE"):
            region.madvise(mmap.MADV_HUGEPAGE)
            advised = True
        before = resource.getrusage(resource.RUSAGE_SELF)
        start = time.perf_counter()
        view = memoryview(region)
        for offset in range(0, size, PAGE):
            view[offset] = 1
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_SELF)
        view.release()
    finally:
        region.close()
    faults = after.ru_minflt - before.ru_minflt
    system = after.ru_stime - before.ru_stime
    return {
        "huge_pages_advised": advised,
        "wall_s_per_gib": wall * (1 << 30) / size,
        "system_s_per_gib": system * (1 << 30) / size,
        "minor_faults": faults,
    }


def fault_probe(size: int = 256 << 20) -> Dict[str, Any]:
    """Touches ``size`` bytes of fresh anonymous memory page by page, then again with
    ``MADV_HUGEPAGE`` advised; the cost per GiB of each (wall and system time) and the faults."""
    return {"bytes": size, "page_size": PAGE, "small_pages": _touch(size, False), "huge_pages": _touch(size, True)}


if __name__ == "__main__":
    import json

    print(json.dumps(fault_probe(), indent=2))

"""What visiting a Python object costs on this machine, in creation order and in random order.

The package visits fragments in fragment-id order, and fragment ids are canonical hashes, so
most passes reach objects in an order unrelated to where they lie in memory. Such a visit costs
much more when the objects no longer fit in the processor's caches (and its TLB reach) than
when they do: a property of the machine, not of the code, which sets a floor under the sweep's
growth per decade for every pass whose visits are scattered. The scale benchmark records this
probe at its sweep's sizes beside the growth factors (``machine.visit_probe``).

Each object is a small slotted instance holding an int, a 2-tuple and a short str (about 250
bytes with them, the order of a placement fragment with its fields); a pass reads one attribute
of each, once over the objects in creation order and once over the same objects shuffled. The
best of ``repeats`` passes is reported, in nanoseconds per visit (the interpreter's own loop
cost included: the same in both orders).
"""

from __future__ import annotations

import gc
import random
import time
from typing import Any, Dict, List, Sequence


class _Visited:
    __slots__ = ("value", "pair", "name")

    def __init__(self, index: int) -> None:
        self.value = index
        self.pair = (index, index + 1)
        self.name = f"v{index}"


def _best_pass_ns(objects: List[_Visited], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        total = 0
        for item in objects:
            total += item.value
        best = min(best, time.perf_counter() - started)
    return best * 1e9 / len(objects)


def visit_probe(sizes: Sequence[int], repeats: int = 5, seed: int = 1) -> Dict[str, Any]:
    """Nanoseconds per object visit at each size (``sequential``: creation order; ``random``:
    the same objects shuffled), and per consecutive pair of sizes how much dearer a random
    visit became (``random_visit_factor``)."""
    points: List[Dict[str, Any]] = []
    collecting = gc.isenabled()
    gc.disable()  # (the passes allocate nothing; building 10^6 objects would trigger collections)
    try:
        for size in sizes:
            objects = [_Visited(index) for index in range(max(1, size))]
            shuffled = list(objects)
            random.Random(seed).shuffle(shuffled)
            sequential = _best_pass_ns(objects, repeats)
            scattered = _best_pass_ns(shuffled, repeats)
            del objects, shuffled
            points.append({"objects": max(1, size), "sequential_ns": sequential, "random_ns": scattered,
                           "random_over_sequential": scattered / sequential if sequential > 0 else None})
    finally:
        if collecting:
            gc.enable()
    growth = [
        {"from_objects": small["objects"], "to_objects": large["objects"],
         "random_visit_factor": large["random_ns"] / small["random_ns"] if small["random_ns"] > 0 else None,
         "sequential_visit_factor": large["sequential_ns"] / small["sequential_ns"] if small["sequential_ns"] > 0 else None}
        for small, large in zip(points, points[1:])
    ]
    return {"repeats": repeats, "points": points, "growth": growth}


if __name__ == "__main__":
    import json
    import sys

    chosen = [int(arg) for arg in sys.argv[1:]] or [100_000, 1_000_000]
    print(json.dumps(visit_probe(chosen), indent=2))

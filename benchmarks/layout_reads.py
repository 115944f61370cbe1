"""C-owned value layouts: bytes per instance and C field-read cost (issue 5, layout step 1).

Compares the dict-backed snapshot class (``tests/layout_classes.py`` ``SnapshotD``, shaped like
``RuntimeFragmentSnapshot``: 16 fields) with the same class on a C layout (``SnapshotL``,
``mooncake_reshard/_layout.py``):

* ``bytes``: tracemalloc bytes per instance, field values shared, so only the container is
  measured: dict-backed built as the package builds snapshots today (own ``__dict__`` filled in
  field order: ``dict_own_dict``) and by the constructor (``dict``: on 3.11 the values stay
  inline), the layout by the constructor and in C (``mr_layout_new``);
* ``reads``: ns per object for C reading the first 10 fields of every object of a list
  (``_native.layout_read_bench``; dict-backed objects built as ``dict_own_dict``): direct loads through ``mr_layout_fields_set`` (mode 0; 1 with
  the object 12 ahead prefetched) against the instance dict (``PyObject_GenericGetDict`` +
  ``PyDict_GetItem``, mode 2; 3 prefetched as ``revalidate_side`` does), in creation order and in
  a shuffled order (the real passes' order: objects scattered in memory), interleaved repeats,
  thread CPU time, medians with min-max.

Usage::

    python benchmarks/layout_reads.py [--sizes 73728,562176] [--repeats 15] [--json out.json]
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any, Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from layout_classes import SNAPSHOT_FIELDS, SnapshotD, SnapshotL, snapshot_values  # noqa: E402

from mooncake.reshard import _native  # noqa: E402

READ_FIELDS = SNAPSHOT_FIELDS[:10]
MODES = {"layout": 0, "layout_prefetched": 1, "dict": 2, "dict_prefetched": 3}


def bytes_per_instance(count: int) -> Dict[str, float]:
    """tracemalloc bytes per instance of each layout (shared field values, list pointer excluded)."""
    values = snapshot_values()
    builders = {
        "dict_own_dict": lambda: _own_dict(values),
        "dict": lambda: SnapshotD(*values),
        "layout": lambda: SnapshotL(*values),
        "layout_built_in_c": lambda: _native.layout_new(SnapshotL, values),
    }
    out = {}
    for name, build in builders.items():
        gc.collect()
        kept: List[Any] = [None] * count
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for i in range(count):
            kept[i] = build()
        out[name] = round((tracemalloc.get_traced_memory()[0] - before) / count, 1)
        tracemalloc.stop()
        del kept
    return out


def _own_dict(values: Tuple[Any, ...]) -> Any:
    """A dict-backed snapshot as the package builds them today (C builders, from_attested_pair):
    its own ``__dict__`` filled item by item in field order (a key-sharing dict)."""
    obj = object.__new__(SnapshotD)
    fields = obj.__dict__
    for name, value in zip(SNAPSHOT_FIELDS, values):
        fields[name] = value
    return obj


def _objects(cls: type, count: int) -> List[Any]:
    values = snapshot_values()
    if cls is SnapshotD:
        return [_own_dict(values) for _ in range(count)]
    return [cls(*values) for _ in range(count)]


def reads(count: int, repeats: int, seed: int) -> Dict[str, Any]:
    """ns per object reading READ_FIELDS, per order and mode (median, min, max)."""
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        lists = {"dict": _objects(SnapshotD, count), "layout": _objects(SnapshotL, count)}
        shuffled = {}
        rng = random.Random(seed)
        for name, objs in lists.items():
            order = list(range(count))
            rng.shuffle(order)
            shuffled[name] = [objs[i] for i in order]
        orders = {"creation": lists, "shuffled": shuffled}
        samples: Dict[str, List[float]] = {}
        checks: Dict[str, int] = {}
        for _ in range(repeats):
            for order, by_kind in orders.items():
                for mode, code in MODES.items():
                    kind = "layout" if code <= 1 else "dict"
                    cls = SnapshotL if kind == "layout" else SnapshotD
                    objs = by_kind[kind]
                    start = time.thread_time_ns()
                    checksum = _native.layout_read_bench(objs, cls, READ_FIELDS, code)
                    elapsed = time.thread_time_ns() - start
                    samples.setdefault(f"{order}/{mode}", []).append(elapsed / count)
                    checks.setdefault(order, checksum)
        # both layouts hold the same shared values: every mode reads the same pointers
        result: Dict[str, Any] = {}
        for key, values in samples.items():
            result[key] = {
                "median_ns": round(statistics.median(values), 1),
                "min_ns": round(min(values), 1),
                "max_ns": round(max(values), 1),
            }
        for order in orders:
            result[f"{order}/ratio_dict_over_layout"] = round(
                result[f"{order}/dict"]["median_ns"] / result[f"{order}/layout"]["median_ns"], 2
            )
            result[f"{order}/ratio_dict_prefetched_over_layout_prefetched"] = round(
                result[f"{order}/dict_prefetched"]["median_ns"] / result[f"{order}/layout_prefetched"]["median_ns"], 2
            )
        return result
    finally:
        if was_enabled:
            gc.enable()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="73728,562176", help="object counts (comma-separated)")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--bytes-count", type=int, default=200000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", help="also write the result here")
    args = parser.parse_args()
    result: Dict[str, Any] = {
        "python": sys.version.split()[0],
        "fields_read": len(READ_FIELDS),
        "bytes_per_instance": bytes_per_instance(args.bytes_count),
        "reads_ns_per_object": {},
    }
    for size in (int(s) for s in args.sizes.split(",")):
        result["reads_ns_per_object"][str(size)] = reads(size, args.repeats, args.seed)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

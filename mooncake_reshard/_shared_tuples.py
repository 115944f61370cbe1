"""One shared object for equal coordinate tuples (shapes, offsets, strides) of input values.

An adapter builds a ``PlacementFragment`` and a ``RuntimeBindingFragment`` per tensor shard,
usually from ``tuple(t.shape)`` / ``tuple(s * itemsize for s in t.stride())``: a new tuple (and
new int objects above 256) per value, although a model has only a few hundred distinct shapes,
offsets and strides. The constructors' last step (``layout_storer(cls, shared=...)``,
``csrc/layout.c``) stores the first equal tuple it has seen instead, taken from :data:`SHARED`,
and the caller's own tuple is freed with its last reference. On the Kimi-class workload
(``benchmarks/scale.py``) a ``RuntimeBindingFragment``'s strides tuple and its stride int cost
96 bytes, about 67 MB over the model's 700k runtime fragments.

Only exact tuples of exact ints are shared (hashing and comparing them runs no Python code), and
only after the constructor has validated them, so the stored tuple equals the given one: same
length, same int values, and tuples are immutable. Nothing observes the difference except ``is``
on the field value (and pickle, which writes a shared object once). The table is bounded: when
it holds :data:`SHARED_MAX` entries it is emptied and refilled from the next values (a workload
with more distinct tuples keeps working and only shares less). It is process-wide and only ever
changed by single dict operations under the GIL. ``SHARED_MAX = 0`` with an emptied table
switches sharing off (the tests pinning the pickles of unshared tuples do).
"""

from __future__ import annotations

__all__ = ["SHARED", "SHARED_MAX"]

SHARED: dict[tuple[int, ...], tuple[int, ...]] = {}
SHARED_MAX = 4096

"""REVAL50: ``_native.revalidate_spaces``' C table of source allocations (REVAL42) keeps the high
32 bits of each entry's hash in its slot and reads an occupied slot's logged allocation only when
they match; the table is rebuilt from those hashes each time it doubles (from 1,024 logged
allocations on). ``test_reval42_space_table`` covers the values the table leaves for, on plans
of 80 operations (one table size); here the tables are synthetic and large enough to double
several times, with repeated source allocations (found, not logged again) and targets that
coincide with sources logged before and after each doubling, compared against
``test_native_revalidate``'s Python reference."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from test_native_revalidate import _bound_plan, _forge, _scan, _spaces_reference
from test_reval42_space_table import _agree, _coincide

from mooncake.reshard import _native

_TENSORS = tuple(f"t{i}" for i in range(20))
_SPLIT = _scan(_bound_plan(tensors=_TENSORS, target_tp=4, shape=(4, 8)).operations)


def _table(n_ops: int, distinct: int, seed: int) -> tuple[list[Any], list[int], list[int], list[Any]]:
    """``n_ops`` operations of the split plan's kind: each reads a source fragment whose storage
    allocation is one of ``distinct`` values of one address space (so repeats are found in the
    table) and writes its own target fragment (the split plan's target and box, cycled), in its
    own target address space, with its own allocation."""
    frags, source_of, target_of, boxes = _SPLIT
    rng = random.Random(seed)
    source = frags[source_of[0]]
    out_frags: list[Any] = []
    out_source: list[int] = []
    out_target: list[int] = []
    out_boxes: list[Any] = []
    for index in range(n_ops):
        address = 4096 * rng.randrange(distinct) + 1
        out_source.append(len(out_frags))
        out_frags.append(_forge(source, binding=_forge(source.binding, storage_address=address)))
        k = index % len(target_of)
        target = frags[target_of[k]]
        out_target.append(len(out_frags))
        out_frags.append(_forge(target, binding=_forge(target.binding, storage_address=2**40 + 64 * index)))
        out_boxes.append(boxes[k])
    return out_frags, out_source, out_target, out_boxes


def test_table_doubles_without_coincidence() -> None:
    for n_ops, distinct in ((64, 1), (1023, 2048), (1025, 10**6), (5000, 10**6), (5000, 300)):
        frags, source_of, target_of, boxes = _table(n_ops, distinct, n_ops)
        assert _native.revalidate_spaces(frags, source_of, target_of, boxes, False) is True
        _agree(frags, source_of, target_of, boxes)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n_ops=st.sampled_from((64, 1000, 1030, 2100, 4200)),
    distinct=st.sampled_from((3, 700, 10**6, 10**9)),
    seed=st.integers(0, 2**32),
    data=st.data(),
)
def test_coincidences_across_doublings(n_ops: int, distinct: int, seed: int, data: Any) -> None:
    frags, source_of, target_of, boxes = _table(n_ops, distinct, seed)
    for _ in range(data.draw(st.integers(1, 3))):  # (none: test_table_doubles_without_coincidence)
        target = target_of[data.draw(st.integers(0, n_ops - 1))]
        source = source_of[data.draw(st.integers(0, n_ops - 1))]
        _coincide(frags, target, source)
    expected = _spaces_reference(frags, source_of, target_of, boxes, False)
    assert _native.revalidate_spaces(frags, source_of, target_of, boxes, False) is expected
    _agree(frags, source_of, target_of, boxes)


def test_each_logged_allocation_is_found() -> None:
    """A target made to coincide with each logged source in turn (the first, around each
    doubling, the last) is found every time."""
    frags, source_of, target_of, boxes = _table(4200, 10**9, 7)
    sources = list(dict.fromkeys(source_of))
    for at in (0, 1, 1022, 1023, 1024, 1025, 2047, 2048, 2049, len(sources) - 1):
        forged = list(frags)
        _coincide(forged, target_of[(at * 31) % len(target_of)], sources[at])
        assert _native.revalidate_spaces(forged, source_of, target_of, boxes, False) is False, at

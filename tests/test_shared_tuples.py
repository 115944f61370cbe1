"""Equal coordinate tuples of input values are stored as one object (``_shared_tuples``).

``PlacementFragment`` (``global_offset``, ``local_shape``) and ``RuntimeBindingFragment``
(``local_shape``, ``strides_bytes``) store the first equal tuple seen instead of the one given:
the value is the same (an equal tuple of exact ints), the caller's tuple is freed, the table
stays bounded, validation and its messages are unchanged, and a plan's pickle is stable over a
round trip restores an equal value."""

from __future__ import annotations

import gc
import pickle
import tracemalloc
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spec_helpers import runtime_fragment_kwargs

from mooncake.reshard import _shared_tuples
from mooncake.reshard.contracts import RuntimeBindingFragment
from mooncake.reshard.weight import PlacementFragment
from mooncake.reshard.weight.types import ParallelRank

RANK = ParallelRank(dp=0, tp=1, pp=0, ep=0)


def _fresh(values: tuple[int, ...]) -> tuple[int, ...]:
    """An equal tuple that is a new object, with new int objects above the small-int cache."""
    return tuple(int(str(v)) for v in values)


def _runtime(shape: tuple[int, ...], strides: tuple[int, ...], **overrides: Any) -> RuntimeBindingFragment:
    nbytes = 2
    for extent in shape:
        nbytes *= extent
    kwargs = runtime_fragment_kwargs(
        local_shape=shape, strides_bytes=strides, nbytes=nbytes, storage_nbytes=nbytes, **overrides
    )
    return RuntimeBindingFragment(**kwargs)


def test_runtime_fragments_store_one_object_for_equal_tuples() -> None:
    first = _runtime(_fresh((4096, 7168)), _fresh((14336, 2)))
    second = _runtime(_fresh((4096, 7168)), _fresh((14336, 2)), fragment_id="rt-1")
    assert first.local_shape == (4096, 7168) and first.strides_bytes == (14336, 2)
    assert second.local_shape is first.local_shape
    assert second.strides_bytes is first.strides_bytes
    assert type(second.strides_bytes) is tuple and all(type(v) is int for v in second.strides_bytes)
    # a different value is its own object
    other = _runtime(_fresh((2048, 7168)), _fresh((14336, 2)), fragment_id="rt-2")
    assert other.local_shape == (2048, 7168) and other.local_shape is not first.local_shape
    assert other.strides_bytes is first.strides_bytes


def test_placement_fragments_store_one_object_for_equal_tuples() -> None:
    first = PlacementFragment("w", _fresh((1024, 0)), _fresh((1024, 7168)), 2 * 1024 * 7168, RANK)
    # list inputs take the converting path and are shared too
    second = PlacementFragment("v", [1024, 0], [1024, 7168], 2 * 1024 * 7168, RANK)
    assert second.global_offset is first.global_offset and second.local_shape is first.local_shape
    assert first.global_offset == (1024, 0) and type(second.local_shape) is tuple
    # the derived canonical id is computed from the values, as before
    again = PlacementFragment("w", (1024, 0), (1024, 7168), 2 * 1024 * 7168, RANK)
    assert again.placement_fragment_id == first.placement_fragment_id and again == first


def test_invalid_tuples_still_fail_with_their_messages_and_are_not_kept() -> None:
    _shared_tuples.SHARED.clear()
    with pytest.raises(ValueError, match="^global_offset"):
        PlacementFragment("w", (-1, 0), (4, 4), 32, RANK)
    with pytest.raises(ValueError, match="^local_shape"):
        PlacementFragment("w", (0, 0), (0, 4), 32, RANK)
    with pytest.raises(ValueError, match="^runtime stride must be positive for non-singleton dimensions$"):
        _runtime((4, 4), (0, 2))
    assert (-1, 0) not in _shared_tuples.SHARED and (0, 4) not in _shared_tuples.SHARED
    assert (0, 2) not in _shared_tuples.SHARED


def test_the_table_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_shared_tuples, "SHARED_MAX", 4)
    _shared_tuples.SHARED.clear()
    seen = []
    for rows in range(1, 40):
        fragment = _runtime(_fresh((rows + 1, 8)), _fresh((16, 2)), fragment_id=f"rt-{rows}")
        seen.append(fragment)
        assert len(_shared_tuples.SHARED) <= 4
    # every value stored is still the one given, whatever the table emptied meanwhile
    for rows, fragment in enumerate(seen, start=1):
        assert fragment.local_shape == (rows + 1, 8) and fragment.strides_bytes == (16, 2)


def test_sharing_switched_off_stores_the_given_tuples(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_shared_tuples, "SHARED_MAX", 0)
    _shared_tuples.SHARED.clear()
    shape, strides = _fresh((4, 4)), _fresh((8, 2))
    fragment = _runtime(shape, strides)
    assert fragment.local_shape is shape and fragment.strides_bytes is strides
    assert not _shared_tuples.SHARED


def _kept_per_fragment(count: int) -> float:
    """Traced bytes kept per fragment built from fresh (4096, 7168) / (14336, 2) tuples."""
    _runtime(_fresh((4096, 7168)), _fresh((14336, 2)))  # a shared pair exists before tracing
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [_runtime(_fresh((4096, 7168)), _fresh((14336, 2)), fragment_id=f"rt-{i}") for i in range(count)]
        return (tracemalloc.get_traced_memory()[0] - before) / len(kept)
    finally:
        tracemalloc.stop()


def test_fresh_tuples_are_freed(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the sharing is for: fragments built from fresh equal tuples keep one pair of tuples,
    not one pair each (two 2-tuples and three ints above 256: 140 traced bytes on 3.11)."""
    _kept_per_fragment(100)  # warm-up: first-call allocations are not the fragments'
    shared = _kept_per_fragment(2000)
    monkeypatch.setattr(_shared_tuples, "SHARED_MAX", 0)
    _shared_tuples.SHARED.clear()
    unshared = _kept_per_fragment(2000)
    assert unshared - shared > 100, (unshared, shared)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.lists(st.integers(2, 1 << 12), min_size=1, max_size=3), st.integers(1, 8)),
        min_size=1,
        max_size=6,
    )
)
def test_stored_values_equal_the_given_values(cases: list[tuple[list[int], int]]) -> None:
    """Oracle: the stored tuple equals the given one, element by element and in type."""
    for number, (shape, itemsize) in enumerate(cases):
        strides = []
        step = itemsize
        for extent in reversed(shape):
            strides.append(step)
            step *= extent
        given_shape, given_strides = _fresh(tuple(shape)), _fresh(tuple(reversed(strides)))
        nbytes = step
        fragment = RuntimeBindingFragment(
            **runtime_fragment_kwargs(
                fragment_id=f"rt-{number}",
                itemsize=itemsize,
                local_shape=given_shape,
                strides_bytes=given_strides,
                nbytes=nbytes,
                storage_nbytes=nbytes,
            )
        )
        assert fragment.local_shape == given_shape and fragment.strides_bytes == given_strides
        assert [type(v) for v in fragment.strides_bytes] == [int] * len(shape)
        assert _shared_tuples.SHARED.get(given_shape, given_shape) == given_shape

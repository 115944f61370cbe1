"""``_native.attest_many``'s tensor memo found by a cursor, the last loads' first entries, then a
table built only when a lookup gets that far (ATTEST13).

The memo keeps the tensors in load order (held), and finds a part's tensor at the entry after the
last one found (parts sharing tensors list them in the same order), else at one of the last 16
loads' first entries, else in a table by address of the entries earlier loads added; two entries
loaded in a row whose ids compared in order are not compared again. The oracle is
``_native.attest_binding`` on each binding alone (no memo): ``attest_many`` must decide exactly
the bindings it decides, with equal attestations, whatever each part lists: subsets and
supersets of the shared tensors (cursor misses, table hits, entries found twice), parts listing
the same tensors as a part far back (more loads than the ring holds), a few tensors or many,
duplicates and out-of-order lists (declined), and forged values."""

from __future__ import annotations

import random
from typing import Any, List

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from layout_model import build_runtime_bindings
from test_binder20_tensor_memo import same_as_alone, shared_placement


def _relist(placement: Any, choose: Any) -> List[Any]:
    """Each part's tensors replaced by choose(part index, all tensors sorted by id); the old
    tuples returned (to put back)."""
    everything = tuple(sorted({id(t): t for p in placement.parts for t in p.tensors}.values(), key=lambda t: t.tensor_id))
    old = []
    for k, part in enumerate(placement.parts):
        old.append(part.tensors)
        object.__setattr__(part, "tensors", tuple(choose(k, everything, part.tensors)))
    return old


def _restore(placement: Any, old: List[Any]) -> None:
    for part, tensors in zip(placement.parts, old):
        object.__setattr__(part, "tensors", tensors)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(1, 120),
    st.integers(2, 6),
    st.integers(0, 2**32 - 1),
    st.sampled_from(["subset", "superset", "mixed", "duplicate", "swap"]),
)
def test_relisted_shared_tensors_match_the_per_binding_oracle(tensors: int, tp: int, seed: int, kind: str) -> None:
    placement = shared_placement(tensors, tp)
    bindings = build_runtime_bindings(placement)
    rng = random.Random(seed)

    def choose(k: int, everything: Any, own: Any) -> List[Any]:
        if kind == "subset":  # some parts miss tensors they need (declined), in order
            return [t for t in own if rng.random() < 0.9]
        if kind == "superset":  # extra tensors the pairs do not need (decided)
            return [t for t in everything if t in own or rng.random() < 0.5]
        if kind == "mixed":
            return [t for t in everything if rng.random() < (0.95 if t in own else 0.3)]
        listed = list(own)
        if len(listed) > 1:
            i = rng.randrange(len(listed) - 1)
            if kind == "duplicate":
                listed[i + 1] = listed[i]
            else:
                listed[i], listed[i + 1] = listed[i + 1], listed[i]
        return listed

    old = _relist(placement, choose)
    try:
        same_as_alone(placement, bindings)
    finally:
        _restore(placement, old)
    assert all(a is not None for a in same_as_alone(placement, bindings))


@pytest.mark.parametrize("tensors", [3, 15, 16, 17, 200])
def test_more_parts_than_the_ring_of_load_starts(tensors: int) -> None:
    """20 parts: each odd part lists what the part 18 loads back listed (past the 16 remembered
    starts: found through the table), each even one every tensor (the cursor)."""
    placement = shared_placement(tensors, 20)
    bindings = build_runtime_bindings(placement)

    def choose(k: int, everything: Any, own: Any) -> List[Any]:
        return list(everything) if k % 2 == 0 else [t for i, t in enumerate(everything) if (i + k) % 3 != 0 or k >= 18]

    old = _relist(placement, choose)
    try:
        result = same_as_alone(placement, bindings)
    finally:
        _restore(placement, old)
    assert [a is not None for a in result][::2] == [True] * 10


def test_a_tensor_found_twice_in_one_part_declines_as_alone() -> None:
    """A part listing one shared tensor twice in a row: the second is the cursor's entry (the
    first's, loaded by an earlier part), the ids equal: declined, as attest_binding does."""
    placement = shared_placement(40, 4)
    bindings = build_runtime_bindings(placement)

    def choose(k: int, everything: Any, own: Any) -> List[Any]:
        listed = list(own)
        if k == 3:
            listed.insert(5, listed[5])
        return listed

    old = _relist(placement, choose)
    try:
        result = same_as_alone(placement, bindings)
    finally:
        _restore(placement, old)
    assert [a is None for a in result] == [k == 3 for k in range(len(bindings))]


def test_an_id_forged_after_a_call_is_seen_though_the_pair_was_ordered() -> None:
    """The memo lives for one call: an id changed (out of order) between calls declines every
    part listing it, though the call before found those entries loaded in order."""
    placement = shared_placement(30, 3)
    bindings = build_runtime_bindings(placement)
    assert all(a is not None for a in same_as_alone(placement, bindings))
    tensor = placement.parts[0].tensors[10]
    tensor_id = tensor.tensor_id
    object.__setattr__(tensor, "tensor_id", "zzz")
    try:
        assert same_as_alone(placement, bindings) == [None] * len(bindings)
    finally:
        object.__setattr__(tensor, "tensor_id", tensor_id)
    assert all(a is not None for a in same_as_alone(placement, bindings))

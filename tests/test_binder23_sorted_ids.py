"""``_native.attested_executors`` for one worker whose runtime fragment ids are not increasing in
evidence order (the ids ``prefix-part-number`` of an unpadded counter, permuted or random ids):
the worker table is built directly, the snapshots sorted stably by runtime fragment id in C,
with no (id, position, snapshot) entries or list sort (session 23).

The oracle is the Python ``_attested_executors`` on an independent fresh attestation of the same
evidence: the same rows (workers, snapshots, executors) or the same decline. Parts of 2..60
fragments, so both the insertion sort (up to 8) and the merges run."""

from __future__ import annotations

from typing import Any, List

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from test_binder20_snapshot_table import _forged_attestation
from test_native_binder import _executors_kernel, _forge, _part, _python_rows, _world

WORLD = _world(tensors=30)


def _agree(placement: Any, binding: Any, fragments: List[Any]) -> Any:
    """The kernel's (table, rows) for the forged evidence, checked against the Python rows; None
    when both decline. (The table's key order is its cache's, not compared: the rows are.)"""
    part = _part(placement, binding)
    built = _executors_kernel(placement, part, _forged_attestation(placement, binding, fragments))
    if built is None:  # declined: the Python path decides (a repeated id raises there)
        return None
    reference = _python_rows(placement, part, _forged_attestation(placement, binding, fragments))
    table, rows = built
    assert rows == reference
    assert set(table) == {worker_id for worker_id, _, _ in rows}
    for worker_id, snapshots, _ in rows:
        assert table[worker_id] is snapshots
        ids = [snapshot.fragment_id for snapshot in snapshots]
        assert ids == sorted(ids)
    return built


def _binding() -> Any:
    placement, bindings = WORLD
    binding = bindings[0]
    assert len(binding.fragments) >= 20 and len({f.worker_id for f in binding.fragments}) == 1
    return placement, binding


def _renamed(fragments: List[Any], ids: List[str]) -> List[Any]:
    return [_forge(fragment, fragment_id=fid) for fragment, fid in zip(fragments, ids)]


@pytest.mark.parametrize("count", [2, 3, 8, 9, 10, 11, 17, 20, 30])
def test_unpadded_counter_ids(count: int) -> None:
    """The workloads' ids: ``x-0`` .. ``x-9``, then ``x-10`` sorts before ``x-2``."""
    placement, binding = _binding()
    fragments = list(binding.fragments)[:count]
    built = _agree(placement, binding, _renamed(fragments, [f"x-{k}" for k in range(count)]))
    assert built is not None and len(built[0]) == 1
    (snapshots,) = built[0].values()
    assert [s.fragment_id for s in snapshots] == sorted(f"x-{k}" for k in range(count))


def test_reversed_and_interleaved_runs() -> None:
    placement, binding = _binding()
    fragments = list(binding.fragments)
    n = len(fragments)
    for ids in (
        [f"id-{n - k:04d}" for k in range(n)],  # decreasing
        [f"id-{(k % 2) * n + k:04d}" for k in range(n)],  # two interleaved increasing runs
        [f"id-{(k * 7) % n:04d}" for k in range(n)],  # a stride permutation (n not a multiple of 7)
        [f"id-{k:04d}" for k in range(1, n)] + ["id-0000"],  # one out of place at the end
        ["id-9999"] + [f"id-{k:04d}" for k in range(1, n)],  # one out of place at the start
    ):
        assert len(set(ids)) == n
        built = _agree(placement, binding, _renamed(fragments, ids))
        assert built is not None and len(built[0]) == 1


def test_repeats_and_non_ascii_ids_match() -> None:
    placement, binding = _binding()
    fragments = list(binding.fragments)
    n = len(fragments)
    ids = [f"z-{k % 5}" for k in range(n)]  # repeats: declined or built exactly as the Python path
    _agree(placement, binding, _renamed(fragments, ids))
    wide = [chr(0x4E00 + (k * 13) % 97) + chr(0x1F600 + k % 7) + "é" for k in range(n)]  # code point order
    assert len(set(wide)) == n
    built = _agree(placement, binding, _renamed(fragments, wide))
    assert built is not None


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_order_of_ids_matches_the_python_rows(data: st.DataObject) -> None:
    placement, binding = _binding()
    fragments = list(binding.fragments)
    n = data.draw(st.integers(1, len(fragments)))
    fragments = fragments[:n]
    alphabet = st.sampled_from(["a", "b", "-", "0", "1", "9", "é", "\u4e00", "\U0001f600"])
    ids = data.draw(st.lists(st.text(alphabet, min_size=1, max_size=4), min_size=n, max_size=n))
    forged = _renamed(fragments, ids)
    if data.draw(st.booleans()):
        k = data.draw(st.integers(0, n - 1))
        forged[k] = _forge(forged[k], worker_id=forged[k].worker_id + "-b")  # a second worker: grouped
    _agree(placement, binding, forged)


# ---------------------------------------------------------------------------------------
# address_ranges_clear: each sort skipped when the ranges are in that order already


def _ranges_expected(specs: List[Any]) -> bool:
    """Brute force: no two views of one space overlap, no two allocations of one space overlap
    partially."""
    for a in range(len(specs)):
        for b in range(a + 1, len(specs)):
            sa, sb = specs[a], specs[b]
            if sa[:3] != sb[:3]:
                continue
            if sa[3] < sb[3] + sb[4] and sb[3] < sa[3] + sa[4]:
                return False
            alloc_a, alloc_b = (sa[5], sa[5] + sa[6]), (sb[5], sb[5] + sb[6])
            if alloc_a != alloc_b and alloc_a[0] < alloc_b[1] and alloc_b[0] < alloc_a[1]:
                return False
    return True


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_ranges_in_address_order_against_brute_force(data: st.DataObject) -> None:
    """Views laid out in address order (the sorts' input already sorted, by view, by storage or
    both), grouped by space, with gaps, touching neighbours, repeats, shared allocations and
    overlaps; then the same specs shuffled (the sorts run): both decide as the brute force."""
    from test_native_binder import _range_views

    from mooncake.reshard import _native
    from mooncake.reshard.weight import RuntimeBindingFragment as Fragment

    spaces = data.draw(st.lists(st.sampled_from([("i0", "w0", "cpu"), ("i0", "w1", "cpu"), ("i1", "w0", "cuda:0")]),
                                min_size=1, max_size=3, unique=True))
    specs: List[Any] = []
    for space in spaces:
        address = data.draw(st.integers(1, 50))
        for _ in range(data.draw(st.integers(1, 12))):
            nbytes = data.draw(st.integers(0, 9))
            kind = data.draw(st.sampled_from(["own", "own", "own", "shared", "wide", "back"]))
            if kind == "shared" and specs and specs[-1][:3] == space:
                storage, storage_nbytes = specs[-1][5], specs[-1][6]  # the previous one's allocation
            elif kind == "wide":
                storage, storage_nbytes = max(1, address - 3), nbytes + 6  # may overlap its neighbours'
            else:
                storage, storage_nbytes = address, nbytes
            specs.append(space + (address, nbytes, storage, storage_nbytes))
            step = data.draw(st.integers(0, 12)) if kind != "back" else -data.draw(st.integers(0, 3))
            address = max(1, address + nbytes + step)
    expected = _ranges_expected(specs)
    assert _native.address_ranges_clear(_range_views(specs), Fragment) is (expected or len(specs) < 2)
    shuffled = data.draw(st.permutations(specs))
    assert _native.address_ranges_clear(_range_views(list(shuffled)), Fragment) is (expected or len(specs) < 2)


_EDGES = [0, 1, 255, (1 << 30) - 1, 1 << 30, (1 << 48) + 7, (1 << 62), (1 << 63) - 1, 1 << 63, (1 << 63) + 5,
          (1 << 64) - 2, (1 << 64) - 1, 1 << 64, 1 << 70, -1, -(1 << 63), -(1 << 64)]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(_EDGES), st.sampled_from(_EDGES[:6]), st.integers(0, 2), st.integers(0, 3)),
                min_size=2, max_size=5))
def test_ranges_at_the_u64_edges_against_the_python_rule(rows: List[Any]) -> None:
    """Addresses and sizes at the int64 / uint64 edges (exact ints read as u64: in range, above
    2**63 - 1, at and above 2**64, negative): the kernel's answer is the Python rule's (it may
    only decline, False, where the rule accepts), and a clear answer is the brute force's."""
    from test_native_binder import _range_views, _ranges_outcome

    from mooncake.reshard import _native
    from mooncake.reshard.weight import RuntimeBindingFragment as Fragment

    specs = [("i0", "w0", "cpu", address + shift, nbytes, address + shift - min(before, 0), nbytes + before)
             for address, nbytes, shift, before in rows]
    views = _range_views(specs)
    clear = _native.address_ranges_clear(views, Fragment)
    assert clear in (True, False)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_native, "address_ranges_clear", lambda *args: False)
        python = _ranges_outcome(views)
    if clear:
        assert python == ("value", None)
        assert all(0 <= s[3] and s[3] + s[4] < 1 << 64 and 0 <= s[5] and s[5] + s[6] < 1 << 64 for s in specs)
        assert _ranges_expected(specs)
    elif all(0 <= s[3] and s[3] + s[4] < 1 << 64 and 0 <= s[5] and s[5] + s[6] < 1 << 64 for s in specs):
        assert not _ranges_expected(specs)  # in range: declined only for an overlap

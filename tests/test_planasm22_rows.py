"""Session 22: the rows of ``sorted_groups(..., packed=True)`` (bytes of native int64 instead of a
list of int objects) and ``FragmentTable.pack_objects`` reading them: the same positions as the
list form (brute-force oracle), the same table as packing with the list, and the same checks
(wrong length, a value out of range or repeated: ``ValueError``) on bytes as on lists."""

from __future__ import annotations

from array import array
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mooncake.reshard import _native
from mooncake.reshard.weight import (
    ParallelRank,
    ParallelTopology,
    PlacementFragment,
    SplitAxis,
    TensorDescriptor,
    TopologyParticipant,
    WeightPlacementManifest,
)

_KEYS = st.builds(
    lambda p, s: p + s,
    st.sampled_from(["", "sha256:", "sha256:0123456789", "é", "\U0001f600"]),
    st.text(alphabet="ab0f\x7fé", max_size=3),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_KEYS, st.integers(0, 3), st.integers(0, 40)), max_size=120), st.booleans())
def test_sorted_groups_packed_rows_match_list_rows(entries: list[tuple[str, int, int]], distinct: bool) -> None:
    ngroups = 4
    items = [object() for _ in entries]
    keys = [key for key, _, _ in entries]
    group_of = [group for _, group, _ in entries]
    extra = [value for _, _, value in entries]
    listed = _native.sorted_groups(items, keys, group_of, ngroups, extra, distinct)
    packed = _native.sorted_groups(items, keys, group_of, ngroups, extra, distinct, True)
    assert listed is not None and packed is not None
    assert type(listed[1]) is list and type(packed[1]) is bytes
    # the oracle: each input position's place in the stable sort by key
    order = sorted(range(len(items)), key=keys.__getitem__)
    place = [0] * len(items)
    for k, i in enumerate(order):
        place[i] = k
    assert listed[1] == place
    assert array("q", packed[1]).tolist() == place
    assert packed[0] == listed[0] and packed[2] == listed[2] and packed[3] == listed[3]


def test_sorted_groups_packed_declines_like_the_list_form() -> None:
    items = [object(), object()]
    assert _native.sorted_groups(items, ["b", 1], [0, 0], 1, [1, 2], False, True) is None
    assert _native.sorted_groups([], [], [], 0, [], True, True) == ((), b"", [], [])


def _fragments() -> tuple[list[PlacementFragment], list[tuple[int, ...]], dict[str, int]]:
    ranks = [ParallelRank(tp=t) for t in range(4)]
    fragments = [
        PlacementFragment(tensor, (t * 2, 0), (2, 3), 12, ranks[t])
        for tensor in ("w.a", "w.b", "w.c")
        for t in range(4)
    ]
    return fragments, [(8, 3)] * 3, {"w.a": 0, "w.b": 1, "w.c": 2}


@settings(max_examples=60, deadline=None)
@given(st.randoms(use_true_random=False))
def test_pack_objects_bytes_rows_equal_list_rows(rng: Any) -> None:
    fragments, shapes, index = _fragments()
    rows = list(range(len(fragments)))
    rng.shuffle(rows)
    # row order: the fragments as placed by rows (the table packed from them directly)
    in_rows: list[Any] = [None] * len(fragments)
    for i, row in enumerate(rows):
        in_rows[row] = fragments[i]
    by_list = _native.FragmentTable.pack_objects(shapes, index, fragments, rows, PlacementFragment)
    by_bytes = _native.FragmentTable.pack_objects(
        shapes, index, fragments, array("q", rows).tobytes(), PlacementFragment
    )
    direct = _native.FragmentTable.pack_objects(shapes, index, in_rows, None, PlacementFragment)
    assert by_list[1:] == by_bytes[1:] == direct[1:]
    for table in (by_list[0], by_bytes[0]):
        assert table.tensor_classes([0, 0, 0]) == direct[0].tensor_classes([0, 0, 0])
        assert table.uncovered_group(("dp", "tp", "pp", "ep")) == direct[0].uncovered_group(("dp", "tp", "pp", "ep"))
        assert table.duplicate_logical_fragment() == direct[0].duplicate_logical_fragment()
        assert table.bad_geometry([2, 2, 2]) == direct[0].bad_geometry([2, 2, 2])


def test_pack_objects_bytes_rows_are_checked() -> None:
    fragments, shapes, index = _fragments()
    n = len(fragments)
    good = list(range(n))
    for bad in (
        array("q", good[:-1]).tobytes(),  # a row short
        array("q", good).tobytes() + b"\x00",  # not a whole number of int64
        b"",
    ):
        with pytest.raises(ValueError, match="one row per fragment"):
            _native.FragmentTable.pack_objects(shapes, index, fragments, bad, PlacementFragment)
    for values in ([n] + good[1:], [-1] + good[1:], [0, 0] + good[2:], [2**62] + good[1:]):
        with pytest.raises(ValueError, match="permutation"):
            _native.FragmentTable.pack_objects(shapes, index, fragments, array("q", values).tobytes(), PlacementFragment)
    with pytest.raises(ValueError, match="one row per fragment"):
        _native.FragmentTable.pack_objects(shapes, index, fragments, bytearray(n * 8), PlacementFragment)


def test_from_fragments_packs_through_packed_rows() -> None:
    """The assembly hands sorted_groups' packed rows to the table (no list form in between): a
    manifest assembled from shuffled fragments equals one assembled from them in id order."""
    fragments, _, _ = _fragments()
    tensors = tuple(
        TensorDescriptor(tensor_id=t, global_shape=(8, 3), dtype="bfloat16", itemsize=2, shard_dims=(0,),
                         layout_fingerprint="bf16:row-major", parallel_axes=(SplitAxis("tp", 0),))
        for t in ("w.a", "w.b", "w.c")
    )
    topology = ParallelTopology(
        tp_size=4, pp_size=1, ep_size=1, dp_size=1, participants=tuple(TopologyParticipant(f"p{t}", ParallelRank(tp=t)) for t in range(4))
    )

    def build(order: list[PlacementFragment]) -> WeightPlacementManifest:
        return WeightPlacementManifest.from_fragments(
            resource_id="r", revision="v", weight_generation=1, placement_set_id="s", topology=topology,
            tensors=tensors, fragments=tuple(order),
        )

    seen: list[Any] = []
    original = _native.sorted_groups

    def spy(*args: Any) -> Any:
        result = original(*args)
        # (distinct, packed), and the catalog (session 32: the sorted tensors, a tuple)
        assert len(args) == 8 and type(args[7]) is tuple
        seen.append((args[5:7], None if result is None else type(result[1])))
        return result

    _native.sorted_groups = spy  # type: ignore[assignment]
    try:
        forward = build(fragments)
        backward = build(fragments[::-1])
    finally:
        _native.sorted_groups = original  # type: ignore[assignment]
    assert seen == [((True, True), bytes)] * 2
    assert forward == backward
    assert forward.placement_id == backward.placement_id
    assert [f.placement_fragment_id for f in forward.fragments] == sorted(f.placement_fragment_id for f in fragments)


# ---- sorted_by_str_keys(..., rows=True, packed=True): positions as bytes and distinctness ---------

_IDS = st.builds(
    lambda p, s: p + s,
    st.sampled_from(["", "a", "sha256:", "sha256:0123456789abcdef", "é", "\U0001f600", "\x00"]),
    st.text(alphabet="ab0\x00é", max_size=3),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_IDS, max_size=80))
def test_sorted_by_str_keys_packed_matches_oracle(ids: list[str]) -> None:
    items = [object() for _ in ids]
    packed = _native.sorted_by_str_keys(items, ids, True, True)
    assert packed is not None
    positions, distinct = packed
    order = sorted(range(len(ids)), key=ids.__getitem__)  # stable, code point order
    place = [0] * len(ids)
    for k, i in enumerate(order):
        place[i] = k
    assert type(positions) is bytes and array("q", positions).tolist() == place
    assert distinct is (len(set(ids)) == len(ids))
    listed = _native.sorted_by_str_keys(items, ids, True)
    assert listed is not None and listed[1] == place


def test_sorted_by_str_keys_packed_declines_and_checks() -> None:
    assert _native.sorted_by_str_keys([1, 2], ["a", 2], True, True) is None
    assert _native.sorted_by_str_keys([1], ["\ud800"], True, True) is None
    assert _native.sorted_by_str_keys([], [], True, True) == (b"", True)
    with pytest.raises(ValueError, match="packed needs rows"):
        _native.sorted_by_str_keys([1], ["a"], False, True)
    # equal ids made as distinct objects, sharing a long prefix (equal heads: the bytes decide)
    long_a = "sha256:" + "0" * 40 + "x"
    long_b = "".join(["sha256:", "0" * 40, "x"])
    assert long_a is not long_b
    assert _native.sorted_by_str_keys([1, 2, 3], [long_a, "sha256:1", long_b], True, True)[1] is False
    assert _native.sorted_by_str_keys([1, 2], [long_a, long_a + "\x00"], True, True)[1] is True


def test_sorted_ranks_exact_matches_the_dict_ranks() -> None:
    from mooncake.reshard.weight._planner.core import _sorted_ranks_exact

    for ids in (["b", "a", "c"], ["b", "a", "b"], [], ["x"], ["é", "e", "\U0001f600", "z"]):
        ranks = {fid: i for i, fid in enumerate(sorted(ids))}
        expected = array("q", [ranks[fid] for fid in ids]).tobytes()
        assert _sorted_ranks_exact(list(ids)) == (expected, True)
    assert _sorted_ranks_exact([1, 0])[1] is False


def test_dp_owned_source_owners_shared_signature_without_dp_ownership() -> None:
    """One signature object without DP ownership shared by every tensor: no DP-owned tensor
    (returned before any pass over the tensors or fragments, as the sorted scan found none);
    equal but distinct signature objects, or one DP-owned signature, take the scan."""
    from mooncake.reshard.weight._planner.ownership import dp_owned_source_owners

    shared = (("ep",), False)
    tensors: dict[str, Any] = {"a": None, "b": None, "c": None}
    assert dp_owned_source_owners(tensors, [], {t: shared for t in tensors}) == {}
    assert dp_owned_source_owners(tensors, [], {t: (("ep",), False) for t in tensors}) == {}
    assert dp_owned_source_owners({}, [], {}) == {}
    # a DP-owned tensor (not the shared case) is still looked for: its owners need its fragments
    mixed = {"a": shared, "b": (("dp",), True), "c": shared}
    with pytest.raises(ValueError, match="DP-owned source tensor has no complete declared owner: b"):
        dp_owned_source_owners(tensors, [], mixed)

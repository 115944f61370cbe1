"""The planner's large str-keyed maps are built as dicts that keep each key's hash in their entries
(``po_hashed_dict`` in csrc/planobj.c: ``_native.catalog_map`` and the per-dp maps of
``_native.owner_minimums(..., grouped=True)``; ``core._hashed_dict`` for the tensor index).

Only the table layout differs (CPython keeps no hashes in a dict that has only held str keys; the
None key stored and deleted first changes that): the maps are equal to the plain forms, in the
same order, with the same key and value objects, and the None key they held is gone. The layout
itself is pinned by size (the hashed table is larger for the same keys), so a return to a plain
``PyDict_New`` is seen here, not only in the timings."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank, PlacementFragment
from mooncake.reshard.weight._planner import ownership
from mooncake.reshard.weight._planner.core import _hashed_dict

# CPython 3.11+ keeps no hashes in a dict that has only held exact-str keys (a smaller entry):
# the general layout is then larger. 3.10 stores every entry's hash: the two sizes are equal.
_STR_ONLY_LAYOUT = sys.version_info >= (3, 11)


class _D:
    def __init__(self, tensor_id: Any) -> None:
        self.tensor_id = tensor_id


def _reference_hashed(pairs: Any) -> dict[Any, Any]:
    out: dict[Any, Any] = {None: None}
    del out[None]
    out.update(pairs)
    return out


def _same(got: dict[Any, Any], want: dict[Any, Any]) -> None:
    assert type(got) is dict
    assert got == want
    assert list(got) == list(want)
    assert all(a is b for a, b in zip(got, want))  # the very key objects
    assert all(got[k] is want[k] for k in want)
    assert None not in got


@pytest.mark.parametrize("count", [0, 1, 5, 300, 5000])
def test_catalog_map_is_the_comprehension_with_hashed_entries(count: int) -> None:
    catalog = tuple(_D(f"layers.{i}.w") for i in range(count))
    got = _native.catalog_map(catalog)
    want = {tensor.tensor_id: tensor for tensor in catalog}
    _same(got, want)
    if count >= 5:
        assert sys.getsizeof(got) == sys.getsizeof(_reference_hashed(want.items()))
        assert sys.getsizeof(got) > sys.getsizeof(dict(want)) or not _STR_ONLY_LAYOUT
    # the map stays an ordinary dict: str keys added, removed and looked up by equal copies
    got["extra"] = None
    del got["extra"]
    for key in want:
        assert got["".join(key)] is want[key]


def test_catalog_map_duplicate_ids_keep_the_last_descriptor_in_first_place() -> None:
    catalog = (_D("a"), _D("b"), _D("a"))
    got = _native.catalog_map(catalog)
    _same(got, {tensor.tensor_id: tensor for tensor in catalog})
    assert got["a"] is catalog[2]


def test_catalog_map_still_declines_non_str_ids() -> None:
    assert _native.catalog_map((_D("a"), _D(None))) is None
    assert _native.catalog_map([_D("a")]) is None


@pytest.mark.parametrize("ntensors", [1, 7, 2000])
def test_grouped_owner_maps_keep_hashes_and_the_plain_forms_items(ntensors: int) -> None:
    fragments = [
        PlacementFragment(f"experts.{t}.w", (0,), (4,), 8, ParallelRank(dp=dp, ep=(t + dp) % 3))
        for t in range(ntensors)
        for dp in (1, 0)
    ]
    by_dp, count = _native.owner_minimums(fragments, ("ep",), PlacementFragment, ParallelRank, True)
    want_by_dp, want_count = ownership._group_minimums(
        _native.owner_minimums(fragments, ("ep",), PlacementFragment, ParallelRank), ("ep",)
    )
    assert count == want_count == 2 * ntensors
    assert list(by_dp) == list(want_by_dp) == [1, 0]
    for dp, chosen in by_dp.items():
        assert chosen == want_by_dp[dp] and list(chosen) == list(want_by_dp[dp]) and None not in chosen
        if ntensors >= 7:
            assert sys.getsizeof(chosen) == sys.getsizeof(_reference_hashed(chosen.items()))
            assert sys.getsizeof(chosen) > sys.getsizeof({k: v for k, v in chosen.items()}) or not _STR_ONLY_LAYOUT


def test_hashed_dict_is_dict_of_its_pairs() -> None:
    ids = [f"t{i}" for i in range(3000)] + ["t5"]  # a repeated key keeps its first place, last value
    pairs = list(zip(ids, range(len(ids))))
    got = _hashed_dict(iter(pairs))
    _same(got, dict(pairs))
    assert sys.getsizeof(got) > sys.getsizeof(dict(pairs)) or not _STR_ONLY_LAYOUT
    assert _hashed_dict([(None, 1)]) == {None: 1}  # a None key of the pairs is kept
    assert _hashed_dict([]) == {}
    with pytest.raises(TypeError):
        _hashed_dict([1])  # not a pair: the error dict(pairs) gives
    with pytest.raises(ValueError):
        _hashed_dict(["abc"])


class _Str(str):
    pass


@pytest.mark.parametrize("where", [0, 3, 9])
def test_catalog_matches_key_types_read_with_the_ids(where: int) -> None:
    """``catalog_matches``' third test (every key an exact str) is read while the second walks
    the ids (each key is then its id object): a str-subclass id that is its key, anywhere, still
    makes it False, and exact ones True."""
    ids: list[Any] = [f"t{i}" for i in range(10)]
    catalog = tuple(_D(i) for i in ids)
    tensors = {d.tensor_id: d for d in catalog}
    assert _native.catalog_matches(tensors, catalog) is True
    ids[where] = _Str(ids[where])
    catalog = tuple(_D(i) for i in ids)
    tensors = {d.tensor_id: d for d in catalog}
    assert _native.catalog_matches(tensors, catalog) is False
    # the str-subclass key does not stop the second test early: every id is still read, as
    # the Python form's second test reads them all before its third looks at the keys
    reads: list[int] = []

    class Counting:
        def __init__(self, index: int, tensor_id: Any) -> None:
            self.index, self._id = index, tensor_id

        @property
        def tensor_id(self) -> Any:
            reads.append(self.index)
            return self._id

    catalog = tuple(Counting(k, i) for k, i in enumerate(ids))
    tensors = {d._id: d for d in catalog}
    assert _native.catalog_matches(tensors, catalog) is False
    assert reads == list(range(10))

"""The planner passes' per-fragment rows on cache lines (session 33, csrc/planobj.c): ``fragment_columns``'
address-order rows keep each fragment's nbytes after its coordinates in the scratch, ``select_sources``'
pre-read rows keep it after the coordinates in the pre-read buffer, and ``owner_minimums``' rows are as
long as the owner kinds need (32, 64 or more bytes). The values must be what they were: the geometry
equals a brute-force oracle (nbytes as uint64, 0 outside (0, 2**64)), the pre-read selection equals the
in-order one, and the minimums equal the Python form for any number of kinds (0 to 8, names repeated)."""

from __future__ import annotations

from array import array
from typing import Any, List, Tuple

from hypothesis import given, settings
from hypothesis import strategies as st

from mooncake.reshard import _native
from mooncake.reshard.weight._planner import ownership
from mooncake.reshard.weight.types import ParallelRank, PlacementFragment

# nbytes values forged past the type's checks: in range, the uint64 edges, beyond it, negative
NBYTES = st.one_of(
    st.integers(1, 1 << 20),
    st.sampled_from([(1 << 63) - 1, 1 << 63, (1 << 64) - 1, 1 << 64, 1 << 70, 0, -1, -(1 << 70)]),
)


def _q(values: List[int]) -> bytes:
    return array("q", values).tobytes()


def _nbytes_column(value: int) -> int:
    """nbytes as the geometry keeps it: the value in (0, 2**64) as uint64 (read back as int64), else 0."""
    u = value if 0 < value < (1 << 64) else 0
    return u - (1 << 64) if u >= (1 << 63) else u


fragment_st = st.tuples(
    st.integers(0, 5),  # tensor
    st.integers(1, 4),  # ndim
    st.integers(0, 3),  # tp
    st.integers(0, 1),  # dp
    NBYTES,
)


def _make(rows: List[Tuple[int, int, int, int, int]], ndim_of_tensor: bool) -> List[PlacementFragment]:
    made = []
    for i, (t, nd, tp, dp, nb) in enumerate(rows):
        if ndim_of_tensor:
            nd = 1 + t % 3
        offset = tuple(4 * i + k for k in range(nd))
        shape = tuple(1 + (i + k) % 5 for k in range(nd))
        fragment = PlacementFragment(tensor_id=f"t{t}", global_offset=offset, local_shape=shape, nbytes=8,
                                     rank=ParallelRank(dp=dp, tp=tp), placement_fragment_id=f"f{i:04d}")
        object.__setattr__(fragment, "nbytes", nb)
        made.append(fragment)
    return made


@settings(max_examples=60, deadline=None)
@given(st.lists(fragment_st, min_size=1, max_size=60))
def test_fragment_columns_geometry_equals_the_oracle(rows: List[Tuple[int, int, int, int, int]]) -> None:
    fragments = _make(rows, ndim_of_tensor=False)
    for items in (fragments, tuple(fragments)):
        ids, tids, dps, _order, geometry = _native.fragment_columns(items, PlacementFragment, ParallelRank)
        assert ids == [f.placement_fragment_id for f in fragments]
        assert tids == [f.tensor_id for f in fragments]
        assert dps == [f.rank.dp for f in fragments]
        assert geometry is not None
        ndim, offsets, shapes, nbytes = (array("q", part).tolist() for part in geometry)
        assert ndim == [len(f.global_offset) for f in fragments]
        assert offsets == [x for f in fragments for x in f.global_offset]
        assert shapes == [x for f in fragments for x in f.local_shape]
        assert nbytes == [_nbytes_column(f.nbytes) for f in fragments]


def test_fragment_columns_non_int_nbytes_gives_no_geometry() -> None:
    fragments = _make([(0, 2, 0, 0, 8), (1, 1, 1, 0, 8)], ndim_of_tensor=False)
    object.__setattr__(fragments[1], "nbytes", 8.0)
    assert _native.fragment_columns(fragments, PlacementFragment, ParallelRank)[4] is None


@settings(max_examples=60, deadline=None)
@given(st.lists(fragment_st, min_size=1, max_size=80), st.booleans())
def test_select_sources_pre_read_nbytes_equals_the_in_order_path(rows: List[Tuple[int, int, int, int, int]],
                                                                 non_int: bool) -> None:
    fragments = _make(rows, ndim_of_tensor=True)
    if non_int:
        object.__setattr__(fragments[len(fragments) // 2], "nbytes", 16.0)
    tids = [f"t{t}" for t in range(6)]
    args = ({t: i for i, t in enumerate(tids)}, _q([1 + t % 3 for t in range(6)]), [("tp",)] * 6, [None] * 6,
            [{t: (("tp", 1),) for t in tids}], _q([0]), _q([2 * i for i in range(6)]))
    for container in (list, tuple):
        fast = _native.select_sources(container(fragments), *args, PlacementFragment, ParallelRank)
        plain = _native.select_sources(container(fragments), *args)
        if plain is None:
            assert fast is None
            continue
        assert fast is not None
        assert [id(f) for f in fast[0]] == [id(f) for f in plain[0]]
        assert fast[1:] == plain[1:]


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["a", "b", "w.0", "w.1"]), st.integers(0, 2), st.integers(0, 3),
                       st.integers(0, 1), st.integers(0, 3)), max_size=50),
    st.lists(st.sampled_from(["tp", "pp", "ep", "dp"]), max_size=8).map(tuple),
    st.booleans(),
)
def test_owner_minimums_any_number_of_kinds(rows: List[Tuple[Any, ...]], kinds: Tuple[str, ...],
                                           grouped: bool) -> None:
    fragments = [PlacementFragment(t, (0,), (4,), 8, ParallelRank(dp=dp, tp=tp, pp=pp, ep=ep))
                 for t, dp, tp, pp, ep in rows]
    expected = ownership._owner_minimums(fragments, kinds)  # (its set-ordered pass differs in order only)
    in_order = _native.owner_minimums(fragments, kinds)  # the in-order loop: first-appearance order
    assert in_order == expected
    got = _native.owner_minimums(fragments, kinds, PlacementFragment, ParallelRank, grouped)
    if grouped:
        assert got == ownership._group_minimums(expected, kinds)
    else:
        assert got == expected and list(got) == list(in_order)

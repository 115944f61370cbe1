"""Session 32: ``sorted_groups(..., distinct=True, packed, catalog)`` fills each group's tuple with
``catalog[v]`` for its distinct values ``v`` (the part's tensors) instead of int objects the
caller then mapped through the catalog. The same objects, in the same order, as mapping the int
form (brute-force oracle too); a tuple untracked by the collector exactly when every object in it
is inert (as the groups' item tuples); references counted exactly; a value not below the catalog's length declines (``None``,
the Python path maps and raises as before); a catalog that is not an exact tuple, or one given
without ``distinct``, is a ``TypeError``. Parts of participants sharing a rank group (a forged
topology) still get distinct tensor tuples, as the per-part ``tuple(map(...))`` gave them."""

from __future__ import annotations

import gc
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mooncake.reshard import _native
from mooncake.reshard.weight import (
    ParallelRank,
    ParallelTopology,
    PlacementFragment,
    ReplicatedAxis,
    TensorDescriptor,
    TopologyParticipant,
    WeightPlacementManifest,
)

from test_assembly_sorted_groups_gc import _inert


class _Tensor:
    """A tracked catalog object (its refcount is what the test counts)."""


def _catalog_item(kind: int) -> Any:
    if kind == 0:
        return _Tensor()  # tracked
    if kind == 1:  # built inert: untracked
        return PlacementFragment(tensor_id="t", global_offset=(0,), local_shape=(1,), nbytes=2, rank=ParallelRank())
    if kind == 2:
        return {"k": 1}  # a dict is never inert (it may be tracked later)
    if kind == 3:
        return (1, [2])  # a tracked tuple
    return _Tensor.__name__ + str(kind)  # a str: no collector support (an own object each time)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.text(alphabet="ab\u00e9", max_size=3), st.integers(0, 3), st.integers(0, 30)), max_size=80),
    st.integers(0, 5),
    st.booleans(),
    st.lists(st.integers(0, 4), min_size=36, max_size=36),
)
def test_catalog_form_is_the_mapped_int_form(
    entries: list[tuple[str, int, int]], spare: int, packed: bool, kinds: list[int]
) -> None:
    ngroups = 4
    items = [object() for _ in entries]
    keys = [key for key, _, _ in entries]
    group_of = [group for _, group, _ in entries]
    extra = [value for _, _, value in entries]
    catalog = tuple(_catalog_item(kind) for kind in kinds[: max(extra, default=-1) + 1 + spare])
    before = [sys.getrefcount(t) for t in catalog]
    inert_before = [_inert(t) for t in catalog]
    ints = _native.sorted_groups(items, keys, group_of, ngroups, extra, True, packed)
    mapped = _native.sorted_groups(items, keys, group_of, ngroups, extra, True, packed, catalog)
    assert ints is not None and mapped is not None
    assert mapped[0] == ints[0] and mapped[1] == ints[1] and mapped[2] == ints[2]
    assert len(mapped[3]) == ngroups
    for g in range(ngroups):
        oracle = sorted({extra[i] for i in range(len(entries)) if group_of[i] == g})
        assert list(ints[3][g]) == oracle
        assert type(mapped[3][g]) is tuple
        assert len(mapped[3][g]) == len(oracle)
        assert all(a is catalog[v] for a, v in zip(mapped[3][g], oracle))
        # untracked exactly when every object in it is inert (as the groups' item tuples; the
        # collector, or untrack_inert of the part, would untrack it after visiting each again)
        if oracle:
            assert gc.is_tracked(mapped[3][g]) is not all(_inert(catalog[v]) for v in oracle)
    assert [_inert(t) for t in catalog] == inert_before  # the objects themselves untouched
    taken = [sum(v == p for g in range(ngroups) for v in ints[3][g]) for p in range(len(catalog))]
    assert [sys.getrefcount(t) for t in catalog] == [b + n for b, n in zip(before, taken)]
    del mapped
    assert [sys.getrefcount(t) for t in catalog] == before


def test_a_value_past_the_catalog_declines() -> None:
    items = [object(), object(), object()]
    catalog = (_Tensor(), _Tensor())
    args = (items, ["c", "a", "b"], [0, 1, 0], 2, [1, 2, 0], True, True)
    assert _native.sorted_groups(*args) is not None
    assert _native.sorted_groups(*args, catalog) is None
    assert _native.sorted_groups(*args, (*catalog, _Tensor())) is not None
    assert _native.sorted_groups(*args, None) == _native.sorted_groups(*args)
    assert _native.sorted_groups([], [], [], 1, [], True, True, ()) == ((), b"", [()], [()])


def test_a_catalog_must_be_an_exact_tuple_with_distinct() -> None:
    class Sub(tuple):  # type: ignore[type-arg]
        pass

    items = [object()]
    for catalog in ([_Tensor()], Sub((_Tensor(),)), "x"):
        with pytest.raises(TypeError):
            _native.sorted_groups(items, ["a"], [0], 1, [0], True, True, catalog)
    with pytest.raises(TypeError):
        _native.sorted_groups(items, ["a"], [0], 1, [0], False, True, (_Tensor(),))


def _descriptor(tensor_id: str) -> TensorDescriptor:
    return TensorDescriptor(
        tensor_id=tensor_id, global_shape=(4,), dtype="bfloat16", itemsize=2, shard_dims=(),
        layout_fingerprint="bf16:row-major", parallel_axes=(ReplicatedAxis("dp"),),
    )


def _fragment(tensor_id: str, rank: ParallelRank) -> PlacementFragment:
    return PlacementFragment(tensor_id=tensor_id, global_offset=(0,), local_shape=(4,), nbytes=8, rank=rank)


def test_participants_sharing_a_group_get_their_own_tensor_tuples() -> None:
    """A topology forged to list one rank twice: the rank's group is shared, and the parts handed
    to a subclass's constructor (which the checks then reject) hold equal but distinct tensor
    tuples, as the per-participant tuple(map(...)) made them."""
    r0, r1 = ParallelRank(dp=0), ParallelRank(dp=1)
    p0, p1 = TopologyParticipant(participant_id="p0", rank=r0), TopologyParticipant(participant_id="p1", rank=r1)
    topology = ParallelTopology(tp_size=1, pp_size=1, ep_size=1, dp_size=2, participants=(p0, p1))
    twin = TopologyParticipant(participant_id="p2", rank=ParallelRank(dp=0))
    object.__setattr__(topology, "participants", (p0, p1, twin))
    seen: list[Any] = []

    class Captured(WeightPlacementManifest):
        def __init__(self, **kwargs: Any) -> None:
            seen.append(kwargs["parts"])
            super().__init__(**kwargs)

    ids = [f"t{i:02d}" for i in range(12)]
    tensors = tuple(_descriptor(t) for t in ids)
    fragments = tuple(_fragment(t, r) for t in ids for r in (r0, r1))
    with pytest.raises(ValueError):
        Captured.from_fragments(
            resource_id="r",
            revision="v",
            weight_generation=1,
            placement_set_id="s",
            topology=topology,
            tensors=tensors,
            fragments=fragments,
        )
    assert seen, "the subclass constructor was not reached"
    parts = seen[0]
    assert [p.participant_id for p in parts] == ["p0", "p1", "p2"]
    assert parts[0].tensors == parts[2].tensors == tensors
    assert parts[0].tensors is not parts[2].tensors
    assert all(a is b for a, b in zip(parts[0].tensors, tensors))

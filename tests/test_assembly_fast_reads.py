"""Faster reads of the assembly (issue 5, session 13), each against the path it replaces.

* ``tensor_shape_groups`` (C) groups tensors by (shape values, axis object identities) in order
  of first appearance; ``_coverage._tensor_classes`` keys only each group's first tensor. Checked
  against a brute-force grouping and against the per-tensor loop, with hostile descriptors
  (subclasses, forged fields, huge ints, odd containers), which decline to that loop.
* ``_coverage._validate_with_table`` finds the first uncovered tensor and the class
  representatives by C-speed scans: same outcome (and first error) as the per-position loop.
* ``FragmentTable.pack_objects(..., fragment_type)`` reads an exact fragment's state without the
  attribute lookup and its fields by one identity scan: the same table, flags and errors as the
  generic reads, and subclasses keep the generic (observable) reads.
"""

from __future__ import annotations

import copy
import random
from typing import Any, Optional, Sequence

import pytest
from hypothesis import given, settings, strategies as st

from layout_model import build_placement
from test_manifest_scale import _table_summary
from test_planner_oracle import placement_pairs

from spec_helpers import field_state, store_state, pop_field

from mooncake.reshard import _native
from mooncake.reshard.weight import OwnershipAxis, ParallelRank, PlacementFragment
from mooncake.reshard.weight import ReplicatedAxis, SplitAxis, TensorDescriptor
from mooncake.reshard.weight import _coverage as coverage
from mooncake.reshard.weight.validation import pack_placement_fragments

_AXES = [ReplicatedAxis("dp"), ReplicatedAxis("dp"), SplitAxis("tp", 0), OwnershipAxis("ep"), SplitAxis("tp", 1)]


def _oracle_groups(tensors: Sequence[Any]) -> tuple[list[int], list[int]]:
    seen: dict[Any, int] = {}
    of, firsts = [], []
    for position, tensor in enumerate(tensors):
        key = (tuple(tensor.global_shape), tuple(map(id, tensor.parallel_axes)))
        if key not in seen:
            seen[key] = len(firsts)
            firsts.append(position)
        of.append(seen[key])
    return of, firsts


def _loop_classes(tensors: Sequence[Any]) -> list[int]:
    """Brute force: equal (global_shape, parallel_axes) share a class, numbered in order of first
    appearance (what the per-tensor loop computes; the same errors for unhashable values)."""
    classes: dict[Any, int] = {}
    return [classes.setdefault((t.global_shape, t.parallel_axes), len(classes)) for t in tensors]


def _tensors(count: int, seed: int) -> tuple[TensorDescriptor, ...]:
    rng = random.Random(seed)
    out = []
    for index in range(count):
        shape = rng.choice([(4, 8), (8, 4), (4, 8, 2), (2**40, 3), (4, 8)])
        axes = tuple(rng.sample(_AXES[:2], 1) + rng.sample(_AXES[2:], rng.randrange(0, 2)))
        shard_dims = tuple(sorted(axis.dim for axis in axes if isinstance(axis, SplitAxis)))
        out.append(TensorDescriptor(f"t{index}", shape, "bfloat16", 2, shard_dims, "fp", axes))
    return tuple(out)


def _forged(tensor: TensorDescriptor, **fields: Any) -> TensorDescriptor:
    clone = copy.copy(tensor)
    for name, value in fields.items():
        object.__setattr__(clone, name, value)
    return clone


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 60), st.integers(0, 2**32))
def test_tensor_shape_groups_matches_oracle(count: int, seed: int) -> None:
    tensors = _tensors(count, seed)
    groups = _native.tensor_shape_groups(tensors, TensorDescriptor)
    assert groups is not None
    assert groups == _oracle_groups(tensors)
    assert coverage._tensor_classes(tensors) == _loop_classes(tensors)
    assert coverage._tensor_classes(list(tensors)) == _loop_classes(tensors)  # the per-tensor loop


class _SubTensor(TensorDescriptor):
    pass


class _Tuple(tuple):  # type: ignore[type-arg]
    pass


def test_tensor_shape_groups_declines_hostile_descriptors() -> None:
    base = _tensors(6, 1)
    sub = object.__new__(_SubTensor)
    store_state(sub, field_state(base[0]))
    no_axes = copy.copy(base[0])
    object.__delattr__(no_axes, "parallel_axes")
    odd_key = copy.copy(base[0])
    store_state(odd_key, {1: "x"})  # a key that is not a str
    hostile = [
        sub,
        no_axes,
        odd_key,
        _forged(base[0], global_shape=[4, 8]),
        _forged(base[0], global_shape=(4, 2**70)),
        _forged(base[0], global_shape=(4, -(2**70))),
        _forged(base[0], global_shape=(True, 8)),
        _forged(base[0], global_shape=_Tuple((4, 8))),
        _forged(base[0], global_shape=(1,) * 33),
        _forged(base[0], parallel_axes=list(base[0].parallel_axes)),
        _forged(base[0], parallel_axes=_Tuple(base[0].parallel_axes)),
        _forged(base[0], parallel_axes=(_AXES[0],) * 33),
        object(),
    ]
    for bad in hostile:
        for where in (0, 3, 6):
            tensors = base[:where] + (bad,) + base[where:]
            assert _native.tensor_shape_groups(tensors, TensorDescriptor) is None
    # values that are plain: negative and 64-bit extreme ints, 32 dims, an empty shape, no axes
    plain = [
        _forged(base[0], global_shape=(-5, 2**63 - 1)),
        _forged(base[0], global_shape=(-(2**63), 1)),
        _forged(base[0], global_shape=(1,) * 32),
        _forged(base[0], global_shape=()),
        _forged(base[0], parallel_axes=()),
    ]
    tensors = base + tuple(plain) + base
    assert _native.tensor_shape_groups(tensors, TensorDescriptor) == _oracle_groups(tensors)
    # argument checks
    with pytest.raises(TypeError):
        _native.tensor_shape_groups(list(base), TensorDescriptor)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        _native.tensor_shape_groups(base, 1)  # type: ignore[arg-type]
    assert _native.tensor_shape_groups((), TensorDescriptor) == ([], [])
    # the classes fall back to the per-tensor loop (the original path, which a list of the same
    # tensors always takes): the same classes, or the same error
    for bad in hostile[:-1]:
        tensors = base[:2] + (bad,) + base[2:]
        loop = _outcome(lambda: coverage._tensor_classes(list(tensors)))
        assert _outcome(lambda: coverage._tensor_classes(tensors)) == loop


def _old_validate_with_table(tensors: Sequence[Any], fragments: Sequence[Any], topology: Any, table: Any) -> None:
    """The per-position loop _validate_with_table used before (the reference)."""
    class_of = _loop_classes(tensors)
    rep, start, members = table.tensor_classes(class_of)
    sizes = coverage._topology_sizes(topology)
    indexes: dict[Any, Any] = {}
    for position, tensor in enumerate(tensors):
        begin = start[position]
        end = start[position + 1]
        if begin == end:
            raise ValueError(f"global placement tensor is not fully covered: {tensor.tensor_id}")
        if rep[position] != position:
            continue
        group = [fragments[index] for index in members[begin:end]]
        coverage._check_tensor(tensor, group, sizes, topology, indexes)


def _outcome(call: Any) -> Any:
    try:
        return ("ok", call())
    except Exception as error:  # the exact type and text are compared
        return (type(error).__name__, str(error))


@settings(max_examples=40, deadline=None)
@given(placement_pairs(), st.integers(0, 2**32))
def test_validate_with_table_matches_the_loop(pair: Any, seed: int) -> None:
    rng = random.Random(seed)
    for layout in pair:
        placement = build_placement(layout)
        tensors = placement.tensors
        fragments = list(placement.fragments)
        for drop in (0, 1, 3):
            kept = list(fragments)
            for _ in range(min(drop, len(kept) - 1)):
                kept.pop(rng.randrange(len(kept)))
            table = pack_placement_fragments(tensors, kept)
            assert table is not None
            new = _outcome(lambda: coverage._validate_with_table(tensors, kept, placement.topology, table))
            old = _outcome(lambda: _old_validate_with_table(tensors, kept, placement.topology, table))
            assert new == old
            if drop == 0:
                assert new == ("ok", None)


def _pack(tensors: Sequence[Any], fragments: Sequence[Any], rows: Optional[list[int]], typed: bool) -> Any:
    shapes = [t.global_shape for t in tensors]
    index = {t.tensor_id: k for k, t in enumerate(tensors)}
    args: tuple[Any, ...] = (shapes, index, fragments) if rows is None and not typed else (
        shapes,
        index,
        fragments,
        rows,
        PlacementFragment if typed else None,
    )
    return _native.FragmentTable.pack_objects(*args)


def _pack_outcome(tensors: Sequence[Any], fragments: Sequence[Any], rows: Optional[list[int]], typed: bool) -> Any:
    def summary() -> Any:
        table, increasing, aliases = _pack(tensors, fragments, rows, typed)
        return (_table_summary(table, tensors), increasing, aliases)

    return _outcome(summary)


class _SpyFragment(PlacementFragment):
    reads: list[str] = []

    def __getattribute__(self, name: str) -> Any:
        _SpyFragment.reads.append(name)
        return super().__getattribute__(name)


def _variants(fragment: PlacementFragment) -> list[Any]:
    out: list[Any] = []
    odd = copy.copy(fragment)
    store_state(odd, {7: "not a str key"})  # every field looked up
    out.append(odd)
    for name in ("rank", "nbytes", "local_shape", "tensor_id", "aliases", "placement_fragment_id"):
        broken = copy.copy(fragment)
        object.__delattr__(broken, name)
        out.append(broken)
    renamed = copy.copy(fragment)
    # a key equal to the field name but not the interned object: found by the lookup
    value = pop_field(renamed, "nbytes")
    field_state(renamed)["".join(["nby", "tes"])] = value
    out.append(renamed)
    for name, value in (
        ("global_offset", [0, 2**70]),
        ("local_shape", (1.5, 2)),
        ("nbytes", -1),
        ("tensor_id", "unknown"),
        ("aliases", ("a", "b")),
        ("placement_fragment_id", 5),
    ):
        forged = copy.copy(fragment)
        object.__setattr__(forged, name, value)
        out.append(forged)
    spy = object.__new__(_SpyFragment)
    object.__getattribute__(spy, "__dict__").update(field_state(fragment))
    out.append(spy)
    return out


@settings(max_examples=25, deadline=None)
@given(placement_pairs(), st.integers(0, 2**32))
def test_pack_objects_typed_equals_generic(pair: Any, seed: int) -> None:
    rng = random.Random(seed)
    for layout in pair:
        placement = build_placement(layout)
        tensors = placement.tensors
        fragments = list(placement.fragments)
        rows = list(range(len(fragments)))
        rng.shuffle(rows)
        source: list[Any] = [None] * len(fragments)
        for i, row in enumerate(rows):
            source[i] = fragments[row]
        for given_rows, given in ((None, fragments), (rows, source)):
            assert _pack_outcome(tensors, given, given_rows, True) == _pack_outcome(tensors, given, given_rows, False)
        # one hostile fragment at a random place
        for bad in _variants(fragments[0]):
            at = rng.randrange(len(fragments) + 1)
            given = fragments[:at] + [bad] + fragments[at:]
            typed = _pack_outcome(tensors, given, None, True)
            _SpyFragment.reads.clear()
            generic = _pack_outcome(tensors, given, None, False)
            generic_reads = list(_SpyFragment.reads)
            assert typed == generic
            # a subclass is read the generic way in both (its reads are the same)
            _SpyFragment.reads.clear()
            _pack_outcome(tensors, given, None, True)
            assert _SpyFragment.reads == generic_reads


def test_pack_objects_fragment_type_argument() -> None:
    fragment = PlacementFragment("a", (0,), (2,), 4, ParallelRank())
    with pytest.raises(TypeError):
        _native.FragmentTable.pack_objects([(2,)], {"a": 0}, [fragment], None, 1)
    table, increasing, aliases = _native.FragmentTable.pack_objects([(2,)], {"a": 0}, [fragment], None, None)
    assert len(table) == 1 and increasing and not aliases
    # a class the fragments are not exactly: the generic reads
    table, increasing, aliases = _native.FragmentTable.pack_objects([(2,)], {"a": 0}, [fragment], None, ParallelRank)
    assert len(table) == 1 and increasing and not aliases

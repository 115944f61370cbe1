"""Complete-placement coverage (spec §11.5).

:func:`validate_complete_coverage` is a pure function of (tensors, fragments,
topology) that raises the contract's ``ValueError``. Grouping by tensor, owner,
replica and split coordinates is done with dicts; exact cover is decided by the
C kernel. Participant groupings are computed once per axis-kind signature.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product
from operator import attrgetter
from typing import Any, Optional

from .. import _native
from .topology import ParallelTopology
from .types import (
    OwnershipAxis,
    PlacementFragment,
    ReplicatedAxis,
    SplitAxis,
    TensorDescriptor,
    _fragment_fields_state,
)

__all__ = ["validate_complete_coverage"]

_KINDS = ("dp", "pp", "ep", "tp")
_OFFSET = attrgetter("global_offset")
_SHAPE = attrgetter("local_shape")
_RANK = attrgetter("rank")

# (owner kinds, replica kinds, split kinds) -> owner -> replica -> {split coordinates}
_ParticipantIndex = dict[tuple[int, ...], dict[tuple[int, ...], set[tuple[int, ...]]]]


def _coords(rank_state: dict[str, int], kinds: tuple[str, ...]) -> tuple[int, ...]:
    return tuple([rank_state[kind] for kind in kinds])


def _participant_index(
    topology: ParallelTopology,
    owner_kinds: tuple[str, ...],
    replica_kinds: tuple[str, ...],
    split_kinds: tuple[str, ...],
) -> _ParticipantIndex:
    index: _ParticipantIndex = {}
    for participant in topology.participants:
        state = participant.rank.__dict__
        owner = _coords(state, owner_kinds)
        replica = _coords(state, replica_kinds)
        index.setdefault(owner, {}).setdefault(replica, set()).add(_coords(state, split_kinds))
    return index


def validate_complete_coverage(
    tensors: Sequence[TensorDescriptor],
    fragments: Sequence[PlacementFragment],
    topology: ParallelTopology,
    table: Optional[_native.FragmentTable] = None,
) -> None:
    """Every tensor is completely and provably covered by its declared axes (spec §11.5).

    ``table`` (optional) is ``fragments`` packed with tensor index = position in ``tensors``
    after every §11.4 check passed; it lets C group the fragments by tensor and find the
    tensors that repeat an earlier tensor's problem, which are then not checked again.
    """
    if not tensors:
        raise ValueError("global weight placement must contain tensors")
    if not fragments:
        raise ValueError("global weight placement must contain fragments")
    if table is not None and len(table) == len(fragments):
        _validate_with_table(tensors, fragments, topology, table)
        return
    by_tensor: dict[str, list[PlacementFragment]] = {}
    for fragment in fragments:
        tensor_id = fragment.tensor_id
        group = by_tensor.get(tensor_id)
        if group is None:
            by_tensor[tensor_id] = [fragment]
        else:
            group.append(fragment)
    sizes = {
        "dp": topology.dp_size,
        "pp": topology.pp_size,
        "ep": topology.ep_size,
        "tp": topology.tp_size,
    }
    indexes: dict[tuple[Any, ...], _ParticipantIndex] = {}
    # The check of one tensor is a pure function of its shape, its axes and the set of
    # its fragments' (rank, offset, shape) (duplicates were rejected by §11.4 #3; a list
    # with duplicates is never memoised). Tensors repeating an already proven problem
    # (same layout for every layer / expert) are accepted from the memo; a failing check
    # raises before anything is memoised, so the first error is the unmemoised one.
    proven: set[tuple[Any, ...]] = set()
    rows: dict[int, tuple[int, int, int, int]] = {}
    for tensor in tensors:
        tensor_id = tensor.tensor_id
        tensor_fragments = by_tensor.get(tensor_id)
        if not tensor_fragments:
            raise ValueError(f"global placement tensor is not fully covered: {tensor_id}")
        key: Optional[tuple[Any, ...]] = None
        if len(tensor_fragments) <= _MEMO_MAX_FRAGMENTS:
            items = []
            for fragment in tensor_fragments:
                state = _fragment_fields_state(fragment)  # its fields (C layout, no __dict__)
                rank = state["rank"]
                row = rows.get(id(rank))
                if row is None:
                    rank_state = rank.__dict__
                    row = rows[id(rank)] = (
                        rank_state["dp"],
                        rank_state["tp"],
                        rank_state["pp"],
                        rank_state["ep"],
                    )
                items.append((row, state["global_offset"], state["local_shape"]))
            boxes = frozenset(items)
            if len(boxes) == len(items):
                key = (tensor.global_shape, tensor.parallel_axes, boxes)
                if key in proven:
                    continue
        _check_tensor(tensor, tensor_fragments, sizes, topology, indexes)
        if key is not None:
            proven.add(key)


_MEMO_MAX_FRAGMENTS = 4096


def _topology_sizes(topology: ParallelTopology) -> dict[str, int]:
    return {
        "dp": topology.dp_size,
        "pp": topology.pp_size,
        "ep": topology.ep_size,
        "tp": topology.tp_size,
    }


def _validate_with_table(
    tensors: Sequence[TensorDescriptor],
    fragments: Sequence[PlacementFragment],
    topology: ParallelTopology,
    table: _native.FragmentTable,
) -> None:
    # A tensor's check is a pure function of (global_shape, parallel_axes) and the set of
    # its fragments' (rank, offset, shape); C reports tensors repeating an earlier tensor's
    # problem exactly (no hash is trusted), so only the first of each kind is checked here,
    # in tensor order, which keeps the first error the same.
    class_of = _tensor_classes(tensors)
    # Tensor order: the first tensor without fragments raises; a tensor before it that is the
    # first of its class is checked. C finds both (tensor_classes' rep, start and members read
    # at those tensors only: no int object per fragment or tensor).
    empty, checks = table.tensor_class_checks(class_of)
    sizes = _topology_sizes(topology)
    indexes: dict[tuple[Any, ...], _ParticipantIndex] = {}
    for position, members in checks:
        tensor = tensors[position]
        group = [fragments[index] for index in members]
        _check_tensor(tensor, group, sizes, topology, indexes)
    if empty >= 0:
        raise ValueError(f"global placement tensor is not fully covered: {tensors[empty].tensor_id}")


def _tensor_classes(tensors: Sequence[TensorDescriptor]) -> list[int]:
    """Each tensor's class: tensors with equal (global_shape, parallel_axes) share one, numbered
    in order of first appearance."""
    classes: dict[tuple[Any, ...], int] = {}
    # Descriptors usually share their axis objects: tensors with the same shape and the very
    # same axis objects (alive throughout, so their ids are stable) are equal without hashing
    # the axis dataclasses again; a new combination takes the equality dict once.
    by_identity: dict[tuple[Any, ...], int] = {}

    def kind_of(tensor: TensorDescriptor) -> int:
        shape = tensor.global_shape
        axes = tensor.parallel_axes
        key = (shape, tuple(map(id, axes)))
        kind = by_identity.get(key)
        if kind is None:
            kind = by_identity[key] = classes.setdefault((shape, axes), len(classes))
        return kind

    groups = (
        _native.tensor_shape_groups(tensors, TensorDescriptor) if type(tensors) is tuple else None
    )
    if groups is None:
        return [kind_of(tensor) for tensor in tensors]
    # C grouped the tensors by that identity key (shape values, axis objects), in order of first
    # appearance, without running Python code: keying each group's first tensor meets the keys,
    # and runs the equality lookups, in the order the per-tensor path does
    of, firsts = groups
    kinds = [kind_of(tensors[first]) for first in firsts]
    return list(map(kinds.__getitem__, of))


def _check_tensor(
    tensor: TensorDescriptor,
    tensor_fragments: list[PlacementFragment],
    sizes: dict[str, int],
    topology: ParallelTopology,
    indexes: dict[tuple[Any, ...], _ParticipantIndex],
) -> None:
    tensor_id = tensor.tensor_id
    axes = tensor.parallel_axes
    declared = {axis.kind for axis in axes}
    _check_undeclared_axes(tensor_id, axes, declared, sizes, tensor_fragments)
    owner_kinds = tuple(axis.kind for axis in axes if isinstance(axis, OwnershipAxis))
    replica_kinds = tuple(axis.kind for axis in axes if isinstance(axis, ReplicatedAxis))
    split_axes = tuple(axis for axis in axes if isinstance(axis, SplitAxis))
    split_kinds = tuple(axis.kind for axis in split_axes)
    signature = (owner_kinds, replica_kinds, split_kinds)
    index = indexes.get(signature)
    if index is None:
        index = _participant_index(topology, owner_kinds, replica_kinds, split_kinds)
        indexes[signature] = index
    _check_owner_covers(
        tensor, tensor_fragments, owner_kinds, replica_kinds, split_axes, sizes, index
    )


def _check_undeclared_axes(
    tensor_id: str,
    axes: tuple[Any, ...],
    declared: set[str],
    sizes: dict[str, int],
    fragments: list[PlacementFragment],
) -> None:
    for kind in _KINDS:
        if kind in declared or sizes[kind] <= 1:
            continue
        used = {fragment.rank.__dict__[kind] for fragment in fragments}
        if kind in ("dp", "pp") or len(used) <= 1:
            raise ValueError(
                "global placement tensor requires explicit parallel semantics for active "
                f"undeclared {kind} axis: {tensor_id}"
            )
        varying = tuple(
            axis.kind
            for axis in axes
            if len({fragment.rank.__dict__[axis.kind] for fragment in fragments}) > 1
        )
        if not varying:
            raise ValueError(
                f"global placement tensor varies across undeclared {kind} axis: {tensor_id}"
            )
        mapping: dict[tuple[int, ...], int] = {}
        for fragment in fragments:
            state = fragment.rank.__dict__
            key = _coords(state, varying)
            coordinate = state[kind]
            if mapping.setdefault(key, coordinate) != coordinate:
                raise ValueError(
                    "global placement tensor varies independently across undeclared "
                    f"{kind} axis: {tensor_id}"
                )


def _check_owner_covers(
    tensor: TensorDescriptor,
    fragments: list[PlacementFragment],
    owner_kinds: tuple[str, ...],
    replica_kinds: tuple[str, ...],
    split_axes: tuple[SplitAxis, ...],
    sizes: dict[str, int],
    index: _ParticipantIndex,
) -> None:
    tensor_id = tensor.tensor_id
    split_kinds = tuple(axis.kind for axis in split_axes)
    # Group by rank object first (fragments share a few rank objects), then map each
    # distinct rank to its owner / replica coordinates. Fragment order inside a group does
    # not matter to any check below.
    by_rank_object: dict[int, list[PlacementFragment]] = {}
    rank_objects: dict[int, Any] = {}
    ranks = list(map(_RANK, fragments))
    if len(set(map(id, ranks))) == 1:  # one rank object: no per-fragment grouping
        by_rank_object[id(ranks[0])] = fragments
        rank_objects[id(ranks[0])] = ranks[0]
    else:
        for fragment, rank in zip(fragments, ranks):
            bucket = by_rank_object.get(id(rank))
            if bucket is None:
                bucket = by_rank_object[id(rank)] = []
                rank_objects[id(rank)] = rank
            bucket.append(fragment)
    owners: dict[tuple[int, ...], dict[tuple[int, ...], list[PlacementFragment]]] = {}
    for key, bucket in by_rank_object.items():
        state = rank_objects[key].__dict__
        owner = _coords(state, owner_kinds)
        replica = _coords(state, replica_kinds)
        owners.setdefault(owner, {}).setdefault(replica, []).extend(bucket)
    global_shape = tensor.global_shape
    origin = (0,) * len(global_shape)
    for owner in sorted(owners):
        replicas = owners[owner]
        expected = index.get(owner, {})
        if set(replicas) != set(expected):
            raise ValueError(
                "global placement tensor is not fully covered: missing or unexpected "
                f"replicated-axis participant for {tensor_id}"
            )
        for replica in sorted(replicas):
            group = replicas[replica]
            if not _native.boxes_exactly_cover(
                origin,
                global_shape,
                list(map(_OFFSET, group)),
                list(map(_SHAPE, group)),
            ):
                raise ValueError(f"global placement tensor is not fully covered: {tensor_id}")
            if not split_axes:
                continue
            participant_splits = expected[replica]
            observed = {_coords(fragment.rank.__dict__, split_kinds) for fragment in group}
            for position, kind in enumerate(split_kinds):
                # Equal to set(range(size)) without materialising the range: an axis size may be
                # far larger than the participant count (e.g. tp_size=2**62 from JSON).
                size = sizes[kind]
                values = {coords[position] for coords in participant_splits}
                if len(values) != size or not all(0 <= value < size for value in values):
                    raise ValueError(
                        "global placement tensor is not fully covered: missing or unexpected "
                        f"split-axis participant for {tensor_id}"
                    )
            if observed != participant_splits:
                raise ValueError(
                    "global placement tensor is not fully covered: missing or unexpected "
                    f"split-axis participant for {tensor_id}"
                )
            _check_split_geometry(tensor, group, split_axes, observed)


def _check_split_geometry(
    tensor: TensorDescriptor,
    group: list[PlacementFragment],
    split_axes: tuple[SplitAxis, ...],
    observed: set[tuple[int, ...]],
) -> None:
    tensor_id = tensor.tensor_id
    if len(split_axes) > 1:
        per_axis = [sorted({coords[i] for coords in observed}) for i in range(len(split_axes))]
        if len(observed) != _product_size(per_axis) or observed != set(product(*per_axis)):
            raise ValueError(
                "non-Cartesian split-axis participant mapping cannot prove rank-to-dimension "
                f"ownership: {tensor_id}"
            )
    for axis in split_axes:
        kind = axis.kind
        dim = axis.dim
        intervals: dict[int, list[tuple[int, int]]] = {}
        for fragment in group:
            begin = fragment.global_offset[dim]
            intervals.setdefault(fragment.rank.__dict__[kind], []).append(
                (begin, begin + fragment.local_shape[dim])
            )
        tiles: list[tuple[int, int, int]] = []
        for rank, spans in intervals.items():
            spans.sort()
            current_begin, current_end = spans[0]
            for begin, end in spans[1:]:
                if begin <= current_end:
                    if end > current_end:
                        current_end = end
                else:
                    tiles.append((current_begin, current_end, rank))
                    current_begin, current_end = begin, end
            tiles.append((current_begin, current_end, rank))
        tiles.sort()
        position = 0
        for begin, end, _rank in tiles:
            if begin != position:
                raise ValueError(
                    "split-axis rank geometry conflicts with declared dimension: "
                    f"{tensor_id}: {kind} -> dim {dim}"
                )
            position = end
        if position != tensor.global_shape[dim]:
            raise ValueError(
                "split-axis rank geometry conflicts with declared dimension: "
                f"{tensor_id}: {kind} -> dim {dim}"
            )


def _product_size(per_axis: list[list[int]]) -> int:
    size = 1
    for values in per_axis:
        size *= len(values)
    return size



"""Fragment-level placement checks shared by parts and manifests (spec §11.4).

:func:`validate_placement_fragments` is a pure function of a tensor catalog and a
fragment list; it raises the contract's ``ValueError`` on the first violation.
Grouping is done with dicts (linear); box overlap is decided by the C kernel.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import count
from operator import attrgetter
from typing import Any, Optional, Union

from .. import _native
from .types import PlacementFragment, TensorDescriptor, _fragment_fields_state, validate_fragment_geometry

_FRAGMENT_ID = attrgetter("placement_fragment_id")
_TENSOR_ID = attrgetter("tensor_id")
_GLOBAL_SHAPE = attrgetter("global_shape")
_ITEMSIZE = attrgetter("itemsize")

__all__ = [
    "validate_placement_fragments",
    "validate_alias_groups",
    "pack_placement_fragments",
    "fast_placement_checks",
]


def validate_placement_fragments(
    tensors: Sequence[TensorDescriptor],
    fragments: Sequence[PlacementFragment],
    *,
    check_alias_groups: bool,
) -> dict[str, TensorDescriptor]:
    """Run the §11.4 checks; return the catalog keyed by tensor id.

    ``check_alias_groups`` enables the alias-group completeness check, which only a
    complete manifest can decide (a part sees only its own fragments).
    """
    catalog: dict[str, TensorDescriptor] = {}
    for tensor in tensors:
        tensor_id = tensor.tensor_id
        if tensor_id in catalog:
            raise ValueError(f"duplicate tensor_id: {tensor_id}")
        catalog[tensor_id] = tensor
    seen_ids: set[str] = set()
    groups: dict[tuple[Any, ...], list[PlacementFragment]] = {}
    group_boxes: dict[tuple[Any, ...], set[tuple[Any, ...]]] = {}
    for fragment in fragments:
        state = _fragment_fields_state(fragment)  # its fields (C layout, no __dict__)
        fragment_id = state["placement_fragment_id"]
        if fragment_id in seen_ids:
            raise ValueError(f"duplicate fragment_id: {fragment_id}")
        seen_ids.add(fragment_id)
        tensor_id = state["tensor_id"]
        rank_state = state["rank"].__dict__
        group_key = (
            tensor_id,
            rank_state["dp"],
            rank_state["tp"],
            rank_state["pp"],
            rank_state["ep"],
        )
        group = groups.get(group_key)
        if group is None:
            groups[group_key] = [fragment]
        else:
            boxes = group_boxes.get(group_key)
            if boxes is None:
                first = group[0]
                boxes = group_boxes[group_key] = {(first.global_offset, first.local_shape)}
            box = (state["global_offset"], state["local_shape"])
            if box in boxes:
                raise ValueError(
                    f"duplicate logical fragment for tensor and parallel rank: {tensor_id}"
                )
            boxes.add(box)
            group.append(fragment)
        tensor = catalog.get(tensor_id)
        if tensor is None:
            raise ValueError(f"unknown tensor_id: {tensor_id}")
        offset = state["global_offset"]
        shape = state["local_shape"]
        global_shape = tensor.global_shape
        if len(offset) != len(global_shape) or len(shape) != len(global_shape):
            raise ValueError(f"fragment rank mismatch: {fragment_id}")
        volume = tensor.itemsize
        for begin, extent, size in zip(offset, shape, global_shape):
            if begin + extent > size:
                raise ValueError(f"fragment is out of bounds: {fragment_id}")
            volume *= extent
        if volume != state["nbytes"]:
            validate_fragment_geometry(
                tensor,
                fragment_id=fragment_id,
                global_offset=offset,
                local_shape=shape,
                nbytes=state["nbytes"],
            )
    if check_alias_groups:
        validate_alias_groups(catalog, fragments)
    for group in groups.values():
        if len(group) > 1 and _native.boxes_overlap(
            [fragment.global_offset for fragment in group],
            [fragment.local_shape for fragment in group],
        ):
            raise ValueError("logical fragment boxes overlap for tensor and parallel rank")
    return catalog


def validate_alias_groups(
    catalog: dict[str, TensorDescriptor], fragments: Sequence[PlacementFragment]
) -> None:
    """Every alias member is a known tensor whose fragments all declare that same group."""
    declared: dict[str, set[tuple[str, ...]]] = {}
    groups: dict[tuple[str, ...], None] = {}
    for fragment in fragments:
        aliases = fragment.aliases
        declared.setdefault(fragment.tensor_id, set()).add(aliases)
        if aliases:
            groups[aliases] = None
    for aliases in groups:
        for member in aliases:
            if member not in catalog:
                raise ValueError(f"alias group references unknown tensor: {member}")
        for member in aliases:
            if declared.get(member, set()) != {aliases}:
                raise ValueError(f"alias group is not declared consistently for tensor: {member}")


def pack_placement_fragments(
    tensors: Sequence[TensorDescriptor], fragments: Sequence[PlacementFragment]
) -> Optional[_native.FragmentTable]:
    """Pack ``fragments`` into a C :class:`FragmentTable` (tensor index = position in ``tensors``).

    Returns ``None`` when the input cannot be packed as is (duplicate or unknown tensor id,
    values the table rejects); the caller then takes the exact per-fragment path.
    """
    packed = _pack(tensors, fragments)
    return None if packed is None else packed[0]


_PackedFrom = tuple[
    Sequence[PlacementFragment],
    Union[list[int], bytes],
    Union[dict[str, int], tuple[tuple[str, ...], tuple[int, ...]], None],
]


def _pack(
    tensors: Sequence[TensorDescriptor],
    fragments: Sequence[PlacementFragment],
    packed_from: Optional[_PackedFrom] = None,
) -> Optional[tuple[_native.FragmentTable, bool, bool, Optional[list[int]]]]:
    """``(table, ids_increasing, any_aliases, itemsizes)``: ``itemsizes`` is
    ``[t.itemsize for t in tensors]`` when read with the shapes (exact descriptors in a tuple:
    ``_native.tensor_shape_columns``, one pass over the scattered objects, no Python code), else
    ``None`` (the caller reads them)."""
    index: Union[dict[str, int], tuple[tuple[str, ...], tuple[int, ...]], None]
    index = None if packed_from is None else packed_from[2]
    if index is None:
        # (the maps read the same attributes in the same order as comprehensions would; a
        # later duplicate id overwrites an earlier one as in a dict comprehension)
        index = dict(zip(map(_TENSOR_ID, tensors), count()))
        if len(index) != len(tensors):
            return None
    elif len(index if type(index) is dict else index[0]) != len(tensors):  # a pair: (ids, positions)
        return None
    columns = _native.tensor_shape_columns(tensors, TensorDescriptor) if type(tensors) is tuple else None
    itemsizes = None if columns is None else columns[1]
    try:
        shapes = list(map(_GLOBAL_SHAPE, tensors)) if columns is None else columns[0]
        if packed_from is not None:
            # the same fragments in another order (usually their creation order, which
            # reads their objects from memory in sequence), each placed at its row
            source, rows, _ = packed_from
            packed = _native.FragmentTable.pack_objects(shapes, index, source, rows, PlacementFragment)
        else:
            packed = _native.FragmentTable.pack_objects(shapes, index, fragments, None, PlacementFragment)
    except (KeyError, TypeError, ValueError, OverflowError, AttributeError):
        return None
    table, ids_increasing, any_aliases = packed
    return table, ids_increasing, any_aliases, itemsizes


def fast_placement_checks(
    tensors: Sequence[TensorDescriptor],
    fragments: Sequence[PlacementFragment],
    *,
    check_alias_groups: bool,
    packed_from: Optional[_PackedFrom] = None,
) -> Optional[_native.FragmentTable]:
    """The §11.4 checks of :func:`validate_placement_fragments` in bulk over a packed table.

    ``packed_from`` (optional) is ``(source, rows, index)``: the same fragments in another order
    with ``fragments[rows[i]] is source[i]``; the table is then read from ``source`` in its
    order. ``index``, when not ``None``, is ``{t.tensor_id: i for i, t in enumerate(tensors)}``
    already read (exact descriptors), or that index as the pair ``(ids, positions)`` of tuples
    (ids distinct), which the packing then uses instead of reading it again.

    Returns the table when every check passes. Returns ``None`` when any check fails (or the
    input cannot be packed): the caller then runs :func:`validate_placement_fragments`, which
    raises the contract's message for the first violation in the exact rule order. The alias
    check runs here only after every per-fragment rule passed, which is its place in that order.
    """
    packed = _pack(tensors, fragments, packed_from)
    if packed is None:
        return None
    table, ids_increasing, any_aliases, itemsizes = packed
    # ids sorted strictly increasing (the manifest's order) are unique; else count them
    if not ids_increasing and len(set(map(_FRAGMENT_ID, fragments))) != len(fragments):
        return None
    if table.bad_geometry(list(map(_ITEMSIZE, tensors)) if itemsizes is None else itemsizes) >= 0:
        return None
    if table.duplicate_logical_fragment() >= 0:
        return None
    if check_alias_groups and any_aliases:
        validate_alias_groups({tensor.tensor_id: tensor for tensor in tensors}, fragments)
    try:
        if table.overlapping_rank_group() >= 0:
            return None
    except ValueError:
        return None
    return table

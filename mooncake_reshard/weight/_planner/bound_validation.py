"""Checks on bound (runtime) plans: physical target ranges, in-place protection, executor
provenance and bound target coverage (spec §12.4-§12.7).

The physical-range sweep runs in C (``_native.physical_sweep``); this module groups the
operations, decides which target fragments are completely written, and assigns declared-alias
classes so the kernel can apply the spec's tolerance rule without calling back into Python.
"""

from __future__ import annotations

from typing import Any, Callable, Hashable, Iterable, Optional, Sequence

from math import prod

from ... import _native
from ...geometry import boxes_overlap
from .contracts import TransferRegion
from .fragments import BoundWeightFragment

_U64_MAX = (1 << 64) - 1

_STATUS_CONFLICT = 1
_STATUS_BUDGET = 2


# ---------------------------------------------------------------------------------------
# §12.6 target physical ranges


class _EqualityClasses:
    """Assigns small integers to values by ``==`` (identity first), tolerating unhashables."""

    __slots__ = ("_hashed", "_unhashed")

    def __init__(self) -> None:
        self._hashed: dict[Any, int] = {}
        self._unhashed: list[tuple[Any, int]] = []

    def index(self, value: Any) -> int:
        try:
            found = self._hashed.get(value)
            if found is None:
                found = len(self._hashed) + len(self._unhashed)
                self._hashed[value] = found
            return found
        except TypeError:
            for known, number in self._unhashed:
                if known is value or known == value:
                    return number
            number = len(self._hashed) + len(self._unhashed)
            self._unhashed.append((value, number))
            return number


class _IdentityClasses:
    """Like ``_EqualityClasses`` for large values (placements, evidence): identity memo,
    then ``==`` against the few distinct representatives seen so far."""

    __slots__ = ("_by_id", "_representatives")

    def __init__(self) -> None:
        self._by_id: dict[int, int] = {}
        self._representatives: list[Any] = []

    def index(self, value: Any) -> int:
        found = self._by_id.get(id(value))
        if found is not None:
            return found
        for number, known in enumerate(self._representatives):
            if known is value or known == value:
                self._by_id[id(value)] = number
                return number
        number = len(self._representatives)
        self._representatives.append(value)
        self._by_id[id(value)] = number
        return number


def _complete_alias_group(fragment: Any) -> Optional[tuple[str, ...]]:
    aliases = getattr(fragment, "aliases", ())
    if type(aliases) is not tuple or len(aliases) < 2 or fragment.tensor_id not in aliases:
        return None
    return aliases


def _alias_classes(operations: Sequence[Any]) -> tuple[Optional[list[int]], Optional[list[int]]]:
    """Per-operation declared-alias class (or -1) and tensor key, for the kernel's tolerance rule.

    Two operations are a *safe declared alias overlap* (spec §12.6) exactly when both are
    eligible, their classes are equal and their tensor keys differ.
    """
    if not any(getattr(op.target, "aliases", ()) for op in operations):
        return None, None
    objects = _IdentityClasses()
    owners = _EqualityClasses()
    classes = _EqualityClasses()
    tensors = _EqualityClasses()
    alias_class: list[int] = []
    tensor_key: list[int] = []
    for op in operations:
        tensor_key.append(tensors.index(op.tensor_id))
        source = op.source
        target = op.target
        group = _complete_alias_group(target)
        attestation = getattr(target, "attestation", None)
        if (
            group is None
            or attestation is None
            or _complete_alias_group(source) != group
        ):
            alias_class.append(-1)
            continue
        key = (
            group,
            source.global_offset,
            source.local_shape,
            op.source_base_offset,
            op.target_base_offset,
            op.inner_bytes,
            op.outer_loop_counts,
            op.source_strides,
            op.target_strides,
            op.overlap_offset,
            op.overlap_shape,
            target.global_offset,
            target.local_shape,
            target.address,
            target.nbytes,
            owners.index(target.owner),
            target.instance_id,
            target.runtime_lease_id,
            target.lease_generation,
            objects.index(attestation.placement),
            objects.index(attestation.evidence),
        )
        alias_class.append(classes.index(key))
    return alias_class, tensor_key


def _group_shape(
    members: list[int], operations: Sequence[Any], target: Any
) -> tuple[bool, bool]:
    """``(complete, disjoint)`` of one target-fragment group: whether its regions exactly cover
    the fragment's logical box (spec §11.3), and whether their boxes are pairwise disjoint."""
    container_offset = target.placement.global_offset
    container_shape = target.placement.local_shape
    container_volume = prod(container_shape)
    if len(members) == 1:
        op = operations[members[0]]
        complete = op.overlap_offset == container_offset and op.overlap_shape == container_shape
        return complete, True
    boxes = [(operations[i].overlap_offset, operations[i].overlap_shape) for i in members]
    try:
        disjoint = not boxes_overlap(boxes)
    except ValueError:  # the 3-D+ sweep ran out of its pairwise budget: decide by the exact sweep
        return False, False
    if not disjoint or sum(prod(shape) for _, shape in boxes) != container_volume:
        return False, disjoint
    ndim = len(container_offset)
    for offset, shape in boxes:
        if len(offset) != ndim or len(shape) != ndim:
            return False, disjoint
        for c0, ce, b0, be in zip(container_offset, container_shape, offset, shape):
            if b0 < c0 or b0 + be > c0 + ce:
                return False, disjoint
    return True, disjoint


def _check_target_physical_ranges(operations: Sequence[Any], max_segment_checks: int) -> None:
    """The §12.6 check on executable regions with runtime-bound targets."""
    # Every operation writing its own whole, alias-free target fragment, with disjoint extents
    # per address space: nothing to report (decided in C; None: the grouping below decides).
    if type(operations) in (tuple, list) and _native.physical_whole_targets(
        operations, TransferRegion, BoundWeightFragment, max_segment_checks
    ):
        return
    _sweep_target_physical_ranges(operations, max_segment_checks)


def _sweep_target_physical_ranges(operations: Sequence[Any], max_segment_checks: int) -> None:
    """``_check_target_physical_ranges`` without its C accept path: the grouping and the sweep."""
    spaces: dict[tuple[Any, ...], int] = {}
    group_by_key: dict[tuple[Any, ...], int] = {}
    group_by_target: dict[int, int] = {}
    members_by_group: list[list[int]] = []
    group_targets: list[Any] = []
    group_spaces: list[int] = []
    for index, op in enumerate(operations):
        target = op.target
        group = group_by_target.get(id(target))
        if group is None:
            binding = target.binding
            placement = target.placement
            space = (target.instance_id, binding.worker_id, binding.device)
            space_id = spaces.get(space)
            if space_id is None:
                space_id = spaces[space] = len(spaces)
            key = (
                space_id,
                binding.fragment_id,
                placement.tensor_id,
                target.lease_generation,
                binding.address,
                binding.nbytes,
                placement.global_offset,
                placement.local_shape,
            )
            group = group_by_key.get(key)
            if group is None:
                group = group_by_key[key] = len(members_by_group)
                members_by_group.append([])
                group_targets.append(target)
                group_spaces.append(space_id)
            group_by_target[id(target)] = group
        members_by_group[group].append(index)
    streams: list[int] = []
    groups: list[int] = []
    for group, members in enumerate(members_by_group):
        target = group_targets[group]
        binding = target.binding
        address = binding.address
        nbytes = binding.nbytes
        if len(members) == 1:  # ``_group_shape`` of one member, inline
            op = operations[members[0]]
            placement = target.placement
            complete = op.overlap_offset == placement.global_offset and op.overlap_shape == placement.local_shape
            disjoint = True
        else:
            complete, disjoint = _group_shape(members, operations, target)
        groups.extend((group_spaces[group], address, nbytes, 1 if disjoint else 0))
        if complete:
            streams.extend((group, members[0], 0, address, nbytes, 0))
            continue
        for i in members:
            op = operations[i]
            counts = op.outer_loop_counts
            streams.extend((group, i, 1, address + op.target_base_offset, op.inner_bytes, len(counts)))
            streams.extend(counts)
            streams.extend(op.target_strides)
    if any(target.placement.aliases for target in group_targets):
        alias_class, tensor_key = _alias_classes(operations)
    else:
        alias_class = tensor_key = None
    budget = max_segment_checks if max_segment_checks <= _U64_MAX else _U64_MAX
    try:
        outcome = _native.physical_sweep(
            streams, groups, len(spaces), len(operations), alias_class, tensor_key, budget
        )
    except (OverflowError, TypeError) as exc:
        raise ValueError(f"target physical range is invalid: {exc}") from None
    if outcome is None:
        return
    status, op_index, _previous = outcome
    if status == _STATUS_BUDGET:
        raise ValueError("target physical segment scan budget exceeded")
    if status == _STATUS_CONFLICT:
        raise ValueError(f"conflicting target physical range: {operations[op_index].target.fragment_id}")
    raise ValueError(
        f"target physical range does not fit in an unsigned 64-bit integer: {operations[op_index].target.fragment_id}"
    )


def _validate_target_physical_ranges(operations: Iterable[Any], *, max_segment_checks: int = 1_000_000) -> None:
    """Reject target byte ranges written by two operations (spec §12.6).

    ``operations`` are executable ``TransferRegion``s whose targets are ``BoundWeightFragment``s.
    Per target address space ``(instance_id, worker_id, device)`` a completely written target
    fragment counts as one free segment; other fragments are expanded segment by segment,
    each costing one unit of ``max_segment_checks``. Raises ``ValueError`` on a conflict
    ("conflicting target physical range: {fragment_id}") or an exhausted budget
    ("target physical segment scan budget exceeded").
    """
    if type(max_segment_checks) is not int or max_segment_checks <= 0:
        raise ValueError("max_segment_checks must be a positive integer")
    ops = tuple(operations)
    # The C accept path checks the exact region and target classes itself (so the loop below
    # would pass); when it declines, the loop and the sweep decide and raise.
    if _native.physical_whole_targets(ops, TransferRegion, BoundWeightFragment, max_segment_checks):
        return
    for op in ops:
        if not isinstance(op, TransferRegion):
            raise ValueError("transfer plan requires a canonical transfer operation")
        if not isinstance(op.target, BoundWeightFragment):
            raise ValueError("executable transfer plan target must be runtime-bound")
    _sweep_target_physical_ranges(ops, max_segment_checks)


# ---------------------------------------------------------------------------------------
# §12.5 in-place protection


def _validate_no_in_place(operations: Sequence[Any]) -> None:
    """Source and target allocations of one address space must not coincide (spec §12.5)."""
    sources: dict[tuple[Any, ...], set[tuple[int, int]]] = {}
    targets: dict[tuple[Any, ...], set[tuple[int, int]]] = {}
    seen: set[int] = set()  # source fragment objects done (alive in the operations meanwhile)
    for op in operations:
        source = op.source
        if id(source) not in seen and isinstance(source, BoundWeightFragment):
            seen.add(id(source))
            binding = source.binding
            sources.setdefault((source.instance_id, binding.worker_id, binding.device), set()).add(
                (binding.storage_address, binding.storage_nbytes)
            )
        target = op.target
        binding = target.binding
        targets.setdefault((target.instance_id, binding.worker_id, binding.device), set()).add(
            (binding.storage_address, binding.storage_nbytes)
        )
    for space, allocations in sources.items():
        other = targets.get(space)
        if other is not None and not allocations.isdisjoint(other):
            raise ValueError(
                f"source and target runtime storage allocations overlap in address space {space}; "
                "in-place reshard is unsupported"
            )


# ---------------------------------------------------------------------------------------
# Shared helper for per-attestation caches


def _attestation_cache(attestation: Any, name: Hashable, build: Callable[[], Any]) -> Any:
    """A derived value cached on an attestation instance (never pickled: the attestation's
    state is ``(placement, evidence)``). The cache remembers the very ``placement`` and
    ``evidence`` objects it was derived from (held, so their identities cannot be recycled) and
    is dropped when either was swapped, e.g. forged with ``object.__setattr__``."""
    values = _attestation_values(attestation)
    try:
        return values[name]
    except KeyError:
        value = values[name] = build()
        return value


def _attestation_values(attestation: Any) -> dict[Hashable, Any]:
    """The derived-value dict of ``attestation`` (see ``_attestation_cache``)."""
    state = attestation.__dict__
    cache = state.get("_derived_cache")
    if cache is None or cache[0] is not state.get("placement") or cache[1] is not state.get("evidence"):
        cache = (state.get("placement"), state.get("evidence"), {})
        state["_derived_cache"] = cache
    values: dict[Hashable, Any] = cache[2]
    return values


__all__ = ["_validate_target_physical_ranges"]

"""Ownership and DP replica choice (spec §11.2).

Owner tuples, target coverage for non-local planning, complete source DP replicas with their
chosen owners, and the unique complete owner of DP-owned source tensors. Every "fully covers"
test collapses identical geometry first and then runs the exact-cover kernel, batched.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from itertools import repeat
from operator import attrgetter, is_, itemgetter
from typing import Any, Optional

from ... import _native
from ..types import OwnershipAxis, ParallelRank, PlacementFragment, TensorDescriptor
from .contracts import RuntimeTensorOwner
from .geometry import exact_cover_failures

__all__ = [
    "check_target_coverage",
    "complete_parallel_source_replicas",
    "dp_owned_source_owners",
    "is_dp_owned",
    "owner_kinds",
    "parallel_tensor_owner",
    "tensor_signatures",
]

Box = tuple[tuple[int, ...], tuple[int, ...]]

_tensor_id = attrgetter("tensor_id")
_first = itemgetter(0)
_descriptor_id = attrgetter("tensor_id")  # of tensor descriptors (``_tensor_id``: of fragments)
_rank = attrgetter("rank")
_rank_dp = attrgetter("rank.dp")
_global_offset = attrgetter("global_offset")
_local_shape = attrgetter("local_shape")


def owner_kinds(tensor: TensorDescriptor) -> tuple[str, ...]:
    """Kinds of the tensor's ``OwnershipAxis`` values, in canonical axis order."""
    return tuple(axis.kind for axis in tensor.parallel_axes if isinstance(axis, OwnershipAxis))


def parallel_tensor_owner(tensor: TensorDescriptor, fragment: PlacementFragment) -> RuntimeTensorOwner:
    """The owner tuple of ``fragment``: ``(kind, rank.<kind>)`` per ownership axis."""
    rank = fragment.rank
    return tuple((kind, getattr(rank, kind)) for kind in owner_kinds(tensor))


def is_dp_owned(tensor: TensorDescriptor) -> bool:
    """True when the tensor declares ``OwnershipAxis("dp")``."""
    return any(isinstance(axis, OwnershipAxis) and axis.kind == "dp" for axis in tensor.parallel_axes)


Signature = tuple[tuple[str, ...], bool]


def tensor_signatures(tensors: dict[str, TensorDescriptor]) -> dict[str, Signature]:
    """``(owner_kinds(tensor), is_dp_owned(tensor))`` of every tensor, in one pass per tensor
    (DP ownership is an ``OwnershipAxis("dp")``, i.e. ``"dp"`` among the owner kinds)."""
    if type(tensors) is dict:
        native: Optional[dict[str, Signature]] = _native.owner_signatures(tensors, OwnershipAxis)
        if native is not None:
            return native
    return _tensor_signatures(tensors)


def _tensor_signatures(tensors: dict[str, TensorDescriptor]) -> dict[str, Signature]:
    """The Python form of ``tensor_signatures`` (``_native.owner_signatures``)."""
    out: dict[str, Signature] = {}
    for tensor_id, tensor in tensors.items():
        kinds = tuple(axis.kind for axis in tensor.parallel_axes if isinstance(axis, OwnershipAxis))
        out[tensor_id] = (kinds, "dp" in kinds)
    return out


class SharedSignatures:
    """The signatures of tensors that all have the one signature ``signature``: the map
    ``tensor_signatures`` gives is ``dict.fromkeys(keys, signature)`` (``keys``: the private copy
    of the tensors it was derived from, every key an exact str), made only where it is read."""

    __slots__ = ("signature", "keys")

    def __init__(self, signature: Signature, keys: dict[str, Any]) -> None:
        self.signature = signature
        self.keys = keys

    def as_map(self) -> dict[str, Signature]:
        return dict.fromkeys(self.keys, self.signature)


def shared_or_tensor_signatures(tensors: dict[str, TensorDescriptor]) -> dict[str, Signature] | SharedSignatures:
    """``tensor_signatures(tensors)`` (the same reads, in the same order), or a
    ``SharedSignatures`` standing for it when every tensor has one signature: then no map is
    built (one insert per tensor, each probe collision reading another scattered key object);
    ``check_target_coverage`` builds it only when its exact path needs it."""
    if type(tensors) is dict:
        native: Any = _native.owner_signatures(tensors, OwnershipAxis, True)
        if type(native) is tuple:
            return SharedSignatures(native[0], native[1])
        if native is not None:
            return native  # type: ignore[no-any-return]
    return _tensor_signatures(tensors)


def _signatures(
    tensors: dict[str, TensorDescriptor], signatures: Optional[dict[str, Signature] | SharedSignatures]
) -> dict[str, Signature]:
    if signatures is None:
        return tensor_signatures(tensors)
    if type(signatures) is SharedSignatures:
        return signatures.as_map()
    return signatures  # type: ignore[return-value]


def _tensor_box(tensor: TensorDescriptor) -> Box:
    return ((0,) * len(tensor.global_shape), tuple(tensor.global_shape))


def _cover_results(containers: list[Box], boxes: list[list[Box]]) -> list[bool]:
    """Exact-cover verdict of every container.

    Zero or one box is decided here (one box covers exactly when it equals the container);
    the rest go to the kernel in one call per failure (usually one call)."""
    results = [True] * len(containers)
    pending: list[int] = []
    for index, members in enumerate(boxes):
        if len(members) == 1:
            results[index] = members[0] == containers[index]
        elif not members:
            results[index] = False
        else:
            pending.append(index)
    start = 0
    while start < len(pending):
        rest = pending[start:]
        failed = exact_cover_failures([containers[i] for i in rest], [boxes[i] for i in rest])
        if failed is None:
            break
        results[rest[failed]] = False
        start += failed + 1
    return results


OwnerGroups = dict[RuntimeTensorOwner, dict[Box, None]]


def _single_signature(signatures: dict[str, Signature]) -> Optional[Signature]:
    """``(owner kinds, DP-owned)`` shared by every tensor, or ``None`` when they differ.

    One signature object shared by every tensor (``_native.owner_signatures`` reuses it for
    equal kinds) is that value without hashing it per tensor."""
    values = signatures.values()
    if type(signatures) is dict and signatures:
        first = next(iter(values))
        if all(map(is_, values, repeat(first))):
            return first
    distinct = set(values)
    return distinct.pop() if len(distinct) == 1 else None


def _table_groups_cover(placement: Any, axes: list[str]) -> bool:
    """True when the placement's packed fragment table proves that every group of fragments
    with one (tensor, rank coordinates on ``axes``), identical boxes collapsed, exactly covers
    its tensor. False when it does not or cannot tell (the exact path then decides)."""
    try:
        table = placement._fragments_table()
        return table is not None and table.uncovered_group(axes, True) < 0
    except (AttributeError, TypeError, ValueError):
        return False


def _fast_path_placement(placement: Any, tensors: dict[str, TensorDescriptor], fragments: Sequence[Any]) -> bool:
    # The table indexes the placement's own fragments and tensors: only those qualify.
    if placement is None or fragments is not placement.fragments:
        return False
    catalog = placement.tensors
    if len(tensors) != len(catalog):
        return False
    # The planner's map is built from the catalog in order: its items are then the very
    # descriptors under their very ids, exact str (distinct keys never compare equal, so each
    # id looks up its own descriptor), read in sequence; any other map takes the lookups.
    if type(tensors) is dict:
        # One C call for a tuple catalog (``_native.catalog_matches``: the same three tests in
        # the same order and short-circuits, the descriptors read a few ahead).
        matched: Optional[bool] = _native.catalog_matches(tensors, catalog)
        if matched is None:
            matched = (
                all(map(is_, tensors.values(), catalog))
                and all(map(is_, tensors, map(_descriptor_id, catalog)))
                and all(map(is_, map(type, tensors), repeat(str)))
            )
        if matched:
            return True
    return all(map(is_, map(tensors.get, map(_descriptor_id, catalog)), catalog))


def _all_pairs_present(pairs: Collection[tuple[str, int]], tensors: dict[str, TensorDescriptor], dp_count: int) -> bool:
    # Pairs are distinct and their dp values are the dp ranks; so every (tensor, dp) is
    # present exactly when the pairs name only known tensors and their count is the product.
    return len(pairs) == len(tensors) * dp_count and set(map(_first, pairs)) <= tensors.keys()


def _distinct_are_the_keys(
    distinct_tensor_ids: list[str], tensors: dict[str, TensorDescriptor], distinct_keys: Optional[list[Any]]
) -> bool:
    """``len(distinct_tensor_ids) == len(tensors) and all(map(tensors.__contains__,
    distinct_tensor_ids))`` for distinct ids. ``distinct_keys``, when given, is a list of keys of
    ``tensors`` (an exact dict), one per id: when every id *is* its key object, each is a key
    without hashing it (no hash read, no probe of the map's table at random); otherwise every
    id is looked up. The identity test is one C pass over both lists' pointers
    (``_native.same_items``) when they are exact lists."""
    if len(distinct_tensor_ids) != len(tensors):
        return False
    if type(tensors) is dict and type(distinct_keys) is list and len(distinct_keys) == len(distinct_tensor_ids):
        same: Optional[bool] = _native.same_items(distinct_tensor_ids, distinct_keys)
        if same is None:
            same = all(map(is_, distinct_tensor_ids, distinct_keys))
        if same:
            return True
    return all(map(tensors.__contains__, distinct_tensor_ids))


def _every_tensor_at_every_dp(
    tensor_ids: list[str],
    dps: list[int],
    tensors: dict[str, TensorDescriptor],
    distinct_tensor_ids: Optional[list[str]] = None,
    distinct_keys: Optional[list[Any]] = None,
) -> bool:
    """``_all_pairs_present`` of the distinct ``zip(tensor_ids, dps)`` pairs and their dp count.

    With one dp value (the usual target) the pairs are the distinct tensor ids, so no pair
    tuple is built: present exactly when those ids are the known tensors. ``distinct_tensor_ids``,
    when given, is ``list(dict.fromkeys(tensor_ids))`` (the caller's; saves a pass).
    ``distinct_keys``: see ``_distinct_are_the_keys``."""
    dp_values = set(dps)
    if len(dp_values) == 1:
        if distinct_tensor_ids is None:
            return set(tensor_ids) == tensors.keys()
        return _distinct_are_the_keys(distinct_tensor_ids, tensors, distinct_keys)
    pairs = set(zip(tensor_ids, dps))
    return _all_pairs_present(pairs, tensors, len(dp_values))


def _owner_boxes(
    signatures: dict[str, Signature], fragments: Sequence[Any], dp_owned: dict[str, bool]
) -> dict[tuple[str, int], OwnerGroups]:
    """One pass: (tensor id, dp rank or -1 for DP-owned tensors) -> owner -> collapsed boxes.

    Owners are derived once per (owner kinds, DP ownership, rank object): fragments of one part
    share few rank objects, which stay alive (held by the fragments) for the whole pass."""
    tensor_class: dict[str, int] = {}
    classes: dict[tuple[tuple[str, ...], bool], int] = {}
    class_kinds: list[tuple[tuple[str, ...], bool]] = []
    caches: list[dict[int, tuple[RuntimeTensorOwner, int]]] = []
    table: dict[tuple[str, int], OwnerGroups] = {}
    get_class = tensor_class.get
    for tensor_id, rank, geometry in zip(
        map(_tensor_id, fragments),
        map(_rank, fragments),
        zip(map(_global_offset, fragments), map(_local_shape, fragments)),
    ):
        index = get_class(tensor_id)
        if index is None:
            known = signatures.get(tensor_id)
            kinds = known[0] if known is not None else ()
            signature = (kinds, dp_owned.get(tensor_id, False))
            index = classes.get(signature)
            if index is None:
                index = classes[signature] = len(class_kinds)
                class_kinds.append(signature)
                caches.append({})
            tensor_class[tensor_id] = index
        cache = caches[index]
        entry = cache.get(id(rank))
        if entry is None:
            kinds, owned = class_kinds[index]
            owner = tuple((kind, getattr(rank, kind)) for kind in kinds) if kinds else ()
            entry = cache[id(rank)] = (owner, -1 if owned else rank.dp)
        table.setdefault((tensor_id, entry[1]), {}).setdefault(entry[0], {})[geometry] = None
    return table


def _dp_owned_map(signatures: dict[str, Signature]) -> dict[str, bool]:
    return {tensor_id: signature[1] for tensor_id, signature in signatures.items()}


def _queue(
    containers: list[Box], boxes: list[list[Box]], tensor: TensorDescriptor, groups: Optional[OwnerGroups]
) -> tuple[int, int]:
    first = len(containers)
    if groups:
        box = _tensor_box(tensor)
        for members in groups.values():
            containers.append(box)
            boxes.append(list(members))
    return first, len(containers)


def check_target_coverage(
    tensors: dict[str, TensorDescriptor],
    fragments: Sequence[PlacementFragment],
    placement: Any = None,
    signatures: Optional[dict[str, Signature] | SharedSignatures] = None,
    tensor_ids: Optional[list[str]] = None,
    dps: Optional[list[int]] = None,
    distinct_tensor_ids: Optional[list[str]] = None,
    distinct_keys: Optional[list[Any]] = None,
) -> None:
    """Target coverage for non-local planning (spec §11.2).

    With ``placement`` (whose own tensors and fragments these are) and one ownership signature
    shared by every tensor, the packed fragment table decides the common all-covered case in
    C; anything else (or any doubt) takes the exact path, which reports the first failure.
    ``tensor_ids``, when given, is the caller's list of the fragments' tensor ids (same order,
    same length); it saves a pass over the fragments and is checked against them by length.
    ``dps``, when given with ``tensor_ids``, is likewise the list of their ``rank.dp`` values;
    ``distinct_tensor_ids``, when given with ``tensor_ids``, is ``list(dict.fromkeys(tensor_ids))``;
    ``distinct_keys``, when given with it, keys of ``tensors`` paired with those ids (see
    ``_every_tensor_at_every_dp``). ``signatures`` may be a ``SharedSignatures``
    (``shared_or_tensor_signatures``): its map is made only for the exact path."""
    if not fragments:
        raise ValueError("target manifests have no fragments")
    shared = signatures if type(signatures) is SharedSignatures else None
    signatures = _signatures(tensors, signatures) if shared is None else None
    if _fast_path_placement(placement, tensors, fragments):
        # (the one signature of every tensor: _single_signature of its map)
        signature = shared.signature if shared is not None else _single_signature(signatures)  # type: ignore[arg-type]
        if signature is not None:
            kinds, owned = signature
            if tensor_ids is None or type(tensor_ids) is not list or len(tensor_ids) != len(fragments):
                tensor_ids = list(map(_tensor_id, fragments))
                dps = None
                distinct_tensor_ids = None
            if type(distinct_tensor_ids) is not list:
                distinct_tensor_ids = None
                distinct_keys = None
            if owned:
                if distinct_tensor_ids is None:
                    present = set(tensor_ids) == tensors.keys()
                else:
                    present = _distinct_are_the_keys(distinct_tensor_ids, tensors, distinct_keys)
                axes = list(kinds)
            else:
                if dps is None or type(dps) is not list or len(dps) != len(tensor_ids):
                    dps = list(map(_rank_dp, fragments))
                # no tuple per fragment for the usual single dp value (same answer)
                present = _every_tensor_at_every_dp(tensor_ids, dps, tensors, distinct_tensor_ids, distinct_keys)
                axes = ["dp", *kinds]
            if present and _table_groups_cover(placement, axes):
                return
    if signatures is None:
        signatures = shared.as_map()  # type: ignore[union-attr]
    dp_ranks = sorted(set(map(_rank_dp, fragments)))
    dp_owned = _dp_owned_map(signatures)
    table = _owner_boxes(signatures, fragments, dp_owned)
    # One entry per (tensor, dp) check in reporting order; each owns a run of containers.
    checks: list[tuple[str, int, bool, int, int]] = []
    containers: list[Box] = []
    boxes: list[list[Box]] = []
    for tensor_id in sorted(tensors):
        tensor = tensors[tensor_id]
        for dp in ((-1,) if dp_owned[tensor_id] else dp_ranks):
            groups = table.get((tensor_id, dp))
            first, end = _queue(containers, boxes, tensor, groups)
            checks.append((tensor_id, dp, bool(groups), first, end))
    verdicts = _cover_results(containers, boxes)
    for tensor_id, dp, has_groups, first, end in checks:
        if has_groups and all(verdicts[first:end]):
            continue
        if dp < 0:
            raise ValueError(f"target tensor is not fully covered by its DP owner: {tensor_id}")
        raise ValueError(f"target tensor is not fully covered: {tensor_id}: dp={dp}")


def _owner_minimums(fragments: Sequence[Any], kinds: tuple[str, ...]) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    """``{(tensor_id, rank.dp): least (rank.<kind> for kind in kinds)}`` over ``fragments``
    (the Python form of ``_native.owner_minimums``)."""
    triples = set(
        zip(
            map(_tensor_id, fragments),
            map(_rank_dp, fragments),
            *(map(attrgetter(f"rank.{kind}"), fragments) for kind in kinds),
        )
    )
    minimum: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    for triple in triples:
        key = triple[:2]
        values = triple[2:]
        best = minimum.get(key)
        if best is None or values < best:
            minimum[key] = values
    return minimum


def _group_minimums(
    minimum: dict[tuple[Any, ...], tuple[Any, ...]], kinds: tuple[str, ...]
) -> tuple[dict[int, dict[str, RuntimeTensorOwner]], int]:
    """``({dp: {tensor_id: tuple(zip(kinds, least))}}, len(minimum))`` from ``_owner_minimums``'
    map, in its order, one owner tuple per distinct least values (the Python form of
    ``_native.owner_minimums(..., grouped=True)``)."""
    by_dp: dict[int, dict[str, RuntimeTensorOwner]] = {}
    owners: dict[tuple[Any, ...], RuntimeTensorOwner] = {}
    for (tensor_id, dp), values in minimum.items():
        owner = owners.get(values)
        if owner is None:
            owner = owners[values] = tuple(zip(kinds, values))
        chosen = by_dp.get(dp)
        if chosen is None:
            chosen = by_dp[dp] = {}
        chosen[tensor_id] = owner
    return by_dp, len(minimum)


def complete_parallel_source_replicas(
    tensors: dict[str, TensorDescriptor],
    fragments: Sequence[PlacementFragment],
    placement: Any = None,
    signatures: Optional[dict[str, Signature]] = None,
) -> dict[int, dict[str, RuntimeTensorOwner]]:
    """Complete source DP ranks and, per rank, the chosen (minimum) owner of each tensor
    without DP ownership (spec §11.2). ``{}`` when every tensor is DP-owned.

    With ``placement`` (whose own tensors and fragments these are) and one signature without
    DP ownership shared by every tensor, the packed table decides the all-complete case in C
    and the chosen owners come from the distinct (tensor, dp, owner) triples; otherwise (or
    when some replica is incomplete) the exact path decides."""
    signatures = _signatures(tensors, signatures)
    if _fast_path_placement(placement, tensors, fragments):
        signature = _single_signature(signatures)
        if signature is not None and not signature[1]:
            kinds = signature[0]
            # Owners of one signature compare like their coordinate tuples (same kinds): the
            # least coordinates per (tensor, dp), in one C pass (``_owner_minimums`` in Python),
            # which usually returns them grouped below already (``_group_minimums``).
            found: Any = (
                _native.owner_minimums(fragments, kinds, PlacementFragment, ParallelRank, True)
                if type(fragments) in (list, tuple) and type(kinds) is tuple
                else None
            )
            if found is None:  # (a value the C pass does not compare: not of its exact kind)
                found = _owner_minimums(fragments, kinds)
            by_dp: dict[int, dict[str, RuntimeTensorOwner]]
            if type(found) is tuple:
                by_dp, pairs = found
            else:
                by_dp, pairs = _group_minimums(found, kinds)
            # The pairs are every (known tensor, dp) exactly when their count is the product and
            # each dp's tensors are known (``_all_pairs_present``: distinct pairs, so each dp then
            # has them all). They are known whenever the placement has its table, which
            # ``_table_groups_cover`` requires: the table packs only fragments whose tensor id is
            # in the catalog (by the same hash and equality as a dict), and every catalog id is
            # a key of ``tensors`` (``_fast_path_placement``); so no lookup per pair is made.
            dps = sorted(by_dp)
            if pairs == len(tensors) * len(dps) and _table_groups_cover(placement, ["dp", *kinds]):
                return {dp: by_dp[dp] for dp in dps}
    dp_owned = _dp_owned_map(signatures)
    plain = sorted(tensor_id for tensor_id, owned in dp_owned.items() if not owned)
    if not plain:
        return {}
    dp_ranks = sorted(set(map(_rank_dp, fragments)))
    table = _owner_boxes(signatures, fragments, dp_owned)
    containers: list[Box] = []
    boxes: list[list[Box]] = []
    entries: list[tuple[int, str, Optional[OwnerGroups], int, int]] = []
    for tensor_id in plain:
        tensor = tensors[tensor_id]
        for dp in dp_ranks:
            groups = table.get((tensor_id, dp))
            first, end = _queue(containers, boxes, tensor, groups)
            entries.append((dp, tensor_id, groups, first, end))
    verdicts = _cover_results(containers, boxes)
    complete: dict[int, dict[str, RuntimeTensorOwner]] = {dp: {} for dp in dp_ranks}
    for dp, tensor_id, groups, first, end in entries:
        chosen = complete.get(dp)
        if chosen is None:
            continue
        if not groups or not all(verdicts[first:end]):
            del complete[dp]
            continue
        chosen[tensor_id] = min(groups)
    if not complete:
        raise ValueError("source manifests have no complete DP replica; tensors are not fully covered")
    return complete


def dp_owned_source_owners(
    tensors: dict[str, TensorDescriptor],
    fragments: Sequence[PlacementFragment],
    signatures: Optional[dict[str, Signature]] = None,
) -> dict[str, RuntimeTensorOwner]:
    """The single complete declared owner of each DP-owned source tensor (spec §11.2)."""
    signatures = _signatures(tensors, signatures)
    # one signature object shared by every tensor (the usual case, see _single_signature) without
    # DP ownership: no DP-owned tensor, decided without a pass over the items
    values = signatures.values()
    if type(signatures) is dict and signatures:
        first = next(iter(values))
        if not first[1] and all(map(is_, values, repeat(first))):
            return {}
    # the DP-owned tensors, read from the signatures directly (the map below only when some are)
    owned = sorted(tensor_id for tensor_id, signature in signatures.items() if signature[1])
    if not owned:
        return {}
    dp_owned = _dp_owned_map(signatures)
    table = _owner_boxes(signatures, [f for f in fragments if dp_owned.get(f.tensor_id, False)], dp_owned)
    containers: list[Box] = []
    boxes: list[list[Box]] = []
    entries: list[tuple[str, list[RuntimeTensorOwner], int]] = []
    for tensor_id in owned:
        groups = table.get((tensor_id, -1))
        first, _ = _queue(containers, boxes, tensors[tensor_id], groups)
        entries.append((tensor_id, list(groups) if groups else [], first))
    verdicts = _cover_results(containers, boxes)
    result: dict[str, RuntimeTensorOwner] = {}
    for tensor_id, owners, first in entries:
        complete = [owner for i, owner in enumerate(owners) if verdicts[first + i]]
        if not complete:
            raise ValueError(f"DP-owned source tensor has no complete declared owner: {tensor_id}")
        if len(complete) > 1:
            raise ValueError(f"DP-owned source tensor has ambiguous declared owners: {tensor_id}")
        result[tensor_id] = complete[0]
    return result

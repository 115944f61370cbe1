"""The planning loop (spec §11.1): tensor sets, source kind, DP replica choice, candidate
groups, one C call for overlaps and region geometry, operation order, executor projections.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from itertools import chain, repeat
from operator import attrgetter, is_, itemgetter
from typing import Any, Optional

from ... import _native
from ..placement import WeightPlacementManifest
from ..storage_manifest import StoredFragmentSnapshot, StoredWeightManifest
from ..types import ParallelRank, PlacementFragment, TensorDescriptor
from .contracts import (
    LogicalTransferPlan,
    PlacementExecutorPlan,
    PlanningLimits,
    TransferRegion,
    _trusted_logical_plan,
)
from .geometry import FragmentBoxes, plan_overlap_regions, plan_region_objects
from .ownership import (
    _single_signature,
    check_target_coverage,
    complete_parallel_source_replicas,
    dp_owned_source_owners,
    shared_or_tensor_signatures,
    tensor_signatures,
)

__all__ = ["plan_logical_transfer", "project_executors"]

_chain = chain.from_iterable
_placement_fragment_id = attrgetter("placement_fragment_id")
_tensor_id = attrgetter("tensor_id")
_rank_dp = attrgetter("rank.dp")
_global_offset = attrgetter("global_offset")
_local_shape = attrgetter("local_shape")
_nbytes = attrgetter("nbytes")
_record_source = itemgetter(0)
_record_target = itemgetter(1)
_new_object = object.__new__
_set_attr = object.__setattr__


def _ids(values: Any) -> str:
    return ", ".join(sorted(values))


def _compatibility_error(source: TensorDescriptor, target: TensorDescriptor) -> Optional[str]:
    tensor_id = target.tensor_id
    if source.layout_fingerprint != target.layout_fingerprint:
        return f"layout mismatch for tensor {tensor_id}"
    if (
        source.global_shape != target.global_shape
        or source.dtype != target.dtype
        or source.itemsize != target.itemsize
        or source.layer_id != target.layer_id
        or source.expert_id != target.expert_id
    ):
        return f"tensor descriptor mismatch: {tensor_id}"
    return None


def project_executors(
    placement: WeightPlacementManifest,
    used_fragment_ids: set[str] | list[str],
    side: str,
    participants: Optional[set[str]] = None,
) -> tuple[PlacementExecutorPlan, ...]:
    """Executor projections of one side (spec §11.1 step 7).

    Built through the trusted path (``_native.project_executors``: class allocator + field
    dict): ids come from a validated placement part (non-empty, unique), so the executor's own
    ``__post_init__`` checks hold by construction. Ranks must be unique among the projected
    parts (the first repeat, in part order, is reported); executors are ordered by rank key."""
    # an exact list stands for the set of its values (see _used_ids)
    used = used_fragment_ids if type(used_fragment_ids) in (set, list) else set(used_fragment_ids)
    included: Optional[list[tuple[Any, Any]]] = _native.project_executors(
        PlacementExecutorPlan, placement.placement_id, placement.parts, used, participants, PlacementFragment
    )
    if included is None:  # a value the C pass does not read (not of its exact kind): the rules' form
        return _project_executors_python(placement, used_fragment_ids, side, participants)
    keys = list(map(_record_source, included))
    if len(set(keys)) != len(keys):
        seen: set[Any] = set()
        for key, executor in included:
            if key in seen:
                raise ValueError(f"duplicate {side} placement executor rank: {executor.rank}")
            seen.add(key)
    included.sort(key=_record_source)  # by rank key (unique)
    return tuple(map(_record_target, included))


def _project_executors_python(
    placement: WeightPlacementManifest,
    used_fragment_ids: set[str] | list[str],
    side: str,
    participants: Optional[set[str]] = None,
) -> tuple[PlacementExecutorPlan, ...]:
    """The Python form of ``project_executors`` (the tests' reference)."""
    if type(used_fragment_ids) is list:  # stands for the set of its values
        used_fragment_ids = set(used_fragment_ids)
    included: list[tuple[tuple[int, int, int, int], PlacementExecutorPlan]] = []
    ranks: set[tuple[int, int, int, int]] = set()
    placement_id = placement.placement_id
    new_executor = _new_object
    set_dict = _set_attr
    executor_type = PlacementExecutorPlan
    for part in placement.parts:
        if participants is not None and part.participant_id not in participants:
            continue
        fragment_ids = list(map(_placement_fragment_id, part.fragments))
        if not fragment_ids or used_fragment_ids.isdisjoint(fragment_ids):
            continue
        rank = part.rank
        key = (rank.dp, rank.pp, rank.ep, rank.tp)
        if key in ranks:
            raise ValueError(f"duplicate {side} placement executor rank: {rank}")
        ranks.add(key)
        fragment_ids.sort()
        executor = new_executor(executor_type)
        set_dict(
            executor,
            "__dict__",
            {
                "placement_id": placement_id,
                "participant_id": part.participant_id,
                "rank": rank,
                "placement_fragment_ids": tuple(fragment_ids),
            },
        )
        included.append((key, executor))
    included.sort(key=_record_source)  # by rank key (unique)
    return tuple(map(_record_target, included))


def _source_order_key(fragment: Any) -> tuple[Any, ...]:
    if isinstance(fragment, StoredFragmentSnapshot):
        return (0, 0, 0, 0, fragment.object_key, fragment.fragment_id)
    rank = fragment.rank
    return (rank.dp, rank.pp, rank.ep, rank.tp, fragment.placement_fragment_id)


def _fragment_id(fragment: Any) -> str:
    if isinstance(fragment, StoredFragmentSnapshot):
        return fragment.fragment_id
    return fragment.placement_fragment_id


def _members_exact(
    members: list[list[Any]],
    source_fragments: Sequence[Any],
    stored: bool,
    needed: dict[tuple[str, Optional[int]], int],
    needed_tensors: set[str],
    source_signatures: dict[str, Any],
    dp_owners: dict[str, Any],
    complete: dict[int, dict[str, Any]],
) -> None:
    """Step 4 as the spec states it: group the needed tensors' source fragments by geometry,
    order each group (``_source_order_key``) and append, per group and cover, its first eligible
    fragment to ``members[cover]`` (stored sources: the group's first fragment)."""
    by_tensor: dict[str, dict[tuple[Any, Any], list[Any]]] = {}
    for fragment in source_fragments:
        tensor_id = fragment.tensor_id
        if tensor_id not in needed_tensors:
            continue
        groups = by_tensor.setdefault(tensor_id, {})
        geometry = (fragment.global_offset, fragment.local_shape)
        bucket = groups.get(geometry)
        if bucket is None:
            groups[geometry] = [fragment]
        else:
            bucket.append(fragment)
    # Owners derived once per (owner kinds, rank object); the fragments keep the ranks alive.
    owner_caches: dict[tuple[str, ...], dict[int, tuple[tuple[str, int], ...]]] = {}
    for tensor_id, groups in by_tensor.items():
        kinds = source_signatures[tensor_id][0]
        owner_cache = owner_caches.setdefault(kinds, {})
        dp_owner = dp_owners.get(tensor_id)
        owned = dp_owner is not None
        for group in groups.values():
            if len(group) > 1:
                group.sort(key=_source_order_key)
            if stored:
                cover = needed.get((tensor_id, None))
                if cover is not None:
                    members[cover].append(group[0])
                continue
            taken: set[int] = set()
            for fragment in group:
                rank = fragment.rank
                owner = owner_cache.get(id(rank))
                if owner is None:
                    owner = owner_cache[id(rank)] = tuple((kind, getattr(rank, kind)) for kind in kinds)
                if owned:
                    if owner != dp_owner:
                        continue
                    key = (tensor_id, None)
                else:
                    chosen = complete.get(rank.dp)
                    if chosen is None or chosen.get(tensor_id) != owner:
                        continue
                    key = (tensor_id, rank.dp)
                cover = needed.get(key)
                if cover is None or cover in taken:
                    continue
                taken.add(cover)
                members[cover].append(fragment)
                if owned:
                    break


def _placed_members(
    members: list[list[Any]],
    source_fragments: Sequence[Any],
    stored: bool,
    needed: dict[tuple[str, Optional[int]], int],
    needed_tensors: set[str],
    source_signatures: dict[str, Any],
    dp_owners: dict[str, Any],
    complete: dict[int, dict[str, Any]],
) -> None:
    """``_members_exact`` for placement sources in one pass, without sorting the groups.

    Within a geometry group every eligible fragment of one cover competes for that cover, and
    the exact path takes the first in ``_source_order_key`` order: the minimum. So one pass
    keeps, per (cover, geometry), the eligible fragment with the smallest key (the first on a
    tie, like the stable sort), numbering geometries by first occurrence among all the
    needed tensors' fragments (the exact path's group order); each cover then receives its
    picks in that order."""
    if stored:  # not reached from the planner; kept exact for any other caller
        _members_exact(
            members, source_fragments, stored, needed, needed_tensors, source_signatures, dp_owners, complete
        )
        return
    positions: dict[tuple[Any, Any, Any], int] = {}
    picks: dict[tuple[int, int], Any] = {}
    states: dict[str, tuple[dict[int, tuple[tuple[str, int], ...]], tuple[str, ...], Any]] = {}
    # Owners derived once per (owner kinds, rank object); the fragments keep the ranks alive.
    owner_caches: dict[tuple[str, ...], dict[int, tuple[tuple[str, int], ...]]] = {}
    position_of = positions.setdefault
    complete_get = complete.get
    needed_get = needed.get
    picked = picks.get
    for fragment in source_fragments:
        tensor_id = fragment.tensor_id
        if tensor_id not in needed_tensors:
            continue
        position = position_of((tensor_id, fragment.global_offset, fragment.local_shape), len(positions))
        state = states.get(tensor_id)
        if state is None:
            kinds = source_signatures[tensor_id][0]
            state = states[tensor_id] = (owner_caches.setdefault(kinds, {}), kinds, dp_owners.get(tensor_id))
        owner_cache, kinds, dp_owner = state
        rank = fragment.rank
        owner = owner_cache.get(id(rank))
        if owner is None:
            owner = owner_cache[id(rank)] = tuple((kind, getattr(rank, kind)) for kind in kinds)
        if dp_owner is not None:
            if owner != dp_owner:
                continue
            cover = needed_get((tensor_id, None))
        else:
            dp = rank.dp
            chosen = complete_get(dp)
            if chosen is None or chosen.get(tensor_id) != owner:
                continue
            cover = needed_get((tensor_id, dp))
        if cover is None:
            continue
        slot = (cover, position)
        best = picked(slot)
        if best is None or _source_order_key(fragment) < _source_order_key(best):
            picks[slot] = fragment
    for (cover, _), fragment in sorted(picks.items(), key=_record_source):
        members[cover].append(fragment)


# From this many items on, the bulk forms below (C passes that read no object) pay for their
# fixed cost; smaller inputs (the contract benchmark's plans) keep the plain dict/set.
_BULK = 1024


def _hashed_dict(pairs: Any) -> dict[Any, Any]:
    """``dict(pairs)`` as a dict that keeps each key's hash in its entries: CPython keeps none
    in a dict that has only ever held str keys, so each insert or probe that meets another key,
    and each resize, re-reads that key's hash from its own (scattered) str object, a cache
    miss per key once the ids outgrow the cache. Having held another key (None, stored and
    deleted here: its hash and equality run no code) is all that differs; the result is an
    ordinary dict with the same items in the same order (``_native.catalog_map`` builds its
    maps the same way)."""
    out: dict[Any, Any] = {None: None}
    del out[None]
    out.update(pairs)
    return out


def _distinct_in_order(values: list[Any]) -> list[Any]:
    """``list(dict.fromkeys(values))``: the repeats of one object dropped first by identity in C
    (no object read), so each distinct object is hashed once rather than every item (a tensor's
    id object is shared by its fragments, scattered in id order). Same keys, same order: an
    object's first appearance is its value's first appearance or a later one of that value.
    Only for exact str (their hash and equality run no code and never raise, so skipping the
    repeats skips nothing observable) and from ``_BULK`` items on; otherwise ``dict.fromkeys``
    over every item."""
    if len(values) < _BULK:
        return list(dict.fromkeys(values))
    distinct = _native.distinct_objects(values)
    if all(map(is_, map(type, distinct), repeat(str))):
        return list(dict.fromkeys(distinct))
    return list(dict.fromkeys(values))


def _first_table(placement: Any, fragments: Sequence[Any], tensor_ids: list[str]) -> Any:
    """The placement's fragment table when ``fragments`` are its own fragments (then row i is
    ``fragments[i]`` and its tensor index the position of ``tensor_ids[i]`` in the placement's
    catalog, whose ids are distinct), from ``_BULK`` fragments on; otherwise None."""
    if len(tensor_ids) < _BULK or placement is None or fragments is not placement.fragments:
        return None
    table = placement._fragments_table()
    return table if table is not None and len(table) == len(tensor_ids) else None


def _same_keys(first: Any, second: Any) -> bool:
    """True when two exact dicts have the very same key objects in the same order (then their
    key sets are equal). False when that is not known (the caller then compares the key sets).
    Compares identities only: no key is hashed or compared by value (``_native.same_items``: the
    key pointers of both in one C pass)."""
    if type(first) is not dict or type(second) is not dict or len(first) != len(second):
        return False
    same: Optional[bool] = _native.same_items(first, second)
    return all(map(is_, first, second)) if same is None else same


def _first_tensors_and_keys(table: Any, tensor_ids: list[str], tensors: dict[str, Any]) -> tuple[list[str], Optional[list[Any]]]:
    """``(table.first_tensors(tensor_ids)[0], keys)``: the targets' distinct tensor ids in
    first-appearance order and ``keys``, the keys of ``tensors`` (in the map's order) at those
    tensors' catalog positions, gathered by the same table pass; ``keys`` is None when the map
    is not an exact dict with as many keys as the table has tensors. Where ``keys[i] is ids[i]``, that id is a key
    of ``tensors`` whatever the positions mean (``_every_tensor_at_every_dp``'s proof)."""
    if type(tensors) is dict:
        try:
            ordered, gathered = table.first_tensors(tensor_ids, list(tensors))
            return ordered, gathered
        except ValueError:  # another count of keys than of table tensors (checked first)
            pass
    return table.first_tensors(tensor_ids)[0], None


def _tensor_columns_by_catalog(
    table: Any,
    placement: Any,
    count: int,
    source_tensors: dict[str, TensorDescriptor],
    target_tensors: dict[str, TensorDescriptor],
    signatures: dict[str, Any],
) -> Optional[tuple[list[int], list[int], list[bool], int]]:
    """``_native.tensor_columns(ordered, ...)`` for ``ordered``, the ``count`` tensors of the
    table's rows in first-appearance order, when every catalog tensor is among them and none
    stops the pass: the same lookups and comparisons per tensor, made in catalog order (the
    descriptors read in sequence rather than at random) and gathered into first-appearance order
    by the table (``first_tensors``: catalog position -> first-appearance position). None
    otherwise (some catalog tensor without fragments, a tensor that stops the pass, an error):
    the caller then makes the call in first-appearance order, which decides and reports."""
    catalog_ids = list(map(_tensor_id, placement.tensors))
    if len(catalog_ids) != count:
        return None
    try:
        ndims, itemsizes, routed, stop = _native.tensor_columns(catalog_ids, source_tensors, target_tensors, signatures)
    except Exception:  # the call in first-appearance order raises it again, or stops first
        return None
    if stop != count:
        return None
    _, ndims, itemsizes, routed = table.first_tensors(None, ndims, itemsizes, routed)
    return ndims, itemsizes, routed, count


def _used_ids(ids: list[str], rows: Sequence[int], exact_strs: bool = False) -> set[str] | list[str]:
    """``{ids[r] for r in rows}`` for the kernel's used rows (distinct, increasing, in range):
    as many rows as ids are every id (then no indexing per row).

    With ``exact_strs`` (every id is known to be an exact str) and at least ``_BULK`` of them
    the used ids come back as a list, which ``project_executors`` takes for the set of its values: it looks the parts' ids
    up by object first (the same objects, usually) and builds the set only on a miss. Hashing
    exact strs runs no code and cannot fail, so membership and errors are those of the set;
    building it reads every scattered id object, which the lookup by object does not."""
    used = ids if len(rows) == len(ids) else list(map(ids.__getitem__, rows))
    if exact_strs and type(used) is list and len(used) >= _BULK:
        return used
    return set(used)


def _sorted_ranks(ids: list[Any]) -> bytes:
    """``array("q", [ranks[i] for i in ids]).tobytes()`` with ``ranks = {i: r for r, i in
    enumerate(sorted(ids))}``. Distinct exact str ids take one C sort by their UTF-8 bytes (code
    point order; the stable sort's positions are then those ranks) instead of a comparison sort
    of scattered str objects; anything else (a repeated id, another type) the dict."""
    return _sorted_ranks_exact(ids)[0]


def _sorted_ranks_exact(ids: list[Any]) -> tuple[bytes, bool]:
    """``(_sorted_ranks(ids), every id is an exact str)`` (the second is False when unknown)."""
    # (positions packed as native int64, and whether no two ids are equal: decided in C from the
    # sorted keys, equal UTF-8 bytes being equal strs, without a sorted list or an == per pair)
    native = _native.sorted_by_str_keys(ids, ids, True, True) if type(ids) is list else None
    if native is not None:  # the C sort read every id: each is an exact str
        positions, distinct = native
        if distinct:
            return positions, True
    ranks = {fid: i for i, fid in enumerate(sorted(ids))}
    return array("q", [ranks[fid] for fid in ids]).tobytes(), native is not None


def _all_instances(items: Sequence[Any], cls: type) -> bool:
    """``all(map(isinstance, items, repeat(cls)))``. A list or tuple takes one C pass
    (``_native.all_instances``: the same isinstance test per item, in order, stopping at the
    first miss, but reading each object's type a few items ahead: the fragments of a large
    placement are scattered in memory); anything else the builtin."""
    native: Optional[bool] = _native.all_instances(items, cls)
    if native is None:
        return all(map(isinstance, items, repeat(cls)))
    return native


_NO_BOXES = FragmentBoxes()  # stands for a side the kernel receives already packed (never read)


def _select_placed_native(
    source_fragments: Sequence[Any],
    tensor_index: dict[str, int],
    ndim_packed: bytes,
    complete_ranks: list[int],
    cover_keys: list[int],
    source_signatures: dict[str, Any],
    dp_owners: dict[str, Any],
    complete: dict[int, dict[str, Any]],
) -> Optional[tuple[list[Any], bytes, bytes, bytes, bytes, bytes, bytes, list[Any]]]:
    """``_placed_members`` plus the source packing in one C pass (``_native.select_sources``).

    Per needed tensor (``tensor_index`` order) its owner kinds and DP owner, per complete
    replica its chosen owners. Returns the chosen fragments by (cover, geometry), their packed
    tensor / offsets / shapes / nbytes, cover_start, cover_members and their ids; None when some
    value does not fit this path (the caller then selects exactly)."""
    if not tensor_index:
        return None
    # Every planned tensor has a source signature (tensor_columns read it). One signature shared
    # by every tensor (the usual case) and no DP-owned tensor need no lookup per tensor id.
    count = len(tensor_index)
    single = _single_signature(source_signatures)
    kinds = [single[0]] * count if single is not None else [source_signatures[t][0] for t in tensor_index]
    owners = list(map(dp_owners.get, tensor_index)) if dp_owners else [None] * count
    try:
        dps = array("q", complete_ranks).tobytes()
        keys = array("q", cover_keys).tobytes()
    except (OverflowError, TypeError):
        return None
    return _native.select_sources(
        source_fragments,
        tensor_index,
        ndim_packed,
        kinds,
        owners,
        list(map(complete.__getitem__, complete_ranks)),
        dps,
        keys,
        PlacementFragment,  # exact instances (ranks exactly ParallelRank) are read in address order
        ParallelRank,
    )


def plan_logical_transfer(
    *,
    resource_id: str,
    revision: str,
    source_placement: Optional[WeightPlacementManifest],
    source_manifest: Optional[StoredWeightManifest],
    target_placement: WeightPlacementManifest,
    source_tensors: dict[str, TensorDescriptor],
    source_fragments: Sequence[Any],
    target_tensors: dict[str, TensorDescriptor],
    target_fragments: Sequence[PlacementFragment],
    local_target: bool,
    planning_limits: PlanningLimits,
    target_participants: Optional[set[str]] = None,
    source_tensor_catalog: tuple[TensorDescriptor, ...] = (),
    target_tensor_catalog: tuple[TensorDescriptor, ...] = (),
) -> LogicalTransferPlan:
    """Plan one logical transfer (spec §11.1) and build the validated plan."""
    # Targets in fragment-id order (read once here; step 1 reuses their tensor ids).
    # Manifests store fragments in id order already: then the ids are read once, not sorted.
    # One C pass reads the ids, tensor ids and DP ranks and tells whether the ids are in order.
    # The same pass reads their geometry (offsets, shapes, nbytes) for pack_targets below, in
    # object address order (a large placement's fragments in id order are scattered in memory).
    fragment_dps: Optional[list[int]] = None
    target_ids: list[str]
    target_tids: list[str] = []
    target_geometry: Optional[tuple[bytes, bytes, bytes, bytes]] = None
    target_ids_exact = False  # every target id known to be an exact str
    if type(target_fragments) in (list, tuple):
        target_ids, target_tids, fragment_dps, in_order, target_geometry = _native.fragment_columns(
            target_fragments, PlacementFragment, ParallelRank
        )
        target_ids_exact = in_order >= 0  # 0 or 1: every id an exact str (the ids sorted keep them)
        if in_order < 0:
            in_order = target_ids == sorted(target_ids)
    else:
        target_ids = list(map(_placement_fragment_id, target_fragments))
        in_order = target_ids == sorted(target_ids)
        if in_order:
            target_tids = list(map(_tensor_id, target_fragments))
    targets: Sequence[Any]
    if in_order:
        # A tuple (a placement's own fragments) is used as it is: it cannot change, and a copy
        # would touch every scattered fragment twice (its reference taken, then dropped).
        targets = target_fragments if type(target_fragments) is tuple else list(target_fragments)
        fragment_tids: Optional[list[str]] = target_tids
    else:
        fragment_dps = None
        target_geometry = None
        targets = sorted(target_fragments, key=_placement_fragment_id)
        target_ids = list(map(_placement_fragment_id, targets))
        target_tids = list(map(_tensor_id, targets))
        fragment_tids = None

    first_table: Any = None  # the target placement's table, when it has the targets' rows
    # Step 1: tensor sets.
    if not local_target:
        if not _same_keys(source_tensors, target_tensors):
            source_ids = set(source_tensors)
            target_set = set(target_tensors)
            missing = source_ids - target_set
            if missing:
                raise ValueError(f"target manifests are missing tensors: {_ids(missing)}")
            extra = target_set - source_ids
            if extra:
                raise ValueError(f"target manifests contain unknown tensors: {_ids(extra)}")
        # The targets' tensors in first-occurrence order, read once for the coverage check
        # and the tensor pass below (the check hashes every tensor id anyway). The placement's
        # own fragments take them from its table (one pass over the tensor column, no hashing),
        # with the map's keys at their catalog positions (the check's proof that each is a key).
        first_table = _first_table(target_placement, target_fragments, target_tids) if fragment_tids is not None else None
        first_keys: Optional[list[Any]] = None
        if first_table is not None:
            ordered, first_keys = _first_tensors_and_keys(first_table, target_tids, target_tensors)
        else:
            ordered = _distinct_in_order(target_tids)
        check_target_coverage(
            target_tensors,
            target_fragments,
            target_placement,
            shared_or_tensor_signatures(target_tensors),  # the map only if its exact path reads it
            fragment_tids,
            fragment_dps,
            ordered if fragment_tids is not None else None,
            first_keys if fragment_tids is not None else None,
        )
    else:
        source_ids = set(source_tensors)
        target_set = set(target_tensors)
        extra = target_set - source_ids
        if extra:
            raise ValueError(f"target manifests contain unknown tensors: {_ids(extra)}")
        if not target_fragments:
            raise ValueError("local target manifest has no fragments")
        if len({fragment.rank for fragment in target_fragments}) != 1:
            raise ValueError("local target manifest must describe exactly one executor")
        covered = {fragment.tensor_id for fragment in target_fragments}
        missing = target_set - covered
        if missing:
            raise ValueError(f"local target manifest is missing fragments: {_ids(missing)}")

    # Step 2: source kind.
    stored = bool(source_fragments) and _all_instances(source_fragments, StoredFragmentSnapshot)
    placed = bool(source_fragments) and _all_instances(source_fragments, PlacementFragment)
    if not (stored or placed):
        raise ValueError("source fragments mix placement and stored locations")

    # Step 3: DP replica selection (placement sources only).
    source_signatures = tensor_signatures(source_tensors)
    complete: dict[int, dict[str, Any]] = {}
    dp_owners: dict[str, Any] = {}
    complete_ranks: list[int] = []
    if placed:
        complete = complete_parallel_source_replicas(
            source_tensors, source_fragments, source_placement, source_signatures
        )
        dp_owners = dp_owned_source_owners(source_tensors, source_fragments, source_signatures)
        complete_ranks = sorted(complete)

    # The first target (in id order) whose tensor cannot be planned stops the pass (its error
    # is raised after the kernel has processed the targets before it); every target before it
    # gets its cover and is packed for the kernel. The per-fragment work runs as C-level maps
    # and comprehensions; tensors are visited once, in first-occurrence order.
    stop_error: Optional[str] = None
    stop = len(targets)
    columns: Optional[tuple[list[int], list[int], list[bool], int]] = None
    if local_target:
        ordered = _distinct_in_order(target_tids)
    elif first_table is not None:
        columns = _tensor_columns_by_catalog(
            first_table, target_placement, len(ordered), source_tensors, target_tensors, source_signatures
        )
    if columns is None:
        columns = _native.tensor_columns(ordered, source_tensors, target_tensors, source_signatures)
    ndims, itemsizes, routed_flags, first_stop = columns
    # The C pass checked the tensors before the first that cannot be planned; from that one
    # on (if any) the loop below decides exactly as before and derives the message.
    planned = ordered if first_stop == len(ordered) else ordered[:first_stop]  # no copy of them all
    tensor_index: dict[str, int] = _hashed_dict(zip(planned, range(first_stop)))
    # routed by its (DP) owner rather than by target DP rank, per tensor in tensor_index order (a
    # map by tensor id only where the exact packing below needs one: hashing every scattered id
    # again costs as much as a pass over the targets at scale)
    tensor_routed: list[bool] = [True] * first_stop if stored else routed_flags
    tensor_ndim: list[int] = ndims
    tensor_itemsize: list[int] = itemsizes
    for tensor_id in ordered[first_stop:]:
        source_tensor = source_tensors.get(tensor_id)
        target_tensor = target_tensors[tensor_id]
        if source_tensor is None:
            stop_error = f"missing source tensor: {tensor_id}"
        else:
            stop_error = _compatibility_error(source_tensor, target_tensor)
        if stop_error is not None:
            stop = target_tids.index(tensor_id)
            break
        tensor_index[tensor_id] = len(tensor_ndim)
        tensor_routed.append(stored or source_signatures[tensor_id][1])
        tensor_ndim.append(len(target_tensor.global_shape))
        tensor_itemsize.append(target_tensor.itemsize)
    # The processed prefix (every target unless a tensor stops the pass), without copying the
    # lists when it is all of them (the planner's own lists and the placement's tuple: none of
    # them changes after this point).
    every = stop == len(targets)
    processed = targets if every else targets[:stop]
    processed_ids = target_ids if every else target_ids[:stop]
    del target_tids[stop:]
    # One C pass packs the targets and assigns covers; None sends every target through the
    # exact Python packing below (unusual values), which reports in the contract's order.
    replica_count = len(complete_ranks)
    ndim_packed = array("q", tensor_ndim).tobytes()
    packed = _native.pack_targets(
        processed,
        tensor_index,
        ndim_packed,
        array("q", [1 if routed else 0 for routed in tensor_routed]).tobytes(),
        replica_count,
        target_tids,  # already cut to the processed targets
        None if fragment_dps is None else (fragment_dps if every else fragment_dps[:stop]),
        None if fragment_dps is None else target_geometry,  # covers the processed targets first
    )
    target_packed: Optional[tuple[bytes, bytes, bytes, bytes, bytes]] = None
    target_cover: list[int] = []
    t_tensor: list[int] = []
    t_offsets: list[int] = []
    t_shapes: list[int] = []
    t_nbytes: list[int] = []
    source_packed: Optional[tuple[bytes, bytes, bytes, bytes, bytes, bytes, bytes]] = None
    selection = None
    if packed is not None:
        target_packed = (packed[0], packed[1], packed[2], packed[3], packed[4])
        if placed:
            # Step 4 and the source packing in one C pass (None: not this path, see below).
            selection = _select_placed_native(
                source_fragments, tensor_index, ndim_packed, complete_ranks, packed[5],
                source_signatures, dp_owners, complete,
            )
    source_boxes = _NO_BOXES
    source_ids_exact = False  # every selected source id known to be an exact str
    if selection is not None:
        source_objects, s_tensor_b, s_offsets_b, s_shapes_b, s_nbytes_b, starts_b, members_b, source_fragment_ids = (
            selection
        )
        source_ranks, source_ids_exact = _sorted_ranks_exact(source_fragment_ids)
        source_packed = (s_tensor_b, s_offsets_b, s_shapes_b, s_nbytes_b, source_ranks, starts_b, members_b)
        source_order: list[int] = []
        cover_start: list[int] = []
        cover_members: list[int] = []
    else:
        needed: dict[tuple[str, Optional[int]], int] = {}
        if packed is not None:
            tensor_list = list(tensor_index)
            for cover, key in enumerate(packed[5]):
                position, slot = divmod(key, replica_count + 1)
                needed[(tensor_list[position], None if slot == replica_count else complete_ranks[slot])] = cover
        else:
            routed_of = dict(zip(tensor_index, tensor_routed))
            if all(tensor_routed):
                keys: list[tuple[str, Optional[int]]] = [(tensor_id, None) for tensor_id in target_tids]
            else:
                keys = [
                    (tensor_id, None) if routed_of[tensor_id] else (tensor_id, complete_ranks[dp % replica_count])
                    for tensor_id, dp in zip(target_tids, map(_rank_dp, processed))
                ]
            claim = needed.setdefault
            target_cover = [claim(key, len(needed)) for key in keys]
            t_tensor = [tensor_index[tensor_id] for tensor_id in target_tids]
            t_offsets = list(_chain(map(_global_offset, processed)))
            t_shapes = list(_chain(map(_local_shape, processed)))
            t_nbytes = list(map(_nbytes, processed))

        # Step 4: candidate groups and their eligible representatives per cover.
        needed_tensors = {key[0] for key in needed}
        members: list[list[Any]] = [[] for _ in needed]
        select = _placed_members if placed else _members_exact
        select(members, source_fragments, stored, needed, needed_tensors, source_signatures, dp_owners, complete)

        # Pack the selected source fragments for the kernel.
        source_boxes = FragmentBoxes()
        source_objects = []
        cover_start = [0]
        cover_members = []
        s_tensor = source_boxes.tensor
        s_offsets = source_boxes.offsets
        s_shapes = source_boxes.shapes
        s_nbytes = source_boxes.nbytes
        for cover_list in members:
            for fragment in cover_list:
                cover_members.append(len(source_objects))
                source_objects.append(fragment)
                s_tensor.append(tensor_index[fragment.tensor_id])
                s_offsets.extend(fragment.global_offset)
                s_shapes.extend(fragment.local_shape)
                s_nbytes.append(fragment.nbytes)
            cover_start.append(len(cover_members))
        source_fragment_ids = [_fragment_id(f) for f in source_objects]
        ranks = {fid: i for i, fid in enumerate(sorted(source_fragment_ids))}
        source_order = [ranks[fid] for fid in source_fragment_ids]
    target_boxes = _NO_BOXES
    if target_packed is None:
        target_boxes = FragmentBoxes()
        target_boxes.tensor = t_tensor
        target_boxes.offsets = t_offsets
        target_boxes.shapes = t_shapes
        target_boxes.nbytes = t_nbytes
    kernel: dict[str, Any] = dict(
        tensor_ndim=tensor_ndim,
        tensor_itemsize=tensor_itemsize,
        source=source_boxes,
        source_order=source_order,
        cover_start=cover_start,
        cover_members=cover_members,
        target=target_boxes,
        target_cover=target_cover,
        nprocess=stop,
        max_transfer_regions=planning_limits.max_transfer_regions,
        max_segments_per_region=planning_limits.max_segments_per_region,
        max_total_lowered_segments=planning_limits.max_total_lowered_segments,
        target_fragment_ids=processed_ids,
        target_packed=target_packed,
        source_packed=source_packed,
        tensor_ndim_packed=ndim_packed,
    )
    if stop_error is not None:
        plan_overlap_regions(**kernel)  # a kernel failure before the stopping target reports first
        raise ValueError(stop_error)

    # Steps 5-9, 5.8 and 6: one C call runs the kernel and builds the regions (already in final
    # order) through the trusted path (class allocator + field dict, no constructor: the
    # kernel proved every invariant), with the indices of the fragments they use.
    operations, used_source_rows, used_target_rows = plan_region_objects(
        TransferRegion, source_objects, processed, target_tids, **kernel
    )
    used_targets = _used_ids(processed_ids, used_target_rows, target_ids_exact)
    used_sources: set[str] | list[str] = set()
    if placed:  # source ids are placement fragment ids
        used_sources = _used_ids(source_fragment_ids, used_source_rows, source_ids_exact)

    # Step 7: executor projections.
    target_executors = project_executors(target_placement, used_targets, "target", target_participants)
    if local_target and len(target_executors) != 1:
        raise ValueError("local target placement must describe exactly one executor")
    if source_placement is not None:
        source_executors = project_executors(source_placement, used_sources, "source")
        source_catalog = tuple(source_placement.tensors)
    else:
        source_executors = ()
        source_catalog = tuple(sorted(source_tensor_catalog, key=lambda t: t.tensor_id))
    if local_target:
        target_catalog = tuple(sorted(target_tensor_catalog, key=lambda t: t.tensor_id))
    else:
        target_catalog = tuple(target_placement.tensors)
    return _trusted_logical_plan(
        resource_id=resource_id,
        revision=revision,
        source_placement=source_placement,
        target_placement=target_placement,
        source_tensors=source_catalog,
        target_tensors=target_catalog,
        operations=operations,
        source_manifest=source_manifest,
        planning_limits=planning_limits,
        source_executors=source_executors,
        target_executors=target_executors,
    )

"""Brute-force oracles, written straight from the spec, for the manifest-layer tests.

Nothing here imports the package under test.  Every function works on the plain-data model of
``layout_model.py`` (or on plain tuples) and is deliberately naive: exact cover is decided by
enumerating every cell of the tensor, so only use these oracles on small shapes.

* :func:`from_fragments_verdict` predicts whether ``WeightPlacementManifest.from_fragments`` accepts
  a layout (spec 4.8 ``from_fragments`` steps, 4.7, 11.4, 11.5) and, when it rejects, the set of
  messages a conforming implementation may raise (see the function's docstring).
* :func:`coverage_violations` is the spec 11.5 part on its own.
* :func:`fragment_id`, :func:`topology_id`, :func:`placement_id`, :func:`placement_json` restate
  spec 6.1-6.4 and 7.1 for a layout.
* :func:`boxes_overlap`, :func:`boxes_exactly_cover` restate spec 11.3 by cell enumeration.
* :func:`assembly_maps`, :func:`assembly_columns` state what ``_native.assembly_columns`` reads
  from fragment objects (attribute by attribute).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections import defaultdict
from typing import Any, Dict, FrozenSet, Iterable, List, Optional, Sequence, Set, Tuple

from layout_model import KINDS, Coord, FragmentSpec, Layout, TensorSpec

Box = Tuple[Tuple[int, ...], Tuple[int, ...]]


# ----------------------------------------------------------------------------------------------
# Cell-enumeration geometry (spec 11.3)


def cells(offset: Sequence[int], shape: Sequence[int]) -> Iterable[Tuple[int, ...]]:
    """Every integer cell of a half-open box."""
    return itertools.product(*(range(o, o + s) for o, s in zip(offset, shape)))


def boxes_overlap(boxes: Sequence[Box]) -> bool:
    """True if two boxes share at least one cell (touching is not overlap)."""
    seen: Set[Tuple[int, ...]] = set()
    for offset, shape in boxes:
        for c in cells(offset, shape):
            if c in seen:
                return True
            seen.add(c)
    return False


def box_contains(outer_offset: Sequence[int], outer_shape: Sequence[int],
                 inner_offset: Sequence[int], inner_shape: Sequence[int]) -> bool:
    return all(
        ob <= ib and ib + isz <= ob + osz
        for ob, osz, ib, isz in zip(outer_offset, outer_shape, inner_offset, inner_shape)
    )


def boxes_exactly_cover(container_offset: Sequence[int], container_shape: Sequence[int],
                        boxes: Sequence[Box]) -> bool:
    """Non-empty, every box inside, every container cell covered exactly once."""
    if not boxes:
        return False
    if not all(box_contains(container_offset, container_shape, o, s) for o, s in boxes):
        return False
    counts: Dict[Tuple[int, ...], int] = defaultdict(int)
    for offset, shape in boxes:
        for c in cells(offset, shape):
            counts[c] += 1
    return all(counts.get(c, 0) == 1 for c in cells(container_offset, container_shape)) and all(
        v == 1 for v in counts.values()
    )


# ----------------------------------------------------------------------------------------------
# Canonical identity (spec 6.1-6.4, 7.1)


def _sha(content: Any) -> str:
    return hashlib.sha256(json.dumps(content, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()


def _fragment_json(layout: Layout, f: FragmentSpec) -> Dict[str, Any]:
    """A fragment's content fields (spec 6.1 and 7.1; written with sorted keys)."""
    content: Dict[str, Any] = {
        "tensor_id": f.tensor_id,
        "global_offset": list(f.offset),
        "local_shape": list(f.shape),
        "nbytes": layout.fragment_nbytes(f),
        "rank": f.rank.as_json(),
        "aliases": sorted(f.aliases),
    }
    if f.pipeline_stage_id is not None:
        content["pipeline_stage_id"] = f.pipeline_stage_id
    return content


def fragment_id(layout: Layout, f: FragmentSpec) -> str:
    """The explicit id, or the content-derived id of spec 6.1."""
    if f.fragment_id is not None:
        return f.fragment_id
    return "sha256:" + _sha({"schema": "weight-placement-fragment", **_fragment_json(layout, f)})


def _participants_json(layout: Layout) -> List[Dict[str, Any]]:
    return [
        {"participant_id": pid, "rank": c.as_json()}
        for pid, c in sorted(layout.participants, key=lambda pc: pc[0])
    ]


def topology_id(layout: Layout) -> str:
    tp, pp, ep, dp = layout.sizes
    return "sha256:" + _sha({
        "schema": "weight-parallel-topology",
        "tp_size": tp, "pp_size": pp, "ep_size": ep, "dp_size": dp,
        "participants": _participants_json(layout),
    })


def _topology_json(layout: Layout) -> Dict[str, Any]:
    tp, pp, ep, dp = layout.sizes
    return {
        "tp_size": tp, "pp_size": pp, "ep_size": ep, "dp_size": dp,
        "topology_id": topology_id(layout),
        "participants": _participants_json(layout),
    }


def _tensor_json(t: TensorSpec) -> Dict[str, Any]:
    return {
        "tensor_id": t.tensor_id,
        "global_shape": list(t.global_shape),
        "dtype": t.dtype,
        "itemsize": t.itemsize,
        "shard_dims": list(t.shard_dims),
        "layout_fingerprint": t.layout_fingerprint,
        "parallel_axes": [a.as_json() for a in t.sorted_axes],
        "layer_id": t.layer_id,
        "expert_id": t.expert_id,
    }


def _parts_json(layout: Layout) -> List[Dict[str, Any]]:
    parts = []
    for pid, c in sorted(layout.participants, key=lambda pc: pc[0]):
        frags = []
        for f in layout.fragments:
            if f.rank != c:
                continue
            frags.append({"placement_fragment_id": fragment_id(layout, f), **_fragment_json(layout, f)})
        frags.sort(key=lambda item: item["placement_fragment_id"])
        parts.append({"participant_id": pid, "rank": c.as_json(), "fragments": frags})
    return parts


def placement_id(layout: Layout) -> str:
    return "sha256:" + _sha({
        "schema": "complete-weight-placement",
        "resource_id": layout.resource_id,
        "revision": layout.revision,
        "weight_generation": layout.weight_generation,
        "placement_set_id": layout.placement_set_id,
        "topology": _topology_json(layout),
        "tensors": [_tensor_json(t) for t in sorted(layout.tensors, key=lambda t: t.tensor_id)],
        "parts": _parts_json(layout),
    })


def placement_json(layout: Layout) -> str:
    """The exact bytes ``weight_placement_to_json`` must produce for an accepted layout."""
    payload = {
        "resource_kind": "model_weight",
        "resource_id": layout.resource_id,
        "revision": layout.revision,
        "weight_generation": layout.weight_generation,
        "placement_set_id": layout.placement_set_id,
        "placement_id": placement_id(layout),
        "topology": _topology_json(layout),
        "tensors": [_tensor_json(t) for t in sorted(layout.tensors, key=lambda t: t.tensor_id)],
        "parts": _parts_json(layout),
    }
    return json.dumps(payload, sort_keys=True, separators=(",", ":"))


def placement_digest(layout: Layout) -> str:
    return hashlib.sha256(placement_json(layout).encode()).hexdigest()


# ----------------------------------------------------------------------------------------------
# Fragment checks (spec 11.4) and complete-placement coverage (spec 11.5)


def _fragment_checks(layout: Layout, frags: Sequence[FragmentSpec], *, manifest_level: bool) -> Set[str]:
    """Messages of every violated spec 11.4 rule over ``frags`` (rules 2, 3, 5, 7 and, at the
    manifest level, 6)."""
    out: Set[str] = set()
    ids = [fragment_id(layout, f) for f in frags]
    counts: Dict[str, int] = defaultdict(int)
    for i in ids:
        counts[i] += 1
    out.update(f"duplicate fragment_id: {i}" for i, n in counts.items() if n > 1)
    logical: Dict[Tuple[Any, ...], int] = defaultdict(int)
    for f in frags:
        logical[(f.tensor_id, f.rank, f.offset, f.shape)] += 1
    out.update(
        f"duplicate logical fragment for tensor and parallel rank: {key[0]}"
        for key, n in logical.items() if n > 1
    )
    by_id = {t.tensor_id: t for t in layout.tensors}
    for f, fid in zip(frags, ids):
        t = by_id[f.tensor_id]
        if len(f.offset) != t.ndim or len(f.shape) != t.ndim:
            out.add(f"fragment rank mismatch: {fid}")
            continue
        if any(o + s > g for o, s, g in zip(f.offset, f.shape, t.global_shape)):
            out.add(f"fragment is out of bounds: {fid}")
            continue
        expected = math.prod(f.shape) * t.itemsize
        if layout.fragment_nbytes(f) != expected:
            out.add(f"fragment byte size mismatch: {fid}: expected {expected}, got {layout.fragment_nbytes(f)}")
    groups: Dict[Tuple[str, Coord], List[Box]] = defaultdict(list)
    for f in frags:
        groups[(f.tensor_id, f.rank)].append((f.offset, f.shape))
    for boxes in groups.values():
        if len({len(o) for o, _ in boxes}) == 1 and boxes_overlap(boxes):
            out.add("logical fragment boxes overlap for tensor and parallel rank")
    if manifest_level:
        for f in frags:
            for member in f.aliases:
                if member not in by_id:
                    out.add(f"alias group references unknown tensor: {member}")
        for f in frags:
            if not f.aliases:
                continue
            group = tuple(sorted(f.aliases))
            for member in group:
                member_frags = [g for g in frags if g.tensor_id == member]
                if member in by_id and any(tuple(sorted(g.aliases)) != group for g in member_frags):
                    out.add(f"alias group is not declared consistently for tensor: {member}")
    return out


def _tile_ok(intervals: List[Tuple[int, int, int]], extent: int) -> bool:
    position = 0
    for begin, end, _ in sorted(intervals):
        if begin != position:
            return False
        position = end
    return position == extent


def _merge(intervals: Iterable[Tuple[int, int]]) -> List[Tuple[int, int]]:
    merged: List[Tuple[int, int]] = []
    for b, e in sorted(intervals):
        if merged and b <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((b, e))
    return merged


def tensor_coverage_violations(layout: Layout, t: TensorSpec) -> List[str]:
    """Messages of every violated spec 11.5 rule (2-4) for one tensor, in spec order."""
    tid = t.tensor_id
    frags = [f for f in layout.fragments if f.tensor_id == tid]
    if not frags:
        return [f"global placement tensor is not fully covered: {tid}"]
    out: List[str] = []
    declared = {a.kind for a in t.axes}
    # rule 3: undeclared active axes
    for kind in KINDS:
        if kind in declared or layout.size(kind) <= 1:
            continue
        used = {f.rank.get(kind) for f in frags}
        if kind in ("dp", "pp") or len(used) == 1:
            out.append(f"global placement tensor requires explicit parallel semantics for active undeclared {kind} axis: {tid}")
            continue
        varying = [k for k in KINDS if k in declared and len({f.rank.get(k) for f in frags}) > 1]
        if not varying:
            out.append(f"global placement tensor varies across undeclared {kind} axis: {tid}")
            continue
        mapping: Dict[Tuple[int, ...], Set[int]] = defaultdict(set)
        for f in frags:
            mapping[tuple(f.rank.get(k) for k in varying)].add(f.rank.get(kind))
        if any(len(v) > 1 for v in mapping.values()):
            out.append(f"global placement tensor varies independently across undeclared {kind} axis: {tid}")
    # rule 4: owners and replicas
    own = t.kinds("ownership")
    rep = t.kinds("replicated")
    split = [(a.kind, a.dim) for a in t.sorted_axes if a.semantics == "split"]
    split_kinds = [k for k, _ in split]
    container = ((0,) * t.ndim, t.global_shape)

    def key(c: Coord, kinds: Sequence[str]) -> Tuple[int, ...]:
        return tuple(c.get(k) for k in kinds)

    for owner in sorted({key(f.rank, own) for f in frags}):
        owner_frags = [f for f in frags if key(f.rank, own) == owner]
        frag_replicas = {key(f.rank, rep) for f in owner_frags}
        part_replicas = {key(c, rep) for _, c in layout.participants if key(c, own) == owner}
        if frag_replicas != part_replicas:
            out.append(f"global placement tensor is not fully covered: missing or unexpected replicated-axis participant for {tid}")
        for replica in sorted(frag_replicas):
            group = [f for f in owner_frags if key(f.rank, rep) == replica]
            if not boxes_exactly_cover(container[0], container[1], [(f.offset, f.shape) for f in group]):
                out.append(f"global placement tensor is not fully covered: {tid}")
            members = [c for _, c in layout.participants if key(c, own) == owner and key(c, rep) == replica]
            p_split = {key(c, split_kinds) for c in members}
            f_split = {key(f.rank, split_kinds) for f in group}
            spans = all(
                {s[i] for s in p_split} == set(range(layout.size(k))) for i, k in enumerate(split_kinds)
            )
            if not spans or p_split != f_split:
                out.append(f"global placement tensor is not fully covered: missing or unexpected split-axis participant for {tid}")
            if len(split_kinds) >= 2:
                projections = [sorted({s[i] for s in f_split}) for i in range(len(split_kinds))]
                if set(itertools.product(*projections)) != f_split:
                    out.append(f"non-Cartesian split-axis participant mapping cannot prove rank-to-dimension ownership: {tid}")
            for kind, dim in split:
                per_rank: Dict[int, List[Tuple[int, int]]] = defaultdict(list)
                for f in group:
                    per_rank[f.rank.get(kind)].append((f.offset[dim], f.offset[dim] + f.shape[dim]))
                intervals = [(b, e, r) for r, iv in per_rank.items() for b, e in _merge(iv)]
                if not _tile_ok(intervals, t.global_shape[dim]):
                    out.append(f"split-axis rank geometry conflicts with declared dimension: {tid}: {kind} -> dim {dim}")
    return out


def coverage_violations(layout: Layout) -> Set[str]:
    """Every spec 11.5 message a conforming implementation may raise for this layout."""
    if not layout.tensors:
        return {"global weight placement must contain tensors"}
    if not layout.fragments:
        return {"global weight placement must contain fragments"}
    out: Set[str] = set()
    for t in layout.tensors:
        out.update(tensor_coverage_violations(layout, t))
    return out


def from_fragments_verdict(layout: Layout) -> Optional[FrozenSet[str]]:
    """``None`` if ``from_fragments`` must accept the layout; otherwise the acceptable messages.

    The checks run in phases (spec 4.8 ``from_fragments`` 1-7, then the parts (4.7, 11.4 without
    aliases), then the manifest (11.4 with aliases, 11.5)).  The first phase with a violation
    decides; inside a phase the spec does not fix which violation is reported first (for example
    which tensor is examined first), so every violated rule of that phase is acceptable.
    Assumes a valid topology and valid descriptors and fragments (the strategies guarantee it).
    """
    tensor_ids = [t.tensor_id for t in layout.tensors]
    if len(set(tensor_ids)) != len(tensor_ids):
        return frozenset({"duplicate tensor_id in placement tensors"})
    known = set(tensor_ids)
    unknown = {f"unknown tensor_id: {f.tensor_id}" for f in layout.fragments if f.tensor_id not in known}
    if unknown:
        return frozenset(unknown)
    referenced = {f.tensor_id for f in layout.fragments}
    unreferenced = {f"global placement contains an unreferenced tensor: {t}" for t in tensor_ids if t not in referenced}
    if unreferenced:
        return frozenset(unreferenced)
    ranks = {c for _, c in layout.participants}
    orphan = {
        f"placement fragment rank has no topology participant: {fragment_id(layout, f)}"
        for f in layout.fragments if f.rank not in ranks
    }
    if orphan:
        return frozenset(orphan)
    part_level: Set[str] = set()
    for _, c in layout.participants:
        part_level |= _fragment_checks(layout, [f for f in layout.fragments if f.rank == c], manifest_level=False)
    if part_level:
        return frozenset(part_level)
    manifest_level = _fragment_checks(layout, layout.fragments, manifest_level=True)
    if manifest_level:
        return frozenset(manifest_level)
    coverage = coverage_violations(layout)
    if coverage:
        return frozenset(coverage)
    return None


# ----------------------------------------------------------------------------------------------
# Runtime address ranges (spec 11.8)


def runtime_range_violations(views: Sequence[Dict[str, Any]]) -> Set[str]:
    """Message prefixes of every violated spec 11.8 rule, by pairwise comparison.

    Each view is a dict with keys ``space`` (``(instance_id, worker_id, device)``), ``address``,
    ``nbytes``, ``storage_address``, ``storage_nbytes``, ``tensor_id``, ``aliases``,
    ``global_offset``, ``local_shape`` and ``descriptor`` (the tuple of tensor-descriptor fields
    that aliases must share).
    """
    out: Set[str] = set()
    for i, a in enumerate(views):
        for b in views[i + 1:]:
            if a["space"] != b["space"]:
                continue
            if a["address"] < b["address"] + b["nbytes"] and b["address"] < a["address"] + a["nbytes"]:
                exact_alias = (
                    a["address"] == b["address"] and a["nbytes"] == b["nbytes"]
                    and len(a["aliases"]) >= 2 and a["aliases"] == b["aliases"]
                    and a["tensor_id"] in a["aliases"] and b["tensor_id"] in a["aliases"]
                    and a["global_offset"] == b["global_offset"] and a["local_shape"] == b["local_shape"]
                    and a["descriptor"] == b["descriptor"]
                )
                if not exact_alias:
                    out.add("runtime binding address ranges overlap: ")
            sa, sb = a["storage_address"], b["storage_address"]
            ea, eb = sa + a["storage_nbytes"], sb + b["storage_nbytes"]
            if sa < eb and sb < ea and (sa, ea) != (sb, eb):
                out.add("runtime binding storage allocation ranges overlap: ")
    return out


# ----------------------------------------------------------------------------------------------
# Assembly columns (fragment objects read attribute by attribute)


def assembly_maps(fragments: Sequence[Any]) -> Tuple[Dict[str, int], Dict[Any, int]]:
    """``(tensor position by sorted tensor id, rank group by first appearance)`` of ``fragments``."""
    tensor_ids = sorted({f.tensor_id for f in fragments})
    groups: Dict[Any, int] = {}
    for f in fragments:
        groups.setdefault(f.rank, len(groups))
    return {t: i for i, t in enumerate(tensor_ids)}, groups


def assembly_columns(fragments: Sequence[Any], positions: Dict[Any, int], groups: Dict[Any, int]) -> Any:
    """The columns ``_native.assembly_columns`` returns: tensor positions, rank groups, fragment
    ids (the maps' own objects) and the number of distinct tensor ids."""
    tids = [f.tensor_id for f in fragments]
    return (
        [positions[t] for t in tids],
        [groups[f.rank] for f in fragments],
        [f.placement_fragment_id for f in fragments],
        len(set(tids)),
    )

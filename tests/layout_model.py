"""A plain-data model of a weight placement, independent of the package under test.

The hypothesis strategies (``strategies.py``) generate :class:`Layout` values; the brute-force
oracles (``oracles.py``) judge them; :func:`build_placement` and friends turn them into the
package's typed values (``mooncake.reshard.weight``).  Keeping the model free of the package means
that the oracle never reuses code it is meant to check.

Conventions:

* a rank is a :class:`Coord` ``(dp, tp, pp, ep)``; ``Coord.get(kind)`` reads one axis;
* an axis is an :class:`AxisSpec` with ``semantics`` in ``{"split", "replicated", "ownership"}``;
* ``shard_dims`` of a tensor are always derived from its split axes (so descriptors stay valid);
* ``nbytes`` of a fragment is always ``prod(shape) * itemsize`` of its tensor unless a test
  deliberately overrides it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Optional, Tuple

KINDS: Tuple[str, ...] = ("dp", "pp", "ep", "tp")
"""Canonical axis order (spec 4.1)."""

RANK_FIELDS: Tuple[str, ...] = ("dp", "tp", "pp", "ep")
"""Field order of ``ParallelRank`` (spec 4.1)."""


@dataclass(frozen=True, order=True)
class Coord:
    """A parallel rank as plain ints, in ``ParallelRank`` field order."""

    dp: int = 0
    tp: int = 0
    pp: int = 0
    ep: int = 0

    def get(self, kind: str) -> int:
        return int(getattr(self, kind))

    def with_(self, **changes: int) -> "Coord":
        return dataclasses.replace(self, **changes)

    def as_json(self) -> Dict[str, int]:
        return {"dp": self.dp, "tp": self.tp, "pp": self.pp, "ep": self.ep}


@dataclass(frozen=True)
class AxisSpec:
    """One declared parallel axis of a tensor."""

    semantics: str  # "split" | "replicated" | "ownership"
    kind: str
    dim: Optional[int] = None

    def as_json(self) -> Dict[str, Any]:
        if self.semantics == "split":
            return {"semantics": "split", "kind": self.kind, "dim": self.dim}
        return {"semantics": self.semantics, "kind": self.kind}


@dataclass(frozen=True)
class TensorSpec:
    """A tensor descriptor as plain data."""

    tensor_id: str
    global_shape: Tuple[int, ...]
    axes: Tuple[AxisSpec, ...] = ()
    dtype: str = "bfloat16"
    itemsize: int = 2
    layout_fingerprint: str = "test:layout:v1"
    layer_id: Optional[int] = None
    expert_id: Optional[int] = None

    @property
    def ndim(self) -> int:
        return len(self.global_shape)

    @property
    def sorted_axes(self) -> Tuple[AxisSpec, ...]:
        return tuple(sorted(self.axes, key=lambda a: KINDS.index(a.kind)))

    @property
    def shard_dims(self) -> Tuple[int, ...]:
        return tuple(sorted(a.dim for a in self.axes if a.semantics == "split"))  # type: ignore[misc]

    def axis(self, kind: str) -> Optional[AxisSpec]:
        for a in self.axes:
            if a.kind == kind:
                return a
        return None

    def kinds(self, semantics: str) -> Tuple[str, ...]:
        """Declared kinds with the given semantics, in canonical order."""
        return tuple(a.kind for a in self.sorted_axes if a.semantics == semantics)

    @property
    def volume(self) -> int:
        return math.prod(self.global_shape)


@dataclass(frozen=True)
class FragmentSpec:
    """A placement fragment as plain data (``fragment_id=None``: derived by the package)."""

    tensor_id: str
    offset: Tuple[int, ...]
    shape: Tuple[int, ...]
    rank: Coord
    fragment_id: Optional[str] = None
    nbytes: Optional[int] = None  # None: computed from the tensor
    pipeline_stage_id: Optional[int] = None
    aliases: Tuple[str, ...] = ()


@dataclass(frozen=True)
class Layout:
    """Sizes, selected participants, tensors and fragments of one placement."""

    sizes: Tuple[int, int, int, int]  # (tp, pp, ep, dp)
    participants: Tuple[Tuple[str, Coord], ...]
    tensors: Tuple[TensorSpec, ...]
    fragments: Tuple[FragmentSpec, ...]
    resource_id: str = "model"
    revision: str = "rev-1"
    weight_generation: int = 1
    placement_set_id: str = "set-1"
    notes: Tuple[str, ...] = field(default=(), compare=False)

    def size(self, kind: str) -> int:
        tp, pp, ep, dp = self.sizes
        return {"tp": tp, "pp": pp, "ep": ep, "dp": dp}[kind]

    def tensor(self, tensor_id: str) -> TensorSpec:
        for t in self.tensors:
            if t.tensor_id == tensor_id:
                return t
        raise KeyError(tensor_id)

    def fragment_nbytes(self, frag: FragmentSpec) -> int:
        if frag.nbytes is not None:
            return frag.nbytes
        return math.prod(frag.shape) * self.tensor(frag.tensor_id).itemsize


def participant_id_for(rank: Coord) -> str:
    return f"w-d{rank.dp}-p{rank.pp}-e{rank.ep}-t{rank.tp}"


def full_participants(tp: int, pp: int, ep: int, dp: int) -> Tuple[Tuple[str, Coord], ...]:
    """Every rank of the product topology, one participant each."""
    out = []
    for d in range(dp):
        for p in range(pp):
            for e in range(ep):
                for t in range(tp):
                    c = Coord(dp=d, tp=t, pp=p, ep=e)
                    out.append((participant_id_for(c), c))
    return tuple(out)


# ----------------------------------------------------------------------------------------------
# Conversion to the package's values (imports are local so that this module stays importable
# while the package is incomplete).


def build_rank(c: Coord) -> Any:
    from mooncake.reshard.weight import ParallelRank

    return ParallelRank(dp=c.dp, tp=c.tp, pp=c.pp, ep=c.ep)


def build_axis(a: AxisSpec) -> Any:
    from mooncake.reshard.weight import OwnershipAxis, ReplicatedAxis, SplitAxis

    if a.semantics == "split":
        return SplitAxis(a.kind, a.dim)  # type: ignore[arg-type]
    if a.semantics == "replicated":
        return ReplicatedAxis(a.kind)  # type: ignore[arg-type]
    return OwnershipAxis(a.kind)  # type: ignore[arg-type]


def build_tensor(t: TensorSpec) -> Any:
    from mooncake.reshard.weight import TensorDescriptor

    return TensorDescriptor(
        tensor_id=t.tensor_id,
        global_shape=t.global_shape,
        dtype=t.dtype,
        itemsize=t.itemsize,
        shard_dims=t.shard_dims,
        layout_fingerprint=t.layout_fingerprint,
        parallel_axes=tuple(build_axis(a) for a in t.axes),
        layer_id=t.layer_id,
        expert_id=t.expert_id,
    )


def build_fragment(layout: Layout, f: FragmentSpec) -> Any:
    from mooncake.reshard.weight import PlacementFragment

    return PlacementFragment(
        tensor_id=f.tensor_id,
        global_offset=f.offset,
        local_shape=f.shape,
        nbytes=layout.fragment_nbytes(f),
        rank=build_rank(f.rank),
        pipeline_stage_id=f.pipeline_stage_id,
        aliases=f.aliases,
        placement_fragment_id=f.fragment_id,
    )


def build_topology(layout: Layout, participants: Optional[Iterable[Tuple[str, Coord]]] = None) -> Any:
    from mooncake.reshard.weight import ParallelTopology, TopologyParticipant

    tp, pp, ep, dp = layout.sizes
    parts = layout.participants if participants is None else tuple(participants)
    return ParallelTopology(
        tp_size=tp,
        pp_size=pp,
        ep_size=ep,
        dp_size=dp,
        participants=tuple(TopologyParticipant(pid, build_rank(c)) for pid, c in parts),
    )


def build_placement(layout: Layout, *, reverse: bool = False) -> Any:
    """``WeightPlacementManifest.from_fragments`` over the layout (inventory optionally reversed)."""
    from mooncake.reshard.weight import WeightPlacementManifest

    participants = tuple(reversed(layout.participants)) if reverse else layout.participants
    tensors = [build_tensor(t) for t in layout.tensors]
    fragments = [build_fragment(layout, f) for f in layout.fragments]
    if reverse:
        tensors.reverse()
        fragments.reverse()
    return WeightPlacementManifest.from_fragments(
        resource_id=layout.resource_id,
        revision=layout.revision,
        weight_generation=layout.weight_generation,
        placement_set_id=layout.placement_set_id,
        topology=build_topology(layout, participants),
        tensors=tuple(tensors),
        fragments=tuple(fragments),
    )


def build_runtime_bindings(placement: Any, *, base_address: int = 1 << 20, gap: int = 64) -> Tuple[Any, ...]:
    """Canonical, non-overlapping runtime bindings for every part that has fragments.

    Every participant gets its own instance, worker and lease; every fragment gets its own
    allocation with ``storage_offset_bytes=0`` and canonical row-major strides.
    """
    from mooncake.reshard.weight import RuntimeBindingFragment, WeightRuntimeBindingManifest

    tensors = {t.tensor_id: t for t in placement.tensors}
    out = []
    address = base_address
    for part in placement.parts:
        if not part.fragments:
            continue
        frags = []
        for f in part.fragments:
            t = tensors[f.tensor_id]
            frags.append(
                RuntimeBindingFragment(
                    placement_fragment_id=f.placement_fragment_id,
                    fragment_id=f"{f.placement_fragment_id}@{part.participant_id}",
                    address=address,
                    nbytes=f.nbytes,
                    worker_id=f"worker-{part.participant_id}",
                    endpoint=f"{part.participant_id}:1",
                    device="cuda:0",
                    itemsize=t.itemsize,
                    local_shape=f.local_shape,
                    strides_bytes=canonical_strides(f.local_shape, t.itemsize),
                    storage_address=address,
                    storage_nbytes=f.nbytes,
                    storage_offset_bytes=0,
                )
            )
            address += f.nbytes + gap
        out.append(
            WeightRuntimeBindingManifest(
                resource_id=placement.resource_id,
                placement_id=placement.placement_id,
                placement_digest=placement.digest,
                instance_id=f"inst-{part.participant_id}",
                generation=1,
                lease_id=f"lease-{part.participant_id}",
                revision=placement.revision,
                participant_id=part.participant_id,
                fragments=tuple(frags),
            )
        )
    return tuple(out)


def canonical_strides(shape: Tuple[int, ...], itemsize: int) -> Tuple[int, ...]:
    """Row-major byte strides (independent re-statement of spec 4.5)."""
    strides = []
    acc = itemsize
    for extent in reversed(shape):
        strides.append(acc)
        acc *= extent
    return tuple(reversed(strides))

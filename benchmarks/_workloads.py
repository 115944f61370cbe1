"""Workload builders shared by the scale benchmarks (``benchmarks/scale.py``).

Every builder returns plain, validated ``mooncake.reshard.weight`` input values built through
the public constructors, exactly as an adapter would build them: tensor descriptors, a
topology and placement fragments per side. Runtime bindings use fake but valid,
non-overlapping addresses (each participant gets its own instance, worker, lease and a
private 2**48-byte address window).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Dict, List, Sequence, Tuple

from mooncake.reshard.weight import (
    OwnershipAxis,
    ParallelRank,
    ParallelTopology,
    PlacementFragment,
    ReplicatedAxis,
    RuntimeBindingFragment,
    SplitAxis,
    TensorDescriptor,
    TopologyParticipant,
    WeightPlacementManifest,
    WeightRuntimeBindingManifest,
)
from mooncake.reshard.weight.types import canonical_strides_bytes

RESOURCE_ID = "scale-model"
REVISION = "rev-1"
WEIGHT_GENERATION = 3
DTYPE = "bfloat16"
ITEMSIZE = 2
FINGERPRINT = "scale:bf16:row-major:v1"
ADDRESS_WINDOW_BITS = 48


@dataclasses.dataclass(frozen=True)
class SideInputs:
    """Everything ``WeightPlacementManifest.from_fragments`` needs for one side."""

    placement_set_id: str
    topology: ParallelTopology
    tensors: Tuple[TensorDescriptor, ...]
    fragments: Tuple[PlacementFragment, ...]


@dataclasses.dataclass(frozen=True)
class WorkloadInputs:
    """Source and target inputs of one workload."""

    source: SideInputs
    target: SideInputs


def _prod(values: Sequence[int]) -> int:
    result = 1
    for value in values:
        result *= value
    return result


def topology(ranks: Sequence[ParallelRank], *, prefix: str, tp: int = 1, pp: int = 1, ep: int = 1,
             dp: int = 1) -> ParallelTopology:
    """A topology with one participant per rank, named after its coordinates."""
    participants = tuple(
        TopologyParticipant(f"{prefix}-dp{r.dp}-pp{r.pp}-ep{r.ep}-tp{r.tp}", r) for r in ranks
    )
    return ParallelTopology(tp_size=tp, pp_size=pp, ep_size=ep, dp_size=dp, participants=participants)


def descriptor(tensor_id: str, shape: Tuple[int, ...], axes: Tuple[object, ...], *,
               layer_id: int | None = None, expert_id: int | None = None) -> TensorDescriptor:
    """A bf16 descriptor whose ``shard_dims`` are exactly the split dims of ``axes``."""
    shard_dims = tuple(sorted(a.dim for a in axes if isinstance(a, SplitAxis)))
    return TensorDescriptor(
        tensor_id=tensor_id,
        global_shape=shape,
        dtype=DTYPE,
        itemsize=ITEMSIZE,
        shard_dims=shard_dims,
        layout_fingerprint=FINGERPRINT,
        parallel_axes=axes,  # type: ignore[arg-type]
        layer_id=layer_id,
        expert_id=expert_id,
    )


def fragment(tensor_id: str, offset: Tuple[int, ...], shape: Tuple[int, ...],
             rank: ParallelRank) -> PlacementFragment:
    """A placement fragment with a content-derived id (as adapters usually build them)."""
    return PlacementFragment(
        tensor_id=tensor_id,
        global_offset=offset,
        local_shape=shape,
        nbytes=_nbytes(shape),
        rank=rank,
    )


@functools.lru_cache(maxsize=None)
def _nbytes(shape: Tuple[int, ...]) -> int:
    return _prod(shape) * ITEMSIZE


@functools.lru_cache(maxsize=None)
def split(shape: Tuple[int, ...], dim: int, parts: int, index: int) -> Tuple[Tuple[int, ...], Tuple[int, ...]]:
    """Offset and shape of piece ``index`` of ``parts`` equal pieces along ``dim``."""
    if shape[dim] % parts:
        raise ValueError(f"dimension {dim} of {shape} is not divisible by {parts}")
    step = shape[dim] // parts
    offset = tuple(index * step if d == dim else 0 for d in range(len(shape)))
    local = tuple(step if d == dim else shape[d] for d in range(len(shape)))
    return offset, local


# ---------------------------------------------------------------------------------------------
# (1) Kimi-K2-class model with independently allocated experts.

MATRICES = ("w1", "w2", "w3")


def _expert_shapes(hidden: int, intermediate: int) -> Dict[str, Tuple[Tuple[int, int], int]]:
    """Matrix -> (shape, serving TP split dim): w1/w3 column-parallel, w2 row-parallel."""
    return {
        "w1": ((intermediate, hidden), 0),
        "w2": ((hidden, intermediate), 1),
        "w3": ((intermediate, hidden), 0),
    }


def independent_experts(*, layers: int, experts: int = 384, hidden: int = 7168, intermediate: int = 2048,
                        source_ep: int = 48, source_dp: int = 2, target_ep: int = 16,
                        target_tp: int = 8) -> WorkloadInputs:
    """Training EP x DP (each expert whole on its EP owner, replicated over DP) to serving
    EP x expert-TP (each expert split ``target_tp`` ways within its owning EP rank)."""
    if experts % source_ep or experts % target_ep:
        raise ValueError("experts must be divisible by both EP sizes")
    shapes = _expert_shapes(hidden, intermediate)
    src_per_rank = experts // source_ep
    tgt_per_rank = experts // target_ep
    src_tensors: List[TensorDescriptor] = []
    tgt_tensors: List[TensorDescriptor] = []
    src_fragments: List[PlacementFragment] = []
    tgt_fragments: List[PlacementFragment] = []
    src_rank_cache = {(dp, ep): ParallelRank(dp=dp, ep=ep) for dp in range(source_dp) for ep in range(source_ep)}
    tgt_rank_cache = {(ep, tp): ParallelRank(ep=ep, tp=tp) for ep in range(target_ep) for tp in range(target_tp)}
    src_axes = (ReplicatedAxis("dp"), OwnershipAxis("ep"))
    tgt_axes_by_dim = {d: (OwnershipAxis("ep"), SplitAxis("tp", d)) for d in (0, 1)}
    for layer in range(layers):
        for expert in range(experts):
            src_ep = expert // src_per_rank
            tgt_ep = expert // tgt_per_rank
            for matrix in MATRICES:
                shape, dim = shapes[matrix]
                tensor_id = f"layers.{layer}.mlp.experts.{expert}.{matrix}"
                src_tensors.append(descriptor(tensor_id, shape, src_axes, layer_id=layer, expert_id=expert))
                tgt_tensors.append(
                    descriptor(tensor_id, shape, tgt_axes_by_dim[dim], layer_id=layer, expert_id=expert)
                )
                zero = (0,) * len(shape)
                for dp in range(source_dp):
                    src_fragments.append(fragment(tensor_id, zero, shape, src_rank_cache[(dp, src_ep)]))
                for tp in range(target_tp):
                    offset, local = split(shape, dim, target_tp, tp)
                    tgt_fragments.append(fragment(tensor_id, offset, local, tgt_rank_cache[(tgt_ep, tp)]))
    return WorkloadInputs(
        source=SideInputs(
            "train-ep-dp",
            topology(list(src_rank_cache.values()), prefix="train", ep=source_ep, dp=source_dp),
            tuple(src_tensors),
            tuple(src_fragments),
        ),
        target=SideInputs(
            "serve-ep-tp",
            topology(list(tgt_rank_cache.values()), prefix="serve", ep=target_ep, tp=target_tp),
            tuple(tgt_tensors),
            tuple(tgt_fragments),
        ),
    )


# ---------------------------------------------------------------------------------------------
# (2) Grouped experts: one [E, ...] tensor per layer and matrix.

def grouped_experts(*, layers: int, experts: int = 384, hidden: int = 7168, intermediate: int = 2048,
                    source_ep: int = 48, source_dp: int = 2, target_ep: int = 16,
                    target_tp: int = 8) -> WorkloadInputs:
    """Training SplitAxis("ep", 0) x DP replicas to serving SplitAxis("ep", 0) x SplitAxis("tp", d)."""
    if experts % source_ep or experts % target_ep:
        raise ValueError("experts must be divisible by both EP sizes")
    shapes = _expert_shapes(hidden, intermediate)
    src_ranks = [ParallelRank(dp=dp, ep=ep) for dp in range(source_dp) for ep in range(source_ep)]
    tgt_ranks = [ParallelRank(ep=ep, tp=tp) for ep in range(target_ep) for tp in range(target_tp)]
    src_tensors: List[TensorDescriptor] = []
    tgt_tensors: List[TensorDescriptor] = []
    src_fragments: List[PlacementFragment] = []
    tgt_fragments: List[PlacementFragment] = []
    for layer in range(layers):
        for matrix in MATRICES:
            (rows, cols), dim = shapes[matrix]
            shape = (experts, rows, cols)
            tensor_id = f"layers.{layer}.mlp.experts.{matrix}"
            src_tensors.append(
                descriptor(tensor_id, shape, (ReplicatedAxis("dp"), SplitAxis("ep", 0)), layer_id=layer)
            )
            tgt_tensors.append(
                descriptor(tensor_id, shape, (SplitAxis("ep", 0), SplitAxis("tp", dim + 1)), layer_id=layer)
            )
            for rank in src_ranks:
                offset, local = split(shape, 0, source_ep, rank.ep)
                src_fragments.append(fragment(tensor_id, offset, local, rank))
            for rank in tgt_ranks:
                offset, local = split(shape, 0, target_ep, rank.ep)
                inner_offset, inner_local = split(local, dim + 1, target_tp, rank.tp)
                offset = tuple(a + b for a, b in zip(offset, inner_offset))
                tgt_fragments.append(fragment(tensor_id, offset, inner_local, rank))
    return WorkloadInputs(
        source=SideInputs(
            "train-grouped",
            topology(src_ranks, prefix="train", ep=source_ep, dp=source_dp),
            tuple(src_tensors),
            tuple(src_fragments),
        ),
        target=SideInputs(
            "serve-grouped",
            topology(tgt_ranks, prefix="serve", ep=target_ep, tp=target_tp),
            tuple(tgt_tensors),
            tuple(tgt_fragments),
        ),
    )


# ---------------------------------------------------------------------------------------------
# (3) Orthogonal TP splits: dim 0 over N ranks -> dim 1 over M ranks (N x M regions per tensor).

def orthogonal_tp(*, tensors: int, rows: int, cols: int, source_tp: int, target_tp: int) -> WorkloadInputs:
    """``tensors`` matrices of ``(rows, cols)`` re-split from dim 0 (TP N) to dim 1 (TP M)."""
    src_ranks = [ParallelRank(tp=tp) for tp in range(source_tp)]
    tgt_ranks = [ParallelRank(tp=tp) for tp in range(target_tp)]
    shape = (rows, cols)
    src_tensors, tgt_tensors, src_fragments, tgt_fragments = [], [], [], []
    for index in range(tensors):
        tensor_id = f"layers.{index}.attn.proj"
        src_tensors.append(descriptor(tensor_id, shape, (SplitAxis("tp", 0),), layer_id=index))
        tgt_tensors.append(descriptor(tensor_id, shape, (SplitAxis("tp", 1),), layer_id=index))
        for rank in src_ranks:
            offset, local = split(shape, 0, source_tp, rank.tp)
            src_fragments.append(fragment(tensor_id, offset, local, rank))
        for rank in tgt_ranks:
            offset, local = split(shape, 1, target_tp, rank.tp)
            tgt_fragments.append(fragment(tensor_id, offset, local, rank))
    return WorkloadInputs(
        source=SideInputs("tp-dim0", topology(src_ranks, prefix="src", tp=source_tp),
                          tuple(src_tensors), tuple(src_fragments)),
        target=SideInputs("tp-dim1", topology(tgt_ranks, prefix="dst", tp=target_tp),
                          tuple(tgt_tensors), tuple(tgt_fragments)),
    )


# ---------------------------------------------------------------------------------------------
# (4) 3-D coverage: one tensor tiled by an n x n x n grid of boxes on one rank.

def grid_3d(*, cells_per_dim: int, cell: int = 2) -> SideInputs:
    """One ``(n*cell,)*3`` tensor stored as n**3 ``(cell,)*3`` fragments of a single rank."""
    n = cells_per_dim
    shape = (n * cell,) * 3
    rank = ParallelRank()
    tensor_id = "grid.weight"
    local = (cell, cell, cell)
    nbytes = cell * cell * cell * ITEMSIZE
    fragments = [
        PlacementFragment(tensor_id, (i * cell, j * cell, k * cell), local, nbytes, rank)
        for i in range(n)
        for j in range(n)
        for k in range(n)
    ]
    return SideInputs(
        "grid-3d",
        topology([rank], prefix="grid"),
        (descriptor(tensor_id, shape, ()),),
        tuple(fragments),
    )


# ---------------------------------------------------------------------------------------------
# (5) Sweep unit: small independent experts, 6 fragments per tensor (2 source + 4 target).

SWEEP_FRAGMENTS_PER_TENSOR = 6


def sweep(*, fragments: int) -> WorkloadInputs:
    """About ``fragments`` fragments (source + target): EP4 x DP2 -> EP2 x TP4, (64, 128) tensors."""
    return _sweep(max(1, fragments // SWEEP_FRAGMENTS_PER_TENSOR))


def _sweep(tensors: int) -> WorkloadInputs:
    shape = (64, 128)
    src_ranks = {(dp, ep): ParallelRank(dp=dp, ep=ep) for dp in range(2) for ep in range(4)}
    tgt_ranks = {(ep, tp): ParallelRank(ep=ep, tp=tp) for ep in range(2) for tp in range(4)}
    src_axes = (ReplicatedAxis("dp"), OwnershipAxis("ep"))
    tgt_axes = (OwnershipAxis("ep"), SplitAxis("tp", 0))
    src_tensors, tgt_tensors, src_fragments, tgt_fragments = [], [], [], []
    for index in range(tensors):
        tensor_id = f"experts.{index}.w"
        src_tensors.append(descriptor(tensor_id, shape, src_axes, expert_id=index))
        tgt_tensors.append(descriptor(tensor_id, shape, tgt_axes, expert_id=index))
        for dp in range(2):
            src_fragments.append(fragment(tensor_id, (0, 0), shape, src_ranks[(dp, index % 4)]))
        for tp in range(4):
            offset, local = split(shape, 0, 4, tp)
            tgt_fragments.append(fragment(tensor_id, offset, local, tgt_ranks[(index % 2, tp)]))
    return WorkloadInputs(
        source=SideInputs("sweep-src", topology(list(src_ranks.values()), prefix="src", ep=4, dp=2),
                          tuple(src_tensors), tuple(src_fragments)),
        target=SideInputs("sweep-dst", topology(list(tgt_ranks.values()), prefix="dst", ep=2, tp=4),
                          tuple(tgt_tensors), tuple(tgt_fragments)),
    )


# ---------------------------------------------------------------------------------------------
# Assembly and runtime bindings.

def assemble(side: SideInputs) -> WeightPlacementManifest:
    """The barrier: one complete placement from a side's fragments."""
    return WeightPlacementManifest.from_fragments(
        resource_id=RESOURCE_ID,
        revision=REVISION,
        weight_generation=WEIGHT_GENERATION,
        placement_set_id=side.placement_set_id,
        topology=side.topology,
        tensors=side.tensors,
        fragments=side.fragments,
    )


def bindings(placement: WeightPlacementManifest, *, prefix: str,
             window: int) -> Tuple[WeightRuntimeBindingManifest, ...]:
    """One runtime binding per non-empty participant, fragments packed back to back.

    Participant ``i`` owns the address window ``[(window + i + 1) << 48, ...)``; each fragment
    is its own allocation (``storage_offset_bytes=0``) with canonical strides.
    """
    itemsize_by_tensor = {t.tensor_id: t.itemsize for t in placement.tensors}
    digest = placement.digest
    result: List[WeightRuntimeBindingManifest] = []
    for index, part in enumerate(placement.parts):
        if not part.fragments:
            continue
        address = (window + index + 1) << ADDRESS_WINDOW_BITS
        runtime: List[RuntimeBindingFragment] = []
        worker = f"{prefix}-worker-{index}"
        endpoint = f"{prefix}-endpoint-{index}"
        for number, frag in enumerate(part.fragments):
            itemsize = itemsize_by_tensor[frag.tensor_id]
            runtime.append(
                RuntimeBindingFragment(
                    placement_fragment_id=frag.placement_fragment_id,
                    fragment_id=f"{prefix}-{index}-{number}",
                    address=address,
                    nbytes=frag.nbytes,
                    worker_id=worker,
                    endpoint=endpoint,
                    device="cuda:0",
                    itemsize=itemsize,
                    local_shape=frag.local_shape,
                    strides_bytes=canonical_strides_bytes(frag.local_shape, itemsize),
                    storage_address=address,
                    storage_nbytes=frag.nbytes,
                    storage_offset_bytes=0,
                )
            )
            address += (frag.nbytes + 255) // 256 * 256
        if address >= (window + index + 2) << ADDRESS_WINDOW_BITS:
            raise ValueError("participant address window overflow")
        result.append(
            WeightRuntimeBindingManifest(
                resource_id=placement.resource_id,
                placement_id=placement.placement_id,
                placement_digest=digest,
                instance_id=f"{prefix}-instance-{index}",
                generation=1,
                lease_id=f"{prefix}-lease-{index}",
                revision=placement.revision,
                participant_id=part.participant_id,
                fragments=tuple(runtime),
            )
        )
    return tuple(result)

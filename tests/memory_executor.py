"""Host-memory test executor for bound plans.

* :class:`HostMemory` allocates real host buffers (ctypes arrays) and keeps them alive; their
  ``ctypes.addressof`` addresses go into runtime bindings.
* :func:`host_bindings` builds one ``WeightRuntimeBindingManifest`` per non-empty participant with
  real addresses (one allocation per fragment, or one shared allocation per participant with
  the fragments at storage offsets inside it).
* :func:`stored_manifest` builds a Store manifest over a target placement's tensors.
* :func:`fill_placement` / :func:`fill_stored` write a deterministic global tensor's slices
  into source fragments (or into simulated Store object payloads).
* :func:`execute` runs a ``TransferPlan`` with ``ctypes.memmove``: for every operation it walks
  ``outer_loop_counts`` with the per-side ``*_strides`` (last loop fastest) and copies
  ``inner_bytes`` per segment -- an independent re-implementation, it does not use
  ``iter_segments``.
* :func:`check_targets` compares every byte of every target fragment with the expected slice.
* :class:`HostWorld` is the usual scaffolding of a binding test: a source (placement or Store
  manifest) and a target placement, their logical plan and host-memory bindings, with
  ``bind()`` and ``execute_and_check()``.
"""

from __future__ import annotations

import ctypes
import hashlib
import itertools
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from mooncake.reshard.weight import RuntimeBindingFragment, WeightRuntimeBindingManifest
from mooncake.reshard.weight.types import canonical_strides_bytes


class HostMemory:
    """Owner of host buffers; addresses stay valid while this object lives."""

    def __init__(self) -> None:
        self._buffers: List[Any] = []
        self.payloads: Dict[str, int] = {}

    def alloc(self, nbytes: int, fill: int = 0xCD) -> int:
        buffer = (ctypes.c_ubyte * nbytes)()
        ctypes.memset(buffer, fill, nbytes)
        self._buffers.append(buffer)
        return ctypes.addressof(buffer)

    @staticmethod
    def read(address: int, nbytes: int) -> bytes:
        return ctypes.string_at(address, nbytes)

    @staticmethod
    def write(address: int, data: bytes) -> None:
        ctypes.memmove(address, data, len(data))


def _tensor_seed(tensor_id: str) -> int:
    return int.from_bytes(hashlib.sha256(tensor_id.encode()).digest()[:4], "little")


def element_bytes(tensor: Any, flat_index: int) -> bytes:
    """Bytes of one element of the deterministic global tensor."""
    itemsize = tensor.itemsize
    value = (_tensor_seed(tensor.tensor_id) * 1_000_003 + flat_index * 7919 + 1) % (1 << (8 * itemsize))
    return value.to_bytes(itemsize, "little")


def slice_bytes(tensor: Any, global_offset: Sequence[int], local_shape: Sequence[int]) -> bytes:
    """Row-major bytes of the box ``(global_offset, local_shape)`` of the global tensor."""
    shape = tensor.global_shape
    strides = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    out = bytearray()
    for local in itertools.product(*(range(n) for n in local_shape)):
        flat = sum((o + i) * s for o, i, s in zip(global_offset, local, strides))
        out += element_bytes(tensor, flat)
    return bytes(out)


def host_bindings(
    placement: Any,
    memory: HostMemory,
    *,
    prefix: str,
    device: str = "cpu",
    generation: int = 1,
    shared_allocation: bool = False,
    owner: Optional[object] = None,
    participants: Optional[Iterable[str]] = None,
) -> Tuple[WeightRuntimeBindingManifest, ...]:
    """One binding per non-empty participant (optionally only ``participants``), real addresses."""
    wanted = None if participants is None else set(participants)
    itemsize = {tensor.tensor_id: tensor.itemsize for tensor in placement.tensors}
    result: List[WeightRuntimeBindingManifest] = []
    for part in placement.parts:
        if not part.fragments or (wanted is not None and part.participant_id not in wanted):
            continue
        name = f"{prefix}-{part.participant_id}"
        sizes = [fragment.nbytes for fragment in part.fragments]
        offsets: List[int] = []
        total = 0
        for size in sizes:
            offsets.append(total)
            total += (size + 63) // 64 * 64
        shared = memory.alloc(total) if shared_allocation else 0
        fragments = []
        for number, (fragment, offset) in enumerate(zip(part.fragments, offsets)):
            if shared_allocation:
                storage, storage_nbytes, storage_offset = shared, total, offset
            else:
                storage, storage_nbytes, storage_offset = memory.alloc(fragment.nbytes), fragment.nbytes, 0
            fragments.append(
                RuntimeBindingFragment(
                    placement_fragment_id=fragment.placement_fragment_id,
                    fragment_id=f"{name}-rt{number}",
                    address=storage + storage_offset,
                    nbytes=fragment.nbytes,
                    worker_id=f"{name}-worker",
                    endpoint=f"{name}:1",
                    device=device,
                    itemsize=itemsize[fragment.tensor_id],
                    local_shape=fragment.local_shape,
                    strides_bytes=canonical_strides_bytes(fragment.local_shape, itemsize[fragment.tensor_id]),
                    storage_address=storage,
                    storage_nbytes=storage_nbytes,
                    storage_offset_bytes=storage_offset,
                    owner=owner,
                )
            )
        result.append(
            WeightRuntimeBindingManifest(
                resource_id=placement.resource_id,
                placement_id=placement.placement_id,
                placement_digest=placement.digest,
                instance_id=f"{name}-instance",
                generation=generation,
                lease_id=f"{name}-lease",
                revision=placement.revision,
                participant_id=part.participant_id,
                fragments=tuple(fragments),
            )
        )
    return tuple(result)


def fill_placement(placement: Any, bindings: Sequence[WeightRuntimeBindingManifest], memory: HostMemory) -> None:
    """Write each bound fragment's slice of the global tensors."""
    tensors = {tensor.tensor_id: tensor for tensor in placement.tensors}
    logical = {fragment.placement_fragment_id: fragment for fragment in placement.fragments}
    for binding in bindings:
        for runtime in binding.fragments:
            fragment = logical[runtime.placement_fragment_id]
            memory.write(runtime.address, slice_bytes(tensors[fragment.tensor_id], fragment.global_offset, fragment.local_shape))


def fill_stored(manifest: Any, memory: HostMemory) -> None:
    """Simulate the Store: one buffer per object key holding its fragments' payloads."""
    tensors = {tensor.tensor_id: tensor for tensor in manifest.tensors}
    sizes: Dict[str, int] = {}
    for fragment in manifest.fragments:
        sizes[fragment.object_key] = max(sizes.get(fragment.object_key, 0), fragment.object_offset + fragment.nbytes)
    for key, size in sizes.items():
        memory.payloads[key] = memory.alloc(size)
    for fragment in manifest.fragments:
        data = slice_bytes(tensors[fragment.tensor_id], fragment.global_offset, fragment.local_shape)
        memory.write(memory.payloads[fragment.object_key] + fragment.object_offset, data)


def stored_manifest(target: Any, fragments: Sequence[Any]) -> Any:
    """A committed Store manifest (namespace ``ns``, group ``g``) of ``target``'s resource,
    revision and generation: ``target``'s tensors without parallel axes, and ``fragments``."""
    import dataclasses

    from mooncake.reshard.weight import StoredWeightManifest

    return StoredWeightManifest(
        namespace="ns",
        resource_id=target.resource_id,
        group_id="g",
        manifest_key="g/manifest",
        created_at="2026-01-01T00:00:00Z",
        revision=target.revision,
        weight_generation=target.weight_generation,
        tensors=tuple(dataclasses.replace(t, parallel_axes=(), shard_dims=()) for t in target.tensors),
        fragments=tuple(fragments),
    )


def _source_address(op: Any, memory: HostMemory) -> int:
    source = op.source
    if hasattr(source, "object_key"):
        return memory.payloads[source.object_key] + source.object_offset
    return source.address


def execute(plan: Any, memory: HostMemory) -> int:
    """Copy every operation of ``plan`` with memmove; returns the number of bytes moved."""
    moved = 0
    for op in plan.operations:
        source_base = _source_address(op, memory) + op.source_base_offset
        target_base = op.target.address + op.target_base_offset
        counts = op.outer_loop_counts
        for index in itertools.product(*(range(n) for n in counts)):
            source_offset = sum(i * s for i, s in zip(index, op.source_strides))
            target_offset = sum(i * s for i, s in zip(index, op.target_strides))
            ctypes.memmove(target_base + target_offset, source_base + source_offset, op.inner_bytes)
            moved += op.inner_bytes
    return moved


def check_targets(placement: Any, bindings: Sequence[WeightRuntimeBindingManifest], memory: HostMemory) -> int:
    """Assert every target fragment holds exactly its slice; returns the number of bytes checked."""
    tensors = {tensor.tensor_id: tensor for tensor in placement.tensors}
    logical = {fragment.placement_fragment_id: fragment for fragment in placement.fragments}
    checked = 0
    for binding in bindings:
        for runtime in binding.fragments:
            fragment = logical[runtime.placement_fragment_id]
            expected = slice_bytes(tensors[fragment.tensor_id], fragment.global_offset, fragment.local_shape)
            actual = memory.read(runtime.address, runtime.nbytes)
            assert actual == expected, f"target fragment {runtime.fragment_id} differs"
            checked += len(actual)
    return checked


class HostWorld:
    """A transfer ready to bind on host memory: placements, logical plan and host bindings.

    ``source`` is a placement (bound with :func:`host_bindings`, prefix ``source_prefix``) or a
    ``StoredWeightManifest`` (no source bindings; ``bind`` passes it as ``source_manifest``).
    ``logical`` defaults to ``plan_placement_transfer`` (or, for a Store source,
    ``plan_stored_transfer_to_target_placement``) of the two, planned on first use (reading
    ``world.logical`` or binding): a test sees its placements and bindings before any planning.
    With ``plan_first`` it is planned on construction, before any allocation, so in-place
    forgeries of a placement made after construction reach only ``bind``. Pass ``logical`` for
    any other logical plan (local target, planning limits). With ``fill`` the source
    fragments (or the simulated Store payloads) hold their slices of the global tensors.
    ``memory`` is the allocator (default a new :class:`HostMemory`; anything with
    ``alloc(nbytes)`` serves a test that neither fills nor executes).

    Nothing is bound on construction: the fields are plain attributes, so a test may forge or
    replace the logical plan, a binding or the memory before calling :meth:`bind`."""

    def __init__(
        self,
        source: Any,
        target: Any,
        *,
        logical: Any = None,
        fill: bool = False,
        shared_source: bool = False,
        shared_target: bool = False,
        target_participants: Optional[Iterable[str]] = None,
        source_prefix: str = "src",
        target_prefix: str = "dst",
        memory: Any = None,
        plan_first: bool = False,
    ) -> None:
        from mooncake.reshard.weight import StoredWeightManifest

        self.source = source
        self.target = target
        self.stored = isinstance(source, StoredWeightManifest)
        self._logical = logical
        if plan_first:
            self._logical = self.logical
        self.memory = HostMemory() if memory is None else memory
        self.source_bindings: Tuple[WeightRuntimeBindingManifest, ...] = ()
        if not self.stored:
            self.source_bindings = host_bindings(
                source, self.memory, prefix=source_prefix, shared_allocation=shared_source
            )
        self.target_bindings = host_bindings(
            target, self.memory, prefix=target_prefix, shared_allocation=shared_target, participants=target_participants
        )
        if fill:
            if self.stored:
                fill_stored(source, self.memory)
            else:
                fill_placement(source, self.source_bindings, self.memory)

    @property
    def logical(self) -> Any:
        """The logical plan (the default one is planned on the first read)."""
        if self._logical is None:
            from mooncake.reshard.weight.planner import (
                plan_placement_transfer,
                plan_stored_transfer_to_target_placement,
            )

            planner = plan_stored_transfer_to_target_placement if self.stored else plan_placement_transfer
            self._logical = planner(self.source, self.target)
        return self._logical

    @logical.setter
    def logical(self, value: Any) -> None:
        self._logical = value

    def bind(self, target_bindings: Any = None, **overrides: Any) -> Any:
        """``bind_logical_transfer_plan`` of this world; keywords override its arguments.

        ``logical`` replaces the logical plan, ``target_bindings`` the target bindings; the
        source bindings (or, for a Store source, ``source_manifest``) are passed unless given."""
        from mooncake.reshard.weight.planner import bind_logical_transfer_plan

        logical = overrides.pop("logical") if "logical" in overrides else self.logical
        if self.stored:
            overrides.setdefault("source_manifest", self.source)
        else:
            overrides.setdefault("source_bindings", self.source_bindings)
        targets = self.target_bindings if target_bindings is None else target_bindings
        return bind_logical_transfer_plan(logical, targets, **overrides)

    def execute_and_check(self, plan: Any, target_bindings: Any = None) -> Tuple[int, int]:
        """:func:`execute` ``plan`` on this world's memory, then :func:`check_targets` on the
        target (``target_bindings``, default this world's); returns (bytes moved, bytes checked)."""
        moved = execute(plan, self.memory)
        targets = self.target_bindings if target_bindings is None else target_bindings
        return moved, check_targets(self.target, targets, self.memory)


def split_range(extent: int, parts: int, index: int) -> Tuple[int, int]:
    """Uneven contiguous split: (begin, size) of piece ``index``."""
    base, extra = divmod(extent, parts)
    begin = index * base + min(index, extra)
    return begin, base + (1 if index < extra else 0)


def tp_placement(
    tp: int,
    *,
    prefix: str,
    shape: Tuple[int, ...] = (4, 6),
    dim: int = 1,
    dp: int = 1,
    tensors: Sequence[str] = ("w",),
    tied: bool = False,
    itemsize: int = 2,
    resource_id: str = "model",
    revision: str = "rev-1",
    weight_generation: int = 1,
) -> Any:
    """A complete placement: ``tensors`` split ``tp`` ways on ``dim``, replicated over ``dp``.

    With ``tied=True`` all tensors form one declared alias group (tied weights)."""
    from mooncake.reshard.weight import (
        ParallelRank,
        ParallelTopology,
        PlacementFragment,
        ReplicatedAxis,
        SplitAxis,
        TensorDescriptor,
        TopologyParticipant,
        WeightPlacementManifest,
    )

    ranks = [ParallelRank(dp=d, tp=t) for d in range(dp) for t in range(tp)]
    topology = ParallelTopology(
        tp_size=tp,
        pp_size=1,
        ep_size=1,
        dp_size=dp,
        participants=[TopologyParticipant(f"{prefix}-d{r.dp}t{r.tp}", r) for r in ranks],
    )
    axes: List[Any] = [SplitAxis("tp", dim)]
    if dp > 1:
        axes.append(ReplicatedAxis("dp"))
    descriptors = [
        TensorDescriptor(
            tensor_id=name,
            global_shape=shape,
            dtype=f"int{8 * itemsize}",
            itemsize=itemsize,
            shard_dims=(dim,),
            layout_fingerprint="test:row-major:v1",
            parallel_axes=tuple(axes),
        )
        for name in tensors
    ]
    aliases = tuple(sorted(tensors)) if tied else ()
    fragments = []
    for rank in ranks:
        begin, size = split_range(shape[dim], tp, rank.tp)
        offset = tuple(begin if d == dim else 0 for d in range(len(shape)))
        local = tuple(size if d == dim else shape[d] for d in range(len(shape)))
        nbytes = itemsize
        for extent in local:
            nbytes *= extent
        for name in tensors:
            fragments.append(
                PlacementFragment(
                    name,
                    offset,
                    local,
                    nbytes,
                    rank,
                    aliases=aliases,
                    placement_fragment_id=f"{prefix}-{name}-d{rank.dp}t{rank.tp}",
                )
            )
    return WeightPlacementManifest.from_fragments(
        resource_id=resource_id,
        revision=revision,
        weight_generation=weight_generation,
        placement_set_id=f"{prefix}-set",
        topology=topology,
        tensors=descriptors,
        fragments=fragments,
    )

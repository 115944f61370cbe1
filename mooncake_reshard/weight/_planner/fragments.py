"""Bound fragments: a placement fragment joined to its attested runtime fragment (spec §9.3).

Also names the private fragment unions of spec §8.1 (logical and executable sources/targets).
"""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING, Any, Optional, Union

from ..._layout import layout_builder, layout_dataclass, layout_state_reader, value_base
from ...contracts.fragments import RuntimeBindingFragment
from ...contracts.ids import LeaseId, PlacementFragmentId, RuntimeFragmentId, RuntimeInstanceId, TensorId
from ..storage_manifest import StoredFragmentSnapshot
from ..types import ParallelRank, PlacementFragment
from .attestation import RuntimeBindingAttestation

_U64_MAX = (1 << 64) - 1

# The field names in field order (``layout_dataclass`` checks them against the annotations; the
# C readers index the layout in this order: csrc/layout.h MR_BF_*).
_BOUND_LAYOUT = ("placement", "binding", "instance_id", "runtime_lease_id", "lease_generation", "owner", "attestation")

if TYPE_CHECKING:  # type checkers see a frozen dataclass (layout_dataclass is a dataclass transform)
    _BoundBase = object
else:
    _BoundBase = value_base("BoundWeightFragment", _BOUND_LAYOUT)


@layout_dataclass
class BoundWeightFragment(_BoundBase):
    """A ``PlacementFragment`` joined to one ``RuntimeBindingFragment`` of a live runtime.

    ``instance_id``, ``runtime_lease_id`` and ``lease_generation`` fence the runtime that owns
    the memory; ``attestation`` (when present) proves the pair was validated against its
    placement. ``owner`` must be the runtime binding's own owner object (usually ``None``).

    Stored in a C-owned layout (``mooncake_reshard/_layout.py``): the 7 fields live in the
    instance itself, in field order (no instance ``__dict__``); C readers load them directly
    (``csrc/layout.h``). Pickling is ``__reduce__``'s (the constructor's arguments, no owner),
    as for the dict-backed class: the pickles are the same bytes.
    """

    __slots__ = ("__weakref__",)

    placement: PlacementFragment
    binding: RuntimeBindingFragment
    instance_id: RuntimeInstanceId
    runtime_lease_id: LeaseId
    lease_generation: int
    owner: Optional[object] = field(default=None, compare=False, repr=False)
    attestation: Optional[RuntimeBindingAttestation] = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        placement = self.placement
        binding = self.binding
        if not isinstance(placement, PlacementFragment):
            raise ValueError("bound fragment placement is invalid")
        if not isinstance(binding, RuntimeBindingFragment):
            raise ValueError("bound fragment runtime binding is invalid")
        if placement.placement_fragment_id != binding.placement_fragment_id:
            raise ValueError("bound fragment placement identity differs")
        if placement.nbytes != binding.nbytes:
            raise ValueError("bound fragment byte size differs")
        instance_id = self.instance_id
        if type(instance_id) is not str or not instance_id:
            raise ValueError("bound fragment instance_id must be non-empty")
        lease_id = self.runtime_lease_id
        if type(lease_id) is not str or not lease_id:
            raise ValueError("bound fragment runtime_lease_id must be non-empty")
        generation = self.lease_generation
        if type(generation) is not int or generation < 0 or generation > _U64_MAX:
            raise ValueError("bound fragment lease_generation must fit in an unsigned 64-bit integer")
        # (an emptied owner slot of the binding reads as its default None, as the missing key of
        # the dict-backed class's instance dict read the class default)
        if self.owner is not getattr(binding, "owner", None):
            raise ValueError("bound fragment owner differs from runtime binding")
        attestation = self.attestation
        if attestation is not None:
            if not isinstance(attestation, RuntimeBindingAttestation):
                raise ValueError("bound fragment runtime attestation is invalid")
            if not attestation.validates(placement, binding):
                raise ValueError("bound fragment does not match its runtime binding attestation")
            evidence = attestation.evidence
            if (
                instance_id != evidence.instance_id
                or lease_id != evidence.lease_id
                or generation != evidence.generation
            ):
                raise ValueError("bound fragment runtime fence differs from attestation")

    def __reduce__(self) -> tuple[Any, ...]:
        """Rebuild through the constructor, without the owner (spec §13). An emptied slot
        (``object.__delattr__``) is written as None: an emptied attestation reads as its default
        None, as a missing key of the dict-backed class's instance dict read the class default,
        and the constructor refuses None for any other field on load with that field's message
        (what ``copy`` and ``replace`` of a plan holding the fragment raise), instead of an
        ``AttributeError`` here."""
        return (
            type(self),
            (
                getattr(self, "placement", None),
                getattr(self, "binding", None),
                getattr(self, "instance_id", None),
                getattr(self, "runtime_lease_id", None),
                getattr(self, "lease_generation", None),
                None,
                getattr(self, "attestation", None),
            ),
        )

    @classmethod
    def _restore(
        cls,
        placement: Any,
        binding: Any,
        instance_id: Any,
        runtime_lease_id: Any,
        lease_generation: Any,
        attestation: Any,
    ) -> BoundWeightFragment:
        """Pickle helper (``TransferPlan`` record): exactly ``cls(placement, binding,
        instance_id, runtime_lease_id, lease_generation, None, attestation)``, i.e. the same
        ``__post_init__`` checks, without the generated frozen ``__init__``."""
        bound: BoundWeightFragment
        if cls is BoundWeightFragment:
            bound = _build_bound(
                placement, binding, instance_id, runtime_lease_id, lease_generation, None, attestation
            )
        else:  # a subclass: stored field by field (what the generated ``__init__`` stores)
            bound = object.__new__(cls)
            store = object.__setattr__
            for name, value in zip(
                _BOUND_LAYOUT,
                (placement, binding, instance_id, runtime_lease_id, lease_generation, None, attestation),
            ):
                store(bound, name, value)
        bound.__post_init__()
        return bound

    # -- placement-side views ------------------------------------------------------------
    @property
    def placement_fragment_id(self) -> PlacementFragmentId:
        """The placement fragment id (shared by placement and runtime fragment)."""
        return self.placement.placement_fragment_id

    @property
    def tensor_id(self) -> TensorId:
        """The logical tensor id."""
        return self.placement.tensor_id

    @property
    def global_offset(self) -> tuple[int, ...]:
        """The fragment's offset in global tensor coordinates."""
        return self.placement.global_offset

    @property
    def local_shape(self) -> tuple[int, ...]:
        """The fragment's logical extent."""
        return self.placement.local_shape

    @property
    def rank(self) -> ParallelRank:
        """The parallel rank holding the fragment."""
        return self.placement.rank

    @property
    def pipeline_stage_id(self) -> Optional[int]:
        """The optional virtual pipeline stage."""
        return self.placement.pipeline_stage_id

    @property
    def aliases(self) -> tuple[TensorId, ...]:
        """The declared alias group (sorted), or ``()``."""
        return self.placement.aliases

    # -- runtime-side views --------------------------------------------------------------
    @property
    def fragment_id(self) -> RuntimeFragmentId:
        """The **runtime** fragment id."""
        return self.binding.fragment_id

    @property
    def nbytes(self) -> int:
        """View size in bytes."""
        return self.binding.nbytes

    @property
    def address(self) -> int:
        """View start address."""
        return self.binding.address

    @property
    def worker_id(self) -> str:
        """Worker holding the memory."""
        return self.binding.worker_id

    @property
    def endpoint(self) -> str:
        """Routing endpoint of the worker."""
        return self.binding.endpoint

    @property
    def device(self) -> str:
        """Device holding the memory."""
        return self.binding.device

    @property
    def storage_address(self) -> int:
        """Start of the backing allocation."""
        return self.binding.storage_address

    @property
    def storage_nbytes(self) -> int:
        """Size of the backing allocation."""
        return self.binding.storage_nbytes

    @property
    def storage_offset_bytes(self) -> int:
        """Offset of the view inside its allocation."""
        return self.binding.storage_offset_bytes


# Builds an exact BoundWeightFragment from its 7 field values in field order, stored directly
# (C, no ``__init__`` / ``__post_init__``: the callers check or trust the values).
_build_bound = layout_builder(BoundWeightFragment)
# ``{field: value}`` of a bound fragment's set fields in field order (what the dict-backed
# class's ``__dict__`` held), read through the layout's own member descriptors (a subclass
# cannot shadow them here).
_bound_fields_state = layout_state_reader(BoundWeightFragment)


def _trusted_bound_fragment(
    placement: PlacementFragment,
    binding: RuntimeBindingFragment,
    instance_id: RuntimeInstanceId,
    runtime_lease_id: LeaseId,
    lease_generation: int,
    attestation: RuntimeBindingAttestation,
) -> BoundWeightFragment:
    """Private: a ``BoundWeightFragment`` of an attestation's own placement and evidence
    fragment with the evidence's fences (owner-free), i.e. a value ``__post_init__`` accepts by
    construction of the attestation. Never use it for anything else."""
    bound: BoundWeightFragment = _build_bound(
        placement, binding, instance_id, runtime_lease_id, lease_generation, None, attestation
    )
    return bound


LogicalSourceFragment = Union[PlacementFragment, StoredFragmentSnapshot]
LogicalTargetFragment = PlacementFragment
ExecutableSourceFragment = Union[BoundWeightFragment, StoredFragmentSnapshot]
ExecutableTargetFragment = BoundWeightFragment

__all__ = [
    "BoundWeightFragment",
    "ExecutableSourceFragment",
    "ExecutableTargetFragment",
    "LogicalSourceFragment",
    "LogicalTargetFragment",
]

"""Owner-free runtime binding evidence and its attestation against a placement (spec §9.1, §9.2)."""

from __future__ import annotations

import copyreg
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Iterable, Mapping

from ...contracts.fragments import RuntimeBindingFragment
from ...contracts.ids import (
    LeaseId,
    ParticipantId,
    PlacementFragmentId,
    PlacementId,
    ResourceId,
    RevisionId,
    RuntimeInstanceId,
)
from ..placement import WeightPlacementManifest
from ..runtime import WeightRuntimeBindingManifest
from ..types import PlacementFragment

_OWNER_MESSAGE = "runtime binding evidence must not retain allocation owners"


def _reduce_mapping_proxy(proxy: MappingProxyType) -> tuple[Any, ...]:  # type: ignore[type-arg]
    return (MappingProxyType, (dict(proxy),))


# ``dataclasses.asdict`` deep-copies non-dataclass field values; a ``MappingProxyType`` (the
# attestation's two read-only maps, spec §9.2) cannot be copied by default, which would make
# ``asdict`` fail on attestations, executors and whole transfer plans (spec §1.2 requires it to
# work). Register a reducer so copies rebuild a read-only proxy over a copied dict. Attestation
# pickling does not use it: its state is ``(placement, evidence)`` and the maps are rebuilt.
if MappingProxyType not in copyreg.dispatch_table:
    copyreg.pickle(MappingProxyType, _reduce_mapping_proxy)


def _owner_free(fragment: RuntimeBindingFragment) -> RuntimeBindingFragment:
    """The same fragment without its allocation owner (the object itself when already owner-free)."""
    if fragment.owner is None:
        return fragment
    # Rebuild through the constructor: the owner is the only field that changes.
    copy = fragment.__reduce__()
    rebuilt: RuntimeBindingFragment = copy[0](*copy[1])
    return rebuilt


def _require_owner_free(fragments: Iterable[Any]) -> None:
    for fragment in fragments:
        if getattr(fragment, "owner", None) is not None:
            raise ValueError(_OWNER_MESSAGE)


@dataclass(frozen=True)
class RuntimeBindingEvidence:
    """The owner-free record of one ``WeightRuntimeBindingManifest`` (spec §9.1)."""

    resource_id: ResourceId
    revision: RevisionId
    placement_id: PlacementId
    placement_digest: str
    instance_id: RuntimeInstanceId
    participant_id: ParticipantId
    generation: int
    lease_id: LeaseId
    fragments: tuple[RuntimeBindingFragment, ...]

    def __post_init__(self) -> None:
        fragments = tuple(self.fragments)
        object.__setattr__(self, "fragments", fragments)
        _require_owner_free(fragments)
        binding = self.to_binding()
        object.__setattr__(self, "fragments", binding.fragments)

    @classmethod
    def from_binding(cls, binding: WeightRuntimeBindingManifest) -> RuntimeBindingEvidence:
        """Copy a binding's scalar fields and its fragments with every owner dropped."""
        return cls(
            resource_id=binding.resource_id,
            revision=binding.revision,
            placement_id=binding.placement_id,
            placement_digest=binding.placement_digest,
            instance_id=binding.instance_id,
            participant_id=binding.participant_id,
            generation=binding.generation,
            lease_id=binding.lease_id,
            fragments=tuple(_owner_free(fragment) for fragment in binding.fragments),
        )

    def to_binding(self) -> WeightRuntimeBindingManifest:
        """The equivalent (validated) ``WeightRuntimeBindingManifest``."""
        return WeightRuntimeBindingManifest(
            resource_id=self.resource_id,
            placement_id=self.placement_id,
            placement_digest=self.placement_digest,
            instance_id=self.instance_id,
            generation=self.generation,
            lease_id=self.lease_id,
            revision=self.revision,
            participant_id=self.participant_id,
            fragments=self.fragments,
        )


@dataclass(frozen=True, init=False)
class RuntimeBindingAttestation:
    """Proof that one runtime binding was validated against one placement (spec §9.2).

    Built from a ``WeightRuntimeBindingManifest``; keeps only owner-free evidence.
    """

    placement: WeightPlacementManifest
    evidence: RuntimeBindingEvidence
    _placement_by_id: Mapping[PlacementFragmentId, PlacementFragment] = field(repr=False, compare=False)
    _binding_by_id: Mapping[PlacementFragmentId, RuntimeBindingFragment] = field(repr=False, compare=False)

    def __init__(self, placement: WeightPlacementManifest, binding: WeightRuntimeBindingManifest) -> None:
        if not isinstance(binding, WeightRuntimeBindingManifest):
            raise ValueError("runtime attestation binding is invalid")
        evidence = RuntimeBindingEvidence.from_binding(binding)
        # The evidence holds exactly the binding's content without owners, which
        # validate_runtime_binding ignores: validating the given binding is equivalent to
        # validating evidence.to_binding(), without building that manifest a second time.
        self._set_validated_state(placement, evidence, binding)

    @classmethod
    def _from_validated(
        cls, placement: WeightPlacementManifest, binding: WeightRuntimeBindingManifest
    ) -> RuntimeBindingAttestation:
        """Private: attest a binding that ``validate_runtime_binding(placement, binding)`` has
        just accepted (binding validates every binding before attesting the kept ones)."""
        instance: RuntimeBindingAttestation = object.__new__(cls)
        evidence = RuntimeBindingEvidence.from_binding(binding)
        instance._set_validated_state(placement, evidence, binding, validated=True)
        return instance

    def _set_validated_state(
        self, placement: Any, evidence: Any, binding: Any = None, *, validated: bool = False
    ) -> None:
        """Validate ``(placement, evidence)`` and install it with the two fragment maps."""
        from ..binding import validate_runtime_binding

        if not isinstance(placement, WeightPlacementManifest):
            raise ValueError("runtime attestation placement is invalid")
        if not isinstance(evidence, RuntimeBindingEvidence):
            raise ValueError("runtime attestation evidence is invalid")
        _require_owner_free(evidence.fragments)
        if not validated:
            validate_runtime_binding(placement, evidence.to_binding() if binding is None else binding)
        part = None
        for candidate in placement.parts:
            if candidate.participant_id == evidence.participant_id:
                part = candidate
                break
        placement_by_id: dict[PlacementFragmentId, PlacementFragment] = {}
        if part is not None:
            for fragment in part.fragments:
                placement_by_id[fragment.placement_fragment_id] = fragment
        binding_by_id = {fragment.placement_fragment_id: fragment for fragment in evidence.fragments}
        object.__setattr__(self, "placement", placement)
        object.__setattr__(self, "evidence", evidence)
        object.__setattr__(self, "_placement_by_id", MappingProxyType(placement_by_id))
        object.__setattr__(self, "_binding_by_id", MappingProxyType(binding_by_id))

    def __getstate__(self) -> tuple[WeightPlacementManifest, RuntimeBindingEvidence]:
        return (self.placement, self.evidence)

    def __setstate__(self, state: Any) -> None:
        if not isinstance(state, tuple) or len(state) != 2:
            raise ValueError("runtime attestation evidence is invalid")
        self._set_validated_state(state[0], state[1])

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        return (_new_attestation, (type(self),), self.__getstate__())

    def validates(self, placement_fragment: object, binding_fragment: object) -> bool:
        """True when both fragments equal the attested entries for their placement fragment id."""
        fragment_id = getattr(placement_fragment, "placement_fragment_id", None)
        try:
            expected_placement = self._placement_by_id.get(fragment_id)  # type: ignore[arg-type]
            expected_binding = self._binding_by_id.get(fragment_id)  # type: ignore[arg-type]
        except TypeError:
            return False
        if expected_placement is None or expected_binding is None:
            return False
        return bool(expected_placement == placement_fragment and expected_binding == binding_fragment)

    def worker_fragment_pairs(self, worker_id: str) -> tuple[tuple[PlacementFragment, RuntimeBindingFragment], ...]:
        """The ``(PlacementFragment, RuntimeBindingFragment)`` pairs on ``worker_id``, in evidence order."""
        placement_by_id = self._placement_by_id
        return tuple(
            (placement_by_id[fragment.placement_fragment_id], fragment)
            for fragment in self.evidence.fragments
            if fragment.worker_id == worker_id
        )

    def binding_fragment(self, placement_fragment_id: PlacementFragmentId) -> RuntimeBindingFragment:
        """The owner-free evidence fragment; raises ``KeyError`` for an unknown id."""
        return self._binding_by_id[placement_fragment_id]


def _new_attestation(cls: type) -> RuntimeBindingAttestation:
    """Pickle helper: an uninitialised attestation whose state ``__setstate__`` validates."""
    instance: RuntimeBindingAttestation = object.__new__(cls)
    return instance


__all__ = ["RuntimeBindingAttestation", "RuntimeBindingEvidence"]

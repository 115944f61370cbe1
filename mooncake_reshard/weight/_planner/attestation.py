"""Owner-free runtime binding evidence and its attestation against a placement (spec §9.1, §9.2)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Iterable, Mapping, Optional

from ... import _native
from ..._shared_keys import share_field_keys
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
from .._address_ranges import validate_runtime_address_ranges
from .._default_state import no_field_check, restore_default_state, restore_field_values
from ..binding import _binding_views_and_part, validate_runtime_binding
from ..part import WeightPlacementPart
from ..placement import WeightPlacementManifest
from ..runtime import WeightRuntimeBindingManifest
from ..types import PlacementFragment, TensorDescriptor

_OWNER_MESSAGE = "runtime binding evidence must not retain allocation owners"
_U64_MAX = (1 << 64) - 1


def _deepcopy_mapping_proxy(proxy: MappingProxyType, memo: dict[int, Any]) -> MappingProxyType:  # type: ignore[type-arg]
    return MappingProxyType(copy.deepcopy(dict(proxy), memo))


# ``dataclasses.asdict`` deep-copies non-dataclass field values, and a ``MappingProxyType`` (the
# attestation's two read-only maps, spec §9.2) cannot be deep-copied by default, which would make
# ``asdict`` fail on attestations, executors and whole transfer plans (spec §1.2: ``asdict`` works
# on every type). Teach ``copy.deepcopy`` alone to rebuild a read-only proxy over a deep-copied
# dict; pickling (``copyreg``) of mapping proxies is left untouched process-wide. Attestation
# pickling never needs it: its state is ``(placement, evidence)`` and the maps are rebuilt.
_DEEPCOPY_DISPATCH = getattr(copy, "_deepcopy_dispatch", None)
if isinstance(_DEEPCOPY_DISPATCH, dict):
    _DEEPCOPY_DISPATCH.setdefault(MappingProxyType, _deepcopy_mapping_proxy)


def _owner_free(fragment: RuntimeBindingFragment) -> RuntimeBindingFragment:
    """The same fragment without its allocation owner (the object itself when already owner-free)."""
    if getattr(fragment, "owner", None) is None:  # (an emptied owner slot: its default None)
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
        binding = _binding_of(self)
        object.__setattr__(self, "fragments", binding.fragments)
        _native.untrack_inert(self, RuntimeBindingEvidence)  # out of the cyclic GC when inert

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

    def __setstate__(self, state: Any) -> None:
        """Default dataclass pickling's restore (spec §13: the field dict, without
        ``__post_init__``; the attestation holding it revalidates it), then out of the cyclic
        garbage collector when its values are inert (``weight/_default_state.py``)."""
        restore_default_state(self, state, RuntimeBindingEvidence, (), no_field_check)


share_field_keys(RuntimeBindingEvidence)  # CPython 3.10: dicts the C core fills stay key-sharing


_EVIDENCE_FIELDS = (
    "resource_id",
    "revision",
    "placement_id",
    "placement_digest",
    "instance_id",
    "participant_id",
    "generation",
    "lease_id",
    "fragments",
)


def _restore_evidence(
    resource_id: Any,
    revision: Any,
    placement_id: Any,
    placement_digest: Any,
    instance_id: Any,
    participant_id: Any,
    generation: Any,
    lease_id: Any,
    fragments: Any,
) -> RuntimeBindingEvidence:
    """Unpickle a ``RuntimeBindingEvidence`` from an older pickle of this package (it reduced the
    evidence to this call; now default pickling: ``weight/_default_state.py``): its field dict, as
    default pickling restores it."""
    values = (resource_id, revision, placement_id, placement_digest, instance_id, participant_id, generation, lease_id, fragments)
    evidence: RuntimeBindingEvidence = restore_field_values(RuntimeBindingEvidence, _EVIDENCE_FIELDS, no_field_check, values)
    return evidence


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
        just accepted (binding validates every binding before attesting the kept ones).
"""
        instance: RuntimeBindingAttestation = object.__new__(cls)
        if cls is RuntimeBindingAttestation and isinstance(placement, WeightPlacementManifest):
            part = placement._part_index().get(binding.participant_id)
            built: Optional[RuntimeBindingAttestation] = _native.attest(
                cls,
                RuntimeBindingEvidence,
                RuntimeBindingFragment,
                placement,
                binding,
                None if part is None else part.fragments,
            )
            if built is not None:
                return built
            fast = _fast_validated_state(placement, binding)
            if fast is not None:
                instance.__dict__.update(fast)
                return instance
        evidence = _evidence_from_validated(binding)
        instance._set_validated_state(placement, evidence, binding, validated=True)
        return instance

    def _set_validated_state(
        self, placement: Any, evidence: Any, binding: Any = None, *, validated: bool = False
    ) -> None:
        """Validate ``(placement, evidence)`` and install it with the two fragment maps."""
        if not isinstance(placement, WeightPlacementManifest):
            raise ValueError("runtime attestation placement is invalid")
        if not isinstance(evidence, RuntimeBindingEvidence):
            raise ValueError("runtime attestation evidence is invalid")
        _require_owner_free(evidence.fragments)
        if not validated:
            validate_runtime_binding(placement, _binding_of(evidence) if binding is None else binding)
        part = placement._part_index().get(evidence.participant_id)
        placement_by_id: dict[PlacementFragmentId, PlacementFragment] = {}
        if part is not None:
            for fragment in part.fragments:
                placement_by_id[fragment.placement_fragment_id] = fragment
        binding_by_id = {fragment.placement_fragment_id: fragment for fragment in evidence.fragments}
        state = self.__dict__
        state.pop("_derived_cache", None)
        state.pop("_attested_view", None)
        state["placement"] = placement
        state["evidence"] = evidence
        state["_placement_by_id"] = MappingProxyType(placement_by_id)
        state["_binding_by_id"] = MappingProxyType(binding_by_id)
        # Plain views of the same two dicts for the hot ``validates`` path (not fields, not
        # pickled: the state is ``(placement, evidence)``).
        state["_placement_dict"] = placement_by_id
        state["_binding_dict"] = binding_by_id

    def __getstate__(self) -> tuple[WeightPlacementManifest, RuntimeBindingEvidence]:
        return (self.placement, self.evidence)

    def __setstate__(self, state: Any) -> None:
        if not isinstance(state, tuple) or len(state) != 2:
            raise ValueError("runtime attestation evidence is invalid")
        from .field_types import attestable_shape_failure

        failure = attestable_shape_failure(state[0], state[1])  # default-pickled members (F3)
        if failure is not None:
            raise ValueError(failure)
        self._set_validated_state(state[0], state[1])

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        state = self.__dict__
        return (_new_attestation, (type(self),), (state["placement"], state["evidence"]))

    def validates(self, placement_fragment: object, binding_fragment: object) -> bool:
        """True when both fragments equal the attested entries for their placement fragment id."""
        fragment_id = getattr(placement_fragment, "placement_fragment_id", None)
        state = self.__dict__
        try:
            expected_placement = state["_placement_dict"].get(fragment_id)
            expected_binding = state["_binding_dict"].get(fragment_id)
        except (TypeError, KeyError):
            # (KeyError: an attestation whose state was never set, e.g. unpickled by its reduce
            # helper with the BUILD lost: it attests nothing, so the caller's spec error follows)
            return False
        if expected_placement is None or expected_binding is None:
            return False
        if expected_placement is placement_fragment and expected_binding is binding_fragment:
            return True
        return bool(expected_placement == placement_fragment and expected_binding == binding_fragment)

    def worker_fragment_pairs(self, worker_id: str) -> tuple[tuple[PlacementFragment, RuntimeBindingFragment], ...]:
        """The ``(PlacementFragment, RuntimeBindingFragment)`` pairs on ``worker_id``, in evidence order."""
        placement_by_id = self.__dict__["_placement_dict"]
        return tuple(
            (placement_by_id[fragment.placement_fragment_id], fragment)
            for fragment in self.evidence.fragments
            if fragment.worker_id == worker_id
        )

    def binding_fragment(self, placement_fragment_id: PlacementFragmentId) -> RuntimeBindingFragment:
        """The owner-free evidence fragment; raises ``KeyError`` for an unknown id."""
        return self.__dict__["_binding_dict"][placement_fragment_id]


_HEX = frozenset("0123456789abcdef")


def _normalised_fragments(fragments: Any) -> bool:
    """True for a tuple of exact ``RuntimeBindingFragment``s strictly sorted by placement
    fragment id with distinct runtime ids: what ``WeightRuntimeBindingManifest`` normalises to."""
    if type(fragments) is not tuple:
        return False
    previous = ""
    runtime_ids: set[str] = set()
    for fragment in fragments:
        if type(fragment) is not RuntimeBindingFragment:
            return False
        pfid = fragment.placement_fragment_id
        runtime_id = fragment.fragment_id
        if type(pfid) is not str or pfid <= previous or runtime_id in runtime_ids:
            return False
        previous = pfid
        runtime_ids.add(runtime_id)
    return True


def _fast_validated_state(placement: WeightPlacementManifest, binding: Any) -> Optional[dict[str, Any]]:
    """The attestation state ``_set_validated_state(placement, _evidence_from_validated(binding),
    binding, validated=True)`` installs, in one pass, when the binding has the exact normalised,
    owner-free, valid shape (None otherwise: the caller takes the general path)."""
    fragments = binding.fragments
    if type(fragments) is not tuple or not _valid_scalars(binding):
        return None
    binding_by_id: dict[PlacementFragmentId, RuntimeBindingFragment] = {}
    previous = ""
    runtime_ids: set[str] = set()
    for fragment in fragments:
        if type(fragment) is not RuntimeBindingFragment:
            return None
        pfid = fragment.placement_fragment_id
        runtime_id = fragment.fragment_id
        if type(pfid) is not str or pfid <= previous or runtime_id in runtime_ids or getattr(fragment, "owner", None) is not None:
            return None
        previous = pfid
        runtime_ids.add(runtime_id)
        binding_by_id[pfid] = fragment
    evidence: RuntimeBindingEvidence = object.__new__(RuntimeBindingEvidence)
    evidence_state = evidence.__dict__
    evidence_state["resource_id"] = binding.resource_id
    evidence_state["revision"] = binding.revision
    evidence_state["placement_id"] = binding.placement_id
    evidence_state["placement_digest"] = binding.placement_digest
    evidence_state["instance_id"] = binding.instance_id
    evidence_state["participant_id"] = binding.participant_id
    evidence_state["generation"] = binding.generation
    evidence_state["lease_id"] = binding.lease_id
    evidence_state["fragments"] = fragments
    _native.untrack_inert(evidence, RuntimeBindingEvidence)  # out of the cyclic GC when inert
    part = placement._part_index().get(binding.participant_id)
    placement_by_id: dict[PlacementFragmentId, PlacementFragment] = (
        {} if part is None else {fragment.placement_fragment_id: fragment for fragment in part.fragments}
    )
    return {
        "placement": placement,
        "evidence": evidence,
        "_placement_by_id": MappingProxyType(placement_by_id),
        "_binding_by_id": MappingProxyType(binding_by_id),
        "_placement_dict": placement_by_id,
        "_binding_dict": binding_by_id,
    }


# The last placement digest string found valid (strings are immutable: the same object is the
# same valid value; held, so its identity cannot be recycled).
_VALID_DIGEST: list[Any] = [None]


def _valid_scalars(value: Any) -> bool:
    """True when the binding-shaped ``value`` passes the scalar checks of
    ``WeightRuntimeBindingManifest.__post_init__``."""
    for text in (
        value.resource_id,
        value.placement_id,
        value.instance_id,
        value.lease_id,
        value.revision,
        value.participant_id,
    ):
        if type(text) is not str or not text:
            return False
    digest = value.placement_digest
    if digest is not _VALID_DIGEST[0]:
        if type(digest) is not str or len(digest) != 64 or not _HEX.issuperset(digest):
            return False
        _VALID_DIGEST[0] = digest
    generation = value.generation
    return type(generation) is int and 0 <= generation <= _U64_MAX


def _binding_of(evidence: RuntimeBindingEvidence) -> WeightRuntimeBindingManifest:
    """``evidence.to_binding()``: built directly when the evidence already has the exact
    normalised, valid shape the manifest constructor would accept and produce; otherwise
    through the constructor (which raises its own messages)."""
    fragments = evidence.fragments
    if not _normalised_fragments(fragments) or not _valid_scalars(evidence):
        return evidence.to_binding()
    binding: WeightRuntimeBindingManifest = object.__new__(WeightRuntimeBindingManifest)
    state = binding.__dict__
    state["resource_id"] = evidence.resource_id
    state["placement_id"] = evidence.placement_id
    state["placement_digest"] = evidence.placement_digest
    state["instance_id"] = evidence.instance_id
    state["generation"] = evidence.generation
    state["lease_id"] = evidence.lease_id
    state["revision"] = evidence.revision
    state["participant_id"] = evidence.participant_id
    state["fragments"] = fragments
    return binding


def _evidence_from_validated(binding: WeightRuntimeBindingManifest) -> RuntimeBindingEvidence:
    """Trusted ``RuntimeBindingEvidence.from_binding`` for a binding that
    ``validate_runtime_binding`` has just accepted: the evidence holds exactly the binding's
    (validated, normalised) field values, so its re-validation through ``to_binding`` is
    skipped. Owner-free fragments are shared; others are copied without their owner. The
    scalar checks a forged (``object.__setattr__``) binding could evade are repeated here."""
    fragments = binding.fragments
    if not _normalised_fragments(fragments) or not _valid_scalars(binding):
        return RuntimeBindingEvidence.from_binding(binding)
    if any(getattr(fragment, "owner", None) is not None for fragment in fragments):
        fragments = tuple(_owner_free(fragment) for fragment in fragments)
    evidence: RuntimeBindingEvidence = object.__new__(RuntimeBindingEvidence)
    state = evidence.__dict__
    state["resource_id"] = binding.resource_id
    state["revision"] = binding.revision
    state["placement_id"] = binding.placement_id
    state["placement_digest"] = binding.placement_digest
    state["instance_id"] = binding.instance_id
    state["participant_id"] = binding.participant_id
    state["generation"] = binding.generation
    state["lease_id"] = binding.lease_id
    state["fragments"] = fragments
    _native.untrack_inert(evidence, RuntimeBindingEvidence)  # out of the cyclic GC when inert
    return evidence


def _attest(placement: WeightPlacementManifest, binding: WeightRuntimeBindingManifest) -> RuntimeBindingAttestation:
    """``validate_runtime_binding(placement, binding)`` then the attestation, on every call
    (nothing is remembered: a frozen value can be edited in place)."""
    if type(placement) is WeightPlacementManifest and type(binding) is WeightRuntimeBindingManifest:
        part = placement._part_index().get(binding.participant_id)
        if part is not None:
            # Both exact classes (one resource kind): the whole of validate_runtime_binding and
            # the attestation in one C call, or None when it does not decide (then below).
            fused: Optional[RuntimeBindingAttestation] = _native.attest_binding(
                RuntimeBindingAttestation,
                RuntimeBindingEvidence,
                RuntimeBindingFragment,
                PlacementFragment,
                TensorDescriptor,
                placement,
                binding,
                part.fragments,
                part.tensors,
                placement.resource_id,
                placement.placement_id,
                placement.digest,
                placement.revision,
            )
            if fused is not None:
                return fused
    # validate_runtime_binding(placement, binding), keeping the part it validated against.
    views, part = _binding_views_and_part(placement, binding)
    if len(views) > 1:
        validate_runtime_address_ranges(views)
    if type(placement) is WeightPlacementManifest:
        built: Optional[RuntimeBindingAttestation] = _native.attest(
            RuntimeBindingAttestation, RuntimeBindingEvidence, RuntimeBindingFragment, placement, binding, part.fragments
        )
        if built is not None:
            return built
    return RuntimeBindingAttestation._from_validated(placement, binding)


def _fused_attestations(
    placement: WeightPlacementManifest, bindings: tuple[Any, ...], carry: Optional[tuple[type, list[Any]]] = None
) -> Optional[list[Optional[RuntimeBindingAttestation]]]:
    """``_native.attest_many`` for an exact placement: per binding the attestation of the fused
    ``validate_runtime_binding`` and attest, or None where that is
    not decided in C (never a failure: the caller attests those with ``_attest``, in order).
    ``carry`` (bind's): (the snapshot class, a list that gets the carrier of the attested tables
    built in the same call; see ``project_attested``'s ``carried``)."""
    fused: Any = _native.attest_many(
        RuntimeBindingAttestation,
        RuntimeBindingEvidence,
        RuntimeBindingFragment,
        PlacementFragment,
        TensorDescriptor,
        WeightRuntimeBindingManifest,
        placement,
        placement._part_index(),
        bindings,
        placement.resource_id,
        placement.placement_id,
        placement.digest,
        placement.revision,
        None if carry is None else carry[0],
        WeightPlacementPart,  # (parts of another class are attested in Python: their reads may run code)
    )
    if carry is not None and fused is not None:
        fused, carrier = fused
        carry[1].append(carrier)
    return fused  # type: ignore[no-any-return]


def _attest_many(
    placement: WeightPlacementManifest,
    bindings: Iterable[WeightRuntimeBindingManifest],
    carry: Optional[tuple[type, list[Any]]] = None,
) -> list[RuntimeBindingAttestation]:
    """``[_attest(placement, binding) for binding in bindings]`` (the first failure raises),
    with the placement values the fused C call compares read once. ``carry``: see
    ``_fused_attestations``."""
    if type(placement) is not WeightPlacementManifest:
        return [_attest(placement, binding) for binding in bindings]
    parts = placement._part_index()
    if type(bindings) is tuple:
        # The fused path for every binding in one C call; the bindings it does not decide are
        # attested here, in order, so the first failure is raised as before (the ones it
        # decided are valid: no failure can come from them).
        fused_all = _fused_attestations(placement, bindings, carry)
        if fused_all is not None:
            return [
                _attest(placement, binding) if fused is None else fused for binding, fused in zip(bindings, fused_all)
            ]
    resource_id = placement_id = digest = revision = None
    identity_read = False
    out: list[RuntimeBindingAttestation] = []
    for binding in bindings:
        if type(binding) is not WeightRuntimeBindingManifest:
            out.append(_attest(placement, binding))
            continue
        part = parts.get(binding.participant_id)
        if part is None:
            out.append(_attest(placement, binding))
            continue
        if not identity_read:
            resource_id = placement.resource_id
            placement_id = placement.placement_id
            digest = placement.digest
            revision = placement.revision
            identity_read = True
        fused: Optional[RuntimeBindingAttestation] = _native.attest_binding(
            RuntimeBindingAttestation,
            RuntimeBindingEvidence,
            RuntimeBindingFragment,
            PlacementFragment,
            TensorDescriptor,
            placement,
            binding,
            part.fragments,
            part.tensors,
            resource_id,
            placement_id,
            digest,
            revision,
        )
        if fused is None:
            out.append(_attest(placement, binding))
            continue
        out.append(fused)
    return out


def _new_attestation(cls: type) -> RuntimeBindingAttestation:
    """Pickle helper: an uninitialised attestation whose state ``__setstate__`` validates.
    A damaged pickle may pass anything as ``cls``: only attestation classes are built."""
    if not isinstance(cls, type) or not issubclass(cls, RuntimeBindingAttestation):
        raise ValueError("runtime attestation evidence is invalid")
    instance: RuntimeBindingAttestation = object.__new__(cls)
    return instance


__all__ = ["RuntimeBindingAttestation", "RuntimeBindingEvidence"]

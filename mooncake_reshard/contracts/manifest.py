"""Resource kinds, manifest protocols and the stored-manifest base (spec §3.2)."""

from __future__ import annotations

import abc
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from .ids import LeaseId, PlacementId, ResourceId, RuntimeInstanceId

__all__ = [
    "ResourceKind",
    "ResourceManifest",
    "PlacementManifest",
    "RuntimeBindingManifest",
    "StoredResourceManifest",
    "validate_resource_binding_identity",
]


class ResourceKind(str, Enum):
    """Serialized resource discriminator."""

    MODEL_WEIGHT = "model_weight"
    KV_CACHE = "kv_cache"


class ResourceManifest(Protocol):
    """Structural protocol: resource identity and kind."""

    @property
    def resource_id(self) -> ResourceId:
        """The resource this manifest describes."""
        ...

    @property
    def resource_kind(self) -> ResourceKind:
        """The resource kind discriminator."""
        ...


class PlacementManifest(ResourceManifest, Protocol):
    """Structural protocol: address-free placement identity and digest."""

    @property
    def placement_id(self) -> PlacementId:
        """Canonical placement identity."""
        ...

    @property
    def digest(self) -> str:
        """SHA-256 hex digest of the canonical placement document."""
        ...


class RuntimeBindingManifest(ResourceManifest, Protocol):
    """Structural protocol: placement attestation, runtime instance, generation and lease."""

    @property
    def placement_id(self) -> PlacementId:
        """The attested placement identity."""
        ...

    @property
    def placement_digest(self) -> str:
        """The attested placement digest."""
        ...

    @property
    def instance_id(self) -> RuntimeInstanceId:
        """The live runtime instance."""
        ...

    @property
    def generation(self) -> int:
        """The runtime generation fence."""
        ...

    @property
    def lease_id(self) -> LeaseId:
        """The runtime lease fence."""
        ...


@dataclass(frozen=True)
class StoredResourceManifest(abc.ABC):
    """Abstract base of committed, persistent resource manifests held in an object store."""

    namespace: str
    resource_id: ResourceId
    group_id: str
    manifest_key: str
    created_at: str

    @property
    @abc.abstractmethod
    def resource_kind(self) -> ResourceKind:
        """The resource kind discriminator."""


def validate_resource_binding_identity(
    placement: PlacementManifest, binding: RuntimeBindingManifest
) -> None:
    """Check that ``binding`` attests ``placement`` (kind, resource, placement id, digest)."""
    if placement.resource_kind != binding.resource_kind:
        raise ValueError("placement and runtime binding resource_kind differ")
    if placement.resource_id != binding.resource_id:
        raise ValueError("placement and runtime binding resource_id differ")
    if placement.placement_id != binding.placement_id:
        raise ValueError("placement_id and runtime binding placement_id differ")
    if placement.digest != binding.placement_digest:
        raise ValueError("placement digest and runtime binding placement digest differ")

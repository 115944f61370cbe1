"""Resource-neutral contracts of ``mooncake.reshard`` (spec §3).

ID ``NewType``s, :class:`ResourceKind`, the manifest ``Protocol``s,
:class:`StoredResourceManifest`, :class:`RuntimeBindingFragment` and
:func:`validate_resource_binding_identity`.
"""

from __future__ import annotations

from .fragments import RuntimeBindingFragment
from .ids import (
    LeaseId,
    ParticipantId,
    PlacementFragmentId,
    PlacementId,
    PlacementSetId,
    ResourceId,
    RevisionId,
    RuntimeFragmentId,
    RuntimeInstanceId,
    StoredFragmentSnapshotId,
    TensorId,
    TopologyId,
)
from .manifest import (
    PlacementManifest,
    ResourceKind,
    ResourceManifest,
    RuntimeBindingManifest,
    StoredResourceManifest,
    validate_resource_binding_identity,
)

__all__ = [
    "LeaseId",
    "ParticipantId",
    "PlacementFragmentId",
    "PlacementId",
    "PlacementManifest",
    "PlacementSetId",
    "ResourceId",
    "ResourceKind",
    "ResourceManifest",
    "RevisionId",
    "RuntimeBindingFragment",
    "RuntimeBindingManifest",
    "RuntimeFragmentId",
    "RuntimeInstanceId",
    "StoredFragmentSnapshotId",
    "StoredResourceManifest",
    "TensorId",
    "TopologyId",
    "validate_resource_binding_identity",
]

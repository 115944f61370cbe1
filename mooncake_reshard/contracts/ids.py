"""Resource-neutral identifier types (spec §3.1).

Each name is a :func:`typing.NewType` over ``str``: at run time a value is a
plain ``str``; a static type checker keeps the kinds apart.
"""

from __future__ import annotations

from typing import NewType

__all__ = [
    "ResourceId",
    "PlacementId",
    "ParticipantId",
    "PlacementFragmentId",
    "RuntimeFragmentId",
    "TensorId",
    "TopologyId",
    "PlacementSetId",
    "RevisionId",
    "RuntimeInstanceId",
    "LeaseId",
    "StoredFragmentSnapshotId",
]

ResourceId = NewType("ResourceId", str)
PlacementId = NewType("PlacementId", str)
ParticipantId = NewType("ParticipantId", str)
PlacementFragmentId = NewType("PlacementFragmentId", str)
RuntimeFragmentId = NewType("RuntimeFragmentId", str)
TensorId = NewType("TensorId", str)
TopologyId = NewType("TopologyId", str)
PlacementSetId = NewType("PlacementSetId", str)
RevisionId = NewType("RevisionId", str)
RuntimeInstanceId = NewType("RuntimeInstanceId", str)
LeaseId = NewType("LeaseId", str)
StoredFragmentSnapshotId = NewType("StoredFragmentSnapshotId", str)

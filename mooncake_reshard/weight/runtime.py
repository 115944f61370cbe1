"""``WeightRuntimeBindingManifest``: one participant's physical fragments (spec §4.9)."""

from __future__ import annotations

from dataclasses import dataclass

from .. import _native
from ..contracts._checks import item_tuple, require_str, require_u64
from ..contracts.fragments import RuntimeBindingFragment
from ..contracts.ids import (
    LeaseId,
    ParticipantId,
    PlacementId,
    ResourceId,
    RevisionId,
    RuntimeInstanceId,
)
from ..contracts.manifest import ResourceKind
from .types import require_sha256_digest

__all__ = ["WeightRuntimeBindingManifest"]


def _placement_fragment_key(fragment: RuntimeBindingFragment) -> str:
    return fragment.placement_fragment_id


@dataclass(frozen=True)
class WeightRuntimeBindingManifest:
    """One participant's runtime fragments for one placement, captured from a live runtime.

    It attests ``placement_id`` and ``placement_digest`` of the placement it binds;
    ``generation`` and ``lease_id`` are the live-runtime fences. Fragments are
    stored sorted by placement fragment id.
    """

    resource_id: ResourceId
    placement_id: PlacementId
    placement_digest: str
    instance_id: RuntimeInstanceId
    generation: int
    lease_id: LeaseId
    revision: RevisionId
    participant_id: ParticipantId
    fragments: tuple[RuntimeBindingFragment, ...]

    def __post_init__(self) -> None:
        # (spec §4.9's order, the reference's: the six ids, then the digest, then the generation)
        require_str(self.resource_id, "resource_id")
        require_str(self.placement_id, "placement_id")
        require_str(self.instance_id, "instance_id")
        require_str(self.lease_id, "lease_id")
        require_str(self.revision, "revision")
        require_str(self.participant_id, "participant_id")
        require_sha256_digest(self.placement_digest, "placement_digest")
        require_u64(self.generation, "generation")
        fragments = item_tuple(
            self.fragments, "WeightRuntimeBindingManifest fragments", RuntimeBindingFragment
        )
        fragments = tuple(sorted(fragments, key=_placement_fragment_key))
        placement_ids: set[str] = set()
        runtime_ids: set[str] = set()
        for fragment in fragments:
            if fragment.placement_fragment_id in placement_ids:
                raise ValueError("duplicate placement fragment in runtime binding")
            placement_ids.add(fragment.placement_fragment_id)
            if fragment.fragment_id in runtime_ids:
                raise ValueError("duplicate runtime fragment_id in runtime binding")
            runtime_ids.add(fragment.fragment_id)
        self.__dict__["fragments"] = fragments
        # Out of the cyclic collector when every field is inert (csrc/common.h).
        _native.untrack_inert(self, WeightRuntimeBindingManifest)

    @property
    def resource_kind(self) -> ResourceKind:
        """Always :attr:`ResourceKind.MODEL_WEIGHT`."""
        return ResourceKind.MODEL_WEIGHT

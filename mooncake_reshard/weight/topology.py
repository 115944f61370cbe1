"""Parallel topology: axis sizes and the explicit participant-to-rank mapping (spec §4.6)."""

from __future__ import annotations

from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Optional

from .. import _native
from .._shared_keys import share_field_keys
from ..contracts._checks import item_tuple, require_int, require_str
from ..contracts.ids import ParticipantId, TopologyId
from ._default_state import restore_default_state, restore_field_values
from .types import ParallelRank, typed_rank

__all__ = ["ParallelTopology", "TopologyParticipant"]


def rank_object(rank: ParallelRank) -> dict[str, int]:
    """Canonical JSON object of a rank."""
    state = rank.__dict__
    return {"dp": state["dp"], "tp": state["tp"], "pp": state["pp"], "ep": state["ep"]}


@dataclass(frozen=True)
class TopologyParticipant:
    """One selected worker and its parallel rank."""

    participant_id: ParticipantId
    rank: ParallelRank

    def __post_init__(self) -> None:
        require_str(self.participant_id, "participant_id")
        if not isinstance(self.rank, ParallelRank):
            raise ValueError("topology participant rank must be a ParallelRank")
        _native.untrack_inert(self, TopologyParticipant)  # out of the cyclic GC when inert

    def __setstate__(self, state: Any) -> None:
        """Default dataclass pickling's restore (spec §13: the field dict, without
        ``__post_init__``), refusing fields of another type than the constructor stores:
        forged content never reaches a placement (``_default_state``, fuzz finding F5)."""
        restore_default_state(self, state, TopologyParticipant, _PARTICIPANT_FIELDS, participant_fields_failure)


_PARTICIPANT_FIELDS = ("participant_id", "rank")
_participant_values = itemgetter(*_PARTICIPANT_FIELDS)


def participant_fields_failure(participant_id: Any, rank: Any) -> Optional[str]:
    """The field rule's message of a restored participant's field that is not of the type its
    constructor stores (a str id, a rank of four ints), else ``None``."""
    if type(participant_id) is not str:
        return "participant_id must be a non-empty string"
    if not typed_rank(rank):
        return "topology participant rank must be a ParallelRank"
    return None


def _restore_topology_participant(participant_id: Any, rank: Any) -> TopologyParticipant:
    """Unpickle a ``TopologyParticipant`` from an older pickle of this package
    (``_default_state``)."""
    participant: TopologyParticipant = restore_field_values(
        TopologyParticipant, _PARTICIPANT_FIELDS, participant_fields_failure, (participant_id, rank)
    )
    return participant


@dataclass(frozen=True, init=False)
class ParallelTopology:
    """TP/PP/EP/DP sizes and the exact participants selected for one placement.

    ``world_size`` is the number of participants, not the product of the sizes.
    ``topology_id`` is always the canonical content hash (spec §6.2).
    """

    tp_size: int
    pp_size: int
    ep_size: int
    dp_size: int
    participants: tuple[TopologyParticipant, ...]
    topology_id: TopologyId

    def __init__(
        self,
        *,
        tp_size: int,
        pp_size: int,
        ep_size: int,
        dp_size: int,
        participants: tuple[TopologyParticipant, ...],
        topology_id: Optional[TopologyId] = None,
    ) -> None:
        sizes = {"tp": tp_size, "pp": pp_size, "ep": ep_size, "dp": dp_size}
        for axis, value in sizes.items():
            require_int(value, f"{axis}_size", 1)
        items = item_tuple(participants, "ParallelTopology participants", TopologyParticipant)
        if not items:
            raise ValueError("parallel topology participants must not be empty")
        ordered = tuple(sorted(items, key=lambda participant: participant.participant_id))
        if len({participant.participant_id for participant in ordered}) != len(ordered):
            raise ValueError("duplicate topology participant_id")
        if len({participant.rank for participant in ordered}) != len(ordered):
            raise ValueError("duplicate topology parallel rank")
        for participant in ordered:
            rank = participant.rank
            for axis, size in sizes.items():
                if getattr(rank, axis) >= size:
                    raise ValueError(
                        f"{axis} rank is out of range for participant {participant.participant_id}"
                    )
        content: dict[str, Any] = {
            "schema": "weight-parallel-topology",
            "tp_size": tp_size,
            "pp_size": pp_size,
            "ep_size": ep_size,
            "dp_size": dp_size,
            "participants": [
                {
                    "participant_id": participant.participant_id,
                    "rank": rank_object(participant.rank),
                }
                for participant in ordered
            ],
        }
        canonical = "sha256:" + _native.canonical_sha256(content)
        if topology_id is not None and topology_id != canonical:
            raise ValueError("topology_id does not match canonical topology")
        state = self.__dict__
        state["tp_size"] = tp_size
        state["pp_size"] = pp_size
        state["ep_size"] = ep_size
        state["dp_size"] = dp_size
        state["participants"] = ordered
        state["topology_id"] = canonical
        _native.untrack_inert(self, ParallelTopology)  # out of the cyclic GC when inert

    @property
    def world_size(self) -> int:
        """Number of declared participants."""
        return len(self.participants)

    def participant(self, participant_id: str) -> TopologyParticipant:
        """The participant with ``participant_id``; unknown ids raise ``ValueError``."""
        for candidate in self.participants:
            if candidate.participant_id == participant_id:
                return candidate
        raise ValueError(f"unknown topology participant: {participant_id}")

    def __setstate__(self, state: Any) -> None:
        """Default dataclass pickling's restore with typed fields (see ``TopologyParticipant``)."""
        restore_default_state(self, state, ParallelTopology, _TOPOLOGY_FIELDS, topology_fields_failure)


share_field_keys(ParallelTopology)  # CPython 3.10: dicts the C core fills stay key-sharing


_TOPOLOGY_FIELDS = ("tp_size", "pp_size", "ep_size", "dp_size", "participants", "topology_id")
_topology_values = itemgetter(*_TOPOLOGY_FIELDS)


def topology_fields_failure(
    tp_size: Any, pp_size: Any, ep_size: Any, dp_size: Any, participants: Any, topology_id: Any
) -> Optional[str]:
    """The field rule's message of the first of a restored topology's fields that is not of the
    type its constructor stores (int sizes, a tuple of participants with a str id and a typed
    rank each, a str id), else ``None``."""
    for name, value in (("tp_size", tp_size), ("pp_size", pp_size), ("ep_size", ep_size), ("dp_size", dp_size)):
        if type(value) is not int:
            return f"{name} must be an integer"
    if type(participants) is not tuple:
        return "ParallelTopology participants must be a sequence"
    for participant in participants:
        if type(participant) is TopologyParticipant:  # (the common case)
            try:
                participant_id, rank = _participant_values(participant.__dict__)
            except KeyError:
                pass
            else:
                if type(participant_id) is str and typed_rank(rank):
                    continue
        state = getattr(participant, "__dict__", None) if isinstance(participant, TopologyParticipant) else None
        if type(state) is not dict:
            return "ParallelTopology participants must contain TopologyParticipant"
        # (a participant restored by default pickling has not been checked by its own restore)
        if type(state.get("participant_id")) is not str:
            return "participant_id must be a non-empty string"
        if not typed_rank(state.get("rank")):
            return "topology participant rank must be a ParallelRank"
    if type(topology_id) is not str:
        return "topology_id must be a non-empty string"
    return None


def _restore_parallel_topology(
    tp_size: Any, pp_size: Any, ep_size: Any, dp_size: Any, participants: Any, topology_id: Any
) -> ParallelTopology:
    """Unpickle a ``ParallelTopology`` from an older pickle of this package
    (``_default_state``)."""
    values = (tp_size, pp_size, ep_size, dp_size, participants, topology_id)
    topology: ParallelTopology = restore_field_values(ParallelTopology, _TOPOLOGY_FIELDS, topology_fields_failure, values)
    return topology

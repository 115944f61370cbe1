"""Exact-class checks for the calls that carry facts from one step to a later one (bind's
``binding._sealed``, the restore's carried region facts): reading or comparing objects of the
package's exact classes runs no user code (no subclass ``__eq__``/``__hash__``, property or
``__getattribute__``), so a fact proved on them cannot be changed by foreign code before its use
(tests/test_audit22_*.py, tests/test_audit22b_sealed_gate.py). Computed afresh on every call,
never cached on the objects: a class can be swapped between calls."""

from __future__ import annotations

from itertools import chain
from typing import Any, Iterable, Optional
from operator import attrgetter

from ..part import WeightPlacementPart
from ..placement import WeightPlacementManifest
from ..topology import ParallelTopology, TopologyParticipant
from ..types import ParallelRank, PlacementFragment, TensorDescriptor

_rank_of = attrgetter("rank")
_tensors_of = attrgetter("tensors")
_fragments_of = attrgetter("fragments")

# The classes a placement's members may have (a member of a wrong one of these runs no user code
# either: the validating steps refuse it with their own messages).
_MEMBER_CLASSES = frozenset({TopologyParticipant, WeightPlacementPart, PlacementFragment, TensorDescriptor, ParallelRank})


def exact_items(values: Any, cls: type) -> bool:
    """``values`` is a tuple of exact ``cls`` instances."""
    return type(values) is tuple and set(map(type, values)) <= {cls}


def placement_members(placement: Any) -> Optional[Iterable[Any]]:
    """Every member of an exact ``WeightPlacementManifest`` whose class must be checked (topology
    participants, parts, descriptors and fragments, the placement's and each part's, and their
    ranks), or None when the placement, its topology or one of its member tuples is not of the
    exact class (or a forged instance lacks a field; reading one of an exact class runs no user
    code). A fixed number of passes whatever the part count: the contract benchmark's bind has 8
    parts per placement and a budget of microseconds."""
    if type(placement) is not WeightPlacementManifest:
        return None
    try:
        topology = placement.topology
        participants = topology.participants
        parts = placement.parts
        fragments = placement.fragments
        tensors = placement.tensors
        if (
            type(topology) is not ParallelTopology
            or type(participants) is not tuple
            or type(parts) is not tuple
            or type(fragments) is not tuple
            or type(tensors) is not tuple
            or not set(map(type, parts)) <= {WeightPlacementPart}
        ):
            return None
        part_tensors = tuple(map(_tensors_of, parts))
        part_fragments = tuple(map(_fragments_of, parts))
    except AttributeError:
        return None
    if not set(map(type, chain(part_tensors, part_fragments))) <= {tuple}:
        return None
    every_fragment = tuple(chain(fragments, chain.from_iterable(part_fragments)))
    return chain(
        participants,
        parts,
        every_fragment,
        tensors,
        chain.from_iterable(part_tensors),
        map(_rank_of, chain(participants, parts, every_fragment)),
    )


def exact_members(members: Iterable[Any]) -> bool:
    """Every object in ``members`` is of one of the placement member classes."""
    return set(map(type, members)) <= _MEMBER_CLASSES


def exact_placement(placement: Any) -> bool:
    """An exact ``WeightPlacementManifest`` whose members (``placement_members``) are all of the
    exact classes."""
    members = placement_members(placement)
    try:
        return members is not None and exact_members(members)
    except AttributeError:  # (a forged member without its rank)
        return False

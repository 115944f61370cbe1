"""Exact-class checks for the calls that carry facts from one step to a later one (bind's
``binding._sealed``, the restore's carried region facts): reading or comparing objects of the
exact classes runs no user code (no subclass ``__eq__``/``__hash__``, property or
``__getattribute__``), so a fact proved on them cannot be changed by foreign code before its use
(tests/test_audit22_*.py, tests/test_audit22b_sealed_gate.py). Computed afresh on every call,
never cached on the objects: a class can be swapped between calls."""

from __future__ import annotations

from operator import attrgetter
from typing import Any

from ..part import WeightPlacementPart
from ..placement import WeightPlacementManifest
from ..topology import ParallelTopology, TopologyParticipant
from ..types import ParallelRank, PlacementFragment, TensorDescriptor

_rank_of = attrgetter("rank")


def exact_items(values: Any, cls: type) -> bool:
    """``values`` is a tuple of exact ``cls`` instances."""
    return type(values) is tuple and set(map(type, values)) <= {cls}


def exact_fragments(fragments: Any) -> bool:
    """A tuple of exact ``PlacementFragment`` instances whose ranks are exact ``ParallelRank``."""
    return exact_items(fragments, PlacementFragment) and set(map(type, map(_rank_of, fragments))) <= {ParallelRank}


def exact_placement(placement: Any) -> bool:
    """An exact ``WeightPlacementManifest`` whose topology, parts, ranks, tensor descriptors and
    fragments (the placement's and each part's) are all of the exact classes. False also for a
    forged instance that lacks a field (reading one of an exact class runs no user code)."""
    if type(placement) is not WeightPlacementManifest:
        return False
    try:
        return _exact_members(placement)
    except AttributeError:
        return False


def _exact_members(placement: WeightPlacementManifest) -> bool:
    topology = placement.topology
    if type(topology) is not ParallelTopology or not exact_items(topology.participants, TopologyParticipant):
        return False
    if not set(map(type, map(_rank_of, topology.participants))) <= {ParallelRank}:
        return False
    if not exact_items(placement.tensors, TensorDescriptor) or not exact_fragments(placement.fragments):
        return False
    parts = placement.parts
    if not exact_items(parts, WeightPlacementPart):
        return False
    for part in parts:
        if type(part.rank) is not ParallelRank or not exact_items(part.tensors, TensorDescriptor):
            return False
        if not exact_fragments(part.fragments):
            return False
    return True

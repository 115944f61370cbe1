"""Exact-class checks for the calls that carry facts from one step to a later one (bind's
``binding._sealed``, the restore's carried region facts): reading or comparing objects of the
package's exact classes runs no user code (no subclass ``__eq__``/``__hash__``, property or
``__getattribute__``), so a fact proved on them cannot be changed by foreign code before its use
(tests/test_audit22_*.py, tests/test_audit22b_sealed_gate.py). Computed afresh on every call,
never cached on the objects: a class can be swapped between calls. The per-item loops run in C
(``_native.classes_within``, csrc/exact.c): they touch every fragment of both placements."""

from __future__ import annotations

from typing import Any

from ... import _native
from ..part import WeightPlacementPart
from ..placement import WeightPlacementManifest
from ..topology import ParallelTopology, TopologyParticipant
from ..types import ParallelRank, PlacementFragment, TensorDescriptor

_classes_within = _native.classes_within
_PARTICIPANT = (TopologyParticipant,)
_PART = (WeightPlacementPart,)
_FRAGMENT = (PlacementFragment,)
_TENSOR = (TensorDescriptor,)
_RANK = (ParallelRank,)


def exact_items(values: Any, cls: type) -> bool:
    """``values`` is a tuple of exact ``cls`` instances."""
    return bool(_classes_within(values, (cls,), None, ()))


def exact_descriptors(values: Any) -> bool:
    """``values`` is a tuple of exact ``TensorDescriptor`` instances."""
    return bool(_classes_within(values, _TENSOR, None, ()))


def exact_placement(placement: Any) -> bool:
    """An exact ``WeightPlacementManifest`` whose topology (and its participants), parts,
    descriptors and fragments (the placement's and each part's) and their ranks are all of the
    exact classes, every member sequence an exact tuple. False also for a forged instance that
    lacks a field (reading one of an exact class runs no user code)."""
    if type(placement) is not WeightPlacementManifest:
        return False
    try:
        topology = placement.topology
        if type(topology) is not ParallelTopology:
            return False
        parts = placement.parts
        if not (
            _classes_within(topology.participants, _PARTICIPANT, "rank", _RANK)
            and _classes_within(parts, _PART, "rank", _RANK)
            and _classes_within(placement.tensors, _TENSOR, None, ())
            and _classes_within(placement.fragments, _FRAGMENT, "rank", _RANK)
        ):
            return False
        for part in parts:
            if not (
                _classes_within(part.tensors, _TENSOR, None, ())
                and _classes_within(part.fragments, _FRAGMENT, "rank", _RANK)
            ):
                return False
    except AttributeError:
        return False
    return True

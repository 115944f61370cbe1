"""Exact-type checks of restored field values by kind (fuzz findings F2-F4).

Values restored without their own checks (default pickling, ``object.__new__`` plus a forged
``__dict__``) are checked field by field against the exact types construction guarantees before
any rule does arithmetic on them. Used by the stored-manifest revalidation and by the plan
revalidation's field checks (``_planner/field_types.py``).

Kinds: "str", "int", "optional int", "ints" (tuple of ints), "strs" (tuple of strs), "rank"
(a ``ParallelRank`` whose four fields are exact ints), "axes" (tuple of parallel axes with a str
kind and, for split axes, an int dim).
"""

from __future__ import annotations

from typing import Any, Optional

from .types import OwnershipAxis, ParallelRank, PlacementFragment, ReplicatedAxis, SplitAxis, _fragment_fields_state

__all__ = ["instance_state", "typed_value"]

_AXES = (SplitAxis, ReplicatedAxis, OwnershipAxis)
_RANK_FIELDS = ("dp", "tp", "pp", "ep")


def instance_state(value: Any) -> Optional[dict[str, Any]]:
    """``value.__dict__`` when it is an exact dict, else None; for a ``PlacementFragment``
    (a C-owned layout, no ``__dict__`` of its fields) the dict of its set fields."""
    if isinstance(value, PlacementFragment):
        return _fragment_fields_state(value)
    state = getattr(value, "__dict__", None)
    return state if type(state) is dict else None


def typed_value(value: Any, kind: str) -> bool:
    """True when ``value`` has the exact stored type of a field of this ``kind``."""
    if kind == "str":
        return type(value) is str
    if kind == "int":
        return type(value) is int
    if kind == "optional int":
        return value is None or type(value) is int
    if kind == "rank":
        if not isinstance(value, ParallelRank):
            return False
        state = instance_state(value)
        return state is not None and all(type(state.get(name)) is int for name in _RANK_FIELDS)
    if type(value) is not tuple:
        return False
    if kind == "ints":
        for item in value:
            if type(item) is not int:
                return False
        return True
    if kind == "strs":
        for item in value:
            if type(item) is not str:
                return False
        return True
    for axis in value:  # "axes" (instances, as the descriptor's own rule accepts them)
        state = instance_state(axis) if isinstance(axis, _AXES) else None
        if state is None or type(state.get("kind")) is not str:
            return False
        if isinstance(axis, SplitAxis) and type(state.get("dim")) is not int:
            return False
    return True

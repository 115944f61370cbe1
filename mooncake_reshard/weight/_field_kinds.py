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

import weakref
from typing import Any, Callable, Optional

from .._layout import layout_state_reader

from .types import OwnershipAxis, ParallelRank, ReplicatedAxis, SplitAxis

__all__ = ["instance_state", "typed_value"]

_AXES = (SplitAxis, ReplicatedAxis, OwnershipAxis)
_RANK_FIELDS = ("dp", "tp", "pp", "ep")


def instance_state(value: Any) -> Optional[dict[str, Any]]:
    """``value.__dict__`` when it is an exact dict, else None. For a value stored in a C-owned
    layout (``mooncake_reshard/_layout.py``, also a subclass of one), the dict of its set fields
    read from the layout's slots: what a dict-backed instance's ``__dict__`` held."""
    cls = type(value)
    try:
        reader = _LAYOUT_STATE[cls]
    except KeyError:
        reader = _LAYOUT_STATE[cls] = _layout_state(cls)
    except TypeError:  # an unhashable metaclass instance: not a layout class
        reader = None
    if reader is not None:
        return reader(value)
    state = getattr(value, "__dict__", None)
    return state if type(state) is dict else None


def _layout_state(cls: type) -> Optional[Callable[[Any], dict[str, Any]]]:
    """``layout_state_reader(cls)`` for a class on a C-owned layout, else None."""
    try:
        return layout_state_reader(cls)
    except TypeError:
        return None


# per class: its layout state reader, or None (not a layout class); classes are held weakly
_LAYOUT_STATE: "weakref.WeakKeyDictionary[type, Optional[Callable[[Any], dict[str, Any]]]]" = (
    weakref.WeakKeyDictionary()
)


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

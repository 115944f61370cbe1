"""Private value checks shared by the contract and weight modules (spec §1.3).

Every check is strict: ``type(value) is int`` (so ``bool`` and ``int``
subclasses fail) and ``type(value) is str``. Messages are the spec's templates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NoReturn

U64_MAX = (1 << 64) - 1
I64_MAX = (1 << 63) - 1

_NOT_ITEM_SEQUENCE = (str, bytes, bytearray)


def fail(message: str) -> NoReturn:
    """Raise the contract's ``ValueError``."""
    raise ValueError(message)


def require_str(value: object, name: str) -> None:
    """Non-empty, exact ``str``."""
    if type(value) is not str or not value:
        raise ValueError(f"{name} must be a non-empty string")


def require_int(value: object, name: str, minimum: int = 0) -> None:
    """Exact ``int`` at least ``minimum``."""
    if type(value) is not int:
        raise ValueError(f"{name} must be an integer")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}")


def require_optional_int(value: object, name: str, minimum: int = 0) -> None:
    """``None`` or an exact ``int`` at least ``minimum``."""
    if value is not None:
        require_int(value, name, minimum)


def require_u64(value: object, name: str, minimum: int = 0) -> None:
    """Exact ``int`` in ``[minimum, 2**64-1]``."""
    if type(value) is not int:
        raise ValueError(f"{name} must be an integer")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}")
    if value > U64_MAX:
        raise ValueError(f"{name} must fit in an unsigned 64-bit integer")


def is_item_sequence(value: object) -> bool:
    """A ``collections.abc.Sequence`` other than ``str``/``bytes``/``bytearray``."""
    cls = type(value)
    if cls is tuple or cls is list:
        return True
    return isinstance(value, Sequence) and not isinstance(value, _NOT_ITEM_SEQUENCE)


def int_tuple(value: object, name: str, minimum: int) -> tuple[int, ...]:
    """Weight-type int tuple: any accepted sequence of ints ``>= minimum``."""
    cls = type(value)
    if cls is tuple:
        items: tuple[Any, ...] = value  # type: ignore[assignment]
    elif cls is list or is_item_sequence(value):
        items = tuple(value)  # type: ignore[arg-type]
    else:
        raise ValueError(f"{name} must contain integers")
    for item in items:
        if type(item) is not int or item < minimum:
            require_int(item, name, minimum)
    return items


def require_s64_coordinates(values: tuple[int, ...], name: str) -> None:
    """Documented limitation: coordinates must fit the C kernels' signed 64-bit range."""
    for item in values:
        if item > I64_MAX:
            raise ValueError(f"{name} must fit in a signed 64-bit integer")


def item_tuple(value: object, name: str, item_type: type) -> tuple[Any, ...]:
    """Item sequence of ``item_type`` instances, converted to a tuple."""
    cls = type(value)
    if cls is tuple:
        items: tuple[Any, ...] = value  # type: ignore[assignment]
    elif cls is list or is_item_sequence(value):
        items = tuple(value)  # type: ignore[arg-type]
    else:
        raise ValueError(f"{name} must be a sequence")
    # Bulk accept: an item whose type is a subclass of item_type is an instance of it. Any
    # other type (or a custom metaclass answer) takes the exact per-item loop.
    if len(items) > 8 and all(issubclass(kind, item_type) for kind in set(map(type, items))):
        return items
    for item in items:
        if not isinstance(item, item_type):
            raise ValueError(f"{name} must contain {item_type.__name__}")
    return items


def normalize_aliases(value: object, tensor_id: str) -> tuple[str, ...]:
    """Alias group rules shared by placement and stored fragments (spec §4.4 steps 6-7)."""
    if type(value) is tuple and not value:
        return ()
    if not is_item_sequence(value):
        raise ValueError("aliases must be a sequence")
    items = tuple(value)  # type: ignore[arg-type]
    for item in items:
        if type(item) is not str or not item:
            raise ValueError("aliases must contain non-empty strings")
    if len(set(items)) != len(items):
        raise ValueError("aliases must not contain duplicates")
    if items:
        if len(items) < 2:
            raise ValueError("alias group must contain at least two tensor IDs")
        if tensor_id not in items:
            raise ValueError("alias group must contain the fragment tensor_id")
    return tuple(sorted(items))

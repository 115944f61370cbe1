"""``RuntimeBindingFragment``: one physical, contiguous tensor view (spec §3.3)."""

from __future__ import annotations

from dataclasses import field
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Optional

from .._layout import layout_dataclass, layout_storer, value_base
from ._checks import I64_MAX, U64_MAX
from .ids import PlacementFragmentId, RuntimeFragmentId

__all__ = ["RuntimeBindingFragment"]


def _runtime_ints(value: object, name: str, minimum: int) -> tuple[int, ...]:
    cls = type(value)
    if cls is tuple:
        items: tuple[Any, ...] = value  # type: ignore[assignment]
    elif cls is list:
        items = tuple(value)  # type: ignore[arg-type]
    else:
        raise ValueError(f"{name} must be a tuple or list")
    for item in items:
        if type(item) is not int or item < minimum:
            break
    else:
        return items
    for index, item in enumerate(items):
        if type(item) is not int:
            raise ValueError(f"{name}[{index}] must be an integer")
        if item < minimum:
            raise ValueError(f"{name}[{index}] must be at least {minimum}")
    return items


def _address_range(address: object, nbytes: object) -> None:
    for name, value in (("address", address), ("nbytes", nbytes)):
        if type(value) is not int:
            raise ValueError(f"{name} must be an integer")
        if value < 1:
            raise ValueError(f"{name} must be at least 1")
        if value > U64_MAX:
            raise ValueError(f"{name} must fit in an unsigned 64-bit integer")
    if nbytes > U64_MAX - address:  # type: ignore[operator]
        raise ValueError("address range must fit in an unsigned 64-bit integer")


def _row_major_strides(shape: tuple[int, ...], itemsize: int) -> list[int]:
    strides = [0] * len(shape)
    stride = itemsize
    for dim in range(len(shape) - 1, -1, -1):
        strides[dim] = stride
        stride *= shape[dim]
    return strides


# The field names in field order (``layout_dataclass`` checks them against the annotations; the
# C readers index the layout in this order: csrc/layout.h MR_RF_*).
_RUNTIME_LAYOUT = (
    "placement_fragment_id",
    "fragment_id",
    "address",
    "nbytes",
    "worker_id",
    "endpoint",
    "device",
    "itemsize",
    "local_shape",
    "strides_bytes",
    "storage_address",
    "storage_nbytes",
    "storage_offset_bytes",
    "owner",
)

if TYPE_CHECKING:  # type checkers see a frozen dataclass (layout_dataclass is a dataclass transform)
    _RuntimeBase = object
else:
    _RuntimeBase = value_base("RuntimeBindingFragment", _RUNTIME_LAYOUT)


@layout_dataclass(init=False)
class RuntimeBindingFragment(_RuntimeBase):
    """One physical contiguous tensor view on a runtime worker.

    ``address`` is the first transferable byte of the view; ``storage_address``,
    ``storage_nbytes`` and ``storage_offset_bytes`` describe the allocation that
    contains it. ``owner`` may keep a framework allocation alive; it is never
    compared, shown, pickled or copied into plans.

    Stored in a C-owned layout (``mooncake_reshard/_layout.py``): the 14 fields live in the
    instance itself, in field order (no instance ``__dict__``); C readers load them directly
    (``csrc/layout.h``). Pickling is ``__reduce__``'s (the 13 constructor arguments, no owner),
    as for the dict-backed class: the pickles are the same bytes.
    """

    __slots__ = ("__weakref__",)

    placement_fragment_id: PlacementFragmentId
    fragment_id: RuntimeFragmentId
    address: int
    nbytes: int
    worker_id: str
    endpoint: str
    device: str
    itemsize: int
    local_shape: tuple[int, ...]
    strides_bytes: tuple[int, ...]
    storage_address: int
    storage_nbytes: int
    storage_offset_bytes: int
    owner: Optional[object] = field(default=None, compare=False, repr=False)

    def __init__(
        self,
        placement_fragment_id: PlacementFragmentId,
        fragment_id: RuntimeFragmentId,
        address: int,
        nbytes: int,
        worker_id: str,
        endpoint: str,
        device: str,
        itemsize: int,
        local_shape: tuple[int, ...],
        strides_bytes: tuple[int, ...],
        storage_address: int,
        storage_nbytes: int,
        storage_offset_bytes: int,
        owner: Optional[object] = None,
    ) -> None:
        large_extent = False
        if not (
            type(placement_fragment_id) is str
            and placement_fragment_id
            and type(fragment_id) is str
            and fragment_id
            and type(worker_id) is str
            and worker_id
            and type(endpoint) is str
            and endpoint
            and type(device) is str
            and device
        ):
            for name, value in (
                ("placement_fragment_id", placement_fragment_id),
                ("fragment_id", fragment_id),
                ("worker_id", worker_id),
                ("endpoint", endpoint),
                ("device", device),
            ):
                if type(value) is not str or not value:
                    raise ValueError(f"{name} must be a non-empty string")
        if not (
            type(address) is int
            and type(nbytes) is int
            and 1 <= address
            and 1 <= nbytes <= U64_MAX - address
        ):
            _address_range(address, nbytes)
        if type(itemsize) is not int:
            raise ValueError("runtime itemsize must be an integer")
        if itemsize < 1:
            raise ValueError("runtime itemsize must be at least 1")
        fast = type(local_shape) is tuple and type(strides_bytes) is tuple and len(
            local_shape
        ) == len(strides_bytes)
        if fast:
            for extent, stride in zip(local_shape, strides_bytes):  # type: ignore[arg-type]
                if (
                    type(extent) is not int
                    or type(stride) is not int
                    or extent <= 1
                    or stride < 1
                    or extent > I64_MAX
                ):
                    fast = False
                    break
        if fast:
            shape: tuple[int, ...] = local_shape
            strides: tuple[int, ...] = strides_bytes
        else:
            shape = _runtime_ints(local_shape, "runtime local_shape", 1)
            strides = _runtime_ints(strides_bytes, "runtime strides_bytes", 0)
            if len(shape) != len(strides):
                raise ValueError("runtime stride rank differs from local_shape")
            singleton = False
            for extent, stride in zip(shape, strides):
                if extent == 1:
                    singleton = True
                elif stride == 0:
                    raise ValueError("runtime stride must be positive for non-singleton dimensions")
                if extent > I64_MAX:
                    large_extent = True
            if singleton:
                canonical = _row_major_strides(shape, itemsize)
                strides = tuple(
                    canonical[dim] if extent == 1 else strides[dim]
                    for dim, extent in enumerate(shape)
                )
        if not (
            type(storage_address) is int
            and type(storage_nbytes) is int
            and 1 <= storage_address
            and 1 <= storage_nbytes <= U64_MAX - storage_address
        ):
            _address_range(storage_address, storage_nbytes)
        if type(storage_offset_bytes) is not int:
            raise ValueError("storage_offset_bytes must be an integer")
        if storage_offset_bytes < 0:
            raise ValueError("storage_offset_bytes must be at least 0")
        if storage_offset_bytes > U64_MAX:
            raise ValueError("storage_offset_bytes must fit in an unsigned 64-bit integer")
        if storage_offset_bytes > U64_MAX - storage_address:
            raise ValueError("normalized runtime address must fit in 64 bits")
        if address != storage_address + storage_offset_bytes:
            raise ValueError("runtime address must equal storage_address plus storage_offset_bytes")
        if storage_offset_bytes > storage_nbytes - nbytes:
            raise ValueError("runtime view exceeds storage allocation bounds")
        if large_extent:
            raise ValueError("runtime local_shape must fit in a signed 64-bit integer")
        # stored directly (a subclass instance too: the same slots), and out of the cyclic
        # collector when exactly this class and every field is inert (an owner that is a
        # tracked object keeps the fragment tracked): csrc/layout.c layout_storer; local_shape
        # and strides_bytes as the first equal tuples seen (mooncake_reshard/_shared_tuples.py)
        _store(
            self, placement_fragment_id, fragment_id, address, nbytes, worker_id, endpoint, device, itemsize,
            shape, strides, storage_address, storage_nbytes, storage_offset_bytes, owner,
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), _constructor_arguments(self))

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        # ``__reduce__`` for every protocol, without the ``object.__reduce_ex__`` hop.
        return (type(self), _constructor_arguments(self))


_store = layout_storer(RuntimeBindingFragment, shared=("local_shape", "strides_bytes"))


def _constructor_arguments(fragment: RuntimeBindingFragment) -> tuple[Any, ...]:
    """The 13 non-owner fields in order: pickling rebuilds through the constructor (spec §13).
    Read from the instance state (the layout's slots), as the dict-backed class read its
    instance dict: a subclass's property of a field's name is not consulted; an emptied field
    raises KeyError with the first missing field's name, as reading the instance dict did."""
    try:
        if type(fragment) is RuntimeBindingFragment:
            return _read_exact(fragment)
        return tuple([get(fragment) for get in _GETTERS])
    except AttributeError:
        for name, get in zip(_RUNTIME_LAYOUT, _GETTERS):
            try:
                get(fragment)
            except AttributeError:
                raise KeyError(name) from None
        raise


# (exact instances: the class's attributes are its layout's member descriptors, layout_dataclass
# checked that no class attribute shadows them)
_read_exact = attrgetter(*_RUNTIME_LAYOUT[:13])
_GETTERS = tuple(_RuntimeBase.__dict__[name].__get__ for name in _RUNTIME_LAYOUT[:13])

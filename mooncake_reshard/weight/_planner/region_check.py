"""Canonical-geometry recheck of the transfer regions inside a revalidated plan.

``TransferRegion`` uses default dataclass pickling (spec §13): its ``__post_init__`` does not run
when a plan is unpickled, copied or replaced, and plan revalidation only calls
``validate_bounds()`` per operation (spec §8.6 step 12, §9.6 step 7). A region whose geometry
was forged with ``object.__setattr__`` (a negative base offset, wrong strides, loop counts,
``inner_bytes``, overlap box or tensor id) would then pass. ``recheck_regions`` closes that gap
as a final revalidation step: every operation must satisfy every rule of spec §8.4, and the first
one that does not raises the message ``TransferRegion`` construction would raise for it.

The C predicate ``_native.regions_canonical`` proves most regions canonical in one pass; an
operation it cannot prove (a rule fails, or a value is beyond what it decides: non-exact types,
ints beyond int64, more than 32 dimensions) is decided by ``TransferRegion.__post_init__``
itself, and the scan resumes after it when it passes.

A plan built by ``bind_logical_transfer_plan`` passes ``carried``: ``bind_regions`` proved each
region it built canonical (the same kernel) in the pass that stored the region's fields, and
``_native.regions_canonical_carried`` accepts that proof only for exactly those regions, after
reading again every value the adapter can edit that the proof used (each distinct fragment's
placement box and tensor id, and its binding's ``nbytes``: the very objects proven). Anything
else, and every other caller, runs the full predicate.
"""

from __future__ import annotations

from typing import Any

from ... import _native
from ...contracts.fragments import RuntimeBindingFragment
from ..storage_manifest import StoredFragmentSnapshot
from ..types import PlacementFragment
from .contracts import TransferRegion
from .fragments import BoundWeightFragment

__all__ = ["recheck_regions"]

_regions_canonical = _native.regions_canonical
_regions_canonical_carried = _native.regions_canonical_carried
_validate_region = TransferRegion.__post_init__

# Exact types whose field values the C predicate reads from the instance ``__dict__`` (the same
# values attribute access returns: none of these classes defines a class-level attribute for a
# field it reads; pinned by tests/test_region_recheck.py). ``BoundWeightFragment`` is read as its
# properties do: box and tensor id from ``placement``, ``nbytes`` from ``binding``.
_PLAIN_TYPES = (TransferRegion, PlacementFragment, BoundWeightFragment, RuntimeBindingFragment, StoredFragmentSnapshot)


def recheck_regions(operations: tuple[object, ...], carried: Any = None) -> None:
    """Raise ``ValueError`` with the spec §8.4 message of the first operation whose fields do
    not satisfy every ``TransferRegion`` rule; return ``None`` when all do.

    ``operations`` is the plan's operation tuple. Operations that are not ``TransferRegion``
    instances are left to the plan's own checks (spec §8.6 step 12 rejects them first).
    ``carried``: ``bind_regions``' carried facts (the private bind path only; None elsewhere).
    """
    if type(operations) is not tuple:
        operations = tuple(operations)
    if (
        type(carried) is tuple
        and len(carried) == 9
        and carried[8] is not None
        and _regions_canonical_carried(operations, carried, BoundWeightFragment, PlacementFragment, RuntimeBindingFragment)
    ):
        return
    count = len(operations)
    index = _regions_canonical(operations, 0, BoundWeightFragment, _PLAIN_TYPES)
    while index < count:
        op = operations[index]
        if isinstance(op, TransferRegion):
            # Raises the first failing rule's message; returns when the region is valid but
            # beyond what the C predicate decides.
            _validate_region(op)
        index = _regions_canonical(operations, index + 1, BoundWeightFragment, _PLAIN_TYPES)

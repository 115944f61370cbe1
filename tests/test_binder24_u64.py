"""bind_regions' physical accept path reads each target's address and nbytes with a fast int64
read first (session 24: ``bd_u63``, values in [0, 2**63)), the general unsigned read for the
rest. At the int64 / uint64 edges (and past them, and negative) its decision must be
``physical_whole_targets``' (physical.c's own reads), and the brute force's where every extent
fits below 2**64."""

from __future__ import annotations

import pytest

from test_binder22_extents import ITEM_BYTES, _decide, _oracle, _whole

EDGES = [
    0,
    (1 << 62),
    (1 << 63) - ITEM_BYTES - 1,
    (1 << 63) - ITEM_BYTES,
    (1 << 63) - 1,
    1 << 63,
    (1 << 63) + 5,
    (1 << 64) - 2 * ITEM_BYTES,
    (1 << 64) - ITEM_BYTES - 1,
    (1 << 64) - ITEM_BYTES,
    (1 << 64) - 1,
    1 << 64,
    1 << 70,
    -1,
    -(1 << 63),
]


@pytest.mark.parametrize("address", EDGES)
@pytest.mark.parametrize("field", ["address", "nbytes"])
def test_edges_decide_as_physical_whole_targets(address: int, field: str) -> None:
    ops = [_whole(f"f{k}", 4096 + k * ITEM_BYTES, ("i0", "w0", "cpu")) for k in range(3)]
    late = _whole("late", 1 << 40, ("i0", "w0", "cpu"))
    if field == "address":
        object.__setattr__(late.target.binding, "address", address)
    else:
        object.__setattr__(late.target.binding, "nbytes", address)
    ops.append(late)
    decided = _decide(ops)  # asserts physical_whole_targets' decision agrees
    binding = late.target.binding
    if 0 <= binding.address and 0 < binding.nbytes and binding.address + binding.nbytes < (1 << 64):
        assert decided is (True if _oracle(ops) else None)
    else:
        assert decided is None

"""The objects of tests/data/region_pickles_r16.json and the script that wrote it: pickles made
by the dict-backed TransferRegion (run once with the build before the layout change, from the
tests directory: ``python data/make_region_pickles_r16.py OUT``). tests/test_region_layout.py
imports this module to build the very same objects (deterministic addresses: a bump allocator,
nothing random), so the pickles of both builds can be compared byte for byte."""

import json
import os
import pickle
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from memory_executor import HostWorld, tp_placement  # noqa: E402

from mooncake.reshard.weight import TransferRegion  # noqa: E402


class BumpMemory:
    """A deterministic allocator (nothing is filled or executed)."""

    def __init__(self) -> None:
        self.next = 1 << 40

    def alloc(self, nbytes: int, fill: int = 0) -> int:
        address = self.next
        self.next += (nbytes + 4095) // 4096 * 4096 + 4096
        return address


def world() -> HostWorld:
    """TP2 x DP2 source -> TP3 target (uneven: 2-D regions with strides)."""
    source = tp_placement(2, prefix="s", dp=2, shape=(4, 7))
    target = tp_placement(3, prefix="t", shape=(4, 7))
    return HostWorld(source, target, memory=BumpMemory(), plan_first=True)


WORLD = world()
LOGICAL = WORLD.logical
BOUND = WORLD.bind()
LOGICAL_REGION = LOGICAL.operations[0]
BOUND_REGION = BOUND.operations[-1]

OBJECTS = {
    "logical_region": LOGICAL_REGION,
    "bound_region": BOUND_REGION,
    "logical_plan": LOGICAL,
    "bound_plan": BOUND,
}

if __name__ == "__main__":
    assert type(LOGICAL_REGION) is TransferRegion and type(BOUND_REGION) is TransferRegion
    out = {name: {} for name in OBJECTS}
    for name, value in OBJECTS.items():
        for proto in range(pickle.HIGHEST_PROTOCOL + 1):
            out[name][str(proto)] = pickle.dumps(value, proto).hex()
    json.dump(out, open(sys.argv[1], "w"), indent=1)
    print("ok", sys.version)

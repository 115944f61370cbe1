"""The objects of tests/data/bound_pickles_r16.json and the script that wrote it: pickles made
by the dict-backed BoundWeightFragment (run once with the build before the layout change, with
the tests directory on the path: ``PYTHONPATH=tests python tests/data/make_bound_pickles_r16.py
OUT``).
tests/test_bound_fragment_layout.py imports this module to build the very same objects: a
bound plan of host placements on deterministic fake addresses (binding never touches the
memory), so the pickles are the same in every process."""

import json
import pickle
import sys
from typing import Any, List

from memory_executor import HostWorld, tp_placement

from mooncake.reshard.weight._planner.fragments import BoundWeightFragment


class FakeMemory:
    """``alloc`` at fixed addresses (nothing is filled or executed)."""

    def __init__(self) -> None:
        self.next = 1 << 40

    def alloc(self, nbytes: int, fill: int = 0) -> int:
        address = self.next
        self.next += (nbytes + 4095) // 4096 * 4096
        return address


def bound_plan() -> Any:
    """A TP2 x DP2 -> TP3 bound plan on fake addresses (same values in every process)."""
    source = tp_placement(2, prefix="s", dp=2, shape=(4, 7))
    target = tp_placement(3, prefix="t", shape=(4, 7))
    return HostWorld(source, target, memory=FakeMemory(), plan_first=True).bind()


def fragments(plan: Any) -> List[Any]:
    """Three bound fragments of the plan (a target, a source, one without attestation)."""
    op = plan.operations[0]
    target, source = op.target, op.source
    bare = BoundWeightFragment(
        target.placement, target.binding, target.instance_id, target.runtime_lease_id, target.lease_generation
    )
    return [target, source, bare]


if __name__ == "__main__":
    plan = bound_plan()
    out: dict = {"fragment": {}, "plan": {}, "version": sys.version}
    for proto in range(pickle.HIGHEST_PROTOCOL + 1):
        out["fragment"][str(proto)] = pickle.dumps(fragments(plan), proto).hex()
        out["plan"][str(proto)] = pickle.dumps(plan, proto).hex()
    with open(sys.argv[1], "w", encoding="ascii") as handle:
        json.dump(out, handle, indent=1)
    print("ok", sys.version)

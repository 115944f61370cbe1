"""The objects of tests/data/snapshot_pickles_r15.json and the script that wrote it: pickles made
by the dict-backed RuntimeFragmentSnapshot (run once with the build before the layout change:
``python tests/data/make_snapshot_pickles_r15.py OUT``). tests/test_snapshot_layout.py imports
this module to build the very same objects (same shared constants, hence the same pickle memo)."""

import json
import pickle
import sys

from mooncake.reshard.weight import RuntimeFragmentSnapshot
from mooncake.reshard.weight.planner import ExecutorTransferPlan
from mooncake.reshard.weight.types import ParallelRank

VALUES = dict(
    placement_fragment_id="pf-0", fragment_id="rf-0", tensor_id="layer.0.w", global_offset=(0, 128),
    local_shape=(64, 128), address=1 << 40, nbytes=16384, worker_id="w0", endpoint="ep0", device="cuda:0",
    itemsize=2, strides_bytes=(256, 2), storage_address=(1 << 40) - 4096, storage_nbytes=1 << 20,
    storage_offset_bytes=4096, lease_generation=7,
)
snap = RuntimeFragmentSnapshot(**VALUES)
snap2 = RuntimeFragmentSnapshot(**{**VALUES, "fragment_id": "rf-1", "address": (1 << 40) + 16384, "lease_generation": 2**63})
ex = ExecutorTransferPlan(
    instance_id="inst", placement_id="pl", participant_id="p0", placement_digest="0" * 64, runtime_lease_id="lease",
    worker_id="w0", rank=ParallelRank(dp=0, tp=0, pp=0, ep=0), fragment_ids=("rf-0", "rf-1"),
    fragment_snapshots=(snap, snap2),
)

if __name__ == "__main__":
    out = {"values": {k: list(v) if isinstance(v, tuple) else v for k, v in VALUES.items()}, "snapshot": {}, "executor": {}}
    for proto in range(pickle.HIGHEST_PROTOCOL + 1):
        out["snapshot"][str(proto)] = pickle.dumps(snap, proto).hex()
        out["executor"][str(proto)] = pickle.dumps(ex, proto).hex()
    json.dump(out, open(sys.argv[1], "w"), indent=1)
    print("ok", sys.version)

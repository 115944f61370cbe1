"""The objects of tests/data/runtime_pickles_r17.json and the script that wrote it: pickles made
by the dict-backed RuntimeBindingFragment (run once with the build before the layout change, with
the tests directory on the path: ``PYTHONPATH=tests python tests/data/make_runtime_pickles_r17.py
OUT``). tests/test_runtime_fragment_layout.py imports this module to build the very same objects:
runtime fragments (plain, with an owner, with singleton dimensions whose strides the constructor
normalises, at the 64-bit limits), a runtime manifest and a bound plan on deterministic fake
addresses, plus "reference-style" pickles of the fragments as a default (dict-state) dataclass
would write them (``copyreg.__newobj__`` / ``copyreg._reconstructor`` and the instance dict)."""

import copyreg
import io
import json
import pickle
import sys
from typing import Any, List

from make_bound_pickles_r16 import bound_plan

from mooncake.reshard.contracts import RuntimeBindingFragment
from mooncake.reshard.weight import WeightRuntimeBindingManifest

BASE = 1 << 40
U64 = (1 << 64) - 1


class Owner:
    """An allocation owner (never pickled)."""


OWNER = Owner()


def fragments() -> List[Any]:
    """The runtime fragments (the same values in every process)."""
    plain = RuntimeBindingFragment(
        "pf-0", "rf-0", BASE + 4096, 16384, "w0", "ep0", "cuda:0", 2, (64, 128), (256, 2), BASE, 1 << 20, 4096
    )
    owned = RuntimeBindingFragment(
        "pf-1", "rf-1", BASE + 20480, 8192, "w0", "ep0", "cuda:0", 2, (32, 128), (256, 2), BASE, 1 << 20, 20480,
        owner=OWNER,
    )
    singleton = RuntimeBindingFragment(
        "pf-2", "rf-2", BASE, 512, "w1", "ep1", "cuda:1", 4, [1, 128, 1], [0, 4, 0], BASE, 512, 0
    )
    limits = RuntimeBindingFragment(
        "pf-3", "rf-3", U64 - 7, 7, "w\u00e9", "ep", "cpu", 1, (7,), (1,), U64 - 15, 15, 8
    )
    return [plain, owned, singleton, limits]


def manifest() -> Any:
    """A runtime manifest of the first three fragments."""
    return WeightRuntimeBindingManifest(
        "res", "pl", "0" * 64, "inst", 3, "lease", "rev", "p0", fragments()[:3]
    )


class ReferencePickler(pickle.Pickler):
    """Pickles RuntimeBindingFragment as a default dataclass with an instance dict would (the
    state is the instance dict, owner included)."""

    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is not RuntimeBindingFragment:
            return NotImplemented
        state = {f: getattr(obj, f) for f in FIELDS}
        if self.proto < 2:
            return (copyreg._reconstructor, (type(obj), object, None), state)
        return (copyreg.__newobj__, (type(obj),), state)


FIELDS = (
    "placement_fragment_id", "fragment_id", "address", "nbytes", "worker_id", "endpoint", "device", "itemsize",
    "local_shape", "strides_bytes", "storage_address", "storage_nbytes", "storage_offset_bytes", "owner",
)


def reference_dumps(obj: Any, protocol: int) -> bytes:
    """``obj`` pickled with ReferencePickler."""
    buffer = io.BytesIO()
    pickler = ReferencePickler(buffer, protocol)
    pickler.proto = protocol
    pickler.dump(obj)
    return buffer.getvalue()


if __name__ == "__main__":
    plan = bound_plan()
    frags = fragments()
    unowned = [f for f in frags if f.owner is None]
    out: dict = {"fragments": {}, "manifest": {}, "plan": {}, "reference": {}, "version": sys.version}
    for proto in range(pickle.HIGHEST_PROTOCOL + 1):
        out["fragments"][str(proto)] = pickle.dumps(frags, proto).hex()
        out["manifest"][str(proto)] = pickle.dumps(manifest(), proto).hex()
        out["plan"][str(proto)] = pickle.dumps(plan, proto).hex()
        out["reference"][str(proto)] = reference_dumps(unowned, proto).hex()
    with open(sys.argv[1], "w", encoding="ascii") as handle:
        json.dump(out, handle, indent=1)
    print("ok", sys.version)

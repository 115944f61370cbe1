"""The objects of tests/data/placement_pickles_r17.json and the script that wrote it: pickles made
by the dict-backed PlacementFragment (run once with the build before the layout change, from the
tests directory: ``python data/make_placement_pickles_r17.py OUT``). tests/test_placement_fragment_layout.py
imports this module to build the very same objects (same shared constants, hence the same pickle
memo), so the pickles of both builds can be compared byte for byte.

Forms: the packed ``_restore_placement_fragment`` call (an exact fragment with its 8 fields), the
default dataclass form (``copyreg.__newobj__`` + a ``{field: value}`` state: what a
reference-produced pickle holds, spec §13, written here with ``copyreg.__reduce_ex__``'s protocol
2+ form through ``object.__reduce_ex__``), and whole manifests holding fragments."""

import io
import json
import os
import pickle
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from memory_executor import tp_placement  # noqa: E402

from mooncake.reshard.weight import PlacementFragment  # noqa: E402
from mooncake.reshard.weight.types import ParallelRank  # noqa: E402

RANK = ParallelRank(dp=1, tp=2, pp=0, ep=3)
CANONICAL = PlacementFragment("layer.0.w", (0, 128), (64, 128), 16384, RANK)
EXPLICIT = PlacementFragment(
    "layer.1.w", (64,), (32,), 64, ParallelRank(dp=0, tp=0, pp=1, ep=0), pipeline_stage_id=1,
    aliases=("layer.1.w", "layer.1.alias"), placement_fragment_id="pf-explicit",
)
BIG = PlacementFragment("t", (2**62, 0), (1, 2**40), 2**64 - 1, RANK, pipeline_stage_id=0)
GROUP = (CANONICAL, EXPLICIT, BIG, CANONICAL)

MANIFEST = tp_placement(2, prefix="s", dp=2, shape=(4, 7))

OBJECTS = {"canonical": CANONICAL, "explicit": EXPLICIT, "big": BIG, "group": GROUP, "manifest": MANIFEST}


def default_form(fragment, protocol):
    """The default dataclass pickle of ``fragment`` (what the reference writes: no packed call):
    ``object.__reduce_ex__``'s form for the fragment, through a pickler override."""
    buffer = io.BytesIO()
    pickler = _DefaultPickler(buffer, protocol)
    pickler.protocol = protocol
    pickler.dump(fragment)
    return buffer.getvalue()


class _DefaultPickler(pickle.Pickler):
    """Pickles every ``PlacementFragment`` with ``object.__reduce_ex__`` (default pickling)."""

    def reducer_override(self, obj):
        if type(obj) is PlacementFragment:
            return object.__reduce_ex__(obj, self.protocol)
        return NotImplemented


FIELDS = ("tensor_id", "global_offset", "local_shape", "nbytes", "rank", "pipeline_stage_id", "aliases",
          "placement_fragment_id")

if __name__ == "__main__":
    out = {name: {} for name in OBJECTS}
    out["default_canonical"] = {}
    out["default_explicit"] = {}
    for proto in range(pickle.HIGHEST_PROTOCOL + 1):
        for name, value in OBJECTS.items():
            out[name][str(proto)] = pickle.dumps(value, proto).hex()
        out["default_canonical"][str(proto)] = default_form(CANONICAL, proto).hex()
        out["default_explicit"][str(proto)] = default_form(EXPLICIT, proto).hex()
    json.dump(out, open(sys.argv[1], "w"), indent=1)
    print("ok", sys.version)

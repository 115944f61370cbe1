"""Coverage-guided fuzzing of the unpickling of bound plans (``TransferPlan``, spec §13) with
atheris (libFuzzer for Python). Engine and contract: ``pickle_cases.py``.

    python fuzz/atheris_pickle.py fuzz/corpus/pickle -max_total_time=60 -max_len=65536

Input bytes, by the first byte:

* ``0x00``-``0x7F``: the rest is pickle bytes, loaded with the restricting unpickler (raw
  damage; the corpus holds the seed pickles, protocols 4 and 5, in this form);
* ``0x80``-``0xBF``: the rest seeds one structured edit of a seed record (an opcode byte, a leaf,
  a table entry or a field of a placement-graph object), re-pickled and loaded for real;
* ``0xC0``-``0xFF``: a direct ``_native.graph_unpack`` call: the rest is the opcode string, the
  leaves are those of seed ``data[0] % seeds`` (coverage then steers the opcode bytes).

Findings abort with the offending input saved by libFuzzer; documented open findings
(``fuzz/findings/F2``-``F5``) are filtered by ``pickle_cases.known_finding`` (set
``MOONCAKE_FUZZ_KNOWN=1`` to see them).
"""

from __future__ import annotations

import os
import random
import sys

import atheris

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

with atheris.instrument_imports():
    import mooncake.reshard.weight  # noqa: F401  (instrument the package)
    import mooncake.reshard.weight._planner.bound_pickle  # noqa: F401
    import pickle_cases

PACKED = [args for _, restore, args in pickle_cases.seed_splits() if restore == "_restore_packed_transfer_plan"]


def one_input(data: bytes) -> None:
    if len(data) < 2 or len(data) > pickle_cases.MAX_INPUT:
        return
    head = data[0]
    if head < 0x80:
        pickle_cases.check_loads(data[1:], structured=False)
    elif head < 0xC0:
        pickle_cases.structured_case(random.Random(data[1:]))
    else:
        values = PACKED[head % len(PACKED)][1]
        pickle_cases.check_graph_unpack(data[1:], values)


if __name__ == "__main__":
    sys.setrecursionlimit(10000)
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()

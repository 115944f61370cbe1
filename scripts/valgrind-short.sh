#!/usr/bin/env bash
# Valgrind memcheck over a short workload that drives every C entry point (placement JSON decode,
# coverage and fragment tables, planning, binding, physical-range validation, canonical JSON,
# hostile-object error paths). Fails when memcheck reports an invalid access, a use of
# uninitialised memory or a definite leak whose stack passes through the extension (_native /
# csrc); CPython's own startup noise is ignored.
# Usage: bash scripts/valgrind-short.sh   (PYTHON=... to pick the interpreter; about 1-2 minutes)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
log=${VALGRIND_LOG:-$(mktemp /tmp/valgrind-short.XXXXXX.log)}
command -v valgrind >/dev/null || { echo "valgrind not installed (apt-get install valgrind)"; exit 1; }
cd "$root"
PYTHONMALLOC=malloc valgrind --tool=memcheck --leak-check=full --show-leak-kinds=definite \
  --errors-for-leak-kinds=definite --track-origins=no --num-callers=30 --log-file="$log" \
  "$python" - <<'PY'
import pickle, sys
sys.path[:0] = ["tests", "fuzz"]
from layout_model import build_runtime_bindings
from memory_executor import tp_placement
from mooncake.reshard import _native
from mooncake.reshard.weight import (bind_logical_transfer_plan, plan_placement_transfer,
    weight_placement_from_json, weight_placement_to_json)
from mooncake.reshard.weight._planner.bound_validation import _validate_target_physical_ranges
from pyfuzz import RaisingEq, RaisingIndex, RaisingIter, seed_documents, check_json_text

for text in seed_documents():
    check_json_text(text)
for _ in range(3):
    source = tp_placement(2, prefix="s", shape=(8, 6), dim=1, dp=2, tensors=("a", "b"), tied=True)
    target = tp_placement(3, prefix="t", shape=(8, 6), dim=0, tensors=("a", "b"), tied=True)
    source = weight_placement_from_json(weight_placement_to_json(source))
    plan = plan_placement_transfer(source, target)
    bound = bind_logical_transfer_plan(plan, build_runtime_bindings(target, base_address=1 << 30),
                                       source_bindings=build_runtime_bindings(source))
    _validate_target_physical_ranges(bound.operations, max_segment_checks=10**6)
    assert pickle.loads(pickle.dumps(bound)) == bound
big = [((i % 7, i // 7, 0), (1, 1, 2)) for i in range(200)]
_native.boxes_overlap([o for o, _ in big], [s for _, s in big])
_native.boxes_exactly_cover((0, 0, 0), (7, 29, 2), [o for o, _ in big], [s for _, s in big])
table = _native.pack_fragments([(4, 4)], [0, 0], [(0, 0), (2, 0)], [(2, 4), (2, 4)], [(0, 0, 0, 0), (0, 1, 0, 0)], [16, 16])
table.uncovered_group(["dp"]); table.overlapping_rank_group(); table.duplicate_logical_fragment()
_native.physical_sweep([0, 0, 1, 4096, 1, 1, 1000, 2], [0, 4096, 2000, 0], 1, 1, None, None, 1000)
_native.canonical_json({"b": [1, "\ud800", None, True], "a": {"\x00": -2**63}}, True)
for call in (
    lambda: _native.boxes_overlap([(0, 0), (RaisingIndex(), 0)], [(1, 1), (1, 1)]),
    lambda: _native.pack_fragments([(2,)], [0], RaisingIter(), [(2,)], [(0, 0, 0, 0)], [4]),
    lambda: _native.canonical_json({"a": 1, RaisingEq(): 2}),
    lambda: _native.placement_fragment_id("w", (RaisingIndex(),), (1,), 1, 0, 0, 0, 0, (), None),
    lambda: _native.physical_sweep([0, 0, 1, 16, RaisingIndex(), 0], [0, 16, 8, 0], 1, 1, None, None, 10),
    lambda: weight_placement_from_json("[" * 5000),
):
    try:
        call()
    except Exception:
        pass
print("workload done")
PY
"$python" - "$log" <<'PY'
import re, sys
text = open(sys.argv[1], encoding="utf-8", errors="replace").read()
blocks = re.split(r"\n==\d+== \n", text)
ours = [b for b in blocks
        if re.search(r"Invalid (read|write|free)|uninitialised|Mismatched free|definitely lost|overlap", b)
        and re.search(r"_native|csrc/", b)]
summary = re.findall(r"ERROR SUMMARY: .*", text)
print(summary[-1] if summary else "no summary")
if ours:
    print(f"{len(ours)} memcheck report(s) through the extension:")
    for b in ours[:5]:
        print(b[:3000])
    sys.exit(1)
print("valgrind: no memcheck reports through the extension (log: %s)" % sys.argv[1])
PY

#!/usr/bin/env bash
# Short fuzz run for CI (about 2 minutes on 2 cores with the defaults):
#   1. the libFuzzer targets over the C kernels (ASan + UBSan), each from the committed corpus;
#   2. the Python-level random fuzzer (placement JSON + hostile constructor fields);
#   3. the atheris (coverage-guided) JSON/constructor target, when atheris is installed;
#   4. the forgery target (a field of one input object replaced or removed: the logical plan's
#      revalidation, bind, the binding entry points, the planners);
#   5. the pickle target (unpickling of bound plans): the random runner, and its atheris
#      driver when atheris is installed.
# Every finding fails the run (non-zero exit) and leaves its input in $FUZZ_OUT.
# Environment: PYTHON (default python3), FUZZ_SECONDS per target (default 15),
# FUZZ_OUT (default a temp dir), FUZZ_REQUIRE_CLANG=1 to fail instead of skipping without clang.
# Long runs: see fuzz/README.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
python=${PYTHON:-python3}
seconds=${FUZZ_SECONDS:-15}
out=${FUZZ_OUT:-$(mktemp -d)}
mkdir -p "$out"
status=0

if command -v "${CC_FUZZ:-clang}" >/dev/null 2>&1; then
  PYTHON="$python" bash "$here/build.sh"
  for target in coverage_kernels physical overlap table regioncheck; do
    work="$out/corpus-$target"
    mkdir -p "$work"
    cp "$here/corpus/$target/"* "$work/" 2>/dev/null || true
    echo "== libFuzzer $target (${seconds}s)"
    if ! ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$here/build/${target}_fuzz" -max_total_time="$seconds" -print_final_stats=1 \
        -artifact_prefix="$out/$target-" "$work" >"$out/$target.log" 2>&1; then
      echo "FINDING in $target: see $out/$target.log"; tail -30 "$out/$target.log"; status=1
    else
      grep -E "^(stat::number_of_executed_units|Done)" "$out/$target.log" | tail -1
    fi
  done
else
  if [ "${FUZZ_REQUIRE_CLANG:-0}" = 1 ]; then echo "clang not found"; exit 1; fi
  echo "== clang not found: C kernel targets skipped (apt-get install clang)"
fi

echo "== Python fuzzer (${seconds}s)"
(cd "$root" && "$python" "$here/pyfuzz.py" --seconds "$seconds") || status=1

if "$python" -c "import atheris" >/dev/null 2>&1; then
  work="$out/corpus-json"
  mkdir -p "$work"
  cp "$here/corpus/json/"* "$work/"
  echo "== atheris JSON/constructors (${seconds}s)"
  if ! (cd "$root" && "$python" "$here/atheris_json.py" "$work" -max_total_time="$seconds" -rss_limit_mb=4096 \
        -artifact_prefix="$out/json-" >"$out/json.log" 2>&1); then
    echo "FINDING in atheris_json: see $out/json.log"; tail -30 "$out/json.log"; status=1
  else
    grep -E "^Done" "$out/json.log" | tail -1
  fi
else
  echo "== atheris not installed: coverage-guided Python target skipped (pip install atheris)"
fi

echo "== Python forgery fuzzer (${seconds}s)"
(cd "$root" && "$python" "$here/forgery.py" --seconds "$seconds") || status=1

echo "== Python pickle fuzzer (${seconds}s)"
(cd "$root" && "$python" "$here/pickle_cases.py" --seconds "$seconds") || status=1

if "$python" -c "import atheris" >/dev/null 2>&1; then
  work="$out/corpus-pickle"
  mkdir -p "$work"
  cp "$here/corpus/pickle/"* "$work/"
  echo "== atheris pickle of bound plans (${seconds}s)"
  if ! (cd "$root" && "$python" "$here/atheris_pickle.py" "$work" -max_total_time="$seconds" -max_len=65536 \
        -rss_limit_mb=4096 -timeout=30 -artifact_prefix="$out/pickle-" >"$out/pickle.log" 2>&1); then
    echo "FINDING in atheris_pickle: see $out/pickle.log"; tail -30 "$out/pickle.log"; status=1
  else
    grep -E "^Done" "$out/pickle.log" | tail -1
  fi
fi
[ "$status" = 0 ] && echo "fuzz short run: no findings"
exit "$status"

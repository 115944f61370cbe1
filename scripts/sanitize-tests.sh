#!/usr/bin/env bash
# Build the extension with AddressSanitizer + UndefinedBehaviorSanitizer in a fresh
# virtual environment and run the whole test suite against it.
# Usage: bash scripts/sanitize-tests.sh [pytest args...]   (default: tests -n auto)
set -euo pipefail
# default: the whole suite, one pytest-xdist worker per core
if [ $# -eq 0 ]; then set -- tests -n auto; fi
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${SANITIZE_VENV:-$root/.venv-sanitize}
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip
# Build from a private copy of the work tree (without build products): pip builds local
# directories in place, and sanitizer objects left in the tree's build/ would be linked
# into the next ordinary build_ext of the tree.
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
tar -C "$root" --exclude=./build --exclude=./.git --exclude='./.venv*' --exclude='*.so' \
  --exclude='*.egg-info' -cf - . | tar -C "$src" -xf -
export MOONCAKE_RESHARD_SANITIZE=1 MOONCAKE_RESHARD_STRICT=1
"$venv/bin/python" -m pip install -q --no-cache-dir --force-reinstall --no-deps "$src"
"$venv/bin/python" -m pip install -q "$src[test]"
asan=$(gcc -print-file-name=libasan.so)
ubsan=$(gcc -print-file-name=libubsan.so)
cd "$root"
# The sanitizers write their reports to files: a report written to stderr inside a test goes to
# pytest's capture of that test, which the abort that follows discards (in a worker or not).
logs=$(mktemp -d)
trap 'rm -rf "$src" "$logs"' EXIT
# detect_leaks=0: CPython itself does not free everything at exit; leaks of our own
# objects are covered by the lifecycle tests instead.
status=0
LD_PRELOAD="$asan:$ubsan" PYTHONMALLOC=malloc \
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:log_path="$logs/asan" \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path="$logs/ubsan" \
  "$venv/bin/python" -m pytest -p no:cacheprovider "$@" || status=$?
# Any report fails the run, even one from a process whose exit the tests did not check.
for report in "$logs"/*; do
  [ -e "$report" ] || continue
  echo "== sanitizer report $(basename "$report")"
  cat "$report"
  if grep -q "ERROR: AddressSanitizer\|runtime error:" "$report"; then
    [ "$status" -ne 0 ] || status=1
  fi
done
exit "$status"

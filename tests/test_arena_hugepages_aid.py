"""The measuring aid ``benchmarks/arena_hugepages.c`` (an LD_PRELOAD library, not part of the
package): built with the machine's C compiler, preloaded into a fresh interpreter, it serves
pymalloc's arenas from its region, serves released arenas again, and leaves the interpreter's
results unchanged. Whether the kernel backs the region with huge pages depends on the machine's
transparent-huge-page mode, so that is not asserted here.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parent.parent / "benchmarks" / "arena_hugepages.c"

# Objects past several arenas, released, then made again: fresh arenas first, released ones after.
CHILD = """
first = [object() for _ in range(1_000_000)]
del first
second = [(i, str(i)) for i in range(200_000)]
assert sum(i for i, _ in second) == 199_999 * 200_000 // 2 and second[-1][1] == "199999"
print("ok")
"""


def _compiler() -> list:
    configured = sysconfig.get_config_var("CC") or "cc"
    return shlex.split(configured)[:1]


def _child_env(library: Path, **extra: str) -> dict:
    # A plain interpreter: the sanitizer run preloads its runtimes and turns pymalloc off
    # (PYTHONMALLOC=malloc), which would leave no arena to serve.
    dropped = {"LD_PRELOAD", "PYTHONMALLOC", "ASAN_OPTIONS", "UBSAN_OPTIONS"}
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env["LD_PRELOAD"] = str(library)
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    built_at = tmp_path_factory.mktemp("arena_hugepages") / "arena_hugepages.so"
    built = subprocess.run(
        [*_compiler(), "-O2", "-Wall", "-Werror", "-shared", "-fPIC", "-o", str(built_at), str(SOURCE), "-ldl",
         "-lpthread"],
        capture_output=True, text=True, timeout=120,
    )
    assert built.returncode == 0, built.stderr
    return built_at


def _run_child(library: Path, **extra: str) -> str:
    """CHILD under the library with ARENA_HUGEPAGES_REPORT=1 and ``extra``; its stderr."""
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120,
                          env=_child_env(library, ARENA_HUGEPAGES_REPORT="1", **extra))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
    return done.stderr


def _report(stderr: str) -> dict:
    match = re.search(r"arena_hugepages: served (\d+), served again (\d+), passed through (\d+), region (\d+) MiB used",
                      stderr)
    assert match is not None, stderr
    served, again, passed, used = (int(g) for g in match.groups())
    return {"served": served, "again": again, "passed": passed, "used_mib": used}


def test_arenas_are_served_from_the_region_and_served_again(library: Path) -> None:
    report = _report(_run_child(library))
    # a million objects take well over ten 1 MiB arenas; the second list reuses released ones
    assert report["served"] >= 10, report
    assert report["again"] >= 1, report
    assert report["passed"] == 0, report
    assert report["used_mib"] == report["served"], report


def test_a_used_up_region_passes_arenas_through(library: Path) -> None:
    report = _report(_run_child(library, ARENA_HUGEPAGES_MIB="4"))
    assert report["served"] == report["used_mib"] == 4, report
    assert report["passed"] >= 1, report


def test_a_region_of_zero_turns_the_library_off(library: Path) -> None:
    assert "arena_hugepages:" not in _run_child(library, ARENA_HUGEPAGES_MIB="0")

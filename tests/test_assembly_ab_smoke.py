"""Smoke test of benchmarks/assembly_ab.py (not timed): one process of each kind runs on tiny
workloads and prints what its documentation says (a CPU time; a cProfile table; refused
arguments)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "assembly_ab.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600, env=dict(os.environ),
    )


def test_one_process_prints_its_cpu_time() -> None:
    for args in (("--layers", "1", "--experts", "48", "--reps", "1"), ("--sweep", "600", "--reps", "2")):
        completed = _run(*args)
        assert completed.returncode == 0, completed.stderr
        assert float(completed.stdout.strip()) > 0


def test_profile_and_refused_pairs() -> None:
    completed = _run("--layers", "1", "--experts", "48", "--profile", "5")
    assert completed.returncode == 0, completed.stderr
    assert "function calls" in completed.stdout and "tottime" in completed.stdout
    refused = _run("--pairs", "1")
    assert refused.returncode == 2 and "--old" in refused.stderr

"""Smoke test of benchmarks/native_ab.py (not timed): with a copy of this build's extension as
the "base", every stage runs under both builds, the results agree, and the report names the
stage and its C calls; its own build as the base is refused."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mooncake.reshard import _native

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "native_ab.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600, env=dict(os.environ),
    )


@pytest.mark.parametrize("stage", ["assemble", "plan", "bind"])
def test_each_stage_runs_under_both_builds(tmp_path: Path, stage: str) -> None:
    copy = tmp_path / Path(_native.__file__).name
    shutil.copyfile(_native.__file__, copy)
    completed = _run("--base", str(copy), "--stage", stage, "--sweep", "996", "--repeats", "2", "--top", "3")
    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.splitlines()
    assert lines[0].startswith(f"{stage} on sweep 996, 2 runs of each build")
    assert "new/base" in lines[1]
    assert len(lines) == 5  # the stage line and the three largest C calls


def test_its_own_build_is_refused() -> None:
    completed = _run("--base", _native.__file__, "--stage", "assemble", "--sweep", "996", "--repeats", "1")
    assert completed.returncode != 0 and "own build" in completed.stderr

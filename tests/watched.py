"""Spies inside watched calls (binding._sealed): a large bind or restore is watched for frames of
code other than the package's, and a test's Python spy is such code: it would make the call decide
its plan again by every rule. A spy that only observes is admitted like the package's own code
for the test (``exactness._EXTRA_CODES``, as benchmarks/native_ab.py admits its timers)."""

from __future__ import annotations

import sys
from typing import Any, Callable

import pytest

from mooncake.reshard.weight._planner import exactness


def admit_in_watched_calls(monkeypatch: pytest.MonkeyPatch, *functions: Any) -> None:
    """The code of ``functions`` runs unseen by the watches of this test's calls."""
    codes = tuple(function.__code__ for function in functions)
    monkeypatch.setattr(exactness, "_EXTRA_CODES", exactness._EXTRA_CODES + codes)


def no_hooks() -> None:
    """Skips the test when a trace or profile hook is set: no call is sealed then."""
    if sys.gettrace() is not None or sys.getprofile() is not None:
        pytest.skip("a trace or profile hook is set (coverage, a debugger): no call is sealed")


def spy_on(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, record: Callable[[tuple[Any, ...], Any], None]) -> None:
    """Replaces ``owner.name`` (for the test) by a spy that calls it and then ``record(args,
    result)``; both admitted in watched calls. A function the spy replaces on a class gets the
    instance as ``args[0]``."""
    real = getattr(owner, name)

    def spy(*args: Any) -> Any:
        result = real(*args)
        record(args, result)
        return result

    admit_in_watched_calls(monkeypatch, spy, record)
    monkeypatch.setattr(owner, name, spy)

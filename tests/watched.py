"""Spies inside watched calls (binding._sealed): a large bind or restore is watched for frames of
code other than the package's, and a test's Python spy is such code: it would make the call decide
its plan again by every rule. A spy that only observes is admitted like the package's own code
for the test (``exactness._EXTRA_CODES``, as benchmarks/native_ab.py admits its timers)."""

from __future__ import annotations

from typing import Any

import pytest

from mooncake.reshard.weight._planner import exactness


def admit_in_watched_calls(monkeypatch: pytest.MonkeyPatch, *functions: Any) -> None:
    """The code of ``functions`` runs unseen by the watches of this test's calls."""
    codes = tuple(function.__code__ for function in functions)
    monkeypatch.setattr(exactness, "_EXTRA_CODES", exactness._EXTRA_CODES + codes)

"""How often a call took its carried facts: ``revalidate_scan_carried`` (csrc/revalidate.c) runs
only on a sealed bind call's (or an exact restore's) path (binding._sealed). Shared by the tests
of the sealed gate."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from mooncake.reshard import _native


def count_carried_scans(monkeypatch: pytest.MonkeyPatch, call: Callable[[], Any]) -> tuple[Any, int]:
    """``call()``'s result (its exception propagates) and the number of carried scans it ran."""
    calls = []
    real = _native.revalidate_scan_carried

    def spy(*args: Any) -> Any:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(_native, "revalidate_scan_carried", spy)
    try:
        return call(), len(calls)
    finally:
        monkeypatch.undo()

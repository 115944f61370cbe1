"""The large-bind watch trusts the package's code and the standard library's, nothing else.

``exactness._package_codes`` collects the code objects a ``CodeWatch`` admits. It once walked
the whole ``mooncake`` namespace package (importing, and trusting, any other distribution's
``mooncake.*`` modules) and trusted every function value of the package's modules, so a
function planted there before the first watch (a monkeypatch) was admitted by every later one
(BIND6, session 26)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mooncake.reshard.weight import binding
from mooncake.reshard.weight._planner import exactness


def _planted() -> None:
    """Foreign code: defined in this test module."""


def test_a_function_planted_in_a_package_module_is_not_trusted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(binding, "_planted_by_a_test", _planted, raising=False)
    monkeypatch.setattr(exactness, "_planted_by_a_test", _planted, raising=False)
    codes = exactness._package_codes()
    assert _planted.__code__ not in codes
    # the package's own code and the standard library's it uses stay trusted
    assert exactness._package_codes.__code__ in codes
    import dataclasses

    assert dataclasses.fields.__code__ in codes


def test_a_method_planted_in_a_package_class_is_not_trusted(monkeypatch: pytest.MonkeyPatch) -> None:
    from mooncake.reshard.weight import PlacementFragment

    monkeypatch.setattr(PlacementFragment, "_planted_by_a_test", _planted, raising=False)
    assert _planted.__code__ not in exactness._package_codes()


def test_other_distributions_mooncake_modules_are_neither_imported_nor_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    portion = tmp_path / "mooncake"
    portion.mkdir()
    (portion / "zz_foreign_probe.py").write_text(
        "import sys\nsys._mooncake_reshard_probe_imported = True\n\ndef foreign():\n    return 1\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import mooncake

    assert str(portion) in list(mooncake.__path__)  # the namespace package now has this portion
    try:
        codes = exactness._package_codes()
        assert not getattr(sys, "_mooncake_reshard_probe_imported", False)
        assert "mooncake.zz_foreign_probe" not in sys.modules
        assert not any(code.co_filename.startswith(str(portion)) for code in codes)
    finally:
        sys.modules.pop("mooncake.zz_foreign_probe", None)
        if hasattr(sys, "_mooncake_reshard_probe_imported"):
            del sys._mooncake_reshard_probe_imported

"""The shipped stub ``_native.pyi`` describes exactly the extension's public names.

Type checkers read the stub instead of the extension (PEP 561), so a native function missing from
it is invisible to them and a stale entry promises a name that does not exist."""

from __future__ import annotations

import ast
from pathlib import Path

from mooncake.reshard import _native

STUB = Path(_native.__file__).with_name("_native.pyi")


def _stub_names() -> set[str]:
    tree = ast.parse(STUB.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def test_stub_lists_every_native_name() -> None:
    native = {name for name in dir(_native) if not name.startswith("__")}
    assert sorted(native - _stub_names()) == []


def test_stub_lists_no_name_the_extension_lacks() -> None:
    native = {name for name in dir(_native) if not name.startswith("__")}
    assert sorted(_stub_names() - native) == []

"""Layout bases without a mutable anchor (session 23).

Until session 23 ``_native.value_base`` made each layout base (an immutable type) on a mutable
"anchor" type that held the layout's description as a class attribute. CPython 3.12 and 3.13 warn
when an immutable type is made with a mutable base ("slated to be disallowed in Python 3.14"), so
importing the package failed under ``-W error`` and would fail on 3.14. Now the base derives from
``object`` alone and carries its description in its own module (``PyType_FromModuleAndSpec``),
which Python code cannot give to any other class.
"""

from __future__ import annotations

import gc
import importlib
import os
import pkgutil
import subprocess
import sys
import types
import weakref
from typing import Any, Iterator, List, Tuple

import pytest

import mooncake.reshard as package
from mooncake.reshard import _native
from mooncake.reshard._layout import layout_dataclass, layout_fields, value_base

# Py_TPFLAGS_IMMUTABLETYPE (Include/object.h; the same value since 3.10)
IMMUTABLE = 1 << 8


def _package_modules() -> List[types.ModuleType]:
    """Every module of the package, imported."""
    modules = [package]
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        modules.append(importlib.import_module(info.name))
    return modules


def _package_layout_bases() -> Iterator[Tuple[type, type]]:
    """(class, its layout base) for every class of the package built on a value_base layout."""
    seen = set()
    for module in _package_modules():
        for value in list(vars(module).values()):
            if isinstance(value, type) and id(value) not in seen:
                seen.add(id(value))
                info = _native.layout_info(value)
                if info is not None:
                    yield value, info[0]


def _module_of(base: type) -> types.ModuleType:
    """The module a layout base holds (found through the collector, as any Python code could)."""
    found = [r for r in gc.get_referents(base) if isinstance(r, types.ModuleType)]
    assert len(found) == 1, found
    return found[0]


def test_import_raises_no_deprecation_warning_in_a_fresh_interpreter() -> None:
    """Importing every module of the package under ``-W error`` (on this interpreter, from the
    same files as this process) raises nothing: on 3.12 / 3.13 the old anchor raised
    DeprecationWarning at the first value_base."""
    code = (
        "import importlib, pkgutil, mooncake.reshard as p, mooncake.reshard._native as n\n"
        "for i in pkgutil.walk_packages(p.__path__, p.__name__ + '.'):\n"
        "    importlib.import_module(i.name)\n"
        "print(n.__file__)\n"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(entry for entry in sys.path if entry)
    done = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-W", "error::PendingDeprecationWarning", "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == _native.__file__


def test_every_package_layout_base_derives_from_immutable_types_only() -> None:
    pairs = list(_package_layout_bases())
    names = {cls.__name__ for cls, _ in pairs}
    # the package's C-owned layouts (the representation change steps)
    assert {"PlacementFragment", "RuntimeBindingFragment", "BoundWeightFragment", "TransferRegion"} <= names
    for cls, base in pairs:
        assert base.__bases__ == (object,), (cls, base.__bases__)
        assert base.__mro__ == (base, object)
        for entry in base.__mro__:
            assert entry.__flags__ & IMMUTABLE, (cls, entry)
        assert base.__mro__[0] in cls.__mro__


def test_a_new_base_is_immutable_and_has_no_description_attribute() -> None:
    base = value_base("Fresh", ("a", "b"))
    assert type(base) is type and base.__mro__ == (base, object)
    assert base.__flags__ & IMMUTABLE
    assert "__mr_layout__" not in vars(base) and not hasattr(base, "__mr_layout__")
    assert base.__module__ == "mooncake.reshard._native" and base.__name__ == "Fresh"
    with pytest.raises(TypeError):
        base.a = 1  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        base.extra = 1  # type: ignore[attr-defined]
    assert _native.layout_info(base) == (base, ("a", "b"))


def test_the_module_is_freed_with_its_base_and_releases_the_names() -> None:
    names = tuple(sys.intern(name) for name in ("left", "right"))
    before = sys.getrefcount(names)
    base = _native.value_base("Freed", names)
    assert sys.getrefcount(names) == before + 1  # the module's state holds the names
    module = _module_of(base)
    # the state is traversed: the collector sees the names
    referents = gc.get_referents(module)
    assert any(r is names for r in referents)
    base_ref, module_ref = weakref.ref(base), weakref.ref(module)
    del base, module, referents
    gc.collect()
    assert base_ref() is None and module_ref() is None
    assert sys.getrefcount(names) == before


def test_a_kept_module_outliving_its_base_describes_nothing() -> None:
    base = value_base("Outlived", ("x",))

    @layout_dataclass
    class Outlived(base):  # type: ignore[misc, valid-type]
        __slots__ = ("__weakref__",)
        x: int

    module = _module_of(base)
    assert layout_fields(Outlived) == ("x",)
    base_ref = weakref.ref(base)
    del base, Outlived
    gc.collect()
    assert base_ref() is None
    # the module lives on (held here) but no live type has it: new bases of the same name and of
    # other fields each find their own description, even at the dead base's address
    for _ in range(200):
        again = value_base("Outlived", ("y", "z"))
        assert _native.layout_info(again) == (again, ("y", "z"))
        assert _module_of(again) is not module
        sub = type("Sub", (again,), {"__slots__": ()})
        assert _native.layout_info(sub) == (again, ("y", "z")) and layout_fields(sub) == ("y", "z")
        del again, sub
        gc.collect()
    assert any(r == ("x",) for r in gc.get_referents(module))


def test_python_classes_cannot_borrow_a_description() -> None:
    base = value_base("Borrowed", ("a", "b"))
    module = _module_of(base)
    forged: List[Any] = [
        type("Plain", (), {"__module__": module}),
        type("WithDict", (), dict(vars(module))),
        type("Named", (), {"__mr_layout__": module, "__module__": "mooncake.reshard._native"}),
    ]
    for cls in forged:
        assert _native.layout_info(cls) is None
        assert not _native.layout_check(cls, 2) and not _native.layout_check(cls, ("a", "b"))

    class Sub(base):  # type: ignore[misc, valid-type]
        __slots__ = ()

    # a subclass is found through its base (its own module is none: classes made in Python have
    # none, and it is not inherited)
    assert _native.layout_info(Sub) == (base, ("a", "b"))
    assert _native.layout_check(Sub, ("a", "b"))


def test_many_bases_of_one_layout_each_find_themselves() -> None:
    bases = [value_base("Many", ("p", "q")) for _ in range(50)]
    for base in bases:
        assert _native.layout_info(base) == (base, ("p", "q"))
    assert len({id(_module_of(base)) for base in bases}) == len(bases)
    doomed = [weakref.ref(base) for base in bases[::2]]
    del bases[::2]
    gc.collect()
    assert all(ref() is None for ref in doomed)
    for base in bases:
        assert _native.layout_info(base) == (base, ("p", "q"))

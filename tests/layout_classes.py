"""Throwaway value classes for tests/test_native_layout.py and benchmarks/layout_reads.py, and
the scaffolding the package's C-layout class tests share (tests/test_snapshot_layout.py,
tests/test_bound_fragment_layout.py, tests/test_region_layout.py): their fixtures and fixture
scripts in tests/data, and the instance-shape check.

``SnapshotD`` is shaped like ``RuntimeFragmentSnapshot`` (its 16 fields, in its order) and
dict-backed, as the package's classes are today; ``SnapshotL`` is the same class stored in a C
layout (``mooncake_reshard/_layout.py``). Both validate in ``__post_init__`` as the package's
classes do. Their names have the same length, so their pickles are byte-equal once the class
name is swapped. ``DefaultsD`` / ``DefaultsL`` have fields with defaults."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import importlib.util
import json
import sys
import weakref
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Dict, Iterator, Tuple

import pytest

from mooncake.reshard import _shared_tuples
from mooncake.reshard._layout import layout_dataclass, value_base

DATA = Path(__file__).parent / "data"


def data_fixture(name: str) -> Any:
    """The JSON document tests/data/<name>.json."""
    return json.loads((DATA / f"{name}.json").read_text())


def written_since_r66(name: str) -> Any:
    """What this build pickles of the objects of the fixture tests/data/<name>.json, under the
    same keys: its family of tests/data/default_pickles_r66.json (default dataclass pickling of
    the placement graph since session 66; the earlier fixture keeps the bytes earlier builds
    wrote, which must still load)."""
    return data_fixture("default_pickles_r66")[name]


@contextlib.contextmanager
def tuples_unshared() -> Iterator[None]:
    """Constructors store the tuples they are given (as before ``_shared_tuples``) while inside:
    the pickle fixtures written before tuples were shared pin the bytes of object graphs whose
    equal tuples are distinct objects (pickle memoizes a shared one)."""
    saved = _shared_tuples.SHARED_MAX
    _shared_tuples.SHARED_MAX = 0
    _shared_tuples.SHARED.clear()
    try:
        yield
    finally:
        _shared_tuples.SHARED_MAX = saved


@pytest.fixture(autouse=True, scope="module")
def unshared_tuples_module() -> Iterator[None]:
    """``tuples_unshared`` for every test of a module that imports this fixture (autouse applies
    to the importing module only; module-scoped, so it is set up before the module's own
    module-scoped fixtures)."""
    with tuples_unshared():
        yield


def data_module(name: str) -> ModuleType:
    """The fixture script tests/data/<name>.py, imported (it builds the objects its fixture
    holds: the tests build the very same ones through it)."""
    spec = importlib.util.spec_from_file_location(name, DATA / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Py_TPFLAGS_MANAGED_WEAKREF: from CPython 3.12 a class statement that adds ``__weakref__``
# keeps the weak-reference pointer in a pre-header before the object (with the managed-dict
# pointer, NULL for these classes), outside ``__basicsize__``; up to 3.11 it is a slot after the
# fields. The layout classes add it in their Python class statement (``__slots__``).
_TPFLAGS_MANAGED_WEAKREF = 1 << 3


def weakref_slot_bytes(cls: type) -> Tuple[int, int]:
    """``(in_object, pre_header)``: the bytes ``cls``'s weak-reference slot adds to
    ``cls.__basicsize__`` and before the object: (8, 0) up to CPython 3.11, (0, 16) from 3.12
    (two pointers: the weak-reference one and the unused managed-dict one). ``sys.getsizeof`` of
    an instance counts both, and the 16-byte collector header."""
    if sys.version_info >= (3, 12) and cls.__flags__ & _TPFLAGS_MANAGED_WEAKREF:
        return 0, 16
    return 8, 0


def check_layout_instance(instance: Any, nfields: int) -> None:
    """An instance of a C-layout value class: no instance dict (``vars`` raises), the fields in
    the object itself and a weak-reference slot (after them, or in the pre-header from CPython
    3.12: ``weakref_slot_bytes``), nothing else, and no attribute but a field can be set."""
    cls = type(instance)
    assert not hasattr(instance, "__dict__")
    with pytest.raises(TypeError):
        vars(instance)
    in_object, pre_header = weakref_slot_bytes(cls)
    assert cls.__basicsize__ == object.__basicsize__ + 8 * nfields + in_object
    assert sys.getsizeof(instance) == 16 + pre_header + cls.__basicsize__  # + the collector header
    assert weakref.ref(instance)() is instance
    assert cls.__dictoffset__ == 0
    with pytest.raises(AttributeError):
        object.__setattr__(instance, "extra", 1)  # no non-field attribute can be forged


def check_frozen_value(instance: Any, assigned: str, deleted: str) -> None:
    """What a frozen dataclass value does: ``copy`` / ``deepcopy`` give an equal new object of
    the same class; assigning field ``assigned`` or deleting field ``deleted`` raises
    ``FrozenInstanceError`` with the dataclass message; a weak reference reaches it."""
    cls = type(instance)
    for clone in (copy.copy(instance), copy.deepcopy(instance)):
        assert clone == instance and type(clone) is cls and clone is not instance
    with pytest.raises(dataclasses.FrozenInstanceError, match=f"cannot assign to field '{assigned}'"):
        setattr(instance, assigned, getattr(instance, assigned))
    with pytest.raises(dataclasses.FrozenInstanceError, match=f"cannot delete field '{deleted}'"):
        delattr(instance, deleted)
    assert weakref.ref(instance)() is instance

SNAPSHOT_FIELDS = (
    "placement_fragment_id",
    "fragment_id",
    "tensor_id",
    "global_offset",
    "local_shape",
    "address",
    "nbytes",
    "worker_id",
    "endpoint",
    "device",
    "itemsize",
    "strides_bytes",
    "storage_address",
    "storage_nbytes",
    "storage_offset_bytes",
    "lease_generation",
)


def _validate(obj: Any) -> None:
    """The kind of check the package's ``__post_init__`` methods make."""
    if type(obj.nbytes) is not int or obj.nbytes < 0:
        raise ValueError("snapshot nbytes must be a non-negative int")
    if type(obj.local_shape) is not tuple:
        raise TypeError("snapshot local_shape must be a tuple")


_SNAPSHOT_TYPES: Dict[str, Any] = {
    "placement_fragment_id": Any,
    "fragment_id": Any,
    "tensor_id": Any,
    "global_offset": Tuple[int, ...],
    "local_shape": Tuple[int, ...],
    "address": int,
    "nbytes": int,
    "worker_id": str,
    "endpoint": str,
    "device": str,
    "itemsize": int,
    "strides_bytes": Tuple[int, ...],
    "storage_address": int,
    "storage_nbytes": int,
    "storage_offset_bytes": int,
    "lease_generation": int,
}
assert tuple(_SNAPSHOT_TYPES) == SNAPSHOT_FIELDS


def _namespace(doc: str, annotations: Dict[str, Any], **extra: Any) -> Dict[str, Any]:
    """A class body: the annotations (and defaults), the docstring, this module's name."""
    return {"__module__": __name__, "__qualname__": "", "__doc__": doc, "__annotations__": dict(annotations), **extra}


def _class(name: str, bases: Tuple[type, ...], namespace: Dict[str, Any]) -> type:
    namespace["__qualname__"] = name
    return type(name, bases, namespace)


SnapshotD = dataclass(frozen=True)(
    _class("SnapshotD", (), _namespace("Dict-backed snapshot (today's layout).", _SNAPSHOT_TYPES, __post_init__=_validate))
)
SnapshotL = layout_dataclass(
    _class(
        "SnapshotL",
        (value_base("SnapshotL", SNAPSHOT_FIELDS),),
        _namespace(
            "The same snapshot stored in a C layout.",
            _SNAPSHOT_TYPES,
            __post_init__=_validate,
            __slots__=("__weakref__",),
        ),
    )
)

_DEFAULTS = {"b": 7, "c": dataclasses.field(default_factory=tuple)}
_DEFAULTS_TYPES = {"a": int, "b": int, "c": Tuple[int, ...]}
DefaultsD = dataclass(frozen=True)(
    _class("DefaultsD", (), _namespace("Dict-backed class with defaults.", _DEFAULTS_TYPES, **_DEFAULTS))
)
DefaultsL = layout_dataclass(
    _class(
        "DefaultsL",
        (value_base("DefaultsL", ("a", "b", "c")),),
        _namespace("The same with a C layout.", _DEFAULTS_TYPES, __slots__=("__weakref__",), **_DEFAULTS),
    )
)


def snapshot_values(seed: int = 0) -> Tuple[Any, ...]:
    """Valid field values for a snapshot (fresh objects per call)."""
    return (
        ("pf", seed),
        f"rf-{seed}",
        f"tensor-{seed % 7}",
        (seed, 0),
        (4, 8),
        1 << 40 | seed,
        64,
        f"w{seed % 3}",
        "tcp://h:1",
        "cuda:0",
        2,
        (16, 2),
        1 << 41,
        1 << 20,
        seed * 64,
        3,
    )

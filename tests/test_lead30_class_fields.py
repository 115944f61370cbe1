"""The C passes read the fields of the package's plain dataclasses with a generic getattr (or
from the instance dict) and treat that read as running no Python code: revalidate_side keeps
an exact ``RuntimeBindingAttestation``'s ``placement`` in a memo (csrc/revalidate.c), binder.c
and regioncheck.c read fields from instance dicts. That holds while no class in a dataclass's
MRO has a *data* descriptor (a property, a slot member) named like a field or like one of the
derived caches the C code reads: getattr would call it (or prefer it to the instance dict).

These tests pin that for every dataclass of the package (the C-owned layouts' own member
descriptors excepted: they are the fields' storage), and show the check finds a shadowing one.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
from typing import Any

import pytest

import mooncake.reshard as package_root
from mooncake.reshard import _native

# Derived caches the C core reads by name from instance dicts (csrc/*.c string literals).
_C_READ_CACHES = (
    "_placement_dict",
    "_binding_dict",
    "_rows",
    "_objects_by_pfid",
    "_digest_cache",
    "_attested_view",
    "_parts_by_participant",
    "_derived_cache",
    "_placement_by_id",
    "_binding_by_id",
)


def _package_dataclasses() -> list[type]:
    found: dict[int, type] = {}
    for info in pkgutil.walk_packages(package_root.__path__, package_root.__name__ + "."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if (
                inspect.isclass(value)
                and dataclasses.is_dataclass(value)
                and value.__module__.startswith(package_root.__name__)
            ):
                found[id(value)] = value
    return sorted(found.values(), key=lambda cls: cls.__qualname__)


def _shadowing(cls: type) -> list[tuple[str, str]]:
    """(name, defining class) for each field or C-read cache name of ``cls`` that a data
    descriptor in its MRO would serve instead of the instance's value."""
    info = _native.layout_info(cls)
    names = [field.name for field in dataclasses.fields(cls)] + list(_C_READ_CACHES)
    hits = []
    for name in names:
        for klass in cls.__mro__:
            if info is not None and klass is info[0]:
                continue  # a C-owned layout base: its member descriptors are the fields
            attribute: Any = vars(klass).get(name)
            if attribute is not None and hasattr(type(attribute), "__set__"):
                hits.append((name, klass.__qualname__))
    return hits


_CLASSES = _package_dataclasses()


def test_the_walk_finds_the_classes_the_c_passes_read() -> None:
    names = {cls.__qualname__ for cls in _CLASSES}
    for expected in (
        "RuntimeBindingAttestation",
        "RuntimeBindingEvidence",
        "WeightPlacementManifest",
        "WeightPlacementPart",
        "PlacementFragment",
        "RuntimeBindingFragment",
        "TensorDescriptor",
        "ParallelRank",
        "ExecutorTransferPlan",
        "TransferPlan",
    ):
        assert expected in names


@pytest.mark.parametrize("cls", _CLASSES, ids=lambda cls: cls.__qualname__)
def test_no_data_descriptor_shadows_a_field_or_cache(cls: type) -> None:
    assert _shadowing(cls) == []


def test_a_shadowing_property_is_found() -> None:
    from mooncake.reshard.weight import RuntimeBindingAttestation

    class Shadowed(RuntimeBindingAttestation):  # type: ignore[misc]
        @property
        def placement(self) -> Any:  # type: ignore[override]
            return None

    dataclasses.dataclass(frozen=True)(Shadowed)  # fields inherited; the property stays
    assert ("placement", Shadowed.__qualname__) in _shadowing(Shadowed)


def test_a_shadowing_slot_is_found() -> None:
    @dataclasses.dataclass
    class Slotted:
        _rows: int = 0
        __slots__ = ("_placement_dict",)

    assert ("_placement_dict", Slotted.__qualname__) in _shadowing(Slotted)

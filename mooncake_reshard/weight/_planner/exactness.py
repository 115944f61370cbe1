"""Exact-class checks for the calls that carry facts from one step to a later one (bind's
``binding._sealed``, the restore's carried region facts): reading or comparing objects of the
package's exact classes runs no user code (no subclass ``__eq__``/``__hash__``, property or
``__getattribute__``), so a fact proved on them cannot be changed by foreign code before its use
(tests/test_audit22_*.py, tests/test_audit22b_sealed_gate.py). Computed afresh on every call,
never cached on the objects: a class can be swapped between calls. The per-item loops run in C
(``_native.classes_within``, csrc/exact.c): they touch every fragment of both placements.

The values those objects hold are checked too (``inert_inputs``), or, for a large call, the call
is watched for any other code's frames (``start_watch``, ``untouched``, ``stop_watch``): see
``binding._sealed``."""

from __future__ import annotations

import sys
from typing import Any

from ... import _native
from ..part import WeightPlacementPart
from ..placement import WeightPlacementManifest
from ..topology import ParallelTopology, TopologyParticipant
from ..types import ParallelRank, PlacementFragment, TensorDescriptor

_classes_within = _native.classes_within
_PARTICIPANT = (TopologyParticipant,)
_PART = (WeightPlacementPart,)
_FRAGMENT = (PlacementFragment,)
_TENSOR = (TensorDescriptor,)
_RANK = (ParallelRank,)


def exact_items(values: Any, cls: type) -> bool:
    """``values`` is a tuple of exact ``cls`` instances."""
    return bool(_classes_within(values, (cls,), None, ()))


def exact_descriptors(values: Any) -> bool:
    """``values`` is a tuple of exact ``TensorDescriptor`` instances."""
    return bool(_classes_within(values, _TENSOR, None, ()))


def exact_placement(placement: Any) -> bool:
    """An exact ``WeightPlacementManifest`` whose topology (and its participants), parts,
    descriptors and fragments (the placement's and each part's) and their ranks are all of the
    exact classes, every member sequence an exact tuple. False also for a forged instance that
    lacks a field (reading one of an exact class runs no user code)."""
    if type(placement) is not WeightPlacementManifest:
        return False
    try:
        topology = placement.topology
        if type(topology) is not ParallelTopology:
            return False
        parts = placement.parts
        if not (
            _classes_within(topology.participants, _PARTICIPANT, "rank", _RANK)
            and _classes_within(parts, _PART, "rank", _RANK)
            and _classes_within(placement.tensors, _TENSOR, None, ())
            and _classes_within(placement.fragments, _FRAGMENT, "rank", _RANK)
        ):
            return False
        # per part, in order: its tensors, then its fragments with their ranks (one C call)
        if not _native.parts_members_within(parts, _TENSOR, _FRAGMENT, "rank", _RANK):
            return False
    except AttributeError:
        return False
    return True


_INERT_CLASSES: Any = None


def _inert_classes() -> tuple[tuple[type, int], ...]:
    """``inert_graph``'s class table: the package's value classes (a C layout's field count, or
    -1: dict-backed) and the caches a value may hold whose contents are C-owned or never read
    (-2). Built on first use: the planner modules import this one."""
    global _INERT_CLASSES
    if _INERT_CLASSES is None:
        from ..._layout import layout_fields
        from ...contracts.fragments import RuntimeBindingFragment
        from ..runtime import WeightRuntimeBindingManifest
        from ..storage_manifest import StoredFragmentSnapshot, StoredManifestIdentity, StoredWeightManifest
        from ..types import OwnershipAxis, ReplicatedAxis, SplitAxis
        from .attestation import RuntimeBindingAttestation, RuntimeBindingEvidence
        from .bound_contracts import RuntimeFragmentSnapshot
        from .contracts import LogicalTransferPlan, OperationViews, PipelineRouteGroup, PlacementExecutorPlan
        from .contracts import PlanningLimits, TransferRegion
        from .fragments import BoundWeightFragment

        # the most frequent first (the C side scans the table in order)
        layouts = (TransferRegion, PlacementFragment, RuntimeBindingFragment, BoundWeightFragment, RuntimeFragmentSnapshot)
        dict_backed = (
            ParallelRank,
            TensorDescriptor,
            SplitAxis,
            ReplicatedAxis,
            OwnershipAxis,
            WeightPlacementPart,
            TopologyParticipant,
            WeightRuntimeBindingManifest,
            PlacementExecutorPlan,
            StoredFragmentSnapshot,
            RuntimeBindingAttestation,
            RuntimeBindingEvidence,
            PipelineRouteGroup,
            ParallelTopology,
            WeightPlacementManifest,
            StoredWeightManifest,
            StoredManifestIdentity,
            PlanningLimits,
            LogicalTransferPlan,
        )
        # placement._fragment_table (C rows); LogicalTransferPlan._operation_views (stored by
        # _views, never read back)
        opaque = (_native.FragmentTable, OperationViews)
        _INERT_CLASSES = (
            tuple((cls, len(layout_fields(cls))) for cls in layouts)
            + tuple((cls, -1) for cls in dict_backed)
            + tuple((cls, -2) for cls in opaque)
        )
    return _INERT_CLASSES


def inert_inputs(*roots: Any) -> bool:
    """Every object reachable from ``roots`` is a plain value (None, bool, exact int, float,
    str, bytes; exact tuples, lists, dicts, frozensets of them) or an instance of exactly one of
    the package's classes holding only such values (``_native.inert_graph``, csrc/exact.c).

    The class checks above do not see values: a str subclass stored in a frozen field (or as a
    key of an instance dict) with ``object.__setattr__``, or an instance dict replaced by a dict
    subclass, runs user code wherever the package compares, hashes or reads it
    (tests/test_audit23_sealed_gate.py). Checked at a call's entry, before anything reads the
    values: code that ran earlier could erase its own traces."""
    return bool(_native.inert_graph(roots, _inert_classes()))


_CODES: Any = None  # the package's code objects, collected on first use
_CODE_SET: Any = None  # (CodeSet class, extra codes, the CodeSet built from them)
# Code a benchmark harness runs inside the calls it times, admitted like the package's own
# (benchmarks/native_ab.py wraps the extension's functions in Python timers); empty otherwise.
_EXTRA_CODES: tuple[Any, ...] = ()


def _package_codes() -> tuple[Any, ...]:
    """Every code object of the package: its modules' functions and classes (methods,
    properties, static and class methods, dataclass-generated methods), each with the code
    objects nested in its constants (comprehensions, lambdas, inner functions)."""
    import inspect
    import sys as _sys
    import os
    import sysconfig

    import importlib
    import pkgutil

    # this distribution's package only: "mooncake" is a namespace package that other
    # distributions share (walking it would import, and trust, their modules)
    package = ".".join(__name__.split(".")[:2])  # "mooncake.reshard"
    root = importlib.import_module(package)
    stdlib = sysconfig.get_paths()["stdlib"]

    def own(module_name: str) -> bool:
        return module_name == package or module_name.startswith(package + ".")

    def trusted(function: Any) -> bool:
        """The package's own function (dataclass-generated methods included), or the standard
        library's (the import system, dataclasses, enum, ...: by where its code was compiled).
        A function planted in a package module or class (by a test's monkeypatch before the
        first watch, say) is neither, and its frames trip the watch."""
        if own(str(getattr(function, "__module__", ""))):
            return True
        filename = function.__code__.co_filename
        if filename.startswith("<frozen "):
            return True
        parts = filename.split(os.sep)
        # (a base interpreter's site-packages lies inside its stdlib directory)
        return filename.startswith(stdlib + os.sep) and "site-packages" not in parts and "dist-packages" not in parts

    # every module, those imported lazily too (bound_pickle on the first restore, ...)
    for info in pkgutil.walk_packages(root.__path__, package + "."):
        importlib.import_module(info.name)
    codes: dict[int, Any] = {}
    seen: set[int] = set()

    def add_code(code: Any) -> None:
        stack = [code]
        while stack:
            item = stack.pop()
            if id(item) in codes:
                continue
            codes[id(item)] = item
            stack.extend(const for const in item.co_consts if inspect.iscode(const))

    def add(value: Any) -> None:
        stack = [value]
        while stack:
            item = stack.pop()
            if id(item) in seen:
                continue
            seen.add(id(item))
            if isinstance(item, (staticmethod, classmethod)):
                stack.append(item.__func__)
            elif isinstance(item, property):
                stack.extend(f for f in (item.fget, item.fset, item.fdel) if f is not None)
            elif inspect.isfunction(item):
                if not trusted(item):
                    continue
                add_code(item.__code__)
                wrapped = getattr(item, "__wrapped__", None)
                if wrapped is not None:
                    stack.append(wrapped)
            elif isinstance(item, type) and own(str(getattr(item, "__module__", ""))):
                stack.extend(vars(item).values())

    # the import system's own code (function-level imports of the package's modules run it)
    bootstrap = {"_frozen_importlib", "_frozen_importlib_external"}
    for name, module in list(_sys.modules.items()):
        if name == package or name.startswith(package + "."):
            for value in list(vars(module).values()):
                add(value)
        elif name in bootstrap:
            for value in list(vars(module).values()):
                if isinstance(value, type) and value.__module__ == name:
                    for member in list(vars(value).values()):
                        add(member)
                else:
                    add(value)
    return tuple(codes.values())


def code_watch() -> Any:
    """A new ``_native.CodeWatch`` over the package's code (collected on first use, with every
    module imported), for ``sys.setprofile``: it trips on the first Python frame of any other
    code that starts in this thread while installed."""
    global _CODES, _CODE_SET
    if _CODES is None:
        _CODES = _package_codes()
    code_set_class = _native.CodeSet
    if _CODE_SET is None or _CODE_SET[0] is not code_set_class or _CODE_SET[1] is not _EXTRA_CODES:
        # (first use; or another build's extension, swapped in by benchmarks/native_ab.py)
        _CODE_SET = (code_set_class, _EXTRA_CODES, code_set_class(_CODES + _EXTRA_CODES))
    return _native.CodeWatch(_CODE_SET[2])


def start_watch(large: bool) -> Any:
    """For a large call with no trace or profile hook set: a ``code_watch()``, installed as this
    thread's profile function (``stop_watch`` removes it); otherwise None (the caller checks the
    values with ``inert_inputs`` instead: its cost grows with the values, the watch's with the
    Python frames the call runs, a few per part and binding)."""
    if not large or sys.gettrace() is not None or sys.getprofile() is not None or not no_monitoring_tools():
        return None
    watch = code_watch()
    sys.setprofile(watch)
    return watch


_MONITORING = getattr(sys, "monitoring", None)  # CPython 3.12+


def no_monitoring_tools() -> bool:
    """No ``sys.monitoring`` tool is registered (3.12+; tools 0-5: debuggers, coverage, profilers
    run their callbacks at every line or call, as trace hooks do)."""
    if _MONITORING is None:
        return True
    for tool in range(6):
        if _MONITORING.get_tool(tool) is not None:
            return False
    return True


def untouched(watch: Any) -> bool:
    """No trace hook or monitoring tool is set, and: with a watch, it is still this thread's
    profile function and no frame of other code started since ``start_watch``; without one, no
    profile hook is set."""
    if sys.gettrace() is not None or not no_monitoring_tools():
        return False
    if watch is None:
        return sys.getprofile() is None
    return sys.getprofile() is watch and not watch.tripped


def stop_watch(watch: Any) -> None:
    """Removes the watch ``start_watch`` installed (unless other code replaced it since)."""
    if watch is not None and sys.getprofile() is watch:
        sys.setprofile(None)

"""Loader helpers for the reference known-answer cases in ``/work/shared/spec/known-answers``.

Each case file holds inputs (placement JSON, runtime bindings as init-field dicts, optionally a
stored manifest JSON) and the reference implementation's expected outputs, some of them in the
README's *canonical form* (see :func:`canonical`).  Manifest-layer tests and, later, planner tests
share these helpers.

The directory can be overridden with ``MOONCAKE_RESHARD_KNOWN_ANSWERS``.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import os
from typing import Any, Dict, List, Tuple

KNOWN_ANSWERS_DIR = os.environ.get("MOONCAKE_RESHARD_KNOWN_ANSWERS", "/work/shared/spec/known-answers")


def case_names() -> List[str]:
    """Sorted case names (file names without ``.json``); empty if the directory is missing."""
    if not os.path.isdir(KNOWN_ANSWERS_DIR):
        return []
    return sorted(f[:-5] for f in os.listdir(KNOWN_ANSWERS_DIR) if f.endswith(".json"))


@functools.lru_cache(maxsize=None)
def load_case(name: str) -> Dict[str, Any]:
    """The parsed case document (``{"case", "inputs", "expected"}``), cached."""
    with open(os.path.join(KNOWN_ANSWERS_DIR, name + ".json"), encoding="utf-8") as handle:
        return json.load(handle)


def canonical(value: Any) -> Any:
    """The README's canonical form of a value (dataclass -> compared fields, tuples -> lists, ...)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: canonical(getattr(value, f.name)) for f in dataclasses.fields(value) if f.compare}
    if isinstance(value, enum.Enum):
        return str(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (tuple, list)):
        return [canonical(v) for v in value]
    if isinstance(value, (set, frozenset)):
        items = [canonical(v) for v in value]
        return sorted(items, key=lambda item: json.dumps(item, sort_keys=True))
    if isinstance(value, dict):
        return {str(k): canonical(v) for k, v in value.items()}
    return str(value)


def _tuples(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    return value


def build_runtime_fragment(raw: Dict[str, Any]) -> Any:
    from mooncake.reshard.weight import RuntimeBindingFragment

    return RuntimeBindingFragment(**{k: _tuples(v) for k, v in raw.items()})


def build_binding(raw: Dict[str, Any]) -> Any:
    """One ``WeightRuntimeBindingManifest`` from its init fields (lists become tuples)."""
    from mooncake.reshard.weight import WeightRuntimeBindingManifest

    kwargs = {k: v for k, v in raw.items() if k != "fragments"}
    kwargs["fragments"] = tuple(build_runtime_fragment(f) for f in raw["fragments"])
    return WeightRuntimeBindingManifest(**kwargs)


def build_bindings(raws: List[Dict[str, Any]]) -> Tuple[Any, ...]:
    return tuple(build_binding(r) for r in raws)


def source_placement(name: str) -> Any:
    from mooncake.reshard.weight import weight_placement_from_json

    return weight_placement_from_json(load_case(name)["inputs"]["source_placement_json"])


def target_placement(name: str) -> Any:
    from mooncake.reshard.weight import weight_placement_from_json

    return weight_placement_from_json(load_case(name)["inputs"]["target_placement_json"])


def placement_case_names() -> List[str]:
    """The cases whose source is a placement (not a Store manifest), in case order."""
    return [name for name in case_names() if "source_placement_json" in load_case(name)["inputs"]]


def placements() -> List[Any]:
    """Every placement the cases hold: each case's source placement (stored-source cases have
    none) and target placement, in case order."""
    out = []
    for name in case_names():
        if "source_placement_json" in load_case(name)["inputs"]:
            out.append(source_placement(name))
        out.append(target_placement(name))
    return out


def stored_manifest(name: str) -> Any:
    from mooncake.reshard.weight import StoredWeightManifest

    return StoredWeightManifest.from_json(load_case(name)["inputs"]["stored_manifest_json"])


def bind_inputs(inputs: Dict[str, Any]) -> Any:
    """A case's inputs planned and bound: the logical plan from its source placement (or Store
    manifest) to its target placement, bound to its runtime bindings."""
    from mooncake.reshard.weight import StoredWeightManifest, weight_placement_from_json
    from mooncake.reshard.weight.planner import (
        bind_logical_transfer_plan,
        plan_placement_transfer,
        plan_stored_transfer_to_target_placement,
    )

    target = weight_placement_from_json(inputs["target_placement_json"])
    targets = build_bindings(inputs["target_bindings"])
    if "stored_manifest_json" in inputs:
        manifest = StoredWeightManifest.from_json(inputs["stored_manifest_json"])
        logical = plan_stored_transfer_to_target_placement(manifest, target)
        return bind_logical_transfer_plan(logical, targets, source_manifest=manifest)
    logical = plan_placement_transfer(weight_placement_from_json(inputs["source_placement_json"]), target)
    return bind_logical_transfer_plan(logical, targets, source_bindings=build_bindings(inputs["source_bindings"]))


def source_bindings(name: str) -> Tuple[Any, ...]:
    return build_bindings(load_case(name)["inputs"].get("source_bindings", []))


def target_bindings(name: str) -> Tuple[Any, ...]:
    return build_bindings(load_case(name)["inputs"]["target_bindings"])

"""AUDIT40 (item 3): the other public entry points whose C steps check a value class's layout
through per-call-site memos (csrc/layout.h ``mr_layout_memo``) and stand for rules that read
attributes: planning (``plan_placement_transfer``: csrc/table.c, canonical.c, overlap.c,
planobj.c build and check the fragments and regions), ``LogicalTransferPlan``'s validation
(``dataclasses.replace``, pickle restore) and ``validate_runtime_binding(s)`` (csrc/binder.c,
regioncheck.c: the runtime fragments against the placement's). Warmed by one
call, they ignored a property planted afterwards on a layout field (PlacementFragment,
RuntimeBindingFragment, TransferRegion; on the class or on a class put between it and its
layout base): planning returned a plan a cold process refuses (or a different plan), validation
accepted what a cold process refuses. Both now run under ``mooncake_reshard._memo_proof.memo_proved``.

The oracle, as in tests/test_audit4040_bind_cold_memos.py: a fresh interpreter builds the
placements and bindings (no planning or validation call), then forks one child per case, which
plants and calls. Each case fails on the start build (6574542).

Found and not fixed (see the session report): with a bound plan, ``resolve_executor_plan``
and the rules' path of ``TransferPlan`` replace and restore (the fast revalidation declines on the planted property, the Python rules
then call memo'd C helpers) also decide differently warm and in cold mode; no cold-process
oracle is available for them here (building a bound plan warms the memos)."""

from __future__ import annotations

import dataclasses
import json
import pickle
import re
import sys
from typing import Any, Callable

import pytest

from forge_helpers import cold_oracle, forked_answers, outcome
from memory_executor import HostMemory, host_bindings, tp_placement

from mooncake.reshard.contracts.fragments import RuntimeBindingFragment
from mooncake.reshard.weight import (
    TransferRegion,
    plan_placement_transfer,
    validate_runtime_binding,
    validate_runtime_bindings,
)
from mooncake.reshard.weight.types import PlacementFragment

from test_audit39_class_descriptors import _next, _other
from test_audit4040_bind_cold_memos import outcome_while_planted

CLASSES = {"PlacementFragment": PlacementFragment, "RuntimeBindingFragment": RuntimeBindingFragment,
           "TransferRegion": TransferRegion}
EDITS = {"next": _next, "other": _other}
OPS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "plan": lambda w: plan_placement_transfer(w["source"], w["target"]),
    "logical_replace": lambda w: dataclasses.replace(w["logical"]),
    "logical_restore": lambda w: pickle.loads(w["logical_pickle"]),
    "validate_binding": lambda w: validate_runtime_binding(w["target"], w["bindings"][0]),
    "validate_bindings": lambda w: validate_runtime_bindings(w["target"], w["bindings"]),
}
_PF_PLAN = [(name, "next") for name in ("tensor_id", "global_offset", "local_shape", "nbytes", "rank",
                                        "placement_fragment_id")]
_REGION = [(name, "next") for name in (
    "tensor_id", "source", "target", "overlap_offset", "overlap_shape", "source_base_offset", "target_base_offset",
    "inner_bytes", "outer_loop_counts", "source_strides", "target_strides")]
_PF_VALIDATE = [(name, "next") for name in ("tensor_id", "local_shape", "nbytes", "placement_fragment_id")]
_RF_VALIDATE = [(name, "next") for name in ("placement_fragment_id", "nbytes", "itemsize", "local_shape",
                                            "strides_bytes")] + [
    (name, "other") for name in ("address", "storage_address", "storage_nbytes")]
_PF_LOGICAL = _PF_PLAN + [("pipeline_stage_id", "other")]
_REGION_LOGICAL = [(name, "next") for name in ("tensor_id", "overlap_offset", "overlap_shape", "source_strides",
                                               "target_strides")]
LOGICAL_OPS = ("logical_replace", "logical_restore")
# (no TransferRegion case for logical_restore: the restored regions are new objects the planted
# property reads alike, warm or cold)
FIELDS = (
    [("plan", "PlacementFragment", f, e) for f, e in _PF_PLAN]
    + [(op, "PlacementFragment", f, e) for op in LOGICAL_OPS for f, e in _PF_LOGICAL]
    + [("logical_replace", "TransferRegion", f, e) for f, e in _REGION_LOGICAL]
    + [("plan", "TransferRegion", f, e) for f, e in _REGION]
    + [(op, "PlacementFragment", f, e) for op in ("validate_binding", "validate_bindings") for f, e in _PF_VALIDATE]
    + [(op, "RuntimeBindingFragment", f, e) for op in ("validate_binding", "validate_bindings") for f, e in _RF_VALIDATE]
)
CASES = [case + (place,) for case in FIELDS for place in ("class", "base")]


def _world() -> dict[str, Any]:
    names = ("w000", "w001")
    source = tp_placement(2, prefix="s", dp=2, shape=(4, 6), tensors=names)
    target = tp_placement(2, prefix="t", shape=(4, 6), tensors=names)
    return {"source": source, "target": target, "bindings": host_bindings(target, HostMemory(), prefix="dst")}


def _summary(result: Any) -> list[str]:
    """``[exception class, message]`` (object addresses masked), else the result's repr."""
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], str) and result[0].endswith("Error"):
        return [result[0], re.sub(r"0x[0-9a-f]+", "0x?", result[1])]
    return ["value", re.sub(r"0x[0-9a-f]+", "0x?", repr(result))]


def _prepared(op: str, world: dict[str, Any]) -> dict[str, Any]:
    """The world with what op needs built (unplanted): a logical plan and its pickle. (Planning
    warms its own memos: the cold oracle plans in the child, before the plant, as here.)"""
    if op not in LOGICAL_OPS:
        return world
    logical = plan_placement_transfer(world["source"], world["target"])
    return dict(world, logical=logical, logical_pickle=pickle.dumps(logical))


def _planted(case: tuple[str, ...], world: dict[str, Any]) -> list[str]:
    op, cls_name, field, edit, place = case
    world = _prepared(op, world)
    return _summary(outcome_while_planted(CLASSES[cls_name], field, EDITS[edit], place, lambda: OPS[op](world)))


def _cold_outcomes() -> dict[str, list[str]]:
    world = _world()
    return forked_answers(CASES, lambda case: _planted(case, world))


cold = cold_oracle(__file__)


@pytest.mark.parametrize("case", CASES, ids=["-".join(case) for case in CASES])
def test_a_warm_call_decides_a_planted_property_as_a_cold_process(case, cold):
    world = _prepared(case[0], _world())
    outcome(lambda: OPS[case[0]](world))  # (warms the memos)
    assert _planted(case, world) == cold["|".join(case)]
    assert _summary(outcome(lambda: OPS[case[0]](world)))[0] == "value"  # (nothing left behind)


if __name__ == "__main__":
    json.dump(_cold_outcomes(), sys.stdout)

"""SHAPE38 (session 38): ``_native.revalidate_shapes`` tests each field's kind inline (one test
per field of a constant kind instead of a call taking the kind) and records the objects it
has checked in a table sized for the contract's replace, probed once per object.

The call is captured from a real ``dataclasses.replace`` of a bound plan and repeated with one
field of one object forged through ``object.__setattr__`` (what the constructors never store):
every checked field of every object class, each with a value of the wrong kind (a subclass of the
right type, or another type) must be refused (False), and a value of the right kind that is
another object (an equal str built anew, None for an optional int) still accepted (True). A
larger world, whose objects outgrow the table's first size, refuses a forged object that is
checked after the table grew, and one reached a second time (a rank shared by a part and its
fragments) only through its first visit.
"""

from __future__ import annotations

from typing import Any, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forge_helpers import replace_pass_arguments, sized_world
from forge_helpers import with_field as _with

from mooncake.reshard import _native
from mooncake.reshard.weight import bind_logical_transfer_plan


class _Text(str):
    pass


class _Int(int):
    pass


def _captured(tensors: int = 2) -> tuple[Any, tuple[Any, ...]]:
    """A bound plan over ``tensors`` tensors and the arguments its replace() passes to
    revalidate_shapes."""
    logical, targets, sources, _memory = sized_world(tensors)
    plan = bind_logical_transfer_plan(logical, targets, source_bindings=sources)
    return plan, replace_pass_arguments(plan, "revalidate_shapes")


# field -> kind, per object (the kinds of csrc/revalidate.c sh_kind)
_RUNTIME = {
    "placement_fragment_id": "s", "fragment_id": "s", "address": "i", "nbytes": "i", "worker_id": "s",
    "endpoint": "s", "device": "s", "itemsize": "i", "local_shape": "t", "strides_bytes": "t",
    "storage_address": "i", "storage_nbytes": "i", "storage_offset_bytes": "i",
}
_FRAGMENT = {
    "tensor_id": "s", "global_offset": "t", "local_shape": "t", "nbytes": "i", "pipeline_stage_id": "n",
    "aliases": "S", "placement_fragment_id": "s",
}
_RANK = {"dp": "i", "tp": "i", "pp": "i", "ep": "i"}
_EVIDENCE = {
    "resource_id": "s", "revision": "s", "placement_id": "s", "placement_digest": "s", "instance_id": "s",
    "participant_id": "s", "lease_id": "s", "generation": "i",
}
_PLACEMENT = {"resource_id": "s", "placement_id": "s", "revision": "s", "placement_set_id": "s", "weight_generation": "i"}
_PART = {"participant_id": "s"}
_TENSOR = {
    "global_shape": "t", "tensor_id": "s", "dtype": "s", "itemsize": "i", "shard_dims": "t", "layer_id": "n",
    "expert_id": "n", "layout_fingerprint": "s",
}


def _wrong(kind: str, value: Any) -> list[Any]:
    """Values of the wrong kind for a field holding ``value`` of ``kind``."""
    if kind == "s":
        return [_Text(value), 7, None]
    if kind == "i":
        return [_Int(value), True, str(value), None]
    if kind == "n":
        return [_Int(value or 0), True, "0"]
    if kind == "t":
        items = list(value)
        wrong = [tuple(items[:-1] + [_Int(items[-1])])] if items else []
        return wrong + [items, tuple(items) + ("0",), tuple(items) + (True,), None]
    assert kind == "S"
    return [tuple(value) + (_Text("a"),), list(value), tuple(value) + (1,), None]


def _right(kind: str, value: Any) -> list[Any]:
    """Values of the right kind that are other objects than ``value``."""
    if kind == "s":
        return ["".join(list(value)) + ""]
    if kind == "i":
        return [int(str(value))]
    if kind == "n":
        return [None, 12345678901234567890]
    if kind == "t":
        return [tuple(int(str(item)) for item in value), ()]
    return [tuple("".join(list(item)) for item in value) + ("x",), ()]


def _targets(plan: Any) -> Iterator[tuple[str, Any, dict[str, str]]]:
    """(name, object, its checked fields) for one object of every class the pass checks, from
    the target placement, a source and a target executor's attestation."""
    executors = (plan.source_executors[0], plan.target_executors[-1])
    for side, executor in zip(("source", "target"), executors):
        attestation = executor.attestation
        placement = attestation.placement
        part = placement.parts[-1]
        evidence = attestation.evidence
        yield f"{side}-placement", placement, _PLACEMENT
        yield f"{side}-part", part, _PART
        yield f"{side}-rank", part.rank, _RANK
        yield f"{side}-tensor", part.tensors[-1], _TENSOR
        yield f"{side}-fragment", part.fragments[-1], _FRAGMENT
        yield f"{side}-fragment-rank", part.fragments[-1].rank, _RANK
        yield f"{side}-evidence", evidence, _EVIDENCE
        yield f"{side}-runtime", list(evidence.fragments)[-1], _RUNTIME


def _cases(plan: Any) -> list[tuple[str, Any, str, str]]:
    return [(name, obj, field, kind) for name, obj, fields in _targets(plan) for field, kind in fields.items()]


def test_every_field_of_the_wrong_kind_is_refused():
    plan, args = _captured()
    assert _native.revalidate_shapes(*args) is True
    checked = 0
    for name, obj, field, kind in _cases(plan):
        for bad in _wrong(kind, getattr(obj, field)):
            answer = _with(obj, field, bad, lambda: _native.revalidate_shapes(*args))
            assert answer is False, (name, field, bad)
            checked += 1
    assert checked > 200
    assert _native.revalidate_shapes(*args) is True


def test_every_field_of_the_right_kind_is_accepted():
    plan, args = _captured()
    for name, obj, field, kind in _cases(plan):
        for good in _right(kind, getattr(obj, field)):
            answer = _with(obj, field, good, lambda: _native.revalidate_shapes(*args))
            assert answer is True, (name, field, good)


def test_split_axis_dim_and_axis_kind():
    plan, args = _captured()
    for placement in (plan.target_placement, plan.source_executors[0].attestation.placement):
        for part in placement.parts:
            for tensor in part.tensors:
                for axis in tensor.parallel_axes:
                    assert _with(axis, "kind", _Text(axis.kind), lambda: _native.revalidate_shapes(*args)) is False
                    if hasattr(axis, "dim"):
                        assert _with(axis, "dim", _Int(axis.dim), lambda: _native.revalidate_shapes(*args)) is False
    assert _native.revalidate_shapes(*args) is True


@pytest.fixture(scope="module")
def large() -> tuple[Any, tuple[Any, ...]]:
    return _captured(40)


def _recorded(plan: Any) -> int:
    """Distinct objects the pass records (placements, ranks, descriptors, axes, evidences)."""
    seen: set[int] = set()
    for executor in plan.source_executors + plan.target_executors:
        attestation = executor.attestation
        seen.add(id(attestation.evidence))
        seen.add(id(attestation.placement))
        for part in attestation.placement.parts:
            seen.add(id(part.rank))
            for tensor in part.tensors:
                seen.add(id(tensor))
                seen.update(id(axis) for axis in tensor.parallel_axes)
    return len(seen)


def test_large_world_outgrows_the_first_table(large):
    plan, args = large
    assert _recorded(plan) > 64  # the table holds 63 before it grows
    assert _native.revalidate_shapes(*args) is True


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_large_world_refuses_any_forged_field(large, data):
    # objects checked before and after the table grew, first visits and repeated ones
    plan, args = large
    executors = plan.source_executors + plan.target_executors
    executor = data.draw(st.sampled_from(executors))
    placement = executor.attestation.placement
    part = data.draw(st.sampled_from(placement.parts))
    pool = [
        (part, _PART), (part.rank, _RANK), (data.draw(st.sampled_from(part.tensors)), _TENSOR),
        (data.draw(st.sampled_from(part.fragments)), _FRAGMENT), (executor.attestation.evidence, _EVIDENCE),
        (data.draw(st.sampled_from(list(executor.attestation.evidence.fragments))), _RUNTIME),
        (placement, _PLACEMENT),
    ]
    obj, fields = data.draw(st.sampled_from(pool))
    field = data.draw(st.sampled_from(sorted(fields)))
    bad = data.draw(st.sampled_from(_wrong(fields[field], getattr(obj, field))))
    assert _with(obj, field, bad, lambda: _native.revalidate_shapes(*args)) is False
    assert _native.revalidate_shapes(*args) is True


class _Tuple(tuple):
    pass


def test_sequences_exact_tuples_and_evidence_lists():
    # the items of an exact tuple are read from it directly (a list or a tuple subclass is
    # another path): an evidence's fragments may be a list, parts' sequences may not
    plan, args = _captured()
    evidence = plan.target_executors[-1].attestation.evidence
    part = plan.target_placement.parts[-1]
    placement = plan.target_placement
    fragments = evidence.fragments
    call = lambda: _native.revalidate_shapes(*args)  # noqa: E731
    assert _with(evidence, "fragments", list(fragments), call) is True
    assert _with(evidence, "fragments", tuple(fragments), call) is True
    assert _with(evidence, "fragments", _Tuple(fragments), call) is False
    forged = list(fragments)
    runtime = forged[-1]
    assert _with(evidence, "fragments", forged, lambda: _with(runtime, "device", _Text(runtime.device), call)) is False
    for obj, field in ((part, "tensors"), (part, "fragments"), (placement, "parts")):
        value = getattr(obj, field)
        assert _with(obj, field, list(value), call) is False, field
        assert _with(obj, field, _Tuple(value), call) is False, field
        assert _with(obj, field, tuple(value), call) is True, field
    assert call() is True

"""F4 (session 24): the revalidation fast path and the rules agree on field values of the wrong
kind stored after construction (``object.__setattr__`` of a str / int subclass, or of a tuple
holding one, on an object of the exact class).

The rules check the field kinds of every attestation's placement and evidence before they read
them (``bound_contracts._require_typed_attestations``: ``evidence_shape_failure``,
``placement_shape_failure``) and of the plan's target placement; the fast path read most of
those fields nowhere (the tensor descriptors not at all, the unused source fragments, a part's
participant id, the identity strs) and accepted what the rules refuse. It now checks them
(``_native.revalidate_shapes``) and declines, so the rules raise their own message.

Each case edits one field of one kind of object (its first, its last, or every instance of the
plan) and compares the outcome with the fast path against the outcome with it disabled (the
rules alone), through ``dataclasses.replace`` of a bound plan (every rule, no carried fact) and
through ``bind_logical_transfer_plan`` of edited inputs. The rules refuse every edit below (the
test checks it), so a fast path that accepts one fails the comparison.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import pytest

from forge_helpers import outcome, sized_world

from mooncake.reshard.weight import TransferPlan, bind_logical_transfer_plan
from mooncake.reshard.weight._planner import bound_contracts

SMALL = 2  # below the watch: a sealed bind walks its inputs
PROVED = 130  # watched


class _Text(str):
    pass


class _Count(int):
    pass


class _Names(tuple):  # type: ignore[type-arg]
    pass


class _State(dict):  # type: ignore[type-arg]
    pass


def _kind_forged(value: Any) -> Any:
    """``value`` with the wrong kind and the same value: a str or int subclass, a tuple whose
    first item is one, a tuple subclass (for an empty tuple)."""
    if value == ():
        return _Names()
    if type(value) is str:
        return _Text(value)
    if type(value) is int:
        return _Count(value)
    if type(value) is tuple and value:
        return (_kind_forged(value[0]),) + value[1:]
    raise AssertionError(f"nothing to forge in {value!r}")


def _attestations(plan: Any, side: str) -> list[Any]:
    executors = plan.source_executors if side == "source" else plan.target_executors
    return list({id(e.attestation): e.attestation for e in executors}.values())


def _placement(plan: Any, side: str) -> Any:
    return plan.target_placement if side == "target" else _attestations(plan, "source")[0].placement


def _descriptors(plan: Any, side: str) -> list[Any]:
    placement = _placement(plan, side)
    return list({id(t): t for part in placement.parts for t in part.tensors}.values())


def _placement_fragments(plan: Any, side: str) -> list[Any]:
    return [f for part in _placement(plan, side).parts for f in part.fragments]


def _evidences(plan: Any, side: str) -> list[Any]:
    return [attestation.evidence for attestation in _attestations(plan, side)]


def _runtime_fragments(plan: Any, side: str) -> list[Any]:
    return [f for evidence in _evidences(plan, side) for f in evidence.fragments]


def _axes(plan: Any, side: str) -> list[Any]:
    return [axis for tensor in _descriptors(plan, side) for axis in tensor.parallel_axes]


_SUBJECTS: dict[str, tuple[Callable[[Any, str], list[Any]], tuple[str, ...]]] = {
    "descriptor": (
        _descriptors,
        ("global_shape", "tensor_id", "dtype", "itemsize", "shard_dims", "layout_fingerprint"),
    ),
    "axis": (_axes, ("kind",)),
    "placement_fragment": (
        _placement_fragments,
        ("global_offset", "local_shape", "tensor_id", "nbytes", "aliases", "placement_fragment_id"),
    ),
    "rank": (lambda plan, side: [part.rank for part in _placement(plan, side).parts], ("dp", "tp", "pp", "ep")),
    "runtime_fragment": (
        _runtime_fragments,
        (
            "placement_fragment_id",
            "fragment_id",
            "worker_id",
            "endpoint",
            "device",
            "address",
            "nbytes",
            "itemsize",
            "local_shape",
            "strides_bytes",
            "storage_address",
            "storage_nbytes",
            "storage_offset_bytes",
        ),
    ),
    "part": (lambda plan, side: list(_placement(plan, side).parts), ("participant_id",)),
    "placement": (
        lambda plan, side: [_placement(plan, side)],
        ("resource_id", "placement_id", "revision", "weight_generation", "placement_set_id"),
    ),
    "evidence": (
        _evidences,
        (
            "resource_id",
            "revision",
            "placement_id",
            "placement_digest",
            "instance_id",
            "participant_id",
            "lease_id",
            "generation",
        ),
    ),
}


def _cases() -> list[Any]:
    params = []
    for subject, (_objects, names) in _SUBJECTS.items():
        for side in ("source", "target"):
            for name in names:
                for which in ("first", "last", "every"):
                    params.append(pytest.param(subject, side, name, which, id=f"{side}-{subject}-{name}-{which}"))
    return params


def _forge(objects: list[Any], name: str, which: str) -> None:
    """``name`` of the ``which`` objects (distinct) made another kind; ``__dict__``: the instance
    dict replaced by a dict subclass holding the same items."""
    objects = list({id(obj): obj for obj in objects}.values())  # (shared objects: once)
    chosen = {"first": objects[:1], "last": objects[-1:], "every": objects}[which]
    assert chosen
    for obj in chosen:
        if name == "__dict__":
            object.__setattr__(obj, "__dict__", _State(obj.__dict__))
        else:
            object.__setattr__(obj, name, _kind_forged(getattr(obj, name)))


# the dict-backed objects: their instance dict a dict subclass too
for _subject in ("descriptor", "axis", "part", "placement", "evidence", "rank"):
    _SUBJECTS[_subject] = (_SUBJECTS[_subject][0], _SUBJECTS[_subject][1] + ("__dict__",))


def _rules_only(monkeypatch: Any, call: Callable[[], Any]) -> Any:
    with monkeypatch.context() as patch:
        patch.setattr(bound_contracts, "_fast_revalidate_live", lambda *args, **kwargs: False)
        return outcome(call)


def _summary(result: Any) -> Any:
    return "accepted" if isinstance(result, TransferPlan) else result


def _replaced(subject: str, side: str, name: str, which: str, tensors: int, fast: bool, monkeypatch: Any) -> Any:
    logical, targets, sources, _memory = sized_world(tensors)
    plan = bind_logical_transfer_plan(logical, targets, source_bindings=sources)
    _forge(_SUBJECTS[subject][0](plan, side), name, which)
    call = lambda: dataclasses.replace(plan)  # noqa: E731
    return _summary(outcome(call) if fast else _rules_only(monkeypatch, call))


@pytest.mark.parametrize(("subject", "side", "name", "which"), _cases())
def test_replace_fast_path_agrees_with_the_rules(monkeypatch, subject, side, name, which):
    for tensors in (SMALL, PROVED) if which == "every" else (SMALL,):
        expected = _replaced(subject, side, name, which, tensors, False, monkeypatch)
        assert expected[0] == "ValueError", expected  # the rules refuse the edit
        assert _replaced(subject, side, name, which, tensors, True, monkeypatch) == expected


# ---------------------------------------------------------------------------------------------
# The same edits made on bind's inputs (the logical plan's placements, the bindings' runtime
# fragments) before the call: whatever bind decides, it decides it with or without the fast path.


def _bind_inputs(tensors: int) -> tuple[Any, Any, Any]:
    logical, targets, sources, _memory = sized_world(tensors)
    return logical, targets, sources


def _input_objects(subject: str, side: str, inputs: tuple[Any, Any, Any]) -> list[Any]:
    logical, targets, sources = inputs
    placement = logical.target_placement if side == "target" else logical.source_placement
    bindings = targets if side == "target" else sources
    if subject == "descriptor":
        return list({id(t): t for part in placement.parts for t in part.tensors}.values())
    if subject == "axis":
        return [a for t in {id(t): t for part in placement.parts for t in part.tensors}.values() for a in t.parallel_axes]
    if subject == "placement_fragment":
        return [f for part in placement.parts for f in part.fragments]
    if subject == "runtime_fragment":
        return [f for binding in bindings for f in binding.fragments]
    if subject == "part":
        return list(placement.parts)
    if subject == "placement":
        return [placement]
    if subject == "rank":
        return [part.rank for part in placement.parts]
    raise AssertionError(subject)


def _bind_cases() -> list[Any]:
    return [param for param in _cases() if param.values[0] != "evidence"]


def _bound(subject: str, side: str, name: str, which: str, tensors: int, fast: bool, monkeypatch: Any) -> Any:
    inputs = _bind_inputs(tensors)
    _forge(_input_objects(subject, side, inputs), name, which)
    logical, targets, sources = inputs
    call = lambda: bind_logical_transfer_plan(logical, targets, source_bindings=sources)  # noqa: E731
    return _summary(outcome(call) if fast else _rules_only(monkeypatch, call))


@pytest.mark.parametrize(("subject", "side", "name", "which"), _bind_cases())
def test_bind_fast_path_agrees_with_the_rules(monkeypatch, subject, side, name, which):
    for tensors in (SMALL, PROVED) if which == "every" else (SMALL,):
        expected = _bound(subject, side, name, which, tensors, False, monkeypatch)
        result = _bound(subject, side, name, which, tensors, True, monkeypatch)
        assert result == expected


def test_unedited_plans_take_the_fast_path(monkeypatch):
    """The premise: without an edit the fast path decides (it returns True, the rules do not run)."""
    calls: list[bool] = []
    real = bound_contracts._fast_revalidate_live

    def spy(*args: Any, **kwargs: Any) -> bool:
        calls.append(real(*args, **kwargs))
        return calls[-1]

    for tensors in (SMALL, PROVED):
        logical, targets, sources, _memory = sized_world(tensors)
        plan = bind_logical_transfer_plan(logical, targets, source_bindings=sources)
        monkeypatch.setattr(bound_contracts, "_fast_revalidate_live", spy)
        dataclasses.replace(plan)
        monkeypatch.undo()
    assert calls == [True, True]

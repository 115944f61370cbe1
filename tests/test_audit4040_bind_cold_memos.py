"""AUDIT40: the AUDIT39 hole closed (tests/test_audit39_bind_warm_memo.py). Bind's C steps check
a value class's C-owned layout through per-call-site memos (csrc/layout.h ``mr_layout_memo``);
once a bind had warmed them, a property planted on a layout field (or on a class put between the
class and its layout base) was ignored by those steps: bind returned a plan that a cold process's
bind refuses, refused with another message, or refused what the cold bind accepts. Bind now runs
under ``mooncake_reshard._memo_proof.memo_proved``: the per-call proof
``_native.layout_memos_unshadowed(specs)`` (``fields_unshadowed``'s, for the package's layout
classes and every class a memo holds)
before and after the call; when it fails the call runs (again) in cold mode
(``_native.layout_memos_cold``), where every memo'd step checks its class in full.

The oracle is a cold process: a fresh interpreter (this file run as a script) builds the same
world, then forks one child per case, which plants the property and binds with every memo as
the world's planning left it (no bind has run). Each case below fails on the start build
(6574542): its warm outcome differed from the cold one. Fields with no such case:
PlacementFragment.aliases (no edit changes bind's outcome, cold or warm)."""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from typing import Any, Callable

import pytest

from forge_helpers import cold_oracle, forked_answers, outcome, profiled_outcome, sized_world

from mooncake.reshard import _memo_proof, _native
from mooncake.reshard.contracts.fragments import RuntimeBindingFragment
from mooncake.reshard.weight import bind_logical_transfer_plan
from mooncake.reshard.weight._planner import bound_contracts as bc
from mooncake.reshard.weight.types import PlacementFragment

from test_audit39_class_descriptors import _next, _other, _planter, _stored

CLASSES = {"PlacementFragment": PlacementFragment, "RuntimeBindingFragment": RuntimeBindingFragment}
EDITS = {"next": _next, "other": _other}
# (class, field, edit): per field, an edit whose warm outcome differed from the cold one on the
# start build
FIELDS = [
    ("PlacementFragment", name, "next")
    for name in ("tensor_id", "global_offset", "local_shape", "nbytes", "rank", "placement_fragment_id")
] + [("PlacementFragment", "pipeline_stage_id", "other")] + [
    ("RuntimeBindingFragment", name, "next")
    for name in (
        "placement_fragment_id", "fragment_id", "address", "nbytes", "worker_id", "itemsize", "local_shape",
        "strides_bytes", "storage_address", "storage_offset_bytes", "owner",
    )
] + [("RuntimeBindingFragment", name, "other") for name in ("endpoint", "device", "storage_nbytes")]
PLACES = ("class", "base")
CASES = [(cls, field, edit, place) for cls, field, edit in FIELDS for place in PLACES]


def _base_planter(cls: type, field: str, edit: Callable[[Any], Any]) -> Callable[[], Callable[[], None]]:
    """A property on a class put between ``cls`` and its layout base."""

    def plant() -> Callable[[], None]:
        bases = cls.__bases__  # (the layout base first; TransferRegion's Generic after it)
        stored = _stored(cls, field)
        between = type("Between", bases[:1], {"__slots__": (), field: property(lambda self: edit(stored(self)))})
        cls.__bases__ = (between,) + bases[1:]

        def undo() -> None:
            cls.__bases__ = bases

        return undo

    return plant


def outcome_while_planted(cls: type, field: str, edit: Callable[[Any], Any], place: str, call: Callable[[], Any]) -> Any:
    """``outcome(call)`` with a property planted on ``cls`` (``place`` "class") or on a class put
    between it and its layout base ("base"), removed again after the call."""
    make = _planter if place == "class" else _base_planter
    undo = make(cls, field, edit)()
    try:
        return outcome(call)
    finally:
        undo()


def _plant(case: tuple[str, str, str, str]) -> Callable[[], None]:
    cls_name, field, edit, place = case
    make = _planter if place == "class" else _base_planter
    return make(CLASSES[cls_name], field, EDITS[edit])()


def _summary(result: Any) -> list[str]:
    """``["plan"]`` or ``[exception class, message]`` (object addresses masked)."""
    if not isinstance(result, tuple):
        return ["plan"]
    return [result[0], re.sub(r"0x[0-9a-f]+", "0x?", result[1])]


def _bind(world: Any) -> Any:
    logical, targets, sources, _memory = world
    return outcome(lambda: bind_logical_transfer_plan(logical, targets, source_bindings=sources))


def _planted_bind(case: tuple[str, str, str, str], hook: Any = None) -> list[str]:
    world = sized_world(2)
    undo = None if hook is not None else _plant(case)
    try:
        result = _bind(world) if hook is None else profiled_outcome(hook, lambda: _bind(world))
    finally:
        if undo is not None:
            undo()
    return _summary(result)


def _cold_outcomes() -> dict[str, list[str]]:
    """(run in a fresh interpreter) Each case's bind outcome in a forked child of a process that
    has built a world but never bound."""
    sized_world(2)
    return forked_answers(CASES, lambda case: _planted_bind(case))


cold = cold_oracle(__file__)


@pytest.mark.parametrize("case", CASES, ids=["-".join(case) for case in CASES])
def test_a_warm_bind_decides_a_planted_property_as_a_cold_process(case, cold):
    _bind(sized_world(2))  # (warms the memos)
    assert _planted_bind(case) == cold["|".join(case)]
    assert _summary(_bind(sized_world(2))) == ["plan"]  # (nothing left behind: memos warm again)


MIDCALL = [
    ("PlacementFragment", "nbytes", "next", "class"),
    ("PlacementFragment", "tensor_id", "next", "class"),
    ("RuntimeBindingFragment", "owner", "next", "class"),
    ("RuntimeBindingFragment", "fragment_id", "next", "base"),
    ("RuntimeBindingFragment", "itemsize", "next", "base"),
]
# (RuntimeBindingFragment.address is no case: the profile hook unseals the call, and the start
# build's unsealed recheck of step 6's rules already refused it as the cold bind does)


@pytest.mark.parametrize("case", MIDCALL, ids=["-".join(case) for case in MIDCALL])
def test_a_property_planted_during_a_warm_bind_is_seen_by_the_proof_after_it(case, cold):
    """Foreign code (here a profile hook) plants the property after step 6, which the property
    would refuse: the proof after the call fails and the call is decided again, cold, on the
    classes as they are then (as a cold process decides them with the property planted first)."""
    _bind(sized_world(2))
    undo: list[Callable[[], None]] = []

    def hook(frame: Any, event: str, _arg: Any) -> None:
        if event == "call" and frame.f_code.co_name == "_fused_steps_7_8" and not undo:
            undo.append(_plant(case))

    try:
        assert _planted_bind(case, hook) == cold["|".join(case)]
    finally:
        assert undo, "the hook did not plant"
        undo[0]()


def test_the_package_layout_classes_are_proved_even_with_the_memos_empty():
    """A nested cold call (bind's unsealed recheck calls validate_runtime_binding) empties the
    memos: the package's layout classes stay proved by the specs."""
    assert {cls.__name__ for cls, _names in _memo_proof._SPECS} >= {
        "PlacementFragment", "RuntimeBindingFragment", "TransferRegion", "BoundWeightFragment", "RuntimeFragmentSnapshot"
    }
    _native.layout_memos_cold(1)
    _native.layout_memos_cold(-1)
    assert _native.layout_memos_unshadowed(_memo_proof._SPECS) is True
    RuntimeBindingFragment.owner = property(lambda self: None)
    try:
        assert _native.layout_memos_unshadowed(_memo_proof._SPECS) is False
    finally:
        del RuntimeBindingFragment.owner
    for bad in (None, ((RuntimeBindingFragment,),), ((1, ()),), [(RuntimeBindingFragment, ())]):
        assert _native.layout_memos_unshadowed(bad) is False


def test_cold_mode_nests_and_refuses_to_go_below_zero():
    assert _native.layout_memos_cold(1) == 1
    assert _native.layout_memos_cold(1) == 2
    assert _native.layout_memos_cold(-1) == 1
    assert _native.layout_memos_cold(-1) == 0
    for bad in (-1, 0, 2, True, 1.0, "1"):
        with pytest.raises(ValueError):
            _native.layout_memos_cold(bad)
    assert _summary(_bind(sized_world(2))) == ["plan"]


def test_an_unplanted_warm_bind_stays_out_of_cold_mode():
    _bind(sized_world(2))
    levels = []
    real = _native.layout_memos_cold

    def spy(delta: int) -> int:
        levels.append(delta)
        return real(delta)

    _native.layout_memos_cold = spy
    try:
        assert _summary(_bind(sized_world(2))) == ["plan"]
    finally:
        _native.layout_memos_cold = real
    assert levels == []


if __name__ == "__main__":
    json.dump(_cold_outcomes(), sys.stdout)


def test_the_proof_covers_every_class_a_memo_holds_a_user_subclass_too():
    """The proof covers every class a memo holds (``_native.layout_memos_unshadowed``), beside the
    package's layout classes: a user subclass a memo accepted (here gctrack's, through
    ``untrack_inert``) is proved too."""

    class Sub(PlacementFragment):
        __slots__ = ()

    _bind(sized_world(2))
    fragment = sized_world(2)[0].target_placement.fragments[0]
    sub = Sub.__new__(Sub)
    for field in dataclasses.fields(PlacementFragment):
        object.__setattr__(sub, field.name, getattr(fragment, field.name))
    _native.untrack_inert(sub, Sub)  # (its memo now holds Sub)
    assert _native.layout_memos_unshadowed(_memo_proof._SPECS) is True
    Sub.nbytes = property(lambda self: 0)
    try:
        assert _native.layout_memos_unshadowed(_memo_proof._SPECS) is False
    finally:
        del Sub.nbytes
    assert _native.layout_memos_unshadowed(_memo_proof._SPECS) is True
    _native.layout_memos_cold(1)  # (entering empties every memo: Sub is released)
    _native.layout_memos_cold(-1)
    assert _native.layout_memos_unshadowed(_memo_proof._SPECS) is True

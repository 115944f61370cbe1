"""SHAPE38 (session 38), soundness fix: ``_native.revalidate_shapes`` reads every attested
view's placement and evidence before it checks anything.

A view's fields are read with a generic getattr. ``_AttestedView`` is a plain Python class: a
data descriptor set on it for ``placement`` or ``evidence`` after import runs Python code at each
read. The pass used to read each view right before checking it, after the target placement and
the earlier views had been checked (and recorded as checked for the call): code run by a later
read could forge an object already checked (a str subclass where the constructors store a str)
and the fast path accepted what the rules refuse (``dataclasses.replace`` returned a plan whose
target placement's ``placement_set_id`` is not a str; the rules raise "placement_set_id must be
a non-empty string"). Fails on the previous build.

Also: a read that raises (the descriptor's error) or a view that is not one still decides only
when every check before it holds (else False, the rules decide), as before.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterator

import pytest

from forge_helpers import replace_pass_arguments, sized_world

from mooncake.reshard import _native
from mooncake.reshard.weight import bind_logical_transfer_plan
from mooncake.reshard.weight._planner import bound_contracts as bc


class _Text(str):
    pass


class _Boom(RuntimeError):
    pass


def _plan() -> Any:
    logical, targets, sources, _memory = sized_world(2)
    return bind_logical_transfer_plan(logical, targets, source_bindings=sources)


def _captured(plan: Any) -> tuple[Any, ...]:
    return replace_pass_arguments(plan, "revalidate_shapes")


class _Hooked:
    """A data descriptor for one slot of ``_AttestedView``: the slot's own value, after
    ``action(count)`` while armed (count: the reads so far while armed)."""

    def __init__(self, slot: Any, action: Callable[[int], None]) -> None:
        self.slot, self.action, self.armed, self.count = slot, action, False, 0

    def __get__(self, obj: Any, cls: Any = None) -> Any:
        if obj is None:
            return self
        if self.armed:
            self.count += 1
            self.action(self.count)
        return self.slot.__get__(obj, cls)

    def __set__(self, obj: Any, value: Any) -> None:
        self.slot.__set__(obj, value)

    def __delete__(self, obj: Any) -> None:
        self.slot.__delete__(obj)


class _planted:
    """``_AttestedView.<name>`` replaced by a _Hooked descriptor for the block."""

    def __init__(self, name: str, action: Callable[[int], None]) -> None:
        self.name = name
        self.slot = bc._AttestedView.__dict__[name]
        self.hook = _Hooked(self.slot, action)

    def __enter__(self) -> _Hooked:
        setattr(bc._AttestedView, self.name, self.hook)
        return self.hook

    def __exit__(self, *exc: Any) -> None:
        setattr(bc._AttestedView, self.name, self.slot)


def _forgeries(plan: Any) -> Iterator[tuple[str, Any, str]]:
    """Objects the pass checks, early or late: (label, object, str field)."""
    placement = plan.target_placement
    yield "target-placement", placement, "placement_set_id"
    yield "target-part", placement.parts[0], "participant_id"
    yield "target-tensor", placement.parts[0].tensors[0], "dtype"
    yield "target-fragment", placement.parts[0].fragments[0], "placement_fragment_id"
    evidence = plan.target_executors[0].attestation.evidence
    yield "an-evidence", evidence, "lease_id"
    yield "a-runtime-fragment", list(evidence.fragments)[0], "device"
    source = plan.source_executors[0].attestation.placement
    yield "source-placement", source, "revision"


@pytest.mark.parametrize("name", ("placement", "evidence"))
@pytest.mark.parametrize("when", ("first", "last"))
def test_code_run_by_a_view_read_cannot_forge_a_checked_object(name, when):
    plan = _plan()
    args = _captured(plan)
    views = len(args[1])
    assert views > 1
    for label, obj, field in _forgeries(plan):
        old = getattr(obj, field)

        def forge(count: int) -> None:
            if count == (1 if when == "first" else views):
                object.__setattr__(obj, field, _Text(old))

        try:
            with _planted(name, forge) as hook:
                hook.armed = True
                answer = _native.revalidate_shapes(*args)
                hook.armed = False
            assert type(getattr(obj, field)) is _Text  # the descriptor ran inside the pass
            assert answer is False, (label, name, when)
        finally:
            object.__setattr__(obj, field, old)
    assert _native.revalidate_shapes(*args) is True


def test_replace_refuses_as_the_rules_do():
    # end to end: the forgery made by the last view read is refused with the rules' message
    plan = _plan()
    placement = plan.target_placement
    old = placement.placement_set_id
    args = _captured(plan)
    views = len(args[1])
    real = _native.revalidate_shapes
    hook_box: list[_Hooked] = []

    def forge(count: int) -> None:
        if count == views:
            object.__setattr__(placement, "placement_set_id", _Text(old))

    def armed(*call_args: Any) -> Any:
        hook_box[0].armed = True
        try:
            return real(*call_args)
        finally:
            hook_box[0].armed = False

    try:
        with _planted("placement", forge) as hook:
            hook_box.append(hook)
            bc._native.revalidate_shapes = armed
            try:
                with pytest.raises(ValueError, match="placement_set_id must be a non-empty string"):
                    dataclasses.replace(plan)
            finally:
                bc._native.revalidate_shapes = real
        assert type(placement.placement_set_id) is _Text
    finally:
        object.__setattr__(placement, "placement_set_id", old)
    dataclasses.replace(plan)


@pytest.mark.parametrize("name", ("placement", "evidence"))
@pytest.mark.parametrize("at", ("first", "last"))
def test_a_read_that_raises_decides_only_after_the_checks_before_it(name, at):
    plan = _plan()
    args = _captured(plan)
    views = len(args[1])

    def boom(count: int) -> None:
        if count == (1 if at == "first" else views):
            raise _Boom("read failed")

    with _planted(name, boom) as hook:
        hook.armed = True
        with pytest.raises(_Boom):
            _native.revalidate_shapes(*args)
        hook.count = 0
        # a check before it fails: False, the error dropped (the rules decide)
        placement = plan.target_placement
        old = placement.placement_id
        object.__setattr__(placement, "placement_id", _Text(old))
        try:
            assert _native.revalidate_shapes(*args) is False
        finally:
            object.__setattr__(placement, "placement_id", old)
        hook.armed = False
    assert _native.revalidate_shapes(*args) is True


def test_an_entry_that_is_not_a_view_declines():
    plan = _plan()
    target, attested, *rest = _captured(plan)
    for key in (next(iter(attested)), list(attested)[-1]):
        entry = attested[key]
        for bad in ((entry[0], entry[1], object()), entry[:2], list(entry)):
            edited = dict(attested)
            edited[key] = bad
            assert _native.revalidate_shapes(target, edited, *rest) is False
    assert _native.revalidate_shapes(target, attested, *rest) is True

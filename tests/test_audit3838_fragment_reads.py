"""AUDIT38 (session 38), soundness fix: ``_native.revalidate_fragments`` reads a placement's
identity and a view's ``key_base`` with a generic getattr only when the class is proven inert.

``rf_identity`` read ``placement.resource_id`` / ``revision`` / ``weight_generation`` and
``rf_fragment`` read ``view.key_base`` with a generic getattr. ``WeightPlacementManifest`` and
``_AttestedView`` are plain Python classes: a data descriptor set on one of them after import
runs Python code at each read, inside the pass, after earlier placements were proven of the plan
identity (and remembered as proven for the call) and earlier fragments were checked. That code
could forge one of them (an already proven source placement's revision, a checked fragment's
runtime lease) and ``dataclasses.replace`` accepted a plan the rules refuse. Now a read of
either kind happens only after the class was proven to run no code for it (no descriptor under
the identity names, ``key_base`` a slot; generic attribute lookup; metaclass exactly ``type``);
anything else declines (the rules decide). Fails on the previous build.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import pytest

from forge_helpers import sized_world

from mooncake.reshard.weight import bind_logical_transfer_plan
from mooncake.reshard.weight._planner import bound_contracts as bc
from mooncake.reshard.weight.placement import WeightPlacementManifest


def _plan() -> Any:
    logical, targets, sources, _memory = sized_world(2)
    return bind_logical_transfer_plan(logical, targets, source_bindings=sources)


class _armed_pass:
    """``bc._native.<name>`` wrapped: ``flag['armed']`` is true while the native pass runs."""

    def __init__(self, name: str, flag: dict[str, Any]) -> None:
        self.name, self.flag = name, flag
        self.real = getattr(bc._native, name)

    def __enter__(self) -> "_armed_pass":
        real, flag = self.real, self.flag

        def armed(*args: Any) -> Any:
            flag["armed"] = True
            flag.setdefault("args", args)
            try:
                result = real(*args)
            finally:
                flag["armed"] = False
            flag.setdefault("results", []).append(result)
            return result

        setattr(bc._native, self.name, armed)
        return self

    def __exit__(self, *exc: Any) -> None:
        setattr(bc._native, self.name, self.real)


@pytest.mark.parametrize("field", ("resource_id", "revision", "weight_generation"))
@pytest.mark.parametrize("when", ("first", "last"))
def test_code_run_by_an_identity_read_cannot_forge_a_proven_placement(field, when):
    plan = _plan()
    state: dict[str, Any] = {"armed": False, "seen": [], "at": None, "forged": None}

    def get(self: Any) -> Any:
        if state["armed"]:
            seen = state["seen"]
            seen.append(self)
            if state["forged"] is None and len(seen) == state["at"]:
                first = seen[0]
                old = first.__dict__[field]
                state["forged"] = (first, old)
                first.__dict__[field] = old + 1 if field == "weight_generation" else old + "x"
        return self.__dict__[field]

    setattr(WeightPlacementManifest, field, property(get))
    # (AUDIT39: the per-call proof declines any plan read with a planted field property before
    # the passes; bypassed here so that the pass's own defence against mid-pass code is tested)
    proof = bc._fields_unshadowed
    bc._fields_unshadowed = lambda specs: True
    try:
        with _armed_pass("revalidate_fragments", state):
            dataclasses.replace(plan)  # planted, nothing forged: accepted (the pass or the rules)
        seen = state["seen"]
        if not seen:  # no read ran code inside the pass: it declined (the rules decided)
            assert state["results"] == [None]
            return
        others = [k + 1 for k, placement in enumerate(seen) if placement is not seen[0]]
        assert others  # two placements read in the pass
        state["at"], state["seen"] = (others[0] if when == "first" else others[-1]), []
        with _armed_pass("revalidate_fragments", state):
            with pytest.raises(ValueError, match="identity differs"):
                dataclasses.replace(plan)
        assert state["forged"] is not None  # the descriptor ran inside the pass
    finally:
        bc._fields_unshadowed = proof
        delattr(WeightPlacementManifest, field)
        if state["forged"] is not None:
            first, old = state["forged"]
            first.__dict__[field] = old
    dataclasses.replace(plan)


class _HookedSlot:
    """A data descriptor standing for a slot of ``_AttestedView``: its value, after
    ``action(self_view)`` while armed."""

    def __init__(self, slot: Any, action: Callable[[Any], None], state: dict[str, Any]) -> None:
        self.slot, self.action, self.state = slot, action, state

    def __get__(self, obj: Any, cls: Any = None) -> Any:
        if obj is None:
            return self
        if self.state["armed"]:
            self.action(obj)
        return self.slot.__get__(obj, cls)

    def __set__(self, obj: Any, value: Any) -> None:
        self.slot.__set__(obj, value)

    def __delete__(self, obj: Any) -> None:
        self.slot.__delete__(obj)


@pytest.mark.parametrize("field", ("runtime_lease_id", "instance_id"))
def test_code_run_by_a_key_base_read_cannot_forge_a_checked_fragment(field):
    plan = _plan()
    frags: list[Any] = []
    state: dict[str, Any] = {"armed": False, "reads": 0, "forged": None}
    slot = bc._AttestedView.__dict__["key_base"]

    def count(view: Any) -> None:
        state["reads"] += 1

    hook = _HookedSlot(slot, count, state)
    bc._AttestedView.key_base = hook
    try:
        with _armed_pass("revalidate_fragments", state):
            dataclasses.replace(plan)
        frags = list(state.pop("args")[0])
        reads = state["reads"]
        if reads == 0:  # no read ran code inside the pass: it declined (the rules decided)
            assert state["results"] == [None]
            return
        assert reads > 1 and len(frags) > 1
        victim = frags[0]
        old = getattr(victim, field)

        def forge(view: Any) -> None:
            state["reads"] += 1
            if state["reads"] == reads and state["forged"] is None:
                state["forged"] = old
                object.__setattr__(victim, field, old + "x")

        hook.action = forge
        state["reads"] = 0
        with _armed_pass("revalidate_fragments", state):
            with pytest.raises(ValueError, match="lease|instance"):
                dataclasses.replace(plan)
        assert state["forged"] is not None  # the descriptor ran inside the pass
        bc._AttestedView.key_base = slot
        with pytest.raises(ValueError, match="lease|instance"):  # the rules refuse the forgery
            dataclasses.replace(plan)
    finally:
        bc._AttestedView.key_base = slot
        if state["forged"] is not None:
            object.__setattr__(frags[0], field, state["forged"])
    dataclasses.replace(plan)


def test_a_planted_descriptor_declines_the_pass():
    # the pass itself: a descriptor on either class (even one that forges nothing) declines
    plan = _plan()
    state: dict[str, Any] = {"armed": False}
    with _armed_pass("revalidate_fragments", state):
        dataclasses.replace(plan)
    args = state["args"]
    assert bc._native.revalidate_fragments(*args) is not None
    setattr(WeightPlacementManifest, "revision", property(lambda self: self.__dict__["revision"]))
    try:
        assert bc._native.revalidate_fragments(*args) is None
    finally:
        delattr(WeightPlacementManifest, "revision")
    slot = bc._AttestedView.__dict__["key_base"]
    bc._AttestedView.key_base = _HookedSlot(slot, lambda view: None, {"armed": False})
    try:
        assert bc._native.revalidate_fragments(*args) is None
    finally:
        bc._AttestedView.key_base = slot
    assert bc._native.revalidate_fragments(*args) is not None


def test_a_placement_swapped_by_a_later_view_call_declines():
    # Python code run by a view call (here the view function itself; a profile hook reaches it
    # too) puts another placement, exact class but of another revision, on an attestation whose
    # entry was made before: its identity is read again once every view call has run
    import copy

    plan = _plan()
    state: dict[str, Any] = {"armed": False}
    with _armed_pass("revalidate_fragments", state):
        dataclasses.replace(plan)
    args = list(state["args"])
    fragments = args[0]
    attestations: list[Any] = []
    for fragment in fragments:
        if all(fragment.attestation is not seen for seen in attestations):
            attestations.append(fragment.attestation)
    assert len(attestations) > 1
    first = attestations[0]
    real_view_of = args[7]
    calls: list[Any] = []
    saved = first.__dict__["placement"]
    forged = copy.copy(saved)
    forged.__dict__["revision"] = saved.revision + "-other"

    def view_of(attestation: Any) -> Any:
        calls.append(attestation)
        if len(calls) == len(attestations):  # the last call: every entry made before it
            first.__dict__["placement"] = forged
        return real_view_of(attestation)

    args[7], args[11] = view_of, None
    try:
        for attestation in attestations:  # every view rebuilt: a call per entry
            attestation.__dict__.pop("_attested_view", None)
        got = bc._native.revalidate_fragments(*args)
        assert len(calls) == len(attestations) and first.__dict__["placement"] is forged
        assert got is None
    finally:
        first.__dict__["placement"] = saved
    args[7] = real_view_of
    assert bc._native.revalidate_fragments(*args) is not None

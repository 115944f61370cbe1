"""A key planted in an attestation's dicts by Python code run at a view call inside the pass
(session 25's open "hooks" note; SOUND6, session 26).

``revalidate_fragments`` checks an attestation's ``_placement_dict`` and ``_binding_dict`` plain
(plain_dict.h) when it makes the attestation's entry, and then probes both with the id of every
fragment of that attestation. Making a later attestation's entry may call ``view_of`` (the
package's ``_attested_view``) when that attestation's cached view is not current: Python code
runs there, and with it a profile or trace hook. A hook (or anything the view's code reaches)
could then plant a key whose ``__eq__`` is user code in an earlier attestation's dict, after its
check and before its next probe: foreign code inside the pass. Shown on 3d1b789 for every pair of
attestations where the earlier one is probed again after the later one's view call; likewise the
view builders themselves (``attested_view``, ``attested_rows``) probed the placement dict after
checking only that it is an exact dict.

Now the pass calls ``view_of`` only while no entry exists, checks that entry's dicts again after
its call, and on the first call needed later makes every remaining entry at once and then checks
every entry's dicts again (``rf_enter_all``); the view builders check the dict plain.
"""

from __future__ import annotations

import dataclasses
import itertools
import sys
from typing import Any

import pytest

import native_watch
from forge_helpers import profiled_outcome, sized_world

from mooncake.reshard import _native
from mooncake.reshard.weight import bind_logical_transfer_plan
from mooncake.reshard.weight._planner import bound_contracts

_MISSING = object()


class Planted(str):
    """``"<pfid>~planted"``: hashes as the fragment id it is planted in front of; records each
    ``__eq__`` a native function calls directly (native_watch)."""

    __slots__ = ()

    def __hash__(self) -> int:
        return hash(str.split(self, "~")[0])

    def __eq__(self, other: object) -> bool:
        native_watch.record("str.__eq__")
        return False

    __ne__ = str.__ne__


def _plan() -> tuple[Any, Any]:
    logical, targets, sources, memory = sized_world(2)
    return bind_logical_transfer_plan(logical, targets, source_bindings=sources), memory


def _view_call_of(frame: Any, event: str, attestation: Any) -> bool:
    """A profile event: the fast revalidation's C pass calls ``_attested_view`` for ``attestation``."""
    return (
        event == "call"
        and frame.f_code.co_name == "_attested_view"
        and frame.f_back is not None
        and frame.f_back.f_code.co_name == "_fast_revalidate_live"  # called by the C pass
        and frame.f_locals.get("attestation") is attestation
    )


def _pass_build_order(plan: Any) -> list[Any]:
    """The attestations whose views ``dataclasses.replace(plan)``'s pass builds, in the order it
    builds them: a run through the Python wrapper (a spy in ``_attested_view``'s place turns
    ``revalidate_fragments``' C paths off; the pass asks for views at the same points), each
    attestation's ``_attested_view`` entry restored afterwards."""
    kept = [(vars(attestation), vars(attestation).get("_attested_view", _MISSING)) for attestation in _attestations(plan)]
    original = bound_contracts._attested_view
    order: list[Any] = []

    def spy(attestation: Any) -> Any:
        scope = bound_contracts._VIEW_STATE.scope
        if sys._getframe(1).f_code.co_name == "_fast_revalidate_live" and id(attestation) not in (scope or {}):
            order.append(attestation)
        return original(attestation)

    bound_contracts._attested_view = spy
    try:
        dataclasses.replace(plan)
    finally:
        bound_contracts._attested_view = original
    for state, value in kept:
        state.pop("_attested_view", None)
        if value is not _MISSING:
            state["_attested_view"] = value
    return order


class ViewCallOf:
    """A profile-hook predicate: the pass's view call for ``attestation`` in
    ``dataclasses.replace(plan)``. The pass builds a view through ``_attested_view`` (its frame,
    ``_view_call_of``) or, on the wrapper's common paths, in C (``revalidate_fragments``' views),
    where the first Python code the build runs is the placement's ``digest`` property, called by
    the pass itself. Each of the two marks one view build; the attestation's is found by its
    place in the pass's build order (``_pass_build_order``)."""

    def __init__(self, plan: Any, attestation: Any) -> None:
        order = _pass_build_order(plan)
        self.attestation = attestation
        self.index = next(k for k, built in enumerate(order) if built is attestation)
        self.builds = 0
        self.in_pass = False

    def __call__(self, frame: Any, event: str, arg: Any) -> bool:
        if event in ("c_call", "c_return", "c_exception") and arg is _native.revalidate_fragments:
            self.in_pass = event == "c_call"
            return False
        if not self.in_pass or event != "call" or frame.f_back is None:
            return False
        if frame.f_back.f_code.co_name != "_fast_revalidate_live":
            return False
        if frame.f_code.co_name not in ("_attested_view", "digest"):
            return False
        build = self.builds
        self.builds += 1
        if frame.f_code.co_name == "_attested_view":
            return _view_call_of(frame, event, self.attestation)
        return build == self.index


def _attestations(plan: Any) -> list[Any]:
    found: list[Any] = []
    for operation in plan.operations:
        for side in (operation.source, operation.target):
            attestation = getattr(side, "attestation", None)
            if attestation is not None and all(attestation is not seen for seen in found):
                found.append(attestation)
    return found


def _plant(mapping: dict[str, Any]) -> None:
    items = list(mapping.items())
    mapping.clear()
    for key, value in items:
        mapping[Planted(f"{key}~planted")] = None
        mapping[key] = value


_PAIRS = list(itertools.product(range(4), repeat=2))  # (a == b: at its own view call)


@pytest.mark.parametrize("field", ["_placement_dict", "_binding_dict"])
@pytest.mark.parametrize("pair", _PAIRS, ids=[f"{a}-after-{b}" for a, b in _PAIRS])
def test_no_key_planted_at_a_view_call_is_probed_inside_a_pass(pair: tuple[int, int], field: str) -> None:
    plan, _memory = _plan()
    attestations = _attestations(plan)
    assert len(attestations) == 4  # (the setup: two workers per side)
    earlier, later = attestations[pair[0]], attestations[pair[1]]
    for attestation in attestations:  # no current cached view: the pass calls view_of
        vars(attestation).pop("_attested_view", None)
    view_call_of_later = ViewCallOf(plan, later)
    planted: list[bool] = []

    def at_view_call(frame: Any, event: str, arg: Any) -> None:
        if view_call_of_later(frame, event, arg) and not planted:
            planted.append(True)
            _plant(vars(earlier)[field])

    watch = native_watch.NativeWatch()

    def hook(frame: Any, event: str, arg: Any) -> None:
        watch(frame, event, arg)
        at_view_call(frame, event, arg)

    native_watch._ACTIVE.append(watch)
    try:
        result = profiled_outcome(hook, lambda: dataclasses.replace(plan))
    finally:
        native_watch._ACTIVE.pop()
    assert planted  # (the setup ran as intended: the pass called view_of for the later one)
    assert sorted(set(watch.hits)) == []
    # the planted keys equal no fragment id: the plan is the rules' (accepted, equal)
    assert not isinstance(result, tuple) and result == plan


@pytest.mark.parametrize("field", ["_placement_dict", "_binding_dict"])
def test_an_equal_copy_in_the_attested_dicts_runs_no_eq_inside_the_pass(field: str) -> None:
    """The attested fragment and the plan's fragment, equal but not the same object: comparing
    them ran their class's ``__eq__`` (Python code, and a hook with it) inside
    ``revalidate_fragments`` after the dicts' checks. The pass now takes only the same object and
    declines otherwise; the rules compare them (==) and accept, as before."""
    plan, _memory = _plan()
    attestation = _attestations(plan)[0]
    mapping = vars(attestation)[field]
    key = next(iter(mapping))
    original = mapping[key]
    mapping[key] = dataclasses.replace(original)
    assert mapping[key] == original and mapping[key] is not original  # (the setup)
    eq_code = type(original).__eq__.__code__
    inside: list[str] = []

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code is eq_code and frame.f_back is not None:
            inside.append(frame.f_back.f_code.co_name)

    result = profiled_outcome(hook, lambda: dataclasses.replace(plan))
    assert "_fast_revalidate_live" not in inside, inside
    assert inside  # (the rules compared them)
    assert not isinstance(result, tuple) and result == plan

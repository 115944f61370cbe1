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
from typing import Any

import pytest

import native_watch
from forge_helpers import profiled_outcome, sized_world

from mooncake.reshard.weight import bind_logical_transfer_plan


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
    planted: list[bool] = []

    def at_view_call(frame: Any, event: str, arg: Any) -> None:
        if not planted and _view_call_of(frame, event, later):
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

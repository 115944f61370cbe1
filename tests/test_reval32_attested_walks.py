"""The attested dicts' walks and probes in ``revalidate_fragments`` and ``attested_index``
(REVAL12, session 32).

* ``attested_index`` reads the placement dict in order first (``rf_cursor_item``) and probes only
  when the evidence fragment's id is not the very key at the cursor: the index must equal the
  Python reference whatever the evidence order, with equal but not identical ids, missing or
  ``None`` entries and repeated fragments.
* Both read the attested dicts' keys' classes with hints ahead (``rv_plain_keys``): a key that
  is not an exact str must decline wherever it sits in the walk (first, inside the first hint
  window, just past it, last).
* ``rf_enter_all`` no longer checks an entry's dicts right after its own view call (its final
  walk of every entry does; ``RF_CALL_RECHECKED``): a key planted at the view call in the same
  attestation's dicts must still decline (test_sound26_view_callout_keys has every pair; here a
  colliding key at each position of the walk).
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest

import native_watch
from spec_helpers import field_state, forged_instance
from forge_helpers import profiled_outcome, sized_world
from test_native_revalidate_fastpaths import _attestations, _forged_attestation, _index, _reference, _spread
from test_sound26_view_callout_keys import ViewCallOf, _attestations as _plan_attestations

from mooncake.reshard.contracts.fragments import RuntimeBindingFragment
from mooncake.reshard.weight import bind_logical_transfer_plan


def _wide_attestation() -> tuple[Any, tuple[Any, ...]]:
    """An attestation with its evidence spread over two workers, its fragments three times over."""
    attestation = max(_attestations(), key=lambda a: len(a._placement_dict))
    fragments = attestation.evidence.fragments * 3
    return attestation, tuple(_spread(f, i, len(fragments)) for i, f in enumerate(fragments))


def _copy_text(text: str) -> str:
    copy = "".join(list(text))
    assert copy == text and copy is not text
    return copy


def _with_pfid(fragment: Any, pfid: str) -> Any:
    return forged_instance(RuntimeBindingFragment, {**field_state(fragment), "placement_fragment_id": pfid})


_ORDERS = ["dict", "reversed", "rotated", "shuffled", "copied_ids", "repeated", "none_entries", "missing"]


@pytest.mark.parametrize("order", _ORDERS)
def test_index_read_in_dict_order_equals_the_reference(order: str) -> None:
    attestation, fragments = _wide_attestation()
    placement_dict = dict(attestation._placement_dict)
    assert len(placement_dict) >= 2
    # every other entry None (not attested): a value read at the wrong position changes the index
    for k, key in enumerate(list(placement_dict)):
        if k % 2 == 1:
            placement_dict[key] = None
    if order == "reversed":
        fragments = fragments[::-1]
    elif order == "rotated":
        fragments = fragments[len(fragments) // 3 :] + fragments[: len(fragments) // 3]
    elif order == "shuffled":
        items = list(fragments)
        random.Random(32).shuffle(items)
        fragments = tuple(items)
    elif order == "copied_ids":  # equal ids, not the dict's keys: every read is a probe
        fragments = tuple(_with_pfid(f, _copy_text(f.placement_fragment_id)) for f in fragments)
    elif order == "repeated":
        fragments = tuple(f for f in fragments for _ in range(2))
    elif order == "none_entries":  # ``placement_dict.get(pfid) is None``: not attested
        placement_dict = dict(attestation._placement_dict)  # the first None instead, an unrelated key after
        first = next(iter(placement_dict))
        placement_dict[first] = None
        placement_dict[f"{first}-unrelated"] = object()
    elif order == "missing":
        del placement_dict[list(placement_dict)[-1]]
    forged = _forged_attestation(attestation, fragments=fragments, placement_dict=placement_dict)
    built = _index(forged)
    reference = _reference(forged)
    assert built is not None and built == reference
    assert list(built[1]) == list(reference[1]) and list(built[2]) == list(reference[2])  # worker order
    assert built[3] is False and built[0]  # (the setup: some attested, some not)


def test_index_cursor_takes_the_current_value() -> None:
    """A key whose value was replaced in place (the dict's order kept) is read with its current
    value: ``None`` now, so its fragments are not attested."""
    attestation, fragments = _wide_attestation()
    placement_dict = dict(attestation._placement_dict)
    keys = list(placement_dict)
    placement_dict[keys[len(keys) // 2]] = None
    forged = _forged_attestation(attestation, fragments=fragments, placement_dict=placement_dict)
    built = _index(forged)
    assert built is not None and built == _reference(forged) and built[3] is False
    assert keys[len(keys) // 2] not in built[0]


class Recorded(str):
    """A str subclass key: each ``__eq__`` / ``__hash__`` called by a native function directly
    is recorded (native_watch); it hashes as the text before its ``~``."""

    __slots__ = ()

    def __hash__(self) -> int:
        native_watch.record("str.__hash__")
        return hash(str.split(self, "~")[0])

    def __eq__(self, other: object) -> bool:
        native_watch.record("str.__eq__")
        return False

    __ne__ = str.__ne__


def _positions(n: int) -> list[int]:
    return sorted({p for p in (0, 1, 6, 7, 8, 9, n // 2, n - 1, n) if 0 <= p <= n})


def _with_foreign_key(mapping: dict[str, Any], position: int) -> dict[str, Any]:
    """``mapping`` with a Recorded key at walk position ``position``, colliding with the key that
    follows it (so a probe for that key would compare with it first)."""
    items = list(mapping.items())
    result: dict[Any, Any] = {}
    for index, (key, value) in enumerate(items):
        if index == position:
            result[Recorded(f"{key}~planted")] = None
        result[key] = value
    if position == len(items):
        result[Recorded(f"{items[-1][0]}~planted")] = None
    return result


def _watched_index(attestation: Any) -> tuple[Any, list[Any]]:
    """``_index(attestation)`` and the hits a ``NativeWatch`` recorded while it ran."""
    watch = native_watch.NativeWatch()
    native_watch._ACTIVE.append(watch)
    try:
        result = profiled_outcome(watch, lambda: _index(attestation))
    finally:
        native_watch._ACTIVE.pop()
    return result, watch.hits


@pytest.mark.parametrize("size", [3, 20, 40, 200])
def test_index_declines_a_foreign_key_at_any_position(size: int) -> None:
    attestation, fragments = _wide_attestation()
    base = dict(list(attestation._placement_dict.items())[:size])
    while len(base) < size:  # (unrelated keys after the attested ones)
        base[f"extra-{len(base)}"] = None
    forged_ok = _forged_attestation(attestation, fragments=fragments, placement_dict=base)
    assert _index(forged_ok) == _reference(forged_ok)  # (the setup: plain, accepted)
    for position in _positions(len(base)):
        mapping = _with_foreign_key(base, position)
        forged = _forged_attestation(attestation, fragments=fragments, placement_dict=mapping)
        result, hits = _watched_index(forged)
        assert result is None, position
        assert hits == [], position


def _plan(tensors: int) -> Any:
    logical, targets, sources, _memory = sized_world(tensors)
    return bind_logical_transfer_plan(logical, targets, source_bindings=sources)


_SIZES = [(12, which) for which in range(4)] + [(40, 0), (40, 3)]  # (past rv_plain_keys' RV_KEYS_HINTED: 32)


@pytest.mark.parametrize("tensors,which", _SIZES, ids=[f"{t}-{w}" for t, w in _SIZES])
@pytest.mark.parametrize("when", ["before_the_pass", "at_its_own_view_call"])
@pytest.mark.parametrize("field", ["_placement_dict", "_binding_dict"])
def test_pass_declines_a_foreign_key_at_any_position(field: str, when: str, tensors: int, which: int) -> None:
    """A colliding foreign key at each position of an attested dict's walk: the pass declines
    before any probe (no __eq__ called by native code); the rules accept the equal plan. Planted
    at the attestation's own view call too: for every attestation but the pass's first, that
    call is made inside rf_enter_all, whose final walk is then the only check of its dicts."""
    size = len(vars(_plan_attestations(_plan(tensors))[which])[field])
    assert size > 9  # (the setup: past the hint window)
    for position in _positions(size):
        plan = _plan(tensors)
        attestations = _plan_attestations(plan)
        assert len(attestations) == 4
        target = attestations[which]
        for attestation in attestations:  # no current cached view: the pass calls view_of
            vars(attestation).pop("_attested_view", None)
        mapping = vars(target)[field]
        planted_items = _with_foreign_key(mapping, position)
        view_call_of_target = ViewCallOf(plan, target)
        planted: list[bool] = []

        def plant() -> None:
            planted.append(True)
            mapping.clear()
            mapping.update(planted_items)

        if when == "before_the_pass":
            plant()
        watch = native_watch.NativeWatch()

        def hook(frame: Any, event: str, arg: Any) -> None:
            watch(frame, event, arg)
            if view_call_of_target(frame, event, arg) and not planted:
                plant()

        native_watch._ACTIVE.append(watch)
        try:
            result = profiled_outcome(hook, lambda: dataclasses.replace(plan))
        finally:
            native_watch._ACTIVE.pop()
        assert planted, position
        assert watch.hits == [], (position, watch.hits)
        assert not isinstance(result, tuple) and result == plan, position

"""The attestation's derived dicts are probed without the plain-dict check, and a freed entry is
read (AUDIT5, session 25).

csrc/plain_dict.h proves an *instance* dict plain before a pass probes it, but a
``RuntimeBindingAttestation`` keeps two more dicts in its (plain) instance dict,
``_placement_dict`` and ``_binding_dict`` (placement fragment id -> object), and
``revalidate_fragments`` probes both with each fragment's id (``rf_fragment``) after only
checking them exact dicts (``rf_attested_entry``). A str-subclass key whose hash collides with a
fragment id, planted in front of it (``vars(attestation)["_placement_dict"]``), runs its
``__eq__`` inside the pass (``attested_view`` likewise).

Worse, ``rf_fragment`` holds that entry ``(placement_dict, binding_dict, view)`` *borrowed* from
its private ``entry_list`` while it probes: code run by the probe of side 0 can find the pass's
private ``entry_list`` and ``attested`` (``gc.get_objects()``), clear them and so free the entry,
then allocate a tuple of its own in the freed memory (CPython's tuple free list); the probe of
side 1 then reads that tuple's items: a use after free, through ``dataclasses.replace()``.

The key channel alone is SOUND5's open xfail (tests/test_sound25_plain_dicts.py,
``test_no_foreign_code_through_derived_dicts``, 50bab8b); this file pins its worse consequence.
Closed (lead, session 25): rf_attested_entry checks both dicts' keys (pd_plain_keys) before any
probe and rf_fragment holds its entry; a regression test now.
"""

from __future__ import annotations

import dataclasses
import gc
import sys
from typing import Any

import pytest

from forge_helpers import outcome, sized_world

from mooncake.reshard.weight import TransferPlan, bind_logical_transfer_plan

_LOG: list[tuple[str, Any]] = []


class Marker(str):
    """A key of the fake binding dict: records a probe made by a pass."""

    __slots__ = ()

    def __hash__(self) -> int:
        return hash(str.split(self, "~")[0])

    def __eq__(self, other: object) -> bool:
        if sys._getframe(1).f_code.co_name == "_fast_revalidate_live":
            _LOG.append(("the pass probed the hook's own tuple", True))
        return False

    __ne__ = str.__ne__


class Colliding(str):
    """``"<pfid>~planted"``: hashes as the fragment id it is planted in front of."""

    __slots__ = ()
    hook: Any = None

    def __hash__(self) -> int:
        return hash(str.split(self, "~")[0])

    def __eq__(self, other: object) -> bool:
        if sys._getframe(1).f_code.co_name == "_fast_revalidate_live":
            _LOG.append(("foreign code inside a pass", True))
            hook, Colliding.hook = Colliding.hook, None
            if hook is not None:
                hook()
        return False

    __ne__ = str.__ne__


def _plan() -> Any:
    logical, targets, sources, _memory = sized_world(2)
    return bind_logical_transfer_plan(logical, targets, source_bindings=sources)


def _plant(mapping: dict[str, Any]) -> None:
    items = list(mapping.items())
    mapping.clear()
    for key, value in items:
        mapping[Colliding(f"{key}~planted")] = None
        mapping[key] = value


@pytest.fixture(autouse=True)
def _fresh_log() -> None:
    _LOG.clear()
    Colliding.hook = None


def test_the_pass_never_reads_a_freed_entry() -> None:
    plan = _plan()
    attestation = plan.operations[0].source.attestation
    placement_dict = vars(attestation)["_placement_dict"]
    binding_dict = vars(attestation)["_binding_dict"]
    kept: list[Any] = []

    def free_the_entry_and_take_its_memory() -> None:
        holders: list[Any] = []
        entry_id = None
        for obj in gc.get_objects():  # the pass's private entry_list and attested dict
            if type(obj) is list and any(type(e) is tuple and len(e) == 3 and e[0] is placement_dict for e in obj):
                holders.append(obj)
                entry_id = next(id(e) for e in obj if type(e) is tuple and len(e) == 3 and e[0] is placement_dict)
            elif type(obj) is dict and any(
                type(v) is tuple and len(v) == 3 and v[0] is placement_dict for v in obj.values()
            ):
                holders.append(obj)
        assert entry_id is not None
        fake_bindings = {Marker(f"{key}~marker"): None for key in binding_dict}
        fake_bindings.update(binding_dict)
        items = [dict(placement_dict), fake_bindings, None]
        for holder in holders:
            holder.clear()  # the entry's last references: it is freed here
        del holders
        for _ in range(1000):  # the next 3-tuples take the free list's head: the entry's memory
            grabbed = tuple(items)
            kept.append(grabbed)
            if id(grabbed) == entry_id:
                _LOG.append(("the freed entry's memory is the hook's tuple", True))
                break

    Colliding.hook = free_the_entry_and_take_its_memory
    _plant(placement_dict)
    assert any(type(key) is Colliding for key in placement_dict)  # (the setup ran as intended)
    outcome(lambda: dataclasses.replace(plan))
    # closed (lead, session 25): rf_attested_entry refuses the dict before any probe, so the hook
    # never runs inside the pass (and rf_fragment holds its entry besides)
    assert ("foreign code inside a pass", True) not in _LOG, _LOG
    assert ("the pass probed the hook's own tuple", True) not in _LOG, _LOG

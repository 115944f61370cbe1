"""An instance dict checked plain in one pass must not be probed unchecked by later passes
(AUDIT5 F7, session 25; fixed by SOUND5's 3488ab6, found independently).

csrc/plain_dict.h's rule is "each reader checks the dict it probes, in the pass that probes it",
because Python code can run between the passes of ``_fast_revalidate_live`` (a profile or trace
hook, or foreign code inside a pass: tests/test_audit25_value_channels.py). But
``revalidate_views`` (``rw_side``) checks each executor's instance dict with ``pd_instance_dict``
and then stores the dict itself in its rows (``(estate, key, bucket)``); ``revalidate_side``
(``rs_executor``) and ``revalidate_coverage`` (``rc_executor``) later probe that ``estate`` by
key (``rv_item``) without checking it again. A str-subclass key colliding with a field, planted
in the executor's ``__dict__`` after ``revalidate_shapes`` returned (the last pass that walks the
executors), runs its ``__eq__`` inside those later passes.

On c2c1695 every case here failed; since 3488ab6 rs_executor / rc_executor check the dict again
where they read it. Kept as regression tests: the second plants the key from foreign code inside
an earlier pass (no hook), which tests/test_sound25_plain_dicts.py's hook-based cases do not.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

import pytest

from forge_helpers import outcome, sized_world

from mooncake.reshard import _native
from mooncake.reshard.weight import TransferPlan, bind_logical_transfer_plan

_LOG: list[str] = []


class Colliding(str):
    __slots__ = ()

    def __hash__(self) -> int:
        return hash(str.split(self, "~")[0])

    def __eq__(self, other: object) -> bool:
        _LOG.append(sys._getframe(1).f_code.co_name)
        return False

    __ne__ = str.__ne__


def _plant(state: dict[str, Any], name: str) -> None:
    """A Colliding key for ``name`` in front of it, in place (the very dict object)."""
    after = [(key, state.pop(key)) for key in list(state)[list(state).index(name) :]]
    state[Colliding(f"{name}~planted")] = None
    for key, value in after:
        state[key] = value


def _plan() -> Any:
    logical, targets, sources, _memory = sized_world(2)
    return bind_logical_transfer_plan(logical, targets, source_bindings=sources)


@pytest.fixture(autouse=True)
def _fresh_log() -> None:
    _LOG.clear()


@pytest.mark.parametrize("field", ["attestation", "runtime_lease_id", "worker_id", "fragment_ids"])
def test_a_key_planted_between_the_passes_runs_no_code_inside_a_pass(field: str) -> None:
    """Planted by a profile hook when revalidate_shapes returns."""
    plan = _plan()
    executor = plan.target_executors[0]
    planted: list[bool] = []

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event == "c_return" and arg is _native.revalidate_shapes and not planted:
            planted.append(True)
            _plant(vars(executor), field)

    sys.setprofile(hook)
    try:
        result = outcome(lambda: dataclasses.replace(plan))
    finally:
        sys.setprofile(None)
    assert planted and isinstance(result, TransferPlan)
    assert "_fast_revalidate_live" not in _LOG, _LOG


class PlantingBox(tuple):  # type: ignore[type-arg]
    """A region's overlap_offset whose ``__eq__``, first called by a pass after revalidate_shapes
    (revalidate_spaces), plants the key: no hook needed."""

    __slots__ = ()
    target: Any = None

    def __eq__(self, other: object) -> bool:
        target, PlantingBox.target = PlantingBox.target, None
        if target is not None and sys._getframe(1).f_code.co_name == "_fast_revalidate_live":
            _plant(vars(target), "attestation")
        return tuple.__eq__(self, other)

    __hash__ = tuple.__hash__


def test_a_key_planted_by_foreign_code_in_an_earlier_pass_runs_no_code_in_a_later_one() -> None:
    plan = _plan()
    for op in plan.operations:
        object.__setattr__(op, "overlap_offset", PlantingBox(op.overlap_offset))
    PlantingBox.target = plan.target_executors[0]
    outcome(lambda: dataclasses.replace(plan))
    # Since the lead's r25 fix of F2 the scan declines the tuple-subclass box before any pass
    # compares it, so no foreign code runs to plant the key (either way, none may run later)
    assert PlantingBox.target is not None
    assert "_fast_revalidate_live" not in _LOG, _LOG

"""MEMO36 (session 36): ``_native.revalidate_shapes`` (and ``revalidate_views``' executor reads,
rw_side) take each field's value in the walk that checks the instance dict's keys
(plain_dict.h pd_instance_values), by identity with the interned field name, and look up any
name not met by identity.

The call is captured from a real ``dataclasses.replace`` of a bound plan and then repeated on
edited instance dicts:
- keys re-made as equal strs that are other objects (not interned): the lookup finds them, the
  answer is the unedited one (True);
- the same, with one checked field made the wrong kind under such a key: False, as with the
  interned key (oracle: the same edit under the interned key);
- a str subclass key with the hash of a field name whose ``__eq__`` records that it ran: False,
  and ``__eq__`` never runs (the walk refuses the dict before any probe).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forge_helpers import COLLIDED_CALLS as _CALLS
from forge_helpers import CollidingKey as _Colliding
from forge_helpers import rekey_dict as _rekey
from forge_helpers import restore_dict as _restore
from forge_helpers import replace_pass_arguments, sized_world

from mooncake.reshard import _native
from mooncake.reshard.weight import bind_logical_transfer_plan



class _Text(str):
    pass


def _captured(name: str = "revalidate_shapes") -> tuple[Any, tuple[Any, ...]]:
    """A bound plan and the arguments of the pass ``name`` call its replace() makes."""
    logical, targets, sources, _memory = sized_world(2)
    plan = bind_logical_transfer_plan(logical, targets, source_bindings=sources)
    return plan, replace_pass_arguments(plan, name)


def _objects(plan: Any) -> dict[str, tuple[Any, str, Any]]:
    """Objects whose instance dict the walk reads: (object, a checked field, a wrong value)."""
    placement = plan.target_placement
    part = placement.parts[0]
    tensor = part.tensors[0]
    executor = plan.target_executors[-1]
    evidence = executor.attestation.evidence
    return {
        "placement": (placement, "placement_id", 7),
        "part": (part, "participant_id", 7),
        "rank": (part.rank, "tp", "0"),
        "tensor": (tensor, "dtype", 7),
        "axis": (tensor.parallel_axes[0], "kind", 7),
        "evidence": (evidence, "lease_id", 7),
        "attestation": (executor.attestation, "evidence", None),
        "executor": (executor, "attestation", None),
        "source-evidence": (plan.source_executors[0].attestation.evidence, "generation", "1"),
    }


def test_fresh_keys_are_found():
    plan, args = _captured()
    assert _native.revalidate_shapes(*args) is True
    for name, (obj, _field, _wrong) in _objects(plan).items():
        items = _rekey(obj, True)
        try:
            assert _native.revalidate_shapes(*args) is True, name
        finally:
            _restore(obj, items)
    assert _native.revalidate_shapes(*args) is True


def test_wrong_kind_under_fresh_key_is_declined_as_under_interned():
    plan, args = _captured()
    for name, (obj, field, wrong) in _objects(plan).items():
        answers = []
        for fresh in (False, True):
            items = _rekey(obj, fresh, edit=(field, wrong))
            try:
                answers.append(_native.revalidate_shapes(*args))
            finally:
                _restore(obj, items)
        assert answers == [False, False], (name, answers)
    assert _native.revalidate_shapes(*args) is True


def test_colliding_key_declines_without_running_code():
    plan, args = _captured()
    for name, (obj, field, _wrong) in _objects(plan).items():
        for fresh in (False, True):
            items = _rekey(obj, fresh, planted=_Colliding(field))
            _CALLS.clear()  # (planting it compared it with the field's key)
            try:
                assert _native.revalidate_shapes(*args) is False, name
            finally:
                _restore(obj, items)
            assert _CALLS == [], name
    assert _native.revalidate_shapes(*args) is True


_NAMES = sorted(("placement", "part", "rank", "tensor", "axis", "evidence", "attestation", "executor", "source-evidence"))


@settings(max_examples=40, deadline=None)
@given(
    fresh=st.sets(st.sampled_from(_NAMES)),
    wrong=st.one_of(st.none(), st.sampled_from(_NAMES)),
    planted=st.one_of(st.none(), st.sampled_from(_NAMES)),
)
def test_any_mix_agrees_with_interned_keys(fresh, wrong, planted):
    # oracle: the same edits with every key interned (the lookup the pass made before MEMO36)
    plan, args = _captured()
    objects = _objects(plan)
    answers = []
    for use_fresh in (False, True):
        saved = []
        try:
            for name in _NAMES:
                obj, field, bad = objects[name]
                edit = (field, bad) if name == wrong else None
                plant = _Colliding(field) if name == planted else None
                if edit is None and plant is None and not (use_fresh and name in fresh):
                    continue
                saved.append((obj, _rekey(obj, use_fresh and name in fresh, edit, plant)))
            _CALLS.clear()  # (planting compared the key with the field's key)
            answers.append(_native.revalidate_shapes(*args))
            assert _CALLS == []
        finally:
            for obj, items in reversed(saved):
                _restore(obj, items)
    assert answers[0] == answers[1]
    if wrong is None and planted is None:
        assert answers[0] is True
    elif planted is not None:
        assert answers[0] is False


def _views_outcome(args: tuple[Any, ...]) -> Any:
    try:
        result = _native.revalidate_views(*args)
    except Exception as error:  # noqa: BLE001 -- the outcome is compared, whatever it is
        return ("raised", type(error).__name__, str(error))
    return result if result is None else ("views", len(result))


@pytest.mark.parametrize("side", ("source", "target"))
@pytest.mark.parametrize("edit", ("fresh", "wrong", "fresh-wrong", "planted", "fresh-planted"))
def test_views_executor_reads_agree_with_interned_keys(side, edit):
    # rw_side reads every executor's fields in the walk; oracle: the interned-key dict
    plan, args = _captured("revalidate_views")
    unedited = _views_outcome(args)
    assert unedited is not None and unedited[0] == "views"
    executors = plan.source_executors if side == "source" else plan.target_executors
    executor = executors[-1]
    fresh = edit.startswith("fresh")
    wrong = ("worker_id", _Text(executor.worker_id)) if "wrong" in edit else None
    planted = _Colliding("worker_id") if "planted" in edit else None
    answers = []
    for use_fresh in (False, True) if fresh else (False,):
        items = _rekey(executor, use_fresh, wrong, planted)
        _CALLS.clear()  # (planting compared the key with the field's key)
        try:
            answers.append(_views_outcome(args))
            assert _CALLS == []
        finally:
            _restore(executor, items)
    assert len(set(answers)) == 1, answers
    if edit == "fresh":
        assert answers[0] == unedited
    elif "wrong" in edit:
        assert answers[0] is None  # a str subclass field: declined
    else:
        assert answers[0] is None or answers[0][0] == "raised"  # not a plain dict: never accepted
    assert _views_outcome(args) == unedited

"""MEMO36 (session 36): ``_native.revalidate_shapes`` takes each field's value in the walk that
checks the instance dict's keys, by identity with the interned field name, and looks up any
name it did not meet by identity.

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

import dataclasses
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from forge_helpers import sized_world

from mooncake.reshard import _native
from mooncake.reshard.weight import bind_logical_transfer_plan

_CALLS: list[int] = []


class _Colliding(str):
    """A key equal to nothing, hashed as ``name``; its ``__eq__`` records that it ran."""

    def __new__(cls, name: str) -> "_Colliding":
        made = super().__new__(cls, "colliding-" + name)
        made._target = hash(name)  # type: ignore[attr-defined]
        return made

    def __hash__(self) -> int:
        return self._target  # type: ignore[attr-defined,no-any-return]

    def __eq__(self, other: object) -> bool:
        _CALLS.append(1)
        return False


def _captured() -> tuple[Any, tuple[Any, ...]]:
    """A bound plan and the arguments of the revalidate_shapes call its replace() makes."""
    logical, targets, sources, _memory = sized_world(2)
    plan = bind_logical_transfer_plan(logical, targets, source_bindings=sources)
    seen: list[tuple[Any, ...]] = []
    real = _native.revalidate_shapes

    def spy(*args: Any) -> Any:
        seen.append(args)
        return real(*args)

    _native.revalidate_shapes = spy
    try:
        dataclasses.replace(plan)
    finally:
        _native.revalidate_shapes = real
    assert seen, "the fast path calls revalidate_shapes"
    return plan, seen[-1]


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


def _rekey(obj: Any, fresh: bool, edit: Any = None, planted: Any = None) -> dict[Any, Any]:
    """Re-make obj's instance dict: keys as equal non-identical strs when fresh; edit = (name,
    value) set under that key; planted: an extra key. Returns the original items to restore."""
    d = obj.__dict__
    items = dict(d)
    d.clear()
    for key, value in items.items():
        new_key = "".join(list(key)) if fresh else key
        if fresh:
            assert new_key == key and new_key is not key
        if edit is not None and key == edit[0]:
            value = edit[1]
        d[new_key] = value
    if planted is not None:
        d[planted] = None
    return items


def _restore(obj: Any, items: dict[Any, Any]) -> None:
    d = obj.__dict__
    d.clear()
    d.update(items)


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

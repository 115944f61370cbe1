"""``revalidate_side``'s comparison of an executor's snapshots with the attested field dicts.

A replaced plan's views carry no snapshot objects: each executor snapshot is compared with the
attested field dict of its fragment (``_typed_snapshot_matches``: both exactly typed, then
``==``). The C comparison takes an attested dict holding exactly the field names in field order
in one walk, type-checks every value of both first, and compares only the pairs that are two
objects (an identical pair is equal). These tests edit the attested dicts the C side check
reads (the views' ``_rows``, for the duration of the call only) and check its answer: an equal
value of another type (float, bool, subclasses, a list, a tuple with such an item) is unsure
(None), an equal exactly typed copy is accepted, an unequal typed value is unsure; in field
order and in another key order (the per-field lookup path)."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mooncake.reshard import _native
from mooncake.reshard.weight._planner import bound_contracts as bc
from test_native_revalidate_typed_snapshots import _BOUND, IntSub, StrSub, TupleSub

_KINDS = dict(bc._SNAPSHOT_TYPES)


def _copy_int(value: int) -> int:
    return int(str(value))  # a new object for an int outside the small-int cache


def _copy_str(value: str) -> str:
    return "".join([value[:1], value[1:]]) if len(value) > 1 else value


def _copy_ints(value: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(list(value)) if value else value


# variant -> (make(value) or None when it does not apply, expected C answer)
_VARIANTS: dict[str, dict[str, tuple[Callable[[Any], Optional[Any]], Optional[bool]]]] = {
    "str": {
        "copy": (_copy_str, True),
        "str-subclass": (StrSub, None),
        "other": (lambda v: v + "x", None),
    },
    "int": {
        "copy": (_copy_int, True),
        "float": (float, None),
        "bool": (lambda v: bool(v) if v in (0, 1) else None, None),
        "int-subclass": (IntSub, None),
        "other": (lambda v: v + 1, None),
    },
    "ints": {
        "copy": (_copy_ints, True),
        "tuple-subclass": (TupleSub, None),
        "list": (list, None),
        "float-item": (lambda v: (float(v[0]),) + v[1:] if v else None, None),
        "int-subclass-last-item": (lambda v: v[:-1] + (IntSub(v[-1]),) if v else None, None),
        "other": (lambda v: v + (1,), None),
    },
}

_CASES = [(name, variant) for name, kind in bc._SNAPSHOT_TYPES for variant in _VARIANTS[kind]]
# The values the plan's snapshots (equal to the attested ones) hold per field: "bool" applies only
# to a field holding 0 or 1, so the exhaustive test is not parametrized with the others.
_HELD = {
    name: {getattr(snapshot, name) for executor in _BOUND.source_executors + _BOUND.target_executors
           for snapshot in executor.fragment_snapshots}
    for name, _ in bc._SNAPSHOT_TYPES
}
_APPLICABLE_CASES = [(name, variant) for name, variant in _CASES if variant != "bool" or _HELD[name] & {0, 1}]


def _edited_rows(rows: Any, worker_pick: int, row_pick: int, name: str, variant: str, reorder: bool) -> Any:
    """A copy of a view's ``(expected_by_pfid, rows_by_worker)`` with one attested dict edited
    (the same new dict under its pfid and in its worker's row), or None when the variant does
    not apply to that dict's value."""
    expected_by_pfid, rows_by_worker = rows
    workers = sorted(rows_by_worker)
    worker = workers[worker_pick % len(workers)]
    pairs = list(rows_by_worker[worker])
    index = row_pick % len(pairs)
    runtime_id, state = pairs[index]
    make, _ = _VARIANTS[_KINDS[name]][variant]
    value = make(state[name])
    if value is None:
        return None
    edited = {**state, name: value}
    if reorder:  # the same items, another key order: looked up field by field
        edited = dict(reversed(list(edited.items())))
    pairs[index] = (runtime_id, edited)
    by_pfid = {pfid: (edited if found is state else found) for pfid, found in expected_by_pfid.items()}
    return (by_pfid, {**rows_by_worker, worker: tuple(pairs)})


def _c_answers(
    monkeypatch: pytest.MonkeyPatch, call_pick: int, entry_pick: int, edit: Callable[[Any], Any]
) -> tuple[list[Any], bool]:
    """The C side check's answers during ``replace(_BOUND)``, call ``call_pick`` (0: source,
    1: target) run with one view's rows edited by ``edit`` (restored after the call), and
    whether the edit applied."""
    real = _native.revalidate_side
    answers: list[Any] = []
    applied = [False]

    def spy(*args: Any) -> Any:
        views = [entry[2] for entry in args[6].values()]
        views = [view for view in views if view._rows is not None]
        if len(answers) != call_pick or not views:
            answers.append(real(*args))
            return answers[-1]
        view = views[entry_pick % len(views)]
        original = view._rows
        edited = edit(original)
        if edited is None:
            answers.append(real(*args))
            return answers[-1]
        applied[0] = True
        view._rows = edited
        try:
            answers.append(real(*args))
        finally:
            view._rows = original
        return answers[-1]

    monkeypatch.setattr(_native, "revalidate_side", spy)
    assert dataclasses.replace(_BOUND) == _BOUND  # (the fallback and the rules read the real rows)
    monkeypatch.undo()
    return answers, applied[0]


@pytest.mark.parametrize("reorder", (False, True))
@pytest.mark.parametrize(("name", "variant"), _APPLICABLE_CASES)
def test_attested_value_variants(name: str, variant: str, reorder: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    want = _VARIANTS[_KINDS[name]][variant][1]
    tried = 0
    for call_pick in (0, 1):
        for entry_pick in range(8):
            for worker_pick, row_pick in ((0, 0), (1, -1)):
                answers, applied = _c_answers(
                    monkeypatch,
                    call_pick,
                    entry_pick,
                    lambda rows: _edited_rows(rows, worker_pick, row_pick, name, variant, reorder),
                )
                assert len(answers) == 2
                if not applied:
                    continue
                tried += 1
                # A view of the other side is not read by this call: then it accepts.
                assert answers[call_pick] in (want, True), (call_pick, entry_pick, answers)
                if want is None and answers[call_pick] is True:
                    # accepted: the edited view must belong to the other side; the same edit on
                    # the other call is then read and refused
                    other, applied_other = _c_answers(
                        monkeypatch,
                        1 - call_pick,
                        entry_pick,
                        lambda rows: _edited_rows(rows, worker_pick, row_pick, name, variant, reorder),
                    )
                    assert applied_other and other[1 - call_pick] is None, (call_pick, entry_pick, other)
    assert tried


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(
    call_pick=st.integers(0, 1),
    entry_pick=st.integers(0, 15),
    worker_pick=st.integers(0, 7),
    row_pick=st.integers(0, 7),
    case=st.sampled_from(_CASES),
    reorder=st.booleans(),
)
def test_attested_edits_never_accept_an_untyped_or_unequal_value(
    call_pick: int, entry_pick: int, worker_pick: int, row_pick: int, case: tuple[str, str], reorder: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name, variant = case
    want = _VARIANTS[_KINDS[name]][variant][1]
    answers, applied = _c_answers(
        monkeypatch, call_pick, entry_pick, lambda rows: _edited_rows(rows, worker_pick, row_pick, name, variant, reorder)
    )
    assert len(answers) == 2
    if applied and want is True:
        assert answers == [True, True]
    if not applied:
        assert answers == [True, True]

"""revalidate_coverage's executor rows reuse a class proof and a dict walk only while no Python code ran (session 38).

``rc_executor`` (csrc/revalidate.c) takes an attestation's placement and evidence, the evidence's
participant, instance and lease ids and the part's rank each in the one walk that checks the
object's instance dict plain, once the object's class is proved inert for those names
(``rc_class_inert``), and reads the view's ``evidence_ids_by_worker`` slot without counting it as
a point where code runs. The proofs and the taken values are reused while ``code_epoch`` has not
moved: it moves before every comparison of an operand that is not known inert, every getattr of a
class not proved inert, every probe of a table not known to hold only exact keys.

Here an executor field compared inside the pass is swapped (right as the pass is called, after
the passes that check field kinds) for an equal str / tuple subclass whose ``!=`` edits the state
once, at its ``fire_at``-th call: an evidence's dict, the evidence class (a property), the
attestation's evidence, the part class's ``rank``, the view class's slot. The C pass must decide as
its Python mirror (``bound_contracts._fast_target_coverage``, the same reads in the same order)
decides under the same edit: a build that kept a proof or a taken value across such a comparison
would accept a plan whose later rows the mirror refuses.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Callable

import pytest

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank
from mooncake.reshard.weight._planner import bound_contracts
from mooncake.reshard.weight._planner.attestation import RuntimeBindingEvidence
from mooncake.reshard.weight.part import WeightPlacementPart

from forge_helpers import outcome
from test_sound25_plain_dicts import _plan, _same

_REAL_COVERAGE = _native.revalidate_coverage


class _Fired:
    """The shared call count of one case's triggers and the edit made at call ``fire_at``."""

    def __init__(self, fire_at: int, edit: Callable[[], None]) -> None:
        self.calls = 0
        self.fire_at = fire_at
        self.edit = edit
        self.fired = False
        self.armed = True

    def tick(self) -> None:
        if not self.armed:
            return
        self.calls += 1
        if self.calls == self.fire_at and not self.fired:
            self.fired = True
            self.edit()


class _StrTrigger(str):
    fired: _Fired

    def __ne__(self, other: object) -> bool:
        self.fired.tick()
        return str.__ne__(self, other)

    def __eq__(self, other: object) -> bool:
        return str.__eq__(self, other)

    __hash__ = str.__hash__


class _TupleTrigger(tuple):  # type: ignore[type-arg]
    fired: _Fired

    def __ne__(self, other: object) -> bool:
        self.fired.tick()
        return tuple.__ne__(self, other)

    def __eq__(self, other: object) -> bool:
        return tuple.__eq__(self, other)

    __hash__ = tuple.__hash__


def _trigger(value: Any, fired: _Fired) -> Any:
    made = _TupleTrigger(value) if type(value) is tuple else _StrTrigger(value)
    made.fired = fired
    return made


def _edits(plan: Any, undo: list[Callable[[], None]]) -> dict[str, Callable[[], None]]:
    """Edits of the state the rows read after the trigger fired; each makes every row refused."""
    executors = plan.target_executors

    def evidence_dict() -> None:
        for executor in executors:
            vars(executor.attestation.evidence)["lease_id"] = "forged-lease"

    def evidence_class() -> None:
        RuntimeBindingEvidence.lease_id = property(lambda self: "forged-lease")  # type: ignore[attr-defined]
        undo.append(lambda: delattr(RuntimeBindingEvidence, "lease_id"))

    def attestation_evidence() -> None:
        for executor in executors:
            attestation = executor.attestation
            forged = copy.copy(attestation.evidence)
            vars(forged)["instance_id"] = "forged-instance"
            vars(attestation)["evidence"] = forged

    def part_class() -> None:
        WeightPlacementPart.rank = property(lambda self: ParallelRank(dp=7))  # type: ignore[attr-defined]
        undo.append(lambda: delattr(WeightPlacementPart, "rank"))

    def view_class() -> None:
        slot = bound_contracts._AttestedView.__dict__["evidence_ids_by_worker"]
        bound_contracts._AttestedView.evidence_ids_by_worker = property(lambda self: {})  # type: ignore[assignment]
        undo.append(lambda: setattr(bound_contracts._AttestedView, "evidence_ids_by_worker", slot))

    return {
        "evidence_dict": evidence_dict,
        "evidence_class": evidence_class,
        "attestation_evidence": attestation_evidence,
        "part_class": part_class,
        "view_class": view_class,
    }


_EDITS = ("evidence_dict", "evidence_class", "attestation_evidence", "part_class", "view_class")
# executor fields the row compares: before the attestation's reads (placement_id), between them
# (instance_id), after them (runtime_lease_id, fragment_ids: the next row's reads)
_TRIGGERS = ("placement_id", "instance_id", "runtime_lease_id", "fragment_ids")


def _case(field: str, edit: str, fire_at: int, use_c: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, bool]:
    """replace()'s outcome with ``field`` of every target executor swapped for a trigger as
    revalidate_coverage is called; the C pass runs (use_c) or declines to its Python mirror."""
    plan = _plan()
    undo: list[Callable[[], None]] = []
    fired = _Fired(fire_at, _edits(plan, undo)[edit])

    def coverage(*args: Any) -> Any:
        for executor in plan.target_executors:
            state = vars(executor)
            state[field] = _trigger(state[field], fired)
        return _REAL_COVERAGE(*args) if use_c else None

    try:
        with monkeypatch.context() as patch:
            patch.setattr(_native, "revalidate_coverage", coverage)
            result = outcome(lambda: dataclasses.replace(plan))
    finally:
        for step in reversed(undo):
            step()
    return result, fired.fired


def test_the_plan_has_several_target_rows() -> None:
    assert len(_plan().target_executors) >= 2


@pytest.mark.parametrize("fire_at", [1, 2])
@pytest.mark.parametrize("edit", _EDITS)
@pytest.mark.parametrize("field", _TRIGGERS)
def test_an_edit_made_by_a_comparison_is_seen_by_the_later_reads(
    field: str, edit: str, fire_at: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected, mirror_fired = _case(field, edit, fire_at, False, monkeypatch)
    result, fired = _case(field, edit, fire_at, True, monkeypatch)
    assert fired and mirror_fired  # the edit was made inside the coverage check
    _same(result, expected)


def test_the_edits_are_refused_when_made_before_the_rows() -> None:
    """Each edit, made before any row is read, makes the plan refused (so the cases above test
    something: a row read after the edit refuses)."""
    for edit in _EDITS:
        plan = _plan()
        undo: list[Callable[[], None]] = []
        try:
            _edits(plan, undo)[edit]()
            result = outcome(lambda: dataclasses.replace(plan))
        finally:
            for step in reversed(undo):
                step()
        assert type(result) is tuple, (edit, result)


def test_unedited_triggers_keep_the_fast_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Triggers that edit nothing: the C pass still accepts (the comparisons moved the epoch, the
    reads after them were made again)."""
    for field in _TRIGGERS:
        plan = _plan()
        fired = _Fired(1, lambda: None)
        answers: list[Any] = []

        def coverage(*args: Any) -> Any:
            for executor in plan.target_executors:
                state = vars(executor)
                state[field] = _trigger(state[field], fired)
            answers.append(_REAL_COVERAGE(*args))
            return answers[-1]

        with monkeypatch.context() as patch:
            patch.setattr(_native, "revalidate_coverage", coverage)
            result = outcome(lambda: dataclasses.replace(plan))
        assert answers == [True], (field, answers)
        assert type(result) is type(plan)


class _CollidingInt(int):
    """An int key hashing as ``target`` (another int) whose ``==`` (run by a probe of the table
    holding it for ``target``) counts a call and is False."""

    fired: _Fired
    target: int

    def __hash__(self) -> int:
        return hash(self.target)

    def __eq__(self, other: object) -> bool:
        self.fired.tick()
        return False

    def __ne__(self, other: object) -> bool:
        return True


def _colliding(target: int, fired: _Fired) -> _CollidingInt:
    made = _CollidingInt(-1 - abs(target))
    made.fired, made.target = fired, target
    return made


@pytest.mark.parametrize("edit", ("evidence_class", "part_class", "evidence_dict"))
# (``attested`` only: a dict's probe order for equal hashes is its insertion order, so the
# planted key is compared first in both runs; a set's order can flip when it is resized, so a
# key planted in ``used`` fires at another row in the C run than in the mirror's)
@pytest.mark.parametrize("table", ("attested",))
def test_an_edit_made_by_a_table_probe_is_seen_by_the_later_rows(
    table: str, edit: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key planted in the ``attested`` dict / ``used`` set (arguments of the pass) colliding
    with the first row's probe: its ``==`` runs in that probe and edits; the next rows read
    again (the tables are checked to hold exact ints before the epoch is kept)."""
    outcomes = []
    for use_c in (False, True):
        plan = _plan()
        undo: list[Callable[[], None]] = []
        fired = _Fired(1, _edits(plan, undo)[edit])

        def coverage(*args: Any) -> Any:
            attested, used = args[5], args[6]
            # every row's probe key: id(attestation) in attested, id(estate) in used; the
            # planted key first in the probe sequence (the real one stored again after it)
            fired.armed = False
            for executor in plan.target_executors:
                if table == "attested":
                    target = id(executor.attestation)
                    entry = attested.pop(target)
                    attested[_colliding(target, fired)] = entry
                    attested[target] = entry
                else:
                    target = id(vars(executor))
                    used.discard(target)
                    used.add(_colliding(target, fired))
                    used.add(target)
            fired.armed = True
            return _REAL_COVERAGE(*args) if use_c else None

        try:
            with monkeypatch.context() as patch:
                patch.setattr(_native, "revalidate_coverage", coverage)
                outcomes.append((outcome(lambda: dataclasses.replace(plan)), fired.fired))
        finally:
            for step in reversed(undo):
                step()
    (expected, mirror_fired), (result, fired_in_c) = outcomes
    assert mirror_fired and fired_in_c
    _same(result, expected)

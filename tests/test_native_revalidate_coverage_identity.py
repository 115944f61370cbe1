"""revalidate_coverage's identity keying (fragment_type=PlacementFragment): the boxes filed by
placement fragment object must decide exactly what the boxes filed by (participant,
placement_fragment_id) decide (the same call without fragment_type), and what the Python
version (bound_contracts._fast_target_coverage) decides: duplicate ids on distinct objects,
equal copies, objects no part lists, forged fields and subclasses decline to the string rule.
(test_native_revalidate's coverage property test compares both forms on mutated plans.)"""

from __future__ import annotations

import copy
from typing import Any, Optional

import pytest

from spec_helpers import field_state, store_state, pop_field

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank
from mooncake.reshard.weight._planner import bound_contracts as bc
from mooncake.reshard.weight.types import PlacementFragment

from test_native_revalidate import _PLANS, _coverage_tables

_SPLIT = ("split", "unpickled-split")


def _python(tables: tuple[Any, ...]) -> Optional[bool]:
    try:
        return True if bc._fast_target_coverage(*tables) else None
    except Exception:
        return None


def _decide(tables: tuple[Any, ...]) -> Any:
    """(identity keyed, string keyed) answers; both must be equal, and True only when the
    Python version accepts."""
    answers = []
    for extra in ((ParallelRank, PlacementFragment), (ParallelRank, None), ()):
        try:
            answers.append(_native.revalidate_coverage(*tables, *extra))
        except Exception as error:  # the caller declines on any exception
            answers.append(type(error))
    assert answers[0] is answers[1] is answers[2], answers
    if answers[0] is True:
        assert _python(tables) is True
    return answers[0]


def _tables(name: str) -> list[Any]:
    tables = _coverage_tables(_PLANS[name])
    assert tables is not None
    return list(tables)


@pytest.mark.parametrize("name", _SPLIT)
def test_genuine_plans_accept(name: str) -> None:
    tables = _tables(name)
    placement, frags, target_of = tables[0], tables[1], tables[2]
    # the identity keying applies: every operation's placement fragment is a part's object
    listed = {id(f) for part in placement.parts for f in part.fragments}
    assert all(id(frags[p].placement) in listed for p in target_of)
    assert _decide(tuple(tables)) is True


def _forged_placement(fragment: Any, **changes: Any) -> Any:
    forged = copy.copy(fragment)
    for name, value in changes.items():
        object.__setattr__(forged, name, value)
    return forged


@pytest.mark.parametrize("name", _SPLIT)
def test_duplicate_ids_on_distinct_objects(name: str) -> None:
    """Two distinct fragments of one part forged to one id: the string rule merges their boxes
    (not whole: None); the identity keying must not accept (its per-part id set)."""
    tables = _tables(name)
    placement = tables[0]
    for index, part in enumerate(placement.parts):
        if len(part.fragments) < 2:
            continue
        first, second = part.fragments[0], part.fragments[1]
        saved = second.placement_fragment_id
        object.__setattr__(second, "placement_fragment_id", first.placement_fragment_id)
        try:
            assert _decide(tuple(tables)) is None
        finally:
            object.__setattr__(second, "placement_fragment_id", saved)
        assert _decide(tuple(tables)) is True
        break
    else:
        pytest.skip("no part with two fragments")


@pytest.mark.parametrize("name", _SPLIT)
def test_fragment_listed_twice(name: str) -> None:
    """A part listing one object twice (forged in place: the attested placement stays the
    plan's): both lookups find the same single box (True)."""
    tables = _tables(name)
    part = tables[0].parts[0]
    saved = part.fragments
    object.__setattr__(part, "fragments", saved + saved[:1])
    try:
        assert _decide(tuple(tables)) is True
    finally:
        object.__setattr__(part, "fragments", saved)


@pytest.mark.parametrize("name", _SPLIT)
@pytest.mark.parametrize("at", [0, -1])
def test_equal_copy_as_the_operation_placement(name: str, at: int) -> None:
    """An operation whose bound fragment carries an equal copy of the part's fragment: the
    string keys still match it (True); the object is not the part's (identity falls back)."""
    tables = _tables(name)
    frags, target_of = list(tables[1]), tables[2]
    position = target_of[at]
    bound = copy.copy(frags[position])
    object.__setattr__(bound, "placement", copy.copy(bound.placement))
    frags[position] = bound
    tables[1] = frags
    assert _decide(tuple(tables)) is True


@pytest.mark.parametrize("name", _SPLIT)
def test_extra_object_with_a_listed_id(name: str) -> None:
    """One more operation whose placement fragment is a distinct object with a listed
    fragment's participant and id: the string rule files both boxes under one member (None);
    every listed object is still found once, so only 'every filed object met' declines."""
    tables = _tables(name)
    frags, target_of, boxes = list(tables[1]), list(tables[2]), list(tables[3])
    position = target_of[0]
    extra = copy.copy(frags[position])
    object.__setattr__(extra, "placement", copy.copy(extra.placement))
    frags.append(extra)
    target_of.append(len(frags) - 1)
    boxes.append(boxes[0])
    tables[1:4] = [frags, target_of, boxes]
    assert _decide(tuple(tables)) is None
    assert _python(tuple(tables)) is None


@pytest.mark.parametrize("name", _SPLIT)
def test_one_object_under_two_operations(name: str) -> None:
    """Two operations on one placement fragment object (two bound fragments): two boxes in its
    member (None)."""
    tables = _tables(name)
    frags, target_of, boxes = list(tables[1]), list(tables[2]), list(tables[3])
    extra = copy.copy(frags[target_of[0]])
    frags.append(extra)
    target_of.append(len(frags) - 1)
    boxes.append(boxes[0])
    tables[1:4] = [frags, target_of, boxes]
    assert _decide(tuple(tables)) is None


@pytest.mark.parametrize("name", _SPLIT)
def test_one_object_under_two_participants(name: str) -> None:
    """An operation whose attestation names another participant but whose placement fragment
    is the object another participant's operation filed: the identity keying falls back."""
    tables = _tables(name)
    frags, target_of, boxes = list(tables[1]), list(tables[2]), list(tables[3])
    first = frags[target_of[0]]
    other = next(
        frags[p] for p in target_of
        if frags[p].attestation.evidence.participant_id != first.attestation.evidence.participant_id
    )
    extra = copy.copy(other)
    object.__setattr__(extra, "placement", first.placement)
    frags.append(extra)
    target_of.append(len(frags) - 1)
    boxes.append(boxes[0])
    tables[1:4] = [frags, target_of, boxes]
    _decide(tuple(tables))


class _FragmentSubclass(PlacementFragment):
    __slots__ = ()  # (the class's C layout: __class__ assignment needs the same layout)


class _RenamingSubclass(PlacementFragment):
    __slots__ = ()  # (the class's C layout: __class__ assignment needs the same layout)

    @property  # type: ignore[misc]
    def placement_fragment_id(self) -> str:  # the attribute read differs from the state
        return "renamed"


@pytest.mark.parametrize("name", _SPLIT)
@pytest.mark.parametrize("cls", [_FragmentSubclass, _RenamingSubclass])
@pytest.mark.parametrize("at", [0, -1])
def test_subclass_fragments(name: str, cls: type, at: int) -> None:
    tables = _tables(name)
    fragment = tables[0].parts[at].fragments[0]
    saved = fragment.__class__
    object.__setattr__(fragment, "__class__", cls)
    try:
        # the operation's placement is the same object: its member and the lookup both read
        # the attribute (the property), so the string rule accepts; identity declines to it
        assert _decide(tuple(tables)) is True
    finally:
        object.__setattr__(fragment, "__class__", saved)


@pytest.mark.parametrize("name", _SPLIT)
@pytest.mark.parametrize(
    "field, value",
    [
        ("placement_fragment_id", None),
        ("placement_fragment_id", 7),
        ("placement_fragment_id", "other"),
        ("global_offset", ()),
        ("global_offset", (0, 10**30)),
        ("local_shape", (1, 1)),
        ("local_shape", [4, 2]),
    ],
)
@pytest.mark.parametrize("at", [0, -1])
def test_forged_fields(name: str, field: str, value: Any, at: int) -> None:
    tables = _tables(name)
    fragment = tables[0].parts[at].fragments[-1]
    saved = field_state(fragment)[field]
    object.__setattr__(fragment, field, value)
    try:
        # the operation's placement is this very object: a forged id is read for its member
        # and for the lookup alike (still whole); a forged box is not the operation's
        expected = True if field == "placement_fragment_id" else None
        assert _decide(tuple(tables)) is expected
    finally:
        object.__setattr__(fragment, field, saved)


@pytest.mark.parametrize("name", _SPLIT)
def test_missing_field(name: str) -> None:
    tables = _tables(name)
    fragment = tables[0].parts[0].fragments[0]
    saved = pop_field(fragment, "local_shape")
    try:
        assert _decide(tuple(tables)) in (None, AttributeError)
    finally:
        store_state(fragment, {"local_shape": saved})


def test_fragment_type_argument() -> None:
    tables = _tables("split")
    for bad in (1, "PlacementFragment", object()):
        with pytest.raises(TypeError):
            _native.revalidate_coverage(*tables, ParallelRank, bad)
    # Another type: no fragment is exactly it (the string rule decides).
    assert _native.revalidate_coverage(*tables, ParallelRank, int) is True
    assert _native.revalidate_coverage(*tables, None, PlacementFragment) is True

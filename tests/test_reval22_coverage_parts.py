"""Session 22 (REVAL2): ``revalidate_coverage``'s identity keying on large parts.

The per-part work of the identity keying finds every fragment's filed entry first (by address,
in list order) and keeps the part's distinct placement fragment ids in a table of its own,
sized for the part, instead of a set. Small plans fit in one probe sequence and under the
look-ahead distances; these parts have hundreds of fragments. Duplicate ids on distinct
objects, at several distances within one part and across the table's probe sequences, must
decline like the string rule, and an object listed twice must be found whole (as the string
rule finds it); both box forms (the scan's box list and the operations tuple) agree.
"""

from __future__ import annotations

from typing import Any

import pytest

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank
from mooncake.reshard.weight.types import PlacementFragment

from test_native_revalidate import _bound_plan, _coverage_tables
from test_native_revalidate_coverage_identity import _decide as _decide_list

_TENSORS = tuple(f"tensor-{i:03d}" for i in range(600))


@pytest.fixture(scope="module")
def large() -> tuple[Any, list[Any]]:
    plan = _bound_plan(tensors=_TENSORS, target_tp=4, shape=(4, 8))  # whole target fragments
    tables = _coverage_tables(plan)
    assert tables is not None
    return plan, list(tables)


def _forms(plan: Any, tables: list[Any]) -> list[tuple[Any, ...]]:
    """The tables with the scan's box list, and with the operations tuple in its place."""
    regions = list(tables)
    regions[3] = plan.operations
    return [tuple(tables), tuple(regions)]


def _decide(form: tuple[Any, ...]) -> Any:
    """The list form: identity keyed, string keyed and default answers equal, True only when
    the Python version accepts (test_native_revalidate_coverage_identity). The operations
    form (which the Python version does not take): its three answers equal the list form's."""
    if type(form[3]) is list:
        return _decide_list(form)
    listed = list(form)
    listed[3] = [(op.overlap_offset, op.overlap_shape) for op in form[3]]
    expected = _decide_list(tuple(listed))
    for extra in ((ParallelRank, PlacementFragment), (ParallelRank, None), ()):
        assert _native.revalidate_coverage(*form, *extra) is expected
    return expected


def _largest_part(tables: list[Any]) -> Any:
    return max(tables[0].parts, key=lambda part: len(part.fragments))


def test_large_parts_accept(large: tuple[Any, list[Any]]) -> None:
    plan, tables = large
    assert len(_largest_part(tables).fragments) >= 200  # past every look-ahead distance
    for form in _forms(plan, tables):
        assert _decide(form) is True


@pytest.mark.parametrize("pair", [(0, 1), (0, -1), (5, 18), (40, 47), (-2, -1), (100, 300)])
def test_duplicate_ids_decline(large: tuple[Any, list[Any]], pair: tuple[int, int]) -> None:
    """Two distinct fragments of one large part forged to one id: the string rule merges their
    boxes (not whole: None); the identity keying must not accept, wherever the two are."""
    plan, tables = large
    fragments = _largest_part(tables).fragments
    first, second = fragments[pair[0]], fragments[pair[1]]
    assert first is not second
    saved = second.placement_fragment_id
    object.__setattr__(second, "placement_fragment_id", first.placement_fragment_id)
    try:
        for form in _forms(plan, tables):
            assert _decide(form) is None
    finally:
        object.__setattr__(second, "placement_fragment_id", saved)
    for form in _forms(plan, tables):
        assert _decide(form) is True


@pytest.mark.parametrize("at", [0, 57, -1])
def test_listed_twice_accepts(large: tuple[Any, list[Any]], at: int) -> None:
    """A large part listing one of its objects again at its end: both lookups find the same
    single box (True), as the string rule decides."""
    plan, tables = large
    part = _largest_part(tables)
    saved = part.fragments
    object.__setattr__(part, "fragments", saved + (saved[at],))
    try:
        for form in _forms(plan, tables):
            assert _decide(form) is True
    finally:
        object.__setattr__(part, "fragments", saved)


def test_equal_id_copy_declines(large: tuple[Any, list[Any]]) -> None:
    """An id equal in text but another str object (not interned together): still a duplicate."""
    plan, tables = large
    fragments = _largest_part(tables).fragments
    first, second = fragments[3], fragments[250]
    saved = second.placement_fragment_id
    copied = "".join(list(first.placement_fragment_id))
    assert copied == first.placement_fragment_id and copied is not first.placement_fragment_id
    object.__setattr__(second, "placement_fragment_id", copied)
    try:
        for form in _forms(plan, tables):
            assert _decide(form) is None
    finally:
        object.__setattr__(second, "placement_fragment_id", saved)

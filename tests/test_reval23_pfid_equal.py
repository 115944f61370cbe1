"""Session 23 (REVAL3): ``revalidate_side``'s search of a large compact ``attested_pfids``
decides membership by equality of exact str, as the set form does.

From 64 ids in hash order (``bc._compact_pfids``) the search goes through a directory over the
sorted hashes (session 22, ``test_reval22_pfid_index``), whose plans hold the attested ids as the
placement's own str objects. Here the ids are held by other objects: an equal id held by another
str object is found, an id whose text differs is not, and a mix decides like the set. The oracle
is the set form (``_as_set``). (Session 23 tried a slot table for this search in place of the
directory: no measured gain, not kept; these tests hold for any search.)
"""

from __future__ import annotations

from typing import Any

import pytest

from mooncake.reshard import _native
from mooncake.reshard.weight._planner import bound_contracts as bc

from test_native_revalidate import _bound_plan
from test_reval2_memory_r19 import _VIEW_ARGS, _as_set, _as_tuple, _attestations, _objects, _sides

_TENSORS = tuple(f"tensor-{i:03d}" for i in range(200))


@pytest.fixture(scope="module")
def plan() -> Any:
    return _bound_plan(tensors=_TENSORS)


def test_views_are_large_enough_for_the_directory(plan: Any) -> None:
    with_objects = [(attestation, _objects(attestation)) for attestation in _attestations(plan)]
    views = [_native.attested_view(bc._AttestedView, a, *_VIEW_ARGS, objects) for a, objects in with_objects if objects]
    assert views and all(type(view.attested_pfids) is tuple for view in views)
    assert min(len(view.attested_pfids) for view in views) >= 64  # every search below uses the directory


def _copy(text: str) -> str:
    """An equal str that is another object (its hash not computed yet)."""
    copy = "".join(list(text))
    assert copy == text and copy is not text
    return copy


def _copies(pfids: Any) -> Any:
    return tuple(_copy(item) for item in _as_tuple(pfids))


def test_equal_ids_of_other_objects_are_found(plan: Any) -> None:
    answers = _sides(plan, [_as_set, _copies])
    assert answers and answers[0] == answers[1]
    assert answers[0][0] == [True, True]


def _edited(pfids: Any) -> Any:
    """Each id replaced by one of the same length and another text (none is attested)."""
    return tuple(item[:-1] + ("#" if item[-1] != "#" else "$") for item in _as_tuple(pfids))


def test_ids_of_other_texts_are_not_found(plan: Any) -> None:
    answers = _sides(plan, [lambda pfids: set(_edited(pfids)), lambda pfids: _as_tuple(set(_edited(pfids)))])
    assert answers and answers[0] == answers[1]
    assert answers[0][0] != [True, True]


def test_half_the_ids_plus_others_decide_like_the_set(plan: Any) -> None:
    def form(pfids: Any) -> Any:
        items = _as_tuple(pfids)
        kept = set(items[::2]) | {f"other-{i}" for i in range(len(items))}
        return kept

    answers = _sides(plan, [form, lambda pfids: _as_tuple(form(pfids))])
    assert answers and answers[0] == answers[1]
    assert answers[0][0] != [True, True]

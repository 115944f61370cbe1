"""Session 22 (REVAL): the compact ``attested_pfids`` of large views.

``attested_view`` (with binding's snapshot objects) sorts the attested placement fragment ids by
``(hash, text)``: by radix from 512 ids on (qsort below). ``revalidate_side`` searches that tuple
through a directory over the hashes' top bits from 64 ids on (a binary search below), and only
when the tuple's hashes ascend. The small plans of ``test_reval2_memory_r19`` stay under both
thresholds; these plans have an attestation with more than 512 ids. The oracle is the set form
(``_as_set``), and ``bc._compact_pfids`` for the order.
"""

from __future__ import annotations

from typing import Any

import pytest

from test_native_revalidate import _bound_plan
from test_reval2_memory_r19 import _as_set, _as_tuple, _sides, _sorted_views

_TENSORS = tuple(f"tensor-{i:03d}" for i in range(600))


@pytest.fixture(scope="module")
def large_plan() -> Any:
    return _bound_plan(tensors=_TENSORS)


def test_large_views_sort_like_compact_pfids(large_plan: Any) -> None:
    sizes = [len(built.attested_pfids) for *_, built in _sorted_views(large_plan)]
    assert sizes and max(sizes) >= 512  # the radix sort and the directory both ran


def test_large_compact_ids_decide_like_the_set(large_plan: Any) -> None:
    answers = _sides(large_plan, [_as_set, _as_tuple])
    assert answers and answers[0] == answers[1] and answers[0][0] == [True, True]


def _drop(pick: Any) -> Any:
    def form(pfids: Any) -> Any:
        items = _as_tuple(pfids)
        return tuple(item for k, item in enumerate(items) if not pick(k, len(items)))

    return form


@pytest.mark.parametrize(
    "pick",
    [
        lambda k, n: k == 0,  # the first id (the first bucket)
        lambda k, n: k == n - 1,  # the last one (the last bucket)
        lambda k, n: k == n // 2,  # one in the middle
        lambda k, n: k % 7 == 3,  # many, spread over the buckets
    ],
)
def test_large_compact_ids_missing_ones_decide_like_the_smaller_set(large_plan: Any, pick: Any) -> None:
    dropped = _drop(pick)
    answers = _sides(large_plan, [lambda pfids: set(dropped(pfids)), dropped])
    assert answers and answers[0] == answers[1]
    assert answers[0][0] != [True, True]  # an attested id missing: not accepted


def test_large_compact_ids_with_extra_ids_still_pass(large_plan: Any) -> None:
    extra = {f"not-a-fragment-{i}" for i in range(700)}
    answers = _sides(large_plan, [lambda pfids: _as_tuple(set(pfids) | extra)])
    assert answers and answers[0][0] == [True, True]


def test_large_tuple_out_of_hash_order_never_accepts_more(large_plan: Any) -> None:
    """Not ascending: no directory; a search can only miss there (which declines), never find an
    id the tuple does not hold."""
    reference = _sides(large_plan, [_as_set])[0]

    def shuffled(pfids: Any) -> Any:
        items = list(_as_tuple(pfids))
        return tuple(items[1::2] + items[0::2])

    def shuffled_missing(pfids: Any) -> Any:
        return shuffled(pfids)[1:]

    for form in (shuffled, shuffled_missing):
        answer = _sides(large_plan, [form])[0]
        for got, expected in zip(answer[0], reference[0]):
            assert got is None or got == expected
    # the ids missing from a shuffled tuple are never found
    missing = _sides(large_plan, [shuffled_missing])[0]
    assert missing[0] != [True, True]

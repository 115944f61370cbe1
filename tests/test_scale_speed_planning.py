"""Planning at scale: the coverage presence check without a tuple per fragment decides
exactly like the (tensor id, dp) pair set it replaces, and check_target_coverage with the
caller's distinct tensor ids decides like without them."""

from __future__ import annotations

from typing import Any, Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from test_planner_fastpaths import _placements

from mooncake.reshard.weight._planner import ownership

_NAMES = st.sampled_from(["a", "b", "c", "d"])


def _oracle(tensor_ids: list[str], dps: list[int], tensors: dict[str, Any]) -> bool:
    pairs = set(zip(tensor_ids, dps))
    return ownership._all_pairs_present(pairs, tensors, len({dp for _, dp in pairs}))


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(st.tuples(_NAMES, st.integers(0, 2)), min_size=1, max_size=12),
    known=st.sets(_NAMES, min_size=1),
)
def test_presence_equals_pair_set_oracle(rows: list[tuple[str, int]], known: set[str]) -> None:
    tensor_ids = [tid for tid, _ in rows]
    dps = [dp for _, dp in rows]
    tensors = {name: object() for name in sorted(known)}
    expected = _oracle(tensor_ids, dps, tensors)
    assert ownership._every_tensor_at_every_dp(tensor_ids, dps, tensors) is expected
    distinct = list(dict.fromkeys(tensor_ids))
    assert ownership._every_tensor_at_every_dp(tensor_ids, dps, tensors, distinct) is expected


def _outcome(call: Callable[[], Any]) -> Any:
    try:
        return ("ok", call())
    except ValueError as exc:
        return ("error", str(exc))


def test_coverage_with_distinct_ids_equals_without() -> None:
    for placement in _placements():
        tensors = {t.tensor_id: t for t in placement.tensors}
        fragments = placement.fragments
        ids = [f.tensor_id for f in fragments]
        dps = [f.rank.dp for f in fragments]
        distinct = list(dict.fromkeys(ids))
        for known in (tensors, {**tensors, "zz-missing": placement.tensors[0]}):
            exact = _outcome(lambda: ownership.check_target_coverage(known, fragments))
            for given_dps, given_distinct in ((dps, distinct), (dps, None), (None, distinct), (dps, (1,))):
                assert _outcome(
                    lambda: ownership.check_target_coverage(
                        known, fragments, placement, None, ids, given_dps, given_distinct  # type: ignore[arg-type]
                    )
                ) == exact

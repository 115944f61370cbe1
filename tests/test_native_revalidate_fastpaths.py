"""Speed paths of the TransferPlan revalidation kernels (issue 5, round 9) against their
generic forms: each shortcut must decide exactly what the generic comparison decides, and
hostile inputs must be refused or declined, never crash."""

from __future__ import annotations

from typing import Any

import pytest

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank
from mooncake.reshard.weight._planner import bound_contracts as bc

from test_native_revalidate import _PLANS, _coverage_tables


def _forged_rank(**state: Any) -> ParallelRank:
    rank: ParallelRank = object.__new__(ParallelRank)
    rank.__dict__.update(state)
    return rank


class _RankSubclass(ParallelRank):
    pass


def _rank_variants(rank: ParallelRank) -> list[Any]:
    state = dict(rank.__dict__)
    bumped = dict(state, ep=state["ep"] + 1)
    return [
        rank,
        ParallelRank(**state),  # equal, not identical
        ParallelRank(**bumped),  # differs in the last field
        _forged_rank(**dict(state, dp=float(state["dp"]))),  # equal value, not an exact int
        _forged_rank(**dict(state, dp=float("nan"))),  # never equal
        _forged_rank(**dict(state, tp=2**80)),  # beyond int64
        _forged_rank(**{k: v for k, v in state.items() if k != "pp"}),  # a field missing: class default
        _forged_rank(**dict(state, extra=1)),  # an extra attribute (not a field)
        _RankSubclass(**state),
        (state["dp"], state["tp"], state["pp"], state["ep"]),
        None,
    ]


@pytest.mark.parametrize("name", ["split", "unpickled-split"])
def test_coverage_rank_shortcut_decides_like_the_generic_comparison(name: str) -> None:
    tables = _coverage_tables(_PLANS[name])
    assert tables is not None
    placement, frags, target_of, boxes, rows, attested, used = tables
    assert _native.revalidate_coverage(*tables, ParallelRank) is True
    assert _native.revalidate_coverage(*tables, None) is True
    for variant in _rank_variants(rows[0][0]["rank"]):
        estate = dict(rows[0][0])
        estate["rank"] = variant
        forged_rows = [(estate, rows[0][1], rows[0][2])] + rows[1:]
        forged = (placement, frags, target_of, boxes, forged_rows, attested, set(used) | {id(estate)})
        generic = _native.revalidate_coverage(*forged)
        assert _native.revalidate_coverage(*forged, ParallelRank) is generic, variant
        assert generic is (True if bc._fast_target_coverage(*forged) else None), variant


def test_coverage_rank_type_hostile() -> None:
    tables = _coverage_tables(_PLANS["split"])
    assert tables is not None
    for bad in (1, "ParallelRank", ParallelRank(), object()):
        with pytest.raises(TypeError):
            _native.revalidate_coverage(*tables, bad)
    with pytest.raises(TypeError):
        _native.revalidate_coverage(*tables, ParallelRank, None)
    # Another type: every rank goes through the generic comparison.
    assert _native.revalidate_coverage(*tables, int) is True

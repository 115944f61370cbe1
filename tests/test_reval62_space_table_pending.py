"""REVAL62: ``_native.revalidate_spaces``' C table of source allocations (REVAL42, REVAL50) no
longer inserts or looks up each allocation as it is read: up to 16 wait in a ring, the line of
each one's slot asked for, and are settled oldest first (sources inserted, targets looked up),
before the table is left for the sets and after the last target. The decision must not move:
a target that coincides with a source is found whether either of them was still waiting when
the table was left (a value outside the table's case, at every distance behind them up to past
the ring's size), when the sources ended, or when the targets did; compared against
``test_native_revalidate``'s Python reference."""

from __future__ import annotations

from typing import Any

from test_native_revalidate import _spaces_reference
from test_reval42_space_table import _agree, _coincide, _forge_binding
from test_reval50_space_table_probes import _table

from mooncake.reshard import _native

_RING = 16
_N_OPS = 120


def _decide(frags: list[Any], source_of: list[int], target_of: list[int], boxes: list[Any]) -> Any:
    result = _native.revalidate_spaces(frags, source_of, target_of, boxes, False)
    assert result is _spaces_reference(frags, source_of, target_of, boxes, False)
    return result


def test_a_coincidence_waiting_when_the_table_is_left() -> None:
    frags, source_of, target_of, boxes = _table(_N_OPS, 10**9, 62)
    assert _decide(frags, source_of, target_of, boxes) is True
    for coincide_at in (0, 40, _N_OPS - _RING - 3):
        for behind in range(1, _RING + 3):
            for value in (1.5, 2**64, "x"):
                # the target waits in the ring when a later target leaves the table
                forged = list(frags)
                _coincide(forged, target_of[coincide_at], source_of[coincide_at])
                _forge_binding(forged, target_of[coincide_at + behind], storage_nbytes=value)
                assert _decide(forged, source_of, target_of, boxes) is False, (coincide_at, behind, value)
                # the source waits in the ring when a later source leaves the table
                forged = list(frags)
                _coincide(forged, target_of[_N_OPS - 1 - coincide_at], source_of[coincide_at])
                _forge_binding(forged, source_of[coincide_at + behind], storage_nbytes=value)
                assert _decide(forged, source_of, target_of, boxes) is False, (coincide_at, behind, value)
    _agree(frags, source_of, target_of, boxes)


def test_a_coincidence_waiting_when_a_side_ends() -> None:
    frags, source_of, target_of, boxes = _table(_N_OPS, 10**9, 63)
    for last in range(_RING + 2):
        for source, target in ((_N_OPS - 1 - last, 0), (0, _N_OPS - 1 - last), (_N_OPS - 1 - last, _N_OPS - 1 - last)):
            forged = list(frags)
            _coincide(forged, target_of[target], source_of[source])
            assert _decide(forged, source_of, target_of, boxes) is False, (source, target)
            _agree(forged, source_of, target_of, boxes)


def test_sources_waiting_across_doublings_are_each_logged_once() -> None:
    """Repeated source allocations (few distinct values) waiting in the ring as the table
    doubles: found once logged, and a target coinciding with any of them is found."""
    for n_ops, distinct in ((1030, 5), (2100, 1500), (1100, 10**9)):
        frags, source_of, target_of, boxes = _table(n_ops, distinct, n_ops)
        assert _decide(frags, source_of, target_of, boxes) is True
        for at in (1020, 1023, 1024, 1025, min(1039, n_ops - 2), n_ops - 1):
            forged = list(frags)
            _coincide(forged, target_of[(at * 7) % n_ops], source_of[at])
            assert _decide(forged, source_of, target_of, boxes) is False, (n_ops, distinct, at)

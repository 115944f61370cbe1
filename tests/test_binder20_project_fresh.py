"""``_native.project_attested`` on attestations whose executor rows it builds itself.

When a part's rows are built in the call (nothing cached on the attestation yet) and every
evidence fragment's id is in the selection, the call takes its snapshots and executor ids as
selected without looking each up again (they are ids of those very evidence fragments), and when
every executor is of that kind, the selection's size alone shows every selected id emitted. The
oracle is the Python loop on an independent, equally fresh side: the same executors, or the same
failure; partial selections, extra ids and parts left out must still be decided as before."""

from __future__ import annotations

from typing import Any, Tuple

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from layout_model import Layout, build_placement, build_runtime_bindings
from test_native_binder_project import draw_selection, project, python_loop, split_workers, with_c
from test_planner_oracle import placement_pairs

from mooncake.reshard.weight._planner.binding import _bind_side
from mooncake.reshard.weight._planner.bound_validation import _attestation_values


def fresh_side(placement: Any, every: int) -> Tuple[Any, Any]:
    """Bindings attested now: nothing cached on their attestations."""
    bindings = build_runtime_bindings(placement)
    if every:
        bindings = split_workers(bindings, every)
    kept, attestations = _bind_side("target", placement, bindings, {b.participant_id for b in bindings})
    return kept, attestations


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(placement_pairs(), st.sampled_from([0, 0, 2, 3]), st.data())
def test_fresh_rows_give_the_python_loop_executors(pair: Tuple[Layout, Layout], every: int, data: st.DataObject) -> None:
    placement = build_placement(pair[1])
    assume(build_runtime_bindings(placement))
    kept, attestations = fresh_side(placement, every)
    assert all(not _attestation_values(a) for a in attestations.values())  # nothing cached yet
    ids = sorted(f.fragment_id for b in kept for f in b.fragments)
    by_part = [[f.fragment_id for f in b.fragments] for b in kept]
    choice = data.draw(st.sampled_from(["none", "all", "subset", "extra", "drop-part", "one-short", "swap-extra"]))
    selected: Any
    if choice in ("none", "all", "subset", "extra"):
        selected = draw_selection(data, choice, ids)
    elif choice == "drop-part":
        dropped = data.draw(st.integers(0, len(by_part) - 1))
        selected = frozenset(i for k, part in enumerate(by_part) if k != dropped for i in part)
    elif choice == "one-short":  # every id but one: that part is partially selected
        selected = frozenset(ids[1:])
    else:  # as many ids as emitted, but some of one part swapped for ids nobody emits
        short = data.draw(st.integers(1, len(ids)))
        selected = frozenset(ids[short:]) | {f"not-emitted-{k}" for k in range(short)}
    direct = project(placement, kept, attestations, selected)
    other_kept, other_attestations = fresh_side(placement, every)
    expected = python_loop(placement, other_kept, other_attestations, selected)
    if direct is not None:
        assert isinstance(expected, tuple) and direct == expected
    # the whole projection with the C call on another fresh side
    third_kept, third_attestations = fresh_side(placement, every)
    assert with_c(placement, third_kept, third_attestations, selected) == expected
    if every == 0 and choice in ("none", "all", "drop-part"):
        assert direct is not None  # decided in C
    if choice in ("subset", "one-short") and direct is not None:
        assert {i for e in direct for i in e.fragment_ids} == selected

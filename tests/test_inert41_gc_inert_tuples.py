"""INERT41: bind leaves its operations tuple and each executor's ``fragment_ids`` and
``fragment_snapshots`` tuples out of the cyclic collector when every item is inert
(csrc/common.h ``mr_gc_inert``: an atom, a tuple of inert items, or an untracked object other
than a dict), judged in the pass that builds or reads them (``_native.inert_tuple``;
``bd_executor``). A tuple never changes once built, so one whose items reach nothing that holds
it is never on a cycle; the first collection after a 10^6-fragment bind walked every item
(12.6 ms at Kimi 20 layers -> 0.3 ms). The rule from the other side: an untracked tuple never
holds an item the collector must see, and one holding such an item stays tracked."""

from __future__ import annotations

import gc
import sys
import weakref
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mooncake.reshard import _native
from mooncake.reshard.weight import PlanningLimits, bind_logical_transfer_plan, plan_placement_transfer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import _workloads as w  # noqa: E402
from test_planasm22_region_gc import _inert  # noqa: E402  (common.h's mr_gc_inert, from its comment)


def _holds_only_inert(container: tuple[Any, ...]) -> bool:
    return all(_inert(item) for item in container)


def _bound(layers: int, experts: int = 48) -> Any:
    inputs = w.independent_experts(layers=layers, experts=experts)
    source, target = w.assemble(inputs.source), w.assemble(inputs.target)
    logical = plan_placement_transfer(source, target, planning_limits=PlanningLimits(**w_limits()))
    source_bindings = w.bindings(source, prefix="src", window=0)
    target_bindings = w.bindings(target, prefix="dst", window=4096)
    return bind_logical_transfer_plan(logical, target_bindings, source_bindings=source_bindings)


def w_limits() -> dict[str, Any]:
    import scale  # benchmarks/scale.py (on the path above)

    return dict(scale.PLANNING_LIMITS)


# layers=1: 1,152 operations (bind_regions, each side's map); layers=4: 4,608 (the ordered path,
# bind_regions_ordered, which leaves every region untracked); both past MR_GC_BULK_MIN.
@pytest.mark.parametrize("layers", [1, 4])
def test_bind_tuples_start_untracked(collector_off: None, layers: int) -> None:
    plan = _bound(layers)
    operations = plan.operations
    assert len(operations) >= 1024
    # (the per-part path of layers=1 caches bound rows on the attestations: those bound
    # fragments, and the regions holding them, stay tracked, and so does the tuple)
    assert gc.is_tracked(operations) == (not _holds_only_inert(operations))
    if layers >= 4:
        assert not gc.is_tracked(operations)
    executors = plan.source_executors + plan.target_executors
    assert executors
    for executor in executors:
        for name in ("fragment_ids", "fragment_snapshots"):
            value = getattr(executor, name)
            assert type(value) is tuple and value
            assert _holds_only_inert(value), name
            assert not gc.is_tracked(value), name


def test_ordered_bind_leaves_bound_fragments_untracked(collector_off: None) -> None:
    """The ordered path builds its bound fragments without judging them in mr_layout_new and
    offers each to mr_untrack_bound at once (INERT41): every one still ends untracked, as on the
    start build, and holds only inert values but for its (tracked) attestation."""
    plan = _bound(4)
    for op in plan.operations:
        for bound in (op.source, op.target):
            assert not gc.is_tracked(bound)
            assert gc.is_tracked(bound.attestation)
            for name in ("placement", "binding", "instance_id", "runtime_lease_id", "lease_generation", "owner"):
                assert _inert(getattr(bound, name)), name


def test_small_bind_follows_the_rule(collector_off: None) -> None:
    """Below MR_GC_BULK_MIN the regions stay tracked: the operations tuple holding them too;
    whatever is untracked holds only inert items."""
    from forge_helpers import sized_world

    logical, target_bindings, source_bindings, _ = sized_world(2)
    plan = bind_logical_transfer_plan(logical, target_bindings, source_bindings=source_bindings)
    containers = [plan.operations]
    for executor in plan.source_executors + plan.target_executors:
        containers += [executor.fragment_ids, executor.fragment_snapshots]
    for container in containers:
        assert gc.is_tracked(container) == (not _holds_only_inert(container))


def test_bound_plan_pickles_and_compares_equal() -> None:
    """Untracking changes nothing a reader sees."""
    import pickle

    plan = _bound(1)
    again = pickle.loads(pickle.dumps(plan))
    assert again == plan
    assert again.operations == plan.operations


class _Node:
    pass


_ITEMS = st.recursive(
    st.one_of(st.integers(), st.text(max_size=3), st.none(), st.builds(_Node), st.builds(dict), st.builds(list)),
    lambda inner: st.lists(inner, max_size=3).map(tuple),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_ITEMS, max_size=6))
def test_inert_tuple_matches_the_rule(items: list[Any]) -> None:
    built = _native.inert_tuple(items)
    assert type(built) is tuple and built == tuple(items)
    assert all(a is b for a, b in zip(built, items))
    if built:
        assert gc.is_tracked(built) == (not _holds_only_inert(built))


def test_inert_tuple_arguments() -> None:
    assert _native.inert_tuple([]) == ()
    assert not gc.is_tracked(_native.inert_tuple([1, "a", None, (2, "b")]))
    assert gc.is_tracked(_native.inert_tuple([1, {}]))
    assert gc.is_tracked(_native.inert_tuple([[]]))

    class Sub(list):  # type: ignore[type-arg]
        pass

    for bad in ((1, 2), Sub([1]), None, iter([1])):
        with pytest.raises(TypeError, match="exact list"):
            _native.inert_tuple(bad)  # type: ignore[arg-type]


def test_a_cycle_through_a_tracked_item_is_still_collected() -> None:
    """A tuple holding an item the collector must see stays tracked: a cycle through it is
    collected."""
    node = _Node()
    built = _native.inert_tuple([1, node])
    node.back = built  # type: ignore[attr-defined]
    probe = weakref.ref(node)
    assert gc.is_tracked(built)
    del node, built
    gc.collect()
    assert probe() is None

"""A sealed bind call whose bound fragments ``bind_regions_ordered`` made (``attested_now``) and
whose §12.4 check is proven (``bound_contracts._sealed_side_holds``) runs the new plan's §9.6 step
11 pass (``_native.revalidate_fragments``) with ``attested_by_call``: each fragment's two lookups
in its attestation's dicts, and those dicts' plain-key checks, are taken as proven (the argument
is in ``bound_contracts._attested_by_call``'s docstring); every other check of the pass runs.

Checked here: which calls pass the flag (a spy, admitted in watched calls), at the ordered
path's threshold (4096 operations: smaller calls take the other path) and above it; the plan is
the one the unsealed call builds; ``replace``, pickle, a bind below the ordered path's threshold
and a shadowed dict attribute do not pass it; the premise itself holds for every fragment of a sealed call's plan
(a brute-force oracle); and the pass's own contract (the flag skips exactly the lookups: a
fragment whose placement is an equal copy of the attested one is declined without it and
accepted with it; it refuses ``want_keys``)."""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any

import pytest

from forge_helpers import maybe_profiled, sized_world
from watched import no_hooks, spy_on

from mooncake.reshard import _native
from mooncake.reshard.weight import (
    ParallelRank,
    PlacementFragment,
    RuntimeBindingFragment,
    TransferPlan,
    WeightPlacementManifest,
    bind_logical_transfer_plan,
)
from mooncake.reshard.weight._planner import binding as binding_module
from mooncake.reshard.weight._planner import bound_contracts as bc
from mooncake.reshard.weight._planner import exactness
from mooncake.reshard.weight._planner.attestation import RuntimeBindingAttestation

# (two operations per tensor: the ordered path's threshold, and above it)
SIZES = pytest.mark.parametrize(
    "tensors", [binding_module._FUSED_MIN_OPERATIONS // 2, binding_module._FUSED_MIN_OPERATIONS], ids=["at", "above"]
)


def _spied(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Per call of the step 11 pass: its attested_by_call argument (False when not given)."""
    exactness.code_watch()
    flags: list[bool] = []
    spy_on(monkeypatch, _native, "revalidate_fragments", lambda args, result: flags.append(bool(args[12:13] and args[12])))
    return flags


def _bind(logical: Any, targets: Any, sources: Any) -> Any:
    return bind_logical_transfer_plan(logical, targets, source_bindings=sources)


def _ordered_from(monkeypatch: pytest.MonkeyPatch, operations: int) -> None:
    """Bind calls of at least ``operations`` operations try the ordered path (steps 7 and 8 in
    bind_regions_ordered)."""
    monkeypatch.setattr(binding_module, "_FUSED_MIN_OPERATIONS", operations)


def _ordered_calls(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Per bind call: whether the ordered path decided it."""
    taken: list[bool] = []
    spy_on(monkeypatch, binding_module, "_fused_steps_7_8", lambda args, result: taken.append(result is not None))
    return taken


def _premise_holds(plan: TransferPlan) -> bool:
    """The brute-force oracle of the flag's premise: every operation fragment's placement and
    binding are the very objects its attestation's dicts hold for its placement fragment id."""
    for op in plan.operations:
        for fragment in (op.source, op.target):
            state = fragment.attestation.__dict__
            pfid = fragment.placement.placement_fragment_id
            if state["_placement_dict"][pfid] is not fragment.placement:
                return False
            if state["_binding_dict"][pfid] is not fragment.binding:
                return False
    return True


@SIZES
def test_a_sealed_ordered_bind_passes_the_flag(monkeypatch: pytest.MonkeyPatch, tensors: int) -> None:
    no_hooks()
    logical, targets, sources, _memory = sized_world(tensors)
    flags = _spied(monkeypatch)
    ordered = _ordered_calls(monkeypatch)
    plan = _bind(logical, targets, sources)
    assert flags == [True] and ordered == [True]
    assert _premise_holds(plan)
    # the same inputs, unsealed (a profile hook): the pass runs every lookup; the same plan
    again = maybe_profiled(True, lambda: _bind(logical, targets, sources))
    assert flags == [True, False]
    assert again == plan
    # every other constructor runs the lookups
    for make in (
        lambda: dataclasses.replace(plan),
        lambda: pickle.loads(pickle.dumps(plan, protocol=pickle.HIGHEST_PROTOCOL)),
    ):
        before = len(flags)
        assert make() == plan
        assert flags[before:] == [False]


def test_an_unordered_sealed_bind_runs_the_lookups(monkeypatch: pytest.MonkeyPatch) -> None:
    """Off the ordered path the bound fragments come from the maps step 7 builds, which may be
    cached on an attestation by an earlier call: not made in this one. Below the threshold (400
    operations), and at it with the threshold raised."""
    no_hooks()
    small = sized_world(200)
    flags = _spied(monkeypatch)
    ordered = _ordered_calls(monkeypatch)
    _bind(*small[:3])
    assert flags == [False] and ordered == [False]
    threshold = binding_module._FUSED_MIN_OPERATIONS
    logical, targets, sources, _memory = sized_world(threshold // 2)
    _ordered_from(monkeypatch, 10**9)
    plan = _bind(logical, targets, sources)
    assert flags == [False, False] and ordered == [False, False]
    _ordered_from(monkeypatch, threshold)
    assert _bind(logical, targets, sources) == plan
    assert flags == [False, False, True] and ordered == [False, False, True]


@pytest.mark.parametrize("name", ["_placement_dict", "_binding_dict"])
def test_a_shadowed_dict_attribute_withholds_the_flag(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """bind_regions_ordered reads the two dicts by getattr, the pass from the instance dict: a
    data descriptor planted on the attestation class could make them differ."""
    no_hooks()
    logical, targets, sources, _memory = sized_world(binding_module._FUSED_MIN_OPERATIONS // 2)
    plan = _bind(logical, targets, sources)
    assert bc._attested_by_call()
    monkeypatch.setattr(
        RuntimeBindingAttestation, name, property(lambda self, key=name: self.__dict__[key]), raising=False
    )
    assert not bc._attested_by_call()
    flags = _spied(monkeypatch)
    assert _bind(logical, targets, sources) == plan
    assert flags and not any(flags)
    monkeypatch.delattr(RuntimeBindingAttestation, name)
    assert bc._attested_by_call()
    # a plain value under the name loses to the instance dict: no shadow
    monkeypatch.setattr(RuntimeBindingAttestation, name, 5, raising=False)
    assert bc._attested_by_call()


# -- the pass's own contract ----------------------------------------------------------------------


def _pass_inputs(plan: TransferPlan) -> tuple[list[Any], tuple[Any, ...]]:
    """The distinct operation fragments (first use order) and the pass's fixed arguments."""
    seen: dict[int, Any] = {}
    for op in plan.operations:
        for fragment in (op.target, op.source):
            seen.setdefault(id(fragment), fragment)
    fixed = (
        PlacementFragment,
        RuntimeBindingFragment,
        RuntimeBindingAttestation,
        WeightPlacementManifest,
        ParallelRank,
        (plan.resource_id, plan.revision, plan.weight_generation),
        bc._attested_view,
        bc._AttestedView,
        bc.RuntimeBindingEvidence,
        False,  # want_keys
        None,  # views
    )
    return list(seen.values()), fixed


def test_the_flag_skips_exactly_the_lookups() -> None:
    logical, targets, sources, _memory = sized_world(2)
    plan = _bind(logical, targets, sources)
    frags, fixed = _pass_inputs(plan)
    plain = _native.revalidate_fragments(frags, *fixed)
    flagged = _native.revalidate_fragments(frags, *fixed, True)
    assert plain is not None and flagged is not None
    assert plain[0] is None and flagged[0] is None  # (no keys wanted)
    assert plain[1:3] == flagged[1:3]  # route halves and runtime ids
    assert plain[3].keys() == flagged[3].keys()
    # A fragment holding an equal copy of its attested placement: the lookups decline it (the
    # rules decide, by ==); with the flag (the caller's proof that it is the very object) the
    # lookups are not made.
    victim = frags[0]
    copy = dataclasses.replace(victim.placement)
    assert copy == victim.placement and copy is not victim.placement
    original = victim.placement
    object.__setattr__(victim, "placement", copy)
    try:
        assert _native.revalidate_fragments(frags, *fixed) is None
        assert _native.revalidate_fragments(frags, *fixed, True) is not None
        # every other check still runs with the flag: a forged lease is declined
        lease = victim.runtime_lease_id
        object.__setattr__(victim, "runtime_lease_id", lease + "-forged")
        try:
            assert _native.revalidate_fragments(frags, *fixed, True) is None
        finally:
            object.__setattr__(victim, "runtime_lease_id", lease)
    finally:
        object.__setattr__(victim, "placement", original)
    assert _native.revalidate_fragments(frags, *fixed) is not None


def test_the_flag_refuses_keys() -> None:
    logical, targets, sources, _memory = sized_world(2)
    plan = _bind(logical, targets, sources)
    frags, fixed = _pass_inputs(plan)
    with_keys = fixed[:9] + (True, None)
    with pytest.raises(TypeError, match="attested_by_call requires want_keys false"):
        _native.revalidate_fragments(frags, *with_keys, True)
    assert _native.revalidate_fragments(frags, *with_keys, False) is not None

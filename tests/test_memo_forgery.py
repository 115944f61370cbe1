"""Remembered proofs never change an outcome (spec §12.1 step 2, §12.2, issue 5's memo rule).

Binding remembers what it proved about the very objects it was given (an attestation on a
binding, a rechecked logical plan) so that binding the same objects again is cheap. A frozen
value can still be edited in place with ``object.__setattr__``; such an edit of a nested value
must give exactly the outcome it gives on objects that were never bound before (the reference
revalidates everything on every call). Each case below applies one in-place forgery to two
identical worlds, one of which has been bound once already, and compares the outcomes."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Tuple

import pytest

from memory_executor import HostWorld, tp_placement

from mooncake.reshard.weight.planner import resolve_executor_plans


class CountingMemory:
    """Deterministic addresses (nothing is executed here): two worlds bind identical values."""

    def __init__(self) -> None:
        self.next = 1 << 32

    def alloc(self, nbytes: int) -> int:
        address = self.next
        self.next += (nbytes + 255) // 256 * 256
        return address


class World(HostWorld):
    """TP2 x DP2 source -> TP3 target (uneven); fresh, equal objects each time."""

    def __init__(self) -> None:
        source = tp_placement(2, prefix="s", dp=2, shape=(4, 7))
        target = tp_placement(3, prefix="t", shape=(4, 7))
        super().__init__(source, target, memory=CountingMemory(), plan_first=True)


def outcome(action: Callable[[], Any]) -> Tuple[Any, ...]:
    try:
        result = action()
    except Exception as error:  # the class and message are the outcome
        return ("raised", type(error).__name__, str(error))
    return ("returned", result)


def forge(value: Any, name: str, new: Any) -> None:
    object.__setattr__(value, name, new)


def _shift(offset: Tuple[int, ...]) -> Tuple[int, ...]:
    return (offset[0] + 1,) + tuple(offset[1:])


# Each forgery edits one nested value of a world in place, never a top-level field identity
# that a signature of object identities would notice.
FORGERIES: dict[str, Callable[[World], None]] = {
    "operation target_base_offset": lambda w: forge(w.logical.operations[0], "target_base_offset", 0 if w.logical.operations[0].target_base_offset else 2),
    "operation overlap_offset": lambda w: forge(w.logical.operations[0], "overlap_offset", _shift(w.logical.operations[0].overlap_offset)),
    "operation overlap_shape": lambda w: forge(w.logical.operations[-1], "overlap_shape", (1,) + tuple(w.logical.operations[-1].overlap_shape[1:])),
    "operation inner_bytes": lambda w: forge(w.logical.operations[0], "inner_bytes", w.logical.operations[0].inner_bytes + 2),
    "operation target fragment offset": lambda w: forge(w.logical.operations[0].target, "global_offset", _shift(w.logical.operations[0].target.global_offset)),
    "operation target swapped": lambda w: forge(w.logical.operations[0], "target", w.logical.operations[-1].target),
    "operation source swapped": lambda w: forge(w.logical.operations[0], "source", w.logical.operations[-1].source),
    "operation target fragment nbytes": lambda w: forge(w.logical.operations[0].target, "nbytes", w.logical.operations[0].target.nbytes + 2),
    "target placement fragment offset": lambda w: forge(w.target.parts[0].fragments[0], "global_offset", _shift(w.target.parts[0].fragments[0].global_offset)),
    "source placement fragment nbytes": lambda w: forge(w.source.parts[0].fragments[0], "nbytes", w.source.parts[0].fragments[0].nbytes + 2),
    "target binding fragment address": lambda w: forge(w.target_bindings[1].fragments[0], "address", w.target_bindings[0].fragments[0].address),
    "target binding fragment nbytes": lambda w: forge(w.target_bindings[0].fragments[0], "nbytes", w.target_bindings[0].fragments[0].nbytes + 2),
    "source binding fragment storage": lambda w: forge(w.source_bindings[0].fragments[0], "storage_nbytes", 1),
    "source binding lease": lambda w: forge(w.source_bindings[0], "lease_id", "other-lease"),
    "target binding generation": lambda w: forge(w.target_bindings[0], "generation", w.target_bindings[0].generation + 1),
    # Values binding derives from a placement (its parts, fragment ids, tensors) are not kept on it.
    "source placement part fragments": lambda w: forge(w.source.parts[1], "fragments", ()),
    "target placement part fragments": lambda w: forge(w.target.parts[1], "fragments", ()),
    "target placement part participant": lambda w: forge(w.target.parts[1], "participant_id", "nobody"),
    "target placement fragment id": lambda w: forge(w.target.parts[0].fragments[0], "placement_fragment_id", "zzz"),
    "target placement tensor id": lambda w: forge(w.target.tensors[0], "tensor_id", "other"),
}


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_forgery_after_a_bind_has_the_outcome_of_a_first_bind(name: str) -> None:
    never_bound = World()
    FORGERIES[name](never_bound)
    expected = outcome(never_bound.bind)

    bound_before = World()
    bound_before.bind()
    bound_before.logical.pipeline_routes  # the logical plan's operation views derived once
    FORGERIES[name](bound_before)
    got = outcome(bound_before.bind)

    assert got[:2] == expected[:2]
    if expected[0] == "raised":
        assert got[2] == expected[2]
    else:
        assert got[1] == expected[1]


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_forgery_after_a_resolve_has_the_outcome_of_a_first_resolve(name: str) -> None:
    def resolve_all(world: World, plan: Any) -> Any:
        return [
            resolve_executor_plans(plan, world.target, binding, "target") for binding in world.target_bindings
        ]

    never_resolved = World()
    plan = never_resolved.bind()
    FORGERIES[name](never_resolved)
    expected = outcome(lambda: resolve_all(never_resolved, plan))

    resolved_before = World()
    plan_before = resolved_before.bind()
    resolve_all(resolved_before, plan_before)
    FORGERIES[name](resolved_before)
    got = outcome(lambda: resolve_all(resolved_before, plan_before))

    assert got[:2] == expected[:2]
    if expected[0] == "raised":
        assert got[2] == expected[2]
    else:
        assert got[1] == expected[1]


def test_the_forgeries_are_not_vacuous() -> None:
    # Most forgeries must be refused on objects never bound, and the accepted ones must change
    # the plan: otherwise the comparisons above would prove nothing about remembered proofs.
    unforged = World().bind()
    refused = []
    for name, apply in FORGERIES.items():
        world = World()
        apply(world)
        result = outcome(world.bind)
        if result[0] == "raised":
            refused.append(name)
        else:
            assert result[1] != unforged, name
    assert len(refused) >= len(FORGERIES) // 2, refused


def test_dataclass_replace_of_a_forged_binding_is_a_new_value() -> None:
    world = World()
    world.bind()
    forged = dataclasses.replace(world.target_bindings[0], lease_id="other-lease")
    bindings = (forged,) + tuple(world.target_bindings[1:])
    assert outcome(lambda: world.bind(bindings))[0] == "returned"


# ---------------------------------------------------------------------------------------
# Values derived from an attestation and cached on it (its attested view, executors and rows):
# an in-place forgery of a nested value after a first use must give the outcome of objects whose
# caches were never built. The reference keeps no derived values on an attestation (spec §9.2:
# only maps of the very fragment objects), so edits of those objects are visible to it.

_DERIVED = ("_attested_view", "_derived_cache")


def _attestations(plan: Any) -> list[Any]:
    found = []
    for operation in plan.operations:
        found.extend(fragment.attestation for fragment in (operation.target, operation.source))
    for executor in plan.source_executors + plan.target_executors:
        found.append(executor.attestation)
    return [attestation for attestation in found if attestation is not None]


def _uncached(plan: Any) -> Any:
    """The plan with every derived value dropped from its attestations (as if never used)."""
    for attestation in _attestations(plan):
        for name in _DERIVED:
            attestation.__dict__.pop(name, None)
    return plan


def _evidence_fragment(plan: Any) -> Any:
    return plan.operations[0].target.attestation.evidence.fragments[0]


NESTED: dict[str, Callable[[World, Any], None]] = {
    "evidence fragment address": lambda w, p: forge(_evidence_fragment(p), "address", _evidence_fragment(p).address + 64),
    "evidence fragment nbytes": lambda w, p: forge(_evidence_fragment(p), "nbytes", _evidence_fragment(p).nbytes + 2),
    "evidence fragment worker": lambda w, p: forge(_evidence_fragment(p), "worker_id", "elsewhere"),
    "evidence generation": lambda w, p: forge(p.operations[0].target.attestation.evidence, "generation", 99),
    "placement fragment nbytes": lambda w, p: forge(w.target.parts[0].fragments[0], "nbytes", w.target.parts[0].fragments[0].nbytes + 2),
    "placement fragment offset": lambda w, p: forge(w.source.parts[0].fragments[0], "global_offset", _shift(w.source.parts[0].fragments[0].global_offset)),
    "executor snapshot address": lambda w, p: forge(p.target_executors[0].fragment_snapshots[0], "address", p.target_executors[0].fragment_snapshots[0].address + 64),
    "executor snapshot lease generation": lambda w, p: forge(p.source_executors[0].fragment_snapshots[0], "lease_generation", 7),
    "binding fragment address": lambda w, p: forge(w.target_bindings[0].fragments[0], "address", w.target_bindings[0].fragments[0].address + 64),
    # the objects the exact attested-view cache records (bound_contracts._view_deps)
    "evidence lease id": lambda w, p: forge(p.operations[0].target.attestation.evidence, "lease_id", "other-lease"),
    "evidence fragment equal address": lambda w, p: forge(_evidence_fragment(p), "address", int(str(_evidence_fragment(p).address))),
    "evidence fragment deleted device": lambda w, p: object.__delattr__(_evidence_fragment(p), "device"),
    "placement fragment rank field": lambda w, p: forge(w.target.parts[0].fragments[0].rank, "tp", w.target.parts[0].fragments[0].rank.tp + 1),
    "placement fragment equal offset": lambda w, p: forge(w.target.parts[0].fragments[0], "global_offset", tuple(list(w.target.parts[0].fragments[0].global_offset))),
    "placement part rank": lambda w, p: forge(w.target.parts[0], "rank", dataclasses.replace(w.target.parts[0].rank, dp=1)),
    "placement digest": lambda w, p: forge(w.target, "_digest_cache", "0" * 64),
}


def _revalidate(world: World, plan: Any) -> Any:
    return dataclasses.replace(plan)


def _resolve(world: World, plan: Any) -> Any:
    return [resolve_executor_plans(plan, world.target, binding, "target") for binding in world.target_bindings] + [
        resolve_executor_plans(plan, world.source, binding, "source")
        for binding in world.source_bindings
        if binding.instance_id in {executor.instance_id for executor in plan.source_executors}
    ]


def _project(world: World, plan: Any) -> Any:
    from mooncake.reshard.weight._planner.binding import _build_executor_plans

    return (
        _build_executor_plans((world.source,), world.source_bindings, "source"),
        _build_executor_plans((world.target,), world.target_bindings, "target"),
    )


ACTIONS: dict[str, Callable[[World, Any], Any]] = {"replace": _revalidate, "resolve": _resolve, "project": _project}


@pytest.mark.parametrize("action", sorted(ACTIONS))
@pytest.mark.parametrize("name", sorted(NESTED))
def test_nested_forgery_after_a_use_has_the_outcome_of_uncached_objects(name: str, action: str) -> None:
    run = ACTIONS[action]

    never_used = World()
    plan = never_used.bind()
    NESTED[name](never_used, plan)
    expected = outcome(lambda: run(never_used, _uncached(plan)))

    used_before = World()
    plan_before = used_before.bind()
    used_before.logical.pipeline_routes  # the logical plan's operation views derived once
    for act in ACTIONS.values():  # every cache built once
        assert outcome(lambda: act(used_before, plan_before))[0] == "returned"
    NESTED[name](used_before, plan_before)
    got = outcome(lambda: run(used_before, plan_before))

    assert got[:2] == expected[:2]
    if expected[0] == "raised":
        assert got[2] == expected[2]
    else:
        assert got[1] == expected[1]


@pytest.mark.parametrize("name", sorted(NESTED))
def test_nested_forgery_after_two_revalidations_has_the_outcome_of_uncached_objects(name: str) -> None:
    """An attestation keeps its attested view (exactly: see bound_contracts._VIEW_KEY) from its
    second revalidation on: a forgery after two must still give the never-cached outcome."""
    never_used = World()
    plan = never_used.bind()
    NESTED[name](never_used, plan)
    expected = outcome(lambda: dataclasses.replace(_uncached(plan)))

    used_before = World()
    plan_before = used_before.bind()
    for _ in range(2):
        assert outcome(lambda: dataclasses.replace(plan_before))[0] == "returned"
    kept = [a.__dict__.get("_attested_view") for a in _attestations(plan_before)]
    assert all(type(entry) is tuple and len(entry) == 5 for entry in kept)  # the views are kept
    NESTED[name](used_before, plan_before)
    got = outcome(lambda: dataclasses.replace(plan_before))

    assert got[:2] == expected[:2]
    if expected[0] == "raised":
        assert got[2] == expected[2]
    else:
        assert got[1] == expected[1]

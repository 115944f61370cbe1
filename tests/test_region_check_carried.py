"""The spec §8.4 region proof carried from binding into the new plan's final region recheck
(``bind_regions(..., carry=True)``'s ninth carried item, ``_native.regions_canonical_carried``,
``region_check.recheck_regions(operations, carried)``).

``bind_regions`` proves every region it builds canonical with ``regions_canonical``'s kernel, in
the pass that stores the region's fields, reading each distinct fragment's placement box, tensor
id and binding ``nbytes`` once; the facts list keeps those very objects. The carried check
accepts only the carried regions themselves and reads every adapter value again (identity with
the proven objects). It must accept only where ``regions_canonical`` proves every region, and
binding with and without the carried proof gives equal plans and identical first errors; only the
private bind path passes it (``TransferPlan(...)``, ``replace`` and pickle restore prove again)."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any, Optional, Sequence, Tuple

import pytest
from hypothesis import given, settings

from test_binding_physical import workloads
from test_native_binder_fused_physical import CLASSES, _logical
from test_native_revalidate_carried import _ops, _outcome, _world
from spec_helpers import field_state, forged_instance, store_state

from mooncake.reshard import _native
from mooncake.reshard.contracts.fragments import RuntimeBindingFragment
from mooncake.reshard.weight import TransferPlan
from mooncake.reshard.weight._planner import binding as binding_module
from mooncake.reshard.weight._planner import bound_contracts as bc
from mooncake.reshard.weight._planner import region_check
from mooncake.reshard.weight._planner.contracts import TransferRegion
from mooncake.reshard.weight._planner.fragments import BoundWeightFragment
from mooncake.reshard.weight.planner import bind_logical_transfer_plan
from mooncake.reshard.weight.types import PlacementFragment

PLAIN = region_check._PLAIN_TYPES


def _bind(logical: Sequence[Any], targets: Any, sources: Any, prove: Any = True) -> Optional[Tuple[Any, ...]]:
    return _native.bind_regions(
        *CLASSES, tuple(logical), targets, sources, BoundWeightFragment, RuntimeBindingFragment, 1000, True, prove
    )


def _carried(ops: Sequence[Any]) -> Tuple[Tuple[Any, ...], Any]:
    built = _bind(*_logical(ops))
    assert built is not None
    regions, _selections, _physical, carried = built
    assert carried is not None and len(carried) == 9
    return tuple(regions), carried


def _full(operations: Tuple[Any, ...]) -> bool:
    return _native.regions_canonical(operations, 0, BoundWeightFragment, PLAIN) == len(operations)


def _taken(operations: Tuple[Any, ...], carried: Any) -> bool:
    return _native.regions_canonical_carried(
        operations, carried, BoundWeightFragment, PlacementFragment, RuntimeBindingFragment
    )


def test_carried_proof_is_the_full_proof() -> None:
    operations, carried = _carried(_ops())
    facts = carried[8]
    assert type(facts) is list and len(facts) == 4 * len(carried[1])
    for position, fragment in enumerate(carried[1]):  # the very objects the proof read
        placement, binding = fragment.placement, fragment.binding
        assert facts[4 * position : 4 * position + 4] == [
            placement.tensor_id,
            placement.global_offset,
            placement.local_shape,
            binding.nbytes,
        ]
        assert facts[4 * position + 1] is placement.global_offset and facts[4 * position + 3] is binding.nbytes
    assert _full(operations) and _taken(operations, carried)
    # the scan carry still takes the nine-item tuple
    assert _native.revalidate_scan_carried(
        operations, carried, 1 << 40, 1 << 40, BoundWeightFragment, RuntimeBindingFragment
    ) is not None


@settings(max_examples=80, deadline=None)
@given(workloads())
def test_carried_proof_matches_on_random_regions(drawn: Any) -> None:
    ops, _budget = drawn
    built = _bind(*_logical(ops))
    assert built is not None
    regions, _selections, _physical, carried = built
    operations = tuple(regions)
    if carried is None or carried[8] is None:
        return
    # a proof is carried only for regions the full predicate proves, and is then taken
    assert _full(operations)
    assert _taken(operations, carried)


# Spec 8.4 rules broken in a logical operation's own fields (a forged plan reaching bind): the
# proof is not carried (the scan carry may still be), and the full predicate finds the region.
@pytest.mark.parametrize(
    "name, value",
    [
        ("source_base_offset", 8),
        ("target_base_offset", -4),
        ("inner_bytes", 4),
        ("overlap_offset", (3, 0)),
        ("overlap_shape", (2, 9)),
        ("outer_loop_counts", (3,)),
        ("source_strides", (8,)),
        ("tensor_id", "other"),
        ("tensor_id", ""),
        ("overlap_offset", (0,) * 33),
        ("inner_bytes", 1 << 64),
        ("source_base_offset", True),
        ("overlap_shape", [2, 4]),
    ],
)
def test_unproven_regions_carry_no_proof(name: str, value: Any) -> None:
    ops = _ops()
    object.__setattr__(ops[2], name, value)
    built = _bind(*_logical(ops))
    assert built is not None
    operations, carried = tuple(built[0]), built[3]
    assert carried is None or carried[8] is None
    assert not _full(operations)


@pytest.mark.parametrize(
    "owner, name, value",
    [
        ("placement", "global_offset", (1, 0)),
        ("placement", "local_shape", (4, 8)),
        ("placement", "tensor_id", "x"),
        ("placement", "global_offset", (0, 0, 0)),
        ("binding", "nbytes", 24),
        ("binding", "nbytes", 1 << 70),
        ("binding", "nbytes", 64.0),
    ],
)
def test_unproven_fragments_carry_no_proof(owner: str, name: str, value: Any) -> None:
    ops = _ops()
    object.__setattr__(getattr(ops[2].source, owner), name, value)
    built = _bind(*_logical(ops))
    assert built is not None
    operations, carried = tuple(built[0]), built[3]
    assert carried is None or carried[8] is None
    assert not _full(operations)


def _equal_copy(value: Any) -> Any:
    if type(value) is tuple:
        return tuple(list(value))
    if type(value) is int:
        return int(str(value))  # beyond the small-int cache: a distinct equal object
    return "".join(list(value))


@pytest.mark.parametrize("name", ["tensor_id", "global_offset", "local_shape", "nbytes"])
@pytest.mark.parametrize("which", [0, 2])
def test_adapter_values_are_read_again(name: str, which: int) -> None:
    # an edited value (the adapter's placement or binding) declines, even an equal copy of it;
    # the full predicate then decides (it accepts the equal copy, refuses the changed value)
    for change in ("equal", "other"):
        operations, carried = _carried(_ops())
        fragment = operations[which].target
        owner = fragment.binding if name == "nbytes" else fragment.placement
        old = getattr(owner, name)
        if change == "equal":
            new = _equal_copy(old)
            assert new == old and (new is not old or type(new) is int)
        else:
            new = old + 8 if name == "nbytes" else ("z" if name == "tensor_id" else tuple(x + 1 for x in old))
        object.__setattr__(owner, name, new)
        if new is old:
            continue  # a cached small int: the very object, nothing changed
        assert not _taken(operations, carried)
        assert _full(operations) == (change == "equal")


def test_swapped_or_missing_parts_decline() -> None:
    class Binding(RuntimeBindingFragment):
        pass

    class Placement(PlacementFragment):
        pass

    for part, cls in (("binding", Binding), ("placement", Placement)):
        operations, carried = _carried(_ops())
        fragment = operations[1].target
        held = getattr(fragment, part)
        forged = forged_instance(cls, dict(field_state(held)))
        object.__setattr__(fragment, part, forged)
        assert not _taken(operations, carried)
        operations, carried = _carried(_ops())
        object.__delattr__(operations[1].target, part)
        assert not _taken(operations, carried)
        # an equal but distinct part (same value objects inside): still the values proven
        operations, carried = _carried(_ops())
        fragment = operations[1].target
        held = getattr(fragment, part)
        twin = forged_instance(type(held), dict(field_state(held)))
        object.__setattr__(fragment, part, twin)
        assert _taken(operations, carried) and _full(operations)
    for name in ("tensor_id", "global_offset", "local_shape"):
        operations, carried = _carried(_ops())
        object.__delattr__(operations[3].source.placement, name)
        assert not _taken(operations, carried)
    operations, carried = _carried(_ops())
    object.__delattr__(operations[3].source.binding, "nbytes")
    assert not _taken(operations, carried)
    operations, carried = _carried(_ops())
    store_state(operations[3].source.placement, replace=True, state={})
    assert not _taken(operations, carried)


def test_other_operations_decline() -> None:
    operations, carried = _carried(_ops())
    assert not _taken(operations[::-1], carried)
    assert not _taken(operations[:-1], carried)
    assert not _taken(operations + operations[:1], carried)
    assert not _taken((copy.copy(operations[0]),) + operations[1:], carried)
    assert not _taken((), carried)


def test_forged_carried_facts_decline() -> None:
    operations, carried = _carried(_ops())
    facts = carried[8]
    forgeries: list[Any] = [
        carried[:8],
        carried + (facts,),
        carried[:8] + (None,),
        carried[:8] + (tuple(facts),),
        carried[:8] + (facts[:-1],),
        carried[:8] + (facts + [0],),
        carried[:8] + ([],),
        (list(carried[0]) + [operations[0]],) + carried[1:],
        (tuple(carried[0]),) + carried[1:],
        carried[:1] + (tuple(carried[1]),) + carried[2:],
        carried[:1] + (carried[1] + [carried[1][0]],) + carried[2:],
    ]
    for k in range(len(facts)):
        changed = list(facts)
        changed[k] = _equal_copy(changed[k]) if type(changed[k]) is not int else changed[k] + 0.0
        forgeries.append(carried[:8] + (changed,))
    for forged in forgeries:
        assert not _taken(operations, forged), forged
    not_bound = list(carried[1])
    not_bound[0] = operations[0].target.placement
    assert not _taken(operations, carried[:1] + (not_bound,) + carried[2:])
    with pytest.raises(TypeError):
        _taken(operations, list(carried))


def test_proof_only_when_asked() -> None:
    logical, targets, sources = _logical(_ops())
    built = _bind(logical, targets, sources, False)
    assert built is not None and len(built[3]) == 9 and built[3][8] is None
    ten = _native.bind_regions(
        *CLASSES, logical, targets, sources, BoundWeightFragment, RuntimeBindingFragment, 1000, True
    )
    assert ten is not None and len(ten[3]) == 9 and ten[3][8] is None
    # no carried scan, no proof
    off = _bind(logical, targets, sources, True)
    assert off is not None and off[3][8] is not None
    off = _native.bind_regions(
        *CLASSES, logical, targets, sources, BoundWeightFragment, RuntimeBindingFragment, 1000, False, True
    )
    assert off is not None and off[3] is None
    for flag in (1, None, "True", 0.0):
        with pytest.raises(TypeError):
            _bind(logical, targets, sources, flag)
    with pytest.raises(TypeError):
        _native.bind_regions(
            *CLASSES, logical, targets, sources, BoundWeightFragment, RuntimeBindingFragment, 1000, True, True, True
        )


def test_hostile_arguments() -> None:
    operations, carried = _carried(_ops())
    call = _native.regions_canonical_carried
    with pytest.raises(TypeError):
        call(list(operations), carried, BoundWeightFragment, PlacementFragment, RuntimeBindingFragment)
    with pytest.raises(TypeError):
        call(operations, carried, "cls", PlacementFragment, RuntimeBindingFragment)
    with pytest.raises(TypeError):
        call(operations, carried, BoundWeightFragment, PlacementFragment)
    with pytest.raises(TypeError):
        call(operations, None, BoundWeightFragment, PlacementFragment, RuntimeBindingFragment)
    # other classes: every fragment declines
    assert not call(operations, carried, TransferRegion, PlacementFragment, RuntimeBindingFragment)
    assert not call(operations, carried, BoundWeightFragment, RuntimeBindingFragment, RuntimeBindingFragment)
    assert not call(operations, carried, BoundWeightFragment, PlacementFragment, PlacementFragment)
    assert call(operations, carried, BoundWeightFragment, PlacementFragment, RuntimeBindingFragment)


def test_recheck_regions_takes_the_proof_only_when_it_holds() -> None:
    operations, carried = _carried(_ops())
    region_check.recheck_regions(operations, carried)
    region_check.recheck_regions(operations, None)
    # an edited box after the proof: the carried check declines and the full recheck raises
    # exactly what it raises without the proof
    object.__setattr__(operations[2].source.placement, "global_offset", (1, 0))
    errors = []
    for given_carried in (carried, None):
        with pytest.raises(ValueError) as info:
            region_check.recheck_regions(operations, given_carried)
        errors.append(str(info.value))
    assert errors[0] == errors[1]
    for odd in (carried[:8], carried[:8] + (None,), list(carried), 0):
        with pytest.raises(ValueError):
            region_check.recheck_regions(operations, odd)


# ---------------------------------------------------------------------------------------
# Binding with and without the carried proof


def _carry(monkeypatch: pytest.MonkeyPatch, carry: bool) -> None:
    """Whether the proof is carried (the scan carry stays either way): binding asks for it at
    every size, or never (the region recheck then proves everything)."""
    monkeypatch.setattr(binding_module, "_PROVE_MIN", 0 if carry else 1 << 62)


def _not_carried(monkeypatch: pytest.MonkeyPatch) -> None:
    _carry(monkeypatch, False)


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    seen: list[Any] = []
    original = _native.regions_canonical_carried

    def spy(*args: Any) -> Any:
        result = original(*args)
        seen.append(result)
        return result

    monkeypatch.setattr(region_check, "_regions_canonical_carried", spy)
    return seen


def _kind(logical: Any, targets: Any, sources: Any) -> Any:
    """``_outcome`` for inputs built anew per run (their host addresses differ): a plan as the
    number of its operations, a failure as its type and message."""
    outcome = _outcome(logical, targets, sources)
    return ("plan", len(outcome.operations)) if isinstance(outcome, TransferPlan) else outcome


@pytest.mark.parametrize("whole_targets", [True, False])
def test_binding_with_and_without_the_carried_proof_agrees(
    monkeypatch: pytest.MonkeyPatch, whole_targets: bool
) -> None:
    logical, targets, sources = _world(whole_targets)
    with monkeypatch.context() as patch:
        _carry(patch, True)
        seen = _spy(patch)
        carried = _outcome(logical, targets, sources)
        assert seen == [True]  # taken, and accepted
    with monkeypatch.context() as patch:
        _not_carried(patch)
        seen = _spy(patch)
        plain = _outcome(logical, targets, sources)
        assert seen == []
    assert isinstance(carried, TransferPlan) and carried == plain
    assert carried.operations == plain.operations
    assert carried.target_executors == plain.target_executors
    assert carried.source_executors == plain.source_executors


def test_proof_from_the_size_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    logical, targets, sources = _world()
    count = len(logical.operations)
    for threshold, taken in ((count, [True]), (count + 1, []), (binding_module._PROVE_MIN, [])):
        with monkeypatch.context() as patch:
            patch.setattr(binding_module, "_PROVE_MIN", threshold)
            seen = _spy(patch)
            bind_logical_transfer_plan(logical, targets, source_bindings=sources)
            assert seen == taken, threshold
    assert binding_module._PROVE_MIN > count


def test_only_the_bind_path_takes_the_proof(monkeypatch: pytest.MonkeyPatch) -> None:
    logical, targets, sources = _world()
    monkeypatch.setattr(binding_module, "_PROVE_MIN", 0)
    plan = bind_logical_transfer_plan(logical, targets, source_bindings=sources)
    with monkeypatch.context() as patch:
        seen = _spy(patch)
        assert dataclasses.replace(plan) == plan
        assert pickle.loads(pickle.dumps(plan)) == plan
        assert copy.deepcopy(plan) == plan
        values = {f.name: getattr(plan, f.name) for f in dataclasses.fields(plan) if f.init}
        assert TransferPlan(**values) == plan
        assert seen == []


def _forge_logical(logical: Any, name: str, value: Any) -> None:
    object.__setattr__(logical.operations[1], name, value)


def _forge_placement(logical: Any, targets: Any, name: str, value: Any) -> None:
    object.__setattr__(logical.operations[1].target, name, value)


def _forge_binding(logical: Any, targets: Any, name: str, value: Any) -> None:
    object.__setattr__(targets[0].fragments[0], name, value)


FORGERIES = [
    ("logical", "source_base_offset", 4),
    ("logical", "target_base_offset", 1 << 40),
    ("logical", "inner_bytes", 4),
    ("logical", "overlap_shape", (1, 1)),
    ("logical", "outer_loop_counts", (5,)),
    ("logical", "tensor_id", "w"),
    ("placement", "global_offset", (1, 0)),
    ("placement", "local_shape", (2, 12)),
    ("placement", "tensor_id", "w"),
    ("binding", "nbytes", 8),
    ("binding", "nbytes", 1 << 70),
]


@pytest.mark.parametrize("owner, name, value", FORGERIES)
def test_forged_inputs_give_the_same_first_error(
    monkeypatch: pytest.MonkeyPatch, owner: str, name: str, value: Any
) -> None:
    outcomes = []
    for carry in (True, False):
        logical, targets, sources = _world()
        if owner == "logical":
            _forge_logical(logical, name, value)
        elif owner == "placement":
            _forge_placement(logical, targets, name, value)
        else:
            _forge_binding(logical, targets, name, value)
        with monkeypatch.context() as patch:
            _carry(patch, carry)
            outcomes.append(_kind(logical, targets, sources))
    assert outcomes[0] == outcomes[1], (owner, name, value, outcomes)


@pytest.mark.parametrize(
    "part, name, value",
    [
        ("placement", "global_offset", (1, 0)),
        ("placement", "local_shape", (4, 6)),
        ("placement", "tensor_id", "elsewhere"),
        ("binding", "nbytes", 1 << 12),
        ("binding", "nbytes", "equal"),
    ],
)
def test_values_edited_after_bind_regions_are_read_again(
    monkeypatch: pytest.MonkeyPatch, part: str, name: str, value: Any
) -> None:
    # An adapter value the proof used, edited while the new plan is revalidated (here: right
    # before the in-place step, i.e. after bind_regions; the coverage step after it is not run
    # in a sealed call: bound_contracts._sealed_coverage_holds): the recheck sees the edit
    # exactly as the full recheck does (same outcome with and without the carried proof).
    # (The in-place pass, the injection point, is skipped in a sealed call whose sides' instances
    # are apart, bound_contracts._sealed_spaces_apart: made false here, so that it runs.)
    monkeypatch.setattr(bc, "_sealed_spaces_apart", lambda source, target: False)
    outcomes = []
    for carry in (True, False):
        logical, targets, sources = _world()
        original = _native.revalidate_spaces

        def edit(*args: Any, _original: Any = original) -> Any:
            fragment = args[0][0]  # the first distinct bound fragment
            owner = getattr(fragment, part)
            new = _equal_copy(getattr(owner, name)) if value == "equal" else value
            object.__setattr__(owner, name, new)
            return _original(*args)

        with monkeypatch.context() as patch:
            _carry(patch, carry)
            patch.setattr(binding_module._native, "revalidate_spaces", edit)
            seen = _spy(patch)
            outcomes.append(_kind(logical, targets, sources))
            if carry and value != "equal":
                assert seen == [False]  # the carried proof was offered and declined
    assert outcomes[0] == outcomes[1], (part, name, value, outcomes)

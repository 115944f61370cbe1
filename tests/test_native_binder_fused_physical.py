"""``_native.bind_regions`` with nine arguments (``..., bound_cls, runtime_cls, budget``): the
regions and selections are the seven-argument call's, and the third item decides binding step 9
(spec §12.6) in the pass that builds the regions: it is True only where
``_native.physical_whole_targets`` accepts the very regions (with a positive budget and exact
binding / placement classes), and True wherever that accepts them with those classes; None
otherwise (binding then runs ``_validate_target_physical_ranges`` on the regions, as before).
Binding with the fused decision and without it gives equal plans and identical first errors."""

from __future__ import annotations

import dataclasses
from typing import Any, List, Optional, Sequence, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_executor import HostMemory, host_bindings, tp_placement
from spec_helpers import field_state, forged_instance, store_state
from test_binding_physical import bound, region, workloads
from spec_helpers import field_state, forged_copy, forged_instance

from mooncake.reshard import _native
from mooncake.reshard.contracts.fragments import RuntimeBindingFragment
from mooncake.reshard.weight import StoredFragmentSnapshot
from mooncake.reshard.weight._planner import binding as binding_module
from mooncake.reshard.weight._planner import bound_validation
from mooncake.reshard.weight._planner.contracts import TransferRegion
from mooncake.reshard.weight._planner.fragments import BoundWeightFragment
from mooncake.reshard.weight.planner import bind_logical_transfer_plan, plan_placement_transfer
from mooncake.reshard.weight.types import PlacementFragment

CLASSES = (TransferRegion, PlacementFragment, StoredFragmentSnapshot)
U64 = (1 << 64) - 1


def _logical(ops: Sequence[Any]) -> Tuple[Tuple[Any, ...], dict[str, Any], dict[str, Any]]:
    """Logical operations (placement fragments as source and target) whose bound tables map
    back to the bound fragments of ``ops`` (regions of ``test_binding_physical``)."""
    logical = []
    targets: dict[str, Any] = {}
    sources: dict[str, Any] = {}
    for op in ops:
        plain = forged_copy(op, source=op.source.placement, target=op.target.placement)
        targets[op.target.placement.placement_fragment_id] = op.target
        sources[op.source.placement.placement_fragment_id] = op.source
        logical.append(plain)
    return tuple(logical), targets, sources


def _exact_classes(regions: Sequence[Any]) -> bool:
    return all(
        type(op.target) is BoundWeightFragment
        and type(field_state(op.target).get("binding")) is RuntimeBindingFragment
        and type(field_state(op.target).get("placement")) is PlacementFragment
        for op in regions
    )


def _agree(logical: Tuple[Any, ...], targets: Any, sources: Any, budget: Any = 1_000_000) -> Optional[bool]:
    """The nine-argument call agrees with the seven-argument one and physical_whole_targets;
    returns its physical decision."""
    fused = _native.bind_regions(
        *CLASSES, logical, targets, sources, BoundWeightFragment, RuntimeBindingFragment, budget
    )
    plain = _native.bind_regions(*CLASSES, logical, targets, sources, BoundWeightFragment)
    if plain is None:
        assert fused is None
        return None
    regions, selections, physical = fused
    assert selections == plain[1]
    assert len(regions) == len(plain[0])
    for got, want in zip(regions, plain[0]):
        assert type(got) is type(want) and list(field_state(got)) == list(field_state(want))
        assert all(field_state(got)[k] is field_state(want)[k] for k in field_state(want))
    separate = _native.physical_whole_targets(regions, TransferRegion, BoundWeightFragment, budget)
    positive = type(budget) is int and budget > 0
    assert physical in (True, None)
    if physical is True:
        assert separate is True and positive
    elif separate is True and positive:
        assert not _exact_classes(regions)  # only the stricter class check declines more
    return physical


def whole(name: str, address: int, rows: int = 2, cols: int = 4, **kwargs: Any) -> Any:
    fragment = bound(name, (0, 0), (rows, cols), address, tensor=f"t-{name}", **kwargs)
    return region(fragment, (0, 0), (rows, cols))


def test_genuine_whole_disjoint_regions_are_decided() -> None:
    ops = [whole("a", 4096), whole("b", 8192), whole("c", 4096, worker="w1")]
    assert _agree(*_logical(ops)) is True
    assert _agree(*_logical([])) is True
    # overlapping extents in one space, one target written twice, a partial box: declined
    assert _agree(*_logical([whole("a", 4096), whole("b", 4096 + 8)])) is None
    same = whole("a", 4096)
    assert _agree(*_logical([same, same])) is None
    fragment = bound("p", (0, 0), (2, 4), 1 << 20)
    assert _agree(*_logical([region(fragment, (0, 0), (2, 2)), region(fragment, (0, 2), (2, 2))])) is None


def test_budget_must_be_a_positive_int() -> None:
    logical = _logical([whole("a", 4096)])
    assert _agree(*logical, 1) is True
    assert _agree(*logical, 1 << 200) is True
    for budget in (0, -1, -(1 << 200), True, 1.0, None, "1"):
        assert _agree(*logical, budget) is None


def test_address_range_must_fit_in_64_bits() -> None:
    fragment_bytes = 2 * 2 * 4
    assert _agree(*_logical([whole("a", U64 - fragment_bytes)])) is True
    for address in (U64 - fragment_bytes + 1, -1, 1 << 64, 1 << 100, True, 4096.0, "4096"):
        op = whole("a", 4096)
        object.__setattr__(op.target.binding, "address", address)
        assert _agree(*_logical([op])) is None
    for nbytes in (0, -16, 1 << 64, True):
        op = whole("a", 4096)
        object.__setattr__(op.target.binding, "nbytes", nbytes)
        assert _agree(*_logical([op])) is None


class _BindingSubclass(RuntimeBindingFragment):
    pass


class _PlacementSubclass(PlacementFragment):
    pass


def _subclassed(value: Any, cls: type) -> Any:
    return forged_instance(cls, field_state(value))


@pytest.mark.parametrize(
    ("owner", "name", "value"),
    [
        ("target", "instance_id", ["i0"]),
        ("binding", "worker_id", 7),
        ("binding", "device", None),
        ("binding", "fragment_id", b"a"),
        ("placement", "tensor_id", ("t",)),
        ("target", "lease_generation", "1"),
        ("placement", "aliases", ["x"]),
        ("placement", "aliases", ("t-a",)),
        ("placement", "aliases", None),
        ("placement", "global_offset", [0, 0]),
        ("placement", "local_shape", (2.0, 4)),
        ("op", "overlap_offset", [0, 0]),
        ("op", "overlap_offset", (0, 1)),
        ("op", "overlap_shape", (2, True)),
    ],
)
def test_forged_fields_decline_as_physical_whole_targets_does(owner: str, name: str, value: Any) -> None:
    op = whole("a", 4096)
    logical, targets, sources = _logical([op, whole("b", 8192)])
    if owner == "op":
        object.__setattr__(logical[0], name, value)
    elif owner == "target":
        object.__setattr__(op.target, name, value)
    else:
        object.__setattr__(getattr(op.target, owner), name, value)
    assert _agree(logical, targets, sources) is None


def test_inexact_or_missing_parts_decline() -> None:
    for change in ("binding", "placement", "target", "missing", "text"):
        op = whole("a", 4096)
        logical, targets, sources = _logical([op])
        key = next(iter(targets))
        if change == "binding":
            object.__setattr__(op.target, "binding", _subclassed(op.target.binding, _BindingSubclass))
        elif change == "placement":
            object.__setattr__(op.target, "placement", _subclassed(op.target.placement, _PlacementSubclass))
        elif change == "target":
            targets[key] = _subclassed(op.target, type("Bound", (BoundWeightFragment,), {}))
        elif change == "missing":
            object.__delattr__(op.target.binding, "device")
        else:
            targets[key] = "not a bound fragment"
        assert _agree(logical, targets, sources) is None


def test_hostile_arguments() -> None:
    logical, targets, sources = _logical([whole("a", 4096)])
    for runtime_cls in ("RuntimeBindingFragment", None, 3):
        with pytest.raises(TypeError):
            _native.bind_regions(*CLASSES, logical, targets, sources, BoundWeightFragment, runtime_cls, 1)
    with pytest.raises(TypeError):
        _native.bind_regions(*CLASSES, logical, targets, sources, BoundWeightFragment, RuntimeBindingFragment)
    with pytest.raises(TypeError):
        _native.bind_regions(
            *CLASSES, logical, targets, sources, BoundWeightFragment, RuntimeBindingFragment, 1, 2
        )
    # A runtime class the bindings are not of: declined, not an error.
    fused = _native.bind_regions(*CLASSES, logical, targets, sources, BoundWeightFragment, PlacementFragment, 1)
    assert fused is not None and fused[2] is None
    assert _native.bind_regions(*CLASSES, (object(),), targets, sources, BoundWeightFragment,
                                RuntimeBindingFragment, 1) is None


@st.composite
def whole_workloads(draw: Any) -> List[Any]:
    ops = []
    for number in range(draw(st.integers(0, 6))):
        rows = draw(st.integers(1, 3))
        cols = draw(st.integers(1, 3))
        address = draw(st.one_of(st.integers(0, 96), st.integers(U64 - 64, U64)))
        fragment = bound(f"f{number}", (0, 0), (rows, cols), 4096, tensor=f"t{number}",
                         worker=draw(st.sampled_from(["w0", "w1"])), device=draw(st.sampled_from(["cpu", "gpu"])),
                         instance=draw(st.sampled_from(["i0", "i1"])))
        object.__setattr__(fragment.binding, "address", address)  # past the constructor's checks
        ops.append(region(fragment, (0, 0), (rows, cols)))
    if ops and draw(st.booleans()):
        ops.append(ops[draw(st.integers(0, len(ops) - 1))])  # one target written twice
    return ops


@settings(max_examples=300, deadline=None)
@given(whole_workloads())
def test_whole_workloads_decide_as_physical_whole_targets(operations: List[Any]) -> None:
    _agree(*_logical(operations))


@settings(max_examples=200, deadline=None)
@given(workloads())
def test_partial_workloads_decide_as_physical_whole_targets(workload: Tuple[List[Any], int]) -> None:
    operations, budget = workload
    _agree(*_logical(operations), budget)


# ---------------------------------------------------------------------------------------
# Binding with and without the fused decision


def _world(whole_targets: bool = True) -> Tuple[Any, Any, Any]:
    """Each target fragment written whole by one operation (the pass decides step 9), or in
    pieces (it declines; the Python check decides)."""
    source = tp_placement(2, prefix="s", dp=2, shape=(4, 6), tensors=("v", "w"))
    target = tp_placement(2 if whole_targets else 3, prefix="t", shape=(4, 6), tensors=("v", "w"))
    logical = plan_placement_transfer(source, target)
    memory = HostMemory()
    return logical, host_bindings(target, memory, prefix="dst"), host_bindings(source, memory, prefix="src")


def _separate(monkeypatch: pytest.MonkeyPatch) -> None:
    """Binding as before the fusion: bind_regions' physical decision is never True."""
    original = _native.bind_regions

    def seven_only(*args: Any) -> Any:
        built = original(*args[:7])
        return None if built is None else (built[0], built[1], None)

    monkeypatch.setattr(binding_module._native, "bind_regions", seven_only)


def _outcome(logical: Any, targets: Any, sources: Any) -> Any:
    try:
        return bind_logical_transfer_plan(logical, targets, source_bindings=sources)
    except Exception as exc:  # the first failure, compared by type and message
        return (type(exc), str(exc))


@pytest.mark.parametrize("whole_targets", [True, False])
def test_binding_with_and_without_the_fused_decision_agrees(monkeypatch: pytest.MonkeyPatch, whole_targets: bool) -> None:
    logical, targets, sources = _world(whole_targets)
    fused = _outcome(logical, targets, sources)
    with monkeypatch.context() as patch:
        _separate(patch)
        separate = _outcome(logical, targets, sources)
    assert isinstance(fused, type(separate)) and fused == separate
    assert fused.target_executors == separate.target_executors
    assert fused.source_executors == separate.source_executors
    assert dataclasses.replace(fused) == fused


def _overlapping(targets: Any) -> Tuple[Any, ...]:
    """Target bindings moved into one instance whose views overlap (a §12.6 conflict)."""
    first = targets[0]
    out = [first]
    for binding in targets[1:]:
        fragments = tuple(
            dataclasses.replace(fragment, address=other.address, storage_address=other.storage_address)
            for fragment, other in zip(binding.fragments, first.fragments)
        )
        out.append(dataclasses.replace(binding, instance_id=first.instance_id, fragments=fragments))
    return tuple(out)


@pytest.mark.parametrize("whole_targets", [True, False])
@pytest.mark.parametrize("forgery", ["overlap", "address", "aliases", "nbytes", "worker"])
def test_forged_bindings_give_the_same_first_failure(
    monkeypatch: pytest.MonkeyPatch, forgery: str, whole_targets: bool
) -> None:
    logical, targets, sources = _world(whole_targets)
    if forgery == "overlap":
        targets = _overlapping(targets)
    else:
        fragment = targets[0].fragments[0]
        value = {"address": 1 << 64, "nbytes": 0, "worker": 7}.get(forgery)
        if forgery == "aliases":
            placement_fragment = logical.target_placement.fragments[0]
            object.__setattr__(placement_fragment, "aliases", ("v",))
        else:
            object.__setattr__(fragment, {"worker": "worker_id"}.get(forgery, forgery), value)
    fused = _outcome(logical, targets, sources)
    with monkeypatch.context() as patch:
        _separate(patch)
        separate = _outcome(logical, targets, sources)
    assert fused == separate
    if forgery in ("address", "nbytes", "worker"):
        assert isinstance(fused, tuple)  # refused, with the same first failure
    # (overlap: the moved views sit on distinct workers; aliases: a declared alias is tolerated,
    # and the pass declines it to the Python check: both accepted alike)


def test_the_physical_check_runs_only_when_the_pass_did_not_decide(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: List[Any] = []
    original = bound_validation._validate_target_physical_ranges

    def counting(operations: Any, *, max_segment_checks: int = 1_000_000) -> None:
        calls.append(max_segment_checks)
        original(operations, max_segment_checks=max_segment_checks)

    monkeypatch.setattr(bound_validation, "_validate_target_physical_ranges", counting)
    logical, targets, sources = _world()
    bind_logical_transfer_plan(logical, targets, source_bindings=sources)
    assert calls == []  # decided in step 8's pass
    partial = _world(whole_targets=False)
    bind_logical_transfer_plan(partial[0], partial[1], source_bindings=partial[2])
    assert calls == [partial[0].planning_limits.max_total_lowered_segments]  # declined: run once
    calls.clear()
    _separate(monkeypatch)
    bind_logical_transfer_plan(logical, targets, source_bindings=sources)
    assert calls == [logical.planning_limits.max_total_lowered_segments]


@pytest.mark.parametrize("budget", [0, -1, True, 2.5, None, "many", 1 << 70])
def test_forged_segment_budget_gives_the_same_outcome(monkeypatch: pytest.MonkeyPatch, budget: Any) -> None:
    logical, targets, sources = _world()
    object.__setattr__(logical.planning_limits, "max_total_lowered_segments", budget)
    fused = _outcome(logical, targets, sources)
    with monkeypatch.context() as patch:
        _separate(patch)
        separate = _outcome(logical, targets, sources)
    assert fused == separate


@pytest.mark.parametrize("missing_binding", [False, True])
def test_forged_limits_object_gives_the_same_first_failure(monkeypatch: pytest.MonkeyPatch, missing_binding: bool) -> None:
    """A logical plan whose planning_limits was replaced in place by a foreign object (and,
    optionally, whose first operation names a target no binding covers: step 8's message): the
    same first failure on both paths."""
    logical, targets, sources = _world()
    object.__setattr__(logical, "planning_limits", object())
    if missing_binding:
        first = logical.operations[0]
        forged = forged_instance(PlacementFragment, dict(field_state(first.target)))
        store_state(forged, {"placement_fragment_id": "nowhere"})
        object.__setattr__(first, "target", forged)
    outcomes = []
    for separate in (False, True):
        with monkeypatch.context() as patch:
            if separate:
                _separate(patch)
            outcomes.append(_outcome(logical, targets, sources))
    assert outcomes[0] == outcomes[1]
    assert isinstance(outcomes[0], tuple)

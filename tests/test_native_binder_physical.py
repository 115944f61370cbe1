"""``_native.physical_whole_targets``: the C accept path of the spec §12.6 check.

It may only ACCEPT (``True``: the check has nothing to report) or DECLINE (``None``: the Python
grouping and the sweep decide). Tested against a brute-force oracle (pairwise extent overlap per
address space) and the literal transcription of the rule in ``test_binding_physical``, and with
hostile inputs (wrong containers and classes, huge or negative ints, bools, forged fields)."""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spec_helpers import field_state, forged_instance, raises
from test_binding_physical import bound, oracle, region, workloads

from mooncake.reshard import _native
from mooncake.reshard.weight._planner import bound_validation
from mooncake.reshard.weight._planner.bound_validation import (
    _check_target_physical_ranges,
    _sweep_target_physical_ranges,
    _validate_target_physical_ranges,
)
from mooncake.reshard.weight.planner import BoundWeightFragment, TransferRegion

U64 = (1 << 64) - 1


def quick(operations: Any, budget: Any = 1_000_000) -> Optional[bool]:
    result: Optional[bool] = _native.physical_whole_targets(operations, TransferRegion, BoundWeightFragment, budget)
    return result


def whole(name: str, address: int, rows: int = 2, cols: int = 4, **kwargs: Any) -> Any:
    fragment = bound(name, (0, 0), (rows, cols), address, tensor=f"t-{name}", **kwargs)
    return region(fragment, (0, 0), (rows, cols))


def forged(op: Any, owner: str, name: str, value: Any) -> Any:
    """``op`` with one field of the region, its target, binding or placement replaced in place."""
    if owner == "op":
        object.__setattr__(op, name, value)
    elif owner == "target":
        object.__setattr__(op.target, name, value)
    else:
        object.__setattr__(getattr(op.target, owner), name, value)
    return op


def brute_force(operations: Sequence[Any]) -> bool:
    """True when every operation writes its own whole alias-free fragment and no two extents of
    one address space overlap (what the accept path must decide)."""
    targets = [op.target for op in operations]
    if len({id(t) for t in targets}) != len(targets):
        return False
    for op in operations:
        t = op.target
        if (op.overlap_offset, op.overlap_shape) != (t.global_offset, t.local_shape) or t.placement.aliases:
            return False
    for i, a in enumerate(targets):
        for b in targets[:i]:
            same_space = (a.instance_id, a.worker_id, a.device) == (b.instance_id, b.worker_id, b.device)
            if same_space and a.address < b.address + b.nbytes and b.address < a.address + a.nbytes:
                return False
    return True


# ---------------------------------------------------------------------------------------
# Accepts exactly the whole, disjoint case


def test_accepts_whole_disjoint_fragments_and_empty_input() -> None:
    ops = [whole("a", 4096), whole("b", 4096 + 16), whole("c", 4096, device="gpu")]
    assert quick(ops) is True
    assert quick(tuple(ops)) is True
    assert quick([]) is True
    assert quick(()) is True


def test_declines_overlap_partial_shared_target_and_aliases() -> None:
    a = whole("a", 4096)
    assert quick([a, whole("b", 4096 + 15)]) is None  # one byte overlaps
    assert quick([a, whole("b", 4096 + 15, worker="w1")]) is True  # other address space
    assert quick([a, whole("b", 4096 + 15, instance="i1")]) is True
    fragment = bound("p", (0, 0), (2, 4), 1 << 20)
    assert quick([region(fragment, (0, 0), (2, 2))]) is None  # partial: the sweep decides
    halves = [region(fragment, (0, 0), (2, 2)), region(fragment, (0, 2), (2, 2))]
    assert quick(halves) is None  # one target written by two operations
    assert quick([a, a]) is None
    aliased = whole("x", 1 << 24)
    forged(aliased, "placement", "aliases", ("other",))
    assert quick([aliased]) is None


def test_the_budget_is_never_charged_but_must_be_a_non_negative_int() -> None:
    ops = [whole("a", 4096)]
    assert quick(ops, 0) is True
    assert quick(ops, 1) is True
    assert quick(ops, 1 << 200) is True
    for budget in (-1, -(1 << 200), True, 1.0, None, "1"):
        assert quick(ops, budget) is None


def test_address_range_must_fit_in_64_bits() -> None:
    fragment_bytes = 2 * 2 * 4
    assert quick([whole("a", U64 - fragment_bytes)]) is True  # ends at 2**64 - 1
    assert quick([forged(whole("a", 4096), "binding", "address", U64 - fragment_bytes + 1)]) is None  # 2**64
    assert quick([forged(whole("a", 4096), "binding", "address", 0)]) is True
    for value in (-1, 1 << 64, 1 << 100, True, 4096.0, "4096"):
        assert quick([forged(whole("a", 4096), "binding", "address", value)]) is None
    for value in (0, -16, 1 << 64, True):
        assert quick([forged(whole("a", 4096), "binding", "nbytes", value)]) is None


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
        ("placement", "aliases", None),
        ("placement", "global_offset", [0, 0]),
        ("placement", "local_shape", (2.0, 4)),
        ("op", "overlap_offset", [0, 0]),
        ("op", "overlap_shape", (2, True)),
        ("op", "target", "not a bound fragment"),
    ],
)
def test_forged_fields_decline(owner: str, name: str, value: Any) -> None:
    op = forged(whole("a", 4096), owner, name, value)
    assert quick([op]) is None


def test_missing_attributes_and_subclasses_decline() -> None:
    op = whole("a", 4096)
    object.__delattr__(op.target, "lease_generation")
    assert quick([op]) is None
    op = whole("a", 4096)
    object.__delattr__(op.target.binding, "device")
    assert quick([op]) is None

    class Region(TransferRegion):
        pass

    plain = whole("b", 4096)
    sub = forged_instance(Region, dict(field_state(plain)))
    assert quick([sub]) is None
    assert quick([object(), plain]) is None
    assert quick([None]) is None


def test_hostile_arguments() -> None:
    ops = [whole("a", 4096)]
    for container in ({0: ops[0]}, iter(ops), "ops", None, 3):
        with pytest.raises(TypeError):
            quick(container)
    for cls in (None, "TransferRegion", TransferRegion.__init__):
        with pytest.raises(TypeError):
            _native.physical_whole_targets(ops, cls, BoundWeightFragment, 1)
        with pytest.raises(TypeError):
            _native.physical_whole_targets(ops, TransferRegion, cls, 1)
    with pytest.raises(TypeError):
        _native.physical_whole_targets(ops, TransferRegion, BoundWeightFragment)  # type: ignore[call-arg]
    # A class the regions are not of: declined, not an error.
    assert _native.physical_whole_targets(ops, BoundWeightFragment, BoundWeightFragment, 1) is None


def test_decline_keeps_the_first_failure_of_the_python_rules() -> None:
    a = whole("a", 4096)
    b = whole("b", 4096 + 8)
    with raises("conflicting target physical range: b"):
        _validate_target_physical_ranges([a, b])
    with raises("conflicting target physical range: b"):
        _check_target_physical_ranges([a, b], 10)
    with raises("transfer plan requires a canonical transfer operation"):
        _validate_target_physical_ranges([a, object()])
    with raises("max_segment_checks must be a positive integer"):
        _validate_target_physical_ranges([a], max_segment_checks=0)


def test_accepted_input_skips_the_sweep_and_declined_input_runs_it(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: List[int] = []
    sweep = bound_validation._sweep_target_physical_ranges

    def counting(operations: Sequence[Any], budget: int) -> None:
        calls.append(len(operations))
        sweep(operations, budget)

    monkeypatch.setattr(bound_validation, "_sweep_target_physical_ranges", counting)
    _validate_target_physical_ranges([whole("a", 4096), whole("b", 8192)])
    assert calls == []
    fragment = bound("p", (0, 0), (2, 4), 1 << 20)
    _validate_target_physical_ranges([region(fragment, (0, 0), (2, 2)), region(fragment, (0, 2), (2, 2))])
    assert calls == [2]


# ---------------------------------------------------------------------------------------
# Property tests


@st.composite
def whole_workloads(draw: Any) -> List[Any]:
    ops = []
    for number in range(draw(st.integers(0, 6))):
        rows = draw(st.integers(1, 3))
        cols = draw(st.integers(1, 3))
        address = draw(st.one_of(st.integers(0, 96), st.integers(U64 - 64, U64)))
        worker = draw(st.sampled_from(["w0", "w1"]))
        device = draw(st.sampled_from(["cpu", "gpu"]))
        fragment = bound(f"f{number}", (0, 0), (rows, cols), 4096, tensor=f"t{number}", worker=worker,
                         device=device)
        # Forged past the constructor's checks (0, or ending beyond 2**64 - 1): the C reader
        # must range-check what it reads.
        object.__setattr__(fragment.binding, "address", address)
        ops.append(region(fragment, (0, 0), (rows, cols)))
    if ops and draw(st.booleans()):
        ops.append(ops[draw(st.integers(0, len(ops) - 1))])  # one target written twice
    return ops


def _fits(operations: Sequence[Any]) -> bool:
    return all(op.target.address + op.target.nbytes <= U64 for op in operations)


@settings(max_examples=300, deadline=None)
@given(whole_workloads())
def test_whole_fragments_accept_exactly_when_brute_force_disjoint(operations: List[Any]) -> None:
    expected = brute_force(operations) and _fits(operations)
    assert quick(operations) is (True if expected else None)
    if expected:
        _sweep_target_physical_ranges(operations, 1)  # the sweep agrees: nothing to report
    elif _fits(operations) and len({id(op.target) for op in operations}) == len(operations):
        with raises("conflicting target physical range: "):
            _sweep_target_physical_ranges(operations, 1)


@settings(max_examples=300, deadline=None)
@given(workloads())
def test_accept_implies_the_literal_rule_has_nothing_to_report(workload: Tuple[List[Any], int]) -> None:
    operations, budget = workload
    if quick(operations, budget):
        assert brute_force(operations)
        assert oracle(operations, budget) is None
    else:
        assert not brute_force(operations) or oracle(operations, budget) is not None


def test_other_sequences_take_the_sweep() -> None:
    ops = [whole("a", 4096), whole("b", 8192)]

    class Ops(list):  # type: ignore[type-arg]
        pass

    _check_target_physical_ranges(Ops(ops), 10)  # not a plain list: the sweep decides (no TypeError)
    with raises("conflicting target physical range: b"):
        _check_target_physical_ranges(Ops([ops[0], whole("b", 4096 + 8)]), 10)

"""``_native.revalidate_side`` on plans past its prefetch distances, and the checks that its
per-call reads (each view's attributes read once, the operation-id set replaced by counting
the distinct snapshots found) must still make for every fragment, first or last."""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any

import pytest

from memory_executor import HostMemory, host_bindings, tp_placement
from test_native_revalidate import _identity, _native_fragments, _scan, _side_tables

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank
from mooncake.reshard.weight._planner import bound_contracts as bc
from mooncake.reshard.weight._planner.bound_contracts import RuntimeBindingAttestation
from mooncake.reshard.weight.planner import TransferPlan, bind_logical_transfer_plan, plan_placement_transfer
from mooncake.reshard.weight.types import PlacementFragment

_TENSORS = tuple(f"t{k}" for k in range(14))


def _plan(target_tp: int = 3, shape: tuple[int, int] = (4, 7), tensors: tuple[str, ...] = _TENSORS) -> TransferPlan:
    source = tp_placement(2, prefix="s", dp=2, shape=shape, tensors=tensors)
    target = tp_placement(target_tp, prefix="t", shape=shape, tensors=tensors)
    logical = plan_placement_transfer(source, target)
    memory = HostMemory()
    return bind_logical_transfer_plan(
        logical, host_bindings(target, memory, prefix="dst"), source_bindings=host_bindings(source, memory, prefix="src")
    )


_PLANS = {
    "bound": _plan(),
    "split": _plan(target_tp=4, shape=(4, 8)),
    "unpickled": pickle.loads(pickle.dumps(_plan())),
}


def _sides(plan: TransferPlan) -> list[tuple[Any, ...]]:
    """Per side: the arguments of ``revalidate_side`` but ``used`` (a fresh set per call)."""
    frags, source_of, target_of, _boxes = _scan(plan.operations)
    keys, _routes, runtime_ids, attested = _native_fragments(frags, _identity(plan))
    sides = []
    for side_of, executors in ((source_of, plan.source_executors), (target_of, plan.target_executors)):
        runtime, rows = _side_tables(executors, side_of, runtime_ids)
        sides.append((frags, keys, runtime_ids, side_of, runtime, rows, attested))
    return sides


def _both(args: tuple[Any, ...]) -> tuple[Any, Any, set[int], set[int]]:
    native_used: set[int] = set()
    python_used: set[int] = set()
    native = _native.revalidate_side(
        *args, native_used, RuntimeBindingAttestation, ParallelRank, bc.RuntimeFragmentSnapshot
    )
    # the placement fragment ids of exact PlacementFragments read from their dicts: alike
    dict_used: set[int] = set()
    by_dict = _native.revalidate_side(
        *args, dict_used, RuntimeBindingAttestation, ParallelRank, bc.RuntimeFragmentSnapshot, PlacementFragment
    )
    assert by_dict is native and dict_used == native_used
    python = bc._fast_side_consistent(*args, python_used)
    return native, python, native_used, python_used


@pytest.mark.parametrize("name", sorted(_PLANS))
def test_large_sides_decided_as_python(name: str) -> None:
    with bc._ViewScope():
        for args in _sides(_PLANS[name]):
            assert len(set(args[3])) > 12  # past the prefetch distances
            native, python, native_used, python_used = _both(args)
            assert native is True and python is True
            assert native_used == python_used and native_used


@pytest.mark.parametrize("name", sorted(_PLANS))
def test_snapshots_no_operation_reads_decline(name: str) -> None:
    # Operations of only some fragments: executors own snapshots no operation reads, so the
    # snapshot owners are more than the operations' ids (Python: False).
    with bc._ViewScope():
        for frags, keys, runtime_ids, side_of, runtime, rows, attested in _sides(_PLANS[name]):
            unique = list(dict.fromkeys(side_of))
            for kept in (unique[:-1], unique[1:], unique[: len(unique) // 2]):
                subset = [p for p in side_of if p in set(kept)]
                args = (frags, keys, runtime_ids, subset, runtime, rows, attested)
                native, python, _, _ = _both(args)
                assert python is False
                assert native is None


@pytest.mark.parametrize("name", sorted(_PLANS))
@pytest.mark.parametrize("where", ["first", "middle", "last"])
@pytest.mark.parametrize("field", ["lease_generation", "placement"])
def test_each_fragment_checked_after_its_view_is_read(name: str, where: str, field: str) -> None:
    # Every fragment of a view is checked against the view's attributes read once per call:
    # a forged fragment first, in the middle or last of the side (its view read before) declines.
    with bc._ViewScope():
        for frags, keys, runtime_ids, side_of, runtime, rows, attested in _sides(_PLANS[name]):
            unique = list(dict.fromkeys(side_of))
            position = {"first": unique[0], "middle": unique[len(unique) // 2], "last": unique[-1]}[where]
            fragment = frags[position]
            if field == "lease_generation":
                forged = dataclasses.replace(fragment)
                object.__setattr__(forged, "lease_generation", fragment.lease_generation + 1)
            else:
                other = next(frags[p] for p in unique if frags[p].placement is not fragment.placement)
                forged = dataclasses.replace(fragment)
                object.__setattr__(forged, "placement", other.placement)
            forged_frags = list(frags)
            forged_frags[position] = forged
            args = (forged_frags, keys, runtime_ids, side_of, runtime, rows, attested)
            native, python, _, _ = _both(args)
            assert python is False
            assert native is None


def _with_fragment(frags: list[Any], position: int, edit: Any) -> list[Any]:
    forged = dataclasses.replace(frags[position])
    edit(forged)
    frags = list(frags)
    frags[position] = forged
    return frags


@pytest.mark.parametrize("where", ["first", "last"])
@pytest.mark.parametrize("case", ["no-pfid", "no-lease-generation", "subclass", "forged-pfid"])
def test_fragment_fields_read_from_dicts(where: str, case: str) -> None:
    """The fragment's fields and an exact placement's id come from their instance dicts: a
    field missing from a dict declines, a subclass placement is read as an attribute (same
    answer as without placement_type), a forged id declines."""
    with bc._ViewScope():
        for frags, keys, runtime_ids, side_of, runtime, rows, attested in _sides(_PLANS["bound"]):
            unique = list(dict.fromkeys(side_of))
            position = unique[0] if where == "first" else unique[-1]

            def edit(forged: Any) -> None:
                placement = dataclasses.replace(forged.placement)
                if case == "no-pfid":
                    object.__delattr__(placement, "placement_fragment_id")
                elif case == "subclass":
                    object.__setattr__(placement, "__class__", type("Sub", (PlacementFragment,), {"__slots__": ()}))
                elif case == "forged-pfid":
                    object.__setattr__(placement, "placement_fragment_id", "elsewhere")
                else:
                    object.__delattr__(forged, "lease_generation")  # (an emptied slot: a missing key)
                object.__setattr__(forged, "placement", placement)

            args = (_with_fragment(frags, position, edit), keys, runtime_ids, side_of, runtime, rows, attested)
            used: set[int] = set()
            by_dict = _native.revalidate_side(
                *args, used, RuntimeBindingAttestation, ParallelRank, bc.RuntimeFragmentSnapshot, PlacementFragment
            )
            if case == "subclass":
                plain = _native.revalidate_side(
                    *args, set(), RuntimeBindingAttestation, ParallelRank, bc.RuntimeFragmentSnapshot
                )
                assert by_dict is plain is True
            else:
                assert by_dict is None


def test_placement_type_argument() -> None:
    with bc._ViewScope():
        args = _sides(_PLANS["bound"])[0]
        for bad in (1, "PlacementFragment", object()):
            with pytest.raises(TypeError):
                _native.revalidate_side(
                    *args, set(), RuntimeBindingAttestation, ParallelRank, bc.RuntimeFragmentSnapshot, bad
                )
        with pytest.raises(TypeError):  # row_of: a list or None
            _native.revalidate_side(
                *args, set(), RuntimeBindingAttestation, ParallelRank, bc.RuntimeFragmentSnapshot, None, ()
            )
        with pytest.raises(TypeError):
            _native.revalidate_side(
                *args, set(), RuntimeBindingAttestation, ParallelRank, bc.RuntimeFragmentSnapshot, None, None, None
            )
        # another type: every id read as an attribute
        assert _native.revalidate_side(
            *args, set(), RuntimeBindingAttestation, ParallelRank, bc.RuntimeFragmentSnapshot, int
        ) is True

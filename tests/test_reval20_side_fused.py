"""``_native.revalidate_side`` as a bind call reaches it: each executor carries the attested
snapshot objects themselves, so one pass over them checks each snapshot's stored types, reads
its ``fragment_id`` and files it in ``snapshot_owner`` (session 20: with staged prefetch hints
over the snapshots and over the fragments). Recorded from real bind calls, then called again
on the recorded tables with one snapshot forged in place (first, middle, last of an executor
past the hint distances): the call must answer "unsure" (None) wherever a check fails, and the
Python side check (``_fast_side_consistent``) must not accept what the C one declined."""

from __future__ import annotations

from typing import Any

import pytest

from memory_executor import HostMemory, host_bindings, tp_placement

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank
from mooncake.reshard.weight._planner import bound_contracts as bc
from mooncake.reshard.weight._planner.bound_contracts import RuntimeBindingAttestation
from mooncake.reshard.weight.planner import bind_logical_transfer_plan, plan_placement_transfer
from mooncake.reshard.weight.types import PlacementFragment

_TENSORS = tuple(f"t{k}" for k in range(14))  # 14+ snapshots per executor: past every hint distance


def _recorded_sides(monkeypatch: pytest.MonkeyPatch) -> list[tuple[tuple[Any, ...], Any]]:
    """(arguments, result) of each ``revalidate_side`` call of one bind call."""
    calls: list[tuple[tuple[Any, ...], Any]] = []
    real = _native.revalidate_side

    def record(*args: Any) -> Any:
        kept = tuple(list(a) if type(a) is list else a for a in args)  # the caller empties its lists
        result = real(*args)
        calls.append((kept, result))
        return result

    monkeypatch.setattr(_native, "revalidate_side", record)
    # (a sealed bind skips the pass when its precondition holds: bound_contracts._sealed_side_holds;
    # made false here, the call is still sealed and its views carry the attested snapshot objects)
    monkeypatch.setattr(bc, "_sealed_side_holds", lambda target, source: False)
    source = tp_placement(2, prefix="s", dp=2, shape=(4, 7), tensors=_TENSORS)
    target = tp_placement(3, prefix="t", shape=(4, 7), tensors=_TENSORS)
    memory = HostMemory()
    bind_logical_transfer_plan(
        plan_placement_transfer(source, target),
        host_bindings(target, memory, prefix="dst"),
        source_bindings=host_bindings(source, memory, prefix="src"),
    )
    monkeypatch.setattr(_native, "revalidate_side", real)
    monkeypatch.undo()
    assert len(calls) == 2
    return calls


def _call(args: tuple[Any, ...]) -> Any:
    fresh = args[:7] + (set(),) + args[8:]
    return _native.revalidate_side(*fresh)


def _executor_snapshots(args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    rows = args[5]
    groups = [row[0]["fragment_snapshots"] for row in rows]
    assert all(len(group) > 8 for group in groups)
    return groups


@pytest.mark.parametrize("side", [0, 1])
def test_recorded_sides_are_decided_again(side: int, monkeypatch: pytest.MonkeyPatch) -> None:
    args, result = _recorded_sides(monkeypatch)[side]
    assert result is True
    assert _call(args) is True
    # every executor's snapshots are the attested objects themselves (the one-pass case)
    for view in (entry[2] for entry in args[6].values()):
        for worker, snapshots in view.objects_by_worker.items():
            assert type(snapshots) is tuple and worker


_FORGERIES = {
    "address-float": lambda s, others: {"address": float(s.address)},
    "nbytes-bool": lambda s, others: {"nbytes": bool(s.nbytes)},
    "worker-str-subclass": lambda s, others: {"worker_id": type("S", (str,), {})(s.worker_id)},
    "offset-item-float": lambda s, others: {"global_offset": (float(s.global_offset[0]),) + s.global_offset[1:]},
    "fragment-id-repeated": lambda s, others: {"fragment_id": others.fragment_id},
}


@pytest.mark.parametrize("side", [0, 1])
@pytest.mark.parametrize("where", ["first", "middle", "last"])
@pytest.mark.parametrize("forgery", sorted(_FORGERIES))
def test_a_snapshot_forged_in_place_is_unsure(
    side: int, where: str, forgery: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    args, _ = _recorded_sides(monkeypatch)[side]
    group = _executor_snapshots(args)[-1]
    index = {"first": 0, "middle": len(group) // 2, "last": len(group) - 1}[where]
    snapshot = group[index]
    other = group[index - 1] if index else group[1]
    changes = _FORGERIES[forgery](snapshot, other)
    saved = {name: getattr(snapshot, name) for name in changes}
    try:
        for name, value in changes.items():
            object.__setattr__(snapshot, name, value)
        assert _call(args) is None
        assert _native.revalidate_side(
            *args[:7], set(), RuntimeBindingAttestation, ParallelRank, bc.RuntimeFragmentSnapshot, PlacementFragment
        ) is None
        assert not bc._fast_side_consistent(*args[:3], bc._position_list(args[3]), *args[4:7], set())
    finally:
        for name, value in saved.items():
            object.__setattr__(snapshot, name, value)
    assert _call(args) is True

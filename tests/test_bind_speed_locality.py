"""Memory layout of snapshots built by ``RuntimeFragmentSnapshot.from_attested_pair`` (issue 5):
the instance dict is filled key by key in field order, so it stays key-sharing (``dict.update``
into it made a combined dict, about 1.6x larger); the snapshot equals the constructed one."""

from __future__ import annotations

import dataclasses
import pickle
import sys

from layout_classes import weakref_slot_bytes
from memory_executor import HostMemory, host_bindings, tp_placement

from mooncake.reshard.weight._planner.bound_contracts import RuntimeFragmentSnapshot, _snapshot_state


def test_attested_pair_snapshots_are_stored_in_their_layout() -> None:
    """The snapshots of attested pairs hold their 16 fields in the C layout (no instance dict):
    the size of an object header, 16 pointers and a weak-reference slot (in the object up to
    CPython 3.11, in a pre-header from 3.12: ``weakref_slot_bytes``), as a constructed one."""
    placement = tp_placement(2, prefix="p", shape=(4, 6), tensors=("a", "b"))
    bindings = host_bindings(placement, HostMemory(), prefix="b")
    names = [field.name for field in dataclasses.fields(RuntimeFragmentSnapshot)]
    slotted = object.__basicsize__ + 8 * len(names) + weakref_slot_bytes(RuntimeFragmentSnapshot)[0]
    assert RuntimeFragmentSnapshot.__basicsize__ == slotted
    checked = 0
    for binding in bindings:
        by_id = {fragment.placement_fragment_id: fragment for fragment in binding.fragments}
        for fragment in placement._part_index()[binding.participant_id].fragments:
            runtime = by_id[fragment.placement_fragment_id]
            snapshot = RuntimeFragmentSnapshot.from_attested_pair(fragment, runtime, lease_generation=5)
            constructed = RuntimeFragmentSnapshot(**_snapshot_state(fragment, runtime, 5))
            assert type(snapshot) is RuntimeFragmentSnapshot
            assert snapshot == constructed
            assert not hasattr(snapshot, "__dict__")
            assert list(snapshot.__getstate__()) == names
            assert snapshot.__getstate__() == _snapshot_state(fragment, runtime, 5)
            assert sys.getsizeof(snapshot) == sys.getsizeof(constructed)
            assert pickle.loads(pickle.dumps(snapshot, protocol=pickle.HIGHEST_PROTOCOL)) == snapshot
            checked += 1
    assert checked == len(placement.fragments)


def test_attested_pair_subclass_goes_through_the_constructor() -> None:
    @dataclasses.dataclass(frozen=True)
    class Sub(RuntimeFragmentSnapshot):
        pass

    placement = tp_placement(1, prefix="p", shape=(2, 2), tensors=("w",))
    binding = host_bindings(placement, HostMemory(), prefix="b")[0]
    fragment = placement.fragments[0]
    snapshot = Sub.from_attested_pair(fragment, binding.fragments[0], lease_generation=1)
    assert type(snapshot) is Sub
    # the constructor stored every field in the layout (a subclass without __slots__ also has
    # an instance dict, left empty)
    assert list(snapshot.__getstate__()) == [field.name for field in dataclasses.fields(RuntimeFragmentSnapshot)]
    assert vars(snapshot) == {}
    assert snapshot.__getstate__() == _snapshot_state(fragment, binding.fragments[0], 1)


def test_attested_pair_reads_the_fields_in_the_state_order() -> None:
    """A missing attribute fails on the same read as ``_snapshot_state`` (the first in its order)."""
    placement = tp_placement(1, prefix="p", shape=(2, 2), tensors=("w",))
    binding = host_bindings(placement, HostMemory(), prefix="b")[0]
    fragment, runtime = placement.fragments[0], binding.fragments[0]

    class Reader:
        def __init__(self, wrapped: object, log: list[str]) -> None:
            self.wrapped, self.log = wrapped, log

        def __getattr__(self, name: str) -> object:
            self.log.append(name)
            return getattr(self.wrapped, name)

    direct: list[str] = []
    via_state: list[str] = []
    RuntimeFragmentSnapshot.from_attested_pair(Reader(fragment, direct), Reader(runtime, direct), lease_generation=1)  # type: ignore[arg-type]
    _snapshot_state(Reader(fragment, via_state), Reader(runtime, via_state), 1)
    assert direct == via_state

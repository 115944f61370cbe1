"""The C attestation's reads of a runtime fragment in its C-owned layout (session 24: the slot of
each field read directly, ``bd_rget``, where ``bd_dget`` found the slot by name): with a slot
emptied (a field deleted with ``object.__delattr__``, what a key missing from a dict-backed
fragment's instance dict was), ``_native.attest_many`` decides every binding as before (the
others, and this one exactly when the Python rules do not read that field), and binding's
outcome (attestations or first error) is the Python loop's. Parts of two fragments each, so the
address range checks read their fields too."""

from __future__ import annotations

from typing import Any

import pytest

from layout_model import Coord, TensorSpec, build_placement, build_runtime_bindings
from planner_helpers import grid_fragments, layout, split
from test_native_binder_attest_many import call, outcome

from mooncake.reshard.weight import RuntimeBindingFragment

# the runtime fields the C attestation reads (bd_check_pair, bd_range_fill, bd_fused_views)
READ = [
    "placement_fragment_id",
    "fragment_id",
    "address",
    "nbytes",
    "worker_id",
    "device",
    "local_shape",
    "itemsize",
    "strides_bytes",
    "storage_address",
    "storage_nbytes",
    "owner",
]


def _side() -> tuple[Any, tuple[Any, ...]]:
    """A TP-4 placement of two tensors: each part (binding) holds two fragments."""
    specs = [TensorSpec(**{**TensorSpec(name, (8, 4)).__dict__, "axes": (split("tp", 0),)}) for name in ("a", "b")]
    ranks = [Coord(tp=t) for t in range(4)]
    frags = [f for spec in specs for f in grid_fragments(spec, ranks, {"tp": 0}, {"tp": 4})]
    placement = build_placement(layout("dst", (4, 1, 1, 1), specs, frags))
    bindings = build_runtime_bindings(placement)
    assert all(len(binding.fragments) == 2 for binding in bindings)
    return placement, bindings


@pytest.mark.parametrize("name", READ)
@pytest.mark.parametrize("which", [0, -1])
def test_an_emptied_slot_leaves_the_binding_to_python(name: str, which: int) -> None:
    placement, bindings = _side()
    decided = call(placement, bindings)
    assert all(attestation is not None for attestation in decided)
    fragment = bindings[1].fragments[which]
    assert type(fragment) is RuntimeBindingFragment
    object.__delattr__(fragment, name)
    with pytest.raises(AttributeError):
        getattr(fragment, name)
    result = call(placement, bindings)
    assert result[:1] + result[2:] == decided[:1] + decided[2:]
    # the Python loop's outcome, with and without the C call (fresh bindings, the same edit)
    outcomes = []
    for fused in (False, True):
        placement, fresh = _side()
        object.__delattr__(fresh[1].fragments[which], name)
        try:
            outcomes.append(outcome(placement, fresh, fused))
        except AttributeError as exc:  # (raised by the Python rules' own read)
            outcomes.append(("attribute", str(exc)))
    assert outcomes[0] == outcomes[1]
    # a binding the rules refuse is left to them (declining more is allowed: owner is checked
    # here and not read there)
    if outcomes[0][0] != "ok":
        assert result[1] is None

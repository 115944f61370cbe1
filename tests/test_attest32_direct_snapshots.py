"""attest_many's pair-loop snapshots copied slot by slot (session 32).

Since ATTEST12, the pair loop that builds attest_many's carried tables (ATTEST11,
test_attest31_pair_tables) makes each snapshot by copying the placement fragment's four layout
slots, the runtime fragment's eleven layout slots (by the index bd_snapshot_rf_index gives each
snapshot field's name, found once per call) and the binding's generation straight into the
snapshot's layout, instead of bd_snapshot_values' generic per-field loop. Its argument of
equality with bd_snapshot_values is in csrc/binder.c (bd_pair_snapshot). Pinned here:

- every field of every carried snapshot is the very object of the same-named field of its
  runtime fragment (or placement fragment; lease_generation: the binding's generation), with
  runtime values chosen pairwise distinct (a field read from the wrong slot differs);
- the same snapshots as the tables built without a carrier (executors and snapshots equal);
- a runtime fragment with an empty slot (a field deleted with object.__delattr__) decides as
  without the carrier, and no table with a missing field is built (the copy stops the pair
  loop's build there, as bd_snapshot_values' fallback does).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from test_attest30_carried_tables import _attest_with_carrier, _project
from test_attest31_pair_tables import _as_is, _assert_same, _edited, _outcomes, _target

from mooncake.reshard.weight._planner.bound_contracts import RuntimeFragmentSnapshot

_PLACEMENT_FIELDS = ("placement_fragment_id", "tensor_id", "global_offset", "local_shape")


def _distinct(b: int, i: int, fragment: Any) -> None:
    """Runtime values pairwise distinct within a fragment (and not small cached ints), still a
    consistent fragment: the storage starts before the fragment and is larger than it."""
    base = 1 << 40
    address = base + (b * 1000 + i) * 4096 + 512
    nbytes = fragment.nbytes
    object.__setattr__(fragment, "address", address)
    object.__setattr__(fragment, "storage_address", address - 512)
    object.__setattr__(fragment, "storage_offset_bytes", 512)
    object.__setattr__(fragment, "storage_nbytes", nbytes + 512 + 1000)
    object.__setattr__(fragment, "endpoint", f"ep-{b}-{i}")
    object.__setattr__(fragment, "device", f"dev-{b}-{i}")


def _snapshot_sources(bindings: tuple[Any, ...], placement: Any) -> tuple[dict, dict]:
    runtime = {f.fragment_id: (binding, f) for binding in bindings for f in binding.fragments}
    placed = {pf.placement_fragment_id: pf for part in placement.parts for pf in part.fragments}
    return runtime, placed


@pytest.mark.parametrize("tensors", [16, 200])
def test_every_carried_field_is_the_fragments_object(tensors: int) -> None:
    placement, bindings = _target(tensors)
    bindings = _edited(bindings, _distinct)
    for k, binding in enumerate(bindings):
        object.__setattr__(binding, "generation", 5000 + k)
    carried, built = _outcomes(placement, bindings)
    assert carried is not None
    _assert_same(carried, built)
    runtime, placed = _snapshot_sources(bindings, placement)
    names = [f.name for f in dataclasses.fields(RuntimeFragmentSnapshot)]
    seen = 0
    for executor in carried:
        for snap in executor.fragment_snapshots:
            binding, fragment = runtime[snap.fragment_id]
            pf = placed[snap.placement_fragment_id]
            values = []
            for name in names:
                value = getattr(snap, name)
                if name == "lease_generation":
                    assert value is binding.generation
                elif name in _PLACEMENT_FIELDS:
                    assert value is getattr(pf, name), name
                else:
                    assert value is getattr(fragment, name), name
                values.append(value)
            assert fragment.fragment_id == snap.fragment_id
            seen += 1
    assert seen == sum(len(b.fragments) for b in bindings)
    # the edit gives distinct runtime values, so a slot mix-up cannot go unseen
    _b, fragment = next(iter(runtime.values()))
    ints = [fragment.address, fragment.storage_address, fragment.storage_nbytes, fragment.storage_offset_bytes]
    assert len(set(ints)) == len(ints)


@pytest.mark.parametrize("field", ["endpoint", "storage_offset_bytes"])  # the two the attestation leaves unread
@pytest.mark.parametrize("at", [0, 9, 19])
def test_an_empty_runtime_slot_decides_as_without_the_carrier(field: str, at: int) -> None:
    placement, bindings = _target(20)
    bindings = _edited(bindings, _as_is)
    object.__delattr__(bindings[0].fragments[at], field)
    attestations, carrier = _attest_with_carrier(placement, bindings)
    assert all(a is not None for a in attestations)  # decided: its pair loop saw the empty slot
    got = _try(lambda: _project(placement, bindings, attestations, carrier))
    want = _try(lambda: _project(placement, bindings, attestations, None))
    assert got == want
    fresh = _try(lambda: _outcomes(placement, bindings))
    assert fresh[0] == "ok"
    carried, built = fresh[1]
    assert (carried is None) == (built is None)
    if carried is not None:
        assert carried == built


def _try(fn: Any) -> tuple[str, Any]:
    try:
        return "ok", fn()
    except Exception as exc:  # the outcome compared, type and message
        return "error", f"{type(exc).__name__}: {exc}"

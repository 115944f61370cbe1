"""``_native.attested_executors`` builds the worker table directly when the evidence's snapshotted
fragments have one worker and increasing runtime ids (then the entries sorted by (id, position)
are in evidence order), and groups and sorts them as before otherwise.

The oracle is the Python ``_attested_executors`` on an independent fresh attestation of the same
binding: the same rows (workers, snapshots, executors) or the same decline, whatever the runtime
ids' order, repeats, worker names (equal but distinct objects, a second worker) and evidence
fragments without an attested placement fragment."""

from __future__ import annotations

import dataclasses
from typing import Any, List

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from test_native_binder import _executors_kernel, _forge, _part, _python_rows, _world

from mooncake.reshard.weight import WeightRuntimeBindingManifest
from mooncake.reshard.weight._planner.attestation import RuntimeBindingAttestation


def _forged_attestation(placement: Any, binding: Any, fragments: List[Any]) -> Any:
    """An attestation of the binding whose evidence lists ``fragments`` (behind validation)."""
    fresh = RuntimeBindingAttestation._from_validated(placement, dataclasses.replace(binding))
    object.__setattr__(fresh, "evidence", _forge(fresh.evidence, fragments=tuple(fragments)))
    return fresh


def _agree(placement: Any, binding: Any, fragments: List[Any]) -> Any:
    part = _part(placement, binding)
    built = _executors_kernel(placement, part, _forged_attestation(placement, binding, fragments))
    if built is None:
        return None
    table, rows = built
    reference = _python_rows(placement, part, _forged_attestation(placement, binding, fragments))
    assert rows == reference
    # the table maps exactly the rows' workers, each to its row's snapshots (the same tuple); its
    # key order is free (the Python rule inserts workers in evidence order; readers look keys up)
    assert len(table) == len(rows)
    for worker_id, snapshots, executor in rows:
        assert table[worker_id] is snapshots
        assert list(snapshots) == sorted(snapshots, key=lambda snapshot: snapshot.fragment_id)
    return built


WORLD = _world(tensors=9)


def test_one_worker_increasing_ids_and_its_neighbours() -> None:
    placement, bindings = WORLD
    binding = bindings[0]
    fragments = list(binding.fragments)
    assert len(fragments) >= 4
    ids = [f.fragment_id for f in fragments]
    assert ids == sorted(ids) and len({f.worker_id for f in fragments}) == 1  # the direct shape
    assert _agree(placement, binding, fragments) is not None
    assert _agree(placement, binding, fragments[::-1]) is not None  # decreasing ids: sorted as before
    swapped = [_forge(f, fragment_id=fragments[1 - k].fragment_id) if k < 2 else f for k, f in enumerate(fragments)]
    assert _agree(placement, binding, swapped) is not None
    repeated = [_forge(f, fragment_id=fragments[0].fragment_id) if k == 1 else f for k, f in enumerate(fragments)]
    assert _agree(placement, binding, repeated) is None  # a runtime id twice: declined as before
    copies = [_forge(f, worker_id="".join(list(f.worker_id))) for f in fragments]  # equal, distinct objects
    assert len({id(f.worker_id) for f in copies}) > 1
    built = _agree(placement, binding, copies)
    assert built is not None and len(built[0]) == 1
    second = [_forge(f, worker_id=f.worker_id + "-b") if k == len(fragments) - 1 else f for k, f in enumerate(fragments)]
    built = _agree(placement, binding, second)
    assert built is not None and len(built[0]) == 2
    # the first fragment's worker sorts after the others': the table lists it first (evidence
    # order), the rows last (sorted)
    late = [_forge(f, worker_id="zz") if k == 0 else f for k, f in enumerate(fragments)]
    built = _agree(placement, binding, late)
    assert built is not None and len(built[0]) == 2 and [row[0] for row in built[1]][-1] == "zz"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_evidence_matches_the_python_rows(data: st.DataObject) -> None:
    placement, bindings = WORLD
    binding = bindings[data.draw(st.integers(0, len(bindings) - 1))]
    fragments = list(binding.fragments)
    n = len(fragments)
    for _ in range(data.draw(st.integers(0, 3))):
        kind = data.draw(st.sampled_from(["permute-ids", "repeat-id", "worker", "equal-worker", "unattested",
                                          "reverse"]))
        k = data.draw(st.integers(0, n - 1))
        if kind == "permute-ids":
            ids = [f.fragment_id for f in fragments]
            order = data.draw(st.permutations(range(n)))
            fragments = [_forge(f, fragment_id=ids[order[j]]) for j, f in enumerate(fragments)]
        elif kind == "repeat-id":
            j = data.draw(st.integers(0, n - 1))
            fragments[k] = _forge(fragments[k], fragment_id=fragments[j].fragment_id)
        elif kind == "worker":
            fragments[k] = _forge(fragments[k], worker_id=data.draw(st.sampled_from(["w-a", "w-b", "zz"])))
        elif kind == "equal-worker":
            fragments[k] = _forge(fragments[k], worker_id="".join(list(fragments[k].worker_id)))
        elif kind == "unattested":
            fragments[k] = _forge(fragments[k], placement_fragment_id="not-attested")
        else:
            fragments = fragments[::-1]
    _agree(placement, binding, fragments)

"""The C view build (``_native.attested_view``, revalidate.c av_slots) and ``attested_rows``
(binder.c) walk each instance dict once before consecutive reads of one object (RESTORE39): the
second read follows the first with no code run between. A key that is not an exact str planted
in any of the dicts read (evidence, placement, attestation) still declines (None: the Python
constructor decides) without running the key's ``__eq__``, wherever it sits in the dict, and the
view built from intact objects equals the Python constructor's."""

from __future__ import annotations

from typing import Any

import pytest

from memory_executor import HostMemory, host_bindings, tp_placement
from forge_helpers import EQ_CALLS as _EQ_CALLS
from forge_helpers import LoudKey as _LoudKey

from mooncake.reshard import _native
from mooncake.reshard.contracts.fragments import RuntimeBindingFragment
from mooncake.reshard.weight import WeightPlacementManifest, WeightPlacementPart
from mooncake.reshard.weight._planner import bound_contracts as bc
from mooncake.reshard.weight._planner.attestation import RuntimeBindingAttestation, RuntimeBindingEvidence


def _attestation() -> Any:
    placement = tp_placement(2, prefix="p", shape=(4, 6), tensors=("w0", "w1"))
    binding = host_bindings(placement, HostMemory(), prefix="b")[0]
    return RuntimeBindingAttestation._from_validated(placement, binding)


def _view(attestation: Any) -> Any:
    return _native.attested_view(
        bc._AttestedView,
        attestation,
        RuntimeBindingAttestation,
        RuntimeBindingEvidence,
        RuntimeBindingFragment,
        WeightPlacementManifest,
        None,
        WeightPlacementPart,
    )


def _rows(attestation: Any) -> Any:
    return _native.attested_rows(RuntimeBindingAttestation, RuntimeBindingEvidence, RuntimeBindingFragment, attestation)


def _owner(attestation: Any, which: str) -> Any:
    if which == "attestation":
        return attestation
    return attestation.__dict__[which]


@pytest.mark.parametrize("which", ["evidence", "placement", "attestation"])
@pytest.mark.parametrize("name", ["instance_id", "participant_id", "placement_id", "generation", "zzz"])
def test_a_planted_key_declines_without_running(which: str, name: str) -> None:
    attestation = _attestation()
    assert _view(attestation) is not None and _rows(attestation) is not None
    state = _owner(attestation, which).__dict__
    # a str subclass key equal to a field read second (or to nothing): hashed as that name
    loud = _LoudKey(name)
    if name in state:
        value = state.pop(name)
        state[loud] = value
    else:
        state[loud] = 1
    _EQ_CALLS.clear()
    assert _view(attestation) is None
    if which != "placement":  # (attested_rows reads the attestation and its evidence only)
        assert _rows(attestation) is None
    assert _EQ_CALLS == []


def test_the_view_equals_the_python_constructor() -> None:
    attestation = _attestation()
    built = _view(attestation)
    reference = bc._AttestedView(attestation)
    for name in ("key_base", "part_rank", "generation", "attested_pfids", "ids_by_worker"):
        assert getattr(built, name) == getattr(reference, name)


@pytest.mark.parametrize("name", ["rank", "zzz"])
def test_a_planted_key_in_a_part_declines_without_running(name: str) -> None:
    attestation = _attestation()
    placement = attestation.__dict__["placement"]
    participant = attestation.__dict__["evidence"].participant_id
    part = placement._part_index()[participant]
    state = part.__dict__
    loud = _LoudKey(name)
    state[loud] = state.pop(name) if name in state else 1
    _EQ_CALLS.clear()
    assert _view(attestation) is None
    assert _EQ_CALLS == []


def test_a_rebuilt_part_index_still_walks_the_part() -> None:
    # (the cached index not exactly the parts: the method builds one, Python code runs, and
    # the part and the evidence are walked again before their reads)
    attestation = _attestation()
    placement = attestation.__dict__["placement"]
    placement.__dict__["_parts_by_participant"] = {}
    reference = bc._AttestedView(attestation)
    built = _view(attestation)
    assert built is not None and built.part_rank == reference.part_rank
    evidence = attestation.__dict__["evidence"]
    evidence.__dict__[_LoudKey("zzz")] = 1
    _EQ_CALLS.clear()
    assert _view(attestation) is None
    assert _EQ_CALLS == []


@pytest.mark.parametrize("target", ["evidence", "part"])
def test_code_run_by_the_part_index_method_is_seen(target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The cached index is not the parts, so the view build calls ``_part_index()`` (Python code):
    # a key that code plants in the evidence's or the part's dict is found by the walks before
    # their next reads (the build declines, no __eq__ runs).
    attestation = _attestation()
    placement = attestation.__dict__["placement"]
    evidence = attestation.__dict__["evidence"]
    placement.__dict__["_parts_by_participant"] = {}
    original = WeightPlacementManifest._part_index

    def planting(self: Any) -> Any:
        index = original(self)
        owner = evidence if target == "evidence" else index[evidence.participant_id]
        owner.__dict__[_LoudKey("zzz")] = 1
        return index

    monkeypatch.setattr(WeightPlacementManifest, "_part_index", planting)
    _EQ_CALLS.clear()
    assert _view(attestation) is None
    assert _EQ_CALLS == []

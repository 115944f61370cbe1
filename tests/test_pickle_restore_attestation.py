"""Restore of the attestations of a pickled ``TransferPlan`` (``bound_pickle._restore_attestation``)
and the attested views of fresh attestations (``_native.attested_rows`` in ``_AttestedView``):
both must equal their Python reference on valid values and reject every forgery exactly like
``RuntimeBindingAttestation.__setstate__`` (same exception type and message)."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from spec_helpers import forged_copy
from test_binding_attacks import World

from mooncake.reshard import _native
from mooncake.reshard.contracts.fragments import RuntimeBindingFragment
from mooncake.reshard.weight._planner import bound_pickle
from mooncake.reshard.weight._planner.attestation import RuntimeBindingAttestation, RuntimeBindingEvidence
from mooncake.reshard.weight._planner.bound_contracts import _AttestedView, _python_attested_rows


def _attestations(plan: Any) -> list[RuntimeBindingAttestation]:
    seen: dict[int, RuntimeBindingAttestation] = {}
    for executor in plan.source_executors + plan.target_executors:
        seen.setdefault(id(executor.attestation), executor.attestation)
    return list(seen.values())


def _outcome(function: Any, *args: Any) -> Any:
    try:
        return ("ok", function(*args))
    except Exception as error:  # noqa: BLE001 - the exact type and message are compared
        return ("error", type(error), str(error))


def _oracle(placement: Any, evidence: Any) -> RuntimeBindingAttestation:
    """Unpickling one attestation: a new instance, then ``__setstate__``."""
    attestation: RuntimeBindingAttestation = object.__new__(RuntimeBindingAttestation)
    attestation.__setstate__((placement, evidence))
    return attestation


def _same_state(a: RuntimeBindingAttestation, b: RuntimeBindingAttestation) -> None:
    assert type(a) is type(b) is RuntimeBindingAttestation
    left, right = a.__dict__, b.__dict__
    assert set(left) == set(right)
    for name in left:
        assert left[name] == right[name], name
    assert a.evidence is b.evidence and a.placement is b.placement


@pytest.fixture(scope="module")
def plan() -> Any:
    return World().bind()


def test_restored_attestation_equals_the_setstate_path_and_takes_the_c_path(
    plan: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    decided: list[Any] = []
    native = bound_pickle._attest_restored

    def spy(*args: Any) -> Any:
        result = native(*args)
        decided.append(result)
        return result

    monkeypatch.setattr(bound_pickle, "_attest_restored", spy)
    attestations = _attestations(plan)
    assert len(attestations) >= 4
    for attestation in attestations:
        evidence = forged_copy(attestation.evidence)
        restored = bound_pickle._restore_attestation(attestation.placement, evidence)
        _same_state(restored, _oracle(attestation.placement, evidence))
        assert restored == attestation
    assert len(decided) == len(attestations) and all(result is not None for result in decided)


def _fragment_forgeries(fragments: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    first, rest = fragments[0], fragments[1:]
    forged: list[tuple[Any, ...]] = [
        (),
        fragments[::-1] if len(fragments) > 1 else fragments + fragments,
        fragments + (first,),
        (dataclasses.replace(first, owner=object()),) + rest,
        (dataclasses.replace(first, fragment_id="other-runtime"),) + rest,
        (dataclasses.replace(first, worker_id="moved"),) + rest,
        (dataclasses.replace(first, device="cuda:99"),) + rest,
        (dataclasses.replace(first, endpoint="elsewhere"),) + rest,
    ]
    for changes in (
        {"placement_fragment_id": "zzz-unknown"},
        {"placement_fragment_id": 5},
        {"nbytes": first.nbytes + 1},
        {"address": first.address + 8},
        {"local_shape": (1,)},
        {"itemsize": 3},
        {"strides_bytes": ()},
        {"storage_nbytes": 0},
    ):
        forged.append((forged_copy(first, **changes),) + rest)
    forged.append(("not a fragment",) + rest)
    return forged


_SCALAR_FORGERIES: list[tuple[str, Any]] = [
    ("resource_id", "other"),
    ("resource_id", ""),
    ("resource_id", 7),
    ("revision", "r-other"),
    ("placement_id", "elsewhere"),
    ("placement_digest", "0" * 64),
    ("placement_digest", "XYZ"),
    ("placement_digest", None),
    ("instance_id", ""),
    ("participant_id", "nobody"),
    ("participant_id", ["unhashable"]),
    ("generation", -1),
    ("generation", 2**64),
    ("generation", True),
    ("lease_id", ""),
    ("fragments", None),
    ("fragments", [1, 2]),
]


def test_forged_evidence_is_rejected_like_setstate(plan: Any) -> None:
    checked = 0
    for attestation in _attestations(plan):
        placement = attestation.placement
        cases = [forged_copy(attestation.evidence, **{name: value}) for name, value in _SCALAR_FORGERIES]
        cases += [forged_copy(attestation.evidence, fragments=f) for f in _fragment_forgeries(attestation.evidence.fragments)]
        for evidence in cases:
            expected = _outcome(_oracle, placement, evidence)
            actual = _outcome(bound_pickle._restore_attestation, placement, evidence)
            if expected[0] == "error":
                assert actual == expected
                checked += 1
            else:
                assert actual[0] == "ok"
                _same_state(actual[1], expected[1])
    assert checked > 50


def test_non_exact_or_partial_values_take_the_python_path(plan: Any) -> None:
    attestation = _attestations(plan)[0]

    class Evidence(RuntimeBindingEvidence):
        pass

    sub = object.__new__(Evidence)
    sub.__dict__.update(attestation.evidence.__dict__)
    for placement, evidence in (
        (attestation.placement, sub),
        (attestation.placement, "evidence"),
        ("placement", attestation.evidence),
    ):
        expected = _outcome(_oracle, placement, evidence)
        actual = _outcome(bound_pickle._restore_attestation, placement, evidence)
        assert actual[0] == expected[0]
        if expected[0] == "error":
            assert actual == expected
        else:
            _same_state(actual[1], expected[1])
    # A placement whose digest is not known yet: the Python path decides (and computes it).
    placement = copy.copy(attestation.placement)
    placement.__dict__.pop("_digest_cache", None)
    restored = bound_pickle._restore_attestation(placement, forged_copy(attestation.evidence))
    assert restored == attestation


def _assert_rows_equal(native: Any, python: Any) -> None:
    assert native is not None
    assert native[3] is python[3]
    assert native[0] == python[0] and list(native[0]) == list(python[0])
    for name in (1, 2):
        assert native[name] == python[name] and list(native[name]) == list(python[name])
    for pfid, expected in native[0].items():
        assert list(expected) == list(python[0][pfid])


def test_attested_rows_equal_the_python_reference(plan: Any) -> None:
    for attestation in _attestations(plan):
        for candidate in (attestation, bound_pickle._restore_attestation(attestation.placement, copy.copy(attestation.evidence))):
            state = candidate.__dict__
            evidence = state["evidence"]
            native = _native.attested_rows(
                RuntimeBindingAttestation, RuntimeBindingEvidence, RuntimeBindingFragment, candidate
            )
            _assert_rows_equal(native, _python_attested_rows(state, evidence, evidence.generation))
            view = _AttestedView(candidate)
            assert view.expected_by_pfid == native[0] and view.rows_by_worker == native[1]
            assert view.ids_by_worker == native[2] and view.evidence_ids_by_worker == native[2]


def test_attested_rows_incomplete_attestation(plan: Any) -> None:
    attestation = _attestations(plan)[0]
    forged = copy.copy(attestation)
    placement_dict = dict(attestation.__dict__["_placement_dict"])
    dropped = next(iter(placement_dict))
    del placement_dict[dropped]
    object.__setattr__(forged, "_placement_dict", placement_dict)
    state = forged.__dict__
    python = _python_attested_rows(state, state["evidence"], state["evidence"].generation)
    assert python[3] is False and dropped not in python[0]
    native = _native.attested_rows(RuntimeBindingAttestation, RuntimeBindingEvidence, RuntimeBindingFragment, forged)
    _assert_rows_equal(native, python)
    view = _AttestedView(forged)
    expected_ids: dict[str, list[str]] = {}
    for fragment in state["evidence"].fragments:
        expected_ids.setdefault(fragment.worker_id, []).append(fragment.fragment_id)
    assert view.evidence_ids_by_worker == {worker: tuple(sorted(ids)) for worker, ids in expected_ids.items()}


def test_malformed_placement_parts_take_the_python_path(plan: Any) -> None:
    """A placement whose parts cannot be indexed (forged): the outcome is exactly the
    ``__setstate__`` routine's, for valid and for forged evidence."""
    attestation = _attestations(plan)[0]
    for parts in ((1, 2), None, (object(),)):
        # (each a fresh copy of the valid placement, then forged: since session 18 copying the
        # forged placement itself is refused by its restore, "WeightPlacementManifest parts ...")
        for evidence in (
            forged_copy(attestation.evidence),
            forged_copy(attestation.evidence, lease_id=""),
            forged_copy(attestation.evidence, placement_digest="0" * 64),
        ):
            expected = _outcome(_oracle, forged_copy(attestation.placement, parts=parts), evidence)
            actual = _outcome(bound_pickle._restore_attestation, forged_copy(attestation.placement, parts=parts), evidence)
            assert expected[0] == "error"
            assert actual == expected

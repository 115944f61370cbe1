"""``_native.attest_restored`` (session 36, RESTORE36): ``attest_binding`` for a restore, whose
binding is the unpickled evidence. It stores that evidence object in the attestation instead of
building an equal copy (which the restore then replaced). Oracle: ``attest_binding`` on the same
arguments. Both decide alike (``None`` or an attestation, or the same error), and the
attestations hold the same state except that ``attest_restored``'s evidence is the argument
itself. Below and from the fused pass's threshold (16 pairs), for valid and forged evidence."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spec_helpers import field_state, forged_copy

from layout_model import build_runtime_bindings
from test_native_binder_attest_many import CLASSES
from test_native_binder_fused_attest import SMALL
from test_native_binder_tensor_ids import PLACEMENT, _copy

from mooncake.reshard import _native
from mooncake.reshard.weight._planner import bound_pickle


def _call(function: Any, placement: Any, binding: Any) -> Any:
    # (a forged participant id names no part: the first part's members are passed then)
    state = getattr(binding, "__dict__", {})
    part = placement._part_index().get(state.get("participant_id"), placement.parts[0])
    try:
        return (
            "ok",
            function(
                *CLASSES[:5], placement, binding, part.fragments, part.tensors, placement.resource_id,
                placement.placement_id, placement.digest, placement.revision,
            ),
        )
    except Exception as error:  # noqa: BLE001 - the exact type and message are compared
        return ("error", type(error), str(error))


def _evidences(placement: Any) -> list[Any]:
    """The exact evidences of the placement's bindings (as a pickled attestation holds them)."""
    out = []
    for binding in build_runtime_bindings(placement):
        attestation = _call(_native.attest_binding, placement, binding)[1]
        assert attestation is not None
        out.append(pickle.loads(pickle.dumps(attestation.evidence)))
    return out


def _same_decision(placement: Any, evidence: Any) -> Any:
    restored = _call(_native.attest_restored, placement, evidence)
    reference = _call(_native.attest_binding, placement, evidence)
    if reference[0] == "error" or reference[1] is None:
        assert restored == reference
        return reference[1] if reference[0] == "ok" else None
    a, b = restored[1], reference[1]
    assert restored[0] == "ok" and a is not None
    assert type(a) is type(b)
    left, right = field_state(a), field_state(b)
    assert list(left) == list(right)  # the same keys, in the same order
    for name in left:
        if name == "evidence":
            continue
        assert left[name] == right[name], name
    assert a.placement is b.placement
    assert left["_binding_dict"].keys() == right["_binding_dict"].keys()
    assert all(left["_binding_dict"][k] is right["_binding_dict"][k] for k in left["_binding_dict"])
    # the evidence: the argument itself, equal field by field to attest_binding's copy
    assert a.evidence is evidence
    if type(evidence) is CLASSES[1]:
        assert b.evidence is not evidence
        # (the copy holds the evidence fields, read by name, in the evidence's order)
        copied = field_state(b.evidence)
        assert all(copied[name] is getattr(evidence, name) for name in copied)
        assert list(copied) == [name for name in field_state(evidence) if name in copied]
    return a


@pytest.mark.parametrize("placement", [SMALL, PLACEMENT], ids=["three-steps", "fused"])
def test_valid_evidence_is_attested_as_attest_binding_does(placement: Any) -> None:
    for evidence in _evidences(placement):
        assert _same_decision(placement, evidence) is not None


@pytest.mark.parametrize("placement", [SMALL, PLACEMENT], ids=["three-steps", "fused"])
def test_a_binding_manifest_gets_the_copy(placement: Any) -> None:
    """Not an evidence (the bind path's manifest): the copy is built, exactly as attest_binding."""
    for binding in build_runtime_bindings(placement):
        restored = _call(_native.attest_restored, placement, binding)[1]
        reference = _call(_native.attest_binding, placement, binding)[1]
        assert restored is not None and reference is not None
        assert type(restored.evidence) is CLASSES[1] and restored.evidence is not binding
        assert field_state(restored.evidence) == field_state(reference.evidence)
        assert restored == reference


_SCALAR_FORGERIES: list[tuple[str, Any]] = [
    ("resource_id", "other"),
    ("resource_id", 7),
    ("revision", "r-other"),
    ("placement_id", "elsewhere"),
    ("placement_digest", "0" * 64),
    ("placement_digest", None),
    ("instance_id", ""),
    ("instance_id", 5),
    ("participant_id", ""),
    ("generation", -1),
    ("generation", 2**64),
    ("generation", True),
    ("lease_id", ""),
    ("lease_id", None),
    ("fragments", None),
    ("fragments", [1, 2]),
    ("fragments", ()),
]


@pytest.mark.parametrize("placement", [SMALL, PLACEMENT], ids=["three-steps", "fused"])
@pytest.mark.parametrize("name,value", _SCALAR_FORGERIES)
def test_forged_evidence_decides_as_attest_binding(placement: Any, name: str, value: Any) -> None:
    for evidence in _evidences(placement)[:1]:
        _same_decision(placement, forged_copy(evidence, **{name: value}))


def test_a_missing_field_decides_as_attest_binding() -> None:
    for placement in (SMALL, PLACEMENT):
        evidence = _evidences(placement)[0]
        for name in list(field_state(evidence)):
            forged = forged_copy(evidence)
            del forged.__dict__[name]
            _same_decision(placement, forged)


_FRAGMENT_CHANGES: list[dict[str, Any]] = [
    {"owner": "someone"},
    {"fragment_id": ""},
    {"worker_id": 3},
    {"address": 2**64},
    {"address": -1},
    {"nbytes": 2**70},
    {"placement_fragment_id": "zzz-unknown"},
    {"storage_nbytes": -4},
]


@settings(max_examples=60, deadline=None)
@given(
    fused=st.booleans(),
    which=st.integers(0, 1),
    index=st.integers(0, 63),
    change=st.sampled_from(_FRAGMENT_CHANGES),
    reverse=st.booleans(),
)
def test_forged_fragments_decide_as_attest_binding(fused: bool, which: int, index: int, change: dict[str, Any], reverse: bool) -> None:
    placement = PLACEMENT if fused else SMALL
    evidence = _evidences(placement)[which]
    fragments = list(evidence.fragments)
    at = index % len(fragments)
    fragments[at] = _copy(fragments[at], **change)
    if reverse:
        fragments.reverse()
    _same_decision(placement, forged_copy(evidence, fragments=tuple(fragments)))


def test_wrong_arguments() -> None:
    with pytest.raises(TypeError, match="attest_restored expects 13 arguments"):
        _native.attest_restored(*CLASSES[:5])
    with pytest.raises(TypeError, match="attest_binding expects 13 arguments"):
        _native.attest_binding(*CLASSES[:5])


def test_the_restore_stores_the_unpickled_evidence() -> None:
    """_restore_attestation's fast path (attest_restored) gives the attestation the evidence
    object it was handed, as before (the copy replaced)."""
    placement = PLACEMENT
    for evidence in _evidences(placement):
        restored = bound_pickle._restore_attestation(placement, evidence)
        assert restored.evidence is evidence
        oracle = object.__new__(CLASSES[0])
        oracle.__setstate__((placement, evidence))
        assert list(field_state(restored)) == list(field_state(oracle))
        assert all(field_state(restored)[k] == field_state(oracle)[k] for k in field_state(oracle))


class _Key(str):
    pass


class _State(dict):  # type: ignore[type-arg]
    pass


@pytest.mark.parametrize("placement", [SMALL, PLACEMENT], ids=["three-steps", "fused"])
def test_an_evidence_dict_that_is_not_plain_is_read_by_getattr(placement: Any) -> None:
    """attest_restored reads an exact evidence's fields from its instance dict only when that is
    a plain dict (exact str keys); otherwise by getattr, as attest_binding: the same decision."""
    evidence = _evidences(placement)[0]
    keyed = forged_copy(evidence)
    keyed.__dict__[_Key("extra")] = 1
    _same_decision(placement, keyed)
    swapped = forged_copy(evidence)
    object.__setattr__(swapped, "__dict__", _State(evidence.__dict__))
    _same_decision(placement, swapped)
    for name, value in _SCALAR_FORGERIES[:6]:
        forged = forged_copy(evidence, **{name: value})
        forged.__dict__[_Key("extra")] = 1
        _same_decision(placement, forged)

"""``_native.attest_many``: ``attestation._attest_many``'s fused path for a whole side in one C call.

Every binding it decides gets the attestation ``attest_binding`` builds, validated on every call
(nothing is remembered on a binding); every other entry is None and is attested in Python, in
order, so the first failure is unchanged. Tested against the Python loop as the oracle over
generated placements with valid and forged bindings, and with hostile arguments."""

from __future__ import annotations

import dataclasses
from typing import Any, List, Tuple

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from layout_model import Layout, build_placement, build_runtime_bindings
from test_planner_oracle import placement_pairs

from mooncake.reshard import _native
from mooncake.reshard.weight import PlacementFragment, RuntimeBindingFragment, TensorDescriptor
from mooncake.reshard.weight import WeightPlacementPart, WeightRuntimeBindingManifest
from mooncake.reshard.weight._planner.attestation import (
    RuntimeBindingAttestation,
    RuntimeBindingEvidence,
    _attest_many,
)

CLASSES = (
    RuntimeBindingAttestation,
    RuntimeBindingEvidence,
    RuntimeBindingFragment,
    PlacementFragment,
    TensorDescriptor,
    WeightRuntimeBindingManifest,
)


def call(placement: Any, given: Any, **replace: Any) -> Any:
    values = {
        "placement": placement,
        "part_index": placement._part_index(),
        "bindings": given,
        "resource_id": placement.resource_id,
        "placement_id": placement.placement_id,
        "digest": placement.digest,
        "revision": placement.revision,
    }
    values.update(replace)
    # (no snapshot class; the part class as attestation.py passes it)
    return _native.attest_many(*CLASSES, *values.values(), None, WeightPlacementPart)


def outcome(placement: Any, bindings: Tuple[Any, ...], fused: bool) -> Any:
    """``_attest_many`` with (or without) the C call: the attestations and the bindings' states
    (which must not change), or the failure."""
    original = _native.attest_many
    if not fused:
        _native.attest_many = lambda *args: None  # type: ignore[attr-defined]
    before = [dict(b.__dict__) for b in bindings]
    try:
        result = _attest_many(placement, bindings)
    except ValueError as exc:
        return ("error", str(exc))
    finally:
        _native.attest_many = original  # type: ignore[attr-defined]
    assert [b.__dict__ for b in bindings] == before  # nothing remembered on a binding
    return ("ok", result)


def copies(bindings: Tuple[Any, ...]) -> Tuple[Any, ...]:
    """Fresh, equal bindings (nothing remembered), through the constructor."""
    return tuple(dataclasses.replace(b) for b in bindings)


FORGERIES = ["none", "digest", "nbytes", "strides", "owner-free-copy", "overlap", "participant", "stale-entry"]


STALE_SLOT = "_mooncake_attestation"


def forge(bindings: Tuple[Any, ...], kind: str, index: int) -> Tuple[Any, ...]:
    bindings = list(bindings)
    k = index % len(bindings)
    b = bindings[k]
    if kind == "digest":
        object.__setattr__(b, "placement_digest", "0" * 64)
    elif kind == "nbytes":
        fragment = b.fragments[0]
        object.__setattr__(fragment, "nbytes", fragment.nbytes + 1)
    elif kind == "strides":
        fragment = b.fragments[0]
        object.__setattr__(fragment, "strides_bytes", tuple(s + 1 for s in fragment.strides_bytes))
    elif kind == "overlap" and len(b.fragments) > 1:
        second = b.fragments[1]
        object.__setattr__(second, "address", b.fragments[0].address)
        object.__setattr__(second, "storage_address", b.fragments[0].storage_address)
    elif kind == "participant":
        object.__setattr__(b, "participant_id", "nobody")
    elif kind == "stale-entry":  # what an earlier version remembered: now an ignored attribute
        b.__dict__[STALE_SLOT] = ("junk",)
    return tuple(bindings)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(placement_pairs(), st.lists(st.tuples(st.sampled_from(FORGERIES), st.integers(0, 100)), max_size=2))
def test_same_attestations_and_failures_as_the_python_loop(
    pair: Tuple[Layout, Layout], forgeries: List[Tuple[str, int]]
) -> None:
    placement = build_placement(pair[1])
    original = build_runtime_bindings(placement)
    assume(original)
    runs = []
    for fused in (False, True):
        bindings = build_runtime_bindings(placement)  # fresh fragments too: forged per run
        for kind, index in forgeries:
            bindings = forge(bindings, kind, index)
        runs.append(outcome(placement, bindings, fused))
    slow, fast = runs
    assert slow[0] == fast[0]
    if slow[0] == "error":
        assert fast == slow
    else:
        assert fast[1] == slow[1]  # equal attestations (placement and evidence)
        assert all(attestation.placement is placement for attestation in fast[1])


def test_decided_entries_and_every_call_validates() -> None:
    from layout_model import TensorSpec
    from planner_helpers import tp_placement

    placement = tp_placement("dst", TensorSpec("w", (8, 4)), 4, 0)
    bindings = build_runtime_bindings(placement)
    result = call(placement, bindings)
    assert isinstance(result, list) and len(result) == len(bindings)
    fields = {field.name for field in dataclasses.fields(WeightRuntimeBindingManifest)}
    for binding, attestation in zip(bindings, result):
        assert type(attestation) is RuntimeBindingAttestation
        assert set(binding.__dict__) == fields  # nothing remembered on the binding
        assert attestation == RuntimeBindingAttestation(placement, binding)
    # a second call decides every binding again, from its current values
    again = call(placement, bindings)
    assert again == result and all(a is not b for a, b in zip(again, result))
    # an in-place forgery after a first call is seen by the next call: left to Python, which refuses it
    fragment = bindings[0].fragments[0]
    object.__setattr__(fragment, "nbytes", fragment.nbytes + 1)
    forged = call(placement, bindings)
    assert forged[0] is None and forged[1:] == result[1:]
    with pytest.raises(ValueError, match="^runtime binding byte size does not match placement"):
        _attest_many(placement, bindings)


@pytest.fixture(scope="module")
def side() -> Tuple[Any, Tuple[Any, ...]]:
    from layout_model import TensorSpec
    from planner_helpers import tp_placement

    placement = tp_placement("dst", TensorSpec("w", (8, 4)), 4, 0)
    return placement, build_runtime_bindings(placement)


def test_wrong_arguments_raise_type_error(side: Tuple[Any, Tuple[Any, ...]]) -> None:
    placement, bindings = side
    fresh = copies(bindings)
    with pytest.raises(TypeError):
        _native.attest_many(*CLASSES)
    for k in range(len(CLASSES)):
        for bad in (None, "cls", int):
            classes = list(CLASSES)
            classes[k] = bad
            with pytest.raises(TypeError):
                _native.attest_many(*classes, placement, placement._part_index(), fresh, placement.resource_id,
                                    placement.placement_id, placement.digest, placement.revision)
    args = (placement, placement._part_index(), fresh, placement.resource_id, placement.placement_id,
            placement.digest, placement.revision)
    # the 14th argument is the optional snapshot class, the 15th the optional part class (None:
    # not given); not a class, or a 16th
    for extra in (("_mooncake_attestation",), (1,), (None, "part"), (None, WeightPlacementPart, None)):
        with pytest.raises(TypeError):
            _native.attest_many(*CLASSES, *args, *extra)
    assert type(_native.attest_many(*CLASSES, *args, None)) is list
    assert type(_native.attest_many(*CLASSES, *args, None, WeightPlacementPart)) is list
    assert type(_native.attest_many(*CLASSES, *args, None, None)) is list


@pytest.mark.parametrize("name", ["bindings", "part_index"])
@pytest.mark.parametrize("value", [None, [], "x", 1 << 80])
def test_wrong_containers_decline(side: Tuple[Any, Tuple[Any, ...]], name: str, value: Any) -> None:
    placement, bindings = side
    assert call(placement, copies(bindings), **{name: value}) is None


@pytest.mark.parametrize(
    ("name", "value"),
    [("resource_id", "other"), ("placement_id", None), ("digest", "f" * 64), ("revision", 1 << 80)],
)
def test_other_identity_values_leave_every_binding_to_python(
    side: Tuple[Any, Tuple[Any, ...]], name: str, value: Any
) -> None:
    placement, bindings = side
    fresh = copies(bindings)
    assert call(placement, fresh, **{name: value}) == [None] * len(fresh)
    assert all(STALE_SLOT not in b.__dict__ for b in fresh)


def test_foreign_items_are_left_to_python(side: Tuple[Any, Tuple[Any, ...]]) -> None:
    placement, bindings = side
    fresh = copies(bindings)
    result = call(placement, (object(), None, fresh[0], 1 << 80) + fresh[1:])
    assert result[:2] == [None, None] and result[3] is None
    assert type(result[2]) is RuntimeBindingAttestation
    assert call(placement, fresh[1:], part_index={}) == [None] * (len(fresh) - 1)

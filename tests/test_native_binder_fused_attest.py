"""``attest_binding``'s fused pass (from 16 fragment pairs on): bind_views, address_ranges_clear
and the attestation's two maps in one pass over the pairs (each runtime fragment's dict read
once, no view tuples). It must build exactly the attestation the three steps build (same map
keys, the very objects, in the same order), decline whatever any of them declines, and decide
every forgery as the Python path does (``_attest_many`` with and without the C call)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spec_helpers import field_state, forged_instance

from layout_model import build_runtime_bindings
from memory_executor import tp_placement
from test_native_binder_attest_many import CLASSES
from test_native_binder_tensor_ids import PLACEMENT, _copy

from mooncake.reshard import _native
from mooncake.reshard.weight._planner.attestation import _attest_many

N = len(PLACEMENT.parts[0].fragments)
SMALL = tp_placement(2, prefix="s", shape=(4, 6), tensors=tuple(f"s{k:02d}" for k in range(7)))


def _fused(placement: Any, binding: Any) -> Any:
    part = placement._part_index()[binding.participant_id]
    return _native.attest_binding(
        *CLASSES[:5], placement, binding, part.fragments, part.tensors, placement.resource_id,
        placement.placement_id, placement.digest, placement.revision,
    )


def _three_steps(placement: Any, binding: Any) -> Any:
    """What attest_binding did before the fused pass: bind_views, address_ranges_clear, attest."""
    attestation_cls, evidence_cls, runtime_cls, placement_cls, tensor_cls = CLASSES[:5]
    part = placement._part_index()[binding.participant_id]
    views = _native.bind_views(
        binding.instance_id, part.fragments, binding.fragments, part.tensors, placement_cls, runtime_cls, tensor_cls
    )
    if views is None:
        return None
    if len(views) > 1 and not _native.address_ranges_clear(views, runtime_cls):
        return None
    return _native.attest(attestation_cls, evidence_cls, runtime_cls, placement, binding, part.fragments)


def _same_attestation(a: Any, b: Any) -> None:
    assert type(a) is type(b)
    assert a.placement is b.placement
    for name in ("_placement_dict", "_binding_dict"):
        x, y = field_state(a)[name], field_state(b)[name]
        assert type(x) is dict and type(y) is dict
        assert list(x) == list(y)
        assert all(k1 is k2 for k1, k2 in zip(x, y))  # the very key objects, in order
        assert all(x[k] is y[k] for k in x)
    assert dict(a._placement_by_id) == field_state(a)["_placement_dict"]
    assert dict(a._binding_by_id) == field_state(a)["_binding_dict"]
    ea, eb = a.evidence, b.evidence
    assert field_state(ea).keys() == field_state(eb).keys()
    assert all(field_state(ea)[k] is field_state(eb)[k] for k in field_state(ea))


def _outcome(placement: Any, bindings: Any, fused: bool) -> Any:
    original = _native.attest_many
    if not fused:
        _native.attest_many = lambda *args: None  # type: ignore[attr-defined]
    try:
        return ("ok", [a.evidence.fragments for a in _attest_many(placement, bindings)])
    except (ValueError, AttributeError, TypeError) as exc:
        return ("error", type(exc).__name__, str(exc))
    finally:
        _native.attest_many = original  # type: ignore[attr-defined]


def _forge_runtime(bindings: Any, changes: dict[int, dict[str, Any]], **binding_changes: Any) -> tuple[Any, ...]:
    first = bindings[0]
    fragments = list(first.fragments)
    for index, fields in changes.items():
        fragments[index] = _copy(fragments[index], **fields)
    return (_copy(first, fragments=tuple(fragments), **binding_changes),) + tuple(bindings[1:])


def _decides_as_python(bindings: Any) -> Any:
    fast = _outcome(PLACEMENT, bindings, True)
    assert fast == _outcome(PLACEMENT, bindings, False)
    return fast


def test_the_fused_pass_builds_what_the_three_steps_build() -> None:
    assert N >= 16
    for binding in build_runtime_bindings(PLACEMENT):
        fused = _fused(PLACEMENT, binding)
        assert fused is not None
        _same_attestation(fused, _three_steps(PLACEMENT, binding))


def test_below_the_threshold_the_three_steps_run() -> None:
    assert len(SMALL.parts[0].fragments) < 16
    for binding in build_runtime_bindings(SMALL):
        fused = _fused(SMALL, binding)
        assert fused is not None
        _same_attestation(fused, _three_steps(SMALL, binding))


def test_gc_state_is_the_three_steps_state() -> None:
    import gc

    binding = build_runtime_bindings(PLACEMENT)[0]
    a, b = _fused(PLACEMENT, binding), _three_steps(PLACEMENT, binding)
    assert gc.is_tracked(a) == gc.is_tracked(b)
    assert gc.is_tracked(a.evidence) == gc.is_tracked(b.evidence)
    for name in ("_placement_dict", "_binding_dict"):
        assert gc.is_tracked(field_state(a)[name]) == gc.is_tracked(field_state(b)[name])


POSITIONS = [0, 1, 8, N - 1]


@pytest.mark.parametrize("index", POSITIONS)
@pytest.mark.parametrize(
    "fields",
    [
        {"owner": "someone"},
        {"fragment_id": ""},
        {"fragment_id": 7},
        {"worker_id": 3},
        {"device": None},
        {"address": 2**64},
        {"address": -1},
        {"address": 2**64 - 8},
        {"address": 1.5},
        {"nbytes": 2**70},
        {"storage_address": 2**65},
        {"storage_nbytes": -4},
        {"storage_address": 0, "storage_nbytes": 2**64 - 1},
        {"address": True},
    ],
)
def test_a_forged_runtime_fragment_decides_as_python(index: int, fields: dict[str, Any]) -> None:
    bindings = _forge_runtime(build_runtime_bindings(PLACEMENT), {index: fields})
    fused, steps = _fused(PLACEMENT, bindings[0]), _three_steps(PLACEMENT, bindings[0])
    assert (fused is None) == (steps is None)
    if fused is not None:
        _same_attestation(fused, steps)
    _decides_as_python(bindings)


@pytest.mark.parametrize("index", POSITIONS[1:])
def test_a_repeated_fragment_id_declines(index: int) -> None:
    bindings = build_runtime_bindings(PLACEMENT)
    earlier = bindings[0].fragments[index - 1].fragment_id
    forged = _forge_runtime(bindings, {index: {"fragment_id": "".join(list(earlier))}})
    assert _fused(PLACEMENT, forged[0]) is None
    assert _three_steps(PLACEMENT, forged[0]) is None
    assert _decides_as_python(forged)[0] == "error"


@pytest.mark.parametrize("index", POSITIONS[1:])
def test_an_overlapping_address_declines(index: int) -> None:
    bindings = build_runtime_bindings(PLACEMENT)
    previous = bindings[0].fragments[index - 1]
    forged = _forge_runtime(bindings, {index: {"address": previous.address, "storage_address": previous.address}})
    assert _fused(PLACEMENT, forged[0]) is None
    assert _decides_as_python(forged)[0] == "error"


def test_a_shared_allocation_decides_as_python() -> None:
    bindings = build_runtime_bindings(PLACEMENT)
    a, b = bindings[0].fragments[2], bindings[0].fragments[3]
    start = min(a.address, b.address)
    size = max(a.address + a.nbytes, b.address + b.nbytes) - start
    forged = _forge_runtime(
        bindings, {2: {"storage_address": start, "storage_nbytes": size, "storage_offset_bytes": a.address - start},
                   3: {"storage_address": start, "storage_nbytes": size, "storage_offset_bytes": b.address - start}}
    )
    assert _fused(PLACEMENT, forged[0]) is not None
    _same_attestation(_fused(PLACEMENT, forged[0]), _three_steps(PLACEMENT, forged[0]))
    _decides_as_python(forged)


@pytest.mark.parametrize("instance_id", [7, None, b"x"])
def test_an_instance_id_not_a_str_decides_as_python(instance_id: Any) -> None:
    forged = _forge_runtime(build_runtime_bindings(PLACEMENT), {}, instance_id=instance_id)
    assert _fused(PLACEMENT, forged[0]) is None
    _decides_as_python(forged)


def test_a_str_subclass_instance_id_declines() -> None:
    class S(str):
        pass

    bindings = build_runtime_bindings(PLACEMENT)
    forged = _forge_runtime(bindings, {}, instance_id=S(bindings[0].instance_id))
    assert _fused(PLACEMENT, forged[0]) is None
    _decides_as_python(forged)


def _declines_with_fragment(index: int, cls: Any, state: dict[str, Any]) -> None:
    """Binding 0's fragment at index replaced by an instance of cls with the given state (its
    fields, stored one by one: the C layout has no __dict__)."""
    bindings = build_runtime_bindings(PLACEMENT)
    forged_fragment = forged_instance(cls, state)
    fragments = list(bindings[0].fragments)
    fragments[index] = forged_fragment
    forged = (_copy(bindings[0], fragments=tuple(fragments)),) + tuple(bindings[1:])
    assert _fused(PLACEMENT, forged[0]) is None
    _decides_as_python(forged)


def test_a_runtime_fragment_subclass_declines() -> None:
    fragment = build_runtime_bindings(PLACEMENT)[0].fragments[9]
    _declines_with_fragment(9, type("Sub", (type(fragment),), {}), dict(field_state(fragment)))


def test_a_missing_field_declines() -> None:
    fragment = build_runtime_bindings(PLACEMENT)[0].fragments[4]
    state = {k: v for k, v in field_state(fragment).items() if k != "storage_nbytes"}
    _declines_with_fragment(4, type(fragment), state)


def test_out_of_order_runtime_tensors_use_the_table_and_the_search() -> None:
    # A part whose fragment order differs from its tensors' order: the cursor misses, the table
    # (and, for an equal but distinct id, the search) decide.
    part = PLACEMENT.parts[0]
    fragments = part.fragments
    forged_fragments = tuple(
        _copy(f, tensor_id="".join(list(f.tensor_id))) if k % 3 == 0 else f for k, f in enumerate(fragments)
    )
    parts = (_copy(part, fragments=forged_fragments),) + PLACEMENT.parts[1:]
    forged = _copy(PLACEMENT, parts=parts)
    bindings = build_runtime_bindings(PLACEMENT)
    fast = _outcome(forged, bindings, True)
    assert fast == _outcome(forged, bindings, False)
    binding = bindings[0]
    fused = _fused(forged, binding)
    assert fused is not None
    _same_attestation(fused, _three_steps(forged, binding))


FIELDS = st.sampled_from(["fragment_id", "address", "nbytes", "storage_address", "storage_nbytes", "owner",
                          "worker_id", "device"])
VALUES = st.one_of(st.integers(min_value=-2, max_value=2**66), st.sampled_from(["", "x", None, "cuda:0"]))


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.integers(min_value=0, max_value=N - 1), st.dictionaries(FIELDS, VALUES, max_size=2),
                       max_size=3))
def test_random_forgeries_decide_as_python(changes: dict[int, dict[str, Any]]) -> None:
    forgeries_decide_as_python(changes)


def forgeries_decide_as_python(changes: dict[int, dict[str, Any]]) -> None:
    """PLACEMENT's runtime bindings with ``changes`` (fragment index -> field -> value): the fused
    pass and the three steps agree, and the bind decides as the Python rules do."""
    bindings = _forge_runtime(build_runtime_bindings(PLACEMENT), changes)
    fused = _fused(PLACEMENT, bindings[0])
    steps = _three_steps(PLACEMENT, bindings[0])
    assert (fused is None) == (steps is None)
    if fused is not None:
        _same_attestation(fused, steps)
    _decides_as_python(bindings)

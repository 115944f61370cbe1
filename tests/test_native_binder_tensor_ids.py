"""``attest_binding``'s tensor lookup per fragment: from 16 fragments and 16 tensors on, the
part's tensors are found by the address of the fragment's tensor id first (an identity table;
the ids are strictly increasing, so an identical id is the binary search's only answer), the
search deciding any other id. Equal-but-not-identical ids, unknown ids and forged tensors decide
exactly as the Python path (``_attest_many`` with and without the C call)."""

from __future__ import annotations

from typing import Any

import pytest

from layout_model import build_runtime_bindings
from memory_executor import tp_placement
from spec_helpers import field_state, forged_instance
from test_native_binder_attest_many import CLASSES

from mooncake.reshard import _native
from mooncake.reshard.weight import WeightPlacementPart
from mooncake.reshard.weight._planner.attestation import _attest_many

PLACEMENT = tp_placement(2, prefix="t", shape=(4, 6), tensors=tuple(f"t{k:02d}" for k in range(20)))


def _copy(value: Any, **changes: Any) -> Any:
    # (per field: a runtime fragment stored in its C layout has no __dict__)
    return forged_instance(type(value), {**field_state(value), **changes})


def _outcome(placement: Any, fused: bool) -> Any:
    bindings = build_runtime_bindings(PLACEMENT)  # fresh objects; against the (forged) placement
    original = _native.attest_many
    if not fused:
        _native.attest_many = lambda *args: None  # type: ignore[attr-defined]
    try:
        return ("ok", _attest_many(placement, bindings))
    except ValueError as exc:
        return ("error", str(exc))
    finally:
        _native.attest_many = original  # type: ignore[attr-defined]


def _with_part_fragment(index: int, **changes: Any) -> Any:
    part = PLACEMENT.parts[0]
    fragments = list(part.fragments)
    fragments[index] = _copy(fragments[index], **changes)
    parts = (_copy(part, fragments=tuple(fragments)),) + PLACEMENT.parts[1:]
    return _copy(PLACEMENT, parts=parts)


def test_the_table_path_runs_and_decides() -> None:
    part = PLACEMENT.parts[0]
    assert len(part.fragments) >= 16 and len(part.tensors) >= 16
    assert all(any(f.tensor_id is t.tensor_id for t in part.tensors) for f in part.fragments)
    fast = _outcome(PLACEMENT, True)
    assert fast[0] == "ok" and fast == _outcome(PLACEMENT, False)
    bindings = build_runtime_bindings(PLACEMENT)
    decided = _native.attest_many(
        *CLASSES, PLACEMENT, PLACEMENT._part_index(), bindings, PLACEMENT.resource_id,
        PLACEMENT.placement_id, PLACEMENT.digest, PLACEMENT.revision, None, WeightPlacementPart,
    )
    assert decided is not None and all(item is not None for item in decided)


@pytest.mark.parametrize("index", [0, 7, 19])
def test_an_equal_but_not_identical_tensor_id_is_found_by_the_search(index: int) -> None:
    tensor_id = PLACEMENT.parts[0].fragments[index].tensor_id
    forged = _with_part_fragment(index, tensor_id="".join(list(tensor_id)))
    assert forged.parts[0].fragments[index].tensor_id is not tensor_id
    fast = _outcome(forged, True)
    assert fast == _outcome(forged, False)


@pytest.mark.parametrize("tensor_id", ["t99", "t05x", "", "a"])
def test_an_unknown_tensor_id_decides_as_python(tensor_id: str) -> None:
    forged = _with_part_fragment(5, tensor_id=tensor_id)
    assert _outcome(forged, True) == _outcome(forged, False)


def test_a_tensor_id_of_another_fragment_decides_as_python() -> None:
    other = PLACEMENT.parts[0].fragments[3].tensor_id  # identical object, another tensor
    forged = _with_part_fragment(4, tensor_id=other)
    fast = _outcome(forged, True)
    assert fast == _outcome(forged, False)

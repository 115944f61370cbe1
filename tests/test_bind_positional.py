"""Positional fast paths of binder.c (issue 5, session 18): lookups first tried in the order the
data usually arrives in, each falling back to the existing lookup on the first mismatch.

- ``bound_fragments_ordered`` reads each part fragment's entries of the attestation's
  ``_binding_dict`` / ``_placement_dict`` as the dicts' next entries (attest inserts them in part
  order); any other order, a foreign entry, an equal-but-distinct value, a key of another type:
  the lookups decide. Oracle: the per-part ``bound_fragments`` (lookups only).
- ``logical_target_cover`` (14 arguments) proves the source index ``{f.placement_fragment_id: f}``
  distinct from strictly increasing ids instead of building it; other orders and duplicates build
  it as before. Oracle: ``operations_snapshots`` over the comprehension's indexes.
- ``attest_many`` reads each part tensor's itemsize once, in the load pass, instead of once per
  fragment pair. Oracle: the Python attestation loop (``_attest_many`` without the C call).
- ``attested_executors`` reads the attestation's ``_placement_dict`` in the evidence order.
  Oracle: the Python rows.
- ``logical_target_cover`` finds each selected part's tensors among the catalog's objects by
  address instead of a dict by tensor id. Oracle: the Python checks (declines, never accepts,
  what they reject)."""

from __future__ import annotations

import copy
import dataclasses
import random
from typing import Any, Optional

import pytest

from memory_executor import HostMemory, host_bindings, tp_placement

from mooncake.reshard import _native
from mooncake.reshard.weight._planner.attestation import RuntimeBindingAttestation

from test_native_binder_attest_many import call as attest_many_call
from test_native_binder_attest_many import outcome as attest_outcome
from test_native_binder_ordered import World, _ordered, _per_part, _assert_rows_equal
from test_native_binder_routes import _copy
from test_native_binder_step5_fused import _fused, _separate

TENSORS = tuple(f"t{k:02d}" for k in range(7))


def _world() -> World:
    return World(
        tp_placement(2, prefix="s", dp=2, shape=(6, 4), tensors=TENSORS),
        tp_placement(3, prefix="t", shape=(6, 4), dim=0, tensors=TENSORS),
    )


# --- bound_fragments_ordered ----------------------------------------------------------------


def _reordered(items: list[tuple[Any, Any]], how: str, rng: random.Random) -> dict[Any, Any]:
    items = list(items)
    middle = len(items) // 2
    if how == "reversed":
        items.reverse()
    elif how == "rotated":
        items = items[1:] + items[:1]
    elif how == "swap_middle":
        items[middle], items[middle + 1] = items[middle + 1], items[middle]
    elif how == "shuffled":
        rng.shuffle(items)
    elif how == "foreign_in_middle":
        items.insert(middle, ("zz-not-a-fragment", object()))
    elif how == "equal_keys":  # equal, distinct str objects: matched by value
        items = [("".join(list(key)), value) for key, value in items]
    elif how == "subclass_key_in_middle":
        key, value = items[middle]
        items[middle] = (type("Key", (str,), {})(key), value)
    elif how == "truncated":
        items = items[:middle]
    return dict(items)


ORDERS = [
    "as_built", "reversed", "rotated", "swap_middle", "shuffled", "foreign_in_middle", "equal_keys",
    "subclass_key_in_middle", "truncated",
]


def _per_part_all(parts: Any, attestations: Any) -> Optional[list[Any]]:
    rows = [_per_part(p, a) for p, a in zip(parts, attestations)]
    return None if any(r is None for r in rows) else rows


@pytest.mark.parametrize("which", [0, 1])
@pytest.mark.parametrize("which_dict", ["_binding_dict", "_placement_dict", "both"])
@pytest.mark.parametrize("how", ORDERS)
def test_ordered_rows_equal_the_lookups_in_any_dict_order(which: int, which_dict: str, how: str) -> None:
    world = _world()
    parts, attestations = world.side(which)
    assert all(len(p) >= 4 for p in parts)  # a middle to break the order in
    rng = random.Random(f"{which}{which_dict}{how}")
    for attestation in attestations[::2]:  # some parts keep the built order
        for name in ("_binding_dict", "_placement_dict"):
            if which_dict in (name, "both"):
                original = attestation.__dict__[name]
                object.__setattr__(attestation, name, _reordered(list(original.items()), how, rng))
    expected = _per_part_all(parts, attestations)
    for as_map in (False, True):
        got = _native.bound_fragments_ordered(
            *_classes_ordered(), parts, attestations, world.logical.operations, which, as_map
        )
        if expected is None:
            assert got is None
            continue
        assert got is not None
        if as_map:
            flat = [row for rows in expected for row in rows]
            assert list(got) == [fragment_id for fragment_id, _ in flat]
            assert all(got[fragment_id] == bound for fragment_id, bound in flat)
        else:
            for rows, reference in zip(got, expected):
                _assert_rows_equal(rows, reference)
    if how in ("as_built", "reversed", "rotated", "swap_middle", "shuffled", "equal_keys", "foreign_in_middle"):
        assert expected is not None  # same entries: decided, by the position or by the lookup


def _classes_ordered() -> tuple[Any, ...]:
    from mooncake.reshard.weight._planner.fragments import BoundWeightFragment
    from mooncake.reshard.weight.planner import TransferRegion

    return (BoundWeightFragment, RuntimeBindingAttestation, TransferRegion)


@pytest.mark.parametrize("which", [0, 1])
@pytest.mark.parametrize("position", ["first", "middle", "last"])
def test_ordered_mismatched_value_in_the_dict_order_declines(which: int, position: str) -> None:
    """The entry at the fragment's position has its id but another (equal) object: the lookup
    finds that object too, so the part is not decided (as the per-part path)."""
    world = _world()
    parts, attestations = world.side(which)
    attestation = attestations[0]
    items = list(attestation.__dict__["_placement_dict"].items())
    k = {"first": 0, "middle": len(items) // 2, "last": len(items) - 1}[position]
    key, value = items[k]
    items[k] = (key, _copy(value))
    object.__setattr__(attestation, "_placement_dict", dict(items))
    assert _per_part(parts[0], attestation) is None
    assert _ordered(parts, attestations, world.logical.operations, which) is None
    # the runtime side's entry replaced by an equal copy: still decided (the row carries it)
    parts, attestations = world.side(which)
    attestation = attestations[0]
    items = list(attestation.__dict__["_binding_dict"].items())
    key, value = items[k]
    replaced = dataclasses.replace(value)
    items[k] = (key, replaced)
    object.__setattr__(attestation, "_binding_dict", dict(items))
    expected = _per_part(parts[0], attestation)
    got = _ordered(parts, attestations, world.logical.operations, which)
    assert expected is not None and got is not None
    _assert_rows_equal(got[0], expected)
    assert got[0][k][1].binding is replaced


# --- logical_target_cover: the source index -------------------------------------------------


def _source_variants(sf: tuple[Any, ...], used: Any) -> dict[str, tuple[tuple[Any, ...], bool]]:
    """name -> (source fragments, the snapshot answer the comprehension's index implies)."""
    rng = random.Random(7)
    shuffled = list(sf)
    rng.shuffle(shuffled)
    k = sf.index(used)
    spare = _copy(sf[0], placement_fragment_id="zzz-spare")
    early = _copy(sf[-1], placement_fragment_id="0-early")
    return {
        "sorted": (sf, True),
        "reversed": (sf[::-1], True),
        "shuffled": (tuple(shuffled), True),
        "same_object_twice_adjacent": (sf[: k + 1] + (used,) + sf[k + 1 :], True),
        "same_object_twice_apart": (sf + (used,), True),
        "spare_sorted": (sf + (spare,), True),
        "spare_out_of_order": ((spare,) + sf, True),
        "early_id_first": ((early,) + sf, True),
        "equal_copy_after": (sf[: k + 1] + (_copy(used),) + sf[k + 1 :], False),  # the copy wins
        "equal_copy_before": (sf[:k] + (_copy(used),) + sf[k:], True),  # the object wins
        "used_missing": (sf[:k] + sf[k + 1 :], False),
        "used_replaced_by_copy": (sf[:k] + (_copy(used),) + sf[k + 1 :], False),
    }


def test_cover_source_index_in_any_order_matches_the_comprehension() -> None:
    from test_native_binder_step5_fused import _world as step5_world

    logical, _, _ = step5_world()
    target = logical.target_placement
    sf = logical.source_placement.fragments
    assert list(sf) == sorted(sf, key=lambda f: f.placement_fragment_id)  # the order the fast path proves
    used = logical.operations[len(logical.operations) // 2].source
    for name, (fragments, expected) in _source_variants(sf, used).items():
        fused = _fused(logical, target.fragments, fragments)
        assert fused is not None, name
        oracle = _separate(logical, target.fragments, fragments)
        assert fused[1] is expected, name
        assert (oracle is True) is expected, name  # operations_snapshots: True, or None / False


def test_cover_sorted_source_index_with_operations_outside_it() -> None:
    """Sorted ids (the index not built up front) and an operation whose source is not one of
    the listed objects: the index is built then and decides, as before."""
    from test_native_binder_step5_fused import _world as step5_world

    logical, _, _ = step5_world()
    target = logical.target_placement
    sf = logical.source_placement.fragments
    for k in (0, len(sf) // 2, len(sf) - 1):
        variant = sf[:k] + (_copy(sf[k]),) + sf[k + 1 :]
        fused = _fused(logical, target.fragments, variant)
        used = any(op.source is sf[k] for op in logical.operations)
        assert fused is not None
        assert fused[1] is (not used)
        assert (_separate(logical, target.fragments, variant) is True) is (not used)


# --- attest_many: itemsize read once per tensor ---------------------------------------------


def _attest_side(tensors: int = 20) -> tuple[Any, Any]:
    placement = tp_placement(2, prefix="a", shape=(4, 6), tensors=tuple(f"w{k:02d}" for k in range(tensors)))
    bindings = host_bindings(placement, HostMemory(), prefix="a")
    assert all(len(b.fragments) >= 16 for b in bindings)  # the fused pass (BD_FUSED_MIN)
    return placement, bindings


@pytest.mark.parametrize("position", [0, 9, 19])
def test_attest_many_runtime_itemsize_mismatch_declines(position: int) -> None:
    placement, bindings = _attest_side()
    decided = attest_many_call(placement, bindings)
    assert all(type(a) is RuntimeBindingAttestation for a in decided)
    fragment = bindings[1].fragments[position]
    object.__setattr__(fragment, "itemsize", fragment.itemsize * 2)
    result = attest_many_call(placement, bindings)
    assert result[0] == decided[0] and result[1] is None
    slow = attest_outcome(placement, bindings, fused=False)
    fast = attest_outcome(placement, bindings, fused=True)
    assert slow[0] == "error" and fast == slow


def test_attest_many_tensor_itemsize_changed_between_calls() -> None:
    """Nothing is kept between calls: a tensor descriptor whose itemsize changes is read again."""
    placement, bindings = _attest_side()
    assert all(type(a) is RuntimeBindingAttestation for a in attest_many_call(placement, bindings))
    tensor = placement.tensors[5]
    original = tensor.itemsize
    object.__setattr__(tensor, "itemsize", original * 2)
    try:
        assert attest_many_call(placement, bindings) == [None] * len(bindings)
        slow = attest_outcome(placement, bindings, fused=False)
        assert slow[0] == "error" and attest_outcome(placement, bindings, fused=True) == slow
    finally:
        object.__setattr__(tensor, "itemsize", original)
    assert all(type(a) is RuntimeBindingAttestation for a in attest_many_call(placement, bindings))


def test_attest_many_tensor_without_itemsize_is_left_to_python() -> None:
    """A tensor whose itemsize cannot be read: the load pass leaves it to the pair, which
    declines; the Python loop raises as before."""
    placement, bindings = _attest_side()
    tensor = placement.tensors[3]
    state: dict[str, Any] = tensor.__dict__
    original = state.pop("itemsize")
    try:
        assert attest_many_call(placement, bindings) == [None] * len(bindings)
        with pytest.raises(AttributeError):
            attest_outcome(placement, bindings, fused=False)
        with pytest.raises(AttributeError):
            attest_outcome(placement, bindings, fused=True)
    finally:
        state["itemsize"] = original
    assert all(type(a) is RuntimeBindingAttestation for a in attest_many_call(placement, bindings))


# --- attested_executors: the placement dict read in the evidence order ------------------------


@pytest.mark.parametrize("how", ORDERS)
def test_attested_executors_in_any_placement_dict_order(how: str) -> None:
    from test_native_binder import _executors_kernel, _python_rows

    placement, bindings = _attest_side()
    index = placement._part_index()
    rng = random.Random(how)
    for binding in bindings:
        part = index[binding.participant_id]
        attestation = RuntimeBindingAttestation._from_validated(placement, binding)
        reference = RuntimeBindingAttestation._from_validated(placement, dataclasses.replace(binding))
        items = list(attestation.__dict__["_placement_dict"].items())
        reordered = _reordered(items, how, rng)
        object.__setattr__(attestation, "_placement_dict", reordered)
        object.__setattr__(reference, "_placement_dict", dict(reordered))
        built = _executors_kernel(placement, part, attestation)
        expected = _python_rows(placement, part, reference)
        if how == "subclass_key_in_middle":  # its __eq__ would run in a probe: declined (AUDIT5 F5)
            assert built is None
            continue
        assert built is not None
        if how != "truncated":  # (the Python loop reads the part, not the forged dict: not an oracle there)
            assert built[1] == expected
        snapshots = sum(len(row[1]) for row in built[1])
        # a snapshot for exactly the evidence fragments the dict holds (the kernel's docstring)
        assert snapshots == len(binding.fragments) - (len(items) - len(items) // 2 if how == "truncated" else 0)


# --- logical_target_cover: the tensor catalog by address -------------------------------------


def _catalog_variants(catalog: tuple[Any, ...]) -> dict[str, tuple[Any, ...]]:
    middle = len(catalog) // 2
    equal = dataclasses.replace(catalog[middle])
    foreign = dataclasses.replace(catalog[-1], tensor_id="zz-foreign")
    return {
        "missing_first": catalog[1:],
        "missing_middle": catalog[:middle] + catalog[middle + 1 :],
        "extra_foreign": catalog + (foreign,),
        "same_object_twice": catalog[: middle + 1] + (catalog[middle],) + catalog[middle + 1 :],
        "equal_copy_in_middle": catalog[:middle] + (equal,) + catalog[middle + 1 :],
        "reversed": catalog[::-1],
        "swap_middle": catalog[:middle] + (catalog[middle + 1], catalog[middle]) + catalog[middle + 2 :],
    }


def test_cover_tensor_catalog_variants_agree_with_the_python_checks() -> None:
    from test_native_binder_cover import cover, python_outcome

    world = _world()
    plan = world.logical
    assert len(plan.target_tensors) == len(TENSORS)
    assert cover(plan) is True and python_outcome(plan) is None
    for name, catalog in _catalog_variants(tuple(plan.target_tensors)).items():
        forged = copy.copy(plan)
        object.__setattr__(forged, "target_tensors", catalog)
        assert cover(forged) is None, name  # declined: the Python checks decide
        assert cover(plan, tensors=catalog) is None, name
        expected = python_outcome(forged)
        if name in ("reversed", "swap_middle", "same_object_twice", "missing_first", "missing_middle",
                    "extra_foreign"):
            assert expected is not None, name

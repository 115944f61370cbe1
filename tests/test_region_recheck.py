"""The canonical-geometry recheck of plan regions (``_native.regions_canonical`` and
``weight._planner.region_check.recheck_regions``).

The C predicate is checked against a brute-force oracle, ``TransferRegion.__post_init__`` run on
a copy of the region: it may only prove regions the oracle accepts, and for plain small values
(exact ints and tuples, positive fragment extents) it decides exactly as the oracle does.
"""

from __future__ import annotations

import dataclasses
import types
from typing import Any, Callable, Optional

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spec_helpers import IntSub, StrSub, field_state, forged_instance

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank, PlacementFragment
from mooncake.reshard.weight._planner.contracts import TransferRegion
from mooncake.reshard.weight._planner.fragments import BoundWeightFragment
from mooncake.reshard.weight._planner.geometry import canonical_region_geometry
from mooncake.reshard.weight._planner.region_check import _PLAIN_TYPES, recheck_regions
from mooncake.reshard.weight.storage_manifest import StoredFragmentSnapshot

_REGION_FIELDS = tuple(f.name for f in dataclasses.fields(TransferRegion))
_INT_FIELDS = ("source_base_offset", "target_base_offset", "inner_bytes")
_TUPLE_FIELDS = ("overlap_offset", "overlap_shape", "outer_loop_counts", "source_strides", "target_strides")


def proven(operations: tuple[Any, ...], start: int = 0) -> int:
    return _native.regions_canonical(operations, start, BoundWeightFragment, _PLAIN_TYPES)


def oracle_message(op: Any) -> Optional[str]:
    """``TransferRegion.__post_init__`` on a copy of ``op``: None when it accepts, else its message
    (prefixed with the exception type when the class fails with something else than ValueError,
    e.g. a forged non-iterable fragment box)."""
    clone = forged_instance(type(op), dict(field_state(op)))
    try:
        TransferRegion.__post_init__(clone)
    except ValueError as error:
        return str(error)
    except (TypeError, AttributeError) as error:
        return f"{type(error).__name__}: {error}"
    return None


def forge(op: Any, **changes: Any) -> Any:
    """A copy of ``op`` with fields written through ``object.__setattr__`` (no validation)."""
    clone = forged_instance(type(op), dict(field_state(op)))
    for name, value in changes.items():
        object.__setattr__(clone, name, value)
    return clone


def forge_fragment(fragment: Any, **changes: Any) -> Any:
    if isinstance(fragment, types.SimpleNamespace):
        clone = types.SimpleNamespace(**vars(fragment))
    else:
        clone = forged_instance(type(fragment), dict(field_state(fragment)))
    for name, value in changes.items():
        object.__setattr__(clone, name, value)
    return clone


# ---------------------------------------------------------------------------------------------
# Valid regions


def make_fragment(kind: str, tensor_id: str, offset: tuple[int, ...], shape: tuple[int, ...], itemsize: int) -> Any:
    nbytes = itemsize
    for extent in shape:
        nbytes *= extent
    if kind == "placement":
        return PlacementFragment(tensor_id, offset, shape, nbytes, ParallelRank())
    if kind == "stored":
        return StoredFragmentSnapshot("frag", tensor_id, offset, shape, "key", 0, nbytes)
    # Any object with the four attributes (read with getattr by the C predicate).
    return types.SimpleNamespace(tensor_id=tensor_id, global_offset=offset, local_shape=shape, nbytes=nbytes)


def make_region(source: Any, target: Any, overlap_offset: tuple[int, ...], overlap_shape: tuple[int, ...], itemsize: int) -> Any:
    geometry = canonical_region_geometry(
        source.global_offset, source.local_shape, target.global_offset, target.local_shape,
        overlap_offset, overlap_shape, itemsize,
    )
    return TransferRegion(source.tensor_id, source, target, overlap_offset, overlap_shape, *geometry)


@st.composite
def valid_regions(draw: Callable[..., Any], max_ndim: int = 4) -> Any:
    ndim = draw(st.integers(1, max_ndim))
    itemsize = draw(st.sampled_from((1, 2, 4, 8)))
    global_shape = tuple(draw(st.integers(1, 6)) for _ in range(ndim))
    boxes = []
    for _side in range(2):
        offset, shape = [], []
        for extent in global_shape:
            lo = draw(st.integers(0, extent - 1))
            hi = draw(st.integers(lo + 1, extent))
            offset.append(lo)
            shape.append(hi - lo)
        boxes.append((tuple(offset), tuple(shape)))
    (s_off, s_shape), (t_off, t_shape) = boxes
    lo = tuple(max(a, b) for a, b in zip(s_off, t_off))
    hi = tuple(min(a + x, b + y) for a, x, b, y in zip(s_off, s_shape, t_off, t_shape))
    if any(h <= l for l, h in zip(lo, hi)):
        # Disjoint boxes: use the source box as target too.
        t_off, t_shape = s_off, s_shape
        lo, hi = s_off, tuple(a + x for a, x in zip(s_off, s_shape))
    overlap_offset = tuple(draw(st.integers(l, h - 1)) for l, h in zip(lo, hi))
    overlap_shape = tuple(draw(st.integers(1, h - o)) for o, h in zip(overlap_offset, hi))
    kinds = ("placement", "stored", "namespace")
    source = make_fragment(draw(st.sampled_from(kinds)), "w", s_off, s_shape, itemsize)
    target = make_fragment(draw(st.sampled_from(("placement", "namespace"))), "w", t_off, t_shape, itemsize)
    return make_region(source, target, overlap_offset, overlap_shape, itemsize)


@given(valid_regions())
def test_valid_regions_are_proven(region: Any) -> None:
    assert oracle_message(region) is None
    assert proven((region,)) == 1
    assert proven((region, region, region), 1) == 3


def test_spec_worked_examples_are_proven() -> None:
    cases = [  # spec §11.7 A-D
        (((1, 0, 0), (2, 6, 8)), ((0, 2, 0), (4, 3, 8)), ((1, 2, 0), (2, 3, 8)), 2),
        (((1, 0, 0), (2, 6, 8)), ((0, 0, 4), (4, 6, 4)), ((1, 0, 4), (2, 6, 4)), 2),
        (((0, 0), (2, 4)), ((0, 0), (2, 2)), ((0, 0), (2, 2)), 2),
        (((0, 0), (4096, 1024)), ((0, 0), (4096, 512)), ((0, 0), (4096, 512)), 2),
    ]
    regions = tuple(
        make_region(make_fragment("placement", "w", *s, it), make_fragment("placement", "w", *t, it), *o, it)
        for s, t, o, it in cases
    )
    assert proven(regions) == len(regions)
    assert regions[0].source_base_offset == 32 and regions[0].target_base_offset == 48


# ---------------------------------------------------------------------------------------------
# Single-field forgeries against the oracle

_INT_VALUES = st.one_of(
    st.integers(-3, 70),
    st.sampled_from((2**31, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64, 2**200)),
)
_ODD_VALUES = st.sampled_from((True, False, None, 1.0, "1", b"1", IntSub(1), [1], (1,), ()))


def _tuple_values(base: tuple[int, ...]) -> Any:
    return st.one_of(
        st.lists(_INT_VALUES, min_size=0, max_size=len(base) + 1).map(tuple),
        st.tuples(st.integers(0, max(len(base) - 1, 0)), _INT_VALUES).map(
            lambda p: tuple(v if i != p[0] else p[1] for i, v in enumerate(base)) if base else (p[1],)
        ),
        st.just(list(base)),
        st.just(tuple(IntSub(v) for v in base)),
        st.just(tuple(bool(v) for v in base)),
        _ODD_VALUES,
    )


def _is_plain(value: Any) -> bool:
    if type(value) is int:
        return -(2**62) < value < 2**62
    if type(value) is tuple:
        return all(type(v) is int and -(2**62) < v < 2**62 for v in value) and len(value) <= 32
    if type(value) is str:
        return True
    return False


@settings(max_examples=300)
@given(valid_regions(), st.data())
def test_single_region_field_forgery_matches_oracle(region: Any, data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(("tensor_id",) + _INT_FIELDS + _TUPLE_FIELDS))
    old = getattr(region, name)
    if name == "tensor_id":
        value = data.draw(st.sampled_from(("", "v", StrSub("w"), None, 0, b"w")))
    elif name in _INT_FIELDS:
        value = data.draw(st.one_of(_INT_VALUES, st.integers(-2, 2).map(lambda d: old + d), _ODD_VALUES))
    else:
        value = data.draw(_tuple_values(old))
    forged = forge(region, **{name: value})
    expected = oracle_message(forged)
    got = proven((forged,))
    if got == 1:
        assert expected is None, (name, value, expected)
    if _is_plain(value):
        assert got == (1 if expected is None else 0), (name, value, expected)


@settings(max_examples=300)
@given(valid_regions(), st.data())
def test_single_fragment_field_forgery_matches_oracle(region: Any, data: st.DataObject) -> None:
    side = data.draw(st.sampled_from(("source", "target")))
    fragment = getattr(region, side)
    name = data.draw(st.sampled_from(("tensor_id", "global_offset", "local_shape", "nbytes")))
    old = getattr(fragment, name)
    if name == "tensor_id":
        value = data.draw(st.sampled_from(("", "v", StrSub("w"), None)))
    elif name == "nbytes":
        value = data.draw(st.one_of(_INT_VALUES, st.integers(-8, 8).map(lambda d: old + d), _ODD_VALUES))
    else:
        value = data.draw(_tuple_values(old))
    forged = forge(region, **{side: forge_fragment(fragment, **{name: value})})
    expected = oracle_message(forged)
    got = proven((forged,))
    if got == 1:
        assert expected is None, (side, name, value, expected)
    positive_shape = name != "local_shape" or (type(value) is tuple and all(type(v) is int and v > 0 for v in value))
    if _is_plain(value) and positive_shape:
        assert got == (1 if expected is None else 0), (side, name, value, expected)


@given(valid_regions(), st.data())
def test_recheck_raises_the_constructor_message(region: Any, data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(_INT_FIELDS + _TUPLE_FIELDS))
    old = getattr(region, name)
    value = data.draw(st.integers(-2, 2).map(lambda d: old + d)) if name in _INT_FIELDS else data.draw(_tuple_values(old))
    forged = forge(region, **{name: value})
    fields = {f: getattr(region, f) for f in _REGION_FIELDS}
    fields[name] = value
    try:
        TransferRegion(**fields)
    except ValueError as error:
        with pytest.raises(ValueError) as info:
            recheck_regions((region, forged, forge(region, target_base_offset=-1)))
        assert type(info.value) is ValueError
        assert str(info.value) == str(error)
    else:
        recheck_regions((region, forged, region))


# ---------------------------------------------------------------------------------------------
# Fixed forgeries and undecidable-but-valid regions

def _region_2d() -> Any:
    source = make_fragment("placement", "w", (0, 0), (4, 8), 2)
    target = make_fragment("placement", "w", (0, 4), (4, 4), 2)
    return make_region(source, target, (0, 4), (4, 4), 2)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"target_base_offset": -1}, "transfer region base offsets must be non-negative"),
        ({"source_base_offset": 2}, "transfer region source base offset is inconsistent"),
        ({"target_base_offset": 2}, "transfer region target base offset is inconsistent"),
        ({"source_strides": (8,)}, "transfer region loop geometry is not canonical"),
        ({"target_strides": (16,)}, "transfer region loop geometry is not canonical"),
        ({"outer_loop_counts": (2,)}, "transfer region loop geometry does not match overlap"),
        ({"outer_loop_counts": (2, 2), "source_strides": (16, 16), "target_strides": (8, 8)},
         "transfer region loop geometry is not canonical"),
        ({"inner_bytes": 16}, "transfer region loop geometry does not match overlap"),
        ({"inner_bytes": 0}, "transfer region inner_bytes must be positive"),
        ({"overlap_offset": (0, 5)}, "transfer region exceeds source logical fragment"),
        ({"overlap_offset": (0, 3)}, "transfer region exceeds target logical fragment"),
        ({"overlap_offset": (-1, 4)}, "transfer region logical box is invalid"),
        ({"overlap_shape": (4,)}, "transfer region logical rank mismatch"),
        ({"tensor_id": "v"}, "transfer region tensor mismatch"),
        ({"tensor_id": ""}, "transfer region tensor_id must not be empty"),
        ({"source_strides": [16]}, None),  # a list is converted by the class: valid
        ({"source_strides": "16"}, "transfer region source_strides must contain integers"),
        ({"inner_bytes": True}, "transfer region inner_bytes must be an integer"),
        ({"source_strides": (2**70,)}, "transfer region loop geometry is not canonical"),
        ({"target_base_offset": 2**64}, "transfer region target base offset is inconsistent"),
        ({"outer_loop_counts": (4, 1), "source_strides": (16,)}, "transfer region outer loop rank mismatch"),
    ],
)
def test_fixed_forgeries(changes: dict[str, Any], message: Optional[str]) -> None:
    region = _region_2d()
    forged = forge(region, **changes)
    assert proven((region, forged)) == 1
    assert oracle_message(forged) == message
    if message is None:
        recheck_regions((region, forged, region))
    else:
        with pytest.raises(ValueError, match="^" + message.replace("(", r"\(") + "$"):
            recheck_regions((region, forged, region))


def test_fragment_forgeries_through_bound_style_reading() -> None:
    region = _region_2d()
    target = region.target
    for changes, message in [
        ({"nbytes": 31}, "transfer region fragment byte size is invalid"),
        ({"nbytes": 64}, "transfer region source and target itemsize differ"),
        ({"global_offset": (0, 3)}, "transfer region exceeds target logical fragment"),
        ({"local_shape": (4, 2)}, "transfer region exceeds target logical fragment"),
        ({"tensor_id": "v"}, "transfer region tensor mismatch"),
    ]:
        forged = forge(region, target=forge_fragment(target, **changes))
        assert proven((forged,)) == 0
        with pytest.raises(ValueError, match="^" + message + "$"):
            recheck_regions((forged,))


def test_valid_regions_beyond_the_predicate_are_accepted_and_scan_resumes() -> None:
    ndim = 33  # beyond the C predicate's dimension limit
    shape = (1,) * (ndim - 1) + (4,)
    source = make_fragment("placement", "w", (0,) * ndim, shape, 2)
    wide = make_region(source, source, (0,) * ndim, shape, 2)
    assert proven((wide,)) == 0
    assert oracle_message(wide) is None
    good = _region_2d()
    bad = forge(good, target_base_offset=-1)
    recheck_regions((wide, good, wide))
    with pytest.raises(ValueError, match="^transfer region base offsets must be non-negative$"):
        recheck_regions((wide, good, bad, forge(good, inner_bytes=0)))
    # Values beyond int64 that are still canonical: decided by the class, accepted.
    big = 2**62
    huge_source = make_fragment("namespace", "w", (0,), (big,), 4)
    huge = make_region(huge_source, huge_source, (0,), (big,), 4)
    assert proven((huge,)) == 0
    recheck_regions((huge, good))


def test_recheck_does_not_mutate_a_valid_region() -> None:
    region = _region_2d()
    before = dict(field_state(region))
    recheck_regions((region,))
    after = field_state(region)
    assert before.keys() == after.keys()
    assert all(before[k] is after[k] for k in before)
    # A list field (accepted by the class) is converted to the equal tuple; nothing else changes.
    listed = forge(region, source_strides=list(region.source_strides))
    recheck_regions((listed,))
    assert listed.source_strides == region.source_strides and type(listed.source_strides) is tuple


def test_recheck_ignores_non_regions_and_accepts_iterables() -> None:
    region = _region_2d()
    recheck_regions((None, 1, "x", region))
    recheck_regions([region, region])
    recheck_regions(())
    with pytest.raises(ValueError, match="^transfer region base offsets must be non-negative$"):
        recheck_regions([region, forge(region, source_base_offset=-5)])


# ---------------------------------------------------------------------------------------------
# Hostile inputs to the C entry point


def test_hostile_arguments() -> None:
    region = _region_2d()
    ops = (region,)
    with pytest.raises(TypeError):
        _native.regions_canonical([region], 0, BoundWeightFragment, _PLAIN_TYPES)
    with pytest.raises(TypeError):
        _native.regions_canonical(ops, 0, BoundWeightFragment)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        _native.regions_canonical(ops, 0, "cls", _PLAIN_TYPES)
    with pytest.raises(TypeError):
        _native.regions_canonical(ops, 0, BoundWeightFragment, list(_PLAIN_TYPES))
    with pytest.raises(TypeError):
        _native.regions_canonical(ops, 0, BoundWeightFragment, (TransferRegion, 3))
    with pytest.raises(ValueError):
        _native.regions_canonical(ops, 0, BoundWeightFragment, (TransferRegion,) * 9)
    assert _native.regions_canonical(ops, 0, BoundWeightFragment, (TransferRegion,) * 8) == 1
    for start in (True, 0.0, "0", None, IntSub(0)):
        with pytest.raises(TypeError):
            _native.regions_canonical(ops, start, BoundWeightFragment, _PLAIN_TYPES)
    for start in (-1, 2, 2**63, 2**64, -(2**70)):
        with pytest.raises(ValueError):
            _native.regions_canonical(ops, start, BoundWeightFragment, _PLAIN_TYPES)
    assert _native.regions_canonical(ops, 1, BoundWeightFragment, _PLAIN_TYPES) == 1
    assert _native.regions_canonical((), 0, BoundWeightFragment, ()) == 0
    assert _native.regions_canonical(ops, 0, BoundWeightFragment, ()) == 1  # all via getattr


def test_hostile_operations_are_declined() -> None:
    region = _region_2d()
    hostile = [
        None, 0, "region", object(), types.SimpleNamespace(),
        forge(region, overlap_offset=(0,)),
        forge(region, overlap_offset=(), overlap_shape=()),
        forge(region, source_strides=()),
        forge(region, target_strides=(8, 8)),
        forge(region, overlap_shape=(4, -4)),
        forge(region, overlap_shape=(4, 2**63)),
        forge(region, outer_loop_counts=(-4,)),
        forge(region, outer_loop_counts=(0,)),
        forge(region, source_strides=(-16,)),
        forge(region, inner_bytes=-8),
        forge(region, inner_bytes=2**63 - 1),
        forge(region, source_base_offset=-(2**63)),
        forge(region, tensor_id=StrSub("w")),
        forge(region, source_base_offset=IntSub(0)),
        forge(region, overlap_offset=(0, IntSub(4))),
        forge(region, source=None),
        forge(region, target=object()),
        forge(region, source=forge_fragment(region.source, local_shape=(0, 8))),
        forge(region, source=forge_fragment(region.source, local_shape=(-4, -8))),
        forge(region, source=forge_fragment(region.source, local_shape=(2**40, 2**40))),
        forge(region, source=forge_fragment(region.source, global_offset=(-(2**63), 0))),
        forge(region, source=forge_fragment(region.source, nbytes=2**64)),
        forge(region, source=forge_fragment(region.source, tensor_id=StrSub("w"))),
        forge(region, source=forge_fragment(region.source, global_offset=[0, 0])),
    ]
    for index, op in enumerate(hostile):
        assert proven((region, op, region)) == 1, index
    # A region missing a field is declined (the class's own check then decides).
    missing = forge(region)
    object.__delattr__(missing, "target_strides")  # emptied in its C layout
    assert proven((missing,)) == 0


def test_attribute_errors_decline_and_other_errors_propagate() -> None:
    region = _region_2d()

    class Raising:
        tensor_id = "w"
        global_offset = (0, 0)
        local_shape = (4, 8)

        @property
        def nbytes(self) -> int:
            raise RuntimeError("boom")

    class Missing:
        tensor_id = "w"
        global_offset = (0, 0)
        local_shape = (4, 8)

    assert proven((forge(region, source=Missing()),)) == 0
    with pytest.raises(RuntimeError, match="boom"):
        proven((forge(region, source=Raising()),))


def test_plain_types_define_no_class_attribute_for_the_fields_read() -> None:
    """The C predicate reads exact instances of these classes from their instance dict: sound
    only while no class in their MRO defines (or intercepts) those names."""
    reads = {
        TransferRegion: _REGION_FIELDS,
        PlacementFragment: ("tensor_id", "global_offset", "local_shape", "nbytes"),
        StoredFragmentSnapshot: ("tensor_id", "global_offset", "local_shape", "nbytes"),
        BoundWeightFragment: ("placement", "binding"),
    }
    from mooncake.reshard.contracts.fragments import RuntimeBindingFragment

    reads[RuntimeBindingFragment] = ("nbytes",)
    assert set(reads) == set(_PLAIN_TYPES)
    for cls, names in reads.items():
        assert cls.__getattribute__ is object.__getattribute__
        assert not hasattr(cls, "__getattr__")
        mro = cls.__mro__
        info = _native.layout_info(cls)
        if info is not None:
            # stored in a C-owned layout (BoundWeightFragment, TransferRegion): the fields are the layout base's
            # member descriptors, read as its slots; no class before the base defines them
            assert _native.layout_check(cls, len(info[1])) and set(names) <= set(info[1])
            mro = mro[: mro.index(info[0])]
        else:
            assert "__slots__" not in vars(cls)
        for klass in mro:
            for name in names:
                if info is not None and klass is info[0]:
                    assert type(vars(klass)[name]).__name__ == "member_descriptor", (cls, name)
                    continue
                assert name not in vars(klass), (cls, klass, name)


def test_bound_fragment_properties_forward_as_the_predicate_reads_them() -> None:
    """An exact ``BoundWeightFragment`` is read through ``placement`` and ``binding``."""
    for name in ("tensor_id", "global_offset", "local_shape"):
        prop = vars(BoundWeightFragment)[name]
        fake = types.SimpleNamespace(placement=types.SimpleNamespace(**{name: "P"}), binding=None)
        assert prop.fget(fake) == "P"
    fake = types.SimpleNamespace(placement=None, binding=types.SimpleNamespace(nbytes=7))
    assert vars(BoundWeightFragment)["nbytes"].fget(fake) == 7


def test_a_subclass_cannot_opt_out_of_the_region_rules() -> None:
    """The recheck runs ``TransferRegion.__post_init__`` itself, not the operation's own override."""

    class Lenient(TransferRegion):  # type: ignore[type-arg]
        def __post_init__(self) -> None:
            pass

    region = _region_2d()
    lenient = forged_instance(Lenient, dict(field_state(region)))
    assert proven((lenient,)) == 1  # read through getattr: same values, proven
    object.__setattr__(lenient, "target_base_offset", -1)
    assert proven((lenient,)) == 0
    with pytest.raises(ValueError, match="^transfer region base offsets must be non-negative$"):
        recheck_regions((lenient,))

"""GROW43: the batched fragment encoding of canonical_parts_json (exact PlacementFragment and
ParallelRank classes, C-owned layout) reads each fragment's fields without taking references to
them: the batch holds the fragments, and no encoding step runs Python code except on an error
path, after which no field is read. Checked here: the texts and digests equal the exact encoding
(field values of many classes, batches of every size), the field objects' reference counts are
unchanged by a call (success and decline), and a hostile error path that replaces and frees the
fields of the fragments of its batch neither crashes nor changes the result."""

from __future__ import annotations

import sys
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from spec_helpers import store_state
from test_canonical_batched import _TYPES6, _big_placement, _exact, _fused, _exact_parts

from mooncake.reshard import _native
from mooncake.reshard.weight import PlacementFragment
from mooncake.reshard.weight import _canonical as canonical
from mooncake.reshard.weight.types import _FRAGMENT_FIELDS

_FIELDS = _FRAGMENT_FIELDS


def _clone(fragment: Any) -> Any:
    copy = object.__new__(type(fragment))
    store_state(copy, {name: getattr(fragment, name) for name in _FIELDS})
    return copy


def _with_fragments(pairs: list[Any], part: int, fragments: list[Any]) -> list[Any]:
    out = list(pairs)
    out[part] = (fragments, out[part][1])
    return out


def _check(pairs: list[Any], tensors: list[Any]) -> None:
    try:
        exact: Any = _exact(pairs, tensors)
    except TypeError:
        exact = None
    assert _fused(pairs, tensors, _TYPES6) == exact
    assert _fused(pairs, tensors, _TYPES6, sha256=True) == (
        None if exact is None else _native.sha256_hex(exact.encode())
    )
    if exact is not None:
        assert _native.canonical_parts_json(pairs, types=_TYPES6) == _exact_parts(pairs)


def test_layout_fragments_are_encoded_by_the_batched_path() -> None:
    placement = _big_placement(3, 5, 1)
    fragment = placement.parts[0].fragments[0]
    assert type(fragment) is PlacementFragment
    assert _native.layout_info(PlacementFragment) is not None


class _Int(int):
    pass


class _Str(str):
    pass


_VALUES = {
    "nbytes": st.sampled_from([0, 24, 2**62, 2**80, -5, _Int(7), True, 1.5]),
    "global_offset": st.sampled_from([(0, 0), (4, 0), [0, -(2**70)], (_Int(3), 1), (None,), ()]),
    "local_shape": st.sampled_from([(4, 3), (1,), (2**63, 1), [5], (1.5,)]),
    "pipeline_stage_id": st.sampled_from([None, 0, 7, 2**64, _Int(2)]),
    "aliases": st.sampled_from([(), ("a",), [_Str("b\u00e9"), "a\ud800"], {"k": ("v", 1)}, (object(),)]),
    "placement_fragment_id": st.sampled_from(["sha256:" + "ab" * 32, "id\n\"\\\x7f\U0001f600", _Str("s")]),
    "tensor_id": st.sampled_from(["layer.0.w\u00e9", _Str("t"), "x" * 200]),
}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 20), st.sampled_from(sorted(_VALUES)), st.data()),
        max_size=6,
    ),
)
def test_forged_fields_at_any_batch_position_equal_the_exact_encoding(edits: list[Any]) -> None:
    placement = _big_placement(21, 1, 1)  # one part of 21 fragments: batches of 8 and a tail of 5
    pairs = canonical._part_pairs(placement.parts)
    tensors = list(placement.tensors)
    fragments = list(pairs[0][0])
    for at, name, data in edits:
        at %= len(fragments)
        forged = _clone(fragments[at])
        store_state(forged, {name: data.draw(_VALUES[name])})
        fragments[at] = forged
    _check(_with_fragments(pairs, 0, fragments), tensors)


def test_reference_counts_of_the_fields_are_unchanged() -> None:
    placement = _big_placement(9, 5, 2)
    pairs = canonical._part_pairs(placement.parts)
    tensors = list(placement.tensors)
    # the objects of these fragments (not None, small ints or other values shared process-wide,
    # whose counts other code changes)
    fields = [getattr(f, name) for fragments, _ in pairs for f in fragments for name in _FIELDS]
    fields = [value for value in fields if sys.getrefcount(value) < 1000]
    before = [sys.getrefcount(value) for value in fields]
    for _ in range(3):
        assert _fused(pairs, tensors, _TYPES6) == _exact(pairs, tensors)
        _fused(pairs, tensors, _TYPES6, sha256=True)
        _native.canonical_parts_json(pairs, types=_TYPES6)
    # a decline in the middle of a batch (a value that is not encodable)
    forged = _clone(pairs[0][0][3])
    store_state(forged, {"aliases": (object(),)})
    declining = _with_fragments(pairs, 0, [*pairs[0][0][:3], forged, *pairs[0][0][4:]])
    assert _fused(declining, tensors, _TYPES6) is None
    del forged, declining  # the clone's own references to the shared field objects
    assert [sys.getrefcount(value) for value in fields] == before


def test_hostile_error_path_frees_the_batch_fields() -> None:
    """A value whose type's metaclass runs Python code when the type error is formatted: it
    replaces (and frees) every field of the other fragments of the batch. The fused form then
    declines (None) without reading a freed field, as the exact encoding raises."""
    placement = _big_placement(21, 1, 1)
    pairs = canonical._part_pairs(placement.parts)
    tensors = list(placement.tensors)
    fragments = [_clone(f) for f in pairs[0][0]]
    for index, f in enumerate(fragments):
        # fields held by this fragment alone, so that replacing them frees them
        store_state(
            f,
            {
                "placement_fragment_id": "".join(["sha256:", "%064x" % index]),
                "global_offset": tuple([int("0"), int("0")]),
                "nbytes": int("1" * 30),
            },
        )
    fired: list[int] = []

    class Meta(type):
        @property
        def __name__(cls) -> str:  # type: ignore[override]
            fired.append(1)
            for f in fragments:
                store_state(
                    f,
                    {
                        "placement_fragment_id": "replaced",
                        "global_offset": (9, 9),
                        "nbytes": 1,
                        "aliases": (),
                    },
                )
            return "Hostile"

    class Hostile(metaclass=Meta):
        pass

    store_state(fragments[10], {"aliases": (Hostile(),)})  # the third of its batch of 8
    forged = _with_fragments(pairs, 0, fragments)
    assert _fused(forged, tensors, _TYPES6) is None
    assert fired
    # the exact encoding, of the now-replaced fields, agrees with the batched one
    _check(forged, tensors)


def _clone_tensor(tensor: Any) -> Any:
    copy = object.__new__(type(tensor))
    store_state(copy, dict(vars(tensor)))
    return copy


def test_tensor_field_reference_counts_are_unchanged() -> None:
    placement = _big_placement(21, 2, 1)
    pairs = canonical._part_pairs(placement.parts)
    tensors = [_clone_tensor(t) for t in placement.tensors]
    for index, tensor in enumerate(tensors):
        store_state(tensor, {"layout_fingerprint": "".join(["fp", str(index)]), "global_shape": (8, int("3"))})
    values = [value for t in tensors for value in vars(t).values() if sys.getrefcount(value) < 1000]
    before = [sys.getrefcount(value) for value in values]
    for _ in range(3):
        assert _fused(pairs, tensors, _TYPES6) == _exact(pairs, tensors)
        _fused(pairs, tensors, _TYPES6, sha256=True)
    forged = _clone_tensor(tensors[11])
    store_state(forged, {"dtype": object()})
    assert _fused(pairs, [*tensors[:11], forged, *tensors[12:]], _TYPES6) is None
    del forged
    assert [sys.getrefcount(value) for value in values] == before


def test_hostile_error_path_frees_the_batch_tensor_fields() -> None:
    """A tensor field whose type's metaclass, when the type error is formatted, empties the state
    of every tensor (freeing the fields of the batch read ahead): the fused form declines."""
    placement = _big_placement(21, 1, 1)
    pairs = canonical._part_pairs(placement.parts)
    tensors = [_clone_tensor(t) for t in placement.tensors]
    for index, tensor in enumerate(tensors):
        store_state(tensor, {"layout_fingerprint": "".join(["fp", str(index)]), "global_shape": (4, int("3"))})
    fired: list[int] = []

    class Meta(type):
        @property
        def __name__(cls) -> str:  # type: ignore[override]
            fired.append(1)
            for tensor in tensors:
                vars(tensor).clear()
            return "Hostile"

    class Hostile(metaclass=Meta):
        pass

    store_state(tensors[10], {"dtype": Hostile()})  # the third of its batch of 8
    assert _fused(pairs, tensors, _TYPES6) is None
    assert fired

"""``_native.catalog_map`` and ``_native.catalog_matches`` (csrc/planobj.c) against the Python forms
they replace in the planner (api.py's id -> descriptor comprehension, ownership._fast_path_placement's
three identity tests), over hostile catalogs: duplicate ids, str-subclass and non-str ids, ids that
raise, other containers, dict subclasses, mismatched lengths and orders."""

from __future__ import annotations

from itertools import repeat
from operator import attrgetter, is_
from typing import Any

import pytest
from hypothesis import given, strategies as st

from mooncake.reshard import _native
from mooncake.reshard.weight._planner import ownership
from mooncake.reshard.weight._planner.api import _catalog_map

_id = attrgetter("tensor_id")


class _D:
    def __init__(self, tensor_id: Any) -> None:
        self.tensor_id = tensor_id


class _Str(str):
    pass


def _python_map(catalog: Any) -> Any:
    return {tensor.tensor_id: tensor for tensor in catalog}


def _python_chain(tensors: Any, catalog: Any) -> bool:
    return (
        all(map(is_, tensors.values(), catalog))
        and all(map(is_, tensors, map(_id, catalog)))
        and all(map(is_, map(type, tensors), repeat(str)))
    )


IDS = ["a", "b", "c", "a", _Str("b"), 3, ("t",)]


@given(st.lists(st.sampled_from(range(len(IDS))), max_size=12), st.integers(0, 3), st.booleans())
def test_equal_to_the_python_forms(picks: list[int], edit: int, swap: bool) -> None:
    catalog = tuple(_D(IDS[p]) for p in picks)
    native = _native.catalog_map(catalog)
    python = _python_map(catalog)
    if any(type(tensor.tensor_id) is not str for tensor in catalog):
        assert native is None  # hashed by Python code (AUDIT5 F4): the comprehension decides
    else:
        assert native == python and list(native) == list(python)
        assert all(native[k] is python[k] for k in python)
    assert _catalog_map(catalog) == python and list(_catalog_map(catalog)) == list(python)
    tensors = dict(python)
    if edit == 1 and tensors:  # another descriptor under a key
        first = next(iter(tensors))
        tensors[first] = _D(first)
    elif edit == 2 and len(catalog) > 1 and swap:  # same items, another order
        tensors = dict(reversed(list(tensors.items())))
    elif edit == 3 and catalog:  # an equal but distinct key object
        first = next(iter(tensors))
        if type(first) is str:
            value = tensors.pop(first)
            tensors = {_Str(first): value, **tensors}
    matched = _native.catalog_matches(tensors, catalog)
    if len(tensors) != len(catalog):
        assert matched is None
    else:
        assert matched is _python_chain(tensors, catalog)


def test_other_types_decline() -> None:
    d = _D("a")
    assert _native.catalog_map([d]) is None
    assert _catalog_map([d]) == {"a": d}
    assert _native.catalog_map((d,)) == {"a": d}

    class SubDict(dict):  # type: ignore[type-arg]
        pass

    assert _native.catalog_matches(SubDict(a=d), (d,)) is None
    assert _native.catalog_matches({"a": d}, [d]) is None
    assert _native.catalog_matches({"a": d}, (d, d)) is None  # lengths differ
    assert _native.catalog_matches({}, ()) is True
    with pytest.raises(TypeError):
        _native.catalog_matches({"a": d})  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        _native.catalog_map()  # type: ignore[call-arg]


def test_raising_ids_propagate_in_order() -> None:
    class Boom:
        @property
        def tensor_id(self) -> str:
            raise RuntimeError("id")

    good, bad = _D("a"), Boom()
    with pytest.raises(RuntimeError, match="id"):
        _native.catalog_map((good, bad))
    # a values mismatch is found before any id is read (as the first Python test)
    assert _native.catalog_matches({"a": good, "b": good}, (good, bad)) is False
    with pytest.raises(RuntimeError, match="id"):
        _native.catalog_matches({"a": good, "b": bad}, (good, bad))
    # ids are read up to the first that is not its key
    assert _native.catalog_matches({"x": good, "b": bad}, (good, bad)) is False


def test_an_id_hook_that_mutates_the_map() -> None:
    tensors: dict[str, Any] = {}

    class Mutating:
        @property
        def tensor_id(self) -> str:
            tensors.clear()
            return "m"

    m = Mutating()
    tensors.update({"a": _D("a")})
    catalog = (tensors["a"],)
    assert _native.catalog_matches(tensors, catalog) is True
    # a hook that changes the map's size while its id matches: RuntimeError, as the Python form
    for form in (_native.catalog_matches, _python_chain):
        tensors = {"m": m}
        with pytest.raises(RuntimeError, match="changed size"):
            form(tensors, (m,))
    # ... and no error when the id does not match (the Python form stops there)
    other = Mutating()
    for form in (_native.catalog_matches, _python_chain):
        tensors = {"x": other}
        assert form(tensors, (other,)) is False


def test_fast_path_placement_unchanged() -> None:
    from planner_helpers import tp_placement
    from layout_model import TensorSpec

    placement = tp_placement("src", TensorSpec("w", (8, 4)), 2, 0)
    tensors = _catalog_map(placement.tensors)
    assert ownership._fast_path_placement(placement, tensors, placement.fragments)
    other = {k: v for k, v in tensors.items()}
    assert ownership._fast_path_placement(placement, other, placement.fragments)
    assert not ownership._fast_path_placement(placement, {}, placement.fragments)
    assert not ownership._fast_path_placement(placement, tensors, list(placement.fragments))

"""``fragment_columns`` reads each fragment's fields from one scan of its state dict (issue 5,
session 16).

In the address-order pass a fragment (exactly the fragment class) has its fields taken from one
scan of its instance dict, matching the interned field names by identity, as
``select_sources``' pre-read does; a field not met that way is read as an attribute. States with
equal but not interned keys, extra keys, a non-str key, missing fields, forged values or another
order must give exactly the in-order attribute reads (no types) and the Python geometry."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spec_helpers import field_state, store_state

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank, PlacementFragment

from test_scale_speed_native import _check_columns


def _made(count: int) -> List[PlacementFragment]:
    return [
        PlacementFragment(
            tensor_id=f"t{i % 3}",
            global_offset=(4 * (i % 5), 0),
            local_shape=(4, 8),
            nbytes=64,
            rank=ParallelRank(dp=i % 2, tp=i % 3),
            placement_fragment_id=f"f{i:03d}",
        )
        for i in range(count)
    ]


def _with_state(state: Dict[Any, Any], cls: type = PlacementFragment) -> Any:
    clone = object.__new__(cls)
    store_state(clone, replace=True, state=state)
    return clone


def _not_interned(name: str) -> str:
    key = "".join(list(name))
    assert key == name and key is not name
    return key


FIELDS = ("placement_fragment_id", "tensor_id", "rank", "global_offset", "local_shape", "nbytes")


def _variant(state: Dict[str, Any], kind: str, name: str) -> Any:
    if kind == "all_not_interned":
        return {_not_interned(k): v for k, v in state.items()}
    if kind == "one_not_interned":
        return {(_not_interned(k) if k == name else k): v for k, v in state.items()}
    if kind == "int_key":
        return {**state, 1: "x"}
    if kind == "extra_key":
        return {**state, "_cache": object()}
    if kind == "reversed":
        return dict(reversed(list(state.items())))
    if kind == "missing":
        return {k: v for k, v in state.items() if k != name}
    raise AssertionError(kind)


def _outcome(fragments: Any) -> Any:
    try:
        plain = _native.fragment_columns(fragments)
    except AttributeError as exc:  # an id, tensor id, rank or dp missing: the same error
        with pytest.raises(AttributeError) as fast:
            _native.fragment_columns(fragments, PlacementFragment, ParallelRank)
        assert str(fast.value) == str(exc)
        return None
    if all(hasattr(f, name) for f in fragments for name in ("global_offset", "local_shape", "nbytes")):
        return _check_columns(fragments)  # the very objects and the Python geometry
    got = _native.fragment_columns(fragments, PlacementFragment, ParallelRank)
    assert got[:4] == plain and got[4] is None  # a geometry field missing: no geometry
    return got


KINDS = ("all_not_interned", "one_not_interned", "int_key", "extra_key", "reversed", "missing")
VALUES = [(1 << 63, 0), (4,), [0, 0], 8.0, -3, 1 << 70, 5, "t4", None, True, (0, 0, 0)]


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 40),
    st.lists(
        st.tuples(st.integers(0, 39), st.sampled_from(KINDS + ("value",)), st.sampled_from(FIELDS),
                  st.sampled_from(VALUES)),
        max_size=4,
    ),
    st.booleans(),
)
def test_state_scans_equal_the_attribute_reads(count: int, forgeries: List[Any], as_tuple: bool) -> None:
    made: List[Any] = _made(count)
    for position, kind, name, value in forgeries:
        position %= count
        state = dict(field_state(made[position]))
        forged = {**state, name: value} if kind == "value" else _variant(state, kind, name)
        made[position] = _with_state(forged)
    fragments = tuple(made) if as_tuple else made
    _outcome(fragments)


def test_fields_are_the_very_objects_of_the_state() -> None:
    made = _made(30)
    ids, tids, dps, _, geometry = _native.fragment_columns(tuple(made), PlacementFragment, ParallelRank)
    assert geometry is not None
    for fragment, fid, tid in zip(made, ids, tids):
        assert fid is field_state(fragment)["placement_fragment_id"] and tid is field_state(fragment)["tensor_id"]

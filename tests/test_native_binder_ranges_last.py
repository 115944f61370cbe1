"""``address_ranges_clear`` (and attest_binding's range rule) reads each exact runtime fragment's
fields from its own dict and reuses the previous view's space when its (instance, worker, device)
are the very same objects. Spaces named by equal but distinct str objects, alternating spaces and
overlaps right after a reused space decide as the Python rule does."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spec_helpers import field_state, forged_instance

from test_native_binder import _range_views, _ranges_outcome

from mooncake.reshard import _native
from mooncake.reshard.weight import RuntimeBindingFragment


def _copy_str(text: str) -> str:
    return "".join(list(text))  # equal, not the same object


def _python(views: list[Any]) -> Any:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_native, "address_ranges_clear", lambda *args: False)
        return _ranges_outcome(views)


def _split_names(views: list[Any], which: list[bool]) -> list[Any]:
    """The views with, where which[k], equal but distinct worker and device objects (and instance)."""
    out = []
    for view, split in zip(views, which):
        if split:
            runtime = view[1]
            forged = forged_instance(  # (per field: the C layout has no __dict__)
                type(runtime),
                {**field_state(runtime), "worker_id": _copy_str(runtime.worker_id), "device": _copy_str(runtime.device)},
            )
            view = (_copy_str(view[0]), forged) + view[2:]
        out.append(view)
    return out


@settings(max_examples=120, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([("i", "w", "d"), ("i", "w", "e"), ("j", "w", "d")]),
            st.integers(1, 30),
            st.integers(1, 8),
            st.booleans(),
        ),
        max_size=8,
    )
)
def test_same_space_by_value_whatever_the_objects(rows: list[Any]) -> None:
    specs = [(i, w, d, address, nbytes, address, nbytes) for (i, w, d), address, nbytes, _ in rows]
    views = _split_names(_range_views(specs), [split for *_, split in rows])
    clear = _native.address_ranges_clear(views, RuntimeBindingFragment)
    python = _python(views)
    if clear:
        assert python == ("value", None)
    # brute force: clear exactly when no two views of one space overlap (allocations are the views)
    overlap = any(
        specs[a][:3] == specs[b][:3] and specs[a][3] < specs[b][3] + specs[b][4] and specs[b][3] < specs[a][3] + specs[a][4]
        for a in range(len(specs))
        for b in range(a + 1, len(specs))
    )
    assert clear is (not overlap)


def test_overlap_right_after_a_reused_space_is_seen() -> None:
    views = _range_views([("i", "w", "d", 10, 4, 10, 4), ("i", "w", "d", 20, 4, 20, 4), ("i", "w", "d", 22, 4, 22, 4)])
    assert views[0][1].worker_id is views[2][1].worker_id
    assert _native.address_ranges_clear(views, RuntimeBindingFragment) is False
    split = _split_names(views, [False, False, True])
    assert _native.address_ranges_clear(split, RuntimeBindingFragment) is False
    assert _python(split) == _python(views)


def test_alternating_spaces_keep_their_own_numbers() -> None:
    specs = [("i", "w", "d", 10, 4, 10, 4), ("i", "w", "e", 10, 4, 10, 4), ("i", "w", "d", 12, 4, 12, 4)]
    assert _native.address_ranges_clear(_range_views(specs), RuntimeBindingFragment) is False
    specs[2] = ("i", "w", "e", 30, 4, 30, 4)
    assert _native.address_ranges_clear(_range_views(specs), RuntimeBindingFragment) is True


def test_a_field_missing_from_the_dict_declines() -> None:
    views = _range_views([("i", "w", "d", 10, 4, 10, 4), ("i", "w", "d", 20, 4, 20, 4)])
    for name in ("worker_id", "device", "address", "nbytes", "storage_address", "storage_nbytes"):
        runtime = views[1][1]
        forged = forged_instance(type(runtime), {k: v for k, v in field_state(runtime).items() if k != name})
        assert _native.address_ranges_clear([views[0], (views[1][0], forged) + views[1][2:]], RuntimeBindingFragment) is False

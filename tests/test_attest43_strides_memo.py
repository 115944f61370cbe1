"""``bd_check_pair``'s strides memo (binder.c ``bd_strides_canonical_with``, ATTEST43): a pass keeps
the canonical strides of the last placement local shape and itemsize objects it computed them for
(held), and takes them again while a pair has the very same two objects; the runtime strides are
read and compared for every pair. It also skips the second int-tuple check when the runtime and
placement local shapes are one tuple.

Checked against the rules (the three steps and the Python path) on a placement part whose
fragments share one local shape tuple and one itemsize object (the memo is hit from the second
pair on): wrong strides right after a hit, strides of another container or length, huge and bool
elements, runtime local shapes that are equal copies or differ, and tensors with equal itemsizes
held by other objects."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layout_model import build_runtime_bindings
from test_native_binder_fused_attest import _decides_as_python, _forge_runtime, _fused, _same_attestation, _three_steps
from test_native_binder_tensor_ids import PLACEMENT

N = len(PLACEMENT.parts[0].fragments)
FIRST = PLACEMENT.parts[0].fragments[0]


def _check(changes: dict[int, dict[str, Any]]) -> Any:
    bindings = _forge_runtime(build_runtime_bindings(PLACEMENT), changes)
    fused, steps = _fused(PLACEMENT, bindings[0]), _three_steps(PLACEMENT, bindings[0])
    assert (fused is None) == (steps is None)
    if fused is not None:
        _same_attestation(fused, steps)
    return _decides_as_python(bindings)


def test_every_fragment_shares_the_shape_and_itemsize() -> None:
    fragments = PLACEMENT.parts[0].fragments
    assert N >= 16 and all(f.local_shape is FIRST.local_shape for f in fragments)
    assert len({id(t.itemsize) for t in PLACEMENT.parts[0].tensors}) == 1
    assert _check({})[0] == "ok"


STRIDES = [
    (12, 2),  # doubled
    (6, 4),
    (6, 2, 1),  # another length
    (6,),
    [6, 2],  # a list
    (6.0, 2),
    (True, 2),
    (6, True),
    (2**70, 2),
    (-6, -2),
    (),
]


@pytest.mark.parametrize("at", [1, 2, 7, N - 1])
@pytest.mark.parametrize("strides", STRIDES, ids=repr)
def test_wrong_strides_after_a_memo_hit_decide_as_python(at: int, strides: Any) -> None:
    outcome = _check({at: {"strides_bytes": strides}})
    if strides != (6, 2):
        assert outcome[0] == "error"


@pytest.mark.parametrize("at", [0, 1, 8, N - 1])
def test_an_equal_copy_of_the_local_shape_decides_as_python(at: int) -> None:
    copy = tuple(int(str(d)) for d in FIRST.local_shape)
    assert copy == FIRST.local_shape and copy is not FIRST.local_shape
    assert _check({at: {"local_shape": copy}})[0] == "ok"


@pytest.mark.parametrize("at", [0, 1, 8, N - 1])
@pytest.mark.parametrize("shape", [(4, 6), (3, 4), (4, 3, 1), (4.0, 3), (True, 3), [4, 3], (2**70, 3)], ids=repr)
def test_another_local_shape_decides_as_python(at: int, shape: Any) -> None:
    outcome = _check({at: {"local_shape": shape}})
    if shape != FIRST.local_shape:
        assert outcome[0] == "error"


@pytest.mark.parametrize("at", [0, 1, 8, N - 1])
@pytest.mark.parametrize("itemsize", [4, 1, 2**70, True, 2.0])
def test_another_runtime_itemsize_decides_as_python(at: int, itemsize: Any) -> None:
    outcome = _check({at: {"itemsize": itemsize}})
    if itemsize != 2:
        assert outcome[0] == "error"


CHANGES = st.dictionaries(
    st.sampled_from(["strides_bytes", "local_shape", "itemsize"]),
    st.one_of(
        st.tuples(st.integers(min_value=-1, max_value=13), st.integers(min_value=-1, max_value=13)),
        st.tuples(st.integers(min_value=1, max_value=13)),
        st.integers(min_value=0, max_value=5),
        st.just((6, 2)),
        st.just((4, 3)),
    ),
    max_size=2,
)


@settings(max_examples=80, deadline=None)
@given(st.dictionaries(st.integers(min_value=0, max_value=N - 1), CHANGES, max_size=4))
def test_random_shape_and_strides_forgeries_decide_as_python(changes: dict[int, dict[str, Any]]) -> None:
    _check(changes)

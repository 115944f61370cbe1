"""Head hints (binder.c ``bd_prefetch_head``, ATTEST43): the hint loops of ``attest_many``'s fused
pass (``bd_pair_prefetch_fields``), the evidence loops (``bd_evidence_prefetch``),
``project_attested``'s selection and emitted-id loops and ``bind_side_ids`` ask for a field
object's line and the line 47 bytes on (where a str's length, hash and first characters sit when
the object starts 32 or 48 bytes into a line, as pymalloc places the 64- and 128-byte classes).

Hints only: nothing is read at the second address and nothing is decided from it. Checked here
against the paths without the C calls (the Python rules) on parts long enough for every hint
distance, with fragment ids of every length from 1 to 140 characters (so the objects fall in
every size class and line offset), and with forged field values of many sizes at every position
inside the hint windows."""

from __future__ import annotations

import dataclasses
from typing import Any, List, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layout_model import build_runtime_bindings
from test_native_binder_fused_attest import (
    _decides_as_python,
    _forge_runtime,
    _fused,
    _same_attestation,
    _three_steps,
    forgeries_decide_as_python,
)
from test_native_binder_project import project, python_loop, with_c
from test_native_binder_tensor_ids import PLACEMENT

from mooncake.reshard import _native
from mooncake.reshard.weight._planner import binding as binding_module
from mooncake.reshard.weight._planner.binding import _bind_side

N = len(PLACEMENT.parts[0].fragments)
LENGTHS = [1, 2, 7, 8, 9, 15, 16, 17, 23, 24, 31, 32, 33, 40, 47, 48, 49, 63, 64, 65, 71, 72, 79, 80, 95, 96,
           111, 112, 127, 128, 140]


ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _id_of_length(number: int, length: int) -> str:
    """number in base 62, left-padded to exactly length characters (None: it does not fit)."""
    digits = ""
    while True:
        number, digit = divmod(number, len(ALPHABET))
        digits = ALPHABET[digit] + digits
        if number == 0:
            break
    return digits.rjust(length, "-") if len(digits) <= length else None  # type: ignore[return-value]


def _bindings_with_id_length(length: int) -> Tuple[Any, ...]:
    bindings = build_runtime_bindings(PLACEMENT)
    out, first = [], 0
    for binding in bindings:
        ids = [_id_of_length(first + i, length) for i in range(len(binding.fragments))]
        first += len(ids)
        if any(i is None for i in ids):
            pytest.skip("too short for distinct ids")
        fragments = tuple(dataclasses.replace(f, fragment_id=i) for f, i in zip(binding.fragments, ids))
        out.append(dataclasses.replace(binding, fragments=fragments))
    return tuple(out)


def test_the_placement_part_is_long_enough_for_every_hint() -> None:
    assert N >= 16  # the fused pass (from 16 pairs), hints 2, 4 and 8 pairs on, 12 ids on


@pytest.mark.parametrize("length", LENGTHS)
def test_fragment_ids_of_every_size_decide_as_python(length: int) -> None:
    bindings = _bindings_with_id_length(length)
    fused, steps = _fused(PLACEMENT, bindings[0]), _three_steps(PLACEMENT, bindings[0])
    assert fused is not None and steps is not None
    _same_attestation(fused, steps)
    _decides_as_python(bindings)
    # bind_side_ids (ATTEST42's hints, now on the id's head too) against the Python loop
    from test_bind_side import CLASSES as SIDE_CLASSES

    assert _native.bind_side_ids(*SIDE_CLASSES, bindings) == binding_module._bind_side_ids("target", bindings)


@pytest.mark.parametrize("length", [1, 9, 33, 71, 128])
@pytest.mark.parametrize("selection", ["none", "all", "half"])
def test_projection_with_ids_of_every_size_equals_the_python_loop(length: int, selection: str) -> None:
    bindings = _bindings_with_id_length(length)
    kept, attestations = _bind_side("target", PLACEMENT, bindings, {b.participant_id for b in bindings})
    ids = sorted(f.fragment_id for b in kept for f in b.fragments)
    selected: Any = None if selection == "none" else frozenset(ids if selection == "all" else ids[::2])
    expected = python_loop(PLACEMENT, kept, attestations, selected)
    direct = project(PLACEMENT, kept, attestations, selected)
    if selection != "half":
        assert direct is not None
    if direct is not None:
        assert direct == expected
    assert with_c(PLACEMENT, kept, attestations, selected) == expected


FIELDS = st.sampled_from(["fragment_id", "address", "nbytes", "storage_address", "storage_nbytes", "owner",
                          "worker_id", "device", "endpoint", "storage_offset_bytes", "itemsize"])
VALUES = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**130),
    st.text(alphabet="abcdef0123456789:-", min_size=0, max_size=140),
    st.sampled_from([None, (), (1, 2), 1.5, b"bytes", True]),
)


@settings(max_examples=80, deadline=None)
@given(st.dictionaries(st.integers(min_value=0, max_value=N - 1), st.dictionaries(FIELDS, VALUES, max_size=3),
                       max_size=4))
def test_forged_values_of_any_size_in_the_hint_windows_decide_as_python(changes: dict[int, dict[str, Any]]) -> None:
    forgeries_decide_as_python(changes)


def _first_errors(bindings: Tuple[Any, ...]) -> List[Any]:
    return [_decides_as_python(bindings)]


@pytest.mark.parametrize("at", [0, 3, 4, 5, 8, 12, N - 1])
def test_a_bad_binding_names_the_same_fragment(at: int) -> None:
    """A repeated fragment id at a hinted position: the same error (naming the same fragment, in
    the same order) as without the C call."""
    bindings = build_runtime_bindings(PLACEMENT)
    donor = bindings[0].fragments[(at + 1) % N].fragment_id
    forged = _forge_runtime(bindings, {at: {"fragment_id": donor}, (at + 2) % N: {"nbytes": 2**80}})
    outcome = _first_errors(forged)[0]
    assert outcome[0] in ("ok", "error")

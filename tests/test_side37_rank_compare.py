"""revalidate_side compares an executor key's rank with its view's ``part_rank`` in place (SIDE37).

``key != view.key_base + (worker, _rank_key(view.part_rank))``: for an exact ParallelRank the
rank's four values are read as attributes (as ``_rank_key``) and compared with the key's rank
tuple item by item, as the exact tuple's ``==`` does with a fresh tuple (the items in order up to
the shorter length, stopping at the first unequal one; equal when all are and the lengths
match), instead of building the tuple. Oracle: Python's own tuple comparison, through the side
check's answer (True: the executor's key matched; None: unsure) and any error it raises, with
every view's ``part_rank`` swapped by a profile hook at the pass's call for a forged rank.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any, Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank
from mooncake.reshard.weight._planner import bound_contracts as bc

from test_sound25_plain_dicts import _plan


class IntSub(int):
    pass


class Boom(Exception):
    pass


class Raising:
    """Never equal: its ``==`` raises."""

    def __eq__(self, other: object) -> bool:
        raise Boom("rank value compared")

    __hash__ = object.__hash__


class Counting(int):
    """An equal int that counts its ``==`` calls (order and stop of the item comparisons)."""

    seen: list[int] = []

    def __eq__(self, other: object) -> bool:
        Counting.seen.append(int(self))
        return int.__eq__(self, other)

    __hash__ = int.__hash__


_VARIANTS: dict[str, Callable[[int], Any]] = {
    "same": lambda v: v,
    "other": lambda v: v + 1,
    "float": float,
    "int-subclass": IntSub,
    "raising": lambda v: Raising(),
    "counting": Counting,
}


def _forged_rank(rank: Any, kinds: tuple[str, str, str, str]) -> Any:
    forged = object.__new__(ParallelRank)
    for name, kind in zip(("dp", "tp", "pp", "ep"), kinds):
        forged.__dict__[name] = _VARIANTS[kind](rank.__dict__[name])
    return forged


def _answers(kinds: tuple[str, str, str, str]) -> list[Any]:
    """revalidate_side's answers (or the error class) on a replace of the plan with every
    view's ``part_rank`` forged with ``kinds``."""
    plan = _plan()
    dataclasses.replace(plan)
    answers: list[Any] = []
    native_side = _native.revalidate_side

    def side(*args: Any) -> Any:
        try:
            answer = native_side(*args)
        except Exception as error:
            answers.append(type(error).__name__)
            raise
        answers.append(answer)
        return answer

    swapped: list[int] = []

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event == "c_call" and arg is native_side:
            args = frame.f_locals.get("args")  # (called by ``side`` below: its arguments)
            attested = args[6] if isinstance(args, tuple) and len(args) > 6 else None
            if isinstance(attested, dict):
                for entry in attested.values():
                    view = entry[2]
                    if type(view.part_rank) is ParallelRank:
                        view.part_rank = _forged_rank(view.part_rank, kinds)
                        swapped.append(1)

    original = bc._native.revalidate_side
    bc._native.revalidate_side = side
    sys.setprofile(hook)
    try:
        try:
            dataclasses.replace(plan)
        except Exception:
            pass
    finally:
        sys.setprofile(None)
        bc._native.revalidate_side = original
    assert swapped
    return answers


def _expected(kinds: tuple[str, str, str, str]) -> Any:
    """The first side's answer by Python's tuple ``==`` of (key items) with (forged values)."""
    for kind in kinds:
        if kind == "raising":
            return "Boom"
        if kind == "other":
            return None
    return True


@settings(max_examples=30, deadline=None)
@given(kinds=st.tuples(*[st.sampled_from(sorted(_VARIANTS))] * 4))
def test_the_rank_comparison_is_the_tuple_comparison(kinds: tuple[str, str, str, str]) -> None:
    Counting.seen.clear()
    answers = _answers(kinds)
    assert answers and answers[0] == _expected(kinds)
    # each forged value compared in field order, stopping at the first unequal one
    stop = next((k for k, kind in enumerate(kinds) if kind in ("other", "raising")), 4)
    before = any(kinds[k] == "counting" for k in range(stop))
    assert bool(Counting.seen) == before


@pytest.mark.parametrize("kind", sorted(_VARIANTS))
def test_each_variant_in_every_field(kind: str) -> None:
    for at in range(4):
        kinds = tuple(kind if k == at else "same" for k in range(4))
        answers = _answers(kinds)  # type: ignore[arg-type]
        assert answers and answers[0] == _expected(kinds)  # type: ignore[arg-type]

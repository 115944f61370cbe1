"""_native.parts_members_within (csrc/exact.c), the per-part loop of
_planner.exactness.exact_placement in one C call, against that loop in Python (its oracle):
same verdict, same attribute reads in the same order, same errors."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from test_exactness import SubThing, Thing, _placement, _replace_in, _subclass_copy

from mooncake.reshard import _native
from mooncake.reshard.weight._planner.exactness import exact_placement
from mooncake.reshard.weight.types import ParallelRank, PlacementFragment, TensorDescriptor

_TENSOR = (TensorDescriptor,)
_FRAGMENT = (PlacementFragment,)
_RANK = (ParallelRank,)


def _oracle(parts: tuple[Any, ...], tensor_allowed: Any, fragment_allowed: Any, name: Any, name_allowed: Any) -> bool:
    """exact_placement's loop before session 34 (AttributeError: not exact)."""
    try:
        for part in parts:
            if not (
                _native.classes_within(part.tensors, tensor_allowed, None, ())
                and _native.classes_within(part.fragments, fragment_allowed, name, name_allowed)
            ):
                return False
    except AttributeError:
        return False
    return True


class Part:
    """A part-like object recording its attribute reads; absent members are not set."""

    def __init__(self, log: list[tuple[int, str]], index: int, members: dict[str, Any]) -> None:
        object.__setattr__(self, "_log", log)
        object.__setattr__(self, "_index", index)
        for key, value in members.items():
            object.__setattr__(self, key, value)

    def __getattribute__(self, attr: str) -> Any:
        if not attr.startswith("_"):
            object.__getattribute__(self, "_log").append((object.__getattribute__(self, "_index"), attr))
        return object.__getattribute__(self, attr)


class Raising:
    """A part whose ``fragments`` read raises something other than AttributeError."""

    tensors = ()

    @property
    def fragments(self) -> Any:
        raise RuntimeError("boom")


_MEMBER = st.one_of(
    st.just("missing"),
    st.lists(st.sampled_from(["thing", "sub", "int"]), max_size=4),
    st.lists(st.sampled_from(["thing", "sub"]), max_size=3).map(lambda kinds: ("list", kinds)),
)


def _values(spec: Any) -> Any:
    make = {"thing": lambda: Thing(1), "sub": lambda: SubThing(2), "int": lambda: 3}
    if isinstance(spec, tuple):
        return [make[kind]() for kind in spec[1]]
    return tuple(make[kind]() for kind in spec)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(_MEMBER, _MEMBER), max_size=6),
    st.sampled_from([(Thing,), (Thing, SubThing), (int,)]),
    st.sampled_from([(Thing,), (SubThing,), (Thing, SubThing)]),
    st.sampled_from([None, "tag", "missing"]),
    st.sampled_from([(int,), (str,)]),
)
def test_matches_the_python_loop(members, tensor_allowed, fragment_allowed, name, name_allowed):
    logs: list[list[tuple[int, str]]] = [[], []]
    verdicts = []
    for log in logs:
        parts = []
        for index, (tensors, fragments) in enumerate(members):
            fields = {}
            if tensors != "missing":
                fields["tensors"] = _values(tensors)
            if fragments != "missing":
                fields["fragments"] = _values(fragments)
            parts.append(Part(log, index, fields))
        run = _native.parts_members_within if log is logs[0] else _oracle
        verdicts.append(run(tuple(parts), tensor_allowed, fragment_allowed, name, name_allowed))
    assert verdicts[0] is verdicts[1]
    assert logs[0] == logs[1]


def test_other_errors_propagate():
    for check in (_native.parts_members_within, _oracle):
        with pytest.raises(RuntimeError, match="boom"):
            check((Raising(),), _TENSOR, _FRAGMENT, "rank", _RANK)


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (([], _TENSOR, _FRAGMENT, "rank", _RANK), TypeError),
        (((), [TensorDescriptor], _FRAGMENT, "rank", _RANK), TypeError),
        (((), _TENSOR, (PlacementFragment,) * 9, "rank", _RANK), ValueError),
        (((), _TENSOR, _FRAGMENT, 3, _RANK), TypeError),
        (((), _TENSOR, _FRAGMENT, "rank", [ParallelRank]), TypeError),
        (((), _TENSOR, _FRAGMENT, "rank"), TypeError),
    ],
)
def test_bad_arguments_raise(args, error):
    with pytest.raises(error):
        _native.parts_members_within(*args)


def test_real_placement_parts_match_the_oracle():
    placement = _placement()
    assert _native.parts_members_within(placement.parts, _TENSOR, _FRAGMENT, "rank", _RANK) is True
    assert _oracle(placement.parts, _TENSOR, _FRAGMENT, "rank", _RANK) is True
    forged = [
        lambda p: _replace_in(p.parts[0], "tensors", 0, _subclass_copy(p.parts[0].tensors[0])),
        lambda p: _replace_in(p.parts[1], "fragments", 0, _subclass_copy(p.parts[1].fragments[0])),
        lambda p: object.__setattr__(p.parts[0].fragments[0], "rank", _subclass_copy(p.parts[0].fragments[0].rank)),
        lambda p: object.__setattr__(p.parts[1], "fragments", list(p.parts[1].fragments)),
        lambda p: object.__delattr__(p.parts[1], "tensors"),
    ]
    for forge in forged:
        placement = _placement()
        forge(placement)
        assert _native.parts_members_within(placement.parts, _TENSOR, _FRAGMENT, "rank", _RANK) is False
        assert _oracle(placement.parts, _TENSOR, _FRAGMENT, "rank", _RANK) is False
        assert exact_placement(placement) is False


def test_repeated_calls_do_not_leak_references():
    import sys

    placement = _placement()
    parts = placement.parts
    before = [sys.getrefcount(part) for part in parts] + [sys.getrefcount(part.fragments) for part in parts]
    for _ in range(1000):
        _native.parts_members_within(parts, _TENSOR, _FRAGMENT, "rank", _RANK)
    after = [sys.getrefcount(part) for part in parts] + [sys.getrefcount(part.fragments) for part in parts]
    assert before == after

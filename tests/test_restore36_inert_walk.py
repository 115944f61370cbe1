"""``_native.inert_graph`` after RESTORE36's changes to its walk (csrc/exact.c: scalars told
apart by one type compare each, tuples and lists in separate loops, the popped objects no longer
re-tested, the pointer set starting at 256 slots): many distinct dict-backed instances (the set
grows several times) and lists, with one value somewhere that is not inert, against the
brute-force oracle of tests/test_sealed_values.py."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from test_sealed_values import _KINDS, Count, Held, Opaque, Text, _oracle

from mooncake.reshard import _native

_POISON = [Text("t"), Count(1), object(), {Text("k"): 1}, Held(v=Text("x")), frozenset({Count(2)})]
_CLEAN = [None, True, 1, 1.5, "s", b"b", (), [], {}, frozenset(), Opaque(Text("ok"))]


@settings(max_examples=80, deadline=None)
@given(
    count=st.integers(0, 700),
    poison=st.one_of(st.none(), st.tuples(st.integers(0, 699), st.sampled_from(_POISON))),
    clean=st.sampled_from(_CLEAN),
    as_list=st.booleans(),
)
def test_many_instances_match_the_oracle(count: int, poison: Any, clean: Any, as_list: bool) -> None:
    items: list[Any] = [Held(a=k, b=str(k), c=(k, clean), d=[clean]) for k in range(count)]
    if poison is not None and count:
        at, value = poison
        items[at % count].__dict__["d"] = [clean, value]
    roots = (items if as_list else tuple(items), Held(items=tuple(items)))
    assert _native.inert_graph(roots, _KINDS) is _oracle(roots)


def test_the_same_instance_reached_many_times_is_walked_once() -> None:
    shared = Held(v=(1, "x"))
    roots = tuple([shared] * 5000)  # (the roots' items are granted budget, nested lists are not)
    assert _native.inert_graph(roots, _KINDS) is True
    shared.__dict__["w"] = Text("late")
    assert _native.inert_graph(roots, _KINDS) is False

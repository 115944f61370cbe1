"""``_native.inert_graph`` walks each object once (REVAL41, csrc/exact.c): tuples, lists and C
layout instances reached again are not walked again (until session 40 only dict-backed
instances were kept in the pointer set). A value that is not inert is still found wherever the
shared object is first reached, and a fan-out past the work budget still ends the walk."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from test_sealed_values import _KINDS, Count, Held, Opaque, Text, _oracle

from forge_helpers import sized_world

from mooncake.reshard import _native
from mooncake.reshard.weight._planner import exactness


def test_a_shared_tuple_is_walked_once() -> None:
    # the root tuple grants 256 work units; the nested list none: 200 reaches of one tuple of ten
    # tuples took 200 * 11 units when each reach walked it again (False), ~211 walked once
    shared = ((1, 2),) * 10
    assert _native.inert_graph(([shared] * 200,), _KINDS) is True


def test_a_wide_fan_out_still_ends_the_walk() -> None:
    shared = ((1, 2),) * 10
    assert _native.inert_graph(([shared] * 5000,), _KINDS) is False  # every reach costs one unit


def test_a_poisoned_value_in_a_shared_object_is_found() -> None:
    for poison in (Text("t"), Count(3), object(), Held(v=Text("x")), frozenset({Count(2)})):
        inner = (1, ("a", [poison]))
        shared = (inner, inner)
        roots: tuple[Any, ...] = ((shared, shared), Held(a=shared, b=inner), [inner] * 3)
        assert _native.inert_graph(roots, _KINDS) is False
        assert _oracle(roots) is False


def test_shared_layout_instances_are_walked_once_and_still_checked() -> None:
    logical, targets, sources, _memory = sized_world(2)
    classes = exactness._inert_classes()
    fragment = logical.target_placement.parts[0].fragments[0]  # a C layout (PlacementFragment)
    roots = (logical, targets, sources, (fragment,) * 50, [fragment] * 50)
    assert _native.inert_graph(roots, classes) is True
    tensor_id = fragment.tensor_id
    object.__setattr__(fragment, "tensor_id", Text(tensor_id))  # a str subclass in a slot
    try:
        assert _native.inert_graph(roots, classes) is False
        assert _native.inert_graph(((fragment,) * 3,), classes) is False
    finally:
        object.__setattr__(fragment, "tensor_id", tensor_id)
    assert _native.inert_graph(roots, classes) is True


def test_cycles_are_inert_when_their_members_are() -> None:
    looped: list[Any] = [1, "x"]
    pair = (looped, Held(v=looped))
    looped.append(pair)
    assert _native.inert_graph((looped,), _KINDS) is True
    looped.append(Text("late"))
    assert _native.inert_graph((looped,), _KINDS) is False


_LEAVES = st.sampled_from([None, True, 1, 1.5, "s", b"b", Opaque(Text("ok")), Text("t"), Count(1)])


@settings(max_examples=150, deadline=None)
@given(
    leaves=st.lists(_LEAVES, min_size=1, max_size=6),
    picks=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40), st.integers(0, 3)), max_size=40),
)
def test_shared_dags_match_the_oracle(leaves: list[Any], picks: list[tuple[int, int, int]]) -> None:
    """Acyclic graphs in which later nodes reuse earlier ones (tuples, lists, dicts, instances)."""
    nodes: list[Any] = list(leaves)
    for first, second, kind in picks:
        a, b = nodes[first % len(nodes)], nodes[second % len(nodes)]
        if kind == 0:
            nodes.append((a, b, a))
        elif kind == 1:
            nodes.append([a, b])
        elif kind == 2:
            nodes.append({"k": a, 1: b})
        else:
            nodes.append(Held(a=a, b=b))
    roots = (nodes[-1], nodes[len(nodes) // 2])
    assert _native.inert_graph(roots, _KINDS) is _oracle(roots)

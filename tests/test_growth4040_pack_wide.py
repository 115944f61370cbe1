"""graph_pack over wide tuples and large graphs (GROWTH40: the memo and strings tables hold key
and value in one slot, and the children of a wide tuple, and an instance's fields, are
prefetched ahead of their encoding): values and sharing survive the round trip, tables grow
past their first capacity, and a cycle met through a wide tuple is still declined."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from test_pickle_codec import _REGISTRY, Cached, Leaf, Node, _py_unpack, _shape

from mooncake.reshard import _native

_pack = _native.graph_pack
_unpack = _native.graph_unpack


def _round_trip(graph: Any) -> None:
    packed = _pack(graph, _REGISTRY)
    assert packed is not None
    restored = _unpack(*packed, _REGISTRY)
    assert restored == graph
    assert _shape(restored) == _shape(graph)
    assert _shape(_py_unpack(*packed, _REGISTRY)) == _shape(graph)


_leaves = st.one_of(st.none(), st.integers(-(2**70), 2**70), st.text(max_size=3), st.booleans())


@st.composite
def _wide(draw: Any) -> Any:
    pool: list[Any] = []
    for _ in range(draw(st.integers(1, 40))):
        kind = draw(st.integers(0, 4))
        pick = st.one_of(_leaves, st.sampled_from(pool)) if pool else _leaves
        if kind == 0:
            made: Any = draw(pick)
        elif kind == 1:
            made = tuple(draw(st.lists(pick, max_size=40)))  # often wider than the prefetch distance
        elif kind == 2:
            made = Leaf(draw(pick), draw(pick))
        elif kind == 3:
            made = Node(draw(pick), draw(pick), draw(pick))
        else:
            made = Cached(draw(pick))
        pool.append(made)
    # the root: the whole pool, repeated (memo references at every distance)
    return tuple(pool) + tuple(draw(st.lists(st.sampled_from(pool), max_size=60)))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_wide())
def test_wide_graphs_round_trip_with_sharing(graph: Any) -> None:
    _round_trip(graph)


def test_large_flat_tables_grow_both_tables() -> None:
    strings = [f"s{i}" for i in range(3000)]
    tuples = [(i, strings[i]) for i in range(3000)]
    nodes = [Node(tuples[i], strings[i], Leaf(i)) for i in range(3000)]
    flat = tuple(x for i in range(3000) for x in (nodes[i], tuples[i], strings[i], i, None, nodes[(i * 7) % 3000]))
    _round_trip((flat, flat[:100], tuple(strings)))


def test_cycle_through_a_wide_tuple_is_declined() -> None:
    loop = Node(1, 2)
    wide = tuple(range(50)) + (loop,) + tuple(str(i) for i in range(50))
    object.__setattr__(loop, "y", wide)
    assert _pack((wide,), _REGISTRY) is None
    assert _pack(tuple(range(40)) + (loop,), _REGISTRY) is None

"""FragmentTable.tensor_classes orders each tensor's fragments by (hash, index) in place when no
tensor has more than 32 fragments, else by one sort of every fragment: both give each tensor the
representative of a brute-force oracle (the first earlier tensor of its class with the same set
of (rank, box)), and the members in input order."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank, PlacementFragment

_POOL = [((o, 0), (1, 4), (0, tp, 0, 0)) for o in range(64) for tp in range(2)]


@settings(max_examples=120, deadline=None)
@given(st.data())
def test_tensor_classes_against_the_oracle(data: st.DataObject) -> None:
    ntensors = data.draw(st.integers(1, 6))
    wide = data.draw(st.booleans())  # some tensor with more than 32 fragments: the global sort
    classes = [data.draw(st.integers(0, 1)) for _ in range(ntensors)]
    # a few distinct fragment sets, reused so that tensors repeat each other
    kinds = [
        data.draw(st.lists(st.sampled_from(_POOL), min_size=0, max_size=40 if wide else 6, unique=True))
        for _ in range(3)
    ]
    rows = []
    for t in range(ntensors):
        for box in kinds[data.draw(st.integers(0, 2))]:
            rows.append((t, box))
    rows = data.draw(st.permutations(rows))
    fragments = [
        PlacementFragment(f"t{t}", offset, shape, 2 * shape[0] * shape[1], ParallelRank(*rank))
        for t, (offset, shape, rank) in rows
    ]
    table = _native.FragmentTable.pack_objects([(64, 4)] * ntensors, {f"t{t}": t for t in range(ntensors)}, fragments)[0]
    rep, start, members = table.tensor_classes(classes)
    groups = [[i for i, (t, _) in enumerate(rows) if t == u] for u in range(ntensors)]
    assert [members[start[u] : start[u + 1]] for u in range(ntensors)] == groups
    sets = [frozenset(rows[i][1] for i in group) for group in groups]
    for u in range(ntensors):
        same = [w for w in range(u) if groups[w] and classes[w] == classes[u] and sets[w] == sets[u]]
        assert rep[u] == (same[0] if groups[u] and same else u), (u, rep)

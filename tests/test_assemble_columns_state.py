"""assembly_columns reads each fragment's tensor id, rank and id from one scan of its state dict
(matching the interned field names by identity); a field the scan does not meet, and every field
of a state holding a key that is not an exact str, is read as an attribute, so the columns are
exactly the attribute reads whatever the state holds."""

from __future__ import annotations

from typing import Any

from oracles import assembly_columns, assembly_maps
from spec_helpers import field_state, forged_state

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank, PlacementFragment


def _fragments(count: int = 40) -> tuple[Any, ...]:
    ranks = [ParallelRank(tp=t) for t in range(4)]
    return tuple(
        PlacementFragment(
            tensor_id=f"t{i % 7}",
            global_offset=(i,),
            local_shape=(1,),
            nbytes=2,
            rank=ranks[i % 4],
        )
        for i in range(count)
    )


def _with_state(fragment: Any, state: dict) -> Any:
    # (a C-layout fragment keeps only the items naming its fields: spec_helpers.forged_state)
    return forged_state(PlacementFragment, state)


def test_unusual_states_read_as_attributes() -> None:
    made = _fragments()
    positions, groups = assembly_maps(made)
    base = made[5]
    state = field_state(base)
    equal_keys = _with_state(base, {"".join(list(k)): v for k, v in state.items()})
    int_key = _with_state(base, {**state, 1: "x"})
    extra = _with_state(base, {**state, "_cache": object()})
    reordered = _with_state(base, dict(reversed(list(state.items()))))
    for odd in (equal_keys, int_key, extra, reordered):
        for at in (0, 17, len(made) - 1):
            fragments = made[:at] + (odd,) + made[at + 1 :]
            got = _native.assembly_columns(fragments, PlacementFragment, positions, groups)
            want = assembly_columns(fragments, positions, groups)
            assert got == want
            for column, expected in zip(got[:3], want[:3]):
                assert all(a is b for a, b in zip(column, expected))


def test_missing_fields_decline() -> None:
    made = _fragments()
    positions, groups = assembly_maps(made)
    for name in ("tensor_id", "rank", "placement_fragment_id"):
        state = dict(field_state(made[3]))
        del state[name]
        odd = _with_state(made[3], state)
        for at in (0, 20):
            fragments = made[:at] + (odd,) + made[at + 1 :]
            assert _native.assembly_columns(fragments, PlacementFragment, positions, groups) is None
        # the same name under a key that is not a str: still missing
        state[7] = "v"
        odd = _with_state(made[3], state)
        assert _native.assembly_columns(made[:2] + (odd,), PlacementFragment, positions, groups) is None

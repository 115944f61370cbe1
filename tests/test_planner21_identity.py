"""Planner shortcuts by object identity (session 21): two tensor maps with the very same key
objects skip the key-set comparison, distinct target tensor ids that are their map's key objects
skip the lookups, and one signature object shared by every tensor is the single signature. Each
decides like the form it shortcuts (oracles below), and a plan whose ids are equal but distinct
objects (so no shortcut applies) equals the plan of shared id objects."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mooncake.reshard.weight import plan_placement_transfer
from mooncake.reshard.weight._planner import core, ownership

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import _workloads as w  # noqa: E402

# (two characters: CPython 3.10 returns its cached one-character strings from any slice, so a
# one-character name could not be copied into another object)
_NAMES = st.sampled_from(["ta", "tb", "tc", "td", "te"])


def _copy(text: str) -> str:
    """An equal str that is another object."""
    copied = "".join(list(text + "#"))[:-1]
    assert copied == text and copied is not text
    return copied


@settings(max_examples=300, deadline=None)
@given(
    keys=st.lists(_NAMES, unique=True, max_size=5),
    other=st.lists(_NAMES, unique=True, max_size=5),
    copies=st.lists(st.booleans(), min_size=5, max_size=5),
)
def test_same_keys_implies_equal_key_sets(keys: list[str], other: list[str], copies: list[bool]) -> None:
    first = {key: index for index, key in enumerate(keys)}
    second = {(_copy(key) if copy else key): None for key, copy in zip(other, copies)}
    if core._same_keys(first, second):
        assert set(first) == set(second)
    # the very same key objects in the same order are recognised
    assert core._same_keys(first, dict.fromkeys(first)) is True
    assert core._same_keys(first, list(first)) is False  # not a dict: unknown


@settings(max_examples=300, deadline=None)
@given(
    known=st.lists(_NAMES, unique=True, min_size=1, max_size=5),
    ids=st.lists(_NAMES, unique=True, max_size=5),
    copies=st.lists(st.booleans(), min_size=5, max_size=5),
    with_keys=st.booleans(),
)
def test_distinct_are_the_keys_equals_lookup_oracle(
    known: list[str], ids: list[str], copies: list[bool], with_keys: bool
) -> None:
    tensors = {name: object() for name in known}
    by_value = {key: key for key in tensors}
    # some ids the map's own key objects, others equal copies or unknown names
    distinct = [by_value[name] if name in by_value and not copy else _copy(name) for name, copy in zip(ids, copies)]
    # the caller's contract: keys of the map, one per id (here: the key equal to it, else any key)
    keys = [by_value.get(name, known[0]) for name in ids] if with_keys else None
    expected = len(distinct) == len(tensors) and all(name in tensors for name in distinct)
    assert ownership._distinct_are_the_keys(distinct, tensors, keys) is expected
    dps = [0] * len(distinct)
    pairs = set(zip(distinct, dps))
    assert ownership._every_tensor_at_every_dp(distinct, dps, tensors, distinct, keys) is (
        ownership._all_pairs_present(pairs, tensors, len(set(dps)))
    )


@settings(max_examples=200, deadline=None)
@given(pattern=st.lists(st.integers(0, 2), max_size=6), copy=st.booleans())
def test_single_signature_equals_set_oracle(pattern: list[int], copy: bool) -> None:
    shared = [(("ep",), False), (("ep", "dp"), True), ((), False)]
    signatures = {
        f"t{index}": ((tuple(shared[kind][0]), shared[kind][1]) if copy and index % 2 else shared[kind])
        for index, kind in enumerate(pattern)
    }
    distinct = set(signatures.values())
    expected = next(iter(distinct)) if len(distinct) == 1 else None
    assert ownership._single_signature(signatures) == expected


def _sweep_placements(tensors: int, copy_target_ids: bool) -> tuple[Any, Any]:
    inputs = w._sweep(tensors)
    target = inputs.target
    if copy_target_ids:  # the target side names every tensor by its own (equal) str object
        copies: dict[str, str] = {}

        def renamed(tensor_id: str) -> str:
            return copies.setdefault(tensor_id, _copy(tensor_id))

        tensors = tuple(
            w.descriptor(renamed(t.tensor_id), t.global_shape, t.parallel_axes, expert_id=t.expert_id)
            for t in target.tensors
        )
        fragments = tuple(
            w.fragment(renamed(f.tensor_id), f.global_offset, f.local_shape, f.rank) for f in target.fragments
        )
        target = w.SideInputs(target.placement_set_id, target.topology, tensors, fragments)
    return w.assemble(inputs.source), w.assemble(target)


def test_plans_of_equal_but_distinct_ids_are_equal(monkeypatch: Any) -> None:
    # 600 tensors: 2,400 targets, past the bulk forms' threshold (the placement tables are used)
    shared = plan_placement_transfer(*_sweep_placements(600, False))
    calls: list[bool] = []
    original = core._same_keys
    monkeypatch.setattr(core, "_same_keys", lambda a, b: calls.append(original(a, b)) or calls[-1])
    copied = plan_placement_transfer(*_sweep_placements(600, True))
    assert calls == [False]  # the copied ids took the key-set comparison
    assert shared == copied
    assert pickle.loads(pickle.dumps(copied)) == shared

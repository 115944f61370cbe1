"""Hypothesis properties of the manifest layer against the brute-force oracles.

1. ``WeightPlacementManifest.from_fragments`` accepts exactly the layouts the cell-enumeration
   oracle accepts (spec 4.8, 11.4, 11.5); on rejection the message is one the oracle allows.
2. JSON round trip preserves equality, ``placement_id`` and ``digest``; the ids and the JSON bytes
   equal the spec 6/7 restatement in ``oracles``.
3. Pickle (and copy) round trip preserves equality.
4. IDs, digest and JSON do not depend on the order fragments, tensors and participants are given in.
5. Canonical runtime bindings of any accepted placement validate (spec 4.10).
"""

from __future__ import annotations

import copy
import pickle
import random

from hypothesis import given, note, strategies as st

import oracles
from layout_model import Layout, build_placement, build_runtime_bindings
from mooncake.reshard.weight import validate_runtime_bindings, weight_placement_from_json, weight_placement_to_json
from strategies import any_layouts, valid_layouts


@given(any_layouts())
def test_from_fragments_verdict_matches_oracle(layout: Layout) -> None:
    expected = oracles.from_fragments_verdict(layout)
    note(f"mutations: {layout.notes}")
    note(f"oracle: {expected}")
    try:
        placement = build_placement(layout)
    except ValueError as exc:
        assert type(exc) is ValueError
        assert expected is not None, f"rejected a layout the oracle accepts: {exc}"
        text = str(exc)
        assert any(text.startswith(m) for m in expected), f"{text!r} is not one of {sorted(expected)}"
        return
    assert expected is None, f"accepted a layout the oracle rejects with {sorted(expected)}"
    assert placement.placement_id == oracles.placement_id(layout)


@given(valid_layouts())
def test_json_round_trip_and_oracle_bytes(layout: Layout) -> None:
    p = build_placement(layout)
    text = weight_placement_to_json(p)
    assert text == oracles.placement_json(layout)
    assert p.digest == oracles.placement_digest(layout)
    q = weight_placement_from_json(text)
    assert q == p
    assert q.placement_id == p.placement_id and q.digest == p.digest
    assert weight_placement_to_json(q) == text
    assert p.topology.topology_id == oracles.topology_id(layout)


@given(valid_layouts())
def test_pickle_round_trip(layout: Layout) -> None:
    p = build_placement(layout)
    for protocol in (2, pickle.HIGHEST_PROTOCOL):
        q = pickle.loads(pickle.dumps(p, protocol=protocol))
        assert q == p and q.digest == p.digest
    assert copy.copy(p) == p
    digest = p.digest  # cache it, then pickle again
    assert pickle.loads(pickle.dumps(p)).digest == digest


@given(valid_layouts(), st.randoms(use_true_random=False))
def test_identity_independent_of_inventory_order(layout: Layout, rnd: random.Random) -> None:
    p = build_placement(layout)
    shuffled = Layout(
        sizes=layout.sizes,
        participants=tuple(rnd.sample(layout.participants, len(layout.participants))),
        tensors=tuple(rnd.sample(layout.tensors, len(layout.tensors))),
        fragments=tuple(rnd.sample(layout.fragments, len(layout.fragments))),
        resource_id=layout.resource_id, revision=layout.revision, weight_generation=layout.weight_generation,
        placement_set_id=layout.placement_set_id,
    )
    for q in (build_placement(layout, reverse=True), build_placement(shuffled)):
        assert q == p
        assert q.placement_id == p.placement_id
        assert q.digest == p.digest
        assert weight_placement_to_json(q) == weight_placement_to_json(p)
        assert [f.placement_fragment_id for f in q.fragments] == sorted(f.placement_fragment_id for f in q.fragments)


@given(valid_layouts())
def test_canonical_runtime_bindings_validate(layout: Layout) -> None:
    p = build_placement(layout)
    bindings = build_runtime_bindings(p)
    assert validate_runtime_bindings(p, bindings) is None
    assert {b.participant_id for b in bindings} == {part.participant_id for part in p.parts if part.fragments}

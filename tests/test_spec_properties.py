"""Hypothesis properties of the manifest layer against the brute-force oracles.

1. ``WeightPlacementManifest.from_fragments`` accepts exactly the layouts the cell-enumeration
   oracle accepts (spec 4.8, 11.4, 11.5); on rejection the message is one the oracle allows.
2. JSON round trip preserves equality, ``placement_id`` and ``digest``; the ids and the JSON bytes
   equal the spec 6/7 restatement in ``oracles``.
3. Pickle (and copy) round trip preserves equality.
4. IDs, digest and JSON do not depend on the order fragments, tensors and participants are given in.
5. Canonical runtime bindings of any accepted placement validate (spec 4.10).
6. Runtime bindings with random, often clashing, addresses are accepted exactly when the pairwise
   spec 11.8 oracle accepts them.
"""

from __future__ import annotations

import copy
import dataclasses
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


@st.composite
def scrambled_bindings(draw: st.DrawFn) -> tuple:
    """A valid placement and runtime bindings with random, often clashing, addresses."""
    layout = draw(valid_layouts(max_tensors=2))
    p = build_placement(layout)
    bindings = list(build_runtime_bindings(p))
    shared_instance = draw(st.booleans())
    placed: dict = {}
    out = []
    for b in bindings:
        frags = []
        for f in b.fragments:
            extra = draw(st.sampled_from([0, 0, 8, 16]))
            storage = draw(st.integers(1, 24)) * 8
            offset = draw(st.integers(0, extra // 2)) * 2
            worker = draw(st.sampled_from(["w0", "w1"]))
            device = draw(st.sampled_from(["cuda:0", "cuda:0", "cuda:1"]))
            logical = next(x for x in p.fragments if x.placement_fragment_id == f.placement_fragment_id)
            twin_key = (logical.aliases, logical.global_offset, logical.local_shape)
            if logical.aliases and twin_key in placed and draw(st.booleans()):
                storage, extra, offset, worker, device = placed[twin_key]  # share the alias partner's view
            placed[twin_key] = (storage, extra, offset, worker, device)
            frags.append(dataclasses.replace(
                f, address=storage + offset, storage_address=storage, storage_nbytes=f.nbytes + extra,
                storage_offset_bytes=offset, worker_id=worker, device=device))
        out.append(dataclasses.replace(b, fragments=tuple(frags), instance_id="shared" if shared_instance else b.instance_id))
    return p, tuple(out)


@given(scrambled_bindings())
def test_runtime_address_ranges_match_oracle(data: tuple) -> None:
    p, bindings = data
    tensors = {t.tensor_id: t for t in p.tensors}
    logical = {f.placement_fragment_id: f for f in p.fragments}
    views = []
    for b in bindings:
        for f in b.fragments:
            lf = logical[f.placement_fragment_id]
            t = tensors[lf.tensor_id]
            views.append(dict(
                space=(b.instance_id, f.worker_id, f.device), address=f.address, nbytes=f.nbytes,
                storage_address=f.storage_address, storage_nbytes=f.storage_nbytes, tensor_id=lf.tensor_id,
                aliases=lf.aliases, global_offset=lf.global_offset, local_shape=lf.local_shape,
                descriptor=(t.global_shape, t.dtype, t.itemsize, t.shard_dims, t.parallel_axes, t.layer_id, t.expert_id, t.layout_fingerprint),
            ))
    expected = oracles.runtime_range_violations(views)
    note(f"oracle: {expected}")
    try:
        validate_runtime_bindings(p, bindings)
    except ValueError as exc:
        assert expected, f"rejected bindings the oracle accepts: {exc}"
        assert any(str(exc).startswith(m) for m in expected), (str(exc), expected)
        return
    assert not expected, f"accepted bindings the oracle rejects: {expected}"

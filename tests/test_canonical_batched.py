"""The placement id and digest encodings (canonical_parts_json's fused form with the exact
fragment and rank classes) write the parts in list order straight into the buffer or digest, in
batches of fragments whose state dicts are read ahead of their texts, and encode each axis object
once per call. Same text and hashes as the exact encoding; anything unusual (a subclass, a
missing field, a state key that is not an exact str, a key equal to a field name but not the
interned one) declines to the exact encoding, which raises what it raised before."""

from __future__ import annotations

from typing import Any, Callable

import pytest
from hypothesis import given, settings

import known_answers
from layout_model import Layout, build_placement
from test_planner_oracle import placement_pairs

from spec_helpers import field_state, store_state

from mooncake.reshard import _native
from mooncake.reshard.weight import (
    OwnershipAxis,
    ParallelRank,
    ParallelTopology,
    PlacementFragment,
    ReplicatedAxis,
    SplitAxis,
    TensorDescriptor,
    TopologyParticipant,
    WeightPlacementManifest,
)
from mooncake.reshard.weight import _canonical as canonical

_TYPES4 = (TensorDescriptor, SplitAxis, ReplicatedAxis, OwnershipAxis)
_TYPES6 = _TYPES4 + (PlacementFragment, ParallelRank)


def _exact_parts(pairs: list[Any]) -> str:
    """The parts text by the Python objects (fragment_object) and the generic C encoder."""
    parts = []
    for fragments, tail in pairs:
        rank_cache: dict[int, Any] = {}
        parts.append((list(canonical.fragment_object(f, rank_cache) for f in fragments), tail))
    return "[" + ",".join(
        '{"fragments":' + _native.canonical_json(f) + "," + tail[1:] for f, tail in parts
    ) + "]"


def _exact(pairs: list[Any], tensors: list[Any]) -> str:
    tensor_text = _native.canonical_json([canonical.tensor_object(t) for t in tensors])
    return "{" + _exact_parts(pairs) + "," + tensor_text + "}"


def _fused(pairs: list[Any], tensors: list[Any], types: tuple[type, ...], sha256: bool = False) -> Any:
    return _native.canonical_parts_json(
        pairs, prefix="{", suffix=",", tensors=tensors, after="}", types=types, sha256=sha256
    )


def _check_equal(placement: Any) -> None:
    pairs = canonical._part_pairs(placement.parts)
    tensors = list(placement.tensors)
    exact = _exact(pairs, tensors)
    assert _fused(pairs, tensors, _TYPES6) == exact
    assert _fused(pairs, tensors, _TYPES6, sha256=True) == _native.sha256_hex(exact.encode())
    # the plain form, batched (types) or in order (none), gives the same parts text
    for types in ({"types": _TYPES6}, {}):
        assert _native.canonical_parts_json(pairs, **types) == _exact_parts(pairs)
        assert _native.canonical_parts_json(pairs, sha256=True, **types) == _native.sha256_hex(
            _exact_parts(pairs).encode()
        )
    # the four-class form (it read in address order) is gone
    with pytest.raises(TypeError):
        _fused(pairs, tensors, _TYPES4)


def _big_placement(tensors: int = 9, tp: int = 5, dp: int = 2, empty_participants: int = 0) -> Any:
    """Tensors split on dim 0 over tp ranks, replicated over dp: several batches per part."""
    shared_axes = (ReplicatedAxis("dp"), SplitAxis("tp", 0))
    descriptors = []
    for t in range(tensors):
        # every third tensor gets its own (equal) axis objects
        axes = shared_axes if t % 3 else (ReplicatedAxis("dp"), SplitAxis("tp", 0))
        descriptors.append(
            TensorDescriptor(
                tensor_id=f"layer.{t}.w\u00e9",
                global_shape=(tp * 4, 3),
                dtype="bfloat16",
                itemsize=2,
                shard_dims=(0,),
                layout_fingerprint="fp",
                parallel_axes=axes,
                layer_id=t,
                expert_id=None if t % 2 else 1000 + t,
            )
        )
    ranks = {(d, r): ParallelRank(dp=d, tp=r) for d in range(dp) for r in range(tp)}
    participants = [TopologyParticipant(f"p-{d}-{r}", rank) for (d, r), rank in ranks.items()]
    participants += [
        TopologyParticipant(f"z-{k}", ParallelRank(dp=dp + k, tp=0)) for k in range(empty_participants)
    ]
    fragments = []
    for descriptor in descriptors:
        for (d, r), rank in ranks.items():
            fragments.append(
                PlacementFragment(
                    tensor_id=descriptor.tensor_id,
                    global_offset=(4 * r, 0),
                    local_shape=(4, 3),
                    nbytes=24,
                    rank=rank,
                    pipeline_stage_id=None if r % 2 else 7,
                )
            )
    topology = ParallelTopology(
        tp_size=tp, pp_size=1, ep_size=1, dp_size=dp + empty_participants, participants=tuple(participants)
    )
    return WeightPlacementManifest.from_fragments(
        resource_id="res",
        revision="rev",
        weight_generation=1,
        placement_set_id="set",
        topology=topology,
        tensors=tuple(descriptors),
        fragments=tuple(fragments),
    )


def test_known_answers_batched_equals_exact() -> None:
    for placement in known_answers.placements():
        _check_equal(placement)


def test_many_batches_equal_exact() -> None:
    for tensors, tp, dp in ((1, 1, 1), (3, 5, 1), (9, 5, 2), (17, 3, 3), (16, 2, 1), (33, 1, 2)):
        placement = _big_placement(tensors, tp, dp)
        _check_equal(placement)
        assert canonical.placement_wire_json(placement, sha256=True) == _native.sha256_hex(
            canonical.placement_wire_json(placement).encode()
        )


@settings(max_examples=30, deadline=None)
@given(placement_pairs())
def test_random_placements_batched_equal_exact(pair: tuple[Layout, Layout]) -> None:
    for layout in pair:
        _check_equal(build_placement(layout))


def _clone(obj: Any, cls: type | None = None) -> Any:
    copy = object.__new__(cls or type(obj))
    store_state(copy, field_state(obj))
    return copy


def _replace_fragment(pairs: list[Any], part: int, at: int, fragment: Any) -> list[Any]:
    out = list(pairs)
    fragments = list(out[part][0])
    fragments[at] = fragment
    out[part] = (tuple(fragments), out[part][1])
    return out


def _equal_keys(obj: Any) -> Any:
    """A clone whose state (a plain dict, not key-sharing) has keys equal to the field names but
    not the interned name objects."""
    clone = object.__new__(type(obj))
    state = {"".join(list(key)): value for key, value in field_state(obj).items()}
    assert all(a is not b for a, b in zip(state, field_state(obj)))
    store_state(clone, replace=True, state=state)
    return clone


def _declining_fragments(fragment: Any) -> dict[str, Any]:
    class SubFragment(PlacementFragment):
        pass

    class SubRank(ParallelRank):
        pass

    out: dict[str, Any] = {"subclass": _clone(fragment, SubFragment)}
    rank_sub = _clone(fragment)
    store_state(rank_sub, {"rank": _clone(fragment.rank, SubRank)})
    out["rank subclass"] = rank_sub
    for name in ("tensor_id", "rank", "placement_fragment_id", "aliases", "pipeline_stage_id"):
        missing = _clone(fragment)
        object.__delattr__(missing, name)
        out[f"missing {name}"] = missing
    # (a fragment's state is its C layout's slots: an int key cannot be stored, and fields
    # stored through equal names that are not the interned ones are the genuine state; see
    # test_equal_key_fragments_are_genuine)
    rank_odd = _clone(fragment)
    rank = _clone(fragment.rank)
    store_state(rank, {2: 3})
    store_state(rank_odd, {"rank": rank})
    out["rank int key"] = rank_odd
    rank_missing = _clone(fragment)
    rank = _clone(fragment.rank)
    object.__delattr__(rank, "ep")
    store_state(rank_missing, {"rank": rank})
    out["rank missing ep"] = rank_missing
    return out


def test_unusual_fragments_decline_at_every_batch_position() -> None:
    placement = _big_placement(40, 2, 1)
    pairs = canonical._part_pairs(placement.parts)
    tensors = list(placement.tensors)
    part = next(i for i, (fragments, _) in enumerate(pairs) if len(fragments) > 17)
    length = len(pairs[part][0])
    for name, bad in _declining_fragments(pairs[part][0][0]).items():
        for at in sorted({0, 1, 15, 16, 17, length - 1}):
            forged = _replace_fragment(pairs, part, at, bad)
            for sha in (False, True):
                assert _fused(forged, tensors, _TYPES6, sha) is None, (name, at)


def test_extra_str_keys_do_not_decline() -> None:
    placement = _big_placement(3, 5, 1)
    pairs = canonical._part_pairs(placement.parts)
    tensors = list(placement.tensors)
    fragment = _clone(pairs[0][0][2])
    store_state(fragment, {"_cache": object()})
    forged = _replace_fragment(pairs, 0, 2, fragment)
    tensor = _clone(tensors[1])
    store_state(tensor, {"_derived": [1]})
    tensors[1] = tensor
    assert _fused(forged, tensors, _TYPES6) == _exact(forged, tensors)


def test_equal_key_fragments_are_genuine() -> None:
    """A fragment's fields stored through names equal to, but not, the interned field names are
    its genuine state (a C layout has slots, not keys): the batched path encodes it exactly."""
    placement = _big_placement(40, 2, 1)
    pairs = canonical._part_pairs(placement.parts)
    tensors = list(placement.tensors)
    part = next(i for i, (fragments, _) in enumerate(pairs) if len(fragments) > 17)
    for at in (0, 16, len(pairs[part][0]) - 1):
        forged = _replace_fragment(pairs, part, at, _equal_keys(pairs[part][0][at]))
        for sha in (False, True):
            got = _fused(forged, tensors, _TYPES6, sha)
            assert got is not None and got == _fused(pairs, tensors, _TYPES6, sha)


def test_unusual_tensors_and_axes_decline() -> None:
    placement = _big_placement(20, 2, 1)
    pairs = canonical._part_pairs(placement.parts)
    tensors = list(placement.tensors)
    base = tensors[0]
    int_key = _clone(base)
    store_state(int_key, {0: 1})
    equal_key = _equal_keys(base)
    axis = _clone(base.parallel_axes[1])
    store_state(axis, {5: 5})
    axis_key = _clone(base)
    store_state(axis_key, {"parallel_axes": (base.parallel_axes[0], axis)})
    no_dim = _clone(base.parallel_axes[1])
    object.__delattr__(no_dim, "dim")
    axis_dim = _clone(base)
    store_state(axis_dim, {"parallel_axes": (no_dim,)})
    no_kind = _clone(base.parallel_axes[0])
    object.__delattr__(no_kind, "kind")
    axis_kind = _clone(base)
    store_state(axis_kind, {"parallel_axes": (no_kind,)})
    for bad in (int_key, equal_key, axis_key, axis_dim, axis_kind):
        for at in (0, 15, 16, 19):
            given = tensors[:at] + [bad] + tensors[at + 1 :]
            for sha in (False, True):
                assert _fused(pairs, given, _TYPES6, sha) is None


def test_forged_values_encode_as_the_exact_encoding() -> None:
    """Values an adapter could forge into a fragment's state: the fused form gives the exact
    text, or declines (None) where the exact encoding raises."""
    placement = _big_placement(3, 5, 1)
    pairs = canonical._part_pairs(placement.parts)
    tensors = list(placement.tensors)
    fragment = pairs[0][0][2]

    class Str(str):
        pass

    class Int(int):
        pass

    edits: list[Callable[[dict[str, Any]], None]] = [
        lambda s: s.__setitem__("nbytes", True),
        lambda s: s.__setitem__("nbytes", 2**80),
        lambda s: s.__setitem__("nbytes", Int(-5)),
        lambda s: s.__setitem__("global_offset", [0, -(2**70)]),
        lambda s: s.__setitem__("local_shape", (Int(3), None)),
        lambda s: s.__setitem__("aliases", [Str("b\u00e9"), "a\ud800"]),
        lambda s: s.__setitem__("aliases", {"k": ("v", 1)}),
        lambda s: s.__setitem__("placement_fragment_id", "id\n\"\\\x7f\U0001f600"),
        lambda s: s.__setitem__("tensor_id", Str("t")),
        lambda s: s.__setitem__("pipeline_stage_id", 2**64),
        lambda s: s.__setitem__("nbytes", 1.5),
        lambda s: s.__setitem__("aliases", (object(),)),
    ]
    for edit in edits:
        forged_fragment = _clone(fragment)
        edit(field_state(forged_fragment))
        forged = _replace_fragment(pairs, 0, 2, forged_fragment)
        try:
            exact: Any = _exact(forged, tensors)
        except TypeError:
            exact = None
        assert _fused(forged, tensors, _TYPES6) == exact
        digest = None if exact is None else _native.sha256_hex(exact.encode())
        assert _fused(forged, tensors, _TYPES6, sha256=True) == digest


def test_fused_hostile_type_tuples() -> None:
    placement = _big_placement(1, 1, 1)
    pairs = canonical._part_pairs(placement.parts)
    tensors = list(placement.tensors)
    for types in (_TYPES6[:5], _TYPES6 + (object,), _TYPES4 + (PlacementFragment, 1), _TYPES4 + (1, ParallelRank)):
        with pytest.raises(TypeError):
            _fused(pairs, tensors, types)
    # classes swapped: every fragment or rank then declines
    assert _fused(pairs, tensors, _TYPES4 + (ParallelRank, PlacementFragment)) is None
    assert _fused(pairs, tensors, _TYPES4 + (PlacementFragment, PlacementFragment)) is None
    # malformed pairs decline
    assert _fused([(pairs[0][0], "{}")], tensors, _TYPES6) is None
    assert _fused([(iter(pairs[0][0]), pairs[0][1])], tensors, _TYPES6) is None
    assert _fused([(pairs[0][0], "{\"\u00e9\":1}")], tensors, _TYPES6) is None
    assert _fused([pairs[0][0]], tensors, _TYPES6) is None
    # empty parts and an empty pair list
    assert _fused([((), '{"x":1}')], [], _TYPES6) == '{[{"fragments":[],"x":1}],[]}'
    assert _fused([], [], _TYPES6) == "{[],[]}"


def test_placement_ids_and_digests_unchanged_by_the_batched_form(monkeypatch: pytest.MonkeyPatch) -> None:
    placement = _big_placement(9, 5, 2)
    with_six = (placement.placement_id, canonical.placement_wire_json(placement, sha256=True))
    # fragment and rank classes swapped: the batched form declines every fragment, and the
    # in-order encoding gives the ids and digests
    monkeypatch.setattr(canonical, "_TENSOR_TYPES", _TYPES4 + (ParallelRank, PlacementFragment))
    rebuilt = _big_placement(9, 5, 2)
    assert (rebuilt.placement_id, canonical.placement_wire_json(rebuilt, sha256=True)) == with_six

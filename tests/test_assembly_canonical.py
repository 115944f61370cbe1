"""Canonical JSON of placements at scale (issue 5): the C encoders against the dict encoding.

``canonical_parts_json`` encodes the fragments in list order (batched when given the exact
classes, falling back to the in-order encoding on anything else, so that the first error in list
order is the one raised; tests/test_canonical_read_order.py checks the order of the reads);
strings are copied eight plain bytes at a time.
Each is compared here with ``canonical_json`` of the dict objects of ``weight/_canonical.py``
(itself tested against ``json.dumps``) on shuffled, shared and hostile inputs.
"""

from __future__ import annotations

import copy
import json
import sys
import random
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank, PlacementFragment
from mooncake.reshard.weight._canonical import fragment_object

SETTINGS = settings(max_examples=150, deadline=None)


def _dict_parts(pairs: list[tuple[Any, str]]) -> list[dict[str, Any]]:
    parts = []
    for fragments, tail in pairs:
        part = json.loads(tail)
        part["fragments"] = [fragment_object(f) for f in fragments]
        parts.append(part)
    return parts


def _fragments(count: int, seed: int) -> list[PlacementFragment]:
    rng = random.Random(seed)
    ranks = [ParallelRank(dp=d, tp=t, pp=0, ep=e) for d in range(2) for t in range(2) for e in range(3)]
    out = []
    for index in range(count):
        rows = rng.randrange(1, 9)
        tensor_id = f"t{index % 7}\u00e9" if index % 11 == 0 else f"layers.{index % 5}.w"
        out.append(
            PlacementFragment(
                tensor_id,
                (rng.randrange(0, 4) * 8, 0),
                (rows, 4),
                rows * 4 * 2,
                rng.choice(ranks),
                pipeline_stage_id=None if index % 3 else index,
                aliases=() if index % 4 else (tensor_id, 'q"\\'),
            )
        )
    return out


@SETTINGS
@given(st.integers(0, 60), st.integers(0, 2**32), st.integers(1, 4), st.booleans())
def test_parts_json_equals_dict_encoding(count: int, seed: int, nparts: int, as_list: bool) -> None:
    fragments = _fragments(count, seed)
    rng = random.Random(seed)
    rng.shuffle(fragments)  # list order unrelated to address order
    if fragments:
        fragments.append(fragments[0])  # the same object twice
    pairs: list[tuple[Any, str]] = []
    for part in range(nparts):
        chunk = fragments[part::nparts]
        tail = _native.canonical_json({"participant_id": f"p{part}", "rank": {"dp": part, "tp": 0, "pp": 0, "ep": 0}})
        pairs.append((list(chunk) if as_list else tuple(chunk), tail))
    expected = _native.canonical_json(_dict_parts(pairs))
    assert _native.canonical_parts_json(pairs) == expected
    assert _native.canonical_parts_json(pairs, sha256=True) == _native.sha256_hex(expected.encode())
    assert _native.canonical_parts_json(pairs, prefix='{"parts":', suffix=',"z":1}') == (
        '{"parts":' + expected + ',"z":1}'
    )
    assert _native.canonical_parts_json(pairs, prefix='{"parts":', suffix=',"z":1}', sha256=True) == (
        _native.sha256_hex(('{"parts":' + expected + ',"z":1}').encode())
    )


def _broken(fragment: PlacementFragment, missing: str) -> PlacementFragment:
    clone = copy.copy(fragment)
    object.__delattr__(clone, missing)
    return clone


def test_parts_json_first_error_in_list_order() -> None:
    base = _fragments(6, 1)
    tail = '{"participant_id":"p"}'
    a = _broken(base[0], "local_shape")
    b = _broken(base[1], "nbytes")
    for order, missing in (([a, b], "local_shape"), ([b, a], "nbytes")):
        for fragments in (base[2:4] + order, order + base[2:4]):
            with pytest.raises(KeyError) as info:
                _native.canonical_parts_json([(fragments, tail)])
            assert info.value.args == (missing,)
            with pytest.raises(KeyError) as info:
                _native.canonical_parts_json([(tuple(fragments), tail)], sha256=True)
            assert info.value.args == (missing,)
    # a bad tail after a bad fragment: the fragment's error comes first, as in list order
    with pytest.raises(KeyError):
        _native.canonical_parts_json([([a], tail), (base, "{}")])
    with pytest.raises(ValueError):
        _native.canonical_parts_json([(base, "{}"), ([a], tail)])


def test_parts_json_hostile_ranks_and_values() -> None:
    fragment = _fragments(1, 2)[0]
    tail = '{"participant_id":"p"}'
    # a rank whose state lacks a key, a rank that is not an object with a dict state
    rank = copy.copy(fragment.rank)
    object.__delattr__(rank, "tp")
    bad_rank = copy.copy(fragment)
    object.__setattr__(bad_rank, "rank", rank)
    with pytest.raises(KeyError):
        _native.canonical_parts_json([([fragment, bad_rank], tail)])
    no_state = copy.copy(fragment)
    object.__setattr__(no_state, "rank", 5)
    with pytest.raises(AttributeError):
        _native.canonical_parts_json([([fragment, no_state], tail)], sha256=True)
    # values the dict encoding would reject or encode generically
    for name, value, error in (
        ("global_offset", (0, 1.5), TypeError),
        ("local_shape", [2**70, -1], None),
        ("nbytes", 2**80, None),
        ("aliases", ["x"], None),
        ("placement_fragment_id", "\ud800\u00e9", None),
        ("pipeline_stage_id", object(), TypeError),
    ):
        forged = copy.copy(fragment)
        object.__setattr__(forged, name, value)
        pairs = [([fragment, forged, fragment], tail)]
        if error is None:
            assert _native.canonical_parts_json(pairs) == _native.canonical_json(_dict_parts(pairs))
        else:
            with pytest.raises(error):
                _native.canonical_parts_json(pairs)
    # a shared rank object is encoded once; its state is read as it is during the call
    ranks = copy.copy(fragment)
    assert _native.canonical_parts_json([([fragment, ranks] * 3, tail)]) == _native.canonical_json(
        _dict_parts([([fragment, ranks] * 3, tail)])
    )


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=0x2FF) | st.sampled_from('"\\\x7f\x00\ud800\U0001f600'), max_size=64))
def test_strings_match_json_dumps(text: str) -> None:
    assert _native.canonical_json(text) == json.dumps(text)
    assert _native.canonical_json([text, {text: text}]) == json.dumps([text, {text: text}], sort_keys=True, separators=(",", ":"))
    try:
        expected = json.dumps(text, ensure_ascii=False)
        expected.encode("utf-8")
    except UnicodeEncodeError:
        return
    assert _native.canonical_json(text, ensure_ascii=False) == expected


# ---- tensor descriptors -----------------------------------------------------------------------

from layout_model import build_placement, build_tensor  # noqa: E402
from strategies import any_layouts, valid_layouts  # noqa: E402

from mooncake.reshard.weight import (  # noqa: E402
    OwnershipAxis,
    ReplicatedAxis,
    SplitAxis,
    TensorDescriptor,
    weight_placement_to_json,
)
from mooncake.reshard.weight._canonical import (  # noqa: E402
    canonical_json_with_parts,
    placement_wire_json,
    tensor_object,
    tensors_json,
)


def _tensor_dicts(tensors: Any) -> str:
    return _native.canonical_json([tensor_object(t) for t in tensors])


@settings(max_examples=80, deadline=None)
@given(valid_layouts())
def test_tensors_and_wire_json_equal_dict_encoding(layout: Any) -> None:
    tensors = [build_tensor(t) for t in layout.tensors]
    assert tensors_json(tensors) == _tensor_dicts(tensors)
    assert tensors_json(tuple(reversed(tensors))) == _tensor_dicts(tuple(reversed(tensors)))
    assert tensors_json(iter(tensors)) == _tensor_dicts(tensors)
    placement = build_placement(layout)
    text = weight_placement_to_json(placement)
    assert placement_wire_json(placement) == text
    assert placement_wire_json(placement, sha256=True) == _native.sha256_hex(text.encode()) == placement.digest
    payload = {"placement_set_id": "s", "resource_id": "r", "zz": [1, {"b": 2}], "topology": {"x": "\u00e9"}}
    for keys in (payload, {"zz": 1}, {"schema": 2}, {"a": 1}):
        full = dict(keys, tensors=[tensor_object(t) for t in tensors])
        expected = canonical_json_with_parts(full, placement.parts)
        assert canonical_json_with_parts(keys, placement.parts, tensors=tensors) == expected
        assert canonical_json_with_parts(keys, placement.parts, tensors=tensors, sha256=True) == (
            _native.sha256_hex(expected.encode())
        )


def test_tensors_json_edge_values_and_errors() -> None:
    base = TensorDescriptor(
        tensor_id="w\u00e9\"\\",
        global_shape=(2**40, 3),
        dtype="bfloat16",
        itemsize=2,
        shard_dims=(0,),
        layout_fingerprint="fp\n",
        parallel_axes=(SplitAxis("tp", 0), ReplicatedAxis("dp"), OwnershipAxis("ep")),
        layer_id=None,
        expert_id=7,
    )
    assert tensors_json([base, base]) == _tensor_dicts([base, base])
    assert tensors_json([]) == "[]"

    class Axis:  # neither split nor replicated: ownership, as axis_identity decides
        kind = "pp"

    odd = copy.copy(base)
    object.__setattr__(odd, "parallel_axes", [Axis(), SplitAxis("tp", 1)])
    object.__setattr__(odd, "layer_id", 2**70)
    assert tensors_json([odd]) == _tensor_dicts([odd])
    # the first encoding error in output order
    bad_dtype = copy.copy(base)
    object.__setattr__(bad_dtype, "dtype", 1.5)
    bad_kind = copy.copy(base)
    object.__setattr__(bad_kind, "parallel_axes", (Axis(), SplitAxis("tp", 0)))
    Axis.kind = object()  # type: ignore[assignment]
    for tensors in ([bad_dtype, bad_kind], [bad_kind, bad_dtype]):
        with pytest.raises(TypeError) as ours:
            tensors_json(tensors)
        with pytest.raises(TypeError) as reference:
            _tensor_dicts(tensors)
        assert str(ours.value) == str(reference.value)
    # every read happens before any encoding: a missing attribute later wins
    missing = copy.copy(base)
    object.__delattr__(missing, "layout_fingerprint")  # no class default to fall back to
    for tensors in ([bad_dtype, missing], [missing, bad_dtype]):
        with pytest.raises(AttributeError):
            tensors_json(tensors)
        with pytest.raises(AttributeError):
            _tensor_dicts(tensors)
    no_axes = copy.copy(base)
    object.__setattr__(no_axes, "parallel_axes", 5)
    with pytest.raises(TypeError):
        tensors_json([bad_dtype, no_axes])
    with pytest.raises(TypeError):
        _native.canonical_tensors_json([base], SplitAxis, 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        _native.canonical_tensors_json(iter([base]), SplitAxis, ReplicatedAxis)  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        _native.canonical_tensors_json([1], SplitAxis, ReplicatedAxis)


# ---- one sort, grouped --------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.text(max_size=4), st.integers(0, 3)), max_size=40),
    st.integers(4, 6),
)
def test_sorted_groups_matches_python(entries: list[tuple[str, int]], ngroups: int) -> None:
    items = [object() for _ in entries]
    keys = [key for key, _ in entries]
    group_of = [group for _, group in entries]
    extra = [f"x{i}" for i in range(len(entries))]
    result = _native.sorted_groups(items, keys, group_of, ngroups, extra)
    assert result is not None
    ordered, rows, by_group, extra_by_group = result
    order = sorted(range(len(items)), key=keys.__getitem__)  # stable, code point order
    assert type(ordered) is tuple and ordered == tuple(items[i] for i in order)
    assert all(ordered[rows[i]] is items[i] for i in range(len(items)))
    assert sorted(rows) == list(range(len(items)))
    for group in range(ngroups):
        assert by_group[group] == tuple(items[i] for i in order if group_of[i] == group)
        assert extra_by_group[group] == tuple(extra[i] for i in order if group_of[i] == group)
    # each item is held once by the sorted tuple and once by its group's tuple, each extra once
    refs = [sys.getrefcount(item) for item in items]
    extra_refs = [sys.getrefcount(value) for value in extra]
    del result, ordered, by_group, extra_by_group
    assert [sys.getrefcount(item) for item in items] == [count - 2 for count in refs]
    assert [sys.getrefcount(value) for value in extra] == [count - 1 for count in extra_refs]


def test_sorted_groups_hostile_arguments() -> None:
    items = [object(), object()]
    assert _native.sorted_groups(items, ["b", 1], [0, 0], 1, [1, 2]) is None  # not all str: caller falls back
    assert _native.sorted_groups(items, ["b", "\ud800"], [0, 0], 1, [1, 2]) is None
    assert _native.sorted_groups([], [], [], 0, []) == ((), [], [], [])
    assert _native.sorted_groups([], [], [], 2, []) == ((), [], [(), ()], [(), ()])
    for group_of, ngroups in (([0, 1], 1), ([0, -1], 2), ([0, 2**70], 2), ([0, True], 2), ([0, 1.0], 2)):
        with pytest.raises(ValueError):
            _native.sorted_groups(items, ["a", "b"], group_of, ngroups, [1, 2])
    with pytest.raises(ValueError):
        _native.sorted_groups(items, ["a", "b"], [0, 0], -1, [1, 2])
    with pytest.raises(OverflowError):
        _native.sorted_groups(items, ["a", "b"], [0, 0], 2**70, [1, 2])
    for bad in ((items, ["a"], [0, 0], 1, [1, 2]), (items, ["a", "b"], [0], 1, [1, 2]), (items, ["a", "b"], [0, 0], 1, [1])):
        with pytest.raises(ValueError):
            _native.sorted_groups(*bad)
    assert _native.sorted_groups(tuple(items), ["b", "a"], [0, 0], 1, [1, 2])[0] == (items[1], items[0])
    for not_items in (iter(items), set(items), None):
        with pytest.raises(TypeError):
            _native.sorted_groups(not_items, ["a", "b"], [0, 0], 1, [1, 2])  # type: ignore[arg-type]


def _assembled(layout: Any, reverse: bool) -> Any:
    try:
        return build_placement(layout, reverse=reverse)
    except ValueError as exc:
        return str(exc)


@settings(max_examples=80, deadline=None)
@given(any_layouts(), st.booleans())
def test_from_fragments_python_grouping_fallback_agrees(layout: Any, reverse: bool) -> None:
    fast = _assembled(layout, reverse)
    original = _native.sorted_groups
    try:
        _native.sorted_groups = lambda *args: None  # type: ignore[assignment]
        slow = _assembled(layout, reverse)
    finally:
        _native.sorted_groups = original  # type: ignore[assignment]
    assert type(fast) is type(slow)
    if isinstance(fast, str):
        assert fast == slow
    else:
        assert fast == slow and fast.placement_id == slow.placement_id and fast.digest == slow.digest
        assert [p.fragments for p in fast.parts] == [p.fragments for p in slow.parts]
        assert [p.tensors for p in fast.parts] == [p.tensors for p in slow.parts]


# ---- pack_objects with rows: rank memo and id prefixes -----------------------------------------

_ID_PARTS = st.sampled_from(["", "a", "b", "\x00", "\x01", "\u00e9", "\uffff", "\U0001f600", "\ud800", "z" * 15, "sha256:0123456789"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(_ID_PARTS, max_size=4).map("".join).filter(bool), max_size=12), st.randoms(use_true_random=False))
def test_pack_objects_rows_increasing_matches_python(ids: list[str], rng: Any) -> None:
    ranks = [ParallelRank(dp=d, tp=t) for d in range(2) for t in range(2)]
    fragments = [
        PlacementFragment("a", (0,), (2,), 2, rng.choice(ranks), placement_fragment_id=fid) for fid in ids
    ]
    manifest_order = list(fragments)
    rng.shuffle(manifest_order)  # any claimed order, checked in row order
    source = list(fragments)
    rng.shuffle(source)
    position = {id(f): i for i, f in enumerate(manifest_order)}
    rows = [position[id(f)] for f in source]
    table, increasing, _ = _native.FragmentTable.pack_objects([(2,)], {"a": 0}, source, rows)
    claimed = [f.placement_fragment_id for f in manifest_order]
    assert increasing == all(x < y for x, y in zip(claimed, claimed[1:]))
    reference = _native.pack_fragments(
        [(2,)], [0] * len(manifest_order), [f.global_offset for f in manifest_order],
        [f.local_shape for f in manifest_order], [(f.rank.dp, f.rank.tp, f.rank.pp, f.rank.ep) for f in manifest_order],
        [f.nbytes for f in manifest_order],
    )
    assert table.uncovered_group(("dp", "tp", "pp", "ep")) == reference.uncovered_group(("dp", "tp", "pp", "ep"))
    assert table.duplicate_logical_fragment() == reference.duplicate_logical_fragment()
    assert table.tensor_classes([0]) == reference.tensor_classes([0])


def test_pack_objects_shared_and_hostile_ranks() -> None:
    rank = ParallelRank(dp=1, tp=2, pp=0, ep=3)
    fragments = [PlacementFragment("a", (i,), (1,), 2, rank) for i in range(4)]
    rows = [3, 2, 1, 0]
    table, _, _ = _native.FragmentTable.pack_objects([(4,)], {"a": 0}, fragments, rows)
    # one rank object for four fragments: every row carries its values (uncovered groups by tp)
    assert table.uncovered_group(("dp", "tp", "pp", "ep")) == -1
    broken = copy.copy(rank)
    object.__delattr__(broken, "ep")
    bad = [fragments[0], PlacementFragment("a", (1,), (1,), 2, rank)]
    object.__setattr__(bad[1], "rank", broken)
    with pytest.raises(KeyError):
        _native.FragmentTable.pack_objects([(4,)], {"a": 0}, bad, [1, 0])
    huge = copy.copy(rank)
    object.__setattr__(huge, "tp", 2**64)
    object.__setattr__(bad[1], "rank", huge)
    with pytest.raises(ValueError, match="signed 64-bit"):
        _native.FragmentTable.pack_objects([(4,)], {"a": 0}, bad, [0, 1])
    object.__setattr__(bad[1], "rank", 7)
    with pytest.raises(AttributeError):
        _native.FragmentTable.pack_objects([(4,)], {"a": 0}, bad, [0, 1])


def test_item_tuple_bulk_accept_matches_isinstance_loop() -> None:
    from mooncake.reshard.contracts._checks import item_tuple

    class Sub(ParallelRank):
        pass

    ranks = [ParallelRank(tp=i) for i in range(12)]
    assert item_tuple(ranks, "ranks", ParallelRank) == tuple(ranks)
    mixed = ranks + [Sub(tp=1)]
    assert item_tuple(tuple(mixed), "ranks", ParallelRank) == tuple(mixed)
    for bad in (ranks + [1], [1] + ranks, ranks[:3] + [None]):
        with pytest.raises(ValueError, match="^ranks must contain ParallelRank$"):
            item_tuple(bad, "ranks", ParallelRank)

    class Liar:  # claims to be a ParallelRank through __class__: isinstance accepts it
        @property  # type: ignore[misc]
        def __class__(self) -> type:
            return ParallelRank

    liars = ranks + [Liar()]
    assert item_tuple(liars, "ranks", ParallelRank) == tuple(liars)

"""Manifest assembly at scale (issue 2 packed table, issue 5): the fast paths against oracles.

The manifest packs its fragments once into a C ``FragmentTable`` and runs the spec 11.4 checks in
bulk; ``from_fragments`` assembles its parts unchecked (the manifest's whole-manifest checks imply
the part checks) and falls back to the checked constructors on any rejection; spec 11.5 coverage
memoises tensors that repeat an already proven problem; the canonical JSON of fragments is built
in C. Every one of those is compared here with an independent reference: the brute-force oracles
of ``tests/oracles.py``, or the exact, unoptimised Python checks the fast paths stand in for.
No timing assertions (timings belong to ``benchmarks/scale.py``).
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any, Optional, Sequence

import pytest
from hypothesis import given, settings, strategies as st

import oracles
from layout_model import Layout, build_fragment, build_placement, build_tensor, build_topology
from spec_helpers import field_state

from mooncake.reshard import _native
from mooncake.reshard.weight import (
    ParallelRank,
    PlacementFragment,
    WeightPlacementManifest,
    WeightPlacementPart,
    weight_placement_to_json,
)
from mooncake.reshard.weight import _coverage, validation
from mooncake.reshard.weight._canonical import fragment_object, part_object
from strategies import any_layouts, mutation, valid_layouts

SETTINGS = settings(max_examples=120, deadline=None)


def _message(fn: Any, *args: Any, **kwargs: Any) -> Optional[str]:
    try:
        fn(*args, **kwargs)
    except ValueError as exc:
        return str(exc)
    return None


def _inputs(layout: Layout) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    tensors = tuple(sorted((build_tensor(t) for t in layout.tensors), key=lambda t: t.tensor_id))
    fragments = tuple(
        sorted((build_fragment(layout, f) for f in layout.fragments), key=lambda f: f.placement_fragment_id)
    )
    return tensors, fragments


def _clone(layout: Layout, copies: int) -> Layout:
    """``copies`` renamed copies of every tensor and fragment (same geometry, ranks and axes)."""

    def rename(j: int, name: str) -> str:
        return f"c{j}.{name}"  # a common prefix keeps the relative order of alias members

    tensors = []
    fragments = []
    for j in range(copies):
        tensors.extend(dataclasses.replace(t, tensor_id=rename(j, t.tensor_id)) for t in layout.tensors)
        fragments.extend(
            dataclasses.replace(
                f,
                tensor_id=rename(j, f.tensor_id),
                aliases=tuple(rename(j, a) for a in f.aliases),
                fragment_id=None if f.fragment_id is None else rename(j, f.fragment_id),
            )
            for f in layout.fragments
        )
    return dataclasses.replace(layout, tensors=tuple(tensors), fragments=tuple(fragments))


def _check_verdict(layout: Layout) -> Optional[WeightPlacementManifest]:
    verdict = oracles.from_fragments_verdict(layout)
    try:
        placement = build_placement(layout)
    except ValueError as exc:
        assert verdict is not None, f"rejected a valid layout: {exc}"
        assert str(exc) in verdict
        return None
    assert verdict is None, f"accepted an invalid layout; expected one of {sorted(verdict)}"
    assert placement.placement_id == oracles.placement_id(layout)
    assert placement.digest == oracles.placement_digest(layout)
    return placement


# ---- 11.4 bulk checks over the table == the exact per-fragment checks --------------------------


@SETTINGS
@given(any_layouts())
def test_fast_fragment_checks_agree_with_exact_checks(layout: Layout) -> None:
    try:
        tensors, fragments = _inputs(layout)
    except ValueError:
        return  # a mutation produced an invalid value; nothing to assemble
    for aliases in (False, True):
        exact = _message(validation.validate_placement_fragments, tensors, fragments, check_alias_groups=aliases)
        try:
            table = validation.fast_placement_checks(tensors, fragments, check_alias_groups=aliases)
        except ValueError as exc:
            # only the alias check raises directly, after every per-fragment rule passed
            assert aliases and str(exc) == exact
            continue
        assert (table is None) == (exact is not None), exact
        if table is not None:
            assert len(table) == len(fragments)
            assert table.total_nbytes() == sum(f.nbytes for f in fragments)


# ---- 11.5 memoised coverage == the check of every tensor ---------------------------------------


def _unmemoised_coverage(tensors: tuple[Any, ...], fragments: tuple[Any, ...], topology: Any) -> None:
    if not tensors:
        raise ValueError("global weight placement must contain tensors")
    if not fragments:
        raise ValueError("global weight placement must contain fragments")
    sizes = {"dp": topology.dp_size, "pp": topology.pp_size, "ep": topology.ep_size, "tp": topology.tp_size}
    indexes: dict[Any, Any] = {}
    for tensor in tensors:
        group = [f for f in fragments if f.tensor_id == tensor.tensor_id]
        if not group:
            raise ValueError(f"global placement tensor is not fully covered: {tensor.tensor_id}")
        _coverage._check_tensor(tensor, group, sizes, topology, indexes)


@SETTINGS
@given(st.data())
def test_memoised_coverage_agrees_with_every_tensor_checked(data: st.DataObject) -> None:
    layout = _clone(data.draw(valid_layouts(max_tensors=2)), data.draw(st.integers(2, 4)))
    if data.draw(st.booleans()):
        layout = data.draw(mutation(layout))
    try:
        tensors, fragments = _inputs(layout)
        topology = build_topology(layout)
    except ValueError:
        return
    if _message(validation.validate_placement_fragments, tensors, fragments, check_alias_groups=True):
        return  # coverage is only reached after 11.4
    expected = _message(_unmemoised_coverage, tensors, fragments, topology)
    assert _message(_coverage.validate_complete_coverage, tensors, fragments, topology) == expected
    table = validation.fast_placement_checks(tensors, fragments, check_alias_groups=True)
    assert table is not None
    assert _message(_coverage.validate_complete_coverage, tensors, fragments, topology, table) == expected


@SETTINGS
@given(st.data())
def test_repeated_tensors_are_judged_like_the_oracle(data: st.DataObject) -> None:
    layout = _clone(data.draw(valid_layouts(max_tensors=2)), data.draw(st.integers(2, 5)))
    if data.draw(st.booleans()):
        layout = data.draw(mutation(layout))
    _check_verdict(layout)


# ---- from_fragments: unchecked parts == checked parts ------------------------------------------


@SETTINGS
@given(any_layouts())
def test_from_fragments_agrees_with_oracle_and_checked_parts(layout: Layout) -> None:
    placement = _check_verdict(layout)
    if placement is None:
        return
    checked = tuple(
        WeightPlacementPart(
            **{name: getattr(part, name) for name in part.__dataclass_fields__}
        )
        for part in placement.parts
    )
    for fast, slow in zip(placement.parts, checked):
        assert fast == slow
        assert list(field_state(fast)) == list(field_state(slow))
        assert field_state(fast) == field_state(slow)
    rebuilt = WeightPlacementManifest(
        resource_id=placement.resource_id,
        revision=placement.revision,
        weight_generation=placement.weight_generation,
        placement_set_id=placement.placement_set_id,
        topology=placement.topology,
        parts=checked,
    )
    assert rebuilt == placement
    assert rebuilt.placement_id == placement.placement_id


# ---- canonical JSON of fragments in C ----------------------------------------------------------


@SETTINGS
@given(valid_layouts())
def test_canonical_fragment_json_is_the_dict_encoding(layout: Layout) -> None:
    placement = build_placement(layout)
    fragments = placement.fragments
    assert _native.canonical_fragments_json(fragments) == _native.canonical_json(
        [fragment_object(f) for f in fragments]
    )
    assert _native.canonical_fragments_json(list(fragments)) == _native.canonical_json(
        [fragment_object(f) for f in fragments]
    )
    payload = {
        "resource_kind": "model_weight",
        "resource_id": placement.resource_id,
        "revision": placement.revision,
        "weight_generation": placement.weight_generation,
        "placement_set_id": placement.placement_set_id,
        "placement_id": placement.placement_id,
        "topology": oracles._topology_json(layout),
        "tensors": [oracles._tensor_json(t) for t in sorted(layout.tensors, key=lambda t: t.tensor_id)],
        "parts": [part_object(p.participant_id, p.rank, p.fragments) for p in placement.parts],
    }
    assert weight_placement_to_json(placement) == _native.canonical_json(payload)


def test_canonical_fragment_json_edge_values() -> None:
    fragments = [
        PlacementFragment(
            "t\u00e9\ud800",
            (0, 1),
            (2, 3),
            12,
            ParallelRank(dp=1, tp=2, pp=3, ep=4),
            pipeline_stage_id=7,
            aliases=("t\u00e9\ud800", 'a"b'),
        ),
        PlacementFragment("u", (0,), (2,), 2**63, ParallelRank(), placement_fragment_id="x\n\u2028"),
    ]
    for value in (fragments, tuple(fragments), [], ()):
        assert _native.canonical_fragments_json(value) == _native.canonical_json([fragment_object(f) for f in value])
    with pytest.raises(TypeError):
        _native.canonical_fragments_json(iter(fragments))  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        _native.canonical_fragments_json([1])  # type: ignore[list-item]
    broken = copy.copy(fragments[1])
    object.__delattr__(broken, "nbytes")
    with pytest.raises(KeyError):
        _native.canonical_fragments_json([broken])


def test_canonical_parts_json_shape_and_errors() -> None:
    fragment = PlacementFragment("u", (0,), (2,), 4, ParallelRank(tp=1))
    tail = _native.canonical_json({"participant_id": "p", "rank": {"dp": 0, "tp": 1, "pp": 0, "ep": 0}})
    expected = _native.canonical_json(
        [{"fragments": [fragment_object(fragment)], "participant_id": "p", "rank": {"dp": 0, "tp": 1, "pp": 0, "ep": 0}}] * 2
    )
    assert _native.canonical_parts_json([((fragment,), tail), ([fragment], tail)]) == expected
    assert _native.canonical_parts_json([]) == "[]"
    assert _native.canonical_parts_json([((fragment,), tail)], prefix="{\"a\":", suffix="}") == (
        '{"a":' + _native.canonical_json([{"fragments": [fragment_object(fragment)], "participant_id": "p",
                                            "rank": {"dp": 0, "tp": 1, "pp": 0, "ep": 0}}]) + "}"
    )
    single = _native.canonical_parts_json([((fragment,), tail)])
    assert _native.canonical_parts_json([((fragment,), tail)], prefix="x", suffix="y", sha256=True) == (
        _native.sha256_hex(("x" + single + "y").encode())
    )
    with pytest.raises(ValueError):
        _native.canonical_parts_json([], prefix="\u00e9")
    with pytest.raises(TypeError):
        _native.canonical_parts_json([], suffix=b"x")  # type: ignore[arg-type]
    for bad in ([((fragment,), "{}")], [((fragment,), "x")], [((fragment,), '{"\u00e9":1}'.encode().decode("unicode_escape"))]):
        with pytest.raises(ValueError):
            _native.canonical_parts_json(bad)
    for bad_type in ([((fragment,), 1)], [(fragment,)], [(iter([fragment]), tail)]):
        with pytest.raises(TypeError):
            _native.canonical_parts_json(bad_type)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        _native.canonical_parts_json(((fragment,), tail))  # type: ignore[arg-type]


# ---- the cached table ---------------------------------------------------------------------------


@SETTINGS
@given(valid_layouts())
def test_table_is_cached_and_never_pickled(layout: Layout) -> None:
    placement = build_placement(layout)
    table = field_state(placement).get("_fragment_table")
    assert table is not None and placement._fragments_table() is table
    assert len(table) == len(placement.fragments)
    state = placement.__getstate__()
    assert "_fragment_table" not in state
    clone = pickle.loads(pickle.dumps(placement))
    assert "_fragment_table" not in field_state(clone)
    assert clone == placement
    rebuilt = clone._fragments_table()
    assert rebuilt is not None and len(rebuilt) == len(placement.fragments)
    assert rebuilt.duplicate_logical_fragment() == -1
    assert rebuilt.overlapping_rank_group() == -1
    assert rebuilt.bad_geometry([t.itemsize for t in clone.tensors]) == -1
    assert "_fragment_table" not in copy.copy(placement).__dict__


def _table_summary(table: Any, tensors: Sequence[Any]) -> tuple[Any, ...]:
    """Everything a FragmentTable answers about itself; a query that raises gives its message."""
    itemsizes = [t.itemsize for t in tensors]

    def safe(fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except ValueError as exc:
            return str(exc)

    return (
        len(table),
        table.total_nbytes(),
        table.bad_geometry(itemsizes),
        table.duplicate_logical_fragment(),
        safe(table.overlapping_rank_group),
        safe(table.uncovered_group, ("dp", "tp", "pp", "ep")),
        table.tensor_classes([0] * len(tensors)),
    )


def _geometry_oracle(shapes: list[tuple[int, ...]], itemsizes: list[int], rows: list[Any]) -> int:
    for i, (t, offset, shape, nbytes) in enumerate(rows):
        full = shapes[t]
        if len(offset) != len(full):
            return i
        volume = itemsizes[t]
        for begin, extent, size in zip(offset, shape, full):
            if extent < 1 or begin + extent > size:
                return i
            volume *= extent
        if volume != nbytes:
            return i
    return -1


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_bad_geometry_matches_oracle(data: st.DataObject) -> None:
    ntensors = data.draw(st.integers(1, 3))
    shapes = [tuple(data.draw(st.lists(st.integers(1, 6), min_size=1, max_size=3))) for _ in range(ntensors)]
    itemsizes = [data.draw(st.sampled_from([1, 2, 4, 2**62])) for _ in range(ntensors)]
    rows = []
    for _ in range(data.draw(st.integers(0, 6))):
        t = data.draw(st.integers(0, ntensors - 1))
        ndim = data.draw(st.sampled_from([len(shapes[t]), len(shapes[t]), 1, 2]))
        offset = tuple(data.draw(st.integers(0, 6)) for _ in range(ndim))
        shape = tuple(data.draw(st.integers(0, 6)) for _ in range(ndim))
        volume = itemsizes[t]
        for extent in shape:
            volume *= extent
        nbytes = data.draw(st.sampled_from([volume, volume + 1, 2**64 - 1])) % 2**64
        rows.append((t, offset, shape, nbytes))
    table = _native.pack_fragments(
        shapes,
        [r[0] for r in rows],
        [r[1] for r in rows],
        [r[2] for r in rows],
        [(0, 0, 0, 0)] * len(rows),
        [r[3] for r in rows],
    )
    assert table.bad_geometry(itemsizes) == _geometry_oracle(shapes, itemsizes, rows)


def test_bad_geometry_argument_errors() -> None:
    table = _native.pack_fragments([(4,)], [0], [(0,)], [(4,)], [(0, 0, 0, 0)], [4])
    assert table.bad_geometry([1]) == -1
    assert table.bad_geometry((2,)) == 0
    with pytest.raises(ValueError, match="one entry per tensor"):
        table.bad_geometry([1, 1])
    with pytest.raises(ValueError):
        table.bad_geometry([0])
    with pytest.raises(ValueError):
        table.bad_geometry([2**64])
    with pytest.raises(TypeError):
        table.bad_geometry(["1"])
    with pytest.raises(TypeError):
        table.bad_geometry(5)


# ---- pack_objects and tensor_classes -----------------------------------------------------------


def _rank_row(rank: Any) -> tuple[int, int, int, int]:
    return (rank.dp, rank.tp, rank.pp, rank.ep)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_tensor_classes_match_python_grouping(data: st.DataObject) -> None:
    ntensors = data.draw(st.integers(1, 6))
    shapes = [(4, 4)] * ntensors
    classes = [data.draw(st.integers(0, 1)) for _ in range(ntensors)]
    pool = [((o, 0), (1, 4), (0, tp, 0, 0)) for o in range(4) for tp in range(2)] + [((0, 0), (4, 4), (1, 0, 0, 0))]
    rows = []
    for t in range(ntensors):
        for box in data.draw(st.lists(st.sampled_from(pool), max_size=4, unique=True)):
            rows.append((t, box))
    rows = data.draw(st.permutations(rows))
    fragments = [
        PlacementFragment(f"t{t}", offset, shape, 2 * shape[0] * shape[1], ParallelRank(*rank))
        for t, (offset, shape, rank) in rows
    ]
    index = {f"t{t}": t for t in range(ntensors)}
    table = _native.FragmentTable.pack_objects(shapes, index, fragments)[0]
    rep, start, members = table.tensor_classes(classes)
    groups = [[i for i, (t, _) in enumerate(rows) if t == u] for u in range(ntensors)]
    assert [members[start[u] : start[u + 1]] for u in range(ntensors)] == groups
    sets = [frozenset(rows[i][1] for i in group) for group in groups]
    for u in range(ntensors):
        same = [w for w in range(u) if groups[w] and classes[w] == classes[u] and sets[w] == sets[u]]
        if not groups[u] or not same:
            assert rep[u] == u
        else:
            assert rep[u] in same  # the first of its kind that is itself a representative
            assert rep[rep[u]] == rep[u]
    with pytest.raises(ValueError):
        table.tensor_classes(classes + [0])
    with pytest.raises(ValueError):
        table.tensor_classes([-1] * ntensors)


@SETTINGS
@given(any_layouts())
def test_pack_objects_equals_pack_fragments(layout: Layout) -> None:
    try:
        tensors, fragments = _inputs(layout)
    except ValueError:
        return
    index = {t.tensor_id: i for i, t in enumerate(tensors)}
    if len(index) != len(tensors) or any(f.tensor_id not in index for f in fragments):
        with pytest.raises(KeyError):
            _native.FragmentTable.pack_objects([t.global_shape for t in tensors], index, fragments)
        return
    shapes = [t.global_shape for t in tensors]
    a, increasing, any_aliases = _native.FragmentTable.pack_objects(shapes, index, list(fragments))
    ids = [f.placement_fragment_id for f in fragments]
    assert increasing == all(x < y for x, y in zip(ids, ids[1:]))
    assert any_aliases == any(f.aliases for f in fragments)
    _, reverse_increasing, _ = _native.FragmentTable.pack_objects(shapes, index, fragments[::-1])
    assert reverse_increasing == (len(fragments) < 2)
    b = _native.pack_fragments(
        shapes,
        [index[f.tensor_id] for f in fragments],
        [f.global_offset for f in fragments],
        [f.local_shape for f in fragments],
        [_rank_row(f.rank) for f in fragments],
        [f.nbytes for f in fragments],
    )
    assert _table_summary(a, tensors) == _table_summary(b, tensors)


def test_pack_objects_errors() -> None:
    fragment = PlacementFragment("a", (0,), (2,), 2, ParallelRank())
    with pytest.raises(KeyError):
        _native.FragmentTable.pack_objects([(2,)], {"b": 0}, [fragment])
    with pytest.raises(ValueError, match="tensor_index out of range"):
        _native.FragmentTable.pack_objects([(2,)], {"a": 1}, [fragment])
    with pytest.raises(TypeError):
        _native.FragmentTable.pack_objects([(2,)], [("a", 0)], [fragment])  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        _native.FragmentTable.pack_objects([(2,)], {"a": 0}, [1])
    broken = copy.copy(fragment)
    object.__delattr__(broken, "rank")
    with pytest.raises(KeyError):
        _native.FragmentTable.pack_objects([(2,)], {"a": 0}, [broken])
    table, increasing, any_aliases = _native.FragmentTable.pack_objects([(2,)], {"a": 0}, ())
    assert len(table) == 0 and increasing and not any_aliases
    with pytest.raises(TypeError):
        _native.FragmentTable.pack_objects([(2,)], {"a": 0}, [_forged(fragment, tensor_id=_Str("a"))])
    table, increasing, any_aliases = _native.FragmentTable.pack_objects(
        [(2,)], {"a": 0}, [_forged(fragment, aliases=["b"]), _forged(fragment, placement_fragment_id=_Str("x"))]
    )
    assert any_aliases and not increasing and len(table) == 2


class _Str(str):
    pass


def _forged(fragment: Any, **changes: Any) -> Any:
    forged = copy.copy(fragment)
    for name, value in changes.items():
        object.__setattr__(forged, name, value)
    return forged


# ---- a larger deterministic layout --------------------------------------------------------------


def test_many_experts_layout_assembles_like_the_oracle() -> None:
    """An EP x TP expert layout with 96 tensors: memo hits, several parts, sorted output."""
    from layout_model import AxisSpec, Coord, FragmentSpec, TensorSpec, full_participants

    participants = full_participants(4, 1, 2, 1)
    tensors = []
    fragments = []
    for expert in range(48):
        for matrix, (shape, dim) in {"w1": ((8, 12), 0), "w2": ((12, 8), 1)}.items():
            tensor_id = f"experts.{expert}.{matrix}"
            tensors.append(
                TensorSpec(tensor_id, shape, (AxisSpec("ownership", "ep"), AxisSpec("split", "tp", dim)), expert_id=expert)
            )
            for tp in range(4):
                step = shape[dim] // 4
                offset = tuple(tp * step if d == dim else 0 for d in range(2))
                local = tuple(step if d == dim else shape[d] for d in range(2))
                fragments.append(FragmentSpec(tensor_id, offset, local, Coord(tp=tp, ep=expert % 2)))
    layout = Layout(sizes=(4, 1, 2, 1), participants=participants, tensors=tuple(tensors), fragments=tuple(fragments))
    placement = _check_verdict(layout)
    assert placement is not None
    assert len(placement.fragments) == 48 * 2 * 4
    # one fragment moved to the other EP owner: the memo must not hide it
    bad = list(fragments)
    bad[-1] = dataclasses.replace(bad[-1], rank=Coord(tp=bad[-1].rank.tp, ep=1 - bad[-1].rank.ep))
    assert _check_verdict(dataclasses.replace(layout, fragments=tuple(bad))) is None


def test_from_fragments_restores_gc_state() -> None:
    import gc

    from layout_model import Coord, FragmentSpec, TensorSpec, full_participants

    layout = Layout(
        sizes=(1, 1, 1, 1),
        participants=full_participants(1, 1, 1, 1),
        tensors=(TensorSpec("w", (4,), ()),),
        fragments=(FragmentSpec("w", (0,), (4,), Coord()),),
    )
    gap = dataclasses.replace(layout, fragments=(FragmentSpec("w", (0,), (2,), Coord()),))
    was = gc.isenabled()
    try:
        for enabled in (True, False):
            (gc.enable if enabled else gc.disable)()
            assert build_placement(layout).placement_id == oracles.placement_id(layout)
            assert gc.isenabled() is enabled
            with pytest.raises(ValueError, match="not fully covered"):
                build_placement(gap)
            assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


# ---- issue 5, round 2: C sort by str keys, direct table fill, the pre-sorted assembly ----------


_KEY_ALPHABET = st.sampled_from(["a", "b", "\x00", "\x7f", "é", "中", "\U0001f600", "sha256:", "0", "f"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(_KEY_ALPHABET, max_size=12).map("".join), max_size=40))
def test_sorted_by_str_keys_is_a_stable_sort(keys: list[str]) -> None:
    items = [object() for _ in keys]
    expected = [items[i] for i in sorted(range(len(keys)), key=keys.__getitem__)]
    got = _native.sorted_by_str_keys(items, keys)
    assert got is not None
    assert [id(x) for x in got] == [id(x) for x in expected]


def test_sorted_by_str_keys_declines_other_keys() -> None:
    assert _native.sorted_by_str_keys([1, 2], ["a", 3]) is None
    assert _native.sorted_by_str_keys([1, 2], ["a", _Str("b")]) is None
    assert _native.sorted_by_str_keys([1], ["\udc80"]) is None  # not encodable
    assert _native.sorted_by_str_keys([], []) == []
    with pytest.raises(ValueError):
        _native.sorted_by_str_keys([1, 2], ["a"])
    with pytest.raises(TypeError):
        _native.sorted_by_str_keys((1,), ["a"])  # type: ignore[arg-type]


def test_pack_objects_more_fragment_dims_than_tensor_dims() -> None:
    """The direct fill declines a fragment with more dimensions than every tensor: the column
    path packs it exactly like pack_fragments."""
    fragments = [
        PlacementFragment("a", (0,), (2,), 4, ParallelRank()),
        PlacementFragment("a", (0, 0), (2, 1), 4, ParallelRank(tp=1)),
    ]
    table, increasing, any_aliases = _native.FragmentTable.pack_objects([(2,)], {"a": 0}, fragments)
    reference = _native.pack_fragments(
        [(2,)], [0, 0], [(0,), (0, 0)], [(2,), (2, 1)], [(0, 0, 0, 0), (0, 1, 0, 0)], [4, 4]
    )
    assert len(table) == len(reference) == 2
    assert table.bad_geometry([2]) == reference.bad_geometry([2]) == 1
    assert table.total_nbytes() == reference.total_nbytes()
    assert any_aliases is False


@SETTINGS
@given(valid_layouts())
def test_from_fragments_takes_the_presorted_path(layout: Layout) -> None:
    """from_fragments hands the manifest its one sorted order; the result equals the public
    constructor's (which merges and sorts the parts itself), and the path really runs."""
    from mooncake.reshard.weight import placement as placement_module

    calls: list[Any] = []
    real = placement_module._initialize

    def spy(self: Any, **kwargs: Any) -> None:
        calls.append(kwargs["assembled"])
        real(self, **kwargs)

    placement_module._initialize = spy
    try:
        try:
            placement = build_placement(layout, reverse=True)
        except ValueError:
            return
    finally:
        placement_module._initialize = real
    assert calls and calls[0] is not None and calls[0][2] is not None
    rebuilt = WeightPlacementManifest(
        resource_id=placement.resource_id,
        revision=placement.revision,
        weight_generation=placement.weight_generation,
        placement_set_id=placement.placement_set_id,
        topology=placement.topology,
        parts=placement.parts,
    )
    assert rebuilt.fragments == placement.fragments
    assert [id(f) for f in rebuilt.fragments] == [id(f) for f in placement.fragments]
    assert rebuilt.tensors == placement.tensors
    assert rebuilt.placement_id == placement.placement_id
    for part in placement.parts:
        ids = [f.placement_fragment_id for f in part.fragments]
        assert ids == sorted(ids)


@SETTINGS
@given(any_layouts(), st.randoms(use_true_random=False))
def test_pack_objects_with_rows_equals_packing_in_row_order(layout: Layout, rnd: Any) -> None:
    try:
        tensors, fragments = _inputs(layout)
    except ValueError:
        return
    index = {t.tensor_id: i for i, t in enumerate(tensors)}
    if len(index) != len(tensors) or any(f.tensor_id not in index for f in fragments):
        return
    shapes = [t.global_shape for t in tensors]
    rows = list(range(len(fragments)))
    rnd.shuffle(rows)
    source = [None] * len(fragments)
    for i, row in enumerate(rows):
        source[i] = fragments[row]
    a, inc_a, alias_a = _native.FragmentTable.pack_objects(shapes, index, source, rows)
    b, inc_b, alias_b = _native.FragmentTable.pack_objects(shapes, index, list(fragments))
    assert (inc_a, alias_a) == (inc_b, alias_b)
    assert _table_summary(a, tensors) == _table_summary(b, tensors)


def test_pack_objects_rows_must_be_a_permutation() -> None:
    fragments = [
        PlacementFragment("a", (0,), (1,), 2, ParallelRank()),
        PlacementFragment("a", (1,), (1,), 2, ParallelRank()),
    ]
    for rows in ([0, 0], [0], [0, 2], [-1, 0], [0, True], (0, 1)):
        with pytest.raises((ValueError, TypeError)):
            _native.FragmentTable.pack_objects([(2,)], {"a": 0}, fragments, rows)
    # ids decreasing in row order are reported so
    _, increasing, _ = _native.FragmentTable.pack_objects([(2,)], {"a": 0}, fragments, [1, 0])
    ids = [f.placement_fragment_id for f in fragments]
    assert increasing == (ids[1] < ids[0])
    # a fragment with more dimensions than every tensor: the column path, in row order
    wide = [fragments[0], PlacementFragment("a", (0, 0), (2, 1), 4, ParallelRank(tp=1))]
    table, _, _ = _native.FragmentTable.pack_objects([(2,)], {"a": 0}, wide, [1, 0])
    assert table.bad_geometry([2]) == 0


def test_sorted_by_str_keys_rows() -> None:
    keys = ["b", "a", "c", "a"]
    items = [10, 11, 12, 13]
    ordered, rows = _native.sorted_by_str_keys(items, keys, True)
    assert ordered == [11, 13, 10, 12]
    assert rows == [2, 0, 3, 1]
    assert all(ordered[rows[i]] == items[i] for i in range(4))

"""from_fragments' tensor index as the pair (ids, positions) of tuples instead of
``dict(zip(tensor_ids, rows))``: ``sorted_by_str_keys(..., index=True)`` makes the pair and says
whether the ids are distinct (the old ``len(dict) != len(catalog)`` test); ``assembly_columns`` and
``FragmentTable.pack_objects`` take the pair where they took the dict and give what they gave for
``dict(zip(ids, positions))`` (looked up by identity; the dict made only when an id is an equal but
distinct str or unknown). The old Python expressions are the oracle."""

from __future__ import annotations

import dataclasses
import random
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from oracles import assembly_columns
from test_asm11_tensor_index_memo import _RANKS, _copy, _fragments, _pack, _pack_oracle

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import _workloads as w  # noqa: E402

from mooncake.reshard import _native  # noqa: E402
from mooncake.reshard.weight import PlacementFragment, TensorDescriptor, WeightPlacementManifest  # noqa: E402
from mooncake.reshard.weight import placement as placement_module  # noqa: E402


_keys = st.lists(st.text(alphabet="ab.1é", max_size=4), max_size=60)


@settings(max_examples=80, deadline=None)
@given(_keys)
def test_index_form_matches_the_old_expressions(keys: list[str]) -> None:
    items = [object() for _ in keys]
    ordered, rows = _native.sorted_by_str_keys(list(items), list(keys), True)
    got = _native.sorted_by_str_keys(list(items), list(keys), True, False, True)
    assert got is not None
    got_ordered, (ids, positions), distinct = got
    assert got_ordered == ordered and all(a is b for a, b in zip(got_ordered, ordered))
    assert type(ids) is tuple and type(positions) is tuple
    assert ids == tuple(keys) and all(a is b for a, b in zip(ids, keys))
    assert positions == tuple(rows)
    # the old duplicate test
    assert distinct is (len(dict(zip(keys, rows))) == len(ordered))


def test_index_form_declines_and_refuses_as_before() -> None:
    class _Str(str):
        pass

    assert _native.sorted_by_str_keys([1, 2], ["a", _Str("b")], True, False, True) is None
    assert _native.sorted_by_str_keys([1], ["\ud800"], True, False, True) is None
    with pytest.raises(ValueError, match="index needs rows"):
        _native.sorted_by_str_keys([1], ["a"], False, False, True)
    with pytest.raises(ValueError, match="packed and index exclude each other"):
        _native.sorted_by_str_keys([1], ["a"], True, True, True)
    assert _native.sorted_by_str_keys([], [], True, False, True) == ([], ((), ()), True)


_runs = st.lists(st.tuples(st.integers(0, 5), st.integers(1, 12), st.booleans()), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None)
@given(_runs, st.integers(0, 2**32), st.booleans())
def test_pair_lookups_equal_the_dicts(runs: list[tuple[int, int, bool]], seed: int, unknown: bool) -> None:
    rng = random.Random(seed)
    names = [f"layers.{k}.w" for k in range(6)]
    # runs of one id object and of equal but distinct copies (the pair's dict answers those)
    ids: list[str] = []
    for pick, length, copies in runs:
        ids.extend(_copy(names[pick]) if copies else names[pick] for _ in range(length))
    fragments = _fragments(ids)
    keys = sorted(set(ids), key=names.index)
    keys = [names[names.index(k)] for k in keys]  # the key objects themselves
    rng.shuffle(keys)
    if unknown and len(keys) > 1:
        keys.pop(rng.randrange(len(keys)))
    positions = tuple(rng.sample(range(len(keys)), len(keys)))
    pair = (tuple(keys), positions)
    index = dict(zip(keys, positions))
    ntensors = len(keys)
    rows = list(range(len(fragments)))
    rng.shuffle(rows)
    for given_rows in (None, rows):
        want = _pack_oracle(index, fragments, given_rows, ntensors)
        assert _pack(pair, fragments, given_rows, ntensors) == want  # type: ignore[arg-type]
        assert _pack(index, fragments, given_rows, ntensors) == want
    groups = {rank: g for g, rank in enumerate(_RANKS)}
    got = _native.assembly_columns(tuple(fragments), PlacementFragment, pair, groups)
    assert got == _native.assembly_columns(tuple(fragments), PlacementFragment, index, groups)
    if set(ids) <= set(keys):
        want_columns = assembly_columns(fragments, index, groups)
        assert got == want_columns
        assert all(a is b for a, b in zip(got[0], want_columns[0]))  # the pair's own int objects
    else:
        assert got is None


@pytest.mark.parametrize(
    "pair",
    [
        (["a"], (0,)),  # a list, not a tuple
        (("a",), [0]),
        (("a", "b"), (0,)),  # lengths differ
        ((b"a",), (0,)),  # not a str
        (("a",), (1,)),  # out of range
        (("a",), (-1,)),
        (("a",), (True,)),  # not an exact int
        (("a",), (2**70,)),
    ],
)
def test_malformed_pairs(pair: Any) -> None:
    fragments = _fragments(["a"])
    groups = {rank: g for g, rank in enumerate(_RANKS)}
    assert _native.assembly_columns(tuple(fragments), PlacementFragment, pair, groups) is None
    with pytest.raises(ValueError, match="tensor index pair"):
        _native.FragmentTable.pack_objects([(4,)], pair, fragments, None, PlacementFragment)


def test_neither_dict_nor_pair() -> None:
    fragments = _fragments(["a"])
    groups = {rank: g for g, rank in enumerate(_RANKS)}
    for index in (("a", 0, 1), [("a", 0)], None):
        with pytest.raises(TypeError, match="dict or an \\(ids, positions\\) pair"):
            _native.assembly_columns(tuple(fragments), PlacementFragment, index, groups)
        with pytest.raises(TypeError, match="dict or an \\(ids, positions\\) pair"):
            _native.FragmentTable.pack_objects([(4,)], index, fragments, None, PlacementFragment)


def test_pack_objects_column_path_with_a_pair() -> None:
    # a fragment with more dimensions than every tensor takes the column path (its dict made
    # from the pair): the result is the one the dict gives
    fragments = [
        PlacementFragment("a", (0, 0), (1, 1), 2, _RANKS[0], placement_fragment_id="f"),
        PlacementFragment(_copy("a"), (1,), (1,), 2, _RANKS[1], placement_fragment_id="g"),
    ]
    results = []
    for index in ({"a": 0}, (("a",), (0,))):
        table, increasing, aliases = _native.FragmentTable.pack_objects([(4,)], index, fragments, [1, 0], PlacementFragment)
        results.append((len(table), table.tensor_classes([0]), increasing, aliases, table.bad_geometry([1])))
    assert results[0] == results[1]


class _Descriptor(TensorDescriptor):
    pass


def _assemble(side: Any, tensors: tuple[Any, ...], fragments: Any = None) -> WeightPlacementManifest:
    return WeightPlacementManifest.from_fragments(
        resource_id=w.RESOURCE_ID, revision=w.REVISION, weight_generation=w.WEIGHT_GENERATION,
        placement_set_id=side.placement_set_id, topology=side.topology, tensors=tensors,
        fragments=side.fragments if fragments is None else fragments,
    )


def _error(fn: Any) -> Any:
    try:
        fn()
    except Exception as error:
        return type(error), str(error)
    return None


@pytest.mark.parametrize("case", ["plain", "subclass", "copies", "duplicate", "duplicate-copy", "non-str"])
def test_from_fragments_as_with_the_dict(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    side = w.independent_experts(layers=1, experts=48).target
    tensors = list(side.tensors)
    fragments = list(side.fragments)
    if case == "subclass":
        tensors[3] = _Descriptor(**tensors[3].__dict__)
    elif case == "copies":  # fragments naming their tensor by an equal but distinct str
        fragments = [
            dataclasses.replace(f, tensor_id=_copy(f.tensor_id)) if k % 3 == 0 else f
            for k, f in enumerate(fragments)
        ]
    elif case == "duplicate":
        tensors.append(tensors[5])
    elif case == "duplicate-copy":
        tensors.append(TensorDescriptor(**{**tensors[5].__dict__, "tensor_id": _copy(tensors[5].tensor_id)}))
    elif case == "non-str":
        forged = object.__new__(TensorDescriptor)
        forged.__dict__.update({**tensors[2].__dict__, "tensor_id": 7})
        tensors[2] = forged
    new = _error(lambda: _assemble(side, tuple(tensors), tuple(fragments)))
    placement = None if new is not None else _assemble(side, tuple(tensors), tuple(fragments))

    # the old form: the dict built in Python from the rows
    def old_indexed(tensor_items: Any, fragment_items: Any, topology: Any) -> Any:
        try:
            tensor_ids = list(map(placement_module._tensor_id_of, tensor_items))
        except Exception:
            return None
        native = _native.sorted_by_str_keys(list(tensor_items), tensor_ids, True)
        if native is None:
            return None
        ordered, rows = native
        sorted_tensors = tuple(ordered)
        tensor_position = dict(zip(tensor_ids, rows))
        if len(tensor_position) != len(sorted_tensors):
            return None
        group_of_rank, participant_groups = placement_module._rank_groups(topology)
        result = _native.assembly_columns(fragment_items, PlacementFragment, tensor_position, group_of_rank)
        if result is None:
            return None
        positions, groups, keys, referenced = result
        if referenced != len(sorted_tensors):
            return None
        exact = set(map(type, tensor_items)) == {TensorDescriptor}
        columns = (positions, groups, keys, sorted_tensors, group_of_rank, participant_groups)
        return columns, (tensor_position if exact else None)

    new_indexed = placement_module._assembly_columns_indexed(tuple(tensors), tuple(fragments), side.topology)
    old = old_indexed(tuple(tensors), tuple(fragments), side.topology)
    assert (new_indexed is None) == (old is None)
    if old is not None:
        assert new_indexed[0] == old[0]
        assert (new_indexed[1] is None) == (old[1] is None)
        if old[1] is not None:
            ids, positions = new_indexed[1]
            assert dict(zip(ids, positions)) == old[1] and len(ids) == len(old[1])
    monkeypatch.setattr(placement_module, "_assembly_columns_indexed", old_indexed)
    assert _error(lambda: _assemble(side, tuple(tensors), tuple(fragments))) == new
    if placement is not None:
        again = _assemble(side, tuple(tensors), tuple(fragments))
        assert again == placement and again.digest == placement.digest
    if case.startswith("duplicate"):
        assert new == (ValueError, "duplicate tensor_id in placement tensors")


# ---- tensor_shape_columns: the packing's shapes and itemsizes in one C pass ---------------------


def _maps(tensors: Any) -> Any:
    return [t.global_shape for t in tensors], [t.itemsize for t in tensors]


def test_tensor_shape_columns_equal_the_maps() -> None:
    tensors = tuple(w.independent_experts(layers=1, experts=48).target.tensors)
    for count in (0, 1, 7, 8, 9, 17, len(tensors)):
        part = tensors[:count]
        got = _native.tensor_shape_columns(part, TensorDescriptor)
        want = _maps(part)
        assert got == want
        assert all(a is b for a, b in zip(got[0], want[0])) and all(a is b for a, b in zip(got[1], want[1]))


def test_tensor_shape_columns_decline() -> None:
    tensors = list(w.independent_experts(layers=1, experts=48).target.tensors)
    sub = list(tensors)
    sub[9] = _Descriptor(**tensors[9].__dict__)
    missing = object.__new__(TensorDescriptor)
    missing.__dict__.update({k: v for k, v in tensors[3].__dict__.items() if k != "itemsize"})
    odd_key = object.__new__(TensorDescriptor)
    odd_key.__dict__.update(tensors[3].__dict__)
    odd_key.__dict__[1] = "x"
    for bad in (sub, tensors[:3] + [missing], tensors[:10] + [odd_key], tensors[:2] + [object()]):
        assert _native.tensor_shape_columns(tuple(bad), TensorDescriptor) is None
    with pytest.raises(TypeError):
        _native.tensor_shape_columns(list(tensors), TensorDescriptor)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="tensor_type must be a class"):
        _native.tensor_shape_columns(tuple(tensors), 3)  # type: ignore[arg-type]


@pytest.mark.parametrize("case", ["plain", "subclass", "no-itemsize", "no-shape", "list"])
def test_fast_checks_as_with_the_maps(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from mooncake.reshard.weight import validation

    placement = _assemble(w.independent_experts(layers=1, experts=48).target, w.independent_experts(
        layers=1, experts=48).target.tensors)
    tensors: Any = list(placement.tensors)
    fragments = placement.fragments
    if case == "subclass":
        tensors[4] = _Descriptor(**tensors[4].__dict__)
    elif case in ("no-itemsize", "no-shape"):
        forged = object.__new__(TensorDescriptor)
        drop = "itemsize" if case == "no-itemsize" else "global_shape"
        forged.__dict__.update({k: v for k, v in tensors[4].__dict__.items() if k != drop})
        tensors[4] = forged
    tensors = tensors if case == "list" else tuple(tensors)

    def run() -> Any:
        try:
            table = validation.fast_placement_checks(tensors, fragments, check_alias_groups=True)
        except Exception as error:
            return type(error), str(error)
        return None if table is None else (len(table), table.bad_geometry([1] * len(tensors)))

    new = run()
    monkeypatch.setattr(validation._native, "tensor_shape_columns", lambda *args: None)
    assert run() == new
    if case in ("plain", "subclass", "list"):
        assert new is not None and new[0] == len(fragments)


# ---- the pair's table by key address ------------------------------------------------------------


@pytest.mark.parametrize("count", [5, 33, 300])
@pytest.mark.parametrize("order", ["made", "shuffled", "reversed"])
def test_pair_by_address_any_order(count: int, order: str) -> None:
    rng = random.Random(count)
    names = [_copy(f"t.{k}.w") for k in range(count)]  # made in order: addresses mostly increasing
    keys = list(names)
    if order == "shuffled":
        rng.shuffle(keys)
    elif order == "reversed":
        keys.reverse()
    positions = tuple(rng.sample(range(count), count))
    pair, index = (tuple(keys), positions), dict(zip(keys, positions))
    ids = [names[rng.randrange(count)] for _ in range(3 * count)] + [_copy(names[0])]
    fragments = _fragments(ids)
    rows = list(range(len(fragments)))
    rng.shuffle(rows)
    for given_rows in (None, rows):
        assert _pack(pair, fragments, given_rows, count) == _pack_oracle(index, fragments, given_rows, count)  # type: ignore[arg-type]
    groups = {rank: g for g, rank in enumerate(_RANKS)}
    got = _native.assembly_columns(tuple(fragments), PlacementFragment, pair, groups)
    want = assembly_columns(fragments, index, groups)
    assert got == want and all(a is b for a, b in zip(got[0], want[0]))


def test_pair_with_one_object_twice_as_a_dict() -> None:
    # not what from_fragments passes (its ids are distinct), but the later entry wins as in a dict
    name = _copy("t.0.w")
    pair = ((name, name), (0, 1))
    fragments = _fragments([name, name])
    groups = {rank: g for g, rank in enumerate(_RANKS)}
    got = _native.assembly_columns(tuple(fragments), PlacementFragment, pair, groups)
    assert got == assembly_columns(fragments, dict(zip(*pair)), groups)
    assert _pack(pair, fragments, None, 2) == _pack_oracle(dict(zip(*pair)), fragments, None, 2)  # type: ignore[arg-type]

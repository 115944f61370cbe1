"""``_native.graph_typed``: the packed plan restore's placement-graph type check in C (session
18, PACKCHK). Its accept decision must imply the Python reference's (``placement.typed_graphs``)
for any forgery of the record's placements, and both accept the unforged records; a packed
plan whose graph C declines is still decided (and refused with the field rule's message) by
the Python path."""

from __future__ import annotations

import math
import os
import pickle
import random
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fuzz"))

import pickle_cases  # noqa: E402
from mooncake.reshard import _native  # noqa: E402
from mooncake.reshard.weight._planner import bound_pickle  # noqa: E402
from mooncake.reshard.weight.placement import WeightPlacementManifest, typed_graphs  # noqa: E402
from mooncake.reshard.weight.types import PlacementFragment  # noqa: E402


def _seed_records() -> list[tuple[str, tuple[Any, ...]]]:
    records = []
    for name, plan in pickle_cases.seed_plans():
        split = pickle_cases.split_pickle(pickle.dumps(plan, protocol=4))
        if split is None or split[0] != "_restore_transfer_plan":
            continue  # (a field-state seed)
        records.append((name, tuple(split[1])))
    assert records
    return records


def _unpacked(record: tuple[Any, ...]) -> tuple[Any, ...]:
    """The record as the packed restore sees it: rebuilt by ``graph_unpack`` (by field dict)."""
    packed = bound_pickle._graph_pack(record, bound_pickle._GRAPH_REGISTRY)
    assert packed is not None
    unpacked = bound_pickle._graph_unpack(packed[0], packed[1], bound_pickle._GRAPH_REGISTRY)
    assert type(unpacked) is tuple
    return unpacked


def _placements(record: tuple[Any, ...]) -> list[Any]:
    placements = [record[4]]
    if type(record[6]) is tuple:
        placements.extend(record[6][0::2])
    return list({id(placement): placement for placement in placements}.values())


def _both(placements: list[Any]) -> tuple[bool, bool]:
    c = _native.graph_typed(placements, bound_pickle._GRAPH_CLASSES)
    assert type(c) is bool
    if all(type(placement) is WeightPlacementManifest for placement in placements):
        try:
            python = typed_graphs([placement.__dict__ for placement in placements])
        except (TypeError, AttributeError):  # (a forged non-iterable: the reference refuses too)
            python = False
    else:
        python = False
    return c, python


_SEEDS = _seed_records()


@pytest.mark.parametrize("name, record", _SEEDS, ids=[name for name, _ in _SEEDS])
def test_unforged_records_are_accepted_by_both(name: str, record: tuple[Any, ...]) -> None:
    for placements in (_placements(record), _placements(_unpacked(record))):
        assert _both(placements) == (True, True)


# ------------------------------------------------------------------------------------------
# random forgeries of the graph: a field of one object replaced, deleted, or an item of one of
# its tuples replaced, by values of other types, subclasses, equal copies, other graph objects


class _Str(str):
    pass


class _Int(int):
    pass


class _Tuple(tuple):  # type: ignore[type-arg]
    pass


def _subclass_of(cls: type) -> type:
    return type(f"Sub{cls.__name__}", (cls,), {})


_SUBCLASSES = {cls: _subclass_of(cls) for cls in bound_pickle._GRAPH_CLASSES if cls is not PlacementFragment}


def _clone(obj: Any, cls: Any = None) -> Any:
    clone = object.__new__(cls or type(obj))
    clone.__dict__.update(obj.__dict__)
    return clone


def _copy_graph(placements: list[Any]) -> list[Any]:
    """A private copy of the placements' graph (every registered instance cloned, sharing kept)."""
    memo: dict[int, Any] = {}

    def copy(value: Any) -> Any:
        if type(value) is tuple:
            return tuple(copy(item) for item in value)
        if type(value) in bound_pickle._GRAPH_CLASSES and type(value) is not PlacementFragment:
            if id(value) not in memo:
                clone = object.__new__(type(value))
                memo[id(value)] = clone
                clone.__dict__.update({key: copy(item) for key, item in value.__dict__.items()})
            return memo[id(value)]
        return value

    return [copy(placement) for placement in placements]


def _graph_objects(placements: list[Any]) -> list[Any]:
    seen: dict[int, Any] = {}
    stack = list(placements)
    while stack:
        value = stack.pop()
        if type(value) is tuple:
            stack.extend(value)
        elif type(value) in bound_pickle._GRAPH_CLASSES and id(value) not in seen:
            seen[id(value)] = value
            if type(value) is not PlacementFragment:
                stack.extend(value.__dict__.values())
    return list(seen.values())


def _cycle() -> Any:
    box: list[Any] = []
    box.append(box)
    return box


def _replacement(rng: random.Random, value: Any, objects: list[Any]) -> Any:
    choices: list[Any] = [
        math.nan,
        1.0,
        {},
        _cycle(),
        b"x",
        None,
        True,
        "s",
        7,
        (),
        [value],
        (1, 2),
        ("x",),
        rng.choice(objects),
    ]
    if type(value) is str:
        choices += [_Str(value), value + "x", "".join(value)]
    if type(value) is int:
        choices += [_Int(value), value + 1, float(value)]
    if type(value) is tuple:
        choices += [_Tuple(value), list(value), value[:-1], value + value[-1:] if value else (1,)]
        if value:
            choices.append(tuple(reversed(value)))
    if type(value) in _SUBCLASSES:
        choices += [_clone(value, _SUBCLASSES[type(value)]), _clone(value)]
    if type(value) is PlacementFragment:
        choices.append(rng.choice(objects))
    return rng.choice(choices)


def _forge(rng: random.Random, placements: list[Any]) -> list[Any]:
    placements = _copy_graph(placements)
    objects = _graph_objects(placements)
    for _ in range(rng.randint(1, 3)):
        targets = [obj for obj in objects if type(obj) is not PlacementFragment and obj.__dict__]
        if not targets:
            break
        target = rng.choice(targets)
        state = target.__dict__
        key = rng.choice(sorted(state))
        action = rng.randrange(4)
        if action == 0:
            del state[key]
        elif action == 1 and type(state[key]) is tuple and state[key]:
            items = list(state[key])
            index = rng.randrange(len(items))
            items[index] = _replacement(rng, items[index], objects)
            state[key] = tuple(items)
        elif action == 2 and type(target) in _SUBCLASSES and rng.random() < 0.3:
            object.__setattr__(target, "__class__", _SUBCLASSES[type(target)])
        else:
            state[key] = _replacement(rng, state[key], objects)
    if rng.random() < 0.1:
        placements.append(rng.choice(objects))
    return placements


@settings(max_examples=400, deadline=None)
@given(st.integers(min_value=0, max_value=len(_SEEDS) - 1), st.booleans(), st.randoms(use_true_random=False))
def test_c_accepts_only_what_the_python_reference_accepts(seed: int, unpacked: bool, rng: random.Random) -> None:
    record = _SEEDS[seed][1]
    placements = _placements(_unpacked(record) if unpacked else record)
    forged = _forge(rng, placements)
    c, python = _both(forged)
    if c:
        assert python


def test_forgeries_are_declined_and_some_kept() -> None:
    # (the random forgeries above exercise both decisions: most decline, some still accept)
    rng = random.Random(18)
    decisions = []
    for index in range(600):
        placements = _placements(_SEEDS[index % len(_SEEDS)][1])
        c, python = _both(_forge(rng, placements))
        assert python or not c
        decisions.append(c)
    assert True in decisions and False in decisions


@pytest.mark.parametrize(
    "edit",
    [
        "part_tensor_equal_copy",
        "axis_subclass",
        "part_identity_equal_int_subclass",
        "participants_empty",
        "digest_not_str",
        "rank_missing_field",
    ],
)
def test_specific_declines(edit: str) -> None:
    record = _unpacked(_SEEDS[0][1])
    placements = _copy_graph(_placements(record))
    placement = placements[0]
    part = placement.parts[0]
    if edit == "part_tensor_equal_copy":
        part.__dict__["tensors"] = tuple(_clone(tensor) for tensor in part.tensors)
    elif edit == "axis_subclass":
        tensor = placement.tensors[0]
        axes = tensor.__dict__["parallel_axes"]
        tensor.__dict__["parallel_axes"] = tuple(_clone(axis, _SUBCLASSES[type(axis)]) for axis in axes)
    elif edit == "part_identity_equal_int_subclass":
        part.__dict__["weight_generation"] = _Int(part.weight_generation)
    elif edit == "participants_empty":
        placement.topology.__dict__["participants"] = ()
    elif edit == "digest_not_str":
        placement.__dict__["_digest_cache"] = 1
    elif edit == "rank_missing_field":
        del part.rank.__dict__["ep"]
    c, python = _both(placements)
    assert not c
    assert python == (edit == "axis_subclass")  # (an axis subclass: the Python rules accept it)


# ------------------------------------------------------------------------------------------
# through the packed restore (the forged packed records C declines and the Python rules refuse:
# test_forged_placement_types_r18's _load_packed cases)


@pytest.fixture(scope="module")
def seed_plan() -> Any:
    return dict(pickle_cases.seed_plans())["tp2-to-tp3"]


def test_packed_restore_round_trips(seed_plan: Any) -> None:
    restored = pickle.loads(pickle.dumps(seed_plan, protocol=5))
    assert restored == seed_plan


def test_graph_typed_refuses_bad_classes() -> None:
    with pytest.raises(TypeError):
        _native.graph_typed([], (WeightPlacementManifest,))
    with pytest.raises(TypeError):
        _native.graph_typed([], tuple([1] * 10))
    assert _native.graph_typed((), bound_pickle._GRAPH_CLASSES) is True
    assert _native.graph_typed({}, bound_pickle._GRAPH_CLASSES) is False
    assert _native.graph_typed([object()], bound_pickle._GRAPH_CLASSES) is False


def _immortal(obj: Any) -> bool:
    """An immortal object of CPython 3.12+ (the empty tuple, interned strings, small ints, ...):
    the interpreter no longer counts its references, while this abi3 extension (built with
    pre-3.12 inline reference counting) still does, so its count drifts and says nothing about a
    leak (nor can it free or leak the object). There are none up to 3.11."""
    is_immortal = getattr(sys, "_is_immortal", None)  # 3.14+
    if is_immortal is not None:
        return bool(is_immortal(obj))
    return sys.version_info >= (3, 12) and sys.getrefcount(obj) >= 1 << 30


def test_graph_typed_leaves_reference_counts_unchanged() -> None:
    # every value it reads and holds is released, on the accepting and the declining paths
    rng = random.Random(7)
    decisions = set()
    for index in range(120):
        placements = _placements(_unpacked(_SEEDS[index % len(_SEEDS)][1]))
        graph = _forge(rng, placements) if index % 3 else _copy_graph(placements)
        objects = _graph_objects(graph)
        values = [value for obj in objects if type(obj) is not PlacementFragment for value in obj.__dict__.values()]
        # (small ints, bools and None are shared with the whole interpreter)
        watched = [obj for obj in objects + values + graph if type(obj) is not bool and obj is not None]
        watched = [obj for obj in watched if type(obj) is not int or not -5 <= obj <= 256]
        watched = [obj for obj in watched if not _immortal(obj)]
        assert len(watched) > len(objects) // 2
        before = [sys.getrefcount(obj) for obj in watched]
        for _ in range(5):
            decision = _native.graph_typed(graph, bound_pickle._GRAPH_CLASSES)
        assert [sys.getrefcount(obj) for obj in watched] == before
        decisions.add(decision)
    assert decisions == {True, False}

"""PlacementFragment stored in a C-owned layout (issue 5, representation change step 5).

The class is a ``layout_dataclass`` (``mooncake_reshard/_layout.py``) on
``value_base("PlacementFragment", 8 fields)``: no instance ``__dict__``, the fields in slots read
by C with direct loads. Its public behaviour is the dict-backed class's: fields, ``__init__``
(validation, canonical id, messages), ``fragment_id``, ``repr``, ``==`` / ``hash``, ``replace``,
``asdict``, copies, frozen errors, weak references, subclassing, and pickles byte-equal to those
the dict-backed class wrote (``tests/data/placement_pickles_r17.json``, written by ``ecb3f9d``
with ``tests/data/make_placement_pickles_r17.py``), loading both ways (the packed
``_restore_placement_fragment`` call and the default dataclass form a reference pickle holds).
"""

from __future__ import annotations

import copy
import copyreg
import dataclasses
import gc
import importlib.util
import json
import pickle
import sys
import tracemalloc
import weakref
from pathlib import Path
from typing import Any

import pytest
from layout_classes import tuples_unshared, weakref_slot_bytes
from layout_classes import unshared_tuples_module  # noqa: F401 (autouse: the fixture pins unshared tuples)
from spec_helpers import field_state, forged_instance, store_state

from mooncake.reshard import _native
from mooncake.reshard._layout import layout_dataclass, layout_fields, layout_storer, value_base
from mooncake.reshard.weight import PlacementFragment, WeightPlacementManifest
from mooncake.reshard.weight import types as weight_types
from mooncake.reshard.weight._canonical import fragment_object
from mooncake.reshard.weight.types import ParallelRank

FIXTURE = json.loads((Path(__file__).parent / "data" / "placement_pickles_r17.json").read_text())
# what this build writes of the same objects (default dataclass pickling of the placement graph
# since session 66: tests/data/make_default_pickles_r66.py)
WRITTEN = json.loads((Path(__file__).parent / "data" / "default_pickles_r66.json").read_text())["placement_pickles_r17"]
NAMES = tuple(f.name for f in dataclasses.fields(PlacementFragment))

_spec = importlib.util.spec_from_file_location(
    "make_placement_pickles_r17", Path(__file__).parent / "data" / "make_placement_pickles_r17.py"
)
assert _spec is not None and _spec.loader is not None
_maker = importlib.util.module_from_spec(_spec)
with tuples_unshared():
    _spec.loader.exec_module(_maker)
PROTOCOLS = range(pickle.HIGHEST_PROTOCOL + 1)


def _rank() -> ParallelRank:
    return ParallelRank(dp=1, tp=2, pp=0, ep=3)


def test_layout_is_pinned_to_the_dataclass_fields() -> None:
    assert NAMES == weight_types._FRAGMENT_FIELDS == layout_fields(PlacementFragment)
    assert _native.layout_check(PlacementFragment, NAMES) is True
    assert PlacementFragment.__dataclass_params__.init is False  # its own __init__, as before
    assert PlacementFragment.__dataclass_params__.frozen is True


def test_instances_have_no_dict_and_are_small() -> None:
    fragment = _maker.CANONICAL
    assert not hasattr(fragment, "__dict__")
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        made = [
            PlacementFragment("t", (i,), (1,), 2, _maker.RANK, placement_fragment_id="x") for i in range(20000)
        ]
        per = (tracemalloc.get_traced_memory()[0] - before) / len(made)
    finally:
        tracemalloc.stop()
    # 16 B header + 8 fields + weak reference slot + 16 B collector header = 104 B up to 3.11
    # (112 B from 3.12, whose weak-reference slot is a 16 B pre-header: weakref_slot_bytes)
    # (+ 8 B list slot, + the offset and shape tuples made per instance); the dict-backed class
    # took 208 B for the object and its dict
    in_object, pre_header = weakref_slot_bytes(PlacementFragment)
    size = 16 + 8 * 8 + in_object + pre_header + 16
    assert size == (104 if sys.version_info < (3, 12) else 112)
    assert sys.getsizeof(fragment) == size
    assert per < size + 8 + 2 * 48


def test_constructor_behaviour_and_messages() -> None:
    rank = _rank()
    fragment = PlacementFragment("w", [0, 2], [4, 2], 16, rank, aliases=["w", "v"])
    assert fragment.global_offset == (0, 2) and fragment.local_shape == (4, 2)
    assert fragment.aliases == ("v", "w") and fragment.fragment_id == fragment.placement_fragment_id
    assert fragment.placement_fragment_id.startswith("sha256:")
    explicit = PlacementFragment("w", (0,), (4,), 8, rank, placement_fragment_id="pf")
    assert explicit.placement_fragment_id == "pf" and explicit.pipeline_stage_id is None
    for args, message in (
        (("", (0,), (4,), 8, rank), "tensor_id must be a non-empty string"),
        (("w", (0,), (4,), 0, rank), "nbytes must be at least 1"),
        (("w", (0,), (4,), 8.0, rank), "nbytes must be an integer"),
        (("w", (0,), (4,), 2**64, rank), "nbytes must fit in an unsigned 64-bit integer"),
        (("w", (0,), (4,), 8, object()), "rank must be a ParallelRank"),
        (("w", (2**63,), (4,), 8, rank), "global_offset must fit in a signed 64-bit integer"),
    ):
        with pytest.raises(ValueError, match=message):
            PlacementFragment(*args)
    with pytest.raises(ValueError, match="placement_fragment_id must be a non-empty string"):
        PlacementFragment("w", (0,), (4,), 8, rank, placement_fragment_id="")


def test_dataclass_behaviour() -> None:
    fragment = _maker.EXPLICIT
    same = PlacementFragment(**{name: getattr(fragment, name) for name in NAMES})
    assert same == fragment and hash(same) == hash(fragment) and same is not fragment
    assert repr(fragment) == (
        "PlacementFragment(tensor_id='layer.1.w', global_offset=(64,), local_shape=(32,), nbytes=64, "
        "rank=ParallelRank(dp=0, tp=0, pp=1, ep=0), pipeline_stage_id=1, aliases=('layer.1.alias', "
        "'layer.1.w'), placement_fragment_id='pf-explicit')"
    )
    assert dataclasses.asdict(fragment)["rank"] == {"dp": 0, "tp": 0, "pp": 1, "ep": 0}
    assert dataclasses.astuple(fragment)[0] == "layer.1.w"
    changed = dataclasses.replace(fragment, nbytes=128)
    assert changed.nbytes == 128 and changed.placement_fragment_id == "pf-explicit"
    for clone in (copy.copy(fragment), copy.deepcopy(fragment)):
        assert clone == fragment and type(clone) is PlacementFragment
    with pytest.raises(dataclasses.FrozenInstanceError):
        fragment.nbytes = 1  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del fragment.nbytes  # type: ignore[misc]
    with pytest.raises((AttributeError, TypeError)):
        fragment.other = 1  # type: ignore[attr-defined]
    assert weakref.ref(fragment)() is fragment
    assert isinstance(fragment, PlacementFragment) and dataclasses.is_dataclass(fragment)
    assert field_state(fragment) == {name: getattr(fragment, name) for name in NAMES}


class Sub(PlacementFragment):
    """A user subclass (no __slots__: it has its own instance dict besides the layout)."""

    def describe(self) -> str:
        return f"{self.tensor_id}@{self.global_offset}"


def test_subclasses_keep_working() -> None:
    sub = Sub("w", (0,), (4,), 8, _rank())
    base = PlacementFragment("w", (0,), (4,), 8, _rank())
    assert sub.describe() == "w@(0,)" and sub.placement_fragment_id == base.placement_fragment_id
    assert sub.__dict__ == {}  # a subclass without __slots__ has its own dict: the fields are not there
    assert field_state(sub) == field_state(base)
    assert gc.is_tracked(sub)  # only exact instances are untracked
    restored = pickle.loads(pickle.dumps(sub))
    assert type(restored) is Sub and field_state(restored) == field_state(sub)
    # a placement holding subclass fragments encodes as one holding exact ones
    assert fragment_object(sub) == fragment_object(base)


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("name", ["canonical", "explicit", "big", "group", "manifest"])
def test_pickles_are_byte_equal_to_the_dict_backed_class(name: str, protocol: int) -> None:
    assert pickle.dumps(_maker.OBJECTS[name], protocol).hex() == WRITTEN[name][str(protocol)]
    # a fragment's own pickle is its default dataclass form: the same bytes from the layout
    if name in ("canonical", "explicit", "big"):
        assert pickle.dumps(_maker.OBJECTS[name], protocol) == _maker.default_form(_maker.OBJECTS[name], protocol)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_default_form_is_byte_equal(protocol: int) -> None:
    # the default dataclass form (what a reference pickle holds) is the same bytes from the layout
    assert _maker.default_form(_maker.CANONICAL, protocol).hex() == WRITTEN["default_canonical"][str(protocol)]
    assert _maker.default_form(_maker.EXPLICIT, protocol).hex() == WRITTEN["default_explicit"][str(protocol)]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("written", [FIXTURE, WRITTEN], ids=["r17", "r66"])
def test_dict_backed_pickles_load(protocol: int, written: Any) -> None:
    for name in ("canonical", "explicit", "big"):
        loaded = pickle.loads(bytes.fromhex(written[name][str(protocol)]))
        assert type(loaded) is PlacementFragment and loaded == _maker.OBJECTS[name]
        assert field_state(loaded) == field_state(_maker.OBJECTS[name]) and not gc.is_tracked(loaded)
    group = pickle.loads(bytes.fromhex(written["group"][str(protocol)]))
    assert group == _maker.GROUP and group[0] is group[3]
    manifest = pickle.loads(bytes.fromhex(written["manifest"][str(protocol)]))
    assert type(manifest) is WeightPlacementManifest and manifest == _maker.MANIFEST
    assert manifest.digest == _maker.MANIFEST.digest
    for name in ("default_canonical", "default_explicit"):
        loaded = pickle.loads(bytes.fromhex(written[name][str(protocol)]))
        want = _maker.CANONICAL if name == "default_canonical" else _maker.EXPLICIT
        assert type(loaded) is PlacementFragment and loaded == want and field_state(loaded) == field_state(want)


def test_partial_and_hostile_states() -> None:
    fragment = copy.copy(_maker.CANONICAL)
    object.__delattr__(fragment, "nbytes")  # an emptied field: default pickling, without it
    reduced = fragment.__reduce_ex__(2)
    assert reduced[0] is copyreg.__newobj__ and "nbytes" not in reduced[2]
    restored = pickle.loads(pickle.dumps(fragment))
    assert field_state(restored) == field_state(fragment) and "nbytes" not in field_state(restored)
    with pytest.raises(AttributeError):
        restored.nbytes
    state = field_state(_maker.CANONICAL)
    blank = object.__new__(PlacementFragment)
    with pytest.raises(ValueError, match="pickle state is invalid: unknown field"):
        blank.__setstate__({**state, "extra": 1})
    with pytest.raises(ValueError, match="pickle state is invalid"):
        blank.__setstate__([("tensor_id", "t")])
    blank.__setstate__(state)
    assert blank == _maker.CANONICAL


def test_forged_fields_are_read_by_c() -> None:
    fragment = copy.copy(_maker.CANONICAL)
    object.__setattr__(fragment, "placement_fragment_id", "forged")
    table = _native.assembly_columns(
        (fragment,), PlacementFragment, {fragment.tensor_id: 0}, {fragment.rank: 0}
    )
    assert table is not None and list(table[2]) == ["forged"]
    empty = forged_instance(PlacementFragment, {k: v for k, v in field_state(fragment).items() if k != "rank"})
    assert _native.assembly_columns(
        (empty,), PlacementFragment, {fragment.tensor_id: 0}, {fragment.rank: 0}
    ) is None  # an emptied field declines, as a missing key did


def _other_layout(names: tuple[str, ...], label: str) -> type:
    base = value_base(label, names)
    namespace: dict[str, Any] = {"__slots__": ("__weakref__",), "__annotations__": {n: Any for n in names}}
    return layout_dataclass(type(label, (base,), namespace))


def test_c_readers_decline_layouts_they_do_not_accept() -> None:
    genuine = _maker.CANONICAL
    values = tuple(getattr(genuine, name) for name in NAMES)
    renamed = _other_layout(NAMES[:-1] + ("pfid",), "Renamed")
    reordered = _other_layout((NAMES[1], NAMES[0]) + NAMES[2:], "Reordered")
    same = _other_layout(NAMES, "SameNames")
    maps = ({genuine.tensor_id: 0}, {genuine.rank: 0})
    want = _native.assembly_columns((genuine,), PlacementFragment, *maps)
    for cls, fields in ((renamed, values), (reordered, (values[1], values[0]) + values[2:])):
        obj = _native.layout_new(cls, fields)
        # not read as a placement fragment's slots: the attribute reads decide (a renamed field
        # is missing; the reordered one reads each field by its name)
        got = _native.assembly_columns((obj,), cls, *maps)
        assert got is None if cls is renamed else got == want
    obj = _native.layout_new(same, values)
    assert _native.assembly_columns((obj,), same, *maps) == want  # the same fields, in order


def test_a_class_attribute_shadowing_a_field_is_not_a_placement_layout() -> None:
    class Shadowing(PlacementFragment):
        __slots__ = ()

        @property  # type: ignore[misc]
        def tensor_id(self) -> str:
            return "shadow"

    assert _native.layout_check(Shadowing, NAMES) is False
    forged = object.__new__(Shadowing)
    store_state(forged, field_state(_maker.CANONICAL))  # through the layout's own members
    assert forged.tensor_id == "shadow" and field_state(forged)["tensor_id"] == "layer.0.w"
    # the state encoders read the state (the slots), as they read a dict-backed instance's dict
    assert fragment_object(forged) == fragment_object(_maker.CANONICAL)


def test_untracking() -> None:
    fragment = PlacementFragment("w", (0,), (4,), 8, _rank())
    assert not gc.is_tracked(fragment)
    assert not gc.is_tracked(weight_types._restore_placement_fragment("w", (0,), (4,), 8, _rank(), None, (), "id"))
    holder = PlacementFragment("w", (0,), (4,), 8, _rank(), aliases=("w", "v"))
    assert not gc.is_tracked(holder)
    # a value the collector must see keeps the instance tracked
    mutable = weight_types._restore_placement_fragment("w", (0,), (4,), 8, _rank(), None, ([],), "id")
    assert gc.is_tracked(mutable)
    assert _native.untrack_inert(mutable, PlacementFragment) is False
    emptied = copy.copy(fragment)
    gc.collect()
    object.__delattr__(emptied, "aliases")
    assert _native.untrack_inert(emptied, PlacementFragment) is False  # every field must be set
    assert _native.untrack_inert(copy.copy(fragment), PlacementFragment) is True


def test_graph_unpack_builds_layout_fragments() -> None:
    from test_binding_attacks import World

    plan = World().bind()
    restored = pickle.loads(pickle.dumps(plan, protocol=5))
    assert restored == plan
    fragments = [op.target.placement for op in restored.operations]
    assert all(type(f) is PlacementFragment and not hasattr(f, "__dict__") for f in fragments)
    assert pickle.dumps(restored, protocol=5) == pickle.dumps(plan, protocol=5)


def test_the_storer_stores_the_slots_of_the_class_and_its_subclasses() -> None:
    store = layout_storer(PlacementFragment)
    values = tuple(getattr(_maker.CANONICAL, name) for name in NAMES)
    blank = object.__new__(PlacementFragment)
    assert store(blank, *values) is None
    assert blank == _maker.CANONICAL and not gc.is_tracked(blank)
    sub = object.__new__(Sub)
    store(sub, *values)
    assert field_state(sub) == field_state(_maker.CANONICAL) and gc.is_tracked(sub)  # exact only
    again = copy.copy(_maker.CANONICAL)
    store(again, *values[:-1], "replaced")
    assert again.placement_fragment_id == "replaced"
    with pytest.raises(TypeError, match="not an instance"):
        store(ParallelRank(), *values)
    with pytest.raises(TypeError, match="field values"):
        store(blank, *values[:-1])
    with pytest.raises(TypeError):
        layout_storer(ParallelRank)
    mutable = object.__new__(PlacementFragment)
    store(mutable, *values[:-2], ([],), "id")
    assert gc.is_tracked(mutable)  # a value the collector must see keeps it tracked

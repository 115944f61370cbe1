"""The exact attested-view cache (``bound_contracts._attested_view``, ``_native.deps_unchanged``).

A view kept on an attestation is reused only when every object it was derived from still holds
the very same key and value objects (pointer identity) as when it was built; any in-place edit,
even with an equal but new value object, a deleted or an added attribute, rebuilds it."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any, Callable

import pytest

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank
from mooncake.reshard.weight._planner import bound_contracts as bc

from test_memo_forgery import World, forge, outcome
from test_native_revalidate import _FRAGMENT_TYPES, _identity, _scan


class Plain:
    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)


def _snapshot(obj: Any) -> tuple[Any, ...]:
    state = obj if type(obj) is dict else obj.__dict__
    flat: list[Any] = []
    for key, value in state.items():
        flat.extend((key, value))
    return tuple(flat)


# ---------------------------------------------------------------------------------------
# deps_unchanged: hostile inputs and the exact comparison


def test_deps_unchanged_argument_types() -> None:
    thing = Plain(a=1)
    for bad in ([thing, _snapshot(thing)], (thing,), (thing, _snapshot(thing), thing), None, 3, "ab"):
        with pytest.raises(TypeError):
            _native.deps_unchanged(bad)
    for bad_snapshot in ([1], None, {"a": 1}, "a1"):
        with pytest.raises(TypeError):
            _native.deps_unchanged((thing, bad_snapshot))
    with pytest.raises(TypeError):
        _native.deps_unchanged()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        _native.deps_unchanged((), ())  # type: ignore[call-arg]
    assert _native.deps_unchanged(()) is True


def test_deps_unchanged_objects_without_an_exact_instance_dict() -> None:
    class Slotted:
        __slots__ = ("a",)

    class OddDict(dict):  # type: ignore[type-arg]
        pass

    odd = Plain(a=1)
    odd.__dict__ = OddDict(a=1)
    huge = 1 << 200
    for obj in (object(), 5, huge, -1, (1, 2), "text", Slotted(), [1], odd, int):
        assert _native.deps_unchanged((obj, ())) is False
        assert _native.deps_unchanged((obj, ("a", 1))) is False


def test_deps_unchanged_compares_keys_and_values_by_identity_in_order() -> None:
    value = 10**30
    thing = Plain(a=value, b="x", c=(1, 2))
    mapping = {"k": thing, "j": 2}
    deps = (thing, _snapshot(thing), mapping, _snapshot(mapping))
    assert _native.deps_unchanged(deps) is True
    forge(thing, "a", int(str(value)))  # equal, but a new object
    assert thing.a == value and _native.deps_unchanged(deps) is False
    forge(thing, "a", value)
    assert _native.deps_unchanged(deps) is True
    object.__delattr__(thing, "b")  # deleted attribute
    assert _native.deps_unchanged(deps) is False
    thing.__dict__["b"] = "x"  # re-added: same values, other order
    assert _native.deps_unchanged(deps) is False
    thing.__dict__.clear()
    thing.__dict__.update(a=value, b="x", c=(1, 2))
    assert _native.deps_unchanged(deps) is True
    thing.__dict__["d"] = None  # added attribute
    assert _native.deps_unchanged(deps) is False
    object.__delattr__(thing, "d")
    assert _native.deps_unchanged(deps) is True
    mapping["k"] = Plain()
    assert _native.deps_unchanged(deps) is False
    mapping["k"] = thing
    assert _native.deps_unchanged(deps) is True
    # a snapshot longer or shorter than the dict, or with an odd length
    for wrong in (_snapshot(thing) + ("e", 1), _snapshot(thing)[:-2], _snapshot(thing)[:-1], ()):
        assert _native.deps_unchanged((thing, wrong)) is False
    # a key of equal text but another object
    named = Plain(alpha=1)
    other_key = "".join(["al", "pha"])
    assert other_key == "alpha" and other_key is not next(iter(named.__dict__))
    assert _native.deps_unchanged((named, ("alpha", 1))) is True
    assert _native.deps_unchanged((named, (other_key, 1))) is False


def test_deps_unchanged_reads_the_instance_dict_never_a_property() -> None:
    class Boom:
        @property
        def __dict__(self) -> Any:  # type: ignore[override]
            raise RuntimeError("boom")

    # The generic instance dict is read, never a __dict__ property: no error, the real dict.
    obj = Boom()
    assert _native.deps_unchanged((obj, ())) is True


# ---------------------------------------------------------------------------------------
# The cache on attestations


def _plan() -> tuple[World, Any]:
    world = World()
    return world, world.bind()


def _attestation(plan: Any) -> Any:
    return plan.operations[0].target.attestation


def _scoped_view(attestation: Any) -> Any:
    with bc._ViewScope():
        return bc._attested_view(attestation)


def _slots(view: Any) -> dict[str, Any]:
    values = {name: getattr(view, name) for name in bc._AttestedView.__slots__ if name != "_rows"}
    values["rows"] = view.rows()
    return values


def test_a_kept_view_is_reused_only_while_unchanged() -> None:
    _world, plan = _plan()
    attestation = _attestation(plan)
    attestation.__dict__.pop("_attested_view", None)
    outside = bc._attested_view(attestation)  # outside a revalidation: nothing kept
    assert "_attested_view" not in attestation.__dict__
    marked = _scoped_view(attestation)  # a first view: only marked
    assert attestation.__dict__["_attested_view"] == ()
    first = _scoped_view(attestation)  # the second: recorded
    assert first is not marked and first is not outside and _slots(first) == _slots(outside)
    kept = attestation.__dict__["_attested_view"]
    assert type(kept) is tuple and kept[0] is first and kept[1] is attestation.evidence
    assert kept[2] is attestation.placement and kept[3] is attestation._placement_dict
    assert _native.deps_unchanged(kept[4]) is True
    assert _scoped_view(attestation) is first  # reused
    assert bc._attested_view(attestation) is not first  # outside a scope: built again
    # another value under the key (e.g. a bare view): ignored and replaced
    attestation.__dict__["_attested_view"] = first
    second = _scoped_view(attestation)
    assert second is not first and attestation.__dict__["_attested_view"][0] is second
    attestation.__dict__["_attested_view"] = None  # as if never viewed: only marked again
    assert _scoped_view(attestation) is not second and attestation.__dict__["_attested_view"] == ()
    second = _scoped_view(attestation)
    assert second is not first and attestation.__dict__["_attested_view"][0] is second
    # copies and pickles carry no kept view
    for other in (copy.copy(attestation), copy.deepcopy(attestation), pickle.loads(pickle.dumps(attestation))):
        assert "_attested_view" not in other.__dict__


def _ef(plan: Any) -> Any:
    return _attestation(plan).evidence.fragments[0]


def _pf(plan: Any) -> Any:
    attestation = _attestation(plan)
    return attestation._placement_dict[_ef(plan).placement_fragment_id]


def _part(plan: Any) -> Any:
    attestation = _attestation(plan)
    return attestation.placement._part_index()[attestation.evidence.participant_id]


def _new_int(value: int) -> int:
    return int(str(value))


# Every recorded object kind, edited in place (``equal`` ones with an equal but new value).
FORGERIES: dict[str, tuple[Callable[[Any], None], bool]] = {
    "evidence scalar": (lambda p: forge(_attestation(p).evidence, "generation", 99), False),
    "evidence lease": (lambda p: forge(_attestation(p).evidence, "lease_id", "other-lease"), False),
    "evidence fragments tuple": (lambda p: forge(_attestation(p).evidence, "fragments", tuple(list(_attestation(p).evidence.fragments))), True),
    "evidence fragment address": (lambda p: forge(_ef(p), "address", _ef(p).address + 64), False),
    "evidence fragment equal address": (lambda p: forge(_ef(p), "address", _new_int(_ef(p).address)), True),
    "evidence fragment deleted device": (lambda p: object.__delattr__(_ef(p), "device"), False),
    # (an attribute can no longer be added to an evidence fragment: RuntimeBindingFragment is stored
    # in its C layout, without __dict__; an equal but new field value is the in-place edit left)
    "evidence fragment equal worker": (lambda p: forge(_ef(p), "worker_id", "".join(list(_ef(p).worker_id))), True),
    "placement fragment nbytes": (lambda p: forge(_pf(p), "nbytes", _pf(p).nbytes + 2), False),
    "placement fragment equal offset": (lambda p: forge(_pf(p), "global_offset", tuple(list(_pf(p).global_offset))), True),
    "placement fragment rank field": (lambda p: forge(_pf(p).rank, "tp", _pf(p).rank.tp + 1), False),
    "placement fragment rank": (lambda p: forge(_pf(p), "rank", ParallelRank(tp=7)), False),
    "placement dict entry": (lambda p: _attestation(p)._placement_dict.__setitem__(_ef(p).placement_fragment_id, copy.copy(_pf(p))), True),
    "part rank": (lambda p: forge(_part(p), "rank", ParallelRank(tp=7)), False),
    "part rank field": (lambda p: forge(_part(p).rank, "dp", 3), False),
    "placement digest": (lambda p: forge(_attestation(p).placement, "_digest_cache", "0" * 64), False),
    "placement id": (lambda p: forge(_attestation(p).placement, "placement_id", "other"), False),
    "part index": (lambda p: _attestation(p).placement.__dict__.pop("_parts_by_participant"), True),
}


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_each_recorded_kind_rebuilds_the_view(name: str) -> None:
    edit, equal = FORGERIES[name]
    _world, plan = _plan()
    for _ in range(2):  # views marked, then kept
        assert outcome(lambda: dataclasses.replace(plan))[0] == "returned"
    attestation = _attestation(plan)
    kept = attestation.__dict__["_attested_view"]
    edit(plan)
    assert _native.deps_unchanged(kept[4]) is False
    try:
        reference = _slots(bc._AttestedView(attestation))
    except Exception as error:  # the constructor's failure is the outcome
        reference = {"raised": type(error).__name__}
    try:
        rebuilt = _scoped_view(attestation)
        assert rebuilt is not kept[0]
        got = _slots(rebuilt)
    except Exception as error:
        got = {"raised": type(error).__name__}
    assert got == reference
    if equal:  # an equal value: rebuilt, then accepted
        assert outcome(lambda: dataclasses.replace(plan))[0] == "returned"


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_each_forgery_has_the_outcome_of_never_cached_objects(name: str) -> None:
    edit, _equal = FORGERIES[name]
    _world, fresh = _plan()
    for attestation in {id(a): a for a in _all_attestations(fresh)}.values():
        attestation.__dict__.pop("_attested_view", None)
    edit(fresh)
    expected = outcome(lambda: dataclasses.replace(fresh))
    _world, used = _plan()
    for _ in range(2):
        assert outcome(lambda: dataclasses.replace(used))[0] == "returned"
    edit(used)
    got = outcome(lambda: dataclasses.replace(used))
    assert got[:2] == expected[:2]
    if expected[0] == "raised":
        assert got[2] == expected[2]
    else:
        assert got[1] == expected[1]


def _all_attestations(plan: Any) -> list[Any]:
    found = [f.attestation for op in plan.operations for f in (op.source, op.target)]
    found += [executor.attestation for executor in plan.source_executors + plan.target_executors]
    return [a for a in found if a is not None]


def test_revalidate_fragments_reads_only_an_unchanged_exact_entry() -> None:
    _world, plan = _plan()
    for _ in range(2):
        assert outcome(lambda: dataclasses.replace(plan))[0] == "returned"
    frags = _scan(plan.operations)[0]
    identity = _identity(plan)
    calls: list[Any] = []

    def counting(attestation: Any) -> Any:
        calls.append(attestation)
        return bc._attested_view(attestation)

    def boom(attestation: Any) -> Any:
        raise RuntimeError("boom")

    attestations = {id(f.attestation): f.attestation for f in frags}
    # every entry unchanged: the kept views, the callable is never called
    result = _native.revalidate_fragments(frags, *_FRAGMENT_TYPES, identity, boom)
    assert result is not None
    for key, attestation in attestations.items():
        assert result[3][key][2] is attestation.__dict__["_attested_view"][0]
    # one nested value edited in place (equal but new): that attestation goes to the callable
    target = frags[0].attestation
    ef = target.evidence.fragments[0]
    forge(ef, "address", _new_int(ef.address))
    with pytest.raises(RuntimeError, match="boom"):
        _native.revalidate_fragments(frags, *_FRAGMENT_TYPES, identity, boom)
    assert _native.revalidate_fragments(frags, *_FRAGMENT_TYPES, identity, counting) is not None
    assert calls and {id(a) for a in calls} == {id(target)}
    # an entry whose evidence, placement or placement dict is not the attestation's: not read
    for index in (1, 2, 3):
        kept = list(target.__dict__["_attested_view"])
        kept[index] = object()
        target.__dict__["_attested_view"] = tuple(kept)
        with pytest.raises(RuntimeError, match="boom"):
            _native.revalidate_fragments(frags, *_FRAGMENT_TYPES, identity, boom)
    for odd in (None, (), (1, 2, 3, 4), [1, 2, 3, 4, 5]):
        target.__dict__["_attested_view"] = odd
        with pytest.raises(RuntimeError, match="boom"):
            _native.revalidate_fragments(frags, *_FRAGMENT_TYPES, identity, boom)
    # an entry whose deps are malformed: the C call reports it
    view = bc._AttestedView(target)
    state = target.__dict__
    state["_attested_view"] = (view, state["evidence"], state["placement"], state["_placement_dict"], (1,))
    with pytest.raises(TypeError):
        _native.revalidate_fragments(frags, *_FRAGMENT_TYPES, identity, boom)
    state["_attested_view"] = (view, state["evidence"], state["placement"], state["_placement_dict"], ())
    with pytest.raises(RuntimeError, match="boom"):  # empty deps: never a hit
        _native.revalidate_fragments(frags, *_FRAGMENT_TYPES, identity, boom)
    state.pop("_attested_view")
    assert outcome(lambda: dataclasses.replace(plan))[0] == "returned"


def test_unrecordable_values_keep_no_view() -> None:
    _world, plan = _plan()
    attestation = _attestation(plan)
    forge(_ef(plan), "owner", [1])  # a value that cannot be recorded
    attestation.__dict__.pop("_attested_view", None)
    views = [_scoped_view(attestation) for _ in range(3)]
    assert attestation.__dict__["_attested_view"] == ()  # marked, never recorded
    assert len({id(view) for view in views}) == 3


def test_a_first_view_is_only_marked() -> None:
    import pickle as pickle_module

    _world, plan = _plan()
    restored = pickle_module.loads(pickle_module.dumps(plan))
    for attestation in _all_attestations(restored):
        assert attestation.__dict__.get("_attested_view") == ()
    again = dataclasses.replace(restored)
    for attestation in _all_attestations(again):
        kept = attestation.__dict__.get("_attested_view")
        assert type(kept) is tuple and len(kept) == 5 and _native.deps_unchanged(kept[4]) is True

"""No foreign code inside the fast revalidation's C passes through instance-dict keys (session 25).

The C passes of ``bound_contracts._fast_revalidate_live`` read package objects' instance dicts by
key. A str subclass with a colliding hash stored as a key of such a dict would run its ``__eq__``
inside the probe (``tests/test_lead24_unsealed_keys.py``); csrc/plain_dict.h makes every reader
refuse a dict that is not an exact dict of exact str keys (the fast path declines, the rules
decide). These tests plant such a key in front of every field of one object of every
dict-backed package class the plan reaches, through every entry path that runs the fast
revalidation (``dataclasses.replace``, direct ``TransferPlan`` construction, an unsealed bind,
pickle restore), and record any ``__eq__`` call made while a ``_native`` function called by
``_fast_revalidate_live`` (or anything it calls in turn) is running. The outcome must be the
rules' outcome (a plan, or the same error as with the fast path disabled).
"""

from __future__ import annotations

import dataclasses
import pickle
import sys
from typing import Any, Callable, Iterator, Optional

import pytest

from forge_helpers import outcome, sized_world

from mooncake.reshard import _native
from mooncake.reshard.weight import TransferPlan, bind_logical_transfer_plan
from mooncake.reshard.weight._planner import bound_contracts

_NATIVE = _native.__name__
_PACKAGE = "mooncake.reshard"


class _Watch:
    """A profile hook that follows the ``_native`` calls made by ``_fast_revalidate_live`` (the
    fast revalidation's C passes) and, while one runs, every ``_native`` call below it (a pass
    may call package Python code, e.g. ``_attested_view``, which calls ``_native`` again):
    ``stack`` holds (function, calling frame) of the running ones.

    A ``Colliding.__eq__`` whose caller frame is the calling frame of the innermost running
    ``_native`` call was called by that C function itself: a probe of a C pass (the finding).
    Python code a pass calls (``_AttestedView.__init__``) runs at a point where any code may run
    anyway (a profile or trace hook does), so the passes hold their own references across such
    calls; its attribute reads are not counted."""

    def __init__(self) -> None:
        self.stack: list[tuple[Any, Any]] = []
        self.hits: list[str] = []

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if event == "c_call":
            native = getattr(arg, "__module__", None) == _NATIVE or type(getattr(arg, "__self__", None)).__module__ == _NATIVE
            if native and (self.stack or frame.f_code.co_name == "_fast_revalidate_live"):
                self.stack.append((arg, frame))
        elif event in ("c_return", "c_exception") and self.stack and self.stack[-1][0] is arg:
            self.stack.pop()

    def probe(self, key: str, caller: Any) -> None:
        if self.stack and self.stack[-1][1] is caller:
            self.hits.append(f"{key} in {self.stack[-1][0].__name__}")


_WATCH: list[_Watch] = []


class Colliding(str):
    """``"<field>~planted"``: hashes as ``<field>``, so a probe for that field compares it first
    when it precedes the field in the dict; records the call when inside a watched C pass.
    Module level: pickle restores it as itself."""

    __slots__ = ()

    def __hash__(self) -> int:
        return hash(str.split(self, "~")[0])

    def __eq__(self, other: object) -> bool:
        if _WATCH:
            _WATCH[-1].probe(str(self), sys._getframe(1))
        return False

    __ne__ = str.__ne__


def _plant(obj: Any, name: str) -> None:
    """Puts a ``Colliding`` key for ``name`` in front of ``name`` in ``obj``'s instance dict."""
    state = vars(obj)
    after = [(key, state.pop(key)) for key in list(state)[list(state).index(name) :]]
    state[Colliding(f"{name}~planted")] = None
    for key, value in after:
        state[key] = value


def _dict_backed(root: Any) -> Iterator[Any]:
    """Every object reachable from ``root`` (through instance dicts, tuples, lists, dict values)
    whose class is a package class with an instance dict, first of its class first."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, (str, int, float, bytes, type(None), bool)):
            continue
        seen.add(id(obj))
        if isinstance(obj, (tuple, list, frozenset, set)):
            stack.extend(reversed(list(obj)))
            continue
        if isinstance(obj, dict):
            stack.extend(reversed(list(obj.values())))
            continue
        if not type(obj).__module__.startswith(_PACKAGE) or not hasattr(obj, "__dict__"):
            continue
        yield obj
        stack.extend(reversed(list(vars(obj).values())))


def _plan() -> Any:
    logical, targets, sources, _memory = sized_world(2)
    return bind_logical_transfer_plan(logical, targets, source_bindings=sources)


def _cases(root_of: Callable[[], Any]) -> list[tuple[str, str]]:
    """(class name, field) of every field of the first object of each dict-backed class."""
    cases = []
    classes: set[type] = set()
    for obj in _dict_backed(root_of()):
        if type(obj) in classes:
            continue
        classes.add(type(obj))
        cases.extend((type(obj).__qualname__, name) for name in vars(obj) if type(name) is str)
    return sorted(cases)


def _find(root: Any, cls_name: str) -> Any:
    return next(obj for obj in _dict_backed(root) if type(obj).__qualname__ == cls_name)


def _watched(call: Callable[[], Any], watch: Optional[_Watch] = None) -> tuple[Any, list[str]]:
    """``call()``'s outcome (``forge_helpers.outcome``) under ``watch`` (a fresh ``_Watch`` by
    default) as the profile hook, and its hits."""
    watch = _Watch() if watch is None else watch
    _WATCH.append(watch)
    previous = sys.getprofile()
    sys.setprofile(watch)
    try:
        result = outcome(call)
    finally:
        sys.setprofile(previous)
        _WATCH.pop()
    return result, watch.hits


def _ruled(call: Callable[[], Any], monkeypatch: pytest.MonkeyPatch) -> Any:
    """``call()``'s outcome with the fast revalidation disabled (the rules alone)."""
    with monkeypatch.context() as patch:
        patch.setattr(bound_contracts, "_fast_revalidate", lambda *args, **kwargs: False)
        return outcome(call)


def _same(result: Any, expected: Any) -> None:
    if isinstance(expected, TransferPlan):
        assert isinstance(result, TransferPlan)
    else:
        assert result == expected


_PLAN_CASES = _cases(_plan)


def test_the_walk_reaches_every_class_the_passes_read() -> None:
    """The parametrizations below cover the dict-backed classes whose dicts the C passes read."""
    names = {name for name, _field in _PLAN_CASES}
    assert {
        "WeightPlacementManifest",
        "WeightPlacementPart",
        "TensorDescriptor",
        "ParallelRank",
        "SplitAxis",
        "RuntimeBindingEvidence",
        "RuntimeBindingAttestation",
        "ExecutorTransferPlan",
    } <= names, names


def test_the_watch_records_a_probe_inside_a_pass() -> None:
    """The watch itself, on the base case of the lead's test: a key planted after the field is
    never compared (probes find the field first); the same key planted in front of it is
    compared inside a pass unless the pass refuses the dict (the tests below), and is recorded
    when compared by a watched _native call (here: a direct dict probe inside one)."""
    plan = _plan()
    vars(plan.target_placement.parts[0])[Colliding("participant_id~planted")] = None
    result, hits = _watched(lambda: dataclasses.replace(plan))
    assert isinstance(result, TransferPlan)
    assert hits == []
    probe = {Colliding("key~planted"): 1, "key": 2}
    watch = _Watch()
    _WATCH.append(watch)
    try:
        watch.stack.append((_native.revalidate_scan, sys._getframe()))  # as inside a pass
        assert probe["key"] == 2
    finally:
        _WATCH.pop()
    assert watch.hits and set(watch.hits) == {"key~planted in revalidate_scan"}


@pytest.mark.parametrize(("cls_name", "field"), _PLAN_CASES)
def test_replace(cls_name: str, field: str, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = _plan()
    _plant(_find(plan, cls_name), field)
    result, hits = _watched(lambda: dataclasses.replace(plan))
    assert hits == []
    _same(result, _ruled(lambda: dataclasses.replace(plan), monkeypatch))


@pytest.mark.parametrize(("cls_name", "field"), _PLAN_CASES)
def test_direct_construction(cls_name: str, field: str, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = _plan()
    _plant(_find(plan, cls_name), field)

    def construct() -> Any:
        return TransferPlan(**{f.name: getattr(plan, f.name) for f in dataclasses.fields(plan) if f.init})

    result, hits = _watched(construct)
    assert hits == []
    _same(result, _ruled(construct, monkeypatch))


def _inputs() -> tuple[Any, Any, Any]:
    logical, targets, sources, _memory = sized_world(2)
    return logical, targets, sources


_BIND_CASES = _cases(_inputs)


@pytest.mark.parametrize(("cls_name", "field"), _BIND_CASES)
def test_unsealed_bind(cls_name: str, field: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A planted key unseals the bind (``exactness`` refuses the inputs); the bind's plan is then
    revalidated by the fast path over the inputs' objects."""
    inputs = _inputs()
    _plant(_find(inputs, cls_name), field)
    logical, targets, sources = inputs

    def bind() -> Any:
        return bind_logical_transfer_plan(logical, targets, source_bindings=sources)

    result, hits = _watched(bind)
    assert hits == []
    _same(result, _ruled(bind, monkeypatch))


def _restore_cases() -> list[tuple[str, str]]:
    """The plan cases whose planted key survives pickling (the others' objects are rebuilt)."""
    cases = []
    for cls_name, field in _PLAN_CASES:
        plan = _plan()
        _plant(_find(plan, cls_name), field)
        restored = outcome(lambda: pickle.loads(pickle.dumps(plan)))
        if isinstance(restored, TransferPlan) and any(
            type(key) is Colliding for obj in _dict_backed(restored) for key in vars(obj)
        ):
            cases.append((cls_name, field))
    return cases


_RESTORE_CASES = _restore_cases()


def test_some_planted_keys_survive_pickling() -> None:
    """So the restore test below is not vacuous."""
    assert {name for name, _field in _RESTORE_CASES} >= {"WeightPlacementPart", "ParallelRank"}, _RESTORE_CASES


@pytest.mark.parametrize(("cls_name", "field"), _RESTORE_CASES)
def test_pickle_restore(cls_name: str, field: str, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = _plan()
    _plant(_find(plan, cls_name), field)
    data = pickle.dumps(plan)
    result, hits = _watched(lambda: pickle.loads(data))
    assert hits == []
    _same(result, _ruled(lambda: pickle.loads(data), monkeypatch))


class _Dict(dict):  # type: ignore[type-arg]
    pass


@pytest.mark.parametrize("cls_name", sorted({name for name, _field in _PLAN_CASES}))
def test_a_dict_subclass_as_instance_dict(cls_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An instance dict replaced by a dict subclass (its items, a colliding key in front of the
    first) is not probed by the passes; the outcome is the rules'."""
    plan = _plan()
    obj = _find(plan, cls_name)
    first = next(iter(vars(obj)))
    object.__setattr__(obj, "__dict__", _Dict({Colliding(f"{first}~planted"): None, **vars(obj)}))
    assert type(vars(obj)) is _Dict
    result, hits = _watched(lambda: dataclasses.replace(plan))
    assert hits == []
    _same(result, _ruled(lambda: dataclasses.replace(plan), monkeypatch))


@pytest.mark.parametrize(("cls_name", "field"), _PLAN_CASES)
def test_equal_but_not_identical_keys_stay_sound(cls_name: str, field: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A field's key replaced by an equal exact str that is not the interned name: the fast path
    may read it or decline; either way the outcome is the rules'."""
    plan = _plan()
    obj = _find(plan, cls_name)
    copy = "".join(list(field))
    assert copy == field and copy is not field
    # a new (combined) dict: a split instance dict would store the shared interned key again
    object.__setattr__(obj, "__dict__", {copy if key == field else key: value for key, value in vars(obj).items()})
    assert not any(key is field for key in vars(obj)) and field in vars(obj)
    result, hits = _watched(lambda: dataclasses.replace(plan))
    assert hits == []
    _same(result, _ruled(lambda: dataclasses.replace(plan), monkeypatch))


def _plant_everywhere(root: Any) -> int:
    """A ``Colliding`` key in front of every field of every dict-backed object reachable from
    ``root`` (the values unchanged); the number of objects."""
    objects = list(_dict_backed(root))
    for obj in objects:
        state = vars(obj)
        items = list(state.items())
        state.clear()
        for key, value in items:
            if type(key) is str:
                state[Colliding(f"{key}~planted")] = None
            state[key] = value
    return len(objects)


_PASSES = (
    "revalidate_scan",
    "revalidate_fragments",
    "revalidate_views",
    "revalidate_shapes",
    "revalidate_side",
    "revalidate_spaces",
)


class _PlantAfter(_Watch):
    """A ``_Watch`` that plants keys everywhere when the pass ``after`` returns to
    ``_fast_revalidate_live`` (as a profile hook, a signal handler or another thread could):
    what a pass proved about the dicts it read does not carry to the next passes."""

    def __init__(self, root: Any, after: str) -> None:
        super().__init__()
        self.root = root
        self.after = after
        self.planted = 0

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        super().__call__(frame, event, arg)
        if (
            event == "c_return"
            and not self.stack
            and not self.planted
            and getattr(arg, "__name__", None) == self.after
            and frame.f_code.co_name == "_fast_revalidate_live"
        ):
            self.planted = self.plant_now(frame)

    def plant_now(self, frame: Any) -> int:
        """Plants at the moment ``after`` returns; the number of keys planted."""
        return _plant_everywhere(self.root)


@pytest.mark.parametrize("after", _PASSES)
def test_keys_planted_between_passes(after: str, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = _plan()
    watch = _PlantAfter(plan, after)
    _WATCH.append(watch)
    previous = sys.getprofile()
    sys.setprofile(watch)
    try:
        result = outcome(lambda: dataclasses.replace(plan))
    finally:
        sys.setprofile(previous)
        _WATCH.pop()
    assert watch.planted > 0
    assert watch.hits == []
    _same(result, _ruled(lambda: dataclasses.replace(plan), monkeypatch))


def _plant_in_derived(plan: Any, cls_name: str, field: str) -> None:
    """A ``Colliding`` key in front of every key of the derived dict ``field`` of the first
    ``cls_name`` object."""
    derived = vars(_find(plan, cls_name))[field]
    assert type(derived) is dict and derived
    items = list(derived.items())
    derived.clear()
    for key, value in items:
        derived[Colliding(f"{key}~planted")] = None
        derived[key] = value


def test_the_part_index_is_probed_only_when_plain(monkeypatch: pytest.MonkeyPatch) -> None:
    """``attested_view`` probes the placement's part index (``_part_index()``) after that
    method ran: only a plain one."""
    plan = _plan()
    _plant_in_derived(plan, "WeightPlacementManifest", "_parts_by_participant")
    result, hits = _watched(lambda: dataclasses.replace(plan))
    assert hits == []
    _same(result, _ruled(lambda: dataclasses.replace(plan), monkeypatch))


_DATA_DICTS = (
    ("RuntimeBindingAttestation", "_placement_dict"),
    ("RuntimeBindingAttestation", "_binding_dict"),
)


# (closed by the lead, session 25: rf_attested_entry checks both dicts plain once per attestation
# and call, and probes them with an exact-str placement fragment id only. With no hook set, the
# pass's only Python callouts (the attested view's construction) are the package's own code, so
# no key can be planted between that check and the probes; with a profile or trace hook set, a
# hook running at a later attestation's callout could still plant one: not covered here.)
@pytest.mark.parametrize(("cls_name", "field"), _DATA_DICTS)
def test_no_foreign_code_through_derived_dicts(cls_name: str, field: str) -> None:
    plan = _plan()
    _plant_in_derived(plan, cls_name, field)
    _result, hits = _watched(lambda: dataclasses.replace(plan))
    assert hits == []

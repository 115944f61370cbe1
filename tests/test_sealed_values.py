"""The value half of bind's and restore's sealed gate (session 23): ``_native.inert_graph``
(csrc/exact.c) against a brute-force oracle; ``CodeSet`` / ``CodeWatch`` (the profile function a
large call is watched with); and that an exact large bind or restore stays untouched by its watch,
while user code held in a value trips it (tests/test_audit23_sealed_gate.py has the forgeries)."""

from __future__ import annotations

import pickle
import sys
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from forge_helpers import sized_world

from mooncake.reshard import _native
from mooncake.reshard.weight import bind_logical_transfer_plan
from mooncake.reshard.weight._planner import binding, bound_pickle, exactness


class Held:
    """Dict-backed (kind -1)."""

    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)


class Opaque:
    """Accepted as is (kind -2)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner


class SubHeld(Held):
    pass


class Slotless:
    """No instance dict, no slots: its instances are a bare object header on every version."""

    __slots__ = ()


class Text(str):
    pass


class Count(int):
    pass


class Mapping(dict):  # type: ignore[type-arg]
    pass


_KINDS = ((Held, -1), (Opaque, -2))
_SCALARS = (type(None), bool, int, float, str, bytes)


def _oracle(value: Any, depth: int = 0) -> bool:
    """The walk, by definition (no budget: the generated graphs are acyclic)."""
    kind = type(value)
    if kind in _SCALARS:
        return True
    if kind in (tuple, list, frozenset):
        return all(_oracle(item, depth + 1) for item in value)
    if kind is dict:
        return all(_oracle(key) and _oracle(item) for key, item in value.items())
    if kind is Opaque:
        return True
    if kind is Held:
        state = value.__dict__
        return type(state) is dict and all(type(key) is str and _oracle(item) for key, item in state.items())
    return False


def _held_with_key(key: Any, value: Any) -> Held:
    held = Held()
    held.__dict__[key] = value
    return held


def _held_with_state(state: dict[str, Any]) -> Held:
    held = Held()
    object.__setattr__(held, "__dict__", Mapping(state))
    return held


_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=False),
    st.text(max_size=2),
    st.binary(max_size=2),
    st.integers(-3, 3).map(Count),
    st.text(max_size=2).map(Text),
    st.just(Opaque(Text("x"))),
)


def _extend(children: Any) -> Any:
    return st.one_of(
        st.lists(children, max_size=3).map(tuple),
        st.lists(children, max_size=3),
        st.dictionaries(st.text(max_size=2), children, max_size=3),
        st.frozensets(st.integers(-3, 3) | st.text(max_size=2) | st.integers(-3, 3).map(Count), max_size=3),
        st.dictionaries(st.text(max_size=2), children, max_size=3).map(lambda state: Held(**state)),
        st.dictionaries(st.text(max_size=2), children, max_size=2).map(lambda state: SubHeld(**state)),
        st.dictionaries(st.text(max_size=2), children, max_size=2).map(_held_with_state),
        children.map(lambda value: _held_with_key(Text("k"), value)),
    )


_GRAPH = st.recursive(_LEAF, _extend, max_leaves=12)


@settings(max_examples=400, deadline=None)
@given(st.lists(_GRAPH, max_size=3).map(tuple))
def test_inert_graph_matches_the_oracle(roots: tuple[Any, ...]) -> None:
    assert _native.inert_graph(roots, _KINDS) is _oracle(roots)


def test_inert_graph_shared_and_cyclic_values() -> None:
    shared = Held(name="a", shape=(1, 2))
    assert _native.inert_graph(((shared,) * 1000, [shared]), _KINDS) is True
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    # every object is walked once (REVAL41): a cycle of plain containers is inert, as one through
    # a dict-backed instance was already (until then the budget ended this walk: False)
    assert _native.inert_graph((cyclic,), _KINDS) is True
    looped = Held()
    looped.self = looped
    assert _native.inert_graph((looped,), _KINDS) is True  # dict-backed instances are walked once


def test_inert_graph_layout_fields() -> None:
    logical, targets, sources, _memory = sized_world(2)
    classes = exactness._inert_classes()
    assert _native.inert_graph((logical, targets, sources), classes) is True
    fragment = logical.target_placement.fragments[0]
    object.__setattr__(fragment, "aliases", (Text("x"),))
    assert _native.inert_graph((logical,), classes) is False


@pytest.mark.parametrize(
    ("classes", "error"),
    [
        ([(Held, -1)], TypeError),
        (((Held,),), TypeError),
        (((Held, 3.0),), TypeError),
        (((Held, -3),), ValueError),
        (((Slotless, 2),), ValueError),  # smaller than two layout slots (a bare object header)
        (((1, -1),), TypeError),
        (tuple((Held, -1) for _ in range(65)), ValueError),
    ],
)
def test_inert_graph_refuses_a_malformed_class_table(classes: Any, error: type) -> None:
    with pytest.raises(error):
        _native.inert_graph((), classes)


def test_inert_graph_roots_must_be_a_tuple() -> None:
    with pytest.raises(TypeError):
        _native.inert_graph([1], _KINDS)


def _foreign() -> int:
    return 1


def test_code_watch_trips_on_foreign_frames_only() -> None:
    codes = _native.CodeSet((exactness.untouched.__code__,))
    assert exactness.untouched.__code__ in codes and _foreign.__code__ not in codes and 1 not in codes
    assert len(codes) == 1
    if sys.gettrace() is not None or sys.getprofile() is not None:
        pytest.skip("a trace or profile hook is set")
    watch = _native.CodeWatch(codes)
    sys.setprofile(watch)
    try:
        exactness.untouched(None)
        len(())  # a C call: ignored
        clean = watch.tripped
        _foreign()
        tripped = watch.tripped
    finally:
        sys.setprofile(None)
    assert clean is False and tripped is True


def test_code_watch_refuses_malformed_calls() -> None:
    watch = _native.CodeWatch(_native.CodeSet(()))
    with pytest.raises(TypeError):
        watch(None, "call", None)  # a call event's frame must be a frame
    with pytest.raises(TypeError):
        watch(sys._getframe(), 1, None)
    with pytest.raises(TypeError):
        watch(sys._getframe(), "call")
    assert watch(None, "return", None) is None and watch.tripped is False
    with pytest.raises(TypeError):
        _native.CodeWatch(())
    with pytest.raises(TypeError):
        _native.CodeSet((1,))
    with pytest.raises(TypeError):
        _native.CodeSet([_foreign.__code__])


def test_package_code_set_covers_the_lazy_modules() -> None:
    codes = exactness._package_codes()
    assert bound_pickle._restore_record.__code__ in codes
    assert binding._bind_logical_transfer_plan.__code__ in codes
    assert _foreign.__code__ not in codes


def test_start_watch_declines_small_calls_and_set_hooks() -> None:
    if sys.gettrace() is not None or sys.getprofile() is not None:
        pytest.skip("a trace or profile hook is set")
    assert exactness.start_watch(False) is None
    assert exactness.untouched(None) is True
    sys.setprofile(lambda *args: None)
    try:
        assert exactness.start_watch(True) is None
        assert exactness.untouched(None) is False
    finally:
        sys.setprofile(None)
    watch = exactness.start_watch(True)
    try:
        assert sys.getprofile() is watch and exactness.untouched(watch)
    finally:
        exactness.stop_watch(watch)
    assert sys.getprofile() is None and not exactness.untouched(watch)


def _watch_of(monkeypatch: pytest.MonkeyPatch, module: Any) -> list[Any]:
    """Collects the watches ``module``'s calls start. The spy's own frame starts before the watch
    is installed, and the call's ``stop_watch`` removes it: what it saw is final by then."""
    seen: list[Any] = []
    real = module.start_watch

    def spy(large: bool) -> Any:
        watch = real(large)
        seen.append(watch)
        return watch

    monkeypatch.setattr(module, "start_watch", spy)
    return seen


def _large_world() -> tuple[Any, Any, Any]:
    logical, targets, sources, _memory = sized_world(140)
    assert len(logical.operations) >= binding._WATCH_MIN
    return logical, targets, sources


def test_large_exact_bind_and_restore_stay_untouched(monkeypatch: pytest.MonkeyPatch) -> None:
    if sys.gettrace() is not None or sys.getprofile() is not None:
        pytest.skip("a trace or profile hook is set: no call is watched")
    logical, targets, sources = _large_world()
    bound = _watch_of(monkeypatch, binding)
    plan = bind_logical_transfer_plan(logical, targets, source_bindings=sources)
    assert sys.getprofile() is None
    assert len(bound) == 1 and bound[0] is not None and bound[0].tripper is None
    data = pickle.dumps(plan, protocol=pickle.HIGHEST_PROTOCOL)
    monkeypatch.setattr(bound_pickle, "_WATCH_MIN_ENTRIES", 1)
    restored = _watch_of(monkeypatch, bound_pickle)
    again = pickle.loads(data)
    assert sys.getprofile() is None
    assert len(restored) == 1 and restored[0] is not None and restored[0].tripper is None
    assert again == plan


def test_large_bind_with_user_code_in_a_value_trips_and_binds_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    if sys.gettrace() is not None or sys.getprofile() is not None:
        pytest.skip("a trace or profile hook is set: no call is watched")
    calls = []

    class Loud(str):
        def __eq__(self, other: object) -> bool:
            calls.append(1)
            return str.__eq__(self, other)

        __hash__ = str.__hash__

    logical, targets, sources = _large_world()
    expected = bind_logical_transfer_plan(logical, targets, source_bindings=sources)
    object.__setattr__(logical, "resource_id", Loud(logical.resource_id))
    bound = _watch_of(monkeypatch, binding)
    plan = bind_logical_transfer_plan(logical, targets, source_bindings=sources)
    assert sys.getprofile() is None
    assert calls and len(bound) == 1 and bound[0].tripped is True
    assert plan == expected


def test_code_set_admits_the_files_of_its_code_but_not_generated_code() -> None:
    """A package function the set was collected without (monkeypatched out at the time) is
    admitted by its file; code generated from a string only by its own code object."""
    generated: dict[str, Any] = {}
    exec("def made():\n    return 1\n", generated)
    codes = _native.CodeSet((exactness.untouched.__code__, generated["made"].__code__))
    assert exactness.stop_watch.__code__ in codes  # same file as untouched
    assert binding._sealed.__code__ not in codes  # another file of the package
    other: dict[str, Any] = {}
    exec("def made():\n    return 2\n", other)
    assert generated["made"].__code__ in codes and other["made"].__code__ not in codes


def test_a_monitoring_tool_unseals(monkeypatch: pytest.MonkeyPatch) -> None:
    """(CPython 3.12+ ``sys.monitoring``; emulated here on older versions.) A registered tool
    is treated as a hook: no watch starts and nothing counts as untouched."""

    class Monitoring:
        def __init__(self, registered: int) -> None:
            self.registered = registered

        def get_tool(self, tool: int) -> Any:
            return "coverage" if tool == self.registered else None

    if sys.gettrace() is not None or sys.getprofile() is not None:
        pytest.skip("a trace or profile hook is set")
    monkeypatch.setattr(exactness, "_MONITORING", Monitoring(5))
    assert not exactness.no_monitoring_tools() and not binding._no_hooks()
    assert exactness.start_watch(True) is None and not exactness.untouched(None)
    monkeypatch.setattr(exactness, "_MONITORING", Monitoring(6))  # (ids 6 and 7: settrace, setprofile)
    assert exactness.no_monitoring_tools() and binding._no_hooks()

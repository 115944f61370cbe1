"""``_native.all_instances`` (csrc/planobj.c) against ``all(map(isinstance, items, repeat(cls)))``,
and the planner's step 2 (source kind) that uses it."""

from __future__ import annotations

from itertools import repeat
from typing import Any

import pytest
from hypothesis import given, strategies as st

from mooncake.reshard import _native
from mooncake.reshard.weight._planner.core import _all_instances


class Base:
    pass


class Child(Base):
    pass


class Other:
    pass


def _builtin(items: Any, cls: type) -> bool:
    return all(map(isinstance, items, repeat(cls)))


KINDS = [Base, Child, Other, int, str, bool, type(None)]


def _value(kind: type) -> Any:
    return {int: 7, str: "x", bool: True, type(None): None}.get(kind, None) if kind in (int, str, bool, type(None)) else kind()


@given(st.lists(st.sampled_from(KINDS), max_size=60), st.sampled_from([Base, Child, Other, int, object]), st.booleans())
def test_matches_builtin(kinds: list[type], cls: type, as_tuple: bool) -> None:
    items: Any = [_value(kind) for kind in kinds]
    if as_tuple:
        items = tuple(items)
    assert _native.all_instances(items, cls) is _builtin(items, cls)
    assert _all_instances(items, cls) is _builtin(items, cls)


def test_other_containers_decline() -> None:
    assert _native.all_instances({1, 2}, int) is None
    assert _native.all_instances(range(3), int) is None
    assert _native.all_instances(iter([1]), int) is None

    class MyList(list):  # type: ignore[type-arg]
        pass

    assert _native.all_instances(MyList([1, "a"]), int) is None
    assert _all_instances(MyList([1, "a"]), int) is False
    assert _all_instances({1, 2}, int) is True
    assert _all_instances(iter(["a"]), int) is False


def test_bad_arguments() -> None:
    with pytest.raises(TypeError):
        _native.all_instances([1])  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        _native.all_instances([1], int, int)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        _native.all_instances(["a"], 5)  # not a class: isinstance's own error
    with pytest.raises(TypeError):
        _builtin(["a"], 5)  # type: ignore[arg-type]
    # an exact match never consults the second argument, as isinstance
    assert _native.all_instances([], 5) is True
    assert _native.all_instances((), int) is True


def test_hooks_run_in_order_and_may_mutate_the_list() -> None:
    """A metaclass ``__instancecheck__`` runs for items of other types, in order, stopping at the
    first False; a hook that shrinks or grows the list is seen as all() over its iterator sees it."""
    calls: list[Any] = []

    class Meta(type):
        def __instancecheck__(cls, obj: Any) -> bool:
            calls.append(obj)
            if obj == "shrink":
                del items[2:]
            if obj == "grow":
                items.append("tail")
            return obj != "stop"

    class Hooked(metaclass=Meta):
        pass

    items: list[Any] = [1, "shrink", 3, 4]
    assert _native.all_instances(items, Hooked) is True and calls == [1, "shrink"]
    calls.clear()
    items = [1, "grow", "stop", "never"]
    assert _native.all_instances(items, Hooked) is False and calls == [1, "grow", "stop"]
    calls.clear()
    items = [1, "grow", "stop", "never"]
    assert _builtin(items, Hooked) is False and calls == [1, "grow", "stop"]

    class Boom(type):
        def __instancecheck__(cls, obj: Any) -> bool:
            raise RuntimeError("hook")

    class Raising(metaclass=Boom):
        pass

    exact = object.__new__(Raising)
    assert _native.all_instances([exact, exact], Raising) is True  # exact type: no hook
    with pytest.raises(RuntimeError, match="hook"):
        _native.all_instances([exact, 1], Raising)


def test_class_property_is_consulted_like_isinstance() -> None:
    class Liar:
        @property  # type: ignore[misc]
        def __class__(self) -> type:  # noqa: D401
            return Base

    liar = Liar()
    assert isinstance(liar, Base)
    assert _native.all_instances([Base(), liar], Base) is True
    assert _native.all_instances([Base(), liar, Other()], Base) is False


def test_source_kind_message_unchanged() -> None:
    """A source fragment of another type (forged into a placement) still gives step 2's message."""
    from planner_helpers import tp_placement
    from layout_model import TensorSpec
    from mooncake.reshard.weight import plan_placement_transfer

    spec = TensorSpec("w", (4, 4))
    source = tp_placement("src", spec, 2, 0)
    target = tp_placement("dst", spec, 4, 0)
    forged = object.__new__(type(source))
    forged.__dict__.update(source.__dict__)
    object.__setattr__(forged, "fragments", tuple(source.fragments) + ("not a fragment",))
    with pytest.raises(ValueError, match="source fragments mix placement and stored locations"):
        plan_placement_transfer(forged, target)

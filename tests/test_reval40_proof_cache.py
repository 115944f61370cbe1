"""REVAL40: ``_native.fields_unshadowed`` decodes a specs tuple once and keeps, per spec, the
MRO tuple it last walked (with the classes it walks and that their dicts hold exact str keys
only); it reads each class's ``__mro__``, flags, attribute lookup, dicts and every name again on
each call. These cases edit what is kept between calls (the MRO through ``__bases__``, the class
dicts) after a first accepted call and check that the proof follows, and that the outcome does
not depend on whether the specs tuple was decoded before (a fresh tuple of the same specs
decides the same)."""

from __future__ import annotations

from typing import Any

import pytest

from mooncake.reshard import _native
from mooncake.reshard.weight._planner import bound_contracts as bc


def _fresh(specs: tuple[Any, ...]) -> tuple[Any, ...]:
    """An equal specs tuple that is another object (decoded again)."""
    return tuple(tuple(spec) for spec in specs)


def _both(specs: tuple[Any, ...]) -> bool:
    """The outcome for specs (decoded already, or not) and for a fresh copy, which must agree."""
    warm = _native.fields_unshadowed(specs)
    cold = _native.fields_unshadowed(_fresh(specs))
    again = _native.fields_unshadowed(specs)
    assert warm is cold is again
    return warm


class _Plain:
    pass


def _classes() -> tuple[type, type, type]:
    class Base:
        pass

    class Other:
        pass

    class Value(Base):
        x = 1  # (a plain default: harmless for a dict-backed class)

    return Base, Other, Value


def test_state_fields_hold_warm_and_cold() -> None:
    assert _both(bc._STATE_FIELDS) is True


@pytest.mark.parametrize("planted", ["property", "plain", "classmethod"])
def test_bases_reassigned_to_a_class_holding_the_name(planted: str) -> None:
    base, other, value = _classes()
    specs = ((value, ("x", "y")),)
    assert _both(specs) is True
    if planted == "property":
        other.y = property(lambda self: 0)  # type: ignore[attr-defined]
    elif planted == "plain":
        other.y = 5  # type: ignore[attr-defined]
    else:
        other.y = classmethod(lambda cls: 0)  # type: ignore[attr-defined]
    value.__bases__ = (other,)
    # a plain value in a dict-backed MRO loses to the instance dict; a descriptor does not
    assert _both(specs) is (planted == "plain")
    value.__bases__ = (base,)
    assert _both(specs) is True


def test_bases_reassigned_to_a_class_with_a_non_str_key() -> None:
    base, other, value = _classes()
    specs = ((value, ("x",)),)
    assert _both(specs) is True
    # (a non-str key in a class dict: only through the class body's namespace)
    odd = type("Odd", (), {})
    vars_of = {1: "one"}
    odd2 = type.__new__(type, "Odd2", (), dict(vars_of))
    value.__bases__ = (odd2,)
    assert _both(specs) is False
    value.__bases__ = (odd,)
    assert _both(specs) is True
    value.__bases__ = (base,)
    assert _both(specs) is True


def test_property_planted_on_a_base_after_a_warm_call() -> None:
    base, _other, value = _classes()
    specs = ((value, ("x", "y")),)
    assert _both(specs) is True
    base.y = property(lambda self: 0)  # type: ignore[attr-defined]
    assert _both(specs) is False
    del base.y  # type: ignore[attr-defined]
    assert _both(specs) is True


def test_getattribute_and_absent_and_pins_after_a_warm_call() -> None:
    _base, _other, value = _classes()
    pin = lambda self, other: True  # noqa: E731
    value.__eq__ = pin  # type: ignore[method-assign]
    specs = ((value, ("x",), (("__eq__", pin),), ("__ne__",)),)
    assert _both(specs) is True
    value.__ne__ = lambda self, other: False  # type: ignore[method-assign]
    assert _both(specs) is False
    del value.__ne__
    assert _both(specs) is True
    value.__eq__ = lambda self, other: False  # type: ignore[method-assign]
    assert _both(specs) is False
    value.__eq__ = pin  # type: ignore[method-assign]
    assert _both(specs) is True
    value.__getattr__ = lambda self, name: 0  # type: ignore[attr-defined]
    assert _both(specs) is False
    del value.__getattr__  # type: ignore[attr-defined]
    assert _both(specs) is True


def test_malformed_specs_decline_and_do_not_poison_the_cache() -> None:
    good = ((_Plain, ("a",)),)
    assert _both(good) is True
    for bad in (
        ((_Plain, ("a", 1)),),
        ((_Plain, ["a"]),),
        ((_Plain, ("a",), (("b",),), ()),),
        ((_Plain, ("a",), (), (2,)),),
        ((_Plain,),),
        (3,),
        ((1, ("a",)),),
    ):
        assert _native.fields_unshadowed(bad) is False
        assert _native.fields_unshadowed(good) is True
    assert _native.fields_unshadowed(bc._STATE_FIELDS) is True

"""``_native.inert_graph`` keeps the layout classes whose ``__basicsize__`` held their field count
(RESTORE39: read once per class, not per call). A class of metaclass exactly ``type`` keeps its
size for life; a larger kind asked later is checked again; a class of another metaclass (whose
``__basicsize__`` could be anything) is asked on every call."""

from __future__ import annotations

import pytest

from mooncake.reshard import _native
from mooncake.reshard.weight._planner.exactness import _inert_classes


class _Small:
    __slots__ = ("a",)


_ASKED: list[str] = []


class _Meta(type):
    def __getattribute__(cls, name: str):  # type: ignore[no-untyped-def]
        if name == "__basicsize__":
            _ASKED.append(name)
        return type.__getattribute__(cls, name)


class _Metered(metaclass=_Meta):
    __slots__ = ("a", "b")


def test_a_class_too_small_is_refused_on_every_call() -> None:
    fields = (_Small.__basicsize__ - object.__basicsize__) // 8
    assert _native.inert_graph((1,), ((_Small, fields),)) is True
    assert _native.inert_graph((1,), ((_Small, fields),)) is True  # (kept)
    for _ in range(2):  # a larger kind than the one kept is checked again
        with pytest.raises(ValueError, match="smaller than its field count"):
            _native.inert_graph((1,), ((_Small, fields + 4),))


def test_another_metaclass_is_asked_every_call() -> None:
    _ASKED.clear()
    for _ in range(3):
        assert _native.inert_graph((1,), ((_Metered, 2),)) is True
    assert len(_ASKED) == 3


def test_the_package_table_answers_as_before() -> None:
    classes = _inert_classes()
    for _ in range(3):
        assert _native.inert_graph((1, "x", (None,)), classes) is True
        assert _native.inert_graph((1, [object()]), classes) is False

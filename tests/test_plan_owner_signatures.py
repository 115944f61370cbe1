"""``_native.owner_signatures`` (csrc/planobj.c) against the Python form ``_tensor_signatures``
over hostile descriptors: sequences of tensors whose owner kinds repeat or change (the previous
signature is reused only for equal exact-str kinds), non-str and str-subclass kinds, more parallel
axes than gathered without a list (16), axes whose kind raises."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, strategies as st

from mooncake.reshard import _native
from mooncake.reshard.weight._planner import ownership
from mooncake.reshard.weight.types import OwnershipAxis, ReplicatedAxis


class _T:
    def __init__(self, axes: Any) -> None:
        self.parallel_axes = axes


class _Str(str):
    pass


class _Owner(OwnershipAxis):
    pass


def _owner(kind: Any) -> OwnershipAxis:
    axis = OwnershipAxis("dp")
    object.__setattr__(axis, "kind", kind)  # forged: any value
    return axis


KIND_VALUES = ["dp", "ep", "tp", "pp", _Str("dp"), _Str("ep"), 3, ("dp",)]


@st.composite
def axes_st(draw: Any) -> tuple[Any, ...]:
    count = draw(st.sampled_from([0, 1, 2, 3, 16, 17, 20]))
    axes = []
    for _ in range(count):
        choice = draw(st.integers(0, 4))
        if choice == 0:
            axes.append(ReplicatedAxis("tp"))
        elif choice == 1:
            axes.append(_Owner("ep"))
        else:
            axes.append(_owner(draw(st.sampled_from(KIND_VALUES))))
    return tuple(axes)


@given(st.lists(axes_st(), max_size=12))
def test_signatures_equal_the_python_form(all_axes: list[tuple[Any, ...]]) -> None:
    tensors = {f"t{i}": _T(axes) for i, axes in enumerate(all_axes)}
    expected: Any = ownership._tensor_signatures(tensors)  # type: ignore[arg-type]
    native = _native.owner_signatures(tensors, OwnershipAxis)
    assert native == expected and list(native) == list(expected)
    # kinds keep their objects (a str subclass stays one) and their order
    for tid, (kinds, _) in native.items():
        assert [type(k) for k in kinds] == [type(k) for k in expected[tid][0]]


def test_equal_kinds_of_other_types_are_not_reused() -> None:
    a, b = _T((_owner("dp"),)), _T((_owner(_Str("dp")),))
    native = _native.owner_signatures({"a": a, "b": b, "c": a}, OwnershipAxis)
    assert type(native["b"][0][0]) is _Str and type(native["a"][0][0]) is str
    assert native["a"] is native["c"]  # reused for equal exact strs


def test_raising_kind_propagates() -> None:
    class Boom(OwnershipAxis):
        @property  # type: ignore[misc]
        def kind(self) -> str:
            raise RuntimeError("kind")

    axis = object.__new__(Boom)
    for count in (1, 17):
        axes = (OwnershipAxis("ep"),) * (count - 1) + (axis,)
        with pytest.raises(RuntimeError, match="kind"):
            _native.owner_signatures({"a": _T((OwnershipAxis("ep"),)), "b": _T(axes)}, OwnershipAxis)

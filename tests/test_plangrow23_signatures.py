"""``_native.owner_signatures`` (csrc/planobj.c) makes the map of a run of tensors that all share
one signature object at the end, with ``dict.fromkeys``, and switches to inserting one by one at the
first other signature. Held to the Python form ``_tensor_signatures`` wherever that switch happens
(first, second, middle, last tensor, never), over str keys and over keys with one shared hash whose
``__eq__`` is Python code (the table is then not a str-keys table and inserting compares keys), plus
a pass that stops (a non-tuple ``parallel_axes``, a raising kind) after a shared run."""

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


class _Key:
    """A key whose hash is shared by every key and whose ``==`` is Python code (identity)."""

    compared = 0

    def __init__(self, name: str) -> None:
        self.name = name

    def __hash__(self) -> int:
        return 7

    def __eq__(self, other: object) -> bool:
        _Key.compared += 1
        return self is other

    def __repr__(self) -> str:
        return f"_Key({self.name})"


EP = (ReplicatedAxis("dp"), OwnershipAxis("ep"))
TP = (OwnershipAxis("tp"),)
DP = (OwnershipAxis("dp"), OwnershipAxis("ep"))


def _check(tensors: dict[Any, Any]) -> None:
    expected: Any = ownership._tensor_signatures(tensors)
    native = _native.owner_signatures(tensors, OwnershipAxis)
    assert native == expected
    assert type(native) is dict
    # the very key objects, in the map's order
    assert all(a is b for a, b in zip(native, tensors)) and len(native) == len(tensors)
    # equal exact-str kinds in a row share one signature object (as before)
    values = list(native.values())
    for i in range(1, len(values)):
        if values[i] == values[i - 1]:
            assert values[i] is values[i - 1]


@given(
    st.integers(0, 40),
    st.lists(st.sampled_from(["ep", "tp", "dp"]), max_size=6),
    st.booleans(),
)
def test_shared_run_then_others(count: int, tail: list[str], odd_keys: bool) -> None:
    kinds = {"ep": EP, "tp": TP, "dp": DP}
    axes = [EP] * count + [kinds[k] for k in tail]
    keys: list[Any] = [_Key(f"t{i}") for i in range(len(axes))] if odd_keys else [f"t{i}" for i in range(len(axes))]
    _check({key: _T(a) for key, a in zip(keys, axes)})


@pytest.mark.parametrize("at", [0, 1, 500, 998, 999, None])
def test_switch_position(at: Any) -> None:
    axes = [EP] * 1000
    if at is not None:
        axes[at] = TP
    _check({f"tensor-{i:05d}": _T(a) for i, a in enumerate(axes)})


def test_shared_hash_keys_compare_as_the_python_form_does() -> None:
    keys = [_Key(str(i)) for i in range(30)]
    tensors = {key: _T(EP) for key in keys}
    _Key.compared = 0
    native = _native.owner_signatures(tensors, OwnershipAxis)
    assert _Key.compared > 0  # the inserts compared keys (Python code ran), and found each new
    assert list(native) == keys
    assert all(value is native[keys[0]] for value in native.values())


def test_stop_after_a_shared_run() -> None:
    tensors = {f"t{i}": _T(EP) for i in range(50)}
    tensors["bad"] = _T([OwnershipAxis("ep")])  # not a tuple: the Python form decides
    assert _native.owner_signatures(tensors, OwnershipAxis) is None

    class Boom(OwnershipAxis):
        @property  # type: ignore[misc]
        def kind(self) -> str:
            raise RuntimeError("kind")

    tensors = {f"t{i}": _T(EP) for i in range(50)}
    tensors["boom"] = _T((object.__new__(Boom),))
    with pytest.raises(RuntimeError, match="kind"):
        _native.owner_signatures(tensors, OwnershipAxis)


def test_empty() -> None:
    native = _native.owner_signatures({}, OwnershipAxis)
    assert native == {} and type(native) is dict

"""COV37 (session 37): ``_native.regions_canonical`` reads the ``nbytes`` of a bound fragment's
binding that is a ``RuntimeBindingFragment`` in its accepted C-owned layout from its slot (as the
other readers of runtime fragments do, layout.h mr_runtime_state_get), instead of asking for its
instance dict (an AttributeError raised and cleared per read) and then a getattr.

Oracle: the same operation whose binding is a plain object (not one of the predicate's plain
types: read with getattr, the path every such binding took before) holding the same attribute,
or none when the slot is empty. Forged values: hypothesis over ints in and out of range, int and
str subclasses, other kinds, an emptied slot; the binding also stands directly as a side.
"""

from __future__ import annotations

import types
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from forge_helpers import sized_world
from spec_helpers import IntSub, StrSub, field_state, forged_instance

from mooncake.reshard import _native
from mooncake.reshard.contracts.fragments import RuntimeBindingFragment
from mooncake.reshard.weight import bind_logical_transfer_plan
from mooncake.reshard.weight._planner.fragments import BoundWeightFragment
from mooncake.reshard.weight._planner.region_check import _PLAIN_TYPES

_EMPTY = object()


def _proven(operations: tuple[Any, ...]) -> int:
    return _native.regions_canonical(operations, 0, BoundWeightFragment, _PLAIN_TYPES)


def _operation() -> Any:
    logical, targets, sources, _memory = sized_world(2)
    plan = bind_logical_transfer_plan(logical, targets, source_bindings=sources)
    op = plan.operations[0]
    assert type(op.source) is BoundWeightFragment and type(op.source.binding) is RuntimeBindingFragment
    assert _native.layout_info(RuntimeBindingFragment) is not None  # (a C-owned layout)
    return op


def _with(obj: Any, **changes: Any) -> Any:
    clone = forged_instance(type(obj), dict(field_state(obj)))
    for name, value in changes.items():
        if value is _EMPTY:
            object.__delattr__(clone, name)
        else:
            object.__setattr__(clone, name, value)
    return clone


def _stand_in(binding: Any) -> Any:
    """A plain object with the binding's attributes (an empty slot: no attribute)."""
    return types.SimpleNamespace(**field_state(binding))


def _pair(op: Any, side: str, nbytes: Any) -> tuple[int, int]:
    fragment = getattr(op, side)
    binding = _with(fragment.binding, nbytes=nbytes)
    slots = _with(op, **{side: _with(fragment, binding=binding)})
    oracle = _with(op, **{side: _with(fragment, binding=_stand_in(binding))})
    return _proven((slots,)), _proven((oracle,))


def test_the_unforged_operation_is_proven_both_ways():
    op = _operation()
    for side in ("source", "target"):
        fragment = getattr(op, side)
        assert _pair(op, side, fragment.binding.nbytes) == (1, 1)


_VALUES = st.one_of(
    st.integers(-3, 1 << 70),
    st.integers(0, 4096),
    st.builds(IntSub, st.integers(0, 4096)),
    st.builds(StrSub, st.sampled_from(("8", "x"))),
    st.sampled_from((None, 8.0, "8", (8,), _EMPTY)),
)


@settings(max_examples=60, deadline=None)
@given(side=st.sampled_from(("source", "target")), nbytes=_VALUES)
def test_forged_binding_nbytes_agrees_with_attribute_reads(side, nbytes):
    slots, oracle = _pair(_operation(), side, nbytes)
    assert slots == oracle


def test_right_nbytes_stays_proven_and_an_empty_slot_is_not():
    op = _operation()
    right = op.target.binding.nbytes
    assert _pair(op, "target", right) == (1, 1)
    assert _pair(op, "target", _EMPTY) == (0, 0)
    assert _pair(op, "target", right + 1) == (0, 0)


def test_a_binding_standing_as_a_side_reads_no_other_name():
    # not a fragment box: tensor_id / global_offset / local_shape are no runtime fields (getattr
    # finds none either): not proven, both ways
    op = _operation()
    binding = op.target.binding
    assert _proven((_with(op, target=binding),)) == 0
    assert _proven((_with(op, target=_stand_in(binding)),)) == 0

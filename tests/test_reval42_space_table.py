"""REVAL42: ``_native.revalidate_spaces`` keeps its source allocations in a C table (space
number, storage_address, storage_nbytes) from 64 operations on, while every space and allocation
is plain and every allocation is two exact ints in [-2**63, 2**64); on the first value outside
that case it rebuilds the sets of tuples it used before and goes on with them. The decision must
stay the set version's: checked against ``test_native_revalidate``'s Python reference on plans
of 80 operations (the table's size), with allocations forged to equal values of other types
(float, bool, an int subclass), ints beyond int64 and beyond uint64, str and None, equal but not
identical space items, and source/target allocations made to coincide before, at and after the
point where the table is left."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from test_native_revalidate import _bound_plan, _forge, _scan, _spaces_reference

from mooncake.reshard import _native
from mooncake.reshard.contracts.fragments import RuntimeBindingFragment
from mooncake.reshard.weight import PlacementFragment
from mooncake.reshard.weight._planner.fragments import BoundWeightFragment

_TENSORS = tuple(f"t{i}" for i in range(20))
_PLANS = {
    "split": _bound_plan(tensors=_TENSORS, target_tp=4, shape=(4, 8)),  # quick: whole target fragments
    "plain": _bound_plan(tensors=_TENSORS),
    "shared": _bound_plan(tensors=_TENSORS, shared=True),
}


class _Int(int):
    pass


class _Str(str):
    pass


def _values(value: Any) -> list[Any]:
    """Values equal (or not) to an allocation item, of every class the table must leave for."""
    if type(value) is not int:
        return [value, None, 0]
    return [value, float(value), _Int(value), str(value), None, True, value + 2**63, 2**64 - 1, 2**64 + value,
            -1, -(2**63) - 1, -(2**63), 2**63 - 1]


def _decide(frags: list[Any], source_of: list[int], target_of: list[int], boxes: Any, physical: bool,
            typed: bool) -> Any:
    extra = (RuntimeBindingFragment, PlacementFragment) if typed else ()
    try:
        return _native.revalidate_spaces(frags, source_of, target_of, boxes, physical, *extra)
    except Exception:
        return "error"


def _agree(frags: list[Any], source_of: list[int], target_of: list[int], boxes: Any) -> None:
    assert len(target_of) >= 64  # (the table's case)
    for physical in (True, False):
        try:
            reference: Any = _spaces_reference(frags, source_of, target_of, boxes, physical)
        except Exception:
            reference = "error"
        for typed in (False, True):
            native = _decide(frags, source_of, target_of, boxes, physical, typed)
            assert native is reference or native == reference == "error", (native, reference, physical, typed)


def _forge_binding(frags: list[Any], position: int, **changes: Any) -> None:
    fragment = frags[position]
    frags[position] = _forge(fragment, binding=_forge(fragment.binding, **changes))


def _coincide(frags: list[Any], target: int, source: int) -> None:
    """Target fragment ``target`` in the address space and allocation of source ``source``."""
    s = frags[source]
    frags[target] = _forge(frags[target], instance_id=s.instance_id, binding=_forge(
        frags[target].binding, worker_id=s.binding.worker_id, device=s.binding.device,
        storage_address=s.binding.storage_address, storage_nbytes=s.binding.storage_nbytes))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(_PLANS)), data=st.data())
def test_space_table_against_python(name: str, data: Any) -> None:
    frags, source_of, target_of, boxes = _scan(_PLANS[name].operations)
    frags = list(frags)
    for _ in range(data.draw(st.integers(0, 3))):
        side = data.draw(st.sampled_from((source_of, target_of)))
        position = side[data.draw(st.integers(0, len(side) - 1))]
        kind = data.draw(st.integers(0, 3))
        binding = frags[position].binding
        if kind == 0:
            field = data.draw(st.sampled_from(("storage_address", "storage_nbytes")))
            _forge_binding(frags, position, **{field: data.draw(st.sampled_from(_values(getattr(binding, field))))})
        elif kind == 1:  # space items equal but not identical, or of a subclass
            field = data.draw(st.sampled_from(("worker_id", "device")))
            value = getattr(binding, field)
            _forge_binding(frags, position, **{field: data.draw(st.sampled_from(("".join(list(value)), _Str(value))))})
        elif kind == 2:
            target = target_of[data.draw(st.integers(0, len(target_of) - 1))]
            _coincide(frags, target, source_of[data.draw(st.integers(0, len(source_of) - 1))])
        else:  # the same allocation value in another class on both sides of a coincidence
            target = target_of[data.draw(st.integers(0, len(target_of) - 1))]
            source = source_of[data.draw(st.integers(0, len(source_of) - 1))]
            value = data.draw(st.sampled_from(_values(frags[source].binding.storage_address)))
            _forge_binding(frags, source, storage_address=value)
            _coincide(frags, target, source)
            _forge_binding(frags, target, storage_address=data.draw(st.sampled_from((value, float(value) if isinstance(
                value, int) else value, _Int(value) if isinstance(value, int) else value))))
    _agree(frags, source_of, target_of, boxes)


def test_space_table_left_before_during_and_after_the_coincidence() -> None:
    frags, source_of, target_of, boxes = _scan(_PLANS["split"].operations)
    sources = list(dict.fromkeys(source_of))
    targets = list(dict.fromkeys(target_of))
    base = list(frags)
    assert _native.revalidate_spaces(base, source_of, target_of, boxes, True) is True
    for leave_at in (None, sources[0], sources[-1], targets[0], targets[len(targets) // 2], targets[-1]):
        for value in (None, "x", 1.5, 2**64, 2**63 + 5, _Int(7)):
            for coincide_at in (targets[0], targets[len(targets) // 2], targets[-1]):
                forged = list(base)
                _coincide(forged, coincide_at, sources[len(sources) // 2])
                if leave_at is not None and leave_at != coincide_at:
                    _forge_binding(forged, leave_at, storage_nbytes=value)
                assert _native.revalidate_spaces(forged, source_of, target_of, boxes, True) is False
                _agree(forged, source_of, target_of, boxes)
    # Equal values of another class on the two sides coincide as in the sets (5 == 5.0 == _Int(5)).
    for source_value, target_value in ((5, 5.0), (5.0, 5), (_Int(5), 5), (5, True), (1, True), (2**63 + 1, 2**63 + 1),
                                       (2**64 + 1, 2**64 + 1), (-(2**63), -(2**63)), (2**64 - 1, 2**64 - 1),
                                       # (logged above 2**63 or negative, then rebuilt as sets: the same ints)
                                       (2**63 + 1, _Int(2**63 + 1)), (2**64 - 1, _Int(2**64 - 1)), (-5, _Int(-5)),
                                       (2**63, 2.0**63), (-(2**63), _Int(-(2**63)))):
        forged = list(base)
        source, target = sources[3], targets[-2]
        _forge_binding(forged, source, storage_address=source_value)
        _coincide(forged, target, source)
        _forge_binding(forged, target, storage_address=target_value)
        expected = source_value == target_value
        assert (_native.revalidate_spaces(forged, source_of, target_of, boxes, True) is False) == expected
        _agree(forged, source_of, target_of, boxes)
    # Unequal values that agree in their low 64 bits do not coincide.
    for source_value, target_value in ((-1, 2**64 - 1), (2**63, -(2**63)), (0, 2**64)):
        forged = list(base)
        source, target = sources[1], targets[1]
        _forge_binding(forged, source, storage_address=source_value)
        _coincide(forged, target, source)
        _forge_binding(forged, target, storage_address=target_value)
        assert _native.revalidate_spaces(forged, source_of, target_of, boxes, False) is True
        _agree(forged, source_of, target_of, boxes)


def test_space_table_spaces_by_equality() -> None:
    """Equal, not identical, space items number one space; another device another."""
    frags, source_of, target_of, boxes = _scan(_PLANS["split"].operations)
    sources = list(dict.fromkeys(source_of))
    targets = list(dict.fromkeys(target_of))
    forged = list(frags)
    _coincide(forged, targets[5], sources[5])
    t = forged[targets[5]]
    _forge_binding(forged, targets[5], worker_id="".join(list(t.binding.worker_id)),
                   device="".join(list(t.binding.device)))
    forged[targets[5]] = _forge(forged[targets[5]], instance_id="".join(list(t.instance_id)))
    assert _native.revalidate_spaces(forged, source_of, target_of, boxes, True) is False
    _forge_binding(forged, targets[5], device=t.binding.device + "-other")
    assert _native.revalidate_spaces(forged, source_of, target_of, boxes, True) is not False
    _agree(forged, source_of, target_of, boxes)


def test_bound_fragment_class_is_the_layout() -> None:
    frags, *_ = _scan(_PLANS["split"].operations)
    assert all(type(f) is BoundWeightFragment for f in frags)

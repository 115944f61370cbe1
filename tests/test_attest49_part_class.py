"""``_native.attest_many`` runs no Python code between its bindings (session 49).

Its tensor memo carries a tensor's id and itemsize from one binding to the next, which is sound
only while nothing can edit a tensor between them. The parts' ``fragments`` and ``tensors`` were
read by getattr, so a part of a subclass with a property ran code there: a property that doubled
a shared tensor's itemsize after the first binding loaded it left the second binding attested
with the old itemsize, where a fresh read (and the rules) decline it. Now the call takes the part
class (``part_cls``, as ``attestation.py`` passes it): a part of exactly that class is read from
its plain instance dict, any other part's binding is left to Python (None in the list). Without
``part_cls`` the parts are read by getattr and no binding shares the memo.
"""

from __future__ import annotations

from typing import Any, Callable, List, Tuple

import pytest

from test_binder20_tensor_memo import CLASSES, alone, shared_placement

from layout_model import build_runtime_bindings

from mooncake.reshard import _native
from mooncake.reshard.weight import WeightPlacementPart, WeightRuntimeBindingManifest


def _call(placement: Any, bindings: Tuple[Any, ...], *extra: Any) -> List[Any]:
    return _native.attest_many(
        *CLASSES, WeightRuntimeBindingManifest, placement, placement._part_index(), bindings,
        placement.resource_id, placement.placement_id, placement.digest, placement.revision, *extra,
    )


def _with_loud_part(placement: Any, index: int, action: Callable[[], None]) -> List[int]:
    """Part ``index`` made an instance of a subclass whose ``fragments`` property calls
    ``action``; returns the list its reads are counted in."""
    reads: List[int] = []

    class LoudPart(WeightPlacementPart):
        @property  # type: ignore[misc]
        def fragments(self) -> Any:
            reads.append(1)
            action()
            return self.__dict__["fragments"]

    object.__setattr__(placement.parts[index], "__class__", LoudPart)
    return reads


def _doubling(tensor: Any) -> Callable[[], None]:
    return lambda: object.__setattr__(tensor, "itemsize", tensor.itemsize * 2)


def test_exact_parts_are_decided_with_the_part_class() -> None:
    """The premise of the cases below: two parts listing the same tensor objects, both bindings
    decided, as attest_binding decides each alone."""
    placement = shared_placement(16, 2)
    bindings = build_runtime_bindings(placement)
    assert placement.parts[0].tensors[3] is placement.parts[1].tensors[3]
    got = _call(placement, bindings, None, WeightPlacementPart)
    assert got == [alone(placement, binding) for binding in bindings]
    assert all(item is not None for item in got)


@pytest.mark.parametrize("extra", [(), (None,), (None, None)], ids=["13 arguments", "no snapshot class", "None"])
def test_without_the_part_class_a_part_edit_is_seen_by_the_next_binding(extra: Tuple[Any, ...]) -> None:
    placement = shared_placement(16, 2)
    bindings = build_runtime_bindings(placement)
    second = placement._part_index()[bindings[1].participant_id]
    reads = _with_loud_part(placement, placement.parts.index(second), _doubling(second.tensors[3]))
    got = _call(placement, bindings, *extra)
    assert reads == [1]  # read by getattr, inside the call
    # the first binding was decided before the edit; the second loads its tensors afresh and
    # sees the doubled itemsize (sharing the memo, it was decided with the old one)
    assert got[0] is not None and got[1] is None


def test_a_part_of_a_subclass_is_left_to_python_with_the_part_class() -> None:
    placement = shared_placement(16, 2)
    bindings = build_runtime_bindings(placement)
    second = placement._part_index()[bindings[1].participant_id]
    tensor = second.tensors[3]
    itemsize = tensor.itemsize
    reads = _with_loud_part(placement, placement.parts.index(second), _doubling(tensor))
    got = _call(placement, bindings, None, WeightPlacementPart)
    assert reads == [] and tensor.itemsize == itemsize  # no code ran in the call
    assert got[0] is not None and got[1] is None


def test_a_part_whose_dict_is_not_plain_is_left_to_python() -> None:
    placement = shared_placement(16, 2)
    bindings = build_runtime_bindings(placement)

    class Key(str):
        __hash__ = str.__hash__

        def __eq__(self, other: object) -> bool:
            return str.__eq__(self, other)

    second = placement._part_index()[bindings[1].participant_id]
    state = second.__dict__
    value = state.pop("rank")
    state[Key("rank")] = value  # a str-subclass key: a probe of this dict may run its __eq__
    got = _call(placement, bindings, None, WeightPlacementPart)
    assert got[0] is not None and got[1] is None
    del state["rank"]
    state["rank"] = value
    assert all(item is not None for item in _call(placement, bindings, None, WeightPlacementPart))


def test_bind_refuses_what_the_rules_refuse_with_a_subclassed_part() -> None:
    """Through ``_attest_many`` (bind's step 6): the subclassed part's binding is attested in
    Python, where the property runs and the doubled itemsize is refused, as the rules refuse it."""
    from mooncake.reshard.weight._planner.attestation import _attest_many

    placement = shared_placement(16, 2)
    bindings = build_runtime_bindings(placement)
    second = placement._part_index()[bindings[1].participant_id]
    reads = _with_loud_part(placement, placement.parts.index(second), _doubling(second.tensors[3]))
    with pytest.raises(ValueError):
        _attest_many(placement, bindings)
    assert reads  # read in Python, after the C call

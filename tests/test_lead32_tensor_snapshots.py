"""Session 32 (lead): binding's step 4 (tensor snapshots) decided by identity.

``binding._check_tensor_snapshots`` is the rule-by-rule step: the plan's descriptors by tensor id
(no two with one id) equal the source placement's and those of the selected target parts. At
10^6 fragments its dicts cost about 6 % of binding, so an exact plan first asks
``_native.tensor_maps_match``: True only when every descriptor compared is the plan's own object
(ids distinct, every one listed), else None and the dicts are built as before. The oracle below is
the two dict comparisons; the C answer must never be True where they differ, and binding must
raise the rule-by-rule step's errors on forged plans.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_executor import HostMemory, host_bindings, tp_placement

from mooncake.reshard import _native
from mooncake.reshard.weight._planner import binding
from mooncake.reshard.weight.planner import bind_logical_transfer_plan, plan_placement_transfer
from mooncake.reshard.weight.types import TensorDescriptor

_TENSORS = ("a", "b", "c", "d")


def _setup() -> tuple[Any, Any, Any, Any]:
    source = tp_placement(2, prefix="s", dp=2, shape=(4, 8), tensors=_TENSORS)
    target = tp_placement(4, prefix="t", shape=(4, 8), tensors=_TENSORS)
    logical = plan_placement_transfer(source, target)
    memory = HostMemory()
    return (
        logical,
        source,
        host_bindings(source, memory, prefix="src"),
        host_bindings(target, memory, prefix="dst"),
    )


def _participants(logical: Any) -> set[Any]:
    return {executor.participant_id for executor in logical.target_executors}


def _oracle(tensors: Any, groups: Any) -> bool:
    mapping: dict[str, Any] = {}
    for tensor in tensors:
        if tensor.tensor_id in mapping:
            return False
        mapping[tensor.tensor_id] = tensor
    return mapping == {tensor.tensor_id: tensor for group in groups for tensor in group}


def _c(tensors: Any, groups: Any) -> Any:
    return _native.tensor_maps_match(tensors, groups, TensorDescriptor)


def _copy(tensor: Any) -> Any:
    """An equal descriptor that is another object."""
    return dataclasses.replace(tensor)


def _other(tensor: Any) -> Any:
    """A descriptor with the same id that is not equal."""
    return dataclasses.replace(tensor, layer_id=(tensor.layer_id or 0) + 7)


class _Descriptor(TensorDescriptor):
    pass


def test_the_plans_descriptors_match_by_identity() -> None:
    logical, source, *_ = _setup()
    assert _c(logical.source_tensors, (source.tensors,)) is True
    parts = logical.target_placement.parts
    assert _c(logical.target_tensors, tuple(part.tensors for part in parts)) is True
    assert binding._tensor_snapshots_match(logical, logical.source_placement, logical.target_placement, _participants(logical)) is True
    assert _c((), ()) is True and _c((), ((),)) is True


def test_what_is_not_shown_by_identity_is_left_to_the_dicts() -> None:
    logical, source, *_ = _setup()
    tensors = tuple(source.tensors)
    a, b, c, d = tensors
    cases = [
        ((a, b, c, d), ((a, b), (c,))),  # d listed nowhere
        ((a, b, c, d), ((a, b, c, d, _copy(d)),)),  # an equal copy: the dicts decide (equal)
        ((a, b, c, d), ((a, b, c, _other(d)),)),  # a different descriptor with d's id
        ((a, b, c, a), ((a, b, c),)),  # one object twice in tensors
        ((a, b, c, _copy(a)), ((a, b, c),)),  # two objects with one id
        ((a, b, c, d), [(a, b, c, d)]),  # groups not a tuple
        ((a, b, c, d), ([a, b, c, d],)),  # a group not a tuple
        ([a, b, c, d], ((a, b, c, d),)),  # tensors not a tuple
        ((a, b, c, d), ((a, b, c, d), ("x",))),  # an item that is not a descriptor
    ]
    for given_tensors, groups in cases:
        assert _c(given_tensors, groups) is None, (given_tensors, groups)
    sub = _Descriptor(**{f.name: getattr(a, f.name) for f in dataclasses.fields(a)})
    assert _c((sub,), ((sub,),)) is None
    odd_id = _copy(a)
    object.__setattr__(odd_id, "tensor_id", type("Text", (str,), {})("a"))
    assert _c((odd_id,), ((odd_id,),)) is None
    odd_key = _copy(a)
    odd_key.__dict__[3] = "not a field"
    assert _c((odd_key,), ((odd_key,),)) is None
    with pytest.raises(TypeError):
        _native.tensor_maps_match((), ())
    with pytest.raises(TypeError):
        _native.tensor_maps_match((), (), "not a class")


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_random_groups_never_match_where_the_dicts_differ(data: Any) -> None:
    logical, source, *_ = _setup()
    pool = list(source.tensors)
    pool += [_copy(pool[0]), _other(pool[1])]
    tensors = tuple(data.draw(st.lists(st.sampled_from(pool), max_size=6)))
    groups = tuple(tuple(group) for group in data.draw(st.lists(st.lists(st.sampled_from(pool), max_size=6), max_size=4)))
    answer = _c(tensors, groups)
    assert answer in (True, None)
    if answer is True:
        assert _oracle(tensors, groups)
    if all(any(t is u for u in pool[:4]) for t in tensors + sum(groups, ())) and _oracle(tensors, groups):
        assert answer is True  # the plan's own objects, dicts equal: decided here


def _forged(logical: Any, **fields: Any) -> Any:
    forged = object.__new__(type(logical))
    forged.__dict__.update(logical.__dict__)
    forged.__dict__.update(fields)
    return forged


_CATALOG = "logical target tensor catalog differs from placement"  # step 2 reads the target side first
_DUPLICATE = "logical transfer plan has duplicate tensor descriptors"
_SOURCE = "logical plan and source placement tensor descriptors differ"


@pytest.mark.parametrize(
    "side,edit,message,bound_message",
    [
        ("target", lambda ts: ts[:-1], "logical plan and target placement tensor descriptors differ", _CATALOG),
        ("target", lambda ts: ts[:-1] + (_other(ts[-1]),), "logical plan and target placement tensor descriptors differ",
         _CATALOG),
        ("target", lambda ts: ts + (ts[0],), _DUPLICATE, _CATALOG),
        ("source", lambda ts: ts[1:], _SOURCE, _SOURCE),
        ("source", lambda ts: (_other(ts[0]),) + ts[1:], _SOURCE, _SOURCE),
        ("source", lambda ts: ts + (_copy(ts[-1]),), _DUPLICATE, _DUPLICATE),
    ],
)
def test_binding_raises_the_step_4_errors(side: str, edit: Any, message: str, bound_message: str) -> None:
    logical, _, source_bindings, target_bindings = _setup()
    field = f"{side}_tensors"
    forged = _forged(logical, **{field: edit(tuple(getattr(logical, field)))})
    assert binding._tensor_snapshots_match(forged, forged.source_placement, forged.target_placement, _participants(forged)) is False
    with pytest.raises(ValueError, match=message):
        binding._check_tensor_snapshots(forged, forged.source_placement, forged.target_placement, _participants(forged), None)
    with pytest.raises(ValueError, match=bound_message):
        bind_logical_transfer_plan(forged, target_bindings, source_bindings=source_bindings)


@pytest.mark.parametrize("make,message", [(_other, _CATALOG), (_copy, None), (None, "unknown tensor_id: d")])
def test_a_target_parts_descriptors_edited_in_place(make: Any, message: Any) -> None:
    """The parts' lists are step 4's target side: an equal copy binds (the dicts decide), a
    different or missing descriptor is refused (by step 2's checks, which read them first)."""
    logical, _, source_bindings, target_bindings = _setup()
    part = logical.target_placement.parts[-1]
    tensors = tuple(part.tensors)
    object.__setattr__(part, "tensors", tensors[:-1] + ((make(tensors[-1]),) if make else ()))
    args = (logical, logical.source_placement, logical.target_placement, _participants(logical))
    decided = binding._tensor_snapshots_match(*args)
    assert decided is (make is None)  # (another part still lists the dropped descriptor)
    if decided:
        binding._check_tensor_snapshots(*args, None)  # the dicts agree
    if message is None:
        bind_logical_transfer_plan(logical, target_bindings, source_bindings=source_bindings)
    else:
        with pytest.raises(ValueError, match=message):
            bind_logical_transfer_plan(logical, target_bindings, source_bindings=source_bindings)


def test_equal_copies_still_bind() -> None:
    """Descriptors equal to the placement's but other objects: decided by the dicts, accepted."""
    logical, _, source_bindings, target_bindings = _setup()
    forged = _forged(logical, source_tensors=tuple(_copy(t) for t in logical.source_tensors))
    assert binding._tensor_snapshots_match(forged, forged.source_placement, forged.target_placement, _participants(forged)) is False
    binding._check_tensor_snapshots(forged, forged.source_placement, forged.target_placement, _participants(forged), None)
    plan = bind_logical_transfer_plan(forged, target_bindings, source_bindings=source_bindings)
    genuine = bind_logical_transfer_plan(logical, target_bindings, source_bindings=source_bindings)
    assert plan.operations == genuine.operations

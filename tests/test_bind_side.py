"""``_native.bind_side_ids``: binding step 6's identity loop (``binding._bind_side_ids``) in one C call.

It returns the given participants exactly when the Python loop accepts the same bindings with
nothing unusual (exact classes, exact str ids, exact tuples), and None otherwise (the loop then
runs and raises the first failure in its order). Tested against the loop as the oracle over
generated placements with forged bindings (hypothesis), with hostile arguments, and through
``_bind_side`` (the same first failure and message with and without the C call)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any, List, Tuple

import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

from layout_model import Layout, TensorSpec, build_placement, build_runtime_bindings
from planner_helpers import tp_placement
from spec_helpers import field_state
from test_planner_oracle import placement_pairs

from mooncake.reshard import _native
from mooncake.reshard.weight import RuntimeBindingFragment, WeightRuntimeBindingManifest
from mooncake.reshard.weight._planner import binding as binding_module

CLASSES = (WeightRuntimeBindingManifest, RuntimeBindingFragment)


class StrSub(str):
    pass


class BindingSub(WeightRuntimeBindingManifest):
    pass


class FragmentSub(RuntimeBindingFragment):
    pass


def oracle(given: Tuple[Any, ...]) -> Any:
    try:
        return ("ok", binding_module._bind_side_ids("target", given))
    except ValueError as exc:
        return ("error", str(exc))


def fresh_side() -> Tuple[Any, Tuple[Any, ...]]:
    placement = tp_placement("dst", TensorSpec("w", (8, 4)), 4, 0)
    return placement, build_runtime_bindings(placement)


def subclass_copy(obj: Any, cls: type) -> Any:
    twin = object.__new__(cls)
    for key, value in field_state(obj).items():  # (a C layout: its set fields)
        object.__setattr__(twin, key, value)
    return twin


FORGERIES = [
    "none",
    "dup-fragment-across",
    "dup-fragment-within",
    "dup-participant",
    "str-sub-fragment-id",
    "str-sub-participant",
    "str-sub-placement",
    "int-fragment-id",
    "list-fragments",
    "foreign-binding",
    "binding-subclass",
    "fragment-subclass",
    "foreign-fragment",
    "missing-fragment-id",
    "other-placement-id",
]


def _dup_within(b: Any) -> None:
    if len(b.fragments) > 1:
        object.__setattr__(b.fragments[1], "fragment_id", b.fragments[0].fragment_id)
    else:  # the same fragment twice
        object.__setattr__(b, "fragments", (b.fragments[0], b.fragments[0]))


def _set(obj: Any, name: str, value: Any) -> None:
    object.__setattr__(obj, name, value)


# kind -> forgery of binding b (other: the next binding); returns a replacement for b or None
FORGE = {
    "dup-fragment-across": lambda b, o: _set(b.fragments[-1], "fragment_id", o.fragments[0].fragment_id),
    "dup-fragment-within": lambda b, o: _dup_within(b),
    "dup-participant": lambda b, o: _set(b, "participant_id", o.participant_id),
    "str-sub-fragment-id": lambda b, o: _set(b.fragments[0], "fragment_id", StrSub(b.fragments[0].fragment_id)),
    "str-sub-participant": lambda b, o: _set(b, "participant_id", StrSub(b.participant_id)),
    "str-sub-placement": lambda b, o: _set(b, "placement_id", StrSub(b.placement_id)),
    "int-fragment-id": lambda b, o: _set(b.fragments[0], "fragment_id", 1 << 80),
    "list-fragments": lambda b, o: _set(b, "fragments", list(b.fragments)),
    "foreign-binding": lambda b, o: (b.placement_id, b.participant_id),
    "binding-subclass": lambda b, o: subclass_copy(b, BindingSub),
    "fragment-subclass": lambda b, o: _set(
        b, "fragments", (subclass_copy(b.fragments[0], FragmentSub),) + tuple(b.fragments[1:])
    ),
    "foreign-fragment": lambda b, o: _set(b, "fragments", tuple(b.fragments) + (SimpleNamespace(fragment_id="x"),)),
    "missing-fragment-id": lambda b, o: object.__delattr__(b.fragments[0], "fragment_id"),
    "other-placement-id": lambda b, o: _set(b, "placement_id", b.placement_id + "-other"),
}


def forge(bindings: Tuple[Any, ...], kind: str, index: int) -> Tuple[Any, ...]:
    items: List[Any] = list(bindings)
    k = index % len(items)
    b = items[k]
    other = items[(k + 1) % len(items)]
    if kind == "none" or not all(isinstance(x, WeightRuntimeBindingManifest) for x in (b, other)):
        return bindings  # (an earlier forgery may have replaced it: nothing more to forge here)
    replacement = FORGE[kind](b, other)
    if replacement is not None:
        items[k] = replacement
    return tuple(items)


@settings(max_examples=60, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate], suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(placement_pairs(), st.lists(st.tuples(st.sampled_from(FORGERIES), st.integers(0, 100)), max_size=3))
def test_decides_exactly_what_the_python_loop_accepts(
    pair: Tuple[Layout, Layout], forgeries: List[Tuple[str, int]]
) -> None:
    placement = build_placement(pair[1])
    bindings = build_runtime_bindings(placement)
    assume(bindings)
    for kind, index in forgeries:
        try:
            bindings = forge(bindings, kind, index)
        except (AttributeError, KeyError, ValueError):  # an earlier forgery removed what this one reads
            pass
    try:
        expected: Any = oracle(bindings)
    except AttributeError:
        expected = ("attribute-error",)
    fast = _native.bind_side_ids(*CLASSES, bindings)
    if fast is not None:
        assert expected == ("ok", fast)
        assert type(fast) is set and all(type(p) is str for p in fast)
    else:
        # declined: only on a failure or on something unusual the loop reads itself
        assert expected[0] != "ok" or any(kind not in ("none", "other-placement-id") for kind, _ in forgeries)


def test_accepts_valid_sides_with_the_participants() -> None:
    placement, bindings = fresh_side()
    result = _native.bind_side_ids(*CLASSES, bindings)
    assert result == {b.participant_id for b in bindings} == binding_module._bind_side_ids("target", bindings)
    assert _native.bind_side_ids(*CLASSES, ()) == set()


@pytest.mark.parametrize("kind", [k for k in FORGERIES if k not in ("none", "other-placement-id")])
def test_each_forgery_is_declined(kind: str) -> None:
    _, bindings = fresh_side()
    assert _native.bind_side_ids(*CLASSES, forge(bindings, kind, 0)) is None


@pytest.mark.parametrize("value", [None, [], "x", 1 << 80, -1, iter(())])
def test_wrong_containers_decline(value: Any) -> None:
    assert _native.bind_side_ids(*CLASSES, value) is None


def test_a_list_of_bindings_declines() -> None:
    _, bindings = fresh_side()
    assert _native.bind_side_ids(*CLASSES, list(bindings)) is None


def test_wrong_arguments_raise_type_error() -> None:
    _, bindings = fresh_side()
    with pytest.raises(TypeError):
        _native.bind_side_ids(*CLASSES)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        _native.bind_side_ids(*CLASSES, bindings, None)  # type: ignore[call-arg]
    for k in range(2):
        for bad in (None, "cls", int, 1 << 80):
            classes = list(CLASSES)
            classes[k] = bad
            with pytest.raises(TypeError):
                _native.bind_side_ids(*classes, bindings)


def side_outcome(given: Tuple[Any, ...], fused: bool) -> Any:
    placement = tp_placement("dst", TensorSpec("w", (8, 4)), 4, 0)
    required = {b.participant_id for b in build_runtime_bindings(placement)}
    original = _native.bind_side_ids
    if not fused:
        _native.bind_side_ids = lambda *args: None  # type: ignore[attr-defined]
    try:
        kept, attestations = binding_module._bind_side("target", placement, given, required)
    except ValueError as exc:
        return ("error", str(exc))
    finally:
        _native.bind_side_ids = original  # type: ignore[attr-defined]
    return ("ok", [b.participant_id for b in kept], sorted(attestations))


@pytest.mark.parametrize("kind", FORGERIES)
@pytest.mark.parametrize("index", [0, 1, 3])
def test_bind_side_first_failure_is_unchanged(kind: str, index: int) -> None:
    runs = []
    for fused in (False, True):
        _, bindings = fresh_side()
        try:
            runs.append(side_outcome(forge(bindings, kind, index), fused))
        except AttributeError as exc:
            runs.append(("attribute-error", str(exc)))
    assert runs[0] == runs[1]


def test_duplicate_id_before_a_later_invalid_fragment_keeps_the_duplicate_error() -> None:
    """A binding repeating an earlier fragment id and, in a later binding, an invalid fragment
    (and a participant repeated after that): the duplicate id is reported, as by the loop."""
    for fused in (False, True):
        _, bindings = fresh_side()
        object.__setattr__(bindings[1].fragments[0], "fragment_id", bindings[0].fragments[0].fragment_id)
        fragment = bindings[2].fragments[0]
        object.__setattr__(fragment, "nbytes", fragment.nbytes + 1)
        object.__setattr__(bindings[3], "participant_id", bindings[2].participant_id)
        outcome = side_outcome(bindings, fused)
        assert outcome == ("error", f"duplicate target runtime fragment_id: {bindings[0].fragments[0].fragment_id}")


def test_valid_side_binds_the_same_with_and_without_the_call() -> None:
    _, bindings = fresh_side()
    fast = side_outcome(bindings, True)
    assert fast[0] == "ok" and fast == side_outcome(bindings, False)

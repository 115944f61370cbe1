"""The target signatures without their map (session 24): ``owner_signatures(..., shared_only)``
and ``SharedSignatures`` in ``check_target_coverage``.

When every tensor has one signature and every key is an exact str, the planner hands
``check_target_coverage`` the signature and the private key copy instead of the map; the map
(``dict.fromkeys(keys, signature)``) is made only when the exact path reads it. It must be the
very map ``owner_signatures`` makes, and every coverage outcome (pass, each message) must be the
one the map gives."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path
from typing import Any

import pytest

from mooncake.reshard import _native
from mooncake.reshard.weight import OwnershipAxis
from mooncake.reshard.weight._planner import ownership
from mooncake.reshard.weight._planner.api import _catalog_map
from mooncake.reshard.weight._planner.ownership import (
    SharedSignatures,
    check_target_coverage,
    shared_or_tensor_signatures,
    tensor_signatures,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import _workloads as w  # noqa: E402


class _T:
    def __init__(self, axes: Any) -> None:
        self.parallel_axes = axes


def _outcome(call: Any) -> Any:
    try:
        call()
    except Exception as error:  # the outcome compared is the exception's type and message
        return (type(error), str(error))
    return None


def test_shared_form_is_the_map() -> None:
    ep, dp = OwnershipAxis("ep"), OwnershipAxis("dp")
    tensors = {f"t{k}": _T((ep,)) for k in range(50)}
    shared = _native.owner_signatures(tensors, OwnershipAxis, True)
    assert type(shared) is tuple and len(shared) == 2
    signature, keys = shared
    assert signature == (("ep",), False)
    assert list(keys.items()) == list(tensors.items()) and keys is not tensors
    made = dict.fromkeys(keys, signature)
    expected = _native.owner_signatures(tensors, OwnershipAxis)
    assert list(made.items()) == list(expected.items())
    assert list(made.items()) == list(ownership._tensor_signatures(tensors).items())
    form = shared_or_tensor_signatures(tensors)
    assert type(form) is SharedSignatures and list(form.as_map().items()) == list(expected.items())
    # two signatures, no tensor, a non-tuple: the map (or None) as without the flag
    tensors["t7"] = _T((ep, dp))
    assert _native.owner_signatures(tensors, OwnershipAxis, True) == _native.owner_signatures(tensors, OwnershipAxis)
    assert type(shared_or_tensor_signatures(tensors)) is dict
    assert _native.owner_signatures({}, OwnershipAxis, True) == {}
    assert _native.owner_signatures({"a": _T([ep])}, OwnershipAxis, True) is None


def test_a_key_that_is_not_an_exact_str_gets_the_map() -> None:
    class Key(str):
        eq_calls = 0

        def __eq__(self, other: object) -> bool:
            Key.eq_calls += 1
            return str.__eq__(self, other)

        __hash__ = str.__hash__

    ep = OwnershipAxis("ep")
    tensors = {"a": _T((ep,)), Key("b"): _T((ep,)), "c": _T((ep,))}
    native = _native.owner_signatures(tensors, OwnershipAxis, True)
    assert type(native) is dict and native == {"a": (("ep",), False), "b": (("ep",), False), "c": (("ep",), False)}
    assert type(shared_or_tensor_signatures(tensors)) is dict


def _sides(fragments: int) -> Any:
    inputs = w.sweep(fragments=fragments)
    return w.assemble(inputs.target)


@pytest.mark.parametrize("fragments", [60, 6000])
def test_coverage_outcomes_are_those_of_the_map(fragments: int) -> None:
    target = _sides(fragments)
    tensors = _catalog_map(target.tensors)
    form = shared_or_tensor_signatures(tensors)
    assert type(form) is SharedSignatures
    cases = [
        (target.fragments, target),  # the fast path: covered
        (target.fragments[1:], None),  # the exact path: a fragment missing
        (target.fragments[: len(target.fragments) // 2], None),
        (tuple(target.fragments), None),  # the exact path: covered
    ]
    for fragments_, placement in cases:
        expected = _outcome(lambda: check_target_coverage(tensors, fragments_, placement, tensor_signatures(tensors)))
        got = _outcome(lambda: check_target_coverage(tensors, fragments_, placement, form))
        assert got == expected
    assert _outcome(lambda: check_target_coverage(tensors, target.fragments[1:], None, form)) is not None


def test_plans_are_unchanged() -> None:
    """The planner passes the shared form: plans equal those made with the map."""
    from mooncake.reshard.weight import plan_placement_transfer
    from mooncake.reshard.weight._planner import core

    inputs = w.sweep(fragments=600)
    source, target = w.assemble(inputs.source), w.assemble(inputs.target)
    new = plan_placement_transfer(source, target)
    original = core.shared_or_tensor_signatures
    core.shared_or_tensor_signatures = tensor_signatures  # type: ignore[assignment]
    try:
        old = plan_placement_transfer(source, target)
    finally:
        core.shared_or_tensor_signatures = original
    assert new == old
    assert pickle.dumps(new) == pickle.dumps(old)

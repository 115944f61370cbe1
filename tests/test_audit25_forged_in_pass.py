"""Foreign code inside a C pass forges what an earlier step of the same pass proved (AUDIT5, session 25).

The rules accept a str subclass as a plan's ``resource_id`` (they check it non-empty), so the fast
revalidation runs on such a plan. ``revalidate_fragments`` compares each new attestation's placement
identity with the plan identity (``rf_identity``: ``PyObject_RichCompareBool`` on a tuple holding
that str subclass), so the subclass's ``__eq__`` runs inside the pass, once per attestation. From
the second call on, the pass has already proved the first fragment's runtime fence (its lease and
instance id equal the attested ones: ``rf_attested_str``). Code run there that edits the fragment's
``runtime_lease_id`` (``object.__setattr__``) is not seen again: ``revalidate_shapes`` checks its
kind only, and ``_require_attested_fences`` runs only when the rules decided. ``replace()``, direct
construction and an unsealed bind then return a plan whose state the rules refuse ("bound fragment
runtime fence differs from attestation").

Closed (lead, session 25): revalidate_fragments declines a plan identity that is not exactly
(str, str, int) and compares only exact attested identities; regression tests now.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

import pytest

from forge_helpers import outcome, rules_only, sized_world

from mooncake.reshard.weight import TransferPlan, bind_logical_transfer_plan

_FENCE = ("ValueError", "bound fragment runtime fence differs from attestation")


class ForgingId(str):
    """Equal to the real identity; at its second comparison made by a C pass called from
    ``_fast_revalidate_live``, edits the lease of the pass's first fragment (``operations[0]``'s
    source: fragments are taken in first appearance, source before target)."""

    __slots__ = ()
    calls: list[str] = []

    def __eq__(self, other: object) -> bool:
        caller = sys._getframe(1)
        if caller.f_code.co_name == "_fast_revalidate_live":
            ForgingId.calls.append("eq")
            if len(ForgingId.calls) == 2:
                fragment = caller.f_locals["operations"][0].source
                object.__setattr__(fragment, "runtime_lease_id", "forged-lease")
        return str.__eq__(self, other)

    __hash__ = str.__hash__


@pytest.fixture(autouse=True)
def _fresh_calls() -> None:
    ForgingId.calls = []


def _plan() -> Any:
    logical, targets, sources, _memory = sized_world(2)
    return bind_logical_transfer_plan(logical, targets, source_bindings=sources)


def _check(result: Any) -> None:
    """``result`` must not be a plan the rules refuse (the rules re-run on it, fast path off)."""
    if isinstance(result, TransferPlan) and result.operations[0].source.runtime_lease_id == "forged-lease":
        assert rules_only(lambda: dataclasses.replace(result)) != _FENCE, "accepted a plan the rules refuse"
    # closed (lead, session 25): the pass declines a non-exact identity before comparing it, so
    # the forging comparison never runs inside it (at most once, in Python, before the passes)
    assert len(ForgingId.calls) < 2, "the forging comparison ran inside a pass"


def test_the_rules_accept_a_str_subclass_identity() -> None:
    """So the fast path runs on such a plan (and the forgery below is the only difference)."""
    plan = _plan()
    object.__setattr__(plan, "resource_id", str.__new__(type("Named", (str,), {}), plan.resource_id))
    assert isinstance(rules_only(lambda: dataclasses.replace(plan)), TransferPlan)


def test_the_forged_lease_alone_is_refused() -> None:
    plan = _plan()
    object.__setattr__(plan.operations[0].source, "runtime_lease_id", "forged-lease")
    assert outcome(lambda: dataclasses.replace(plan)) == _FENCE



def test_replace() -> None:
    plan = _plan()
    object.__setattr__(plan, "resource_id", ForgingId(plan.resource_id))
    _check(outcome(lambda: dataclasses.replace(plan)))


def test_direct_construction() -> None:
    plan = _plan()
    values = {f.name: getattr(plan, f.name) for f in dataclasses.fields(plan) if f.init}
    values["resource_id"] = ForgingId(plan.resource_id)
    _check(outcome(lambda: TransferPlan(**values)))


def test_unsealed_bind() -> None:
    """The logical plan's identity unseals the bind; its plan is revalidated by the fast path."""
    logical, targets, sources, _memory = sized_world(2)
    object.__setattr__(logical, "resource_id", ForgingId(logical.resource_id))
    _check(outcome(lambda: bind_logical_transfer_plan(logical, targets, source_bindings=sources)))


def test_pickle_restore() -> None:
    """The restored plan's identity (the str subclass survives pickling) forges its own fragment."""
    import pickle

    plan = _plan()
    object.__setattr__(plan, "resource_id", ForgingId(plan.resource_id))
    data = pickle.dumps(plan)
    ForgingId.calls = []
    _check(outcome(lambda: pickle.loads(data)))

"""Release points of a revalidation (session 28, SOUND8): values a call drops from its inputs
while it runs.

AUDIT7 found two values a sealed bind call released from its inputs (whose weakref callbacks
then ran inside the call: foreign code, and C code alone runs no Python frame, so no watch sees
it); bind now holds them until it returns (``binding._held_values``). Enumerating the others (a
weakref-able inert value planted in every derived-cache slot of every object reachable from the
inputs, with a C-only callback that logs where it runs) found two more, in the revalidation that
``replace()``, construction, a pickle restore and the unsealed bind run:

- ``WeightPlacementManifest.digest`` popped ``_digest_ahead`` at its first read, which a
  revalidation makes while it builds an attestation's view;
- ``bound_contracts._attested_view`` replaced an attestation's ``_attested_view`` cache (a
  stale record) in the middle of ``revalidate_fragments``' pass.

A callback there edited a value an earlier step had checked (the plan's limits, below its
segment and region totals): ``replace()`` returned a plan that a second ``replace()`` and a
pickle round trip refuse (on 733de94, for both channels, at 2 and 200 tensors; so did the
rule-by-rule path, which checks the limits before it builds the views). Now a revalidation holds both
(the placement's ``_digest_ahead`` before each view build, the view cache values it replaces)
until its scope ends (``_ViewState.held``), as bind holds its own (``_held_values``)."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import operator
import pickle
import weakref
from typing import Any

import pytest

from forge_helpers import outcome, sized_world

from mooncake.reshard.weight import ParallelRank, bind_logical_transfer_plan
from mooncake.reshard.weight._planner import bound_contracts


def _plan(tensors: int) -> Any:
    logical, targets, sources, _memory = sized_world(tensors)
    plan = bind_logical_transfer_plan(logical, targets, source_bindings=sources)
    # two revalidations: the attestations' view caches hold their records from the second on
    return dataclasses.replace(dataclasses.replace(plan))


def _plant(plan: Any, channel: str, callback: Any) -> Any:
    """A ParallelRank (an inert value) held only by the channel's slot, with a weakref callback."""
    stale = ParallelRank(dp=0)
    ref = weakref.ref(stale, callback)
    if channel == "view":
        for executor in plan.target_executors + plan.source_executors:
            executor.attestation.__dict__["_attested_view"] = stale
    else:
        placement = plan.target_placement
        placement.__dict__["_digest_cache"] = None
        placement.__dict__["_digest_ahead"] = stale
    return ref


CHANNELS = ["view", "digest"]
SIZES = [2, 200]


@pytest.mark.parametrize("tensors", SIZES)
@pytest.mark.parametrize("channel", CHANNELS)
def test_no_value_is_released_inside_a_revalidation(channel: str, tensors: int) -> None:
    """The callback (C code only: it logs the revalidation scope it runs in) never runs while
    the revalidation is under way."""
    plan = _plan(tensors)
    log: list[Any] = []
    callback = functools.partial(
        functools.reduce, operator.is_, map(log.append, map(operator.attrgetter("scope"), [bound_contracts._VIEW_STATE]))
    )
    ref = _plant(plan, channel, callback)
    got = dataclasses.replace(plan)
    assert type(got) is bound_contracts.TransferPlan
    assert ref() is None and log == [None], log  # released once the revalidation ended


@pytest.mark.parametrize("field", ["max_total_lowered_segments", "max_transfer_regions"])
@pytest.mark.parametrize("tensors", SIZES)
@pytest.mark.parametrize("channel", CHANNELS)
def test_a_release_cannot_edit_checked_limits_mid_revalidation(channel: str, tensors: int, field: str) -> None:
    """The C-only callback lowers a limit the plan exceeds once edited (and logs the scope it
    runs in). Released inside the revalidation (733de94), it ran after the limits were checked
    and ``replace()`` returned a plan a second ``replace()`` and a pickle round trip refuse,
    with no hook and no exception. Now it runs only once the revalidation has ended: an edit
    made after every check, as one made after the call returns would be."""
    plan = _plan(tensors)
    limits = plan.planning_limits
    log: list[Any] = []
    callback = functools.partial(
        functools.reduce,
        operator.is_,
        itertools.chain(
            map(log.append, map(operator.attrgetter("scope"), [bound_contracts._VIEW_STATE])),
            map(object.__setattr__, [limits], [field], [1]),
        ),
    )
    ref = _plant(plan, channel, callback)
    got = outcome(lambda: dataclasses.replace(plan))
    assert type(got) is bound_contracts.TransferPlan
    assert ref() is None and getattr(limits, field) == 1  # (the callback ran in the call)
    assert log == [None], log  # ... after the revalidation
    assert outcome(lambda: dataclasses.replace(got))[0] == "ValueError"
    assert outcome(lambda: pickle.loads(pickle.dumps(got)))[0] == "ValueError"

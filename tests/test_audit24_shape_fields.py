"""AUDIT4 (session 24): fields of the F4 walk (``_native.revalidate_shapes``) that
``tests/test_reval24_field_kinds.py`` does not edit: the optional ints (``layer_id``,
``expert_id``, ``pipeline_stage_id``), a split axis' ``dim``, the containers themselves
(``parts``, a part's ``tensors`` / ``fragments``, a descriptor's ``parallel_axes``, an evidence's
``fragments``: a tuple subclass), the placement's ``_digest_cache``, a placement fragment's own
rank (another object than its part's) and objects of a subclass in place of the exact class.

Each edit is made after binding (``object.__setattr__``) and the outcome of
``dataclasses.replace`` with the fast path is compared with the outcome of the rules alone (the
fast path disabled). Where the rules refuse the edit (most cases, checked), a fast path that
accepted it fails the comparison; where they accept (a subclass the rules take, an evidence
whose fragments are a list), both must accept.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import pytest

from forge_helpers import outcome, sized_world

from mooncake.reshard.weight import ParallelRank, TransferPlan, bind_logical_transfer_plan
from mooncake.reshard.weight._planner import bound_contracts
from mooncake.reshard.weight.types import SplitAxis

SMALL = 2
PROVED = 130


class _Text(str):
    pass


class _Count(int):
    pass


class _Items(tuple):  # type: ignore[type-arg]
    pass


class _Rank(ParallelRank):
    pass


def _set(obj: Any, name: str, value: Any) -> None:
    object.__setattr__(obj, name, value)


def _placement(plan: Any, side: str) -> Any:
    return plan.target_placement if side == "target" else plan.source_executors[0].attestation.placement


def _first_part(plan: Any, side: str) -> Any:
    return _placement(plan, side).parts[0]


def _first_descriptor(plan: Any, side: str) -> Any:
    return _first_part(plan, side).tensors[0]


def _last_descriptor(plan: Any, side: str) -> Any:
    return _placement(plan, side).parts[-1].tensors[-1]


def _split_axis(plan: Any, side: str) -> Any:
    for part in _placement(plan, side).parts:
        for tensor in part.tensors:
            for axis in tensor.parallel_axes:
                if type(axis) is SplitAxis:
                    return axis
    raise AssertionError("the world has a split axis")


def _evidence(plan: Any, side: str) -> Any:
    executors = plan.source_executors if side == "source" else plan.target_executors
    return executors[-1].attestation.evidence


def _own_rank(plan: Any, side: str, kind: Any) -> None:
    """The last placement fragment given its own rank (equal to its part's) of class ``kind``,
    whose dp is forged when ``kind`` is ParallelRank."""
    fragment = _placement(plan, side).parts[-1].fragments[-1]
    rank = fragment.rank
    fresh = kind(dp=rank.dp, tp=rank.tp, pp=rank.pp, ep=rank.ep)
    if kind is ParallelRank:
        _set(fresh, "dp", _Count(rank.dp))
    _set(fragment, "rank", fresh)


_EDITS: dict[str, Callable[[Any, str], None]] = {
    "layer_id-str": lambda plan, side: _set(_first_descriptor(plan, side), "layer_id", "0"),
    "expert_id-count": lambda plan, side: _set(_last_descriptor(plan, side), "expert_id", _Count(3)),
    "parallel_axes-subclass": lambda plan, side: _set(
        _first_descriptor(plan, side), "parallel_axes", _Items(_first_descriptor(plan, side).parallel_axes)
    ),
    "split-dim-count": lambda plan, side: _set(_split_axis(plan, side), "dim", _Count(_split_axis(plan, side).dim)),
    "split-kind-text": lambda plan, side: _set(_split_axis(plan, side), "kind", _Text(_split_axis(plan, side).kind)),
    "pipeline_stage_id-str": lambda plan, side: _set(
        _placement(plan, side).parts[-1].fragments[-1], "pipeline_stage_id", "0"
    ),
    "fragment-own-rank-forged": lambda plan, side: _own_rank(plan, side, ParallelRank),
    "parts-subclass": lambda plan, side: _set(_placement(plan, side), "parts", _Items(_placement(plan, side).parts)),
    "part-tensors-subclass": lambda plan, side: _set(
        _first_part(plan, side), "tensors", _Items(_first_part(plan, side).tensors)
    ),
    "part-fragments-subclass": lambda plan, side: _set(
        _first_part(plan, side), "fragments", _Items(_first_part(plan, side).fragments)
    ),
    "digest-cache-int": lambda plan, side: _set(_placement(plan, side), "_digest_cache", 7),
    "digest-cache-text": lambda plan, side: _set(_placement(plan, side), "_digest_cache", _Text("x")),
    "evidence-fragments-subclass": lambda plan, side: _set(
        _evidence(plan, side), "fragments", _Items(_evidence(plan, side).fragments)
    ),
    "evidence-generation-bool": lambda plan, side: _set(_evidence(plan, side), "generation", True),
    "part-rank-bool": lambda plan, side: _set(_first_part(plan, side).rank, "tp", False),
}

# edits the rules accept (the fast path may decline them, never refuse what the rules accept)
_ACCEPTED: dict[str, Callable[[Any, str], None]] = {
    "evidence-fragments-list": lambda plan, side: _set(_evidence(plan, side), "fragments", list(_evidence(plan, side).fragments)),
    "fragment-own-rank-subclass": lambda plan, side: _own_rank(plan, side, _Rank),
    "digest-cache-none": lambda plan, side: _set(_placement(plan, side), "_digest_cache", None),
}


def _rules_only(monkeypatch: Any, call: Callable[[], Any]) -> Any:
    with monkeypatch.context() as patch:
        patch.setattr(bound_contracts, "_fast_revalidate_live", lambda *args, **kwargs: False)
        return outcome(call)


def _summary(result: Any) -> Any:
    return "accepted" if isinstance(result, TransferPlan) else result


def _replaced(edit: Callable[[Any, str], None], side: str, tensors: int, fast: bool, monkeypatch: Any) -> Any:
    logical, targets, sources, _memory = sized_world(tensors)
    plan = bind_logical_transfer_plan(logical, targets, source_bindings=sources)
    edit(plan, side)
    call = lambda: dataclasses.replace(plan)  # noqa: E731
    return _summary(outcome(call) if fast else _rules_only(monkeypatch, call))


@pytest.mark.parametrize("side", ("source", "target"))
@pytest.mark.parametrize("name", sorted(_EDITS))
def test_refused_edits_decline_the_fast_path(monkeypatch, name, side):
    for tensors in (SMALL, PROVED):
        expected = _replaced(_EDITS[name], side, tensors, False, monkeypatch)
        assert expected[0] == "ValueError", expected  # the rules refuse the edit
        assert _replaced(_EDITS[name], side, tensors, True, monkeypatch) == expected


@pytest.mark.parametrize("side", ("source", "target"))
@pytest.mark.parametrize("name", sorted(_ACCEPTED))
def test_accepted_edits_agree(monkeypatch, name, side):
    for tensors in (SMALL, PROVED):
        expected = _replaced(_ACCEPTED[name], side, tensors, False, monkeypatch)
        assert _replaced(_ACCEPTED[name], side, tensors, True, monkeypatch) == expected

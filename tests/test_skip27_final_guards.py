"""Inputs that every step of a *sealed* bind call accepts and that only the new plan's final
revalidation refuses (session 27, SKIP7).

A sealed call (``binding._sealed``) runs no code but the package's, so the objects bind built in
the call cannot change before its revalidation. That does not make the revalidation's passes
redundant: the inputs' exact objects may have been edited with ``object.__setattr__`` (or a
derived cache replaced) *before* the call, and bind's steps do not re-check every placement
invariant. Each case here is such an input, at 4 operations (inert inputs) and at 400 (watched):
the call is sealed (it took bind_regions' carried facts), the named ``_native`` pass of the fast
revalidation refuses, and the call fails with the unsealed call's (every rule's) message. A change
that skips that pass for these inputs in sealed calls makes these tests fail.

The two rank cases are refused by §12.4 (``revalidate_side``) alone. Since session 29 a sealed call
skips that pass when ``bound_contracts._sealed_side_holds`` holds (every fragment of every part has
its part's rank, the part indexes are the parts); its precondition fails first for these inputs, so
the pass runs and refuses, as asserted below (tests/test_skip29_sealed_side.py covers the skip).

A forged part index (``_part_index_extra_fragment``, session 27's third case here) no longer gets
past step 6: since session 29 ``_part_index`` ignores a cache that is not the placement's parts
(tests/test_lead29_part_index.py), and the rule refusing the extra runtime fragment decides.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Callable

import pytest

from forge_helpers import maybe_profiled, outcome, sized_world
from watched import admit_in_watched_calls

from mooncake.reshard import _native
from mooncake.reshard.weight import bind_logical_transfer_plan
from mooncake.reshard.weight._planner import exactness
from mooncake.reshard.weight._planner.bound_contracts import _sealed_side_holds


def _fragment_rank(side: str) -> Callable[[Any, Any, Any, Any], Any]:
    """One placement fragment's rank made its neighbour part's (the part keeps its own): §12.4's
    expected executor key of the fragment (its placement fragment's rank) then names no executor
    (bind projects executors with the part's rank)."""

    def forge(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
        placement = logical.target_placement if side == "target" else logical.source_placement
        object.__setattr__(placement.parts[0].fragments[0], "rank", placement.parts[1].rank)
        return targets, sources

    forge.__name__ = f"{side}_fragment_rank"
    return forge


def _part_index_extra_fragment(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
    """The target placement's derived part index (``_part_index``'s cached dict, edited in place)
    names a copy of part 0 with one more fragment, and that part's binding holds a runtime
    fragment for it. Until session 29 step 6 validated the bindings against that index and
    step 7 bound from it: no operation writes the fragment, so bind selected only the other
    fragments of its worker, and §12.7 was the one rule that saw the executor incomplete. Now
    step 6 reads the parts and refuses the runtime fragment."""
    placement = logical.target_placement
    part = placement.parts[0]
    extra = copy.copy(part.fragments[0])
    object.__setattr__(extra, "placement_fragment_id", "extra-pfid")
    grown = copy.copy(part)
    object.__setattr__(grown, "fragments", part.fragments + (extra,))
    placement._part_index()[part.participant_id] = grown
    at = [binding.participant_id for binding in targets].index(part.participant_id)
    binding = targets[at]
    runtime = binding.fragments[0]
    address = memory.alloc(runtime.nbytes)
    added = dataclasses.replace(
        runtime,
        placement_fragment_id="extra-pfid",
        fragment_id="extra-rt",
        address=address,
        storage_address=address,
        storage_nbytes=runtime.nbytes,
        storage_offset_bytes=0,
    )
    targets = tuple(targets[:at]) + (dataclasses.replace(binding, fragments=binding.fragments + (added,)),) + tuple(
        targets[at + 1 :]
    )
    return targets, sources


def _in_place(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
    """A target fragment placed on a used source fragment's allocation, in its address space
    (§12.5: bind's steps check each side's own ranges, not one side against the other)."""
    source = sources[0]
    taken = source.fragments[0]
    binding = targets[0]
    first = binding.fragments[0]
    assert first.nbytes == taken.nbytes
    moved = dataclasses.replace(
        first,
        worker_id=taken.worker_id,
        device=taken.device,
        address=taken.address,
        storage_address=taken.storage_address,
        storage_nbytes=taken.storage_nbytes,
        storage_offset_bytes=taken.storage_offset_bytes,
    )
    forged = dataclasses.replace(binding, instance_id=source.instance_id, fragments=(moved,) + binding.fragments[1:])
    return (forged,) + tuple(targets[1:]), sources


# (forgery, the pass that refuses, its refusing result, the message's start)
CASES = [
    (_fragment_rank("target"), "revalidate_side", None, "target executor provenance differs from operations"),
    (_fragment_rank("source"), "revalidate_side", None, "source executor provenance differs from operations"),
    (_in_place, "revalidate_spaces", False, "source and target runtime storage allocations overlap in address space "),
]


def _forged_world(tensors: int, forge: Callable[..., Any]) -> tuple[Any, Any, Any]:
    logical, targets, sources, memory = sized_world(tensors)
    targets, sources = forge(logical, targets, sources, memory)
    return logical, targets, sources


@pytest.mark.parametrize("tensors", [2, 200], ids=["4ops", "400ops"])
@pytest.mark.parametrize("case", CASES, ids=[case[0].__name__ for case in CASES])
def test_only_the_final_revalidation_refuses(monkeypatch: pytest.MonkeyPatch, tensors: int, case: Any) -> None:
    forge, pass_name, refused, message = case
    # every rule (unsealed: a profile hook): the reference message
    logical, targets, sources = _forged_world(tensors, forge)
    expected = maybe_profiled(
        True, lambda: outcome(lambda: bind_logical_transfer_plan(logical, targets, source_bindings=sources))
    )
    assert type(expected) is tuple and expected[0] == "ValueError" and expected[1].startswith(message), expected
    # the sealed call, with spies the watch admits (collected before anything is patched: a spy
    # installed while the package's code is first collected would be admitted by its file)
    exactness.code_watch()
    seen: dict[str, list[Any]] = {"carried": [], "fragments": [], "pass": []}
    real_carried, real_fragments, real_pass = (
        _native.revalidate_scan_carried,
        _native.revalidate_fragments,
        getattr(_native, pass_name),
    )

    def carried_spy(*args: Any) -> Any:
        result = real_carried(*args)
        seen["carried"].append(result is not None)
        return result

    def fragments_spy(*args: Any) -> Any:
        result = real_fragments(*args)
        seen["fragments"].append(result is not None)
        return result

    def pass_spy(*args: Any) -> Any:
        result = real_pass(*args)
        seen["pass"].append((len(seen["fragments"]), result))  # (which revalidation, result)
        return result

    admit_in_watched_calls(monkeypatch, carried_spy, fragments_spy, pass_spy)
    monkeypatch.setattr(_native, "revalidate_scan_carried", carried_spy)
    monkeypatch.setattr(_native, "revalidate_fragments", fragments_spy)
    monkeypatch.setattr(_native, pass_name, pass_spy)
    logical, targets, sources = _forged_world(tensors, forge)
    got = outcome(lambda: bind_logical_transfer_plan(logical, targets, source_bindings=sources))
    monkeypatch.undo()
    assert got == expected
    if pass_name == "revalidate_side":  # the skip's precondition refused first (see above)
        assert not _sealed_side_holds(logical.target_placement, logical.source_placement)
    # sealed: the call's revalidation took its carried facts. At 4 operations nothing else runs;
    # a watched call may decide the plan again by every rule after the rules' fallback ran
    # (unsealed: no carried scan, the passes run a second time), with the same message.
    assert seen["carried"] == [True]
    assert seen["fragments"][0] is True
    assert len(seen["fragments"]) == 1 or tensors > 2
    # ... and in that sealed revalidation the named pass is the one that refused (the rules
    # then raised their message): every pass before it accepted.
    first = [result for revalidation, result in seen["pass"] if revalidation == 1]
    assert first and first[-1] is refused
    assert all(result is not refused for result in first[:-1])


@pytest.mark.parametrize("tensors", [2, 200], ids=["4ops", "400ops"])
def test_the_unforged_worlds_bind(tensors: int) -> None:
    """The forgeries above start from worlds that bind (each case's refusal is its forgery's)."""
    logical, targets, sources, _memory = sized_world(tensors)
    plan = bind_logical_transfer_plan(logical, targets, source_bindings=sources)
    assert len(plan.operations) == 2 * tensors

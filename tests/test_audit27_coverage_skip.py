"""Audit of the sealed-bind coverage skip (session 27, AUDIT7): a *sealed* bind call does not run
§12.7's pass (``revalidate_coverage``) when the target placement's part index is its parts
(``bound_contracts._sealed_coverage_holds``). These are inputs edited before the call (exact
classes, ``object.__setattr__`` or a replaced binding) against the assumptions of that function's
rule-by-rule argument, none of them in tests/test_skip27_*.py: the placement's flat ``fragments``
tuple against its parts' (extra, missing, reordered, repeated), part fragments replaced by equal
copies or reordered, operation targets that are equal copies, a part listing a fragment twice,
fragments shared by a selected and an unselected part (object or id), a plan that selects a subset
of the target parts (with or without the other part's binding), ranks moved consistently or not,
runtime fragments reordered or on a second worker, the cached digest replaced, the logical
executors' fragment ids edited, and target fragments covered by several operations (TP2 -> TP3:
§12.7's exact cover is not its one-box shortcut) with operations dropped, repeated or moved.

Each case checks, at 4 operations (inert inputs) and at ~400 (watched): the sealed call's outcome
equals the unsealed call's (a profile hook: every pass runs), and the case's documented outcome;
when the sealed call binds, it was sealed and skipped the pass (so the plan rests on the
argument), and ``replace()`` and a pickle round trip (every pass again) give an equal plan. None
of these inputs edited before the call is accepted against the rules: they guard the argument.

What broke it was code run *during* the call, which a sealed call assumes cannot happen: a weakref
callback fired when the call released a value its inputs held (``LogicalTransferPlan._views()``
replacing ``_operation_views``, ``WeightPlacementManifest.digest`` popping ``_digest_ahead``),
below. Bind now holds those values until it returns (``binding._held_values``); on 7d3e768 (before
that) 10 of these cases bound a plan that ``replace()`` and the unsealed call refuse."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any, Callable, Optional

import pytest

from forge_helpers import maybe_profiled, outcome, sized_world
from memory_executor import HostMemory, host_bindings, tp_placement
from test_skip27_sealed_coverage import _spied
from watched import no_hooks

from mooncake.reshard.weight import ParallelRank, bind_logical_transfer_plan, plan_placement_transfer
from mooncake.reshard.weight._planner.bound_contracts import TransferPlan
from mooncake.reshard.weight.placement import _WIRE_FIELDS


def tp3_world(tensors: int) -> tuple[Any, Any, Any, HostMemory]:
    """TP2 x DP2 -> TP3 over ``tensors`` 4x6 tensors: the middle target fragment of each tensor
    is written by two operations (one per source shard)."""
    names = tuple(f"w{index:03d}" for index in range(tensors))
    source = tp_placement(2, prefix="s", dp=2, shape=(4, 6), tensors=names)
    target = tp_placement(3, prefix="t", shape=(4, 6), tensors=names)
    memory = HostMemory()
    logical = plan_placement_transfer(source, target)
    return logical, host_bindings(target, memory, prefix="dst"), host_bindings(source, memory, prefix="src"), memory


def _bind(logical: Any, targets: Any, sources: Any) -> Any:
    return bind_logical_transfer_plan(logical, targets, source_bindings=sources)


def _placement(logical: Any) -> Any:
    return logical.target_placement


def _executors_of(logical: Any, participant_id: str) -> list[Any]:
    return [executor for executor in logical.target_executors if executor.participant_id == participant_id]


def _extra_runtime(targets: Any, memory: HostMemory, participant_id: str, pfid: str) -> tuple[Any, ...]:
    """``targets`` with one more runtime fragment (for ``pfid``, its own allocation) in the
    binding of ``participant_id``."""
    at = [binding.participant_id for binding in targets].index(participant_id)
    binding = targets[at]
    runtime = binding.fragments[0]
    address = memory.alloc(runtime.nbytes)
    added = dataclasses.replace(
        runtime,
        placement_fragment_id=pfid,
        fragment_id=f"{pfid}-rt",
        address=address,
        storage_address=address,
        storage_nbytes=runtime.nbytes,
        storage_offset_bytes=0,
    )
    grown = dataclasses.replace(binding, fragments=binding.fragments + (added,))
    return tuple(targets[:at]) + (grown,) + tuple(targets[at + 1 :])


# -- the placement's flat fragments tuple (read by steps 2 and 5, never by §12.7) ----------------


def flat_fragments_extra(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
    placement = _placement(logical)
    extra = copy.copy(placement.fragments[0])
    object.__setattr__(extra, "placement_fragment_id", "zz-extra")
    object.__setattr__(placement, "fragments", placement.fragments + (extra,))
    return targets, sources


def flat_fragments_missing(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
    placement = _placement(logical)
    object.__setattr__(placement, "fragments", placement.fragments[1:])
    return targets, sources


def flat_fragments_reversed(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
    placement = _placement(logical)
    object.__setattr__(placement, "fragments", tuple(reversed(placement.fragments)))
    return targets, sources


def flat_fragments_repeated(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
    placement = _placement(logical)
    object.__setattr__(placement, "fragments", placement.fragments + (placement.fragments[0],))
    return targets, sources


# -- a part's fragments (what step 2, step 6 and §12.7 read) -------------------------------------


def part_fragment_equal_copy(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
    """Part 0's first fragment replaced in the part by an equal copy (the flat tuple and the
    operations keep the original object)."""
    part = _placement(logical).parts[0]
    object.__setattr__(part, "fragments", (copy.copy(part.fragments[0]),) + part.fragments[1:])
    return targets, sources


def part_fragments_reversed(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
    part = _placement(logical).parts[0]
    object.__setattr__(part, "fragments", tuple(reversed(part.fragments)))
    return targets, sources


def part_lists_a_fragment_twice(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
    """Part 0 lists its first fragment object twice (its logical executor the id twice)."""
    part = _placement(logical).parts[0]
    first = part.fragments[0]
    object.__setattr__(part, "fragments", (first,) + part.fragments)
    for executor in _executors_of(logical, part.participant_id):
        ids = tuple(sorted(executor.placement_fragment_ids + (first.placement_fragment_id,)))
        object.__setattr__(executor, "placement_fragment_ids", ids)
    return targets, sources


def part_fragment_added_unwritten(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
    """Part 0 itself (the object its index names) gains a fragment no operation writes, with a
    runtime fragment in its binding."""
    part = _placement(logical).parts[0]
    extra = copy.copy(part.fragments[0])
    object.__setattr__(extra, "placement_fragment_id", "zz-extra")
    object.__setattr__(part, "fragments", part.fragments + (extra,))
    return _extra_runtime(targets, memory, part.participant_id, "zz-extra"), sources


def part_fragment_added_and_listed(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
    """As above, and the logical executor lists its id: only the cover can refuse it."""
    targets, sources = part_fragment_added_unwritten(logical, targets, sources, memory)
    for executor in _executors_of(logical, _placement(logical).parts[0].participant_id):
        ids = tuple(sorted(executor.placement_fragment_ids + ("zz-extra",)))
        object.__setattr__(executor, "placement_fragment_ids", ids)
    return targets, sources


def operation_target_equal_copy(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
    operation = logical.operations[0]
    object.__setattr__(operation, "target", copy.copy(operation.target))
    return targets, sources


# -- a plan selecting a subset of the target parts -----------------------------------------------


def _select_part_zero(logical: Any) -> Any:
    """Part 1's executor and operations dropped (and the source executors left without any)."""
    second = _placement(logical).parts[1]
    ids = {fragment.placement_fragment_id for fragment in second.fragments}
    operations = tuple(op for op in logical.operations if op.target.placement_fragment_id not in ids)
    object.__setattr__(logical, "operations", operations)
    executors = tuple(e for e in logical.target_executors if e.participant_id != second.participant_id)
    object.__setattr__(logical, "target_executors", executors)
    used = {op.source.placement_fragment_id for op in operations}
    sources = tuple(e for e in logical.source_executors if set(e.placement_fragment_ids) & used)
    object.__setattr__(logical, "source_executors", sources)
    logical.__dict__.pop("_operation_views", None)
    return second


def subset_selected(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
    """Part 1 unselected; its binding still given (an extra, validated, not kept)."""
    _select_part_zero(logical)
    return targets, sources


def subset_selected_without_other_binding(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
    second = _select_part_zero(logical)
    return tuple(b for b in targets if b.participant_id != second.participant_id), sources


def unselected_part_shares_a_fragment_object(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
    """Part 1 (unselected) also lists part 0's first fragment object."""
    second = _select_part_zero(logical)
    first = _placement(logical).parts[0]
    object.__setattr__(second, "fragments", second.fragments + (first.fragments[0],))
    return tuple(b for b in targets if b.participant_id != second.participant_id), sources


def unselected_part_shares_a_fragment_id(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
    """Part 1 (unselected) lists a copy of part 0's first fragment (same id, its own rank)."""
    second = _select_part_zero(logical)
    first = _placement(logical).parts[0]
    twin = copy.copy(first.fragments[0])
    object.__setattr__(twin, "rank", second.rank)
    object.__setattr__(second, "fragments", second.fragments + (twin,))
    return tuple(b for b in targets if b.participant_id != second.participant_id), sources


def selected_parts_share_a_fragment_id(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
    """Part 0 lists a copy of part 1's first fragment (part 0's rank); both parts selected."""
    first, second = _placement(logical).parts[:2]
    twin = copy.copy(second.fragments[0])
    object.__setattr__(twin, "rank", first.rank)
    object.__setattr__(first, "fragments", first.fragments + (twin,))
    return targets, sources


# -- ranks, runtime fragments, digest, logical executors -----------------------------------------


def part_and_executor_rank(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
    """Part 0 and its logical executor moved to a new rank; its fragments keep theirs."""
    part = _placement(logical).parts[0]
    rank = ParallelRank(dp=0, tp=7)
    object.__setattr__(part, "rank", rank)
    for executor in _executors_of(logical, part.participant_id):
        object.__setattr__(executor, "rank", rank)
    return targets, sources


def _move_rank(logical: Any, part: Any, rank: Any) -> None:
    object.__setattr__(part, "rank", rank)
    for fragment in part.fragments:
        object.__setattr__(fragment, "rank", rank)
    for executor in _executors_of(logical, part.participant_id):
        object.__setattr__(executor, "rank", rank)


def part_rank_moved_everywhere(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
    _move_rank(logical, _placement(logical).parts[0], ParallelRank(dp=0, tp=7))
    return targets, sources


def parts_swap_ranks(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
    first, second = _placement(logical).parts[:2]
    first_rank, second_rank = first.rank, second.rank
    _move_rank(logical, first, second_rank)
    _move_rank(logical, second, first_rank)
    return targets, sources


def runtime_fragments_reversed(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
    binding = targets[0]
    reordered = dataclasses.replace(binding, fragments=tuple(reversed(binding.fragments)))
    return (reordered,) + tuple(targets[1:]), sources


def runtime_fragment_on_a_second_worker(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
    """Part 0's first runtime fragment on another worker: two target executors for part 0."""
    binding = targets[0]
    moved = dataclasses.replace(binding.fragments[0], worker_id="other-worker")
    return (dataclasses.replace(binding, fragments=(moved,) + binding.fragments[1:]),) + tuple(targets[1:]), sources


def digest_cache_replaced(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
    """The placement's cached digest replaced, and every target binding's digest with it."""
    forged = "f" * 64
    object.__setattr__(_placement(logical), "_digest_cache", forged)
    return tuple(dataclasses.replace(binding, placement_digest=forged) for binding in targets), sources


def executor_fragment_ids_unsorted(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
    executor = logical.target_executors[0]
    object.__setattr__(executor, "placement_fragment_ids", tuple(reversed(executor.placement_fragment_ids)))
    return targets, sources


# -- fragments covered by several operations (TP2 -> TP3) -----------------------------------------


def _split_fragment_operations(logical: Any) -> list[int]:
    """Indices of the operations of the first target fragment written by more than one."""
    by_target: dict[str, list[int]] = {}
    for index, op in enumerate(logical.operations):
        by_target.setdefault(op.target.placement_fragment_id, []).append(index)
    return next(indices for indices in by_target.values() if len(indices) > 1)


def split_cover_operation_dropped(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
    dropped = _split_fragment_operations(logical)[0]
    object.__setattr__(logical, "operations", logical.operations[:dropped] + logical.operations[dropped + 1 :])
    logical.__dict__.pop("_operation_views", None)
    return targets, sources


def split_cover_operation_repeated(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
    repeated = _split_fragment_operations(logical)[0]
    object.__setattr__(logical, "operations", logical.operations + (logical.operations[repeated],))
    logical.__dict__.pop("_operation_views", None)
    return targets, sources


def split_cover_operations_swapped(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
    """The two operations of a split fragment in the other order."""
    first, second = _split_fragment_operations(logical)[:2]
    operations = list(logical.operations)
    operations[first], operations[second] = operations[second], operations[first]
    object.__setattr__(logical, "operations", tuple(operations))
    logical.__dict__.pop("_operation_views", None)
    return targets, sources


def split_cover_box_moved(logical: Any, targets: Any, sources: Any, memory: Any) -> Any:
    """One operation of a split fragment given its sibling's overlap box (the two then overlap
    and a column is left unwritten)."""
    first, second = _split_fragment_operations(logical)[:2]
    operations = logical.operations
    object.__setattr__(operations[first], "overlap_offset", operations[second].overlap_offset)
    return targets, sources


PLAN = "plan"
TP2 = sized_world
CASES: list[tuple[Callable[..., Any], Callable[[int], Any], Optional[str]]] = [
    # (forgery, world, expected: PLAN or the start of the ValueError's message)
    (flat_fragments_extra, TP2, PLAN),
    (flat_fragments_missing, TP2, "logical plan and target placement fragment snapshots differ"),
    (flat_fragments_reversed, TP2, PLAN),
    (flat_fragments_repeated, TP2, PLAN),
    (part_fragment_equal_copy, TP2, PLAN),
    (part_fragments_reversed, TP2, PLAN),
    (part_lists_a_fragment_twice, TP2, "runtime binding address ranges overlap"),
    (part_fragment_added_unwritten, TP2, "logical target executor fragments differ from target placement"),
    (part_fragment_added_and_listed, TP2, "logical target fragment is not fully covered: zz-extra"),
    (operation_target_equal_copy, TP2, PLAN),
    (subset_selected, TP2, PLAN),
    (subset_selected_without_other_binding, TP2, PLAN),
    (unselected_part_shares_a_fragment_object, TP2, "logical target executors differ from planned operations"),
    (unselected_part_shares_a_fragment_id, TP2, "logical plan and target placement fragment snapshots differ"),
    (selected_parts_share_a_fragment_id, TP2, "logical target executor fragments differ from target placement"),
    (part_and_executor_rank, TP2, "target executor provenance differs from operations"),
    (part_rank_moved_everywhere, TP2, PLAN),
    (parts_swap_ranks, TP2, PLAN),
    (runtime_fragments_reversed, TP2, PLAN),
    (runtime_fragment_on_a_second_worker, TP2, PLAN),
    (digest_cache_replaced, TP2, PLAN),
    (executor_fragment_ids_unsorted, TP2, "logical target executor fragments differ from target placement"),
    (lambda logical, targets, sources, memory: (targets, sources), tp3_world, PLAN),
    (split_cover_operation_dropped, tp3_world, "logical target fragment is not fully covered"),
    (split_cover_operation_repeated, tp3_world, "logical target fragment is not fully covered"),
    (split_cover_operations_swapped, tp3_world, PLAN),
    (split_cover_box_moved, tp3_world, "logical target fragment is not fully covered"),
]


def _case_id(case: tuple[Any, ...]) -> str:
    forge, world, _expected = case
    name = "unforged" if forge.__name__ == "<lambda>" else forge.__name__
    return f"{name}-{'tp3' if world is tp3_world else 'tp2'}"


@pytest.mark.parametrize("tensors", [2, 200], ids=["small", "large"])
@pytest.mark.parametrize("case", CASES, ids=[_case_id(case) for case in CASES])
def test_sealed_outcome_equals_every_rule(monkeypatch: pytest.MonkeyPatch, tensors: int, case: Any) -> None:
    no_hooks()
    forge, world, expected = case
    seen = _spied(monkeypatch)  # the sealed call, spied (the coverage pass, its rule form, the carried scan)
    logical, targets, sources, memory = world(tensors)
    targets, sources = forge(logical, targets, sources, memory)
    sealed = outcome(lambda: _bind(logical, targets, sources))
    monkeypatch.undo()
    # every rule: the same inputs under a profile hook, and a second world forged alike
    unsealed = maybe_profiled(True, lambda: outcome(lambda: _bind(logical, targets, sources)))
    fresh = world(tensors)
    again_targets, again_sources = forge(fresh[0], fresh[1], fresh[2], fresh[3])
    fresh_unsealed = maybe_profiled(True, lambda: outcome(lambda: _bind(fresh[0], again_targets, again_sources)))
    if expected is PLAN:
        assert type(sealed) is TransferPlan, sealed
        # sealed, and the coverage pass skipped: the plan rests on _sealed_coverage_holds' argument
        assert seen == {"coverage": [], "carried": [True]}
        assert type(unsealed) is TransferPlan and unsealed == sealed
        assert type(fresh_unsealed) is TransferPlan
        # every pass again, §12.7 included
        assert dataclasses.replace(sealed) == sealed
        assert pickle.loads(pickle.dumps(sealed, protocol=pickle.HIGHEST_PROTOCOL)) == sealed
    else:
        assert type(sealed) is tuple and sealed[0] == "ValueError" and sealed[1].startswith(expected), sealed
        assert unsealed == sealed
        assert fresh_unsealed == sealed


# -- foreign code run *during* a sealed call: a weakref callback -----------------------------------
#
# A sealed call assumes no code but the package's runs in it (binding._sealed: no hook, inert or
# watched inputs, the collector paused). A weakref callback breaks that: step 2's accept path reads
# the logical plan's views (``_target_checks_accepted`` -> ``LogicalTransferPlan._views()``, when a
# source executor's key is not plain: here a rank field that is a bool), and ``_views()`` replaces
# the plan's ``_operation_views``. Forged before the call to a weakref-able package object held
# only there (a ParallelRank: an inert value), it is freed right there and its weakref callback
# runs: after step 2 proved the cover, before step 6 reads the parts. A second such release (no
# bool needed): the placement's ``digest`` property pops ``_digest_ahead`` (the digest its
# constructor computed ahead) at its first read when ``_digest_cache`` is None (here forged so:
# the digest, the fields, and one more item). The collector pause does not
# matter (a refcount release), and a callback of C code only (``functools.reduce`` over
# ``map(object.__setattr__, ...)``) runs no Python frame, so no watch sees it either.
#
# The callback edits part 0 in place (the part index still names it, so _sealed_coverage_holds
# holds), consistently with bindings built for the edited part before the call:
# - extra_fragment: part 0 gains a fragment no operation writes (§12.7 rule 3: its executor does
#   not list all its worker's attested fragments; §12.4 allows a subset);
# - grown_fragment: part 0's first fragment gets one more row (local_shape and nbytes), which no
#   operation writes (§12.7 rule 5: not fully covered; the strides do not change, so the regions
#   stay canonical, and the fragment is then incomplete for the physical check).
# Every later step and pass accepts; only §12.7 refuses. The sealed call skips it and returns a
# plan that ``replace()``, a pickle round trip and the unsealed call refuse. Exceptions, passing
# today: a Python callback in a large call trips the watch (the plan is decided again by every
# rule), and extra_fragment in a large call makes the target side's C pass decline, whose Python
# fallback trips the watch.


def _weakref_world(tensors: int, channel: str, callback: str, edit: str) -> tuple[Any, Any, Any, Any, Any]:
    import functools
    import operator
    import weakref

    logical, targets, sources, memory = sized_world(tensors)
    part = _placement(logical).parts[0]
    if edit == "extra_fragment":
        extra = copy.copy(part.fragments[0])
        object.__setattr__(extra, "placement_fragment_id", "zz-extra")
        edited, names, values = [part], ["fragments"], [part.fragments + (extra,)]
        targets = _extra_runtime(targets, memory, part.participant_id, "zz-extra")
    else:
        fragment = part.fragments[0]
        rows = fragment.local_shape[0] + 1
        shape = (rows,) + tuple(fragment.local_shape[1:])
        nbytes = fragment.nbytes // fragment.local_shape[0] * rows
        edited, names, values = [fragment, fragment], ["local_shape", "nbytes"], [shape, nbytes]
        at = [binding.participant_id for binding in targets].index(part.participant_id)
        binding = targets[at]
        address = memory.alloc(nbytes)
        runtime = tuple(
            dataclasses.replace(
                item,
                local_shape=shape,
                nbytes=nbytes,
                address=address,
                storage_address=address,
                storage_nbytes=nbytes,
                storage_offset_bytes=0,
            )
            if item.placement_fragment_id == fragment.placement_fragment_id
            else item
            for item in binding.fragments
        )
        targets = tuple(targets[:at]) + (dataclasses.replace(binding, fragments=runtime),) + tuple(targets[at + 1 :])
    if channel == "views":
        # step 2's accept path then reads the plan's views (a source executor's key not plain)
        executor = logical.source_executors[0]
        rank = copy.copy(executor.rank)
        object.__setattr__(rank, "dp", bool(rank.dp))
        object.__setattr__(executor, "rank", rank)

    def python_callback(_ref: Any) -> None:
        for target, name, value in zip(edited, names, values):
            object.__setattr__(target, name, value)

    c_only = functools.partial(functools.reduce, operator.is_, map(object.__setattr__, edited, names, values))
    stale = ParallelRank(dp=0)  # held only by the plan (the placement) once assigned
    ref = weakref.ref(stale, python_callback if callback == "python" else c_only)
    if channel == "views":
        object.__setattr__(logical, "_operation_views", stale)
    else:
        # the digest the constructor computed ahead, as it stores it, with one more item (the
        # property compares the fields it lists by identity and pops the tuple at the first read)
        placement = _placement(logical)
        digest = placement.digest
        fields = tuple(placement.__dict__[name] for name in _WIRE_FIELDS)
        object.__setattr__(placement, "_digest_cache", None)
        placement.__dict__["_digest_ahead"] = (digest,) + fields + (stale,)
    del stale
    return logical, targets, sources, ref, (edited[0], names[0], values[0])


def _weakref_outcomes(tensors: int, channel: str, callback: str, edit: str) -> tuple[Any, Any]:
    logical, targets, sources, _ref, (edited, name, value) = _weakref_world(tensors, channel, callback, edit)
    assert getattr(edited, name) != value
    sealed = outcome(lambda: _bind(logical, targets, sources))
    # (on main the callback runs during the call; once no call releases a value its inputs held,
    # it does not, and both calls refuse the bindings built for the edit at step 6)
    if type(sealed) is TransferPlan:  # what the rules say of the plan the sealed call returned
        sealed = (outcome(lambda: dataclasses.replace(sealed)), "plan")
    logical, targets, sources, _ref, _edit = _weakref_world(tensors, channel, callback, edit)
    unsealed = maybe_profiled(True, lambda: outcome(lambda: _bind(logical, targets, sources)))
    return sealed, unsealed


MESSAGES_12_7 = {
    "extra_fragment": "bound target executor fragments differ from target placement",
    "grown_fragment": "bound target fragment is not fully covered: ",
}
# the bindings built for the edit, refused when the part is not edited during the call
STEP_6_MESSAGES = (
    "unknown placement fragment in runtime binding: zz-extra",
    "runtime binding byte size does not match",
)
WEAKREF_CASES = [
    pytest.param(
        channel,
        tensors,
        callback,
        edit,
        id=f"{channel}-{size}-{callback}-{edit}",
    )
    for channel in ("views", "digest")
    for tensors, size in ((2, "small"), (200, "large"))
    for callback in ("python", "c_only")
    for edit in ("extra_fragment", "grown_fragment")
]


@pytest.mark.parametrize("channel, tensors, callback, edit", WEAKREF_CASES)
def test_a_weakref_callback_during_a_sealed_call_cannot_skip_coverage(
    channel: str, tensors: int, callback: str, edit: str
) -> None:
    no_hooks()
    sealed, unsealed = _weakref_outcomes(tensors, channel, callback, edit)
    # every rule refuses: §12.7 on main (the callback ran), step 6 where it cannot run in the call
    assert type(unsealed) is tuple and unsealed[0] == "ValueError"
    assert unsealed[1].startswith((MESSAGES_12_7[edit], *STEP_6_MESSAGES)), unsealed
    assert sealed == unsealed

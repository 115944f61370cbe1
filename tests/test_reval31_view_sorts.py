"""Session 31 (REVAL11): the attested view's cheaper parts.

* ``attested_view`` (with binding's snapshot objects) sorts a view's attested placement fragment
  ids by ``(hash, text)`` with an inline merge sort below 512 ids (it was ``qsort`` with an
  indirect comparator): the order is checked against ``bc._compact_pfids`` at sizes around the
  merge sort's run length (16) and over several merge passes, and the other index parts against
  ``attested_index`` (built the same way; the view's last-worker bucket and slot reads).
* ``revalidate_spaces`` reads the binding's fields from its layout slots and does not hash a
  plain target allocation twice: decisions against ``_spaces_reference`` with overlaps and
  subclass items (below).
* ``part_index_exact`` first walks the index in its own order against the parts (the order the
  placement builds it in) and returns True there without a probe or a sort; anything else falls to
  the full check. Forgeries an in-order walk could get wrong (a wrong key in the right place, an
  equal but not identical key, a part listed twice) are decided as the oracle decides.
"""

from __future__ import annotations

from typing import Any

import pytest

from mooncake.reshard import _native
from mooncake.reshard.weight import WeightPlacementPart
from mooncake.reshard.contracts.fragments import RuntimeBindingFragment
from mooncake.reshard.weight.types import PlacementFragment
from mooncake.reshard.weight._planner import bound_contracts as bc

from test_lead29_part_index import _WORLD_PARTS, _oracle
from test_native_revalidate import _bound_plan
from test_reval2_memory_r19 import _sorted_views


@pytest.mark.parametrize("count", [1, 3, 8, 9, 17, 40, 130])
def test_views_sort_like_compact_pfids(count: int) -> None:
    plan = _bound_plan(tensors=tuple(f"tensor-{i:03d}" for i in range(count)))
    sizes = []
    for attestation, objects, index, built in _sorted_views(plan):
        assert built.ids_by_worker == index[1]
        assert built.evidence_ids_by_worker == index[2]
        python = bc._AttestedView(attestation, objects)
        assert python.attested_pfids == built.attested_pfids
        assert python.ids_by_worker == built.ids_by_worker
        sizes.append(len(built.attested_pfids))
    # one id per tensor in each view: 40 and 130 ids are runs of 16 merged over 2 and 4 passes
    assert sizes and max(sizes) == count


def test_views_sort_at_every_size_around_a_run() -> None:
    """Sizes 1..35: the run boundaries of the merge sort (16, 32)."""
    seen = set()
    for count in range(1, 36):
        plan = _bound_plan(tensors=tuple(f"t{i}" for i in range(count)))
        seen.update(len(built.attested_pfids) for *_, built in _sorted_views(plan))
    assert {1, 2, 15, 16, 17, 31, 32, 33} <= seen


_P0, _P1, _P2 = _WORLD_PARTS[0], _WORLD_PARTS[1], _WORLD_PARTS[2]


def _copy(text: str) -> str:
    copied = "".join([text[:1], text[1:]])
    assert copied == text and copied is not text
    return copied


@pytest.mark.parametrize(
    "parts, index",
    [
        ((_P0, _P1), {_P0.participant_id: _P0, _P1.participant_id: _P1}),  # in order
        ((_P0, _P1), {_P1.participant_id: _P1, _P0.participant_id: _P0}),  # reversed: full check
        ((_P0, _P1), {_P0.participant_id: _P0, "x": _P1}),  # right part, wrong key, in place
        ((_P0, _P1), {"x": _P0, _P1.participant_id: _P1}),
        ((_P0, _P1), {_P0.participant_id: _P0, _copy(_P1.participant_id): _P1}),  # equal key
        ((_P0, _P0), {_P0.participant_id: _P0, "x": _P0}),  # a part listed twice
        ((_P0, _P0), {"x": _P0, _P0.participant_id: _P0}),
        ((_P0, _P1, _P2), {_P0.participant_id: _P0, _P1.participant_id: _P2, _P2.participant_id: _P1}),
        ((_P0, _P1), {_P0.participant_id: _P0, _P1.participant_id: _P0}),
        ((), {}),
    ],
)
def test_part_index_exact_in_order_walk(parts: tuple, index: dict) -> None:
    expected = _oracle(parts, index)
    assert _native.part_index_exact(parts, index, WeightPlacementPart) is expected


def test_part_index_exact_in_order_needs_each_parts_own_id() -> None:
    """A part whose id was edited in place after the index was built: its entry, in order and
    holding that part, no longer names it (False, as the oracle)."""
    import copy

    first, second = copy.copy(_P0), copy.copy(_P1)
    index = {first.participant_id: first, second.participant_id: second}
    assert _native.part_index_exact((first, second), index, WeightPlacementPart) is True
    object.__setattr__(second, "participant_id", "renamed")
    assert _oracle((first, second), index) is False
    assert _native.part_index_exact((first, second), index, WeightPlacementPart) is False


# ---------------------------------------------------------------------------------------
# revalidate_spaces: a binding of the accepted runtime layout read from its slots (rp_field), and
# a target allocation of plain items (exact int) not hashed twice; a space or allocation item of
# a subclass turns the call's plain flag off for good (its hash runs first again, as before).

from test_native_revalidate import _forge, _scan, _spaces_reference  # noqa: E402


@pytest.fixture(scope="module")
def spaces_plan() -> Any:
    # 400 fragments: past the space tuples' sharing threshold (256)
    return _bound_plan(tensors=tuple(f"t{i}" for i in range(80)))


_TYPES = (RuntimeBindingFragment, PlacementFragment)


def _into_source_space(fragment: Any, source: Any, allocation: Any) -> Any:
    binding = _forge(fragment.binding, worker_id=source.binding.worker_id, device=source.binding.device,
                     storage_address=allocation[0], storage_nbytes=allocation[1])
    return _forge(fragment, instance_id=source.instance_id, binding=binding)


def _decide(frags: list[Any], source_of: Any, target_of: Any, boxes: Any) -> None:
    for physical in (True, False):
        reference = _spaces_reference(frags, source_of, target_of, boxes, physical)
        assert _native.revalidate_spaces(frags, source_of, target_of, boxes, physical) is reference
        assert _native.revalidate_spaces(frags, source_of, target_of, boxes, physical, *_TYPES) is reference


def test_spaces_overlap_found_in_a_run_of_one_space(spaces_plan: Any) -> None:
    """Two targets in a row moved into a source's address space (the same str objects, so the
    same shared space tuple): one with an allocation of its own, one sharing a source
    allocation, in both orders. The overlap is found (False), at several places of the target
    order."""
    frags, source_of, target_of, boxes = _scan(spaces_plan.operations)
    assert len(frags) >= 256
    distinct_targets = list(dict.fromkeys(target_of))
    _decide(list(frags), source_of, target_of, boxes)
    for at in (0, 1, len(distinct_targets) // 2, len(distinct_targets) - 2):
        source = frags[source_of[at % len(source_of)]]
        shared = (source.binding.storage_address, source.binding.storage_nbytes)
        forged = list(frags)
        first, second = distinct_targets[at], distinct_targets[at + 1]
        forged[first] = _into_source_space(frags[first], source, (2**40 + at, 8))
        forged[second] = _into_source_space(frags[second], source, shared)
        assert _spaces_reference(forged, source_of, target_of, boxes, False) is False
        _decide(forged, source_of, target_of, boxes)
        # the other way round: the overlap first, then one of its own through the same bucket
        forged[first] = _into_source_space(frags[first], source, shared)
        forged[second] = _into_source_space(frags[second], source, (2**40 + at, 8))
        _decide(forged, source_of, target_of, boxes)


class _Str(str):
    pass


class _Int(int):
    pass


@pytest.mark.parametrize("field", ["worker_id", "device", "storage_address", "storage_nbytes"])
def test_spaces_with_a_foreign_item_decide_as_the_reference(spaces_plan: Any, field: str) -> None:
    """A space or allocation item of a subclass (its hash and comparisons are Python code) from
    the middle of the sources or targets on: the plain flag is off from there, and the pass
    decides as the reference, with and without an overlap after it."""
    frags, source_of, target_of, boxes = _scan(spaces_plan.operations)
    for side_of in (source_of, target_of):
        distinct = list(dict.fromkeys(side_of))
        position = distinct[len(distinct) // 2]
        fragment = frags[position]
        value = getattr(fragment.binding, field)
        odd = _Str(value) if type(value) is str else _Int(value)
        forged = list(frags)
        forged[position] = _forge(fragment, binding=_forge(fragment.binding, **{field: odd}))
        _decide(forged, source_of, target_of, boxes)
        # and an overlap after it, in a run of two targets in a source's space
        targets = list(dict.fromkeys(target_of))
        source = frags[source_of[-1]]
        shared = (source.binding.storage_address, source.binding.storage_nbytes)
        forged[targets[-2]] = _into_source_space(frags[targets[-2]], source, (2**41, 8))
        forged[targets[-1]] = _into_source_space(frags[targets[-1]], source, shared)
        assert _spaces_reference(forged, source_of, target_of, boxes, False) is False
        _decide(forged, source_of, target_of, boxes)

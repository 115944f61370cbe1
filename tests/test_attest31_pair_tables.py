"""attest_many's carried tables built in the pair loop (session 31).

Since ATTEST11, ``attest_many`` builds each attestation's carried table (the evidence snapshots
of its one worker, sorted by runtime fragment id) inside the fused pass over the fragment pairs,
where each pair's placement fragment and runtime fragment are at hand, instead of walking the
attestation's placement dict and evidence fragments again afterwards. Anything that pass does
not build exactly (a second worker, a part below the fused pass's size, a fragment whose state
is not its C-owned layout, an attestation not holding the very objects the pairs were read
with) leaves the table to the previous build from the attestation.

Checked here, against the tables ``project_attested`` builds without a carrier (from other
attestations of copies of the same bindings): the executors and every snapshot are equal for
parts around the fused pass's threshold, runtime fragment ids increasing, reversed, shuffled
and unpadded (the sort), one worker changed at the first, a middle or the last fragment, every
other fragment on a second worker, a runtime fragment subclass (that binding is not decided
here), and distinct generations per binding. Mutants of the pair-loop build fail these tests
(recorded in /work/notes/r31/attest11/REPORT.md).
"""

from __future__ import annotations

import copy
import dataclasses
import random
from typing import Any, Callable

import pytest

from forge_helpers import sized_world
from test_attest30_carried_tables import _attest_with_carrier, _project
from test_native_binder_attest_many import CLASSES

from mooncake.reshard import _native
from mooncake.reshard.contracts.fragments import RuntimeBindingFragment


def _target(tensors: int) -> tuple[Any, tuple[Any, ...]]:
    logical, targets, _sources, _memory = sized_world(tensors)
    return logical.target_placement, tuple(targets)


def _edited(bindings: tuple[Any, ...], edit: Callable[[int, int, Any], None]) -> tuple[Any, ...]:
    """Copies of the bindings and their fragments, edit(binding index, fragment index, fragment)
    applied to each fragment copy."""
    out = []
    for b, binding in enumerate(bindings):
        copied = copy.copy(binding)
        fragments = tuple(copy.copy(f) for f in binding.fragments)
        for i, fragment in enumerate(fragments):
            edit(b, i, fragment)
        object.__setattr__(copied, "fragments", fragments)
        out.append(copied)
    return tuple(out)


def _same_edit(bindings: tuple[Any, ...], edit: Callable[[int, int, Any], None]) -> tuple[Any, ...]:
    return _edited(bindings, edit)


def _as_is(b: int, i: int, fragment: Any) -> None:
    pass


def _ids_reversed(b: int, i: int, fragment: Any) -> None:
    object.__setattr__(fragment, "fragment_id", f"rev-{b}-{1000 - i}")


def _ids_unpadded(b: int, i: int, fragment: Any) -> None:
    object.__setattr__(fragment, "fragment_id", f"dst-{b}-{i}")  # dst-0-10 sorts before dst-0-2


_SHUFFLE = random.Random(31)
_ORDERS: dict[int, list[int]] = {}


def _ids_shuffled(b: int, i: int, fragment: Any) -> None:
    order = _ORDERS.setdefault(b, _SHUFFLE.sample(range(10_000), 1000))
    object.__setattr__(fragment, "fragment_id", f"sh-{b}-{order[i]}")


def _worker_at(position: Callable[[int], bool]) -> Callable[[int, int, Any], None]:
    def edit(b: int, i: int, fragment: Any) -> None:
        if position(i):
            object.__setattr__(fragment, "worker_id", fragment.worker_id + "-other")

    edit.__name__ = "worker"
    return edit


EDITS = {
    "as_is": _as_is,
    "ids_reversed": _ids_reversed,
    "ids_unpadded": _ids_unpadded,
    "ids_shuffled": _ids_shuffled,
    "second_worker_first": _worker_at(lambda i: i == 0),
    "second_worker_middle": _worker_at(lambda i: i == 9),
    "second_worker_at_14": _worker_at(lambda i: i == 14),  # the last at 15 pairs
    "every_other_worker": _worker_at(lambda i: i % 2 == 1),
}


def _outcomes(placement: Any, bindings: tuple[Any, ...]) -> tuple[Any, Any]:
    """(carried, built): project_attested with the carrier of attest_many, and without a carrier
    on attestations of fresh copies of the same bindings (no table cached on them)."""
    attestations, carrier = _attest_with_carrier(placement, bindings)
    fresh = tuple(copy.copy(binding) for binding in bindings)
    again = _native.attest_many(*CLASSES, placement, placement._part_index(), fresh, placement.resource_id,
                                placement.placement_id, placement.digest, placement.revision)
    assert [a is None for a in attestations] == [a is None for a in again]
    if any(a is None for a in attestations):
        return attestations, again
    return _project(placement, bindings, attestations, carrier), _project(placement, fresh, again, None)


def _assert_same(carried: Any, built: Any) -> None:
    if carried is None or built is None or isinstance(carried, list):
        assert (carried is None) == (built is None)
        return
    assert carried == built
    for executor, other in zip(carried, built):
        assert executor.fragment_snapshots == other.fragment_snapshots
        assert [s.lease_generation for s in executor.fragment_snapshots] == [
            s.lease_generation for s in other.fragment_snapshots
        ]


@pytest.mark.parametrize("tensors", [15, 16, 17, 200])
@pytest.mark.parametrize("edit", list(EDITS), ids=str)
def test_pair_loop_tables_equal_the_built_ones(tensors: int, edit: str) -> None:
    placement, bindings = _target(tensors)
    bindings = _same_edit(bindings, EDITS[edit])
    carried, built = _outcomes(placement, bindings)
    _assert_same(carried, built)
    if edit.startswith(("second_worker", "every_other")):
        assert carried is None  # two workers in a part: project_attested does not decide it
    else:
        assert carried is not None


def test_a_runtime_fragment_subclass_is_not_decided_and_the_rest_carried() -> None:
    placement, bindings = _target(40)

    class Sub(RuntimeBindingFragment):
        pass

    bindings = _edited(bindings, _as_is)
    fragments = list(bindings[0].fragments)
    fragments[20] = Sub(**{f.name: getattr(fragments[20], f.name) for f in dataclasses.fields(fragments[20])})
    object.__setattr__(bindings[0], "fragments", tuple(fragments))
    attestations, carrier = _attest_with_carrier(placement, bindings)
    assert attestations[0] is None and all(a is not None for a in attestations[1:])


def test_distinct_generations_per_binding() -> None:
    placement, bindings = _target(200)
    bindings = _edited(bindings, _as_is)
    for k, binding in enumerate(bindings):
        object.__setattr__(binding, "generation", 1000 + k)
    carried, built = _outcomes(placement, bindings)
    _assert_same(carried, built)
    assert carried is not None
    generations = {s.lease_generation for e in carried for s in e.fragment_snapshots}
    assert generations == {1000 + k for k in range(len(bindings))}

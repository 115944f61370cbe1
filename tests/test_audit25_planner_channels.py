"""Foreign code inside the planner's C passes (AUDIT5, session 25).

``plan_placement_transfer`` trusts its placements' field values: the constructors refuse str, int
and tuple subclasses, but a value stored after construction with ``object.__setattr__`` (frozen
dataclasses do not stop it; the threat model of the session 22-24 audits) is compared, hashed or
iterated by ``_native`` functions of ``csrc/planobj.c`` (``tensor_columns``, ``catalog_map``,
``owner_minimums``, ``select_sources``, ``project_executors``), whose ``__eq__`` / ``__ne__`` /
``__hash__`` / ``__iter__`` / ``__len__`` then run inside the pass; ``from_fragments`` does the same
in ``canonical_tensors_json`` (csrc/canonical.c) with a tuple-subclass ``parallel_axes``. The plan
is built through the trusted path (no revalidation), so code run there decides with the pass.

Each case records a dunder called directly by any ``_native`` function. Closed (session 26,
AUDIT5 F4): each pass checks the kind of every value it compares, hashes or iterates (exact str,
int, tuple or list; dicts it probes plain) and otherwise stops or declines, so the planner's
Python form decides that value. Each case fails on 3d1b789.
A bind of such a plan is unsealed (``exactness``) and revalidated by the rules' fast path, and
tests/test_audit25_value_channels.py covers that path.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any, Callable

import pytest

from native_watch import ForeignInt, ForeignStr, ForeignTuple, native_hits

from memory_executor import tp_placement

from mooncake.reshard.weight import WeightPlacementManifest, plan_placement_transfer

def _placements() -> tuple[Any, Any]:
    source = tp_placement(2, prefix="s", dp=2, shape=(4, 6), tensors=("wa", "wb"))
    target = tp_placement(2, prefix="t", shape=(4, 6), tensors=("wa", "wb"))
    return source, target


def _hits(call: Callable[[], Any]) -> list[str]:
    return native_hits(call)


def _forge(obj: Any, field: str, make: Callable[[Any], Any]) -> None:
    object.__setattr__(obj, field, make(getattr(obj, field)))


def _item(cls: type, index: int) -> Callable[[Any], Any]:
    return lambda value: type(value)(cls(item) if at == index else item for at, item in enumerate(value))


# (the object of the source placement, field, how to make the value foreign)
_CASES: dict[str, tuple[Callable[[Any], Any], str, Callable[[Any], Any]]] = {
    "placement.parts": (lambda p: p, "parts", ForeignTuple),
    "part.fragments": (lambda p: p.parts[0], "fragments", ForeignTuple),
    "fragment.tensor_id": (lambda p: p.parts[0].fragments[0], "tensor_id", ForeignStr),
    "fragment.placement_fragment_id": (lambda p: p.parts[0].fragments[0], "placement_fragment_id", ForeignStr),
    "rank.dp": (lambda p: p.parts[0].fragments[0].rank, "dp", ForeignInt),
    "descriptor.tensor_id": (lambda p: p.tensors[0], "tensor_id", ForeignStr),
    "descriptor.dtype": (lambda p: p.tensors[0], "dtype", ForeignStr),
    "descriptor.itemsize": (lambda p: p.tensors[0], "itemsize", ForeignInt),
    "descriptor.global_shape": (lambda p: p.tensors[0], "global_shape", ForeignTuple),
    "descriptor.global_shape[0]": (lambda p: p.tensors[0], "global_shape", _item(ForeignInt, 0)),
}


def test_exact_placements_run_no_foreign_code() -> None:
    source, target = _placements()
    assert _hits(lambda: plan_placement_transfer(source, target)) == []


@pytest.mark.parametrize("case", sorted(_CASES))
def test_plan_placement_transfer_runs_no_foreign_code(case: str) -> None:
    reach, field, make = _CASES[case]
    source, target = _placements()
    _forge(reach(source), field, make)
    assert _hits(lambda: plan_placement_transfer(source, target)) == []
    # the forged value (equal to the one it replaced) is decided by the Python form: the same plan
    assert plan_placement_transfer(source, target) == plan_placement_transfer(*_placements())


def test_from_fragments_runs_no_foreign_code() -> None:
    _source, target = _placements()
    descriptor = target.tensors[0]
    _forge(descriptor, "parallel_axes", ForeignTuple)

    def assemble() -> Any:
        return WeightPlacementManifest.from_fragments(
            resource_id=target.resource_id, revision=target.revision, weight_generation=target.weight_generation,
            placement_set_id=target.placement_set_id, topology=target.topology, tensors=target.tensors,
            fragments=target.fragments, placement_id=target.placement_id,
        )

    assert _hits(assemble) == []
    assert assemble().digest == _placements()[1].digest  # encoded by the Python form: the same text

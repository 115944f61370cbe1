"""Foreign code inside bind's own C passes (AUDIT5, session 25).

A bind whose inputs hold a str subclass stored after construction (``object.__setattr__``) is
unsealed (``exactness``), so no watch runs; before its plan reaches the fast revalidation
(tests/test_audit25_value_channels.py) the value's ``__eq__`` / ``__hash__`` already runs inside
csrc/binder.c passes: ``operation_views`` (a logical executor's ``placement_fragment_ids`` are
the keys of the dict it probes with each fragment's id), ``attest_many`` (participant ids of the
target placement's parts and of the binding manifests), ``bound_fragments`` (a runtime fragment's
``placement_fragment_id``), ``project_attested`` (a placement fragment's id). ``replace()`` of a
logical plan runs ``operation_views`` the same way.

Measured with a vandal hook (every field of every reachable object replaced by an equal fresh
copy, instance dicts replaced, lists cleared, ``gc.collect()``, under ``PYTHONMALLOC=debug``):
no crash in any of these passes, so no memory unsafety was shown; the invariant (no foreign code
inside a pass) still failed. Closed (session 26, AUDIT5 F5): these passes and
``operation_views`` now probe only plain dicts (exact dicts of exact-str keys, plain_dict.h) with
exact-str ids and decline anything else, so the Python path decides the forged value as the rules
do. Each case fails on 3d1b789.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any, Callable

import pytest

from native_watch import ForeignInt, ForeignStr, ForeignTuple, native_hits

from forge_helpers import outcome, sized_world

from mooncake.reshard.weight import bind_logical_transfer_plan

def _inputs() -> tuple[Any, Any, Any]:
    logical, targets, sources, _memory = sized_world(2)
    return logical, targets, sources


def _hits(call: Callable[[], Any]) -> list[str]:
    return native_hits(call)


def _forge(obj: Any, field: str, make: Callable[[Any], Any]) -> None:
    object.__setattr__(obj, field, make(getattr(obj, field)))


def _first_item(cls: type) -> Callable[[Any], Any]:
    return lambda value: type(value)(cls(item) if at == 0 else item for at, item in enumerate(value))


# (the object of the bind inputs (logical, targets, sources), field, how to make it foreign)
_CASES: dict[str, tuple[Callable[[Any], Any], str, Callable[[Any], Any]]] = {
    "logical executor.placement_fragment_ids[0]": (
        lambda inputs: inputs[0].target_executors[0], "placement_fragment_ids", _first_item(ForeignStr)),
    "target part.participant_id": (lambda inputs: inputs[0].target_placement.parts[0], "participant_id", ForeignStr),
    "binding manifest.participant_id": (lambda inputs: inputs[1][0], "participant_id", ForeignStr),
    "runtime fragment.placement_fragment_id": (
        lambda inputs: inputs[1][0].fragments[0], "placement_fragment_id", ForeignStr),
    "placement fragment.placement_fragment_id": (
        lambda inputs: inputs[0].target_placement.parts[0].fragments[0], "placement_fragment_id", ForeignStr),
}


# The outcome on 3d1b789 (before these passes declined; the same then): the rules' message of each
# refused forgery; None: bound, with as many operations as the unforged inputs give.
_OUTCOMES: dict[str, Any] = {
    "logical executor.placement_fragment_ids[0]": None,
    "target part.participant_id": ("ValueError", "executor plan identifiers must not be empty"),
    "binding manifest.participant_id": ("ValueError", "participant_id must be a non-empty string"),
    "runtime fragment.placement_fragment_id": ("ValueError", "placement_fragment_id must be a non-empty string"),
    "placement fragment.placement_fragment_id": ("ValueError", "placement_fragment_id must be a non-empty string"),
}


def test_exact_inputs_run_no_foreign_code() -> None:
    logical, targets, sources = _inputs()
    assert _hits(lambda: bind_logical_transfer_plan(logical, targets, source_bindings=sources)) == []


@pytest.mark.parametrize("case", sorted(_CASES))
def test_bind_runs_no_foreign_code_in_its_passes(case: str) -> None:
    reach, field, make = _CASES[case]
    inputs = _inputs()
    _forge(reach(inputs), field, make)
    logical, targets, sources = inputs
    hits = _hits(lambda: bind_logical_transfer_plan(logical, targets, source_bindings=sources))
    assert [hit for hit in hits if not hit.endswith(("revalidate_fragments", "revalidate_views", "attested_view"))] == []
    # decided as before (the Python forms the passes decline to decide as the rules do)
    got = outcome(lambda: bind_logical_transfer_plan(logical, targets, source_bindings=sources))
    if _OUTCOMES[case] is None:
        clean, clean_targets, clean_sources = _inputs()
        want = bind_logical_transfer_plan(clean, clean_targets, source_bindings=clean_sources)
        assert not isinstance(got, tuple) and len(got.operations) == len(want.operations) > 0
    else:
        assert got == _OUTCOMES[case]


def test_logical_replace_runs_no_foreign_code_in_operation_views() -> None:
    logical, _targets, _sources = _inputs()
    _forge(logical.target_executors[0], "placement_fragment_ids", _first_item(ForeignStr))
    assert _hits(lambda: dataclasses.replace(logical)) == []

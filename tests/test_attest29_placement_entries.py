"""binder.c ``attested_executors``: the attested placement dict read as a C array (session 29).

The evidence loops read the attestation's ``_placement_dict`` from an array of its entries taken
in one walk, and check its keys lazily: an aligned read proves the key it takes (the exact-str id
itself, or an exact str equal to it), and the keys no aligned read proved are checked before
the first probe, or at the end. The verdict must be the one of the plain-keys walk the pass
made first before: decline (None) exactly when some key of the dict is not an exact str, at any
position (before, among or after the entries the evidence reads), on the one-worker path and
on the grouped path that reads the entries a second time; accept every plain dict, aligned or
not, with the rows of the Python path. A key whose ``__eq__`` would run must never run in the
pass. Removing the final check (or trusting keys no aligned read proved) fails these tests."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from test_native_binder import _executors_kernel, _multi_worker_binding, _part, _python_rows, _world

from mooncake.reshard import _native
from mooncake.reshard.weight._planner.attestation import RuntimeBindingAttestation
from mooncake.reshard.weight._planner.bound_contracts import ExecutorTransferPlan


class _Key(str):
    """A str subclass key that records every comparison and hash made with it."""

    calls: list[str] = []

    def __eq__(self, other: object) -> bool:
        _Key.calls.append("eq")
        return str.__eq__(self, other)

    def __hash__(self) -> int:
        _Key.calls.append("hash")
        return str.__hash__(self)


def _fresh(placement: Any, binding: Any) -> Any:
    return RuntimeBindingAttestation._from_validated(placement, dataclasses.replace(binding))


def _with_dict(attestation: Any, items: list[tuple[Any, Any]]) -> Any:
    object.__setattr__(attestation, "_placement_dict", dict(items))
    return attestation


def _cases(spread: bool) -> list[tuple[Any, Any, Any]]:
    placement, bindings = _world(tensors=4)
    out = []
    for binding in bindings:
        if spread:
            binding = _multi_worker_binding(binding)
        out.append((placement, binding, _part(placement, binding)))
    return out


# The kinds of key that are not exact str: a subclass equal to an id of the part, a subclass
# of a fresh text, an int.
def _odd_key(kind: str, pfid: str) -> Any:
    if kind == "equal":
        return _Key(pfid)
    if kind == "fresh":
        return _Key("planted-" + pfid)
    return 12345


@pytest.mark.parametrize("spread", [False, True])
@pytest.mark.parametrize("kind", ["equal", "fresh", "int"])
def test_a_key_that_is_not_an_exact_str_declines_at_every_position(spread: bool, kind: str) -> None:
    for placement, binding, part in _cases(spread):
        items = list(_fresh(placement, binding)._placement_dict.items())
        assert len(items) >= 2
        checked: list[tuple[str, int, bool]] = []
        # positions 0 .. len(items): before, among and after the entries the evidence reads
        for at in range(len(items) + 1):
            for replace in (False, True):
                if replace and at == len(items):
                    continue
                planted = list(items)
                pfid, fragment = items[min(at, len(items) - 1)]
                key = _odd_key(kind, pfid)
                if replace:
                    planted[at] = (key, fragment)  # the entry's own key made odd
                else:
                    planted.insert(at, (key, fragment))
                attestation = _with_dict(_fresh(placement, binding), planted)
                if all(type(key) is str for key in attestation._placement_dict):
                    continue  # an equal key inserted merged with the entry's own (dict())
                _Key.calls.clear()
                assert _executors_kernel(placement, part, attestation) is None, (kind, at, replace)
                assert _Key.calls == []  # no planted key's code ran in the pass
                checked.append((kind, at, replace))
        # every position was tried with an odd key in the dict
        assert {at for _, at, _ in checked} == set(range(len(items) + 1)) or kind == "equal"


@pytest.mark.parametrize("spread", [False, True])
def test_extra_exact_keys_after_the_evidence_are_accepted(spread: bool) -> None:
    for placement, binding, part in _cases(spread):
        attestation = _fresh(placement, binding)
        items = list(attestation._placement_dict.items())
        extra = [("extra-" + str(k), fragment) for k, (_, fragment) in enumerate(items)]
        _with_dict(attestation, items + extra)
        built = _executors_kernel(placement, part, attestation)
        assert built is not None
        assert built[1] == _python_rows(placement, part, _with_dict(_fresh(placement, binding), items + extra))


@settings(max_examples=60, deadline=None)
@given(data=st.data(), spread=st.booleans(), odd=st.booleans())
def test_any_order_decides_as_the_plain_walk(data: st.DataObject, spread: bool, odd: bool) -> None:
    """Entries in any order, some dropped, some extra (exact str or not): accepted with the
    Python rows exactly when every key is an exact str."""
    cases = _cases(spread)
    placement, binding, part = cases[data.draw(st.integers(0, len(cases) - 1))]
    items = list(_fresh(placement, binding)._placement_dict.items())
    kept = data.draw(st.lists(st.sampled_from(range(len(items))), unique=True, max_size=len(items)))
    planted = [items[k] for k in kept]
    extras = data.draw(st.integers(0, 3))
    for k in range(extras):
        at = data.draw(st.integers(0, len(planted)))
        planted.insert(at, ("extra-%d" % k, items[0][1]))
    if odd and planted:
        at = data.draw(st.integers(0, len(planted) - 1))
        planted[at] = (_Key(planted[at][0]), planted[at][1])
    attestation = _with_dict(_fresh(placement, binding), planted)
    plain = all(type(key) is str for key in attestation._placement_dict)
    _Key.calls.clear()
    built = _executors_kernel(placement, part, attestation)
    assert _Key.calls == []
    if not plain:
        assert built is None
        return
    assert built is not None
    # the rows of the whole dict (the Python path's), restricted to the entries kept: each kept
    # id maps to its own placement fragment, so its snapshot is the same
    keys = set(attestation._placement_dict)
    expected = []
    for worker_id, snapshots, _ in _python_rows(placement, part, _fresh(placement, binding)):
        chosen = tuple(snapshot for snapshot in snapshots if snapshot.placement_fragment_id in keys)
        if chosen:
            expected.append((worker_id, chosen))
    assert [(worker_id, snapshots) for worker_id, snapshots, _ in built[1]] == expected
    for worker_id, snapshots, executor in built[1]:
        assert built[0][worker_id] is snapshots
        assert executor.fragment_ids == tuple(snapshot.fragment_id for snapshot in snapshots)


def test_project_attested_declines_a_planted_key_after_the_evidence() -> None:
    """Through project_attested (which builds the rows with attested_executors): a key past
    every entry the evidence reads makes the whole projection decline."""
    from mooncake.reshard.weight import ParallelRank, PlacementFragment, RuntimeBindingFragment
    from mooncake.reshard.weight._planner.attestation import RuntimeBindingEvidence
    from mooncake.reshard.weight._planner.bound_contracts import RuntimeFragmentSnapshot
    from mooncake.reshard.weight._planner.bound_validation import _attestation_values

    placement, bindings = _world(tensors=4)

    def attestations_of(plant: bool) -> dict[Any, Any]:
        attestations = {}
        for binding in bindings:
            attestation = _fresh(placement, binding)
            if plant:
                items = list(attestation._placement_dict.items())
                _with_dict(attestation, items + [(_Key("zz-planted"), items[0][1])])
            attestations[(placement.placement_id, binding.participant_id)] = attestation
        return attestations

    def project(attestations: dict[Any, Any]) -> Any:
        by_key = {(binding.placement_id, binding.participant_id): binding for binding in bindings}
        return _native.project_attested(
            ExecutorTransferPlan,
            RuntimeFragmentSnapshot,
            RuntimeBindingAttestation,
            RuntimeBindingEvidence,
            RuntimeBindingFragment,
            ParallelRank,
            _attestation_values,
            placement,
            placement.parts,
            placement._part_index(),
            by_key,
            attestations,
            placement.placement_id,
            placement.digest,
            None,
            PlacementFragment,
        )

    assert project(attestations_of(False)) is not None
    planted = attestations_of(True)
    _Key.calls.clear()
    assert project(planted) is None
    assert _Key.calls == []

"""``attested_index`` / the attested view's index builds the evidence ids of every fragment by
worker (``evidence_ids_by_worker``) only from the first evidence fragment without a placement
entry on (a complete attestation returns the attested ids for both). It must equal the Python
reference wherever the missing entries are: first, in the middle, last, several, all."""

from __future__ import annotations

from typing import Any

import pytest

from test_native_revalidate_fastpaths import _attestations, _forged_attestation, _index, _reference, _spread


def _spread_attestation() -> tuple[Any, tuple[Any, ...]]:
    attestation = _attestations()[0]
    fragments = attestation.evidence.fragments * 3
    return attestation, tuple(_spread(f, i, len(fragments)) for i, f in enumerate(fragments))


@pytest.mark.parametrize("where", ["first", "middle", "last", "two", "all"])
def test_incomplete_index_equals_the_reference(where: str) -> None:
    attestation, fragments = _spread_attestation()
    ids = [f.placement_fragment_id for f in fragments]
    chosen = {
        "first": {ids[0]},
        "middle": {ids[len(ids) // 2]},
        "last": {ids[-1]},
        "two": {ids[1], ids[-2]},
        "all": set(ids),
    }[where]
    partial = {k: v for k, v in attestation._placement_dict.items() if k not in chosen}
    incomplete = _forged_attestation(attestation, fragments=fragments, placement_dict=partial)
    built = _index(incomplete)
    reference = _reference(incomplete)
    assert built is not None and built == reference
    assert built[3] is False and not (chosen & built[0])
    assert built[2] is not built[1]
    assert list(built[2]) == list(reference[2])  # the workers in the same order
    assert sum(map(len, built[2].values())) == len(fragments)
    for worker, evidence_ids in built[2].items():  # the attested ids: a sub-sequence of each
        attested = built[1].get(worker, ())
        assert set(attested) <= set(evidence_ids)


def test_complete_index_shares_its_table() -> None:
    attestation, fragments = _spread_attestation()
    spread = _forged_attestation(attestation, fragments=fragments)
    built = _index(spread)
    assert built == _reference(spread) and built[3] is True and built[2] is built[1]

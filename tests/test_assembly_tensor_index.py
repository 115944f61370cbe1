"""from_fragments hands the tensor ids' positions it read (in input order) to the fragment table's
packing when every tensor is exactly a TensorDescriptor, instead of reading each sorted tensor's
id again; with any other descriptor class the packing reads them itself, as before. Either way
the placement is the one the plain constructor builds."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import _workloads as w  # noqa: E402

from mooncake.reshard.weight import TensorDescriptor, WeightPlacementManifest  # noqa: E402
from mooncake.reshard.weight import validation  # noqa: E402


class _Descriptor(TensorDescriptor):
    pass


def _assemble(side: Any, tensors: tuple[Any, ...]) -> WeightPlacementManifest:
    return WeightPlacementManifest.from_fragments(
        resource_id=w.RESOURCE_ID, revision=w.REVISION, weight_generation=w.WEIGHT_GENERATION,
        placement_set_id=side.placement_set_id, topology=side.topology, tensors=tensors, fragments=side.fragments,
    )


@pytest.mark.parametrize("subclass_at", [None, 0, -1])
def test_ids_read_again_only_for_other_descriptor_classes(subclass_at: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    side = w.independent_experts(layers=1, experts=48).target
    tensors = list(side.tensors)
    if subclass_at is not None:
        tensors[subclass_at] = _Descriptor(**tensors[subclass_at].__dict__)
    reads = []
    real = validation._TENSOR_ID

    def counting(tensor: Any) -> Any:
        reads.append(tensor)
        return real(tensor)

    monkeypatch.setattr(validation, "_TENSOR_ID", counting)
    placement = _assemble(side, tuple(tensors))
    assert len(reads) == (0 if subclass_at is None else len(tensors))
    monkeypatch.undo()
    plain = WeightPlacementManifest(
        resource_id=placement.resource_id, revision=placement.revision,
        weight_generation=placement.weight_generation, placement_set_id=placement.placement_set_id,
        topology=placement.topology, parts=placement.parts,
    )
    assert plain == placement and plain.digest == placement.digest
    assert [t.tensor_id for t in placement.tensors] == sorted(t.tensor_id for t in tensors)
    table = placement.__dict__["_fragment_table"]
    again = validation.pack_placement_fragments(placement.tensors, placement.fragments)
    assert table.tensor_classes([0] * len(tensors)) == again.tensor_classes([0] * len(tensors))
    assert table.duplicate_logical_fragment() == again.duplicate_logical_fragment() == -1

"""``WeightRuntimeBindingManifest`` checks its six ids first, then ``placement_digest``, then
``generation`` (spec §4.9 lists them so, and the released reference checks them in that order;
``conformance/`` found ours checking in field order)."""

from __future__ import annotations

from typing import Any, Dict

import pytest

from mooncake.reshard.weight import RuntimeBindingFragment, WeightRuntimeBindingManifest


def _fields(**changes: Any) -> Dict[str, Any]:
    fragment = RuntimeBindingFragment(
        placement_fragment_id="pf-0", fragment_id="rt-0", address=4096, nbytes=32, worker_id="worker-0",
        endpoint="host:1", device="cuda:0", itemsize=2, local_shape=(4, 4), strides_bytes=(8, 2),
        storage_address=4096, storage_nbytes=32, storage_offset_bytes=0,
    )
    fields = dict(resource_id="model", placement_id="sha256:x", placement_digest="a" * 64, instance_id="i",
                  generation=1, lease_id="l", revision="r", participant_id="worker-0", fragments=(fragment,))
    fields.update(changes)
    return fields


def test_the_valid_fields_construct() -> None:
    assert WeightRuntimeBindingManifest(**_fields()).generation == 1


@pytest.mark.parametrize("later", ["instance_id", "lease_id", "revision", "participant_id"])
def test_an_id_is_checked_before_the_digest_and_the_generation(later: str) -> None:
    with pytest.raises(ValueError, match=rf"^{later} must be a non-empty string$"):
        WeightRuntimeBindingManifest(**_fields(placement_digest="", generation=-1, **{later: ""}))


def test_the_digest_is_checked_before_the_generation() -> None:
    with pytest.raises(ValueError, match=r"^placement_digest must be a lowercase SHA-256 digest$"):
        WeightRuntimeBindingManifest(**_fields(placement_digest="g" * 64, generation=-1))

"""binder.c ``bd_ordered_build`` (``bound_fragments_ordered``, ``bind_regions_ordered``) walks an
attestation's two dicts once (session 40, BIND40): the plain-keys check (plain_dict.h) is made
before the first probe, or, when every read took the dicts' next entry (each such key the exact-str
id or an exact str equal to it), on the entries past the two cursors only. The verdict must be
the one walking every key first gave: a key that is not an exact str anywhere in either dict (before,
among or after the part's entries) declines, with no ``__eq__`` run; an extra exact-str key is
accepted (it is never probed) as before."""

from __future__ import annotations

from typing import Any, Callable

import pytest

import forge_helpers
from forge_helpers import CollidingKey, LoudKey
from mooncake.reshard import _native
from mooncake.reshard.weight.planner import TransferRegion
from mooncake.reshard.weight._planner.attestation import RuntimeBindingAttestation
from mooncake.reshard.weight._planner.fragments import BoundWeightFragment

from test_bindpass27_fused import _assert_same, _fused
from test_native_binder_ordered import _world

DICTS = ("_binding_dict", "_placement_dict")


def _ordered(side: Any, ops: Any, which: int, as_map: bool) -> Any:
    parts, attestations = side
    return _native.bound_fragments_ordered(
        BoundWeightFragment, RuntimeBindingAttestation, TransferRegion, parts, attestations, ops, which, as_map
    )


def _rebuilt(dict_: dict[Any, Any], where: str, key: Any) -> dict[Any, Any]:
    """The dict's entries with key (mapped to its first value) planted first, in the middle, or
    last; or (where "none") as they were."""
    items = list(dict_.items())
    if where == "none":
        return dict(items)
    value = items[0][1]
    at = {"first": 0, "middle": len(items) // 2, "last": len(items)}[where]
    return dict(items[:at] + [(key, value)] + items[at:])


def _planted(side: Any, part: int, name: str, where: str, key: Any) -> Any:
    parts, attestations = side
    attestation = attestations[part]
    state = attestation.__dict__
    state[name] = _rebuilt(state[name], where, key)
    return parts, attestations


KEYS: dict[str, Callable[[], Any]] = {
    "loud": lambda: LoudKey("planted"),
    "colliding": lambda: CollidingKey("planted"),
    "int": lambda: 7,
    "str": lambda: "planted-extra",
}


@pytest.mark.parametrize("key", sorted(KEYS))
@pytest.mark.parametrize("where", ["first", "middle", "last"])
@pytest.mark.parametrize("name", DICTS)
@pytest.mark.parametrize("which", [0, 1])
def test_planted_key_decides_as_the_whole_walk(which: int, name: str, where: str, key: str) -> None:
    world = _world()
    ops = world.logical.operations
    sides = [world.side(0), world.side(1)]
    parts, _ = sides[which]
    part = len(parts) - 1
    sides[which] = _planted(sides[which], part, name, where, KEYS[key]())
    forge_helpers.EQ_CALLS.clear()
    forge_helpers.COLLIDED_CALLS.clear()
    results = [_ordered(sides[which], ops, which, True), _ordered(sides[which], ops, which, False)]
    fused = _fused(ops, sides[0], sides[1])
    assert forge_helpers.EQ_CALLS == [] and forge_helpers.COLLIDED_CALLS == []
    if key == "str":
        assert all(result is not None for result in results)
        assert fused is not None
        _assert_same(ops, sides[0], sides[1])
    else:
        assert results == [None, None]
        assert fused is None


@pytest.mark.parametrize("which", [0, 1])
def test_unplanted_dicts_are_decided(which: int) -> None:
    world = _world()
    ops = world.logical.operations
    sides = [world.side(0), world.side(1)]
    for name in DICTS:
        sides[which] = _planted(sides[which], 0, name, "none", None)
    assert _ordered(sides[which], ops, which, True) is not None
    assert _assert_same(ops, sides[0], sides[1]) is not None

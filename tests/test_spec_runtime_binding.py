"""Spec 4.9 (WeightRuntimeBindingManifest), 4.10 (validate_runtime_binding(s)) and 11.8 (runtime
address ranges and exact declared aliases)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any, Sequence

import pytest

from layout_model import AxisSpec, Coord, FragmentSpec, Layout, TensorSpec, build_placement, build_runtime_bindings, full_participants
from mooncake.reshard.contracts import ResourceKind, RuntimeBindingFragment
from mooncake.reshard.weight.binding import validate_runtime_binding, validate_runtime_bindings
from mooncake.reshard.weight.runtime import WeightRuntimeBindingManifest
from spec_helpers import (
    KA_DIGEST,
    U64,
    StrSub,
    ka_binding,
    ka_binding_fragment,
    ka_binding_kwargs,
    ka_placement,
    raises,
    runtime_fragment_kwargs,
)

SPACE = "('inst-0', 'worker-0', 'cuda:0')"


# ---------------------------------------------------------------------------------------------- 4.9


def test_binding_fields_and_kind() -> None:
    assert [f.name for f in dataclasses.fields(WeightRuntimeBindingManifest)] == [
        "resource_id", "placement_id", "placement_digest", "instance_id", "generation", "lease_id", "revision",
        "participant_id", "fragments",
    ]
    b = ka_binding()
    assert b.resource_kind is ResourceKind.MODEL_WEIGHT
    assert type(b.fragments) is tuple


@pytest.mark.parametrize("name", ["resource_id", "placement_id", "instance_id", "lease_id", "revision", "participant_id"])
@pytest.mark.parametrize("bad", ["", StrSub("x"), None])
def test_binding_strings(name: str, bad: Any) -> None:
    with raises(f"{name} must be a non-empty string"):
        ka_binding(**{name: bad})


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"placement_digest": ""}, "placement_digest must be a non-empty string"),
        ({"placement_digest": None}, "placement_digest must be a non-empty string"),
        ({"placement_digest": "g" * 64}, "placement_digest must be a lowercase SHA-256 digest"),
        ({"placement_digest": KA_DIGEST.upper()}, "placement_digest must be a lowercase SHA-256 digest"),
        ({"placement_digest": "sha256:" + KA_DIGEST}, "placement_digest must be a lowercase SHA-256 digest"),
        ({"generation": True}, "generation must be an integer"),
        ({"generation": -1}, "generation must be at least 0"),
        ({"generation": 2**64}, "generation must fit in an unsigned 64-bit integer"),
        ({"fragments": "f"}, "WeightRuntimeBindingManifest fragments must be a sequence"),
        ({"fragments": None}, "WeightRuntimeBindingManifest fragments must be a sequence"),
        ({"fragments": (1,)}, "WeightRuntimeBindingManifest fragments must contain RuntimeBindingFragment"),
        (
            {"fragments": (ka_binding_fragment(), ka_binding_fragment(fragment_id="rt-1"))},
            "duplicate placement fragment in runtime binding",
        ),
        (
            {"fragments": (ka_binding_fragment(), ka_binding_fragment(placement_fragment_id="other"))},
            "duplicate runtime fragment_id in runtime binding",
        ),
    ],
)
def test_binding_rules(overrides: dict, message: str) -> None:
    with raises(message):
        ka_binding(**overrides)


def test_binding_accepts_edges_and_sorts() -> None:
    assert ka_binding(generation=U64).generation == U64
    assert ka_binding(generation=0).generation == 0
    assert ka_binding(fragments=()).fragments == ()
    a = RuntimeBindingFragment(**runtime_fragment_kwargs(placement_fragment_id="b", fragment_id="r1"))
    b = RuntimeBindingFragment(**runtime_fragment_kwargs(placement_fragment_id="a", fragment_id="r2"))
    assert [f.placement_fragment_id for f in ka_binding(fragments=[a, b]).fragments] == ["a", "b"]


# ---------------------------------------------------------------------------------------------- 4.10 single binding


def test_validate_runtime_binding_accepts_known_answer() -> None:
    assert validate_runtime_binding(ka_placement(), ka_binding()) is None


def test_validate_runtime_binding_rejects_look_alikes() -> None:
    p, b = ka_placement(), ka_binding()
    fake_p = SimpleNamespace(**{f.name: getattr(p, f.name) for f in dataclasses.fields(p)}, digest=p.digest, resource_kind=p.resource_kind)
    fake_b = SimpleNamespace(**{f.name: getattr(b, f.name) for f in dataclasses.fields(b)}, resource_kind=b.resource_kind)
    with raises("placement must be a WeightPlacementManifest"):
        validate_runtime_binding(fake_p, b)
    with raises("binding must be a WeightRuntimeBindingManifest"):
        validate_runtime_binding(p, fake_b)
    with raises("placement must be a WeightPlacementManifest"):
        validate_runtime_binding(None, None)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"resource_id": "other", "placement_id": "x", "placement_digest": "0" * 64, "revision": "r"}, "placement and runtime binding resource_id differ"),
        ({"placement_id": "x", "placement_digest": "0" * 64, "revision": "r"}, "placement_id and runtime binding placement_id differ"),
        ({"placement_digest": "0" * 64, "revision": "r"}, "placement digest and runtime binding placement digest differ"),
        ({"revision": "r", "participant_id": "nobody"}, "placement and runtime binding revision differ"),
        ({"participant_id": "nobody"}, "unknown runtime binding participant: nobody"),
        ({"fragments": ()}, "missing placement fragment in runtime binding: placement-0"),
        (
            {"fragments": (ka_binding_fragment(), ka_binding_fragment(placement_fragment_id="zz", fragment_id="rt-z", address=8192, storage_address=8192))},
            "unknown placement fragment in runtime binding: zz",
        ),
        (
            {"fragments": (ka_binding_fragment(placement_fragment_id="b", fragment_id="rb"), ka_binding_fragment(placement_fragment_id="a", fragment_id="ra", address=8192, storage_address=8192))},
            "unknown placement fragment in runtime binding: a",
        ),
        ({"fragments": (ka_binding_fragment(nbytes=16),)}, "runtime binding byte size does not match placement: placement-0"),
        (
            {"fragments": (ka_binding_fragment(nbytes=16, local_shape=(2, 4)),)},
            "runtime binding byte size does not match placement: placement-0",
        ),
        (
            {"fragments": (ka_binding_fragment(local_shape=(2, 8), strides_bytes=(16, 2)),)},
            "runtime binding local_shape does not match placement: placement-0",
        ),
        (
            {"fragments": (ka_binding_fragment(itemsize=4, strides_bytes=(16, 4)),)},
            "runtime binding itemsize does not match placement: placement-0",
        ),
        (
            {"fragments": (ka_binding_fragment(itemsize=1, strides_bytes=(8, 2)),)},
            "runtime binding itemsize does not match placement: placement-0",
        ),
        (
            {"fragments": (ka_binding_fragment(strides_bytes=(16, 2), storage_nbytes=64),)},
            "runtime binding stride does not describe a canonical contiguous view: placement-0",
        ),
        (
            {"fragments": (ka_binding_fragment(strides_bytes=(2, 8)),)},
            "runtime binding stride does not describe a canonical contiguous view: placement-0",
        ),
    ],
)
def test_validate_runtime_binding_rules(overrides: dict, message: str) -> None:
    with raises(message):
        validate_runtime_binding(ka_placement(), ka_binding(**overrides))


def _layout(tensors: Sequence[TensorSpec], frags: Sequence[FragmentSpec], sizes: tuple = (1, 1, 1, 1)) -> Layout:
    tp, pp, ep, dp = sizes
    return Layout(sizes=sizes, participants=full_participants(tp, pp, ep, dp), tensors=tuple(tensors), fragments=tuple(frags))


def test_singleton_strides_are_normalized_before_comparison() -> None:
    layout = _layout([TensorSpec("v", (1, 4, 1))], [FragmentSpec("v", (0, 0, 0), (1, 4, 1), Coord(), fragment_id="v0")])
    p = build_placement(layout)
    frag = RuntimeBindingFragment(**runtime_fragment_kwargs(placement_fragment_id="v0", nbytes=8, local_shape=(1, 4, 1), strides_bytes=(999, 2, 0), storage_nbytes=8))
    b = WeightRuntimeBindingManifest(**ka_binding_kwargs(placement_id=p.placement_id, placement_digest=p.digest, revision=p.revision,
                                                         participant_id=p.parts[0].participant_id, fragments=(frag,)))
    assert validate_runtime_binding(p, b) is None


# ---------------------------------------------------------------------------------------------- 11.8 within one binding


def two_row_placement(tensor_ids: Sequence[str] = ("w",), aliases: bool = False, **descriptor: Any) -> Any:
    tensors = [TensorSpec(t, (4, 4), **descriptor.get(t, {})) for t in tensor_ids]
    group = tuple(sorted(tensor_ids)) if aliases else ()
    frags = []
    for t in tensor_ids:
        frags.append(FragmentSpec(t, (0, 0), (2, 4), Coord(), fragment_id=f"{t}-top", aliases=group))
        frags.append(FragmentSpec(t, (2, 0), (2, 4), Coord(), fragment_id=f"{t}-bot", aliases=group))
    return build_placement(_layout(tensors, frags))


def rt(pfid: str, fid: str, address: int, *, storage_address: Any = None, storage_nbytes: int = 16, **kw: Any) -> RuntimeBindingFragment:
    sa = address if storage_address is None else storage_address
    return RuntimeBindingFragment(**runtime_fragment_kwargs(
        placement_fragment_id=pfid, fragment_id=fid, address=address, nbytes=16, local_shape=(2, 4), strides_bytes=(8, 2),
        storage_address=sa, storage_nbytes=storage_nbytes, storage_offset_bytes=address - sa, **kw))


def bind(p: Any, frags: Sequence[RuntimeBindingFragment], **overrides: Any) -> WeightRuntimeBindingManifest:
    kw = ka_binding_kwargs(placement_id=p.placement_id, placement_digest=p.digest, revision=p.revision,
                           participant_id=p.parts[0].participant_id, fragments=tuple(frags))
    kw.update(overrides)
    return WeightRuntimeBindingManifest(**kw)


def test_disjoint_and_touching_views_accepted() -> None:
    p = two_row_placement()
    validate_runtime_binding(p, bind(p, [rt("w-top", "a", 4096), rt("w-bot", "b", 4112)]))
    validate_runtime_binding(p, bind(p, [rt("w-top", "a", 8192), rt("w-bot", "b", 4096)]))


def test_overlapping_views_rejected_in_sweep_order() -> None:
    p = two_row_placement()
    with raises(f"runtime binding address ranges overlap: a and b in {SPACE}"):
        validate_runtime_binding(p, bind(p, [rt("w-top", "a", 4096), rt("w-bot", "b", 4100)]))
    with raises(f"runtime binding address ranges overlap: b and a in {SPACE}"):
        validate_runtime_binding(p, bind(p, [rt("w-top", "a", 4100), rt("w-bot", "b", 4096)]))
    # identical ranges of two unrelated fragments are not an alias (tie: the spec fixes no order)
    with pytest.raises(ValueError, match=r"^runtime binding address ranges overlap: (a and b|b and a) in"):
        validate_runtime_binding(p, bind(p, [rt("w-top", "a", 4096), rt("w-bot", "b", 4096)]))


def test_address_space_key_is_instance_worker_device_not_endpoint() -> None:
    p = two_row_placement()
    validate_runtime_binding(p, bind(p, [rt("w-top", "a", 4096, device="cuda:0"), rt("w-bot", "b", 4096, device="cuda:1")]))
    validate_runtime_binding(p, bind(p, [rt("w-top", "a", 4096, worker_id="w0"), rt("w-bot", "b", 4096, worker_id="w1")]))
    with raises("runtime binding address ranges overlap: a and b in ('inst-0', 'worker-0', 'cuda:0')"):
        validate_runtime_binding(p, bind(p, [rt("w-top", "a", 4096, endpoint="e:1"), rt("w-bot", "b", 4100, endpoint="e:2")]))


def test_storage_allocation_ranges() -> None:
    p = two_row_placement()
    # disjoint views inside one shared allocation are fine
    validate_runtime_binding(p, bind(p, [rt("w-top", "a", 4096, storage_address=4096, storage_nbytes=32),
                                         rt("w-bot", "b", 4112, storage_address=4096, storage_nbytes=32)]))
    # partially overlapping allocations are not
    with raises(f"runtime binding storage allocation ranges overlap: a and b in {SPACE}"):
        validate_runtime_binding(p, bind(p, [rt("w-top", "a", 4096, storage_address=4096, storage_nbytes=32),
                                             rt("w-bot", "b", 4112, storage_address=4112, storage_nbytes=32)]))
    with pytest.raises(ValueError, match=r"^runtime binding storage allocation ranges overlap: (a and b|b and a) in"):
        validate_runtime_binding(p, bind(p, [rt("w-top", "a", 4096, storage_address=4096, storage_nbytes=48),
                                             rt("w-bot", "b", 4112, storage_address=4096, storage_nbytes=32)]))


def test_exact_declared_alias_may_share_a_view() -> None:
    p = two_row_placement(("a", "b"), aliases=True)
    frags = [rt("a-top", "ra0", 4096), rt("a-bot", "ra1", 4112), rt("b-top", "rb0", 4096), rt("b-bot", "rb1", 4112)]
    assert validate_runtime_binding(p, bind(p, frags)) is None


def test_alias_must_share_the_exact_view() -> None:
    p = two_row_placement(("a", "b"), aliases=True)
    # b-top overlaps a-top and a-bot partially: not an exact alias
    frags = [rt("a-top", "ra0", 4096), rt("a-bot", "ra1", 4112), rt("b-top", "rb0", 4104), rt("b-bot", "rb1", 8192)]
    with raises("runtime binding address ranges overlap: ra0 and rb0 in"):
        validate_runtime_binding(p, bind(p, frags))
    # the same view for different logical boxes (a-top vs b-bot) is not an alias either
    frags = [rt("a-top", "ra0", 4096), rt("a-bot", "ra1", 4112), rt("b-top", "rb0", 8192), rt("b-bot", "rb1", 4096)]
    with pytest.raises(ValueError, match=r"^runtime binding address ranges overlap: (ra0 and rb1|rb1 and ra0) in"):
        validate_runtime_binding(p, bind(p, frags))


def test_alias_requires_equal_descriptors() -> None:
    p = two_row_placement(("a", "b"), aliases=True, b={"layer_id": 1})
    frags = [rt("a-top", "ra0", 4096), rt("a-bot", "ra1", 4112), rt("b-top", "rb0", 4096), rt("b-bot", "rb1", 4112)]
    with pytest.raises(ValueError, match=r"^runtime binding address ranges overlap: (ra0 and rb0|rb0 and ra0) in"):
        validate_runtime_binding(p, bind(p, frags))


# ---------------------------------------------------------------------------------------------- 4.10 binding sets


def multi_placement() -> Any:
    """tp=2 x pp=2: ``w`` split over tp on pp 0; ``u`` owned by (tp 1, pp 0); pp 1 parts are empty."""
    tensors = [
        TensorSpec("w", (4, 4), (AxisSpec("split", "tp", 0), AxisSpec("ownership", "pp"))),
        TensorSpec("u", (2,), (AxisSpec("ownership", "tp"), AxisSpec("ownership", "pp"))),
    ]
    frags = [
        FragmentSpec("w", (0, 0), (2, 4), Coord(tp=0), fragment_id="w0"),
        FragmentSpec("w", (2, 0), (2, 4), Coord(tp=1), fragment_id="w1"),
        FragmentSpec("u", (0,), (2,), Coord(tp=1), fragment_id="u1"),
    ]
    return build_placement(_layout(tensors, frags, sizes=(2, 2, 1, 1)))


def test_validate_runtime_bindings_accepts_canonical_set() -> None:
    p = multi_placement()
    bindings = build_runtime_bindings(p)
    assert [b.participant_id for b in bindings] == ["w-d0-p0-e0-t0", "w-d0-p0-e0-t1"]
    assert validate_runtime_bindings(p, bindings) is None
    assert validate_runtime_bindings(p, list(reversed(bindings))) is None


def test_validate_runtime_bindings_container() -> None:
    p = multi_placement()
    with raises("runtime bindings must be a sequence"):
        validate_runtime_bindings(p, None)
    with raises("runtime bindings must be a sequence"):
        validate_runtime_bindings(p, set(build_runtime_bindings(p)))
    with raises("runtime bindings must contain WeightRuntimeBindingManifest"):
        validate_runtime_bindings(p, (*build_runtime_bindings(p), "b"))


def test_validate_runtime_bindings_duplicates_and_membership() -> None:
    p = multi_placement()
    b0, b1 = build_runtime_bindings(p)
    with raises("duplicate runtime binding participant"):
        validate_runtime_bindings(p, (b0, b1, b0))
    with raises("missing runtime binding participant: w-d0-p0-e0-t1"):
        validate_runtime_bindings(p, (b0,))
    with raises("missing runtime binding participant: w-d0-p0-e0-t0"):
        validate_runtime_bindings(p, ())
    empty = dataclasses.replace(b0, participant_id="w-d0-p1-e0-t0", fragments=(), instance_id="inst-x")
    validate_runtime_binding(p, empty)  # valid on its own
    with raises("unknown runtime binding participant: w-d0-p1-e0-t0"):
        validate_runtime_bindings(p, (b0, b1, empty))
    with raises("unknown runtime binding participant: nobody"):
        validate_runtime_bindings(p, (b0, dataclasses.replace(b1, participant_id="nobody")))


def test_validate_runtime_bindings_runs_single_validation() -> None:
    p = multi_placement()
    b0, b1 = build_runtime_bindings(p)
    with raises("placement and runtime binding revision differ"):
        validate_runtime_bindings(p, (b0, dataclasses.replace(b1, revision="other")))


def test_runtime_fragment_id_reused_across_participants() -> None:
    p = multi_placement()
    b0, b1 = build_runtime_bindings(p)
    f = b1.fragments[0]
    clash = dataclasses.replace(f, fragment_id=b0.fragments[0].fragment_id)
    b1 = dataclasses.replace(b1, fragments=(clash, *b1.fragments[1:]))
    with raises(f"duplicate runtime fragment_id across participants: {b0.fragments[0].fragment_id}"):
        validate_runtime_bindings(p, (b0, b1))


def test_cross_participant_overlap_only_within_one_address_space() -> None:
    p = multi_placement()
    b0, b1 = build_runtime_bindings(p)

    def moved(b: Any, address: int, **kw: Any) -> Any:
        frags = []
        for i, f in enumerate(b.fragments):
            a = address + 64 * i
            frags.append(dataclasses.replace(f, address=a, storage_address=a, **kw))
        return dataclasses.replace(b, fragments=tuple(frags))

    shared = dict(worker_id="shared", device="cuda:0")
    # different instances: never a conflict
    validate_runtime_bindings(p, (moved(b0, 4096, **shared), moved(b1, 4096, **shared)))
    # same instance, worker and device: conflict across participants
    x0 = dataclasses.replace(moved(b0, 4096, **shared), instance_id="inst-shared")
    x1 = dataclasses.replace(moved(b1, 4096, **shared), instance_id="inst-shared")
    with pytest.raises(ValueError, match=r"^runtime binding address ranges overlap: .* in \('inst-shared', 'shared', 'cuda:0'\)"):
        validate_runtime_bindings(p, (x0, x1))
    # same instance, different devices: fine
    y1 = dataclasses.replace(moved(b1, 4096, worker_id="shared", device="cuda:1"), instance_id="inst-shared")
    validate_runtime_bindings(p, (x0, y1))


def test_validate_runtime_binding_forged_part_catalog() -> None:
    """A placement whose part was edited in place after validation (its tensors no longer
    declare a fragment's tensor_id): the spec 4.7 step 8 message, never a KeyError."""
    p, b = ka_placement(), ka_binding()
    part = next(part for part in p.parts if part.participant_id == b.participant_id)
    object.__setattr__(part, "tensors", ())
    tensor_id = part.fragments[0].tensor_id
    with raises(f"unknown tensor_id: {tensor_id}"):
        validate_runtime_binding(p, b)

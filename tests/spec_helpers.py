"""Small factories and assertions shared by the ``test_spec_*`` files.

* :func:`raises` -- ``with raises("spec text"):`` asserts a plain ``ValueError`` (no subclass, spec
  1.4) whose message starts with the spec text (detail may only be appended, spec 1.1).
* :func:`forged_copy` -- a shallow copy with fields set in place, past every constructor check.
* ``*_kwargs`` functions return valid constructor keyword arguments; tests override one field to
  trigger exactly one rule.
* :func:`ka_placement` builds the spec 6.4 known-answer placement; :func:`ka_stored_kwargs` the spec
  6.5 known-answer stored manifest.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Any, Callable, Dict, Iterator

import pytest

U64 = 2**64 - 1

KA_PLACEMENT_ID = "sha256:618f22d9994d8d327a7afd97f3cfcf1f6680a337d71ea3a8162a7827ed0346db"
KA_DIGEST = "a2ade0db5b17691e6a7c16d589d0498a64359eef91589addc870590899512d98"
KA_TOPOLOGY_ID = "sha256:017d6c66843ba96ccd39ed1b118b7635fee56677a41dc3d39c48b7bb3ccccdf4"
KA_FRAGMENT_ID = "sha256:73b1b25fe8cf11d48697cfd441a400d57ef84d52583d392c09453b5b79a86035"
KA_JSON = (
    '{"parts":[{"fragments":[{"aliases":[],"global_offset":[0,0],"local_shape":[4,4],"nbytes":32,'
    '"placement_fragment_id":"placement-0","rank":{"dp":0,"ep":0,"pp":0,"tp":0},'
    '"tensor_id":"layers.2.experts.3.w1"}],"participant_id":"worker-0","rank":{"dp":0,"ep":0,"pp":0,"tp":0}}],'
    '"placement_id":"sha256:618f22d9994d8d327a7afd97f3cfcf1f6680a337d71ea3a8162a7827ed0346db",'
    '"placement_set_id":"placement-set-7","resource_id":"model","resource_kind":"model_weight",'
    '"revision":"revision","tensors":[{"dtype":"bfloat16","expert_id":3,"global_shape":[4,4],"itemsize":2,'
    '"layer_id":2,"layout_fingerprint":"test:qwen:bf16:v1","parallel_axes":[{"dim":0,"kind":"tp","semantics":"split"}],'
    '"shard_dims":[0],"tensor_id":"layers.2.experts.3.w1"}],"topology":{"dp_size":1,"ep_size":1,'
    '"participants":[{"participant_id":"worker-0","rank":{"dp":0,"ep":0,"pp":0,"tp":0}}],"pp_size":1,'
    '"topology_id":"sha256:017d6c66843ba96ccd39ed1b118b7635fee56677a41dc3d39c48b7bb3ccccdf4","tp_size":1},'
    '"weight_generation":7}'
)
KA_STORED_SHA = "3276b40c240a49150c2df0a0bf03026baf4bc7829854b20064900637b93aa9df"
KA_STORED_JSON = (
    '{"created_at":"2026-07-17T00:00:00Z","fragments":[{"aliases":[],"fragment_id":"stored-0",'
    '"global_offset":[0,0],"local_shape":[8,4],"nbytes":64,"object_key":"weights/default/qwen3.5-0.8b/step-42/payload/0",'
    '"object_offset":0,"tensor_id":"layers.2.experts.3.w1"}],"group_id":"weights/default/qwen3.5-0.8b/step-42",'
    '"manifest_key":"weights/default/qwen3.5-0.8b/step-42/manifest","namespace":"default","resource_id":"qwen3.5-0.8b",'
    '"resource_kind":"model_weight","revision":"step-42","tensors":[{"dtype":"bfloat16","expert_id":3,"global_shape":[8,4],'
    '"itemsize":2,"layer_id":2,"layout_fingerprint":"sglang:qwen3.5:bf16:v1","parallel_axes":[{"dim":0,"kind":"tp",'
    '"semantics":"split"}],"shard_dims":[0],"tensor_id":"layers.2.experts.3.w1"}],"weight_generation":42}'
)


@contextlib.contextmanager
def raises(message: str) -> Iterator[Any]:
    """Assert a plain ``ValueError`` whose text starts with ``message``."""
    with pytest.raises(ValueError) as info:
        yield info
    assert type(info.value) is ValueError, f"{type(info.value)!r} is not exactly ValueError"
    text = str(info.value)
    assert text.startswith(message), f"message {text!r} does not start with {message!r}"


class PickledCall:
    """Pickles as one call ``function(*args)`` (a pickle naming ``function``, whatever it is)."""

    def __init__(self, function: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.function = function
        self.args = args

    def __reduce__(self) -> tuple[Any, ...]:
        return (self.function, self.args)


class StrSub(str):
    """A ``str`` subclass: rejected wherever the spec requires a non-empty str."""


class IntSub(int):
    """An ``int`` subclass: rejected wherever the spec requires an int."""


def field_state(value: Any) -> Dict[str, Any]:
    """The field values ``value`` holds: its instance ``__dict__``, or for a value stored in a
    C-owned layout (no instance dict) its set fields in field order (``__getstate__``: what a
    dict-backed instance's ``__dict__`` held)."""
    from mooncake.reshard import _native

    if _native.layout_info(type(value)) is None:
        return vars(value)
    state: Dict[str, Any] = value.__getstate__()
    return state


def forged_instance(cls: type, state: Dict[Any, Any]) -> Any:
    """``object.__new__(cls)`` holding ``state`` and never validated: ``state`` as its instance
    dict, or, for a class stored in a C-owned layout (no instance dict), each item stored in
    ``state``'s order (``store_state(..., others=True)``: a key that is not a field cannot be
    stored: AttributeError / TypeError)."""
    forged = object.__new__(cls)
    store_state(forged, state, others=True)
    return forged


def forged_state(cls: type, state: Dict[Any, Any]) -> Any:
    """``forged_instance`` for a state that may hold what only an instance dict can hold: for a
    class stored in a C-owned layout the items whose key is one of its field names (exact str)
    are stored, in ``state``'s order, and any other item (a key that is not a field, a
    non-interned equal key is still a field name) is left out: the layout has nowhere to keep
    it. A dict-backed class gets ``state`` as its instance dict."""
    forged = object.__new__(cls)
    store_state(forged, state)
    return forged


def store_state(obj: Any, state: Dict[Any, Any], replace: bool = False, others: bool = False) -> None:
    """Forge ``obj``'s state: ``obj.__dict__.update(state)`` (``replace``: ``state`` becomes its
    instance dict) for a dict-backed value; for a value stored in a C-owned layout each item of
    ``state`` naming one of its fields is stored through the layout's own member descriptors
    (``replace``: every field not in ``state`` is emptied first) and any other item is left out
    (nowhere to keep it), or with ``others`` stored with ``object.__setattr__`` (a subclass's
    instance dict; else AttributeError / TypeError)."""
    from mooncake.reshard import _native

    info = _native.layout_info(type(obj))
    if info is None:
        if replace:
            object.__setattr__(obj, "__dict__", state)
        else:
            obj.__dict__.update(state)
        return
    base, names = info  # (stored through the layout's own member descriptors: a subclass's
    # property of a field's name is not in the way, as it was not for an instance dict)
    if replace:
        for name in names:
            try:
                base.__dict__[name].__delete__(obj)
            except AttributeError:
                pass
    for key, value in state.items():
        if (others or type(key) is str) and key in names:
            base.__dict__[key].__set__(obj, value)
        elif others:
            object.__setattr__(obj, key, value)


def pop_field(obj: Any, name: str) -> Any:
    """``obj.__dict__.pop(name)`` of a dict-backed value; of a C-layout value the field's value,
    the field then emptied."""
    value = field_state(obj)[name]
    object.__delattr__(obj, name)
    return value


def forged_copy(value: Any, **fields: Any) -> Any:
    """``copy.copy(value)`` with each of ``fields`` set by ``object.__setattr__``, in keyword order:
    a forged value that no constructor or ``__post_init__`` has checked (``value`` is unchanged)."""
    forged = copy.copy(value)
    for name, field_value in fields.items():
        object.__setattr__(forged, name, field_value)
    return forged


# ----------------------------------------------------------------------------------------------
# valid keyword arguments


def runtime_fragment_kwargs(**overrides: Any) -> Dict[str, Any]:
    kw: Dict[str, Any] = dict(
        placement_fragment_id="pf-0",
        fragment_id="rt-0",
        address=4096,
        nbytes=32,
        worker_id="worker-0",
        endpoint="host:1",
        device="cuda:0",
        itemsize=2,
        local_shape=(4, 4),
        strides_bytes=(8, 2),
        storage_address=4096,
        storage_nbytes=32,
        storage_offset_bytes=0,
    )
    kw.update(overrides)
    return kw


def tensor_kwargs(**overrides: Any) -> Dict[str, Any]:
    from mooncake.reshard.weight import SplitAxis

    kw: Dict[str, Any] = dict(
        tensor_id="w",
        global_shape=(4, 4),
        dtype="bfloat16",
        itemsize=2,
        shard_dims=(0,),
        layout_fingerprint="test:fp:v1",
        parallel_axes=(SplitAxis("tp", 0),),
    )
    kw.update(overrides)
    return kw


def fragment_kwargs(**overrides: Any) -> Dict[str, Any]:
    from mooncake.reshard.weight import ParallelRank

    kw: Dict[str, Any] = dict(
        tensor_id="w",
        global_offset=(0, 0),
        local_shape=(4, 4),
        nbytes=32,
        rank=ParallelRank(),
    )
    kw.update(overrides)
    return kw


def topology(tp: int = 1, pp: int = 1, ep: int = 1, dp: int = 1, participants: Any = None) -> Any:
    """A product topology; participant ids ``w-d{dp}-p{pp}-e{ep}-t{tp}``."""
    from mooncake.reshard.weight import ParallelRank, ParallelTopology, TopologyParticipant

    if participants is None:
        participants = [
            TopologyParticipant(f"w-d{d}-p{p}-e{e}-t{t}", ParallelRank(dp=d, tp=t, pp=p, ep=e))
            for d in range(dp) for p in range(pp) for e in range(ep) for t in range(tp)
        ]
    return ParallelTopology(tp_size=tp, pp_size=pp, ep_size=ep, dp_size=dp, participants=tuple(participants))


def pid(dp: int = 0, tp: int = 0, pp: int = 0, ep: int = 0) -> str:
    return f"w-d{dp}-p{pp}-e{ep}-t{tp}"


def identity_kwargs(**overrides: Any) -> Dict[str, Any]:
    kw: Dict[str, Any] = dict(resource_id="model", revision="rev-1", weight_generation=1, placement_set_id="set-1")
    kw.update(overrides)
    return kw


def from_fragments(topo: Any, tensors: Any, fragments: Any, **overrides: Any) -> Any:
    from mooncake.reshard.weight import WeightPlacementManifest

    return WeightPlacementManifest.from_fragments(
        topology=topo, tensors=tensors, fragments=fragments, **identity_kwargs(**overrides)
    )


def ka_tensor() -> Any:
    from mooncake.reshard.weight import SplitAxis, TensorDescriptor

    return TensorDescriptor(
        tensor_id="layers.2.experts.3.w1",
        global_shape=(4, 4),
        dtype="bfloat16",
        itemsize=2,
        shard_dims=(0,),
        layout_fingerprint="test:qwen:bf16:v1",
        parallel_axes=(SplitAxis("tp", 0),),
        layer_id=2,
        expert_id=3,
    )


def ka_topology() -> Any:
    from mooncake.reshard.weight import ParallelRank, ParallelTopology, TopologyParticipant

    return ParallelTopology(
        tp_size=1, pp_size=1, ep_size=1, dp_size=1, participants=(TopologyParticipant("worker-0", ParallelRank()),)
    )


def ka_fragment() -> Any:
    from mooncake.reshard.weight import ParallelRank, PlacementFragment

    return PlacementFragment(
        tensor_id="layers.2.experts.3.w1", global_offset=(0, 0), local_shape=(4, 4), nbytes=32,
        rank=ParallelRank(), placement_fragment_id="placement-0",
    )


def ka_part(**overrides: Any) -> Any:
    from mooncake.reshard.weight import ParallelRank, WeightPlacementPart

    kw: Dict[str, Any] = dict(
        resource_id="model", revision="revision", weight_generation=7, placement_set_id="placement-set-7",
        topology_id=KA_TOPOLOGY_ID, participant_id="worker-0", rank=ParallelRank(),
        tensors=(ka_tensor(),), fragments=(ka_fragment(),),
    )
    kw.update(overrides)
    return WeightPlacementPart(**kw)


def ka_manifest_kwargs(**overrides: Any) -> Dict[str, Any]:
    kw: Dict[str, Any] = dict(
        resource_id="model", revision="revision", weight_generation=7, placement_set_id="placement-set-7",
        topology=ka_topology(), parts=(ka_part(),),
    )
    kw.update(overrides)
    return kw


def ka_placement() -> Any:
    from mooncake.reshard.weight import WeightPlacementManifest

    return WeightPlacementManifest(**ka_manifest_kwargs())


def ka_binding_fragment(**overrides: Any) -> Any:
    from mooncake.reshard.weight import RuntimeBindingFragment

    overrides.setdefault("placement_fragment_id", "placement-0")
    return RuntimeBindingFragment(**runtime_fragment_kwargs(**overrides))


def ka_binding_kwargs(**overrides: Any) -> Dict[str, Any]:
    kw: Dict[str, Any] = dict(
        resource_id="model", placement_id=KA_PLACEMENT_ID, placement_digest=KA_DIGEST, instance_id="inst-0",
        generation=1, lease_id="lease-0", revision="revision", participant_id="worker-0",
        fragments=(ka_binding_fragment(),),
    )
    kw.update(overrides)
    return kw


def ka_binding(**overrides: Any) -> Any:
    from mooncake.reshard.weight import WeightRuntimeBindingManifest

    return WeightRuntimeBindingManifest(**ka_binding_kwargs(**overrides))


GROUP = "weights/default/qwen3.5-0.8b/step-42"


def ka_stored_tensor(**overrides: Any) -> Any:
    from mooncake.reshard.weight import SplitAxis, TensorDescriptor

    kw: Dict[str, Any] = dict(
        tensor_id="layers.2.experts.3.w1", global_shape=(8, 4), dtype="bfloat16", itemsize=2, shard_dims=(0,),
        layout_fingerprint="sglang:qwen3.5:bf16:v1", parallel_axes=(SplitAxis("tp", 0),), layer_id=2, expert_id=3,
    )
    kw.update(overrides)
    return TensorDescriptor(**kw)


def stored_fragment_kwargs(**overrides: Any) -> Dict[str, Any]:
    kw: Dict[str, Any] = dict(
        fragment_id="stored-0", tensor_id="layers.2.experts.3.w1", global_offset=(0, 0), local_shape=(8, 4),
        object_key=GROUP + "/payload/0", object_offset=0, nbytes=64,
    )
    kw.update(overrides)
    return kw


def ka_stored_kwargs(**overrides: Any) -> Dict[str, Any]:
    from mooncake.reshard.weight import StoredFragmentSnapshot

    kw: Dict[str, Any] = dict(
        namespace="default", resource_id="qwen3.5-0.8b", revision="step-42", weight_generation=42,
        group_id=GROUP, manifest_key=GROUP + "/manifest", tensors=(ka_stored_tensor(),),
        fragments=(StoredFragmentSnapshot(**stored_fragment_kwargs()),), created_at="2026-07-17T00:00:00Z",
    )
    kw.update(overrides)
    return kw

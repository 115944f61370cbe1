"""``pack_targets`` finds each target's tensor by tensor-id object first (issue 5, session 16).

With the geometry (the planner's path), the pointer map of tensor-id objects is seeded with
``tensor_index``'s exact str keys: a target whose id object is one of them is packed without
reading the object. Ids that are equal strings but other objects, str subclasses (as keys or as
ids), unknown ids and keys whose index is not usable must give exactly what the object-reading
path gives (no geometry: every target's id looked up by value, the rules before this change)."""

from __future__ import annotations

from array import array
from typing import Any, Dict, List, Tuple

from hypothesis import given, settings
from hypothesis import strategies as st

from spec_helpers import field_state, store_state

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank, PlacementFragment


def _q(values: List[int]) -> bytes:
    return array("q", values).tobytes()


def _copy(name: str) -> str:
    other = "".join(list(name))
    assert other == name and other is not name
    return other


class _Str(str):
    """Equal to and hashed like its value (a subclass: the C paths must not trust it)."""


def _fragment(tid: Any, **fields: Any) -> PlacementFragment:
    """A fragment whose tensor_id is tid as it is (a str subclass is refused by the class)."""
    made = PlacementFragment(tensor_id="x", **fields)
    state = dict(field_state(made))
    state["tensor_id"] = tid
    clone = object.__new__(PlacementFragment)
    store_state(clone, replace=True, state=state)
    return clone


@st.composite
def _cases(draw: Any) -> Dict[str, Any]:
    ntensors = draw(st.integers(1, 6))
    names = [f"t.{k}" for k in range(ntensors)]
    ids: Dict[str, Any] = {}
    keys: Dict[str, Any] = {}
    for name in names:
        # the index key: the very id object, another equal str, or a subclass instance
        form = draw(st.sampled_from(["same", "same", "copy", "sub"]))
        ids[name] = name if form != "sub" or draw(st.booleans()) else _Str(name)
        keys[name] = ids[name] if form == "same" else (_copy(name) if form == "copy" else _Str(name))
    tensor_index: Dict[Any, Any] = {keys[name]: t for t, name in enumerate(names)}
    if draw(st.integers(0, 8)) == 0:  # an index value the pass cannot use
        tensor_index[keys[names[-1]]] = draw(st.sampled_from([ntensors + 3, -1, 1.0]))
    fragments: List[PlacementFragment] = []
    tids: List[Any] = []
    for i in range(draw(st.integers(1, 40))):
        t = draw(st.integers(0, ntensors - 1))
        name = names[t]
        tid = draw(st.sampled_from([ids[name], ids[name], _copy(name)]))
        if draw(st.integers(0, 30)) == 0:
            tid = "unknown"
        fragments.append(
            _fragment(
                tid,
                global_offset=(4 * draw(st.integers(0, 3)), 0),
                local_shape=(4, 8),
                nbytes=128,
                rank=ParallelRank(dp=draw(st.integers(0, 3)), tp=draw(st.integers(0, 1))),
                placement_fragment_id=f"f{i:03d}",
            )
        )
        tids.append(tid)
    routed = _q([draw(st.integers(0, 1)) for _ in names])
    return dict(fragments=fragments, tensor_index=tensor_index, ndim=_q([2] * ntensors), routed=routed,
                replicas=draw(st.integers(1, 3)))


def _call(case: Dict[str, Any], geometry: bool) -> Any:
    fragments = case["fragments"]
    _, tids, dps, _, geom = _native.fragment_columns(fragments, PlacementFragment, ParallelRank)
    assert geom is not None
    args: Tuple[Any, ...] = (fragments, case["tensor_index"], case["ndim"], case["routed"], case["replicas"], tids, dps)
    return _native.pack_targets(*args, geom) if geometry else _native.pack_targets(*args)


@settings(max_examples=300, deadline=None)
@given(_cases())
def test_identity_path_equals_the_lookups(case: Dict[str, Any]) -> None:
    plain = _call(case, geometry=False)
    fast = _call(case, geometry=True)
    assert fast == plain


def test_shared_copied_and_subclassed_ids() -> None:
    name = "layer.0.w"
    frag = [
        _fragment(tid, global_offset=(0,), local_shape=(4,), nbytes=8, rank=ParallelRank(dp=1),
                  placement_fragment_id=f"f{i}")
        for i, tid in enumerate([name, _copy(name), name, _Str(name)])
    ]
    for key in (name, _copy(name), _Str(name)):
        case = dict(fragments=frag, tensor_index={key: 0}, ndim=_q([1]), routed=_q([0]), replicas=2)
        plain, fast = _call(case, False), _call(case, True)
        assert plain is not None and fast == plain
        assert array("q", fast[0]).tolist() == [0, 0, 0, 0]  # every target found its tensor
    # an index value that is not a usable tensor index: both paths decline
    for bad in (5, -1, "0"):
        case = dict(fragments=frag, tensor_index={name: bad}, ndim=_q([1]), routed=_q([0]), replicas=2)
        assert _call(case, False) is None and _call(case, True) is None

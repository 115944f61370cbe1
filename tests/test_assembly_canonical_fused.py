"""The placement id and digest encodings write the tensors list straight into the parts
encoder's buffer or digest (canonical_parts_json with tensors=...): same text, same hashes,
and anything unusual declines to the exact encoding, which raises the errors it raised before
in the same order."""

from __future__ import annotations

from typing import Any, Callable

import pytest
from hypothesis import given, settings

import known_answers
from layout_model import Layout, build_placement
from test_planner_oracle import placement_pairs

from mooncake.reshard import _native
from mooncake.reshard.weight import _canonical as canonical
from mooncake.reshard.weight import serde
from mooncake.reshard.weight.types import OwnershipAxis, ParallelRank, PlacementFragment
from mooncake.reshard.weight.types import ReplicatedAxis, SplitAxis, TensorDescriptor

_TYPES = (TensorDescriptor, SplitAxis, ReplicatedAxis, OwnershipAxis, PlacementFragment, ParallelRank)


class _Unfused:
    """Stands for _native with the fused form declined (the exact encoding runs)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(_native, name)

    @staticmethod
    def canonical_parts_json(*args: Any, **kwargs: Any) -> Any:
        if "tensors" in kwargs:
            return None
        return _native.canonical_parts_json(*args, **kwargs)


def _outcome(call: Callable[[], Any]) -> Any:
    try:
        return ("ok", call())
    except Exception as error:  # the exact type and text are compared
        return (type(error).__name__, str(error))


def _both(call: Callable[[], Any], monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    fused = _outcome(call)
    with monkeypatch.context() as patch:
        patch.setattr(canonical, "_native", _Unfused())
        exact = _outcome(call)
    return fused, exact


def _encodings(placement: Any) -> tuple[str, str, str]:
    return (
        canonical.placement_wire_json(placement),
        canonical.placement_wire_json(placement, sha256=True),
        serde.weight_placement_to_json(placement),
    )


def test_known_answers_fused_equals_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    for placement in known_answers.placements():
        fused, exact = _both(lambda: _encodings(placement), monkeypatch)
        assert fused == exact and fused[0] == "ok"
        text, digest, wire = fused[1]
        assert digest == _native.sha256_hex(text.encode()) == placement.digest and wire == text


@settings(max_examples=30, deadline=None)
@given(placement_pairs())
def test_random_placements_fused_equals_exact(pair: tuple[Layout, Layout]) -> None:
    for layout in pair:
        placement = build_placement(layout)
        fused = _encodings(placement)
        saved = canonical._native
        canonical._native = _Unfused()  # type: ignore[assignment]
        try:
            exact = _encodings(placement)
        finally:
            canonical._native = saved
        assert fused == exact
        # the placement id is the same function of the content
        assert placement.placement_id.startswith("sha256:")


def _pairs(placement: Any) -> list[Any]:
    return canonical._part_pairs(placement.parts)


def test_fused_form_declines_unusual_tensors() -> None:
    placement = known_answers.placements()[0]
    pairs = _pairs(placement)
    tensors = list(placement.tensors)
    ok = _native.canonical_parts_json(pairs, prefix="{", suffix=",", tensors=tensors, after="}", types=_TYPES)
    assert ok == "{" + _native.canonical_parts_json(pairs) + "," + _native.canonical_tensors_json(
        tensors, SplitAxis, ReplicatedAxis
    ) + "}"

    class Sub(TensorDescriptor):
        pass

    sub = object.__new__(Sub)
    sub.__dict__.update(tensors[0].__dict__)
    listed = object.__new__(TensorDescriptor)
    listed.__dict__.update(tensors[0].__dict__)
    listed.__dict__["parallel_axes"] = list(tensors[0].parallel_axes)

    class Axis(SplitAxis):
        pass

    odd_axis = object.__new__(TensorDescriptor)
    odd_axis.__dict__.update(tensors[0].__dict__)
    odd_axis.__dict__["parallel_axes"] = (Axis("tp", 0),)
    missing = object.__new__(TensorDescriptor)
    missing.__dict__.update(tensors[0].__dict__)
    del missing.__dict__["dtype"]
    for bad in (sub, listed, odd_axis, missing, object()):
        for where in (0, len(tensors)):
            given_tensors = tensors[:where] + [bad] + tensors[where:]
            for sha in (False, True):
                assert (
                    _native.canonical_parts_json(
                        pairs, prefix="{", suffix=",", tensors=given_tensors, after="}", types=_TYPES, sha256=sha
                    )
                    is None
                )
    # a declined fragment list declines the fused form too
    assert (
        _native.canonical_parts_json([([object()], '{"x":1}')], tensors=tensors, after="}", types=_TYPES) is None
    )


def test_fused_form_hostile_arguments() -> None:
    placement = known_answers.placements()[0]
    pairs = _pairs(placement)
    tensors = list(placement.tensors)
    with pytest.raises(TypeError):
        _native.canonical_parts_json(pairs, tensors=tensors)  # no types
    with pytest.raises(TypeError):
        _native.canonical_parts_json(pairs, tensors=tensors, types=_TYPES[:3])
    with pytest.raises(TypeError):  # the four-class form is gone
        _native.canonical_parts_json(pairs, tensors=tensors, types=_TYPES[:4])
    with pytest.raises(TypeError):
        _native.canonical_parts_json(pairs, types=_TYPES[4:])
    with pytest.raises(TypeError):
        _native.canonical_parts_json(pairs, tensors=tensors, types=(1, 2, 3, 4))
    with pytest.raises(TypeError):
        _native.canonical_parts_json(pairs, tensors=iter(tensors), types=_TYPES)
    with pytest.raises(TypeError):
        _native.canonical_parts_json(pairs, tensors=tensors, types=list(_TYPES))
    with pytest.raises(ValueError):
        _native.canonical_parts_json(pairs, tensors=tensors, after="\u00e9", types=_TYPES)
    with pytest.raises(TypeError):
        _native.canonical_parts_json(pairs, tensors=tensors, after=b"}", types=_TYPES)
    # tensors=None is the plain form
    assert _native.canonical_parts_json(pairs, tensors=None) == _native.canonical_parts_json(pairs)


def _forged(placement: Any, edit: Callable[[Any], None]) -> Any:
    clone = object.__new__(type(placement))
    clone.__dict__.update(placement.__dict__)
    clone.__dict__["_digest_cache"] = None
    edit(clone)
    return clone


def test_forged_placements_raise_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    placement = known_answers.placements()[0]
    tensor = placement.tensors[0]

    def no_dtype(clone: Any) -> None:
        bad = object.__new__(TensorDescriptor)
        bad.__dict__.update(tensor.__dict__)
        del bad.__dict__["dtype"]
        clone.__dict__["tensors"] = (bad,) + tuple(clone.tensors[1:])

    def float_shape(clone: Any) -> None:
        bad = object.__new__(TensorDescriptor)
        bad.__dict__.update(tensor.__dict__)
        bad.__dict__["global_shape"] = (float("nan"),)
        clone.__dict__["tensors"] = tuple(clone.tensors) + (bad,)

    def broken_part(clone: Any) -> None:
        part = object.__new__(type(clone.parts[0]))
        part.__dict__.update(clone.parts[0].__dict__)
        del part.__dict__["rank"]
        clone.__dict__["parts"] = (part,) + tuple(clone.parts[1:])

    def broken_part_and_tensor(clone: Any) -> None:
        broken_part(clone)
        no_dtype(clone)

    def odd_generation(clone: Any) -> None:
        clone.__dict__["weight_generation"] = float("inf")

    def odd_generation_and_tensor(clone: Any) -> None:
        odd_generation(clone)
        no_dtype(clone)

    def tensor_list(clone: Any) -> None:
        clone.__dict__["tensors"] = list(clone.tensors)

    for edit in (no_dtype, float_shape, broken_part, broken_part_and_tensor, odd_generation,
                 odd_generation_and_tensor, tensor_list):
        forged = _forged(placement, edit)
        fused, exact = _both(lambda: _encodings(forged), monkeypatch)
        assert fused == exact, edit.__name__
        if edit is tensor_list:
            assert fused[0] == "ok"
        else:
            assert fused[0] != "ok", edit.__name__

"""Runtime binding validation against a placement (spec §4.10, §11.8)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import _native
from .._memo_proof import memo_proved
from ..contracts._checks import item_tuple
from ..contracts.fragments import RuntimeBindingFragment
from ..contracts.manifest import validate_resource_binding_identity
from ._address_ranges import RuntimeView, validate_runtime_address_ranges
from .placement import WeightPlacementManifest
from .runtime import WeightRuntimeBindingManifest
from .types import PlacementFragment, TensorDescriptor, canonical_strides_bytes

__all__ = ["validate_runtime_binding", "validate_runtime_bindings"]


_STRIDES: dict[tuple[tuple[int, ...], int], tuple[int, ...]] = {}


def _canonical_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """``canonical_strides_bytes`` memoised on ``(shape, itemsize)`` (bounded: few shapes repeat)."""
    key = (shape, itemsize)
    strides = _STRIDES.get(key)
    if strides is None:
        strides = canonical_strides_bytes(shape, itemsize)
        if len(_STRIDES) >= 4096:
            _STRIDES.clear()
        _STRIDES[key] = strides
    return strides


def _paired_runtime_fragments(runtime_fragments: Any, logical_fragments: Any) -> Any:
    """``runtime_fragments`` itself when it pairs position by position with the part's
    ``logical_fragments`` (same length, equal placement fragment ids, strictly increasing, so
    distinct): exactly the pairing the id map gives, without building it. None otherwise."""
    if type(runtime_fragments) is not tuple or len(runtime_fragments) != len(logical_fragments):
        return None
    previous = ""
    for runtime, logical in zip(runtime_fragments, logical_fragments):
        fragment_id = runtime.placement_fragment_id
        if type(fragment_id) is not str or fragment_id <= previous or fragment_id != logical.placement_fragment_id:
            return None
        previous = fragment_id
    return runtime_fragments


def _binding_views(
    placement: WeightPlacementManifest, binding: WeightRuntimeBindingManifest
) -> list[RuntimeView]:
    """Validate one binding against its part; return its views for the range sweep."""
    return _binding_views_and_part(placement, binding)[0]


def _binding_views_and_part(
    placement: WeightPlacementManifest, binding: WeightRuntimeBindingManifest
) -> tuple[list[RuntimeView], Any]:
    """``_binding_views`` and the placement part the binding was validated against."""
    if not isinstance(placement, WeightPlacementManifest):
        raise ValueError("placement must be a WeightPlacementManifest")
    if not isinstance(binding, WeightRuntimeBindingManifest):
        raise ValueError("binding must be a WeightRuntimeBindingManifest")
    if not (
        type(placement) is WeightPlacementManifest
        and type(binding) is WeightRuntimeBindingManifest
        and placement.resource_id == binding.resource_id
        and placement.placement_id == binding.placement_id
        and placement.digest == binding.placement_digest
    ):
        # The exact types share one resource kind; anything else takes the full check.
        validate_resource_binding_identity(placement, binding)
    if placement.revision != binding.revision:
        raise ValueError("placement and runtime binding revision differ")
    part = placement._part_index().get(binding.participant_id)
    if part is None:
        raise ValueError(f"unknown runtime binding participant: {binding.participant_id}")
    logical_fragments = part.fragments
    views = _native.bind_views(
        binding.instance_id,
        logical_fragments,
        binding.fragments,
        part.tensors,
        PlacementFragment,
        RuntimeBindingFragment,
        TensorDescriptor,
    )
    if views is not None:
        # Every check below passed on the positional pairing (exact types and values).
        return views, part
    runtime_fragments = _paired_runtime_fragments(binding.fragments, logical_fragments)
    if runtime_fragments is None:
        runtime_by_id = {fragment.placement_fragment_id: fragment for fragment in binding.fragments}
        expected_ids = {fragment.placement_fragment_id for fragment in logical_fragments}
        if len(runtime_by_id) != len(binding.fragments) or runtime_by_id.keys() != expected_ids:
            extra = sorted(runtime_by_id.keys() - expected_ids)
            if extra:
                raise ValueError(f"unknown placement fragment in runtime binding: {extra[0]}")
            missing = sorted(expected_ids - runtime_by_id.keys())
            if missing:
                raise ValueError(f"missing placement fragment in runtime binding: {missing[0]}")
        runtime_fragments = [runtime_by_id[logical.placement_fragment_id] for logical in logical_fragments]
    tensors = part.tensors
    if len(tensors) == 1:
        only = tensors[0]
        catalog = {only.tensor_id: only}
    else:
        catalog = {tensor.tensor_id: tensor for tensor in tensors}
    instance_id = binding.instance_id
    views: list[RuntimeView] = []
    for logical, runtime in zip(logical_fragments, runtime_fragments):
        fragment_id = logical.placement_fragment_id
        tensor = catalog.get(logical.tensor_id)
        if tensor is None:
            # Only an unvalidated (forged) placement can get here: spec 4.7 step 8's message.
            raise ValueError(f"unknown tensor_id: {logical.tensor_id}")
        if runtime.nbytes != logical.nbytes:
            raise ValueError(f"runtime binding byte size does not match placement: {fragment_id}")
        if runtime.local_shape != logical.local_shape:
            raise ValueError(f"runtime binding local_shape does not match placement: {fragment_id}")
        if runtime.itemsize != tensor.itemsize:
            raise ValueError(f"runtime binding itemsize does not match placement: {fragment_id}")
        itemsize = tensor.itemsize
        strides = _STRIDES.get((logical.local_shape, itemsize))
        if strides is None:
            strides = _canonical_strides(logical.local_shape, itemsize)
        if runtime.strides_bytes != strides:
            raise ValueError(
                "runtime binding stride does not describe a canonical contiguous view: "
                f"{fragment_id}"
            )
        views.append((instance_id, runtime, logical, tensor))
    return views, part


def validate_runtime_binding(
    placement: WeightPlacementManifest, binding: WeightRuntimeBindingManifest
) -> None:
    """Check that ``binding`` is a valid physical snapshot of its participant's part."""
    # (the C steps' layout memos trusted only while proved: mooncake_reshard._memo_proof)
    try:
        memo_proved(lambda: validate_runtime_address_ranges(_binding_views(placement, binding)))
    except _PYTHON_ERRORS:
        _raise_shape_failure((binding,))
        raise


def validate_runtime_bindings(
    placement: WeightPlacementManifest, bindings: Sequence[WeightRuntimeBindingManifest]
) -> None:
    """Check a complete binding set: one binding per participant that owns fragments."""
    try:
        memo_proved(lambda: _validate_runtime_bindings(placement, bindings))
    except _PYTHON_ERRORS:
        _raise_shape_failure(bindings)
        raise


# Python's errors from rules that met a field absent or of another type than construction
# guarantees (a binding restored by its default pickling, spec §13, or forged in place).
_PYTHON_ERRORS = (TypeError, AttributeError, KeyError, IndexError)


def _raise_shape_failure(bindings: Any) -> None:
    """``ValueError`` with the spec message of the first absent or mistyped field of the
    bindings (fuzz finding F11), if any; otherwise returns and the caller re-raises."""
    from ._planner.field_types import binding_shape_failure  # (the planner imports this module)

    failure = binding_shape_failure(bindings)
    if failure is not None:
        raise ValueError(failure) from None


def _validate_runtime_bindings(placement: Any, bindings: Any) -> None:
    items = item_tuple(bindings, "runtime bindings", WeightRuntimeBindingManifest)
    participants = [binding.participant_id for binding in items]
    if len(set(participants)) != len(participants):
        raise ValueError("duplicate runtime binding participant")
    used_runtime_ids: set[str] = set()
    by_instance: dict[str, list[RuntimeView]] = {}
    for binding in items:
        views = _binding_views(placement, binding)
        validate_runtime_address_ranges(views)
        for fragment in binding.fragments:
            if fragment.fragment_id in used_runtime_ids:
                raise ValueError(
                    f"duplicate runtime fragment_id across participants: {fragment.fragment_id}"
                )
        used_runtime_ids.update(fragment.fragment_id for fragment in binding.fragments)
        by_instance.setdefault(binding.instance_id, []).extend(views)
    for views in by_instance.values():
        validate_runtime_address_ranges(views)
    required = {part.participant_id for part in placement.parts if part.fragments}
    bound = set(participants)
    missing = sorted(required - bound)
    if missing:
        raise ValueError(f"missing runtime binding participant: {missing[0]}")
    unknown = sorted(bound - required)
    if unknown:
        raise ValueError(f"unknown runtime binding participant: {unknown[0]}")

"""``WeightPlacementPart``: one participant's address-free contribution (spec §4.7)."""

from __future__ import annotations

from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Optional

from .. import _native
from .._shared_keys import share_field_keys
from ..contracts._checks import item_tuple, require_str, require_u64
from ..contracts.ids import ParticipantId, PlacementSetId, ResourceId, RevisionId, TopologyId
from ._default_state import restore_default_state, restore_field_values
from .types import ParallelRank, PlacementFragment, TensorDescriptor, typed_rank
from .validation import validate_placement_fragments

__all__ = ["WeightPlacementPart"]

_FIELD_NAMES = (
    "resource_id",
    "revision",
    "weight_generation",
    "placement_set_id",
    "topology_id",
    "participant_id",
    "rank",
    "tensors",
    "fragments",
)
_part_values = itemgetter(*_FIELD_NAMES)


def _tensor_key(tensor: TensorDescriptor) -> str:
    return tensor.tensor_id


def _fragment_key(fragment: PlacementFragment) -> str:
    return fragment.placement_fragment_id


@dataclass(frozen=True)
class WeightPlacementPart:
    """One participant's tensors and logical fragments; it carries no physical address.

    A part declares exactly the tensors its fragments reference; an empty part
    declares neither. Tensors are stored sorted by id, fragments by fragment id.
    """

    resource_id: ResourceId
    revision: RevisionId
    weight_generation: int
    placement_set_id: PlacementSetId
    topology_id: TopologyId
    participant_id: ParticipantId
    rank: ParallelRank
    tensors: tuple[TensorDescriptor, ...]
    fragments: tuple[PlacementFragment, ...]

    def __post_init__(self) -> None:
        require_str(self.resource_id, "resource_id")
        require_str(self.revision, "revision")
        require_str(self.placement_set_id, "placement_set_id")
        require_str(self.topology_id, "topology_id")
        require_str(self.participant_id, "participant_id")
        require_u64(self.weight_generation, "weight_generation")
        rank = self.rank
        if not isinstance(rank, ParallelRank):
            raise ValueError("placement part rank must be a ParallelRank")
        tensors = item_tuple(self.tensors, "WeightPlacementPart tensors", TensorDescriptor)
        fragments = item_tuple(self.fragments, "WeightPlacementPart fragments", PlacementFragment)
        referenced: set[str] = set()
        for fragment in fragments:
            fragment_rank = fragment.rank
            if fragment_rank is not rank and fragment_rank != rank:
                raise ValueError("placement part fragment rank differs from part rank")
            referenced.add(fragment.tensor_id)
        for tensor in tensors:
            if tensor.tensor_id not in referenced:
                raise ValueError(
                    f"placement part contains an unreferenced tensor: {tensor.tensor_id}"
                )
        tensors = tuple(sorted(tensors, key=_tensor_key))
        fragments = tuple(sorted(fragments, key=_fragment_key))
        validate_placement_fragments(tensors, fragments, check_alias_groups=False)
        state = self.__dict__
        state["tensors"] = tensors
        state["fragments"] = fragments
        _native.untrack_inert(self, WeightPlacementPart)  # out of the cyclic GC when inert

    def __setstate__(self, state: Any) -> None:
        """Default dataclass pickling's restore (spec §13: the field dict, without
        ``__post_init__``), refusing fields of another type than the constructor stores
        (``_default_state``, fuzz finding F5)."""
        restore_default_state(self, state, WeightPlacementPart, _FIELD_NAMES, typed_part_failure)


share_field_keys(WeightPlacementPart)  # CPython 3.10: dicts the C core fills stay key-sharing


_PART_TYPES = (str, str, int, str, str, str, ParallelRank, tuple, tuple)
_TENSOR_TYPES = {TensorDescriptor}
_FRAGMENT_TYPES = {PlacementFragment}


def typed_part_values(values: tuple[Any, ...]) -> bool:
    """``part_fields_failure``'s fast path for a part's 9 field values in field order: True when
    every one has exactly the class the constructor stores (a rank, descriptors or fragments of
    a subclass take ``part_fields_failure``, which accepts them)."""
    return (
        tuple(map(type, values)) == _PART_TYPES
        and typed_rank(values[6])
        and set(map(type, values[7])) <= _TENSOR_TYPES
        and set(map(type, values[8])) <= _FRAGMENT_TYPES
    )


def part_fields_failure(
    resource_id: Any,
    revision: Any,
    weight_generation: Any,
    placement_set_id: Any,
    topology_id: Any,
    participant_id: Any,
    rank: Any,
    tensors: Any,
    fragments: Any,
) -> Optional[str]:
    """The field rule's message of the first of a restored part's fields that is not of the
    type its constructor stores (strs, an int generation, a typed rank, tuples of descriptors
    and of placement fragments), else ``None``. Forged content of the wrong type (a float NaN,
    another object of the pickle closing a reference cycle) is refused before anything reads
    it (fuzz finding F5)."""
    for name, value in (
        ("resource_id", resource_id),
        ("revision", revision),
        ("placement_set_id", placement_set_id),
        ("topology_id", topology_id),
        ("participant_id", participant_id),
    ):
        if type(value) is not str:
            return f"{name} must be a non-empty string"
    if type(weight_generation) is not int:
        return "weight_generation must be an integer"
    if not typed_rank(rank):
        return "placement part rank must be a ParallelRank"
    if type(tensors) is not tuple:
        return "WeightPlacementPart tensors must be a sequence"
    for tensor in tensors:
        if not isinstance(tensor, TensorDescriptor):
            return "WeightPlacementPart tensors must contain TensorDescriptor"
    if type(fragments) is not tuple:
        return "WeightPlacementPart fragments must be a sequence"
    # (bulk: one isinstance per distinct item type)
    for kind in set(map(type, fragments)):
        if not issubclass(kind, PlacementFragment):
            return "WeightPlacementPart fragments must contain PlacementFragment"
    return None


def typed_part_failure(*values: Any) -> Optional[str]:
    """``part_fields_failure`` of a part's 9 field values in field order, after its fast path
    (``typed_part_values``)."""
    return None if typed_part_values(values) else part_fields_failure(*values)


def _restore_placement_part(
    resource_id: Any,
    revision: Any,
    weight_generation: Any,
    placement_set_id: Any,
    topology_id: Any,
    participant_id: Any,
    rank: Any,
    tensors: Any,
    fragments: Any,
) -> WeightPlacementPart:
    """Unpickle a ``WeightPlacementPart`` from an older pickle of this package
    (``_default_state``)."""
    values = (resource_id, revision, weight_generation, placement_set_id, topology_id, participant_id, rank, tensors, fragments)
    part: WeightPlacementPart = restore_field_values(WeightPlacementPart, _FIELD_NAMES, typed_part_failure, values)
    return part


def assembled_part(**fields: object) -> WeightPlacementPart:
    """A part built by ``WeightPlacementManifest.from_fragments`` without its own checks.

    Private. The caller passes every field, ``tensors`` and ``fragments`` already sorted by
    id, and must then validate the part inside a manifest (whose whole-manifest checks
    imply every check of ``__post_init__``), falling back to the checked constructor when
    that manifest is rejected so that errors keep their usual order.
    """
    part = object.__new__(WeightPlacementPart)
    state = part.__dict__
    for name in _FIELD_NAMES:
        state[name] = fields[name]
    _native.untrack_inert(part, WeightPlacementPart)
    return part

"""``WeightPlacementManifest``: one complete, global, address-free placement (spec §4.8)."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain, repeat
from operator import attrgetter, itemgetter
from typing import Any, Callable, Optional, Sequence, Union

from .. import _native
from .._collector import collector_paused
from .._memo_proof import memo_proved
from ..contracts._checks import item_tuple, require_str, require_u64
from ..contracts.ids import PlacementId, PlacementSetId, ResourceId, RevisionId
from ..contracts.manifest import ResourceKind
from ._canonical import content_and_wire_sha256, placement_wire_json, topology_object
from ._coverage import validate_complete_coverage
from ._default_state import restore_default_state, restore_field_values
from .part import _FIELD_NAMES as _PART_FIELD_NAMES
from .part import WeightPlacementPart, _part_values, assembled_part, part_fields_failure, typed_part_values
from .topology import (
    _TOPOLOGY_FIELDS,
    ParallelTopology,
    TopologyParticipant,
    _participant_values,
    _topology_values,
    topology_fields_failure,
)
from .types import _TENSOR_FIELDS, ParallelRank, PlacementFragment, TensorDescriptor, _rank_values, tensor_fields_failure
from .validation import (
    fast_placement_checks,
    pack_placement_fragments,
    validate_placement_fragments,
)

__all__ = ["WeightPlacementManifest"]

_PART_FIELDS = ("resource_id", "revision", "weight_generation", "placement_set_id")


def _participant_key(part: WeightPlacementPart) -> str:
    return part.participant_id


def _tensor_key(tensor: TensorDescriptor) -> str:
    return tensor.tensor_id


_fragment_key = attrgetter("placement_fragment_id")
_tensor_id_of = attrgetter("tensor_id")
_rank_of = attrgetter("rank")


# a tensor id index {ids[i]: positions[i]} as two tuples (ids distinct exact strs), which the C
# passes read without a dict
_TensorIndex = tuple[tuple[str, ...], tuple[int, ...]]
_Assembled = tuple[
    tuple[TensorDescriptor, ...],
    tuple[PlacementFragment, ...],
    Optional[tuple[tuple[PlacementFragment, ...], Union[list[int], bytes], Optional[_TensorIndex]]],
]


def _sorted_groups(
    fragments: tuple[PlacementFragment, ...],
    group_of: list[int],
    ngroups: int,
    tensor_ids: list[int],
    catalog: tuple[TensorDescriptor, ...],
    keys: Optional[list[Any]] = None,
) -> tuple[
    Sequence[PlacementFragment],
    Optional[Union[list[int], bytes]],
    Sequence[Sequence[PlacementFragment]],
    Sequence[tuple[TensorDescriptor, ...]],
]:
    """``(ordered, rows, by_group, tensors_by_group)``: ``fragments`` sorted by id (stable),
    each input fragment's position in it (``None`` from the Python fallback; from C, bytes of
    native int64, the form ``FragmentTable.pack_objects`` reads: no int object each), per group the
    fragments in that order, and per group ``catalog[p]`` for its distinct ``tensor_ids`` entries
    ``p``, ascending (a tuple). C does it when every id is a str and every entry an int in
    ``range(len(catalog))`` below ``2**31`` (tuples, built without touching the objects in the
    scattered sorted order; the catalog's objects taken directly, no int object each). ``keys``,
    when given, are the fragments' ids already read."""
    if keys is None:
        keys = list(map(_fragment_key, fragments))
    # (a tuple is read in place; anything else through a private list, which no other code holds)
    items = fragments if type(fragments) is tuple else list(fragments)
    result = _native.sorted_groups(items, keys, group_of, ngroups, tensor_ids, True, True, catalog)
    if result is not None:
        ordered, rows, by_group, tensors_by_group = result
        return ordered, rows, by_group, tensors_by_group
    order = sorted(range(len(fragments)), key=keys.__getitem__)
    by_group: list[list[PlacementFragment]] = [[] for _ in range(ngroups)]
    ids_by_group: list[set[int]] = [set() for _ in range(ngroups)]
    for position in order:
        by_group[group_of[position]].append(fragments[position])
        ids_by_group[group_of[position]].add(tensor_ids[position])
    tensor_at = catalog.__getitem__
    distinct = [tuple(map(tensor_at, sorted(ids))) for ids in ids_by_group]
    return [fragments[position] for position in order], None, by_group, distinct


def _sorted_by_tensor_id(tensors: tuple[TensorDescriptor, ...]) -> list[TensorDescriptor]:
    """``sorted(tensors, key=tensor_id)``, by the C sort when every id is a str."""
    ordered: Optional[list[TensorDescriptor]] = _native.sorted_by_str_keys(
        list(tensors), list(map(_tensor_id_of, tensors))
    )
    return sorted(tensors, key=_tensor_id_of) if ordered is None else ordered



def part_index_matches(parts: Any, index: Any, *, exact_parts: bool = False) -> bool:
    """Whether ``index`` is exactly the dict ``parts`` (a tuple) keyed by participant id would
    build: a plain dict with exact str keys (no probe runs a key's ``__eq__``), one entry per
    part, each id naming its own part object, the parts distinct objects (so their ids are
    distinct and the entries are the parts and nothing else; a part listed twice is refused).
    ``exact_parts``: every part is also an exact ``WeightPlacementPart`` (the sealed checks'
    types); otherwise any part holding its fields in an instance dict. Exact parts are checked
    in C (``_native.part_index_exact``, no Python code), the rest here (its oracle in the tests)."""
    if _native.part_index_exact(parts, index, WeightPlacementPart):
        return True
    if exact_parts or type(parts) is not tuple or type(index) is not dict or len(index) != len(parts):
        return False
    for key in index:
        if type(key) is not str:
            return False
    for part in parts:
        if not isinstance(part, WeightPlacementPart):
            return False
        state = getattr(part, "__dict__", None)
        participant_id = state.get("participant_id") if type(state) is dict else None
        if type(participant_id) is not str or index.get(participant_id) is not part:
            return False
    return len({id(part) for part in parts}) == len(parts)

@dataclass(frozen=True, init=False)
class WeightPlacementManifest:
    """One complete global logical placement of one weight generation.

    Built from one :class:`WeightPlacementPart` per topology participant (or with
    :meth:`from_fragments`). Construction validates the part set, the fragment
    checks and complete coverage, then derives the canonical ``placement_id``.
    ``digest`` is computed on first access and cached.
    """

    resource_id: ResourceId
    placement_id: PlacementId
    revision: RevisionId
    weight_generation: int
    placement_set_id: PlacementSetId
    topology: ParallelTopology
    parts: tuple[WeightPlacementPart, ...]
    tensors: tuple[TensorDescriptor, ...]
    fragments: tuple[PlacementFragment, ...]
    _digest_cache: Optional[str] = field(default=None, init=False, repr=False, compare=False)

    def __init__(
        self,
        *,
        resource_id: ResourceId,
        revision: RevisionId,
        weight_generation: int,
        placement_set_id: PlacementSetId,
        topology: ParallelTopology,
        parts: tuple[WeightPlacementPart, ...],
        placement_id: Optional[PlacementId] = None,
    ) -> None:
        _initialize(
            self,
            resource_id=resource_id,
            revision=revision,
            weight_generation=weight_generation,
            placement_set_id=placement_set_id,
            topology=topology,
            parts=parts,
            placement_id=placement_id,
            assembled=None,
        )

    @property
    def resource_kind(self) -> ResourceKind:
        """Always :attr:`ResourceKind.MODEL_WEIGHT`."""
        return ResourceKind.MODEL_WEIGHT

    @property
    def digest(self) -> str:
        """Hex SHA-256 of the canonical placement JSON (spec §6.4); computed once."""
        state = self.__dict__
        cached = state.get("_digest_cache")
        if cached is None:
            # computed by the constructor with the placement id (one encoding of the parts and
            # tensors for both) while the fields it read are still these very objects (a call
            # that reads the digest holds this value until it returns: binding._held_values,
            # bound_contracts._ViewState.held)
            ahead = state.pop("_digest_ahead", None)
            if (
                type(ahead) is tuple
                and type(self) is WeightPlacementManifest
                and all(state.get(name) is value for name, value in zip(_WIRE_FIELDS, ahead[1:]))
            ):
                cached = ahead[0]
            else:
                # the SHA-256 of serde.weight_placement_to_json(self) (ASCII text), hashed as
                # the C encoder writes it
                cached = placement_wire_json(self, sha256=True)
            object.__setattr__(self, "_digest_cache", cached)
        return cached

    def __getstate__(self) -> dict[str, Any]:
        return {
            name: value
            for name, value in self.__dict__.items()
            if not name.startswith("_") or name == "_digest_cache"
        }

    def __setstate__(self, state: Any) -> None:
        """Default pickling's restore of ``__getstate__`` (spec §13: the fields and
        ``_digest_cache``, without validation; derived caches are rebuilt lazily), refusing
        fields of another type than the constructor stores and parts that do not name this
        placement's identity and topology (``placement_fields_failure``, ``_default_state``)."""
        restore_default_state(self, state, WeightPlacementManifest, _PICKLED_FIELDS, placement_fields_failure)

    def _fragments_table(self) -> Optional[_native.FragmentTable]:
        """The fragments packed into C arrays (tensor index = position in ``tensors``).

        Built at construction, or lazily after unpickling; a derived cache, never pickled.
        """
        table: Optional[_native.FragmentTable] = self.__dict__.get("_fragment_table")
        if table is None:
            table = pack_placement_fragments(self.tensors, self.fragments)
            if table is not None:
                _native.untrack_table(table)
                self.__dict__["_fragment_table"] = table
        return table

    def _part_index(self) -> dict[str, WeightPlacementPart]:
        """Parts keyed by participant id (a derived cache, never pickled).

        The cached dict is returned only while it is exactly ``parts`` keyed by their ids
        (``part_index_matches``), so no step reads a part the placement does not hold. Anything
        else found there (a dict edited in place, another type) is ignored: an index built from
        ``parts`` is returned, and the value is left in place rather than released mid-call
        (its weakref callbacks would run there: see ``binding._held_values``)."""
        state = self.__dict__
        index = state.get("_parts_by_participant")
        if part_index_matches(state.get("parts"), index):
            return index
        built = {part.participant_id: part for part in self.parts}
        if index is None:
            state["_parts_by_participant"] = built
        return built

    @classmethod
    def from_fragments(
        cls,
        *,
        resource_id: ResourceId,
        revision: RevisionId,
        weight_generation: int,
        placement_set_id: PlacementSetId,
        topology: ParallelTopology,
        tensors: tuple[TensorDescriptor, ...],
        fragments: tuple[PlacementFragment, ...],
        placement_id: Optional[PlacementId] = None,
    ) -> WeightPlacementManifest:
        """Assemble a manifest from a global tensor catalog and fragment list.

        Each fragment goes to the topology participant with an equal rank; one part
        is built for every participant, including participants without fragments.
        """
        # Assembly allocates many container objects and keeps them: pause the cyclic GC
        # (its collections would rescan them) and restore its state afterwards.
        # (its C steps' layout memos trusted only while no field is shadowed: memo_proved;
        # AUDIT41, tests/test_audit4141_public_cold_memos.py)
        with collector_paused():
            return memo_proved(
                lambda: _assemble_from_fragments(
                    cls,
                    resource_id=resource_id,
                    revision=revision,
                    weight_generation=weight_generation,
                    placement_set_id=placement_set_id,
                    topology=topology,
                    tensors=tensors,
                    fragments=fragments,
                    placement_id=placement_id,
                )
            )


# the fields placement_wire_json reads, in the order _digest_ahead holds them after the digest
_WIRE_FIELDS = (
    "resource_id",
    "revision",
    "weight_generation",
    "placement_set_id",
    "placement_id",
    "topology",
    "parts",
    "tensors",
)

_PICKLED_FIELDS = (
    "resource_id",
    "placement_id",
    "revision",
    "weight_generation",
    "placement_set_id",
    "topology",
    "parts",
    "tensors",
    "fragments",
    "_digest_cache",
)


_ABSENT = object()
_part_identity = itemgetter(*_PART_FIELDS, "topology_id")
_IDENTITY_TYPES = (str, str, int, str, str)


def placement_fields_failure(
    resource_id: Any,
    placement_id: Any,
    revision: Any,
    weight_generation: Any,
    placement_set_id: Any,
    topology: Any,
    parts: Any,
    tensors: Any,
    fragments: Any,
    digest_cache: Any,
) -> Optional[str]:
    """The first failure of a restored placement's fields (spec §13 restores them by default
    pickling, without validation): a field not of the type the constructor stores (strs, an int
    generation, a ``ParallelTopology``, tuples of parts, descriptors and placement fragments, a
    str or ``None`` digest cache: the field rule's message), or a part whose identity or topology
    id differs from the placement's ("placement part {name} differs", as the constructor
    checks). ``None`` otherwise. Forged content the revalidation never reads (a float NaN,
    another object of the pickle closing a reference cycle) is refused here (fuzz finding F5);
    forged values of the right type stay open there (only a digest recheck would see them)."""
    for name, value in (
        ("resource_id", resource_id),
        ("placement_id", placement_id),
        ("revision", revision),
        ("placement_set_id", placement_set_id),
    ):
        if type(value) is not str:
            return f"{name} must be a non-empty string"
    if type(weight_generation) is not int:
        return "weight_generation must be an integer"
    if not isinstance(topology, ParallelTopology):
        return "topology must be a ParallelTopology"
    topology_state = getattr(topology, "__dict__", None)
    if type(topology_state) is not dict:
        return "topology must be a ParallelTopology"
    # (all of it: a topology restored by default pickling has not been checked by its restore)
    failure = topology_fields_failure(*(topology_state.get(name, _ABSENT) for name in _TOPOLOGY_FIELDS))
    if failure is not None:
        return failure
    topology_id = topology_state["topology_id"]
    if digest_cache is not None and type(digest_cache) is not str:
        return "placement digest must be a lowercase SHA-256 digest"
    if type(parts) is not tuple:
        return "WeightPlacementManifest parts must be a sequence"
    expected = (resource_id, revision, weight_generation, placement_set_id)
    identity = expected + (topology_id,)
    for part in parts:
        if type(part) is WeightPlacementPart:  # (the common case: equal values of exact types)
            try:
                values = _part_identity(part.__dict__)
            except KeyError:
                pass
            else:
                if values == identity and tuple(map(type, values)) == _IDENTITY_TYPES:
                    continue
        state = getattr(part, "__dict__", None) if isinstance(part, WeightPlacementPart) else None
        if type(state) is not dict:
            return "WeightPlacementManifest parts must contain WeightPlacementPart"
        for name, value in zip(_PART_FIELDS, expected):
            field_value = state.get(name, _ABSENT)
            if type(field_value) is not type(value) or field_value != value:
                return f"placement part {name} differs"
        field_value = state.get("topology_id", _ABSENT)
        if type(field_value) is not str or field_value != topology_id:
            return "placement part topology_id differs"
    if type(tensors) is not tuple:
        return "WeightPlacementManifest tensors must be a sequence"
    for tensor in tensors:
        if not isinstance(tensor, TensorDescriptor):
            return "WeightPlacementManifest tensors must contain TensorDescriptor"
    if type(fragments) is not tuple:
        return "WeightPlacementManifest fragments must be a sequence"
    for kind in set(map(type, fragments)):  # (bulk: one isinstance per distinct item type)
        if not issubclass(kind, PlacementFragment):
            return "WeightPlacementManifest fragments must contain PlacementFragment"
    return None


def restored_graph_failure(placement: Any) -> Optional[str]:
    """``placement_fields_failure`` of a placement built by field dict without its restore
    function (the packed plan record, ``_native.graph_unpack``), and the same checks of every
    part and tensor descriptor below it that their own restores make (``part_fields_failure``,
    ``tensor_fields_failure``; each distinct object once). ``None`` when everything has the
    constructor's types."""
    state = getattr(placement, "__dict__", None) if isinstance(placement, WeightPlacementManifest) else None
    if type(state) is not dict:
        return None  # not a placement: the rule that reads it refuses it
    if _typed_graph(state):
        return None
    # children first, as the record's restores run (each part's descriptors, the part; the
    # placement's own descriptors; then the placement, which checks its topology and parts)
    seen: set[int] = set()
    parts = state.get("parts")
    for part in parts if type(parts) is tuple else ():
        part_state = getattr(part, "__dict__", None) if isinstance(part, WeightPlacementPart) else None
        if type(part_state) is not dict:
            continue  # (placement_fields_failure refuses it)
        failure = _tensors_failure(part_state.get("tensors"), seen)
        if failure is not None:
            return failure
        try:
            values = _part_values(part_state)
        except KeyError:
            values = tuple(part_state.get(name, _ABSENT) for name in _PART_FIELD_NAMES)
        if not typed_part_values(values):
            failure = part_fields_failure(*values)
            if failure is not None:
                return failure
    get = state.get
    failure = _tensors_failure(get("tensors"), seen)
    if failure is not None:
        return failure
    return placement_fields_failure(*(get(name, _ABSENT) for name in _PICKLED_FIELDS[:9]), get("_digest_cache"))


_PLACEMENT_TYPES = (str, str, str, int, str, ParallelTopology, tuple, tuple, tuple)
_TOPOLOGY_TYPES = (int, int, int, int, tuple, str)
_placement_state_values = itemgetter(*_PICKLED_FIELDS[:9])
_PART_FIELD_TYPES = {(str, str, int, str, str, str, ParallelRank, tuple, tuple)}
_PART_CLASSES = {WeightPlacementPart}
_PARTICIPANT_TYPES = {TopologyParticipant}
_PARTICIPANT_FIELD_TYPES = {(str, ParallelRank)}
_FOUR_INTS = (int, int, int, int)
_instance_dict = attrgetter("__dict__")
_part_identity_values = itemgetter(0, 1, 2, 3, 4)
_second = itemgetter(1)
_seventh = itemgetter(6)
_eighth = itemgetter(7)
_ninth = itemgetter(8)
_DESCRIPTOR_TYPES = {TensorDescriptor}
_FRAGMENT_TYPES = {PlacementFragment}


def _typed_graph(state: dict[str, Any]) -> bool:
    """``restored_graph_failure``'s fast path for one placement (see ``typed_graphs``)."""
    return typed_graphs([state])


def typed_graphs(states: list[dict[str, Any]]) -> bool:
    """The fast path of ``restored_graph_failure`` for several placements at once (their
    instance dicts): True when every placement, its topology and participants, its descriptors
    and its parts hold exactly the classes the constructors store and every part names its
    placement's identity and topology (its descriptors among the placement's); False (anything
    else, subclasses included): ``restored_graph_failure`` decides, placement by placement. The
    loops over parts and participants run in C (``map`` of C callables), over all placements
    together."""
    try:
        members: list[Any] = []
        fields: list[Any] = []
        identities: list[Any] = []
        known: set[int] = set()
        for state in states:
            values = _placement_state_values(state)
            if tuple(map(type, values)) != _PLACEMENT_TYPES:
                return False
            digest = state.get("_digest_cache")
            if digest is not None and type(digest) is not str:
                return False
            topology = _topology_values(values[5].__dict__)
            if tuple(map(type, topology)) != _TOPOLOGY_TYPES:
                return False
            participants = topology[4]
            if set(map(type, participants)) != _PARTICIPANT_TYPES:
                return False
            members.extend(map(_participant_values, map(_instance_dict, participants)))
            tensors = values[7]
            if not set(map(type, tensors)) <= _DESCRIPTOR_TYPES or not set(map(type, values[8])) <= _FRAGMENT_TYPES:
                return False
            for tensor in tensors:
                if id(tensor) not in known:
                    if _tensor_state_failure(tensor) is not None:
                        return False
            own = set(map(id, tensors))
            parts = values[6]
            if set(map(type, parts)) != _PART_CLASSES:
                return False
            part_fields = list(map(_part_values, map(_instance_dict, parts)))
            if not own.issuperset(map(id, chain.from_iterable(map(_eighth, part_fields)))):
                return False
            known |= own
            fields.extend(part_fields)
            identities.extend([(values[0], values[2], values[3], values[4], topology[5])] * len(part_fields))
        return (
            set(map(tuple, map(map, repeat(type), members))) <= _PARTICIPANT_FIELD_TYPES
            and _typed_ranks(map(_second, members))
            and set(map(tuple, map(map, repeat(type), fields))) <= _PART_FIELD_TYPES
            and list(map(_part_identity_values, fields)) == identities
            and (  # (usually the participants' rank objects, checked above)
                set(map(id, map(_second, members))).issuperset(map(id, map(_seventh, fields)))
                or _typed_ranks(map(_seventh, fields))
            )
            and set(map(type, chain.from_iterable(map(_ninth, fields)))) <= _FRAGMENT_TYPES
        )
    except KeyError:  # a field missing somewhere
        return False


def _typed_ranks(ranks: Any) -> bool:
    """True when every one of ``ranks`` (exact ``ParallelRank`` instances) holds four exact ints."""
    return set(map(tuple, map(map, repeat(type), map(_rank_values, map(_instance_dict, ranks))))) <= {_FOUR_INTS}


def _tensors_failure(tensors: Any, seen: set[int]) -> Optional[str]:
    """``tensor_fields_failure`` of each descriptor of ``tensors`` not in ``seen`` (ids; added)."""
    for tensor in tensors if type(tensors) is tuple else ():
        if id(tensor) not in seen and isinstance(tensor, TensorDescriptor):
            seen.add(id(tensor))
            failure = _tensor_state_failure(tensor)
            if failure is not None:
                return failure
    return None


def _tensor_state_failure(tensor: Any) -> Optional[str]:
    state = getattr(tensor, "__dict__", None)
    if type(state) is not dict:
        return "WeightPlacementPart tensors must contain TensorDescriptor"
    return tensor_fields_failure(*(state.get(name, _ABSENT) for name in _TENSOR_FIELDS))


def _restore_placement_manifest(
    resource_id: Any,
    placement_id: Any,
    revision: Any,
    weight_generation: Any,
    placement_set_id: Any,
    topology: Any,
    parts: Any,
    tensors: Any,
    fragments: Any,
    digest_cache: Any,
) -> WeightPlacementManifest:
    """Unpickle a ``WeightPlacementManifest`` from an older pickle of this package
    (``_default_state``)."""
    values = (resource_id, placement_id, revision, weight_generation, placement_set_id, topology, parts, tensors, fragments, digest_cache)
    placement: WeightPlacementManifest = restore_field_values(
        WeightPlacementManifest, _PICKLED_FIELDS, placement_fields_failure, values
    )
    return placement


def _initialize(
    self: WeightPlacementManifest,
    *,
    resource_id: ResourceId,
    revision: RevisionId,
    weight_generation: int,
    placement_set_id: PlacementSetId,
    topology: ParallelTopology,
    parts: tuple[WeightPlacementPart, ...],
    placement_id: Optional[PlacementId],
    assembled: Optional[_Assembled],
) -> None:
    """The constructor's body. ``assembled`` (private, from :meth:`from_fragments` only) is
    ``(tensors, fragments, packed_from)``: ``tensors`` and ``fragments`` already merged and
    sorted by id (the tensor catalog, every one referenced, one object per id; a permutation
    of the parts' fragments), and ``(source, rows, index)`` with ``fragments[rows[i]] is
    source[i]`` for packing the table in the source's order (``index``: ``None``, or the tensor
    ids' positions in ``tensors`` as the pair ``(ids, positions)``). The checks
    below then run on them as given; they reject duplicate fragment ids, so a passing
    fragment order is the unique sorted order the merge below would produce.
    """
    require_str(resource_id, "resource_id")
    require_str(revision, "revision")
    require_str(placement_set_id, "placement_set_id")
    require_u64(weight_generation, "weight_generation")
    if not isinstance(topology, ParallelTopology):
        raise ValueError("topology must be a ParallelTopology")
    if placement_id is not None:
        require_str(placement_id, "placement_id")
    ordered_parts = tuple(
        sorted(
            item_tuple(parts, "WeightPlacementManifest parts", WeightPlacementPart),
            key=_participant_key,
        )
    )
    _validate_part_set(
        ordered_parts, topology, resource_id, revision, weight_generation, placement_set_id
    )
    if assembled is None:
        catalog: dict[str, TensorDescriptor] = {}
        all_fragments: list[PlacementFragment] = []
        for part in ordered_parts:
            for tensor in part.tensors:
                known = catalog.get(tensor.tensor_id)
                if known is None:
                    catalog[tensor.tensor_id] = tensor
                elif known is not tensor and known != tensor:
                    raise ValueError(
                        f"placement part tensor descriptor mismatch: {tensor.tensor_id}"
                    )
            all_fragments.extend(part.fragments)
        tensors = tuple(sorted(catalog.values(), key=_tensor_key))
        all_fragments.sort(key=_fragment_key)
        fragments = tuple(all_fragments)
        packed_from = None
    else:
        tensors, fragments, packed_from = assembled
    table = fast_placement_checks(
        tensors, fragments, check_alias_groups=True, packed_from=packed_from
    )
    if table is None:
        validate_placement_fragments(tensors, fragments, check_alias_groups=True)
    validate_complete_coverage(tensors, fragments, topology, table)
    content: dict[str, Any] = {
        "schema": "complete-weight-placement",
        "resource_id": resource_id,
        "revision": revision,
        "weight_generation": weight_generation,
        "placement_set_id": placement_set_id,
        "topology": topology_object(topology),
    }
    # the wire object's other fields (placement_wire_json's payload without placement_id): its
    # digest is hashed from the same encoding of the parts and tensors (None: not done here)
    wire = None
    if type(self) is WeightPlacementManifest:
        wire = {
            "resource_kind": "model_weight",
            "resource_id": resource_id,
            "revision": revision,
            "weight_generation": weight_generation,
            "placement_set_id": placement_set_id,
            "topology": content["topology"],
        }
    content_digest, wire_digest = content_and_wire_sha256(content, ordered_parts, tensors, wire)
    canonical = "sha256:" + content_digest
    if placement_id is not None and placement_id != canonical:
        raise ValueError("placement_id does not match canonical logical content")
    state = self.__dict__
    state["resource_id"] = resource_id
    state["placement_id"] = canonical
    state["revision"] = revision
    state["weight_generation"] = weight_generation
    state["placement_set_id"] = placement_set_id
    state["topology"] = topology
    state["parts"] = ordered_parts
    state["tensors"] = tensors
    state["fragments"] = fragments
    state["_digest_cache"] = None
    if wire_digest is not None:
        # a derived cache (never pickled): what digest returns while these fields are unchanged
        state["_digest_ahead"] = (
            wire_digest,
            resource_id,
            revision,
            weight_generation,
            placement_set_id,
            canonical,
            topology,
            ordered_parts,
            tensors,
        )
    if table is not None:
        _native.untrack_table(table)  # holds no Python reference: never on a cycle
        state["_fragment_table"] = table
    if type(self) is WeightPlacementManifest:
        # Out of the cyclic GC when inert; nothing the library caches on a placement later
        # (part index, fragment table, digest, binding's derived maps) refers back to it.
        _native.untrack_inert(self, WeightPlacementManifest)


def _first_by_id(ids: set[Any]) -> Any:
    """The least id (str order); ids a forged value made other than str come after, by their
    text (a comparison of mixed types would raise TypeError)."""
    return min(ids, key=lambda value: (type(value) is not str, str(value)))


def _assemble_from_fragments(
    cls: type[WeightPlacementManifest],
    *,
    resource_id: ResourceId,
    revision: RevisionId,
    weight_generation: int,
    placement_set_id: PlacementSetId,
    topology: ParallelTopology,
    tensors: tuple[TensorDescriptor, ...],
    fragments: tuple[PlacementFragment, ...],
    placement_id: Optional[PlacementId],
) -> WeightPlacementManifest:
    tensor_items = _items(tensors, "placement tensors", TensorDescriptor)
    fragment_items = _items(fragments, "placement fragments", PlacementFragment)
    # The C columns need distinct exact-str tensor ids (they decline otherwise, before any
    # fragment or rank is read): a returned result means no duplicate id, so the duplicate
    # check below, which comes first in the contract, can only fail on the Python path.
    indexed = _assembly_columns_indexed(tensor_items, fragment_items, topology)
    if indexed is not None:
        columns, tensor_index = indexed
        return _assemble_columns(
            cls,
            resource_id=resource_id,
            revision=revision,
            weight_generation=weight_generation,
            placement_set_id=placement_set_id,
            topology=topology,
            fragment_items=fragment_items,
            placement_id=placement_id,
            columns=columns,
            tensor_index=tensor_index,
        )
    catalog: dict[str, TensorDescriptor] = {}
    for tensor in tensor_items:
        if tensor.tensor_id in catalog:
            raise ValueError("duplicate tensor_id in placement tensors")
        catalog[tensor.tensor_id] = tensor
    tensor_ids = list(map(_tensor_id_of, fragment_items))
    referenced = set(tensor_ids)
    # (the first unknown and the first unreferenced tensor by id: the reference's choice,
    # where the spec names none)
    unknown = referenced.difference(catalog)
    if unknown:
        raise ValueError(f"unknown tensor_id: {_first_by_id(unknown)}")
    unreferenced = set(catalog).difference(referenced)
    if unreferenced:
        raise ValueError(f"global placement contains an unreferenced tensor: {_first_by_id(unreferenced)}")
    if not isinstance(topology, ParallelTopology):
        raise ValueError("topology must be a ParallelTopology")
    # One group per distinct participant rank (participants with equal ranks share one).
    group_of_rank, participant_groups = _rank_groups(topology)
    # Fragments usually share a few rank objects: look each distinct object up once, in
    # order of first appearance (so the first fragment with an unknown rank is reported).
    ranks = list(map(_rank_of, fragment_items))
    rank_keys = list(map(id, ranks))
    group_of_key: dict[int, int] = {}
    for key, rank in dict(zip(rank_keys, ranks)).items():
        group = group_of_rank.get(rank)
        if group is None:
            raise ValueError(
                "placement fragment rank has no topology participant: "
                f"{fragment_items[rank_keys.index(key)].placement_fragment_id}"
            )
        group_of_key[key] = group
    group_of = list(map(group_of_key.__getitem__, rank_keys))
    del ranks, rank_keys
    # Tensors sorted by id once; a fragment's tensor is then its position in that order.
    sorted_tensors = tuple(_sorted_by_tensor_id(tensor_items))
    tensor_position = {tensor.tensor_id: position for position, tensor in enumerate(sorted_tensors)}
    # One sort by fragment id; the parts' fragments and tensor positions come out of it in
    # that order (each input fragment's position too, for packing the table in input order).
    ordered, rows, by_group, tensors_by_group = _sorted_groups(
        fragment_items,
        group_of,
        len(group_of_rank),
        list(map(tensor_position.__getitem__, tensor_ids)),
        sorted_tensors,
    )
    return _assemble_grouped(
        cls,
        resource_id=resource_id,
        revision=revision,
        weight_generation=weight_generation,
        placement_set_id=placement_set_id,
        topology=topology,
        fragment_items=fragment_items,
        placement_id=placement_id,
        participant_groups=participant_groups,
        sorted_tensors=sorted_tensors,
        grouped=(ordered, rows, by_group, tensors_by_group),
    )


def _items(value: object, name: str, item_type: type) -> tuple[Any, ...]:
    """``item_tuple(value, name, item_type)``. A tuple of more than 8 items takes one C pass
    (``_native.all_instances``: isinstance per item, in order, stopping at the first miss,
    reading the scattered objects' types ahead): the same accept set (item_tuple accepts a
    tuple exactly when every item is an instance; its bulk test of the distinct types only
    skips isinstance calls that would return True without running any hook), the same error,
    and for a miss the same isinstance calls in the same order as item_tuple's loop."""
    if type(value) is tuple and len(value) > 8:
        every: Optional[bool] = _native.all_instances(value, item_type)
        if every is True:
            return value
        if every is False:
            raise ValueError(f"{name} must contain {item_type.__name__}")
    return item_tuple(value, name, item_type)


def _rank_groups(topology: ParallelTopology) -> tuple[dict[ParallelRank, int], list[int]]:
    """One group per distinct participant rank (participants with equal ranks share one), and
    each participant's group."""
    group_of_rank: dict[ParallelRank, int] = {}
    for participant in topology.participants:
        group_of_rank.setdefault(participant.rank, len(group_of_rank))
    return group_of_rank, [group_of_rank[p.rank] for p in topology.participants]


_Columns = tuple[list[int], list[int], list[Any], tuple[TensorDescriptor, ...], dict[ParallelRank, int], list[int]]


def _assembly_columns(
    tensor_items: tuple[TensorDescriptor, ...],
    fragment_items: tuple[PlacementFragment, ...],
    topology: Any,
) -> Optional[_Columns]:
    """:func:`_assembly_columns_indexed`'s columns."""
    indexed = _assembly_columns_indexed(tensor_items, fragment_items, topology)
    return None if indexed is None else indexed[0]


def _assembly_columns_indexed(
    tensor_items: tuple[TensorDescriptor, ...],
    fragment_items: tuple[PlacementFragment, ...],
    topology: Any,
) -> Optional[tuple[_Columns, Optional[_TensorIndex]]]:
    """The per-fragment columns of the assembly in one C pass (``_native.assembly_columns``):
    tensor positions (in the id-sorted catalog), rank groups and ids, plus the sorted catalog,
    the rank groups and each participant's group; and, when every tensor is exactly a
    ``TensorDescriptor``, the ids' positions in the sorted catalog (what packing the fragment
    table would read again from each sorted tensor) as the pair ``(ids, positions)`` of tuples
    (the index ``{ids[i]: positions[i]}``, ids distinct), else ``None``. ``None`` when the checks
    below the catalog's
    would raise (unknown or unreferenced tensor, a non-topology, a rank without participant) or
    a value is unusual: the caller's Python steps then raise the contract's first error."""
    if not isinstance(topology, ParallelTopology) or not fragment_items:
        return None
    try:
        tensor_ids = list(map(_tensor_id_of, tensor_items))
    except Exception:  # a forged descriptor: the Python steps raise it in the contract's order
        return None
    # each id read once, in input order; the index is the pair (ids, rows) of tuples, rows[i]
    # being tensor_items[i]'s position in id order: {ids[i]: rows[i]} without building the dict
    # (the C passes look ids up by identity; str_index.h)
    native = _native.sorted_by_str_keys(list(tensor_items), tensor_ids, True, False, True)
    if native is None:  # a non-str tensor id
        return None
    ordered, tensor_position, distinct = native
    sorted_tensors = tuple(ordered)
    if not distinct:
        return None  # a duplicate id: the Python steps report it first
    group_of_rank, participant_groups = _rank_groups(topology)
    result = _native.assembly_columns(fragment_items, PlacementFragment, tensor_position, group_of_rank)
    if result is None:
        return None
    positions, groups, keys, referenced = result
    if referenced != len(sorted_tensors):
        return None  # an unreferenced tensor: the Python steps name it
    # exact descriptors only: reading their ids again could not differ (nor be seen)
    exact = set(map(type, tensor_items)) == {TensorDescriptor}
    columns = (positions, groups, keys, sorted_tensors, group_of_rank, participant_groups)
    return columns, (tensor_position if exact else None)


def _assemble_columns(
    cls: type[WeightPlacementManifest],
    *,
    resource_id: ResourceId,
    revision: RevisionId,
    weight_generation: int,
    placement_set_id: PlacementSetId,
    topology: ParallelTopology,
    fragment_items: tuple[PlacementFragment, ...],
    placement_id: Optional[PlacementId],
    columns: _Columns,
    tensor_index: Optional[_TensorIndex] = None,
) -> WeightPlacementManifest:
    positions, groups, keys, sorted_tensors, group_of_rank, participant_groups = columns
    grouped = _sorted_groups(fragment_items, groups, len(group_of_rank), positions, sorted_tensors, keys)
    return _assemble_grouped(
        cls,
        resource_id=resource_id,
        revision=revision,
        weight_generation=weight_generation,
        placement_set_id=placement_set_id,
        topology=topology,
        fragment_items=fragment_items,
        placement_id=placement_id,
        participant_groups=participant_groups,
        sorted_tensors=sorted_tensors,
        grouped=grouped,
        tensor_index=tensor_index,
    )


def _assemble_grouped(
    cls: type[WeightPlacementManifest],
    *,
    resource_id: ResourceId,
    revision: RevisionId,
    weight_generation: int,
    placement_set_id: PlacementSetId,
    topology: ParallelTopology,
    fragment_items: tuple[PlacementFragment, ...],
    placement_id: Optional[PlacementId],
    participant_groups: list[int],
    sorted_tensors: tuple[TensorDescriptor, ...],
    grouped: tuple[
        Sequence[PlacementFragment],
        Optional[Union[list[int], bytes]],
        Sequence[Sequence[PlacementFragment]],
        Sequence[tuple[TensorDescriptor, ...]],
    ],
    tensor_index: Optional[_TensorIndex] = None,
) -> WeightPlacementManifest:
    ordered, rows, by_group, tensors_by_group = grouped
    common: dict[str, Any] = {
        "resource_id": resource_id,
        "revision": revision,
        "weight_generation": weight_generation,
        "placement_set_id": placement_set_id,
        "topology_id": topology.topology_id,
    }
    buckets = []
    taken: set[int] = set()
    for participant, group in zip(topology.participants, participant_groups):
        # the part's tensors, sorted by id (its distinct tensor positions in increasing order);
        # participants sharing a group (equal ranks) each get their own tuple, as before
        part_tensors = tensors_by_group[group]
        if group in taken:
            part_tensors = tuple(list(part_tensors))
        taken.add(group)
        buckets.append((participant, part_tensors, by_group[group]))
    manifest_fields: dict[str, Any] = {
        "resource_id": resource_id,
        "revision": revision,
        "weight_generation": weight_generation,
        "placement_set_id": placement_set_id,
        "topology": topology,
        "placement_id": placement_id,
    }
    def build_parts(make_part: Callable[..., WeightPlacementPart]) -> tuple[WeightPlacementPart, ...]:
        # tuple() of a list, not of a generator: CPython fills a tuple(generator) while the
        # generator runs, and code run meanwhile (a gc callback) could find it half-filled
        return tuple(
            [
                make_part(
                    **common,
                    participant_id=participant.participant_id,
                    rank=participant.rank,
                    tensors=part_tensors,
                    fragments=tuple(part_fragments),
                )
                for participant, part_tensors, part_fragments in buckets
            ]
        )

    # Fast path: the manifest's whole-manifest checks imply every part check, so the
    # parts are assembled unchecked. On any rejection the checked constructors run
    # again, so the error raised is exactly the one the checked path raises first.
    try:
        trusted = build_parts(assembled_part)
        if cls is not WeightPlacementManifest:  # a subclass keeps its own constructor
            return cls(parts=trusted, **manifest_fields)
        manifest = object.__new__(cls)
        _initialize(
            manifest,
            parts=trusted,
            assembled=(
                sorted_tensors,
                tuple(ordered),
                None if rows is None else (fragment_items, rows, tensor_index),
            ),
            **manifest_fields,
        )
        return manifest
    except ValueError:
        pass
    return cls(parts=build_parts(WeightPlacementPart), **manifest_fields)


def _validate_part_set(
    parts: tuple[WeightPlacementPart, ...],
    topology: ParallelTopology,
    resource_id: str,
    revision: str,
    weight_generation: int,
    placement_set_id: str,
) -> None:
    participant_ids = [part.participant_id for part in parts]
    if len(set(participant_ids)) != len(participant_ids):
        raise ValueError("duplicate placement participant")
    topology_ranks = {
        participant.participant_id: participant.rank for participant in topology.participants
    }
    present = set(participant_ids)
    missing = sorted(set(topology_ranks) - present)
    if missing:
        raise ValueError(f"missing topology participant: {missing[0]}")
    unknown = sorted(present - set(topology_ranks))
    if unknown:
        raise ValueError(f"unknown topology participant: {unknown[0]}")
    expected = {
        "resource_id": resource_id,
        "revision": revision,
        "weight_generation": weight_generation,
        "placement_set_id": placement_set_id,
        "topology_id": topology.topology_id,
    }
    for part in parts:
        state = part.__dict__
        for name, value in expected.items():
            if state[name] != value:
                raise ValueError(f"placement part {name} differs")
        if state["rank"] != topology_ranks[part.participant_id]:
            raise ValueError("placement part rank differs from topology")

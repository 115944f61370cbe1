"""Private C surface of mooncake.reshard (``mooncake.reshard._native``).

Nothing here is public API. Kernels take plain Python values (ints, tuples,
lists, str), range-check every input before it reaches C arithmetic, and raise
``ValueError`` with the contract's messages (or ``TypeError``/``OverflowError``
for inputs the Python layer should already have rejected).

Each section below belongs to one C file (csrc/<name>.c).
"""

from collections.abc import Callable, Sequence
from typing import Any, Optional, Union, final, overload

# --- canonical.c: canonical JSON and SHA-256 (libcrypto EVP_Digest) ---------

def sorted_by_str_keys(
    items: list[Any], keys: list[str], rows: bool = False, packed: bool = False, index: bool = False, /
) -> Any:
    """``sorted(items, key=...)`` given ``keys[i] == key(items[i])`` (a stable sort in C); with
    ``rows`` the pair ``(sorted_items, positions)``, ``positions[i]`` being the index of
    ``items[i]`` in ``sorted_items``. ``None`` when some key is not an exact ``str`` (or has no
    UTF-8 encoding). With ``rows`` and ``packed`` only ``(positions, distinct)``: the positions as
    bytes of native int64 (``array("q")``'s layout) and whether no two keys are equal (no sorted
    list is made, the items are not read); ``packed`` without ``rows``: ``ValueError``. With
    ``rows`` and ``index`` ``(sorted_items, (keys_tuple, positions_tuple), distinct)``: the pair
    being the index ``{keys[i]: positions[i]}`` that ``assembly_columns`` and
    ``FragmentTable.pack_objects`` take in place of a dict (when ``distinct``); ``index`` without
    ``rows`` or with ``packed``: ``ValueError``."""

def assembly_columns(
    fragments: tuple[Any, ...],
    fragment_type: type,
    tensor_position: Union[dict[str, int], tuple[tuple[str, ...], tuple[int, ...]]],
    group_of_rank: dict[Any, int],
    /,
) -> tuple[list[int], list[int], list[Any], int] | None:
    """For fragments (every item exactly ``fragment_type``) in one pass: ``(positions, groups,
    ids, referenced)`` with ``positions[i] = tensor_position[fragments[i].tensor_id]``,
    ``groups[i] = group_of_rank[fragments[i].rank]`` (the dicts' own int objects; each distinct
    rank object looked up once, in order of first appearance), ``ids[i]`` the fragment's
    ``placement_fragment_id`` and ``referenced`` the number of distinct positions. ``None`` on a
    wrong type, a failed read, a non-str or unknown tensor id, a rank without group, or a value
    that is not an int in range; errors of the ranks' own ``__hash__`` / ``__eq__`` propagate.
    ``tensor_position`` may be the pair ``(ids, positions)`` of tuples (ids distinct exact strs,
    positions ints in ``range(len(ids))``; a malformed pair: ``None``) standing for
    ``dict(zip(ids, positions))``: looked up by identity, the dict made only if a lookup needs it."""

def tensor_shape_columns(tensors: tuple[Any, ...], tensor_type: type, /) -> tuple[list[Any], list[Any]] | None:
    """``([t.global_shape for t in tensors], [t.itemsize for t in tensors])`` (the states' own
    objects) in one pass in batches, when every tensor is exactly ``tensor_type`` holding both in
    its state dict (keys exact strs); else ``None``. Runs no Python code."""

def sorted_groups(
    items: Union[list[Any], tuple[Any, ...]],
    keys: list[str],
    group_of: list[int],
    ngroups: int,
    extra: list[Any],
    distinct: bool = False,
    packed: bool = False,
    catalog: Optional[tuple[Any, ...]] = None,
    /,
) -> Any:
    """One stable sort of ``items`` by ``keys`` (``keys[i]`` belongs to ``items[i]``), and in that
    order ``items`` and ``extra`` split by ``group_of[i]`` (ints in ``range(ngroups)``):
    ``(sorted_items, positions, items_by_group, extra_by_group)`` (a tuple, a list of ints, and
    two lists of ``ngroups`` tuples), ``positions[i]`` being the index of ``items[i]`` in
    ``sorted_items``. ``items`` is a list or an exact tuple (read in place), else ``TypeError``.
    The tuples are filled without touching the objects in sorted order (their references are
    taken in input order). ``None`` when some key is not an exact ``str`` (or has
    no UTF-8 encoding). ``ValueError`` for unequal lengths or a group out of range.

    With ``distinct=True`` each group's extras come back as ``sorted(set(...))`` (a list), or
    ``None`` for a group holding an extra that is not an exact int in ``range(2**31)``. The
    sorted tuple and the groups' tuples are untracked by the collector when every item in them
    is inert. With ``packed=True`` ``positions`` is ``bytes`` of native int64 (``array("q")``'s
    layout) instead of a list of ints (what ``FragmentTable.pack_objects`` reads as ``rows``).
    With ``catalog`` (an exact tuple; ``distinct`` only, else ``TypeError``) each group's tuple
    holds ``catalog[v]`` for its values ``v`` instead of the ints (``None`` also when a value is
    not below ``len(catalog)``)."""

def trim_heap() -> bool:
    """Return the C heap's free pages to the system (glibc ``malloc_trim(0)``, without the GIL):
    the scratch memory large passes freed, which the Python objects built next never reuse.
    True when memory was released; False when none was or the C library has no such call."""

def sha256_hex(data: bytes) -> str:
    """Lowercase hex SHA-256 of ``data``."""

def canonical_json(obj: object, ensure_ascii: bool = True) -> str:
    """Exactly ``json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=...)``
    for trees of dict (str keys), list, tuple, str, int, bool and None."""

def canonical_sha256(obj: object, ensure_ascii: bool = True) -> str:
    """Lowercase hex SHA-256 of ``canonical_json(obj, ensure_ascii).encode("utf-8")``."""

def canonical_fragments_json(fragments: list[object] | tuple[object, ...], /) -> str:
    """Exactly ``canonical_json([fragment_object(f) for f in fragments])`` (ASCII), where
    ``fragment_object`` is ``weight/_canonical.py``'s: each fragment's ``__dict__`` (and its
    rank's) is read directly and its values encoded as ``canonical_json`` would, without
    building the intermediate dicts. ``KeyError`` for a missing state entry."""

def canonical_parts_json(
    pairs: list[tuple[list[object] | tuple[object, ...], str]],
    prefix: str = "",
    suffix: str = "",
    sha256: bool = False,
    tensors: list[object] | tuple[object, ...] | None = None,
    after: str = "",
    types: tuple[type, type, type, type, type, type] | None = None,
    wire: tuple[str, str, str] | None = None,
) -> str | tuple[str, str] | None:
    """``prefix + "[" + ",".join('{"fragments":' + canonical_fragments_json(f) + "," + tail[1:])
    + "]" + suffix`` over ``(fragments, tail)`` pairs, in one buffer (with ``sha256=True``: the
    lowercase hex SHA-256 of that text instead). It is the canonical JSON of a placement's parts
    when each ``tail`` is the canonical JSON of the rest of the part object (ASCII, a non-empty
    object whose keys sort after "fragments"). ``prefix``/``suffix`` must be ASCII.
    ``ValueError`` for a tail that is not such an object or non-ASCII text, ``TypeError`` for
    malformed pairs or ``types``. Fragments and their ranks are read in list order on every
    path, as the reference reads them; each rank object is encoded once per call.

    ``types`` is ``(TensorDescriptor, SplitAxis, ReplicatedAxis, OwnershipAxis,
    PlacementFragment, ParallelRank)``. With it, when every fragment and rank is exactly of those
    classes with state dicts holding every field under the interned name (only exact str keys),
    the parts are written in batches whose state dicts are read ahead of their texts (their cache
    misses overlap) and no read runs Python code; otherwise, without ``tensors``, the in-order
    encoding runs (reading values the reference's way).

    With ``tensors`` (a list or tuple; ``types`` required) the text goes on with
    ``canonical_tensors_json(tensors, SplitAxis, ReplicatedAxis) + after``, encoded straight into
    the same buffer or digest (no text object of it). That form returns ``None`` (nothing raised)
    whenever a fragment, rank, tensor or axis is not exactly of its class as above, or any read or
    encoding fails: the caller then encodes the exact way. ``TypeError`` for ``tensors`` not a list
    or tuple, ``ValueError`` for a non-ASCII ``after``.

    With ``wire=(head, tail, after)`` (``tensors`` and ``sha256=True`` required, else
    ``ValueError``; ``TypeError`` unless a tuple of three str) the parts and tensors are encoded
    once for two digests: ``(content hex, hex of prefix + parts + head + content hex + tail +
    tensors + after)`` (the placement id, then the wire digest that embeds it); ``None`` as
    above when the fused form declines."""

def canonical_tensors_json(
    tensors: list[object] | tuple[object, ...], split_type: type, replicated_type: type, /
) -> Optional[str]:
    """Exactly ``canonical_json([tensor_object(t) for t in tensors])`` (ASCII), ``tensor_object``
    and ``axis_identity`` being ``weight/_canonical.py``'s and ``weight/types.py``'s (an axis
    is split when an instance of ``split_type``, else replicated when of ``replicated_type``,
    else ownership), without the intermediate dicts. As there, every attribute of every tensor
    is read before anything is encoded (a failed read wins over an encoding error)."""

def placement_fragment_id(
    tensor_id: str,
    global_offset: tuple[int, ...],
    local_shape: tuple[int, ...],
    nbytes: int,
    dp: int,
    tp: int,
    pp: int,
    ep: int,
    aliases: tuple[str, ...],
    pipeline_stage_id: int | None,
) -> str:
    """``"sha256:" + hex`` of the canonical fragment content (spec §6.1)."""

# --- coverage.c: N-D box geometry and exact-cover kernels --------------------

def boxes_overlap(offsets: Sequence[Sequence[int]], shapes: Sequence[Sequence[int]]) -> bool:
    """True when two boxes intersect on every dimension (spec §11.3).

    Boxes are half-open ``[offset, offset + shape)``; touching is not overlap, a box that is
    empty on some dimension overlaps nothing, fewer than two boxes give ``False`` and two 0-D
    boxes overlap. Sequences may be lists or tuples; items are ints (or ``__index__``).

    Exact in every path: 1-D sort and scan; regular grids (per dimension, distinct extents
    pairwise disjoint) by duplicate-cell detection; other 2-D inputs by a segment-tree sweep;
    other 3-D+ inputs by the reference's sweep, which keeps its fail-closed budget and raises
    ``ValueError("high-dimensional overlap budget exceeded before validation")`` before the
    1,000,001st pairwise comparison. The GIL is released while deciding.

    Raises ``ValueError``: "offsets and shapes must have the same length",
    "zip() arguments have different lengths" (mismatched dimension counts),
    "box coordinates must fit in a signed 64-bit integer", "box shape must not be negative",
    "box end must fit in a signed 64-bit integer" (offset + shape beyond int64).
    ``TypeError`` for non-sequences and non-integer items."""

def boxes_exactly_cover(
    container_offset: Sequence[int],
    container_shape: Sequence[int],
    offsets: Sequence[Sequence[int]],
    shapes: Sequence[Sequence[int]],
) -> bool:
    """Non-empty, every box inside the container, volumes (exact 128-bit arithmetic) sum to
    its volume, and no two boxes overlap (``boxes_overlap``, same budget).

    ``False`` (not an error) when a volume or an end overflows. Same input errors as
    ``boxes_overlap``; the container's dimension count must match the boxes'."""

# --- table.c: the packed fragment table (issue 2) --------------------------------

@final
class FragmentTable:
    """A manifest's fragments packed once into flat C arrays (tensor index, rank, global
    offset/end, nbytes); immutable, built only by :func:`pack_fragments`. Cache it on the
    manifest (a non-field attribute) and reuse it for every bulk check. Every check releases
    the GIL. Box semantics and the 3-D+ overlap budget are those of :func:`boxes_overlap`.
    """

    def __len__(self) -> int:
        """Number of fragments."""

    def duplicate_logical_fragment(self) -> int:
        """Index of the first fragment (input order) that repeats an earlier fragment's
        (tensor, rank, global_offset, local_shape), or -1 (spec §11.4 #3)."""

    def overlapping_rank_group(self) -> int:
        """First fragment of the first (tensor, rank) group, in order of first appearance,
        whose boxes overlap, or -1 (spec §11.4 #7). Raises ``ValueError`` with the budget
        message, or "zip() arguments have different lengths" for a group mixing dimension
        counts (cannot happen after ``validate_fragment_geometry``)."""

    def uncovered_group(self, axes: Sequence[str], collapse: bool = False) -> int:
        """Group fragments by (tensor, rank coordinates on ``axes`` ⊆ {"dp","tp","pp","ep"});
        return the first fragment of the first group (order of first appearance) whose boxes
        do not exactly cover the tensor box ``[0, global_shape)``, or -1. ``collapse=True``
        first merges identical boxes (spec §11.2 "fully covers": TP replicas count once)."""

    def first_uncovered_group(self, group_of: Sequence[int], collapse: bool = False) -> int:
        """Caller-defined groups: ``group_of[i]`` is fragment i's group id (>= 0) or -1 to leave
        it out. Return the smallest group id whose fragments do not exactly cover their tensor
        box, or -1. A group holding several tensors raises
        ``ValueError("a coverage group must hold fragments of one tensor")``."""

    @classmethod
    def pack_objects(
        cls,
        tensor_shapes: Sequence[Sequence[int]],
        tensor_index: Union[dict[str, int], tuple[tuple[str, ...], tuple[int, ...]]],
        fragments: Sequence[object],
        rows: Optional[Union[list[int], bytes]] = None,
        fragment_type: Optional[type] = None,
        /,
    ) -> tuple[FragmentTable, bool, bool]:
        """``(table, ids_increasing, any_aliases)``: ``pack_fragments`` with the columns read in C
        from placement fragment objects' state (``tensor_id`` (an exact str) mapped through
        ``tensor_index``, ``global_offset``, ``local_shape``, ``rank`` (dp, tp, pp, ep),
        ``nbytes``); ``ids_increasing``: every ``placement_fragment_id`` is an exact str greater
        than the previous one (so all are distinct); ``any_aliases``: some ``aliases`` is not an
        empty tuple. ``KeyError`` for a missing state entry or an unmapped tensor id, ``TypeError``
        for a non-str tensor id; otherwise the errors of ``pack_fragments``. With ``rows`` (a
        permutation of ``range(len(fragments))``, a list of ints or bytes of native int64 as
        ``sorted_groups(..., packed=True)`` makes them, else ``ValueError``) ``fragments[i]`` becomes
        row ``rows[i]``: the result equals packing the fragments in row order (``ids_increasing``
        judged in that order), read from memory in the given order. With ``fragment_type``, an
        exact instance's state is read without the attribute lookup (the same values).
        ``tensor_index`` may be the pair ``(ids, positions)`` of tuples (ids distinct exact strs,
        positions ints in ``range(len(tensor_shapes))``, else ``ValueError``) standing for
        ``dict(zip(ids, positions))``: looked up by identity, the dict made only if needed."""

    def tensor_classes(self, classes: Sequence[int], /) -> tuple[list[int], list[int], list[int]]:
        """``(rep, start, members)``: ``members[start[t]:start[t + 1]]`` are tensor t's fragments
        in input order; ``rep[t]`` is the first tensor u <= t with ``classes[u] == classes[t]``
        and exactly the same set of (rank, offset, shape) as t (compared exactly after a hash
        sort; a tie of hashes only ever yields ``rep[t] == t``), else t. Tensors without
        fragments are their own ``rep``. ``classes`` has one entry (>= 0) per tensor."""

    def tensor_class_checks(self, classes: Sequence[int], /) -> tuple[int, list[tuple[int, list[int]]]]:
        """``(empty, checks)`` from ``tensor_classes(classes)``'s ``(rep, start, members)``:
        ``empty`` the first t with ``start[t] == start[t + 1]`` (-1 when none); ``checks`` the
        pairs ``(t, members[start[t]:start[t + 1]])`` for each t < empty (every t when -1) with
        ``rep[t] == t``, in increasing t. Only those members become int objects."""

    def bad_geometry(self, itemsizes: Sequence[int], /) -> int:
        """Index of the first fragment (input order) whose dimension count differs from its
        tensor's, whose box leaves ``[0, global_shape)`` or is empty, or whose ``nbytes`` is not
        its volume times ``itemsizes[tensor]`` (exact; overflow counts as a mismatch), or -1
        (spec §4.5 / §11.4 geometry). ``itemsizes`` has one entry (>= 1) per tensor."""

    def total_nbytes(self) -> int:
        """Sum of the fragments' ``nbytes``."""

def pack_fragments(
    tensor_shapes: Sequence[Sequence[int]],
    tensor_index: Sequence[int],
    offsets: Sequence[Sequence[int]],
    shapes: Sequence[Sequence[int]],
    ranks: Sequence[Sequence[int]],
    nbytes: Sequence[int],
) -> FragmentTable:
    """Pack a manifest's fragments in one call (also ``FragmentTable.pack``).

    ``tensor_shapes[t]`` is tensor t's global shape; per fragment i: ``tensor_index[i]``
    (an index into ``tensor_shapes``), ``offsets[i]`` / ``shapes[i]`` (same length; it may
    differ from the tensor's), ``ranks[i] = (dp, tp, pp, ep)`` and ``nbytes[i]``.
    Raises ``ValueError`` for columns of different lengths, an out-of-range tensor index,
    offsets or ends beyond int64, negative shapes, nbytes beyond u64 ("... must fit in ...");
    ``TypeError`` for non-sequences and non-integers."""

# --- overlap.c: logical planner kernels (issue 3) ----------------------------

def plan_overlaps(
    tensor_ndim: bytes,
    tensor_itemsize: bytes,
    src_tensor: bytes,
    src_offsets: bytes,
    src_shapes: bytes,
    src_nbytes: bytes,
    src_order: bytes,
    cover_start: bytes,
    cover_members: bytes,
    tgt_tensor: bytes,
    tgt_offsets: bytes,
    tgt_shapes: bytes,
    tgt_nbytes: bytes,
    tgt_cover: bytes,
    nprocess: int,
    max_regions: int,
    max_segments_per_region: int,
    max_total_segments: int,
    /,
) -> list[tuple[int, int, tuple[int, ...], tuple[int, ...], int, int, int,
                tuple[int, ...], tuple[int, ...], tuple[int, ...], int]] | tuple[int, int, int, int]:
    """Overlaps of targets ``0..nprocess`` with their source covers (spec 11.1 steps 5-9, 11.7).

    Arrays are bytes of native int64 (``*_nbytes``: uint64; 0 marks an unusable size). Fragment
    coordinates are flat, ``tensor_ndim[tensor]`` values per fragment. ``src_order`` ranks the
    source fragment ids; covers are CSR ranges of source indices (``tgt_cover`` -1: no cover).
    Each cover is indexed once: a dense cell map when its distinct intervals form a grid
    (binary search per dimension, output-sensitive), else an interval index on the dimension
    with the most distinct intervals. Per target: overlaps counted against ``max_regions``
    before anything is stored, sorted by (offset, shape, source order), exact cover checked,
    region geometry derived, segment budgets applied, then ordered by (target base, source
    order, source base). Returns region tuples ``(source index, target index, overlap_offset,
    overlap_shape, source_base, target_base, inner_bytes, outer_loop_counts, source_strides,
    target_strides, segment_count)`` or an error tuple ``(code, target index, a, b)``: 2 region
    budget, 3 not covered, 4 itemsize, 5 segments per region, 6 total segments, 7 pairwise
    budget, 8 byte overflow. GIL released while the kernel runs."""

def plan_regions(
    cls: type,
    sources: list[Any],
    targets: list[Any] | tuple[Any, ...],
    target_tensor_ids: list[Any] | None,
    /,
    *plan_overlaps_arguments: Any,
) -> tuple[tuple[Any, ...], Sequence[int], Sequence[int]] | tuple[int, int, int, int]:
    """``plan_overlaps(*plan_overlaps_arguments)`` and, on success, its regions built directly as
    instances of ``cls`` (a heap type with instance ``__dict__``; not called), as
    ``build_regions(cls, records, sources, targets)`` would from the records (``tensor_id`` from
    ``target_tensor_ids[t]`` when that list, parallel to ``targets``, is given): returns
    ``(regions, used source indices, used target indices)`` (sorted distinct indices into the
    lists: a list, or ``range(n)`` when all n are used), or ``plan_overlaps``' error tuple ``(code, target_index, a, b)``. ``sources`` must hold
    one object per packed source fragment and ``targets`` at least ``nprocess``, else
    ``ValueError``."""

def exact_cover_batch(
    container_ndim: bytes,
    container_offsets: bytes,
    container_shapes: bytes,
    box_start: bytes,
    box_offsets: bytes,
    box_shapes: bytes,
    /,
) -> int:
    """Index of the first container not exactly covered by its CSR range of boxes (non-empty,
    inside, volume sum, pairwise disjoint), or -1. Disjointness: duplicate detection when every
    dimension's distinct intervals are disjoint, else a sweep; 3-D and up keeps the reference's
    1,000,000-comparison budget ("high-dimensional overlap budget exceeded before validation")."""

# --- collector.c: the counted, process-wide pause of the cyclic collector -----

@final
class CollectorPause:
    """The context manager of ``_collector.collector_paused()`` (one instance; not
    instantiable): the first user to enter records whether the collector was enabled and
    disables it, the last to leave restores it."""

    def __enter__(self) -> None: ...
    def __exit__(self, exc_type: Any, exc: Any, traceback: Any, /) -> None:
        """RuntimeError when no user is inside."""

collector_pause: CollectorPause

# --- view_scope.c: bound_contracts._ViewScope -------------------------------

class ViewScope:
    """``with ViewScope(built_now=False):`` one revalidation: saves the registered thread-local
    view state's four fields and installs a fresh scope; leaving restores them (``held`` last)."""

    def __init__(self, built_now: Any = False) -> None: ...
    def __enter__(self) -> None: ...
    def __exit__(self, *exc: Any) -> None:
        """RuntimeError when the scope was not entered."""

def view_scope_state(local: Any, /) -> None:
    """Register the thread-local ``_ViewState`` whose fields ``ViewScope`` saves and sets."""

# --- gctrack.c: keeping acyclic library objects out of the cyclic collector --

def classes_within(
    items: Any, allowed: tuple[type, ...], name: Optional[str], name_allowed: tuple[type, ...], /
) -> bool:
    """True when ``items`` is an exact tuple of objects whose class is exactly one of
    ``allowed`` (at most 8) and, with ``name``, whose attribute ``name`` has a class exactly one of
    ``name_allowed`` (read only from items of an allowed class); False otherwise (csrc/exact.c)."""

def parts_members_within(
    parts: tuple[Any, ...],
    tensor_allowed: tuple[type, ...],
    fragment_allowed: tuple[type, ...],
    name: Optional[str],
    name_allowed: tuple[type, ...],
    /,
) -> bool:
    """Per part of ``parts`` (an exact tuple; TypeError otherwise), in order:
    ``classes_within(part.tensors, tensor_allowed, None, ())`` then
    ``classes_within(part.fragments, fragment_allowed, name, name_allowed)``; False at the first
    False or a part lacking either attribute, else True (csrc/exact.c)."""

def part_index_exact(parts: Any, index: Any, part_class: type, /) -> bool:
    """True when ``index`` is exactly the dict ``parts`` keyed by participant id would build:
    ``parts`` an exact tuple of distinct objects of class exactly ``part_class`` (plain instance
    dicts, exact str ids), ``index`` an exact dict of exact str keys, one entry per part, each id
    naming its own part. False otherwise; no Python code runs (csrc/exact.c)."""

def part_ranks_exact(parts: Any, part_class: type, fragment_class: type, rank_class: type, /) -> bool:
    """True when every fragment of every part has its part's rank: ``parts`` an exact tuple of
    objects of class exactly ``part_class`` (plain instance dicts), each part's rank exactly
    ``rank_class``, its fragments an exact tuple of ``fragment_class`` instances (C-owned layout)
    whose rank is the part's rank object or an exact ``rank_class`` with the same four exact-int
    fields. False otherwise; no Python code runs (csrc/exact.c)."""

def plain_executor_keys(executors: Any, executor_class: type, rank_class: type, /) -> bool:
    """True when ``executors`` is an exact tuple of ``executor_class`` objects (plain instance
    dicts) with exact str ``placement_id`` / ``participant_id``, an exact tuple of exact str
    ``placement_fragment_ids`` and an exact ``rank_class`` rank of exact ints, their keys
    distinct; else False (validation._plain_executor_keys). Runs no Python code."""

def tensor_maps_match(tensors: Any, groups: Any, descriptor_class: type, /) -> Optional[bool]:
    """True when ``{t.tensor_id: t for t in tensors}`` (ids distinct) equals the dict built from
    every tensor of every group, shown by identity (every group item one of ``tensors``, each of
    them listed); None when not decided here (binding's step 4 then compares the dicts)."""

def inert_graph(roots: tuple[Any, ...], classes: tuple[tuple[type, int], ...], /) -> bool:
    """True when everything reachable from ``roots`` is None, a bool, an exact int, float, str or
    bytes, an exact tuple, list, dict or frozenset of such values, or an instance of exactly one
    class of ``classes`` (pairs: a C layout's field count, whose slots are walked; -1:
    dict-backed, an exact instance dict keyed by exact strs; -2: accepted as is); False
    otherwise, also past the walk's work budget (a forged fan-out). Each object is walked once
    (a cycle ends there). Runs no Python code (csrc/exact.c)."""

class CodeSet:
    """A fixed set of code objects, held and looked up by address (csrc/exact.c)."""

    def __init__(self, codes: tuple[Any, ...], /) -> None: ...
    def __contains__(self, code: object, /) -> bool: ...
    def __len__(self) -> int: ...

class CodeWatch:
    """A profile function (``sys.setprofile``) that trips on the first Python frame whose code is
    not in its ``CodeSet``; other events are ignored (csrc/exact.c)."""

    def __init__(self, codes: CodeSet, /) -> None: ...
    def __call__(self, frame: Any, event: str, arg: Any, /) -> None: ...
    @property
    def tripped(self) -> bool: ...
    @property
    def tripper(self) -> Any: ...

def untrack_inert(obj: object, cls: type, /) -> bool:
    """Untrack ``obj`` and its instance dict from the cyclic garbage collector when
    ``type(obj) is cls`` (a heap class) and every value in ``obj.__dict__`` is inert: an object
    of a type without collector support, a tuple of inert items (tracked ones are untracked on
    the way, at most 4 tuple levels deep) or an untracked object other than a dict. True when
    untracked; False otherwise (nothing changed). TypeError for a wrong argument count or a
    ``cls`` that is not a class. See csrc/common.h for the rule and its forging caveat."""

def untrack_bound_regions(regions: object, bound_cls: type, /) -> None:
    """For an exact list or tuple of at least 1024 regions: untrack each region's source and
    target that is exactly ``bound_cls`` with inert fields but for its attestation, whose
    closure holds no bound fragment; then each region whose fields are all inert (see
    csrc/common.h ``mr_untrack_bound_regions``). ``TypeError`` for a ``bound_cls`` that is not
    a heap class."""

def inert_tuple(items: list[Any], /) -> tuple[Any, ...]:
    """``tuple(items)`` for an exact list, untracked by the cyclic garbage collector when every
    item is inert (an object of a type without collector support, a tuple of inert items, or an
    untracked object other than a dict: csrc/common.h ``mr_gc_inert``), judged in the copying
    pass. ``TypeError`` for anything but an exact list. Runs no Python code."""

def untrack_table(table: object, /) -> bool:
    """Untrack ``table`` when it is exactly a ``FragmentTable`` (plain C arrays, no reference to
    a Python object but its type: never on a reference cycle); True then, False for anything
    else (left as it was)."""

# --- planobj.c: trusted construction of planner results (issue 5) ------------

def build_regions(
    cls: type,
    records: list[tuple[int, int, tuple[int, ...], tuple[int, ...], int, int, int,
                        tuple[int, ...], tuple[int, ...], tuple[int, ...], int]],
    sources: Sequence[object],
    targets: Sequence[object],
    /,
) -> tuple[object, ...]:
    """Instances of ``cls`` (a heap type with instance ``__dict__``) from ``plan_overlaps``
    records, without calling ``cls``: each gets a fresh field dict ``tensor_id`` (of
    ``targets[ti]``), ``source=sources[si]``, ``target=targets[ti]`` and the record's geometry in
    field order (the segment count is dropped). The three sequences must be lists at run time.
    ``ValueError`` for a record that is not an 11-tuple or an index outside its list;
    ``TypeError`` for a non-heap ``cls`` or non-lists."""

def pack_targets(
    fragments: Sequence[object],
    tensor_index: dict[str, int],
    tensor_ndim: bytes,
    routed: bytes,
    replicas: int,
    tensor_ids: list[str] | None = None,
    dps: list[int] | None = None,
    geometry: tuple[bytes, bytes, bytes, bytes] | None = None,
    /,
) -> tuple[bytes, bytes, bytes, bytes, bytes, list[int]] | None:
    """The planner's target packing in one pass over ``fragments`` (a list or tuple at run time):
    ``(tensor, cover, offsets, shapes, nbytes, cover_keys)``. Per fragment its kernel tensor
    index (``tensor_index[fragment.tensor_id]``), cover id, coordinates (``tensor_ndim[t]`` each)
    and nbytes (uint64, 0 outside ``(0, 2**64)``), as native int64 bytes. A tensor with
    ``routed[t] != 0`` has one cover (its owner), else ``rank.dp % replicas`` picks the replica
    slot; cover ids number the keys ``t * (replicas + 1) + slot`` (``slot == replicas``: routed)
    in order of first appearance, ``cover_keys[id]``. ``None`` when a fragment does not fit this
    path (unknown tensor, rank count mismatch, non-int or out-of-int64 value): the caller packs
    exactly instead and reports errors in rule order. ``tensor_ids`` and ``dps`` (lists parallel
    to ``fragments``), when given, are their ``tensor_id`` and ``rank.dp`` values already read by
    the caller (not read again). ``geometry`` (with both lists) is the 5th item of
    ``fragment_columns(fragments, ...)`` for these fragments in this order (or a longer list they
    start): offsets, shapes and nbytes come from it and the fragments are not read at all."""

def select_sources(
    fragments: Sequence[object],
    tensor_index: dict[str, int],
    tensor_ndim: bytes,
    kinds: list[tuple[str, ...]],
    dp_owners: list[tuple[tuple[str, int], ...] | None],
    slots: list[dict[str, tuple[tuple[str, int], ...]]],
    replica_dps: bytes,
    cover_keys: bytes,
    fragment_type: type | None = None,
    rank_type: type | None = None,
    /,
) -> tuple[list[object], bytes, bytes, bytes, bytes, bytes, bytes, list[object]] | None:
    """Spec §11.1 step 4 for placement sources plus the packing of the chosen fragments, in one
    pass over ``fragments`` (a list or tuple). ``tensor_index`` maps the needed tensors' ids to
    ``range(len(kinds))`` (fragments of other tensors are not needed); per tensor t:
    ``tensor_ndim[t]`` (native int64 bytes), ``kinds[t]`` (owner kinds among dp/tp/pp/ep) and
    ``dp_owners[t]`` (the DP owner ``((kind, value), ...)`` of a DP-owned tensor, else ``None``).
    ``slots`` holds the ``R`` dicts tensor id -> chosen owner of the complete replicas whose DP
    ranks ``replica_dps`` (int64 bytes) lists increasing; ``cover_keys`` (int64 bytes) is the key
    ``t*(R+1)+slot`` of each cover id (slot ``R``: the DP owner's; else the index of the
    fragment's ``rank.dp`` in ``replica_dps``). A fragment is eligible when its owner equals its
    slot's. Per (cover, geometry in first-occurrence order) the eligible fragment with the least
    ``(dp, pp, ep, tp, placement_fragment_id)`` is chosen (the first on a tie). Returns
    ``(objects, tensor, offsets, shapes, nbytes, cover_start, cover_members, ids)`` ordered by
    (cover, geometry) (nbytes as uint64, 0 outside ``(0, 2**64)``), or ``None`` when a value does
    not fit this path (non-int or out-of-int64 value, rank count mismatch, unusual owner or
    kind, a non-str id on a tie). ``ValueError`` for malformed tables, ``TypeError`` for wrong
    container types. With both classes, when every fragment is exactly ``fragment_type`` (and a
    needed one's rank exactly ``rank_type``) and every value read is usual, the fragments are
    read beforehand in address order (same values, same result); otherwise as without them."""

def project_executors(
    cls: type,
    placement_id: str,
    parts: Sequence[object],
    used: set[str] | list[str],
    participants: set[str] | None,
    fragment_type: type | None = None,
    /,
) -> Optional[list[tuple[tuple[int, int, int, int], object]]]:
    """Executor projections of one side (spec §11.1 step 7) built without calling ``cls`` (a
    heap type with instance ``__dict__``): per part (in order) whose ``participant_id`` is in
    ``participants`` (``None``: all) and whose fragments include an id in ``used``, the pair
    ``((rank.dp, rank.pp, rank.ep, rank.tp), executor)``; the executor's field dict holds
    ``placement_id``, ``participant_id``, ``rank`` and the part's ``placement_fragment_ids``
    sorted. The caller checks rank uniqueness and orders the pairs. With ``fragment_type``, a
    part whose fragments are all exactly that class with exact str ids has them read in address
    order (same ids; the sort is skipped when they already are in order). ``used`` may be an
    exact list standing for the set of its values: ids are looked up by object first (no id
    object is read) and the set is built on the first miss (``TypeError`` for any other
    container). ``None`` when parts or a part's fragments are not an exact tuple or list, an id
    or participant id is not an exact str, or used / participants are not exact sets of exact
    strs (AUDIT5 F4: their dunders would run inside the pass; the Python form decides)."""

def all_instances(items: Sequence[object], cls: type, /) -> Optional[bool]:
    """``all(map(isinstance, items, itertools.repeat(cls)))`` for a list or tuple ``items``
    (an item of exactly type ``cls`` is one without a call; any other item is asked through
    ``isinstance``, in order, stopping at the first that is not), reading the items' types a few
    items ahead. ``None`` when ``items`` is neither a list nor a tuple."""

def same_items(first: object, second: object, /) -> Optional[bool]:
    """``all(map(operator.is_, first, second))`` for two lists or tuples (exact types, in any
    mix) of the same length; for two exact dicts, ``len(first) == len(second)`` and the same test
    over their keys in order. Pointers only: no item is read, hashed or compared and no Python
    code runs. ``None`` for any other arguments (another type, a subclass, sequences of different
    lengths)."""

def catalog_map(catalog: object, /) -> Optional[dict[Any, Any]]:
    """``{descriptor.tensor_id: descriptor for descriptor in catalog}`` for a tuple ``catalog``
    (each id read once, then stored, in order, as the comprehension does). ``None`` when
    ``catalog`` is not a tuple."""

def catalog_matches(tensors: object, catalog: object, /) -> Optional[bool]:
    """For an exact dict ``tensors`` and a tuple ``catalog`` of the same length:
    ``all(map(is_, tensors.values(), catalog)) and all(map(is_, tensors,
    map(attrgetter('tensor_id'), catalog))) and all(map(is_, map(type, tensors), repeat(str)))``,
    in that order with the same short-circuits. ``None`` for other argument types or lengths."""

def tensor_shape_groups(tensors: object, tensor_type: type, /) -> Optional[tuple[list[int], list[int]]]:
    """For ``tensors`` (a tuple, every item exactly ``tensor_type``, its ``global_shape`` an exact
    tuple of at most 32 exact ints fitting 64 bits, its ``parallel_axes`` an exact tuple of at most
    32): ``(of, firsts)`` with ``of[i]`` the group of ``tensors[i]``, one per distinct (shape
    values, axis objects in order), numbered in order of first appearance, and ``firsts[g]`` the
    position of group ``g``'s first tensor. ``None`` (nothing raised) otherwise. Runs no Python
    code."""

def distinct_objects(items: list[Any], /) -> list[Any]:
    """The items without repeats of the same object, in order of first appearance (a new
    list). Identity only: no item is read (no hash, no ``__eq__``), so
    ``list(dict.fromkeys(distinct_objects(items)))`` keeps the keys and order of
    ``list(dict.fromkeys(items))``. ``TypeError`` when ``items`` is not a list."""

def owner_minimums(
    fragments: Sequence[object],
    kinds: tuple[str, ...],
    fragment_type: type | None = None,
    rank_type: type | None = None,
    grouped: bool = False,
    /,
) -> Optional[dict[tuple[Any, Any], tuple[Any, ...]] | tuple[dict[Any, dict[Any, tuple[tuple[str, Any], ...]]], int]]:
    """``{(fragment.tensor_id, fragment.rank.dp): least tuple(getattr(fragment.rank, kind) for
    kind in kinds)}`` over ``fragments`` (a list or tuple), tuples compared with ``<`` (spec
    §11.2: the chosen owner of a complete replica). With both classes, exact instances with
    exact str tensor ids and exact ints within int64 (at most 8 kinds) are read in address order
    and combined in list order (an equal dict, keys in the same order); anything else as
    without them. With ``grouped`` (and the classes, on such inputs) the same minimums come back
    grouped: ``({dp: {tensor_id: tuple(zip(kinds, least))}}, number of keys)`` in
    first-appearance order; on any other input the plain dict. ``None`` when a tensor id is not
    an exact str or a rank value not an exact int (AUDIT5 F4: the caller's Python form decides)."""

def fragment_columns(
    fragments: Sequence[object], fragment_type: type | None = None, rank_type: type | None = None, /
) -> tuple[Any, ...]:
    """``(ids, tensor_ids, dps, order)`` of ``fragments`` (a list or tuple): their
    ``placement_fragment_id``, ``tensor_id`` and ``rank.dp`` values in order; ``order`` is 1 when
    every id is an exact ``str`` and they do not decrease, 0 when they are exact ``str`` and
    some decreases, -1 when some id is not an exact ``str`` (then ``ids == sorted(ids)``
    decides). With both classes, a 5th item: the geometry ``(ndim, offsets, shapes, nbytes)``
    (native int64 bytes in list order: ``len(global_offset)``, the offsets, the ``local_shape``
    values, nbytes as uint64 with 0 outside ``(0, 2**64)``), ``None`` when some value does not
    fit (non-tuple, lengths differ, non-int, coordinate outside int64, non-int nbytes). When
    every fragment is exactly ``fragment_type`` and its rank exactly ``rank_type``, the objects
    are read in address order (same values; on any failure the in-order loop runs, so the first
    error in list order is raised); otherwise in order, with the geometry ``None``."""

def owner_signatures(
    tensors: dict[str, Any], ownership_type: type, shared_only: bool = False, /
) -> dict[str, tuple[tuple[str, ...], bool]] | tuple[tuple[tuple[str, ...], bool], dict[str, Any]] | None:
    """``{tensor_id: (kinds, "dp" in kinds)}`` in the dict's order, where ``kinds`` are the
    ``kind`` values of the descriptor's ``parallel_axes`` that are instances of
    ``ownership_type``; ``None`` when some ``parallel_axes`` is not a tuple or ``tensors`` is a
    dict subclass. Consecutive tensors with equal kinds (exact str) share one signature tuple.
    With ``shared_only``, when every tensor has one signature and every key is an exact str:
    ``(signature, keys)`` instead of the map, ``keys`` a private copy of ``tensors`` (the map is
    ``dict.fromkeys(keys, signature)``)."""

def tensor_columns(
    tensor_ids: list[str],
    source_tensors: dict[str, Any],
    target_tensors: dict[str, Any],
    signatures: dict[str, Any],
    /,
) -> tuple[list[int], list[Any], list[bool], int]:
    """``(ndims, itemsizes, routed, stop)`` for ``tensor_ids`` (in order) before the first that
    cannot be planned: ``len(target.global_shape)``, ``target.itemsize`` and
    ``bool(signatures[id][1])``; ``stop`` is the index of the first id whose source descriptor
    is missing or differs (``!=``) from the target's in ``layout_fingerprint``, ``global_shape``,
    ``dtype``, ``itemsize``, ``layer_id`` or ``expert_id``, or of the first it does not decide
    without Python code (an id or value not of its exact kind; AUDIT5 F4), else
    ``len(tensor_ids)``. A missing
    ``target_tensors[id]`` or ``signatures[id]`` raises ``KeyError``. When the three maps are
    exact dicts of exactly the ids' count whose entry i has the key ``tensor_ids[i]`` (or an
    exact str equal to it) and every id is an exact str, their values are read by position at
    the start of the call (what the lookups find); otherwise each id is looked up."""

# --- physical.c: bound physical-range kernels (issue 4) ----------------------

def physical_sweep(
    streams: list[int],
    groups: list[int],
    n_spaces: int,
    n_ops: int,
    alias_class: list[int] | None,
    tensor_key: list[int] | None,
    budget: int,
) -> tuple[int, int, int] | None:
    """Check target segment streams for physical-range conflicts (spec §12.6).

    ``groups`` is flat: per target-fragment group ``space, address, nbytes, disjoint``
    (``disjoint`` = the group's regions have pairwise disjoint logical boxes). ``streams`` is
    flat: per stream ``group, op, charged, base, inner, rank`` then ``rank`` loop counts and
    ``rank`` strides; a charged stream's segments cost one budget unit each. Per address space
    (own budget), a structural proof (streams inside their fragment extents, extents disjoint,
    boxes disjoint within each group) settles the no-overlap case by comparing the segment count
    with the budget; otherwise the streams are expanded lazily, k-way merged in
    ``(begin, end, op)`` order and swept. Overlap is tolerated only for equal ranges whose ops
    share an ``alias_class`` (>= 0) and differ in ``tensor_key``. Returns None, or
    ``(status, op, previous_op)``: 1 conflict (``op`` is the current operation), 2 budget
    exceeded, 3 address arithmetic overflow."""

def physical_whole_targets(
    operations: tuple[Any, ...] | list[Any],
    region_cls: type,
    bound_cls: type,
    budget: object,
) -> bool | None:
    """The fast accept path of the spec §12.6 check: ``True`` when every operation is an exact
    ``region_cls`` with its own exact ``bound_cls`` target, writes that whole, alias-free
    fragment (exact int tuples), 0 < nbytes, address + nbytes < 2**64, the extents are pairwise
    disjoint per address space ``(instance_id, worker_id, device)`` (exact str) and ``budget``
    is a non-negative int; otherwise ``None`` (the grouping and the sweep decide).
    ``TypeError`` for a container other than a tuple or list, or a class that is not a type."""

# --- revalidate.c: TransferPlan revalidation kernels (issue 5) ----------------

def revalidate_scan(
    operations: tuple[object, ...],
    max_segments_per_region: int,
    max_total_lowered_segments: int,
    region_type: type,
    bound_type: type,
    /,
) -> Optional[tuple[list[Any], list[int], list[int], list[tuple[tuple[int, ...], tuple[int, ...]]]]]:
    """Per-operation pass of the ``TransferPlan`` revalidation fast path. ``None`` unless every
    operation is exactly ``region_type`` with both fragments exactly ``bound_type``, equal outer
    loop ranks, both byte extents inside their fragments (``validate_bounds``) and the segment
    counts within both budgets, all on exact ints in the signed 64-bit range. Otherwise
    ``(fragments, source_of, target_of, boxes)``: the distinct fragment objects (first
    appearance, source before target), each operation's source and target position among them
    and its ``(overlap_offset, overlap_shape)``. ``TypeError`` for wrong argument types."""

def revalidate_scan_carried(
    operations: tuple[object, ...],
    carried: tuple[Any, ...],
    max_segments_per_region: int,
    max_total_lowered_segments: int,
    bound_type: type,
    binding_type: type,
    /,
) -> Optional[tuple[list[Any], list[int], list[int], list[tuple[tuple[int, ...], tuple[int, ...]]]]]:
    """``revalidate_scan`` for the plan a bind call has just built, from ``carried`` (the fourth
    item of ``bind_regions(..., carry=True)``, 8 or 9 items: facts about regions and bound
    fragments that call created). Reads again what the adapter can edit: both budgets, every distinct fragment's
    binding (exactly ``binding_type``) and its ``nbytes``, which must cover the largest extent
    end of that fragment's operations. ``operations`` must hold exactly the carried regions.
    What ``revalidate_scan`` returns for them, or None (then run ``revalidate_scan``).
    ``TypeError`` for wrong argument types. The compact form of the facts (``bind_regions``'
    above 257 operations, ``bound_contracts._compact_carried``: both position lists as bytes of
    native int32, boxes None) is accepted as well, and its packed positions and None returned."""

def layout_memos_cold(delta: int, /) -> int:
    """Enter (``delta`` 1) or leave (-1) cold mode, which nests; returns the new level. While it is
    above 0 no per-call-site layout memo answers from what it holds (each memo'd C step checks
    its class in full, as in a fresh process); entering it from 0 empties every memo. For a call
    whose per-call proof (``fields_unshadowed``) failed (AUDIT40, ``bound_contracts._memo_proved``).
    ``ValueError`` for another delta or for leaving at level 0."""
    ...

def layout_memos_unshadowed(specs: tuple[tuple[type, tuple[str, ...]], ...], /) -> bool:
    """True when each ``(cls, names)`` of ``specs`` (the package's layout classes) and each class
    a per-call-site layout memo holds, with the memo's names, still reads those fields from its
    layout slots as the generic attribute lookup would (``fields_unshadowed``'s proof), so a memo
    hit answers what the full check would; else False (also for malformed ``specs``; then run the
    call in cold mode). Runs no Python code (AUDIT40, ``_memo_proof.memo_proved``)."""
    ...

def fields_unshadowed(specs: tuple[tuple[Any, ...], ...]) -> bool:
    """True when, for every ``(cls, names)`` or ``(cls, names, pinned, absent)`` of ``specs``,
    instances of ``cls`` read each field in ``names`` as the generic attribute lookup reads it
    from their state: metaclass exactly ``type``, the generic ``__getattribute__``, and no class
    of the MRO up to the layout base (the whole MRO for a dict-backed class; ``object`` passed
    over) holding a field's name (a layout class: anything; a dict-backed one: a value with
    ``__get__``); ``pinned`` ``(name, value)`` pairs held identically by ``cls``'s own dict,
    ``absent`` names held by no walked class. False otherwise (also for malformed ``specs``).
    The fast revalidation's per-call proof (AUDIT39). Runs no Python code."""
    ...


def revalidate_shapes(
    target_placement: object,
    attested: dict[int, tuple[Any, ...]],
    source_executors: tuple[Any, ...],
    target_executors: tuple[Any, ...],
    classes: tuple[type, ...],
    /,
) -> bool:
    """The fast path's form of ``bound_contracts._require_typed_attestations`` and of the target
    placement's ``placement_shape_failure`` (F4): True when the target placement, the placement
    and evidence of every view in ``attested`` (``revalidate_fragments``' dict; each entry's third
    item exactly an ``_AttestedView``) and of every executor's attestation (executors exactly
    ``ExecutorTransferPlan``, attestations exactly ``RuntimeBindingAttestation``) hold the exact
    types their constructors store: each placement's identity strs, ``weight_generation``, digest
    cache and parts (participant id, rank, tensor descriptors and their axes, placement fragments:
    every field), each evidence's fields and runtime fragments (every field); each distinct object
    once. False when not sure (the rules decide). ``classes``: (WeightPlacementManifest,
    WeightPlacementPart, TensorDescriptor, PlacementFragment, RuntimeBindingEvidence,
    RuntimeBindingFragment, ParallelRank, SplitAxis, ReplicatedAxis, OwnershipAxis,
    _AttestedView, ExecutorTransferPlan, RuntimeBindingAttestation). Runs no Python code of the
    values."""

def revalidate_fragments(
    fragments: list[Any],
    placement_type: type,
    binding_type: type,
    attestation_type: type,
    manifest_type: type,
    rank_type: type,
    identity: tuple[Any, ...],
    view_of: Callable[[Any], Any],
    view_type: Optional[type] = None,
    evidence_type: Optional[type] = None,
    want_keys: bool = True,
    views: Optional[tuple[Any, type, Callable[..., Any]]] = None,
    attested_by_call: bool = False,
    /,
) -> Optional[tuple[Optional[list[tuple[Any, ...]]], list[tuple[Any, Any]], list[Any], dict[int, tuple[Any, Any, Any]]]]:
    """Per distinct bound fragment of the ``TransferPlan`` revalidation fast path (spec §9.6
    step 11). ``None`` unless every fragment's placement and binding are exactly
    ``placement_type`` / ``binding_type``, both owners are ``None``, its attestation is exactly
    ``attestation_type`` with a placement of exactly ``manifest_type`` and the plan
    ``identity``, the attestation's ``_placement_dict`` / ``_binding_dict`` entries for the
    placement fragment id equal the fragment's placement and binding, and the rank is exactly
    ``rank_type``. Otherwise ``(keys, route_halves, runtime_ids, attested)``: per fragment
    ``view.key_base + (worker_id, (dp, tp, pp, ep))``, ``(pp, pipeline_stage_id)`` and the
    runtime fragment id, and ``{id(attestation): (placement_dict, binding_dict, view)}``.
    The view is the exact cache entry ``bound_contracts._attested_view`` keeps on an attestation
    of exactly ``attestation_type`` (``_attested_view``: ``(view, evidence, placement,
    placement_dict, deps)``) when the attestation still holds that evidence, placement and
    placement dict and ``deps_unchanged(deps)``; otherwise ``view_of``'s. ``view_type`` and
    ``evidence_type`` are both given or neither. With ``want_keys`` false ``keys`` is None (the
    checks are the same). ``views``, ``(bound_contracts._VIEW_STATE, WeightPlacementPart,
    bound_contracts._attested_view_end)`` with ``view_type`` given, runs the common paths of
    ``view_of`` (then ``bound_contracts._attested_view``) in C: the scope entry, a first view
    without ``_attested_view`` recorded, a view with binding's snapshot objects; ``view_end``
    for its other ends, ``view_of`` whenever anything else is found before anything changed.
    ``attested_by_call`` (requires ``want_keys`` false, else ``TypeError``): the caller has proven
    that each fragment's placement and binding are the very objects its attestation's two dicts
    map its placement fragment id to, and that nothing probes those dicts after this pass; the
    two lookups per fragment and the dicts' plain-key checks are then skipped (every other check
    runs). ``TypeError`` for wrong argument types (also for malformed ``deps`` of such an
    entry); errors of the values' own methods propagate."""

def revalidate_side(
    frags: list[Any],
    keys: list[Any],
    runtime_ids: list[Any],
    side_of: list[int] | bytes,
    runtime: dict[Any, Any],
    rows: list[Any],
    attested: dict[int, Any],
    used: set[int],
    attestation_type: type,
    rank_type: type,
    snapshot_type: type,
    placement_type: Optional[type] = None,
    row_of: Optional[list[Any]] = None,
    /,
) -> Optional[bool]:
    """Executor consistency of one side of the ``TransferPlan`` revalidation fast path (spec
    §12.4) for the common cases: every executor lists all its worker's attested fragments and
    carries the attested snapshot objects themselves or snapshots of exactly ``snapshot_type``
    whose field dicts equal the attested ones; the arguments are the fast path's own tables (see
    ``bound_contracts._fast_side_consistent``, which it mirrors). ``True`` when the side passes
    (``used`` then holds the ``id`` of every executor state owning operations), ``None`` when
    unsure. ``TypeError`` for wrong container types; errors of the values' own methods
    propagate. ``placement_type`` (``PlacementFragment``): the placement fragment id of an exact
    one is read from its instance dict. ``row_of``: this side's list that ``revalidate_views``
    appended (fragment position -> its runtime row); a list of another length is ignored, and
    ``None`` at a position the side uses makes the call unsure."""

def attested_index(
    attestation_type: type,
    evidence_type: type,
    runtime_type: type,
    attestation: Any,
    /,
) -> Optional[tuple[set[str], dict[str, tuple[str, ...]], dict[str, tuple[str, ...]], bool]]:
    """The cheap part of an attested view (``bound_contracts._python_attested_index`` is its
    reference): ``(attested_pfids, ids_by_worker, evidence_ids_by_worker, complete)``: the
    placement fragment ids of the evidence fragments with an entry in the attestation's
    ``_placement_dict``, per worker their runtime ids sorted, per worker the sorted ids of all
    its evidence fragments (the same dict when ``complete``). ``None`` unless the attestation,
    its evidence and the evidence fragments are exactly the given types, the placement dict an
    exact dict, the fragments an exact tuple and every id an exact str. ``TypeError`` when a
    type argument is not a type."""

def attested_view(
    view_type: type,
    attestation: Any,
    attestation_type: type,
    evidence_type: type,
    runtime_type: type,
    manifest_type: type,
    objects: Any = None,
    part_class: Optional[type] = None,
    /,
) -> Any:
    """``bound_contracts._AttestedView(attestation, objects)`` built in C from the attestation's
    current values (never stored on it; snapshot objects only when given: binding's objects of
    the same call), when the attestation, its evidence and placement are exactly the given
    types with an exact-dict ``_placement_dict``, the placement's part index is an exact dict
    and the rows (``attested_rows``, complete; without objects) or the cheap index
    (``attested_index``; with objects) are decided in C; otherwise ``None`` (the Python
    constructor decides). ``TypeError`` when a type argument is not a type; errors of the
    values' own attributes propagate. With ``objects`` the view's ``attested_pfids`` is a sorted
    tuple of the distinct placement fragment ids (``attested_index`` still returns a set)."""

def operation_views(
    operations: tuple[Any, ...],
    s_logical: dict[Any, list[int]],
    s_runtime: dict[Any, list[int]],
    t_logical: dict[Any, list[int]],
    t_runtime: dict[Any, list[int]],
    region_type: type,
    placement_type: type,
    bound_type: type,
    binding_type: type,
    rank_type: type,
    stored_type: type,
    /,
) -> Optional[dict[tuple[Any, Any, Any, Any], list[int]]]:
    """The per-operation loop of ``contracts.build_operation_views``: appends each operation's
    index to its source and target buckets (placement fragments by ``placement_fragment_id`` in the
    ``*_logical`` table, bound fragments by ``binding.fragment_id`` in ``*_runtime``, stored sources
    in none) and returns ``{(source pp, source stage, target pp, target stage): [indices]}``. None
    ("not decided here"; the buckets may hold some indices) unless every class, field and value
    read is exact (ids str, ``pp`` int, stages int or None, buckets lists)."""

def deps_unchanged(deps: tuple[Any, ...], /) -> bool:
    """``deps`` is ``(object0, snapshot0, object1, snapshot1, ...)``, each snapshot the flat
    ``(key0, value0, key1, value1, ...)`` tuple of the object's instance dict (of the object
    itself when it is an exact dict) as recorded. True when every object still holds exactly
    those keys and values, by pointer identity, in order, with the same size; False as soon as
    one differs, has no instance dict or one that is not an exact dict. ``TypeError`` when
    ``deps`` is not a tuple of even length or a snapshot is not a tuple."""

def revalidate_spaces(
    frags: list[Any],
    source_of: list[int] | bytes,
    target_of: list[int] | bytes,
    boxes: list[tuple[tuple[int, ...], tuple[int, ...]]] | tuple[Any, ...],
    check_physical: bool,
    /,
) -> Optional[bool]:
    """Spec §12.5 (in-place protection) and the common case of §12.6 for the ``TransferPlan``
    revalidation fast path; the arguments are the fast path's own tables. ``False`` when a
    source and a target allocation ``(storage_address, storage_nbytes)`` coincide in one address
    space ``(instance_id, worker_id, device)`` or anything is unexpected (malformed tables, a
    fragment without its binding or instance id: the fast path declines); otherwise ``True`` when ``check_physical`` is
    false or every operation writes a whole, alias-free target fragment of its own with pairwise
    disjoint byte extents per address space, else ``None`` (the physical sweep must decide).
    ``TypeError`` for wrong container types. Positions may be packed (bytes of one native int32
    per operation), and ``boxes`` may be the plan's operations tuple (each box read from its
    region's own ``overlap_offset`` / ``overlap_shape``)."""

def revalidate_coverage(
    placement: Any,
    frags: list[Any],
    target_of: list[int] | bytes,
    boxes: list[tuple[tuple[int, ...], tuple[int, ...]]] | tuple[Any, ...],
    rows: list[Any],
    attested: dict[int, Any],
    used: set[int],
    rank_type: Optional[type] = None,
    /,
) -> Optional[bool]:
    """Bound target coverage (spec §12.7) for the ``TransferPlan`` revalidation fast path in
    the common case where every fragment of the executor participants' parts is written by
    exactly one operation box equal to the fragment's own box; the arguments are the fast
    path's own tables (see ``bound_contracts._fast_target_coverage``, which it mirrors).
    ``True`` when the rule holds, ``None`` when unsure. ``rank_type`` (``ParallelRank``) lets
    exact ranks with exact int fields be compared field by field instead of by their ``!=``.
    ``TypeError`` for wrong container types; errors of the values' own methods propagate.
    Positions and boxes may take the packed forms ``revalidate_spaces`` accepts."""

def revalidate_views(
    source_executors: tuple[Any, ...],
    target_executors: tuple[Any, ...],
    runtime_ids: list[Any],
    route_halves: list[tuple[Any, Any]],
    source_of: list[int] | bytes,
    target_of: list[int] | bytes,
    rank_type: type,
    executor_type: Optional[type] = None,
    row_of: Optional[list[Any]] = None,
    packed_indices: bool = False,
    /,
) -> Optional[tuple[dict[Any, Any], list[Any], dict[Any, Any], dict[Any, Any], list[Any], dict[Any, Any], dict[Any, Any]]]:
    """Operation views (spec §11.9) of the ``TransferPlan`` revalidation fast path: per side
    ``(runtime, rows, table)`` (rows ``(executor state, provenance key, bucket)``, runtime
    fragment id -> the row of the first executor listing it, view key -> bucket), every
    operation's index appended to its source and target owner's bucket, and ``routes`` (route
    -> operation indices). ``(s_runtime, s_rows, s_table, t_runtime, t_rows, t_table, routes)``,
    or ``None`` for a repeated view key, a rank that is not exactly ``rank_type``, a missing
    field or (when given) an executor that is not exactly ``executor_type``. ``TypeError`` for
    wrong container types. ``row_of`` (a list): when the operations were assigned by address and
    there are at least 4096 fragment positions, two lists are appended to it, per fragment
    position ``runtime.get(runtime_ids[p])`` of the source and of the target side (``None``
    where the side has no operation); else nothing. Positions may be packed (bytes of one
    native int32 per operation). ``packed_indices``: where the operations are assigned by
    address, each bucket's operation indices are one bytes of native int64 instead of a list of
    ints (the tables' values; a row's bucket list then holds that bytes as its one item)."""

def restore_executors(
    table: object,
    attestations: object,
    executor_cls: type,
    snapshot_cls: type,
    executor_fields: tuple[str, ...],
    snapshot_fields: tuple[str, ...],
    /,
) -> Optional[tuple[Any, ...]]:
    """The executors of a flat executor table of a ``TransferPlan`` pickle record (per executor
    its first 8 fields, its attestation index or ``None``, the number ``k`` of its snapshots, then
    ``k`` times the snapshot fields), built as ``bound_pickle._python_restore_executors`` builds
    them; ``None`` when the table (an exact tuple; ``attestations`` an exact list) is not exactly
    that shape. ``TypeError`` for classes that are not heap types or bad field name tuples."""

def restore_fragments(
    table: object,
    attestations: object,
    bound_cls: type,
    placement_fragment_cls: type,
    runtime_fragment_cls: type,
    attestation_cls: type,
    evidence_cls: type,
    /,
) -> Optional[tuple[Any, ...]]:
    """The bound fragments of a flat fragment table of a ``TransferPlan`` pickle record (six
    items per fragment: placement, binding, instance_id, runtime_lease_id, lease_generation,
    attestation index or ``None``), built as ``BoundWeightFragment._restore`` builds them, when
    every fragment passes the constructor's checks in the common case (exact classes, the
    attestation's entries being these very objects, an equal runtime fence); ``None`` when
    anything is not decided here. ``TypeError`` for classes that are not heap types."""

def restore_regions(table: object, fragments: object, region_cls: type, region_fields: tuple[str, ...], /) -> Optional[tuple[Any, ...]]:
    """The ``TransferRegion``s of a flat operation table of a ``TransferPlan`` pickle record (per
    operation its field values in field order, the 2nd and 3rd being indices into the tuple
    ``fragments``), built as ``bound_pickle._python_restore_regions`` builds them; ``None`` when
    the table is not exactly that shape. ``TypeError`` for a class that is not a heap type or
    bad field names."""

# --- binder.c: runtime binding and executor projection kernels (issue 5) -----

# Each returns exactly the value of the Python code it accelerates, or ``None`` ("not decided
# here": the caller runs that Python code, which raises its own message). C accepts only exact
# classes (given), exact ``str``/``int``/``tuple``/``dict`` values; ``TypeError`` for a wrong
# argument count or non-heap-type classes.

def bind_views(
    instance_id: object,
    logical: object,
    runtime: object,
    tensors: object,
    placement_fragment_cls: type,
    runtime_fragment_cls: type,
    tensor_cls: type,
    /,
) -> Optional[list[tuple[Any, Any, Any, Any]]]:
    """The views ``[(instance_id, runtime[i], logical[i], tensor)]`` of ``weight/binding.py``
    ``_binding_views`` when every check there passes on the positional pairing of the part's
    fragments ``logical`` with the binding's ``runtime`` fragments (equal, strictly increasing
    placement fragment ids; equal ``nbytes``, ``local_shape``, ``itemsize`` of the tensor of that
    id in the strictly sorted ``tensors``; canonical int64 strides)."""

def attest(
    attestation_cls: type,
    evidence_cls: type,
    runtime_fragment_cls: type,
    placement: object,
    binding: object,
    part_fragments: object,
    /,
) -> Any:
    """The ``RuntimeBindingAttestation`` of a binding ``validate_runtime_binding`` accepted, as
    ``attestation._fast_validated_state`` builds it (owner-free evidence sharing the binding's
    fragments tuple; placement/binding fragments by id as dicts and read-only proxies), when the
    binding has the normalised, owner-free, valid shape; ``part_fragments`` is a tuple or None."""

def attested_executors(
    executor_cls: type,
    snapshot_cls: type,
    attestation_cls: type,
    evidence_cls: type,
    runtime_fragment_cls: type,
    attestation: object,
    placement_id: object,
    participant_id: object,
    placement_digest: object,
    rank: object,
    placement_fragment_cls: Optional[type] = None,
    /,
) -> Optional[tuple[dict[str, tuple[Any, ...]], tuple[tuple[str, tuple[Any, ...], Any], ...]]]:
    """``(table, rows)``: the attested snapshots per worker sorted by runtime fragment id (as
    ``bound_contracts._attested_snapshots`` derives them from ``attestation._placement_dict``)
    and per worker, in order, ``(worker_id, snapshots, executor)``, the executor built like
    ``ExecutorTransferPlan(...)`` when every ``__post_init__`` check visibly holds. Placement
    fragments of exactly ``placement_fragment_cls`` (optional; None: not given) have their fields
    read from their instance dict (the values getattr returns)."""

def bound_fragments(
    bound_cls: type, attestation_cls: type, part_fragments: object, attestation: object, /
) -> Optional[tuple[tuple[str, Any], ...]]:
    """``((placement_fragment_id, bound), ...)`` of ``_planner/binding.py``
    ``_attested_bound_fragments`` on its trusted path: per fragment of the exact tuple
    ``part_fragments``, its attested evidence fragment (``attestation._binding_dict``) with the
    evidence fences, no owner and the attestation, when ``attestation._placement_dict`` holds that
    very placement fragment."""

def bound_fragments_ordered(
    bound_cls: type,
    attestation_cls: type,
    region_cls: type,
    parts: object,
    attestations: object,
    operations: object,
    which: int,
    as_map: bool = ...,
    /,
) -> Any:
    """Per ``k``, exactly ``bound_fragments(bound_cls, attestation_cls, parts[k], attestations[k])``,
    every bound fragment allocated in the order the exact ``region_cls`` operations of the exact
    tuple ``operations`` first name its placement fragment object (field ``target`` for
    ``which`` 0, ``source`` for 1; by identity), the rest after them in part order. None when not
    decided (``parts`` / ``attestations`` not exact tuples of one length, a part off the trusted
    path). ``which`` not an int: TypeError; not 0 or 1: ValueError. With ``as_map`` True (a bool,
    else TypeError): the same bound fragments as the dict ``{placement_fragment_id: bound}``
    (part order, then row order; no row built), the first id met twice raising ``ValueError
    ('duplicate bound target|source placement fragment: <id>')``; None as above."""

def bind_regions_ordered(
    region_cls: type,
    placement_fragment_cls: type,
    stored_fragment_cls: type,
    operations: object,
    target_parts: object,
    target_attestations: object,
    source_parts: object,
    source_attestations: object,
    attestation_cls: type,
    bound_cls: type,
    runtime_cls: type,
    budget: object,
    carry: bool,
    prove: bool,
    /,
) -> Any:
    """Binding steps 7 and 8 in one call: what ``bind_regions(region_cls, placement_fragment_cls,
    stored_fragment_cls, operations, T, S, bound_cls, runtime_cls, budget, carry, prove)`` returns
    for the maps ``T = bound_fragments_ordered(bound_cls, attestation_cls, region_cls,
    target_parts, target_attestations, operations, 0, True)`` and ``S`` (the source parts and
    attestations, 1), with the bound fragments allocated in the same order, without building the
    maps: each operation's bound fragments are the ones the operation walks queued for its
    fields, read by position. None when not decided here (either map not decided or raising its
    duplicate error, an operation field that is not one of the parts' fragment objects, or
    ``bind_regions`` returning None): the caller then runs the three calls. One difference: when
    the operations name every fragment of the target parts and each target attestation's
    evidence lists as many fragments as its part, the target selection (``selections[1]``) is
    None, meaning complete: the ids of every evidence fragment of those attestations (each id
    still checked an exact non-empty str), which the frozenset would hold. ``TypeError`` for a
    wrong argument count, classes that are not heap types, or carry / prove not bools."""

def bind_regions(
    region_cls: type,
    placement_fragment_cls: type,
    stored_fragment_cls: type,
    operations: object,
    bound_targets: object,
    bound_sources: object,
    bound_cls: type = ...,
    runtime_cls: type = ...,
    budget: object = ...,
    carry: bool = ...,
    prove: bool = ...,
    /,
) -> Any:
    """Step 8 of ``bind_logical_transfer_plan``: per exact ``region_cls`` operation, the region with
    the same fields, target ``bound_targets[target id]`` and source ``bound_sources[source id]`` (a
    placement fragment source) or the source itself (an exact stored fragment snapshot). With
    ``bound_cls``: ``(regions, selections)``, ``selections`` being exactly what
    ``bound_fragment_ids(regions, region_cls, bound_cls, stored_fragment_cls)`` returns (derived in
    the same pass) or None where that returns None. Returns a list or None without ``bound_cls``,
    a ``(list, Optional[tuple[frozenset[str], frozenset[str]]])`` pair or None with it. With
    ``runtime_cls`` and ``budget`` too: ``(list, selections, physical)``, ``physical`` True exactly
    when ``budget`` is an int > 0 and ``physical_whole_targets(regions, region_cls, bound_cls,
    budget)`` would accept the regions with every target's binding an exact ``runtime_cls`` and
    placement an exact ``placement_fragment_cls`` (derived in the same pass), else None. With
    ``carry`` too (a bool; True): ``(list, selections, physical, carried)``, ``carried`` None or
    what ``revalidate_scan_carried`` and ``regions_canonical_carried`` take (``(regions, fragments,
    source_of, target_of, boxes, ends, max_count, max_total, facts)``, derived in the same pass;
    ``facts`` is None, or the list of the four values, placement ``tensor_id``, ``global_offset``,
    ``local_shape`` and binding ``nbytes``, of every distinct fragment, from which every region
    was proven canonical with ``regions_canonical``'s kernel, when ``prove`` (a bool) is True).
    Above 257 operations the carried facts are compact: ``source_of`` and ``target_of`` are bytes
    of native int32 positions and ``boxes`` is None (the revalidation reads each box from its
    region); up to 257 they are lists of ints and of ``(overlap_offset, overlap_shape)`` tuples."""

def address_ranges_clear(views: object, runtime_fragment_cls: type, /) -> bool:
    """True when the exact list of views ``(instance_id, runtime fragment, ...)`` passes
    ``_address_ranges.validate_runtime_address_ranges`` without its declared-alias exception:
    within each ``(instance_id, worker_id, device)`` no two views overlap and any two allocations
    are identical or disjoint (exact ``str`` keys, exact fragments, exact ints, ranges ending
    below ``2**64``). False when not decided here (the Python sweep then runs)."""

def attest_binding(
    attestation_cls: type,
    evidence_cls: type,
    runtime_fragment_cls: type,
    placement_fragment_cls: type,
    tensor_cls: type,
    placement: object,
    binding: object,
    part_fragments: object,
    part_tensors: object,
    resource_id: object,
    placement_id: object,
    placement_digest: object,
    revision: object,
    /,
) -> Any:
    """``validate_runtime_binding(placement, binding)`` then ``attest``, in one call, for an exact
    binding of the part ``(part_fragments, part_tensors)``: its ``resource_id``, ``placement_id``,
    ``placement_digest`` and ``revision`` equal the given placement values (exact ``str``),
    ``bind_views`` decides its fragments, ``address_ranges_clear`` their views and ``attest``
    builds the attestation. ``None`` when any of them does not decide."""

# ``attest_binding`` for a restore, whose binding is the unpickled evidence (same arguments, the
# binding named ``evidence``): the same checks and the same attestation, except that an exact
# ``evidence_cls`` evidence is stored in it as is (the object the restore stores), not an equal
# copy built from its fields. ``None`` when not decided.
attest_restored = attest_binding

def attested_rows(
    attestation_cls: type, evidence_cls: type, runtime_fragment_cls: type, attestation: object, /
) -> Optional[tuple[dict[str, dict[str, Any]], dict[str, tuple[tuple[str, dict[str, Any]], ...]], dict[str, tuple[str, ...]], bool]]:
    """``(expected_by_pfid, rows_by_worker, ids_by_worker, complete)`` as
    ``bound_contracts._AttestedView`` derives them from an attestation: the expected snapshot
    field dict (new per call, the 16 fields in order) of every evidence fragment with an entry in
    ``attestation._placement_dict``; per worker the ``(runtime fragment id, expected)`` pairs sorted
    by id and the ids; ``complete`` is False when some evidence fragment has no entry."""

def logical_target_cover(
    operations: object,
    parts: object,
    executors: object,
    target_tensors: object,
    placement_id: object,
    region_cls: type,
    fragment_cls: type,
    part_cls: type,
    executor_cls: type,
    rank_cls: type,
    tensor_cls: type,
    stored_cls: type = ...,
    target_fragments: object = ...,
    source_fragments: object = ...,
    /,
) -> Any:
    """``True`` when every target-side logical self-check of spec §11.6
    (``validation.validate_logical_target_coverage``) but the per-executor operation indices
    passes, decided over flat arrays: exact classes and tuples, exact str ids (distinct
    participant and placement fragment ids), operation targets that are the placement's own
    fragment objects, executor ranks identical or equal exact ranks, executor fragment ids the
    part's sorted ids, identical tensor objects, and every selected fragment exactly covered by
    its operations' boxes (one box equal to it, or at most 64 boxes; non-negative offsets,
    positive extents, representable ends and volumes). ``None`` when not decided here (the
    Python checks run and raise the first failure). ``TypeError`` when a class is not a heap type.
    With ``stored_cls``, ``logical_routes_plain(operations, region_cls, fragment_cls, stored_cls,
    rank_cls)`` is decided in the same passes (one call: every read observes the same state):
    ``True`` when the checks pass and the routes are plain, ``False`` when the checks pass and
    that would return None, ``None`` when the checks are not decided here. With
    ``target_fragments`` and ``source_fragments`` too (the placements' ``fragments`` fields):
    ``None`` or ``(routes, snapshots)``, ``snapshots`` True only when ``operations_snapshots``
    with the indexes ``{f.placement_fragment_id: f for f in <fragments>}`` would return True
    (binding step 5, decided in the same passes; ``target_fragments`` must hold exactly the
    parts' fragment objects, each once, the source fragments be exact with exact str ids)."""

def logical_routes_plain(
    operations: object,
    region_cls: type,
    fragment_cls: type,
    stored_cls: type,
    rank_cls: type,
    /,
) -> Optional[bool]:
    """``True`` when every operation of the exact tuple is an exact ``region_cls`` whose target is an
    exact ``fragment_cls`` and whose source is an exact ``fragment_cls`` or ``stored_cls``, each such
    fragment with an exact non-empty str placement fragment id, an exact ``rank_cls`` rank whose
    ``pp`` is an exact int and a ``pipeline_stage_id`` that is an exact int or None: then
    ``build_operation_views`` derives and sorts every route of them without user code or an
    exception. ``None`` otherwise. ``TypeError`` when a class is not a heap type."""

def project_attested(
    executor_cls: type,
    snapshot_cls: type,
    attestation_cls: type,
    evidence_cls: type,
    runtime_fragment_cls: type,
    rank_cls: type,
    attestation_values: Any,
    placement: object,
    parts: object,
    part_index: object,
    by_key: object,
    attestations: object,
    placement_id: object,
    placement_digest: object,
    selected: object,
    placement_fragment_cls: Optional[type] = None,
    /,
) -> Optional[tuple[Any, ...]]:
    """The executors of ``binding._build_executor_plans_with((placement,), ...)`` when every
    bound part takes its attested single-worker path: per part with a binding in ``by_key``
    (keyed ``(placement_id, participant_id)``) its attestation in ``attestations`` is of this
    placement and part, the attested executors (cached in ``attestation_values(attestation)``
    under ``id(part)``, else built as ``attested_executors`` does and cached) are one worker's,
    selected wholly or not at all by ``selected`` (an exact frozenset or None), the executor's
    rank is the part's (exact ``rank_cls``, int64 fields) and no (rank, worker) repeats; sorted by
    (dp, pp, ep, tp), stable; every selected id emitted. ``None`` when not decided here (the
    Python loop runs and raises the first failure). ``TypeError`` for a class that is not a heap
    type or a non-callable ``attestation_values``. ``placement_fragment_cls`` (optional; None: not
    given) is passed on to ``attested_executors``."""

def attest_many(
    attestation_cls: type,
    evidence_cls: type,
    runtime_fragment_cls: type,
    placement_fragment_cls: type,
    tensor_cls: type,
    binding_cls: type,
    placement: object,
    part_index: object,
    bindings: object,
    resource_id: object,
    placement_id: object,
    placement_digest: object,
    revision: object,
    snapshot_cls: Optional[type] = None,
    part_cls: Optional[type] = None,
    /,
) -> Any:
    """``attestation._attest_many``'s fused path over a tuple of bindings: per binding the
    attestation ``attest_binding`` decides (an exact ``binding_cls``, a part in ``part_index``),
    validated on every call (nothing is read from or written to the bindings); None for each
    binding not decided here (attested in Python, in order). None instead of a list when
    ``bindings`` is not a tuple or ``part_index`` not a dict; ``TypeError`` for a class that is
    not a heap type. With ``snapshot_cls``, a pair (that list, the carrier of the attested
    tables for ``project_attested``). With ``part_cls`` (not None), a part must be exactly of that class
    (read from its plain instance dict; another part's binding is left to Python) and the
    bindings share the tensors loaded so far; without it parts are read by getattr and nothing
    is shared."""

def bind_side_ids(binding_cls: type, runtime_fragment_cls: type, given: object, /) -> Optional[set[str]]:
    """``binding._bind_side_ids`` over a tuple of bindings in one call: the set of their
    participant ids when every binding is an exact ``binding_cls`` with exact str placement and
    participant ids (no pair twice) and an exact tuple of exact ``runtime_fragment_cls`` fragments
    with exact str fragment ids, none repeated across the side. None when not decided here (the
    Python loop runs and raises the first failure); ``TypeError`` for a class that is not a heap
    type."""

def operations_snapshots(
    operations: object, region_cls: type, fragment_cls: type, target_index: object, source_index: object, /
) -> Optional[bool]:
    """Binding step 5 for a placement-sourced plan: ``True`` when every operation of the tuple is
    an exact ``region_cls`` whose target and source are exact ``fragment_cls`` objects that are the
    very entries of ``target_index`` and ``source_index`` (dicts by placement fragment id, exact str
    ids). ``None`` when not decided here (the Python loop runs and raises the first failure)."""

def bound_fragment_ids(
    operations: object, region_cls: type, bound_cls: type, stored_cls: type, /
) -> Optional[tuple[frozenset[str], frozenset[str]]]:
    """Binding step 11's selections over a list or tuple of exact ``region_cls`` operations with
    exact ``bound_cls`` targets and exact ``bound_cls`` or ``stored_cls`` sources: the frozensets of
    ``op.source.binding.fragment_id`` (bound sources) and ``op.target.binding.fragment_id`` (exact
    str ids). ``None`` when not decided here."""

# --- regioncheck.c: canonical-geometry recheck of plan regions (issue 5) ------

def regions_canonical_carried(
    operations: tuple[Any, ...],
    carried: tuple[Any, ...],
    bound_cls: type,
    placement_cls: type,
    binding_cls: type,
    /,
) -> bool:
    """True when ``regions_canonical(operations, 0, ...) == len(operations)`` is established by the
    proof ``bind_regions(..., carry=True)`` carried (``carried``: its 9-item fourth result whose
    last item is the proof's facts list): ``operations`` are exactly the carried regions, and
    every distinct carried fragment (exact ``bound_cls``) still holds an exact ``placement_cls``
    placement and an exact ``binding_cls`` binding whose ``tensor_id``, ``global_offset``,
    ``local_shape`` and ``nbytes`` are the very objects proven (read again). False otherwise
    (run ``regions_canonical``). ``TypeError`` for wrong argument types."""

def regions_canonical(operations: tuple[Any, ...], start: int, bound_cls: type, plain_types: tuple[type, ...], /) -> int:
    """Index of the first operation of ``operations[start:]`` not proven to satisfy every
    ``TransferRegion`` rule of spec §8.4 (the canonical geometry of §11.7 derived again, checked
    int64 arithmetic), or ``len(operations)``. Fields of exact ``plain_types`` instances are read
    from their instance dict; an exact ``bound_cls`` fragment is read through its ``placement``
    and ``binding`` (at most 8 plain types). Non-exact values, ints beyond int64, missing attributes and more than 32
    dimensions are "not proven" (``TransferRegion.__post_init__`` then decides)."""

# --- pickle_codec.c: the packed TransferPlan pickle record (issue 5) ----------

def graph_pack(root: object, registry: tuple[tuple[type, tuple[str, ...], int], ...], /) -> Optional[tuple[bytes, tuple[Any, ...]]]:
    """``(codes, values)``: the object graph of ``root`` as opcodes (exact tuples and instances of
    the registry's ``(class, names, mode)`` classes whose instance dict has the registered shape,
    each distinct object written once) and the flat tuple of the leaves (everything else, in
    order). None when the graph has a cycle."""

def graph_unpack(codes: object, values: object, registry: tuple[tuple[type, tuple[str, ...], int], ...], /) -> Any:
    """The graph ``graph_pack`` packed: registered instances rebuilt by field dict (mode 0/1, as
    their default pickling) or, mode 2, as ``RuntimeBindingFragment(*values)`` (decided in C when
    its checks visibly hold, else by calling the class, whose exception propagates). Every int of
    the stream is decoded once per value (equal ints are one object). None when the stream is not
    exactly one well-formed graph using every value once."""

def graph_typed(placements: list[Any] | tuple[Any, ...], classes: tuple[type, ...], /) -> bool:
    """``placement.typed_graphs``' accept condition over the placements (exact
    ``WeightPlacementManifest`` instances), checked in one C walk: True when every placement, its
    topology, participants, ranks, descriptors (and their axes), fragments and parts hold exactly
    the classes the constructors store and every part names its placement's identity, topology
    and descriptors; False when anything differs or is not sure (the Python rules decide).
    ``classes``: (WeightPlacementManifest, ParallelTopology, TopologyParticipant, ParallelRank,
    WeightPlacementPart, TensorDescriptor, PlacementFragment, SplitAxis, ReplicatedAxis,
    OwnershipAxis)."""

def encode_record(
    operations: object,
    source_executors: object,
    target_executors: object,
    region_cls: type,
    bound_cls: type,
    executor_cls: type,
    snapshot_cls: type,
    attestation_cls: type,
    region_fields: tuple[str, ...],
    bound_fields: tuple[str, ...],
    executor_fields: tuple[str, ...],
    snapshot_fields: tuple[str, ...],
    /,
) -> Optional[tuple[tuple[Any, ...], tuple[Any, ...], tuple[Any, ...], tuple[Any, ...], tuple[Any, ...]]]:
    """The five flat tables of the compact ``TransferPlan`` pickle record (attestations, bound
    fragments, operations, source and target executors) exactly as ``bound_pickle._encode`` builds
    them; None when an object is not of the record's shape (``_encode`` then decides)."""

# --- restore_scan.c: a pickle restore's regions with the revalidation scan's facts (issue 5) --

def restore_regions_carried(
    table: object, fragments: object, region_cls: type, region_fields: tuple[str, ...], bound_cls: type, /
) -> Optional[tuple[tuple[Any, ...], Optional[tuple[Any, ...]]]]:
    """``(regions, carried)``: the regions ``restore_regions`` builds from a record's operation
    table and, derived from the values stored in them, ``revalidate_scan``'s facts in the shape
    ``revalidate_scan_carried`` takes (None when a value is one the scan would decline). None when
    the table is not exactly the record's shape. ``TypeError`` for classes that are not heap types
    or ``region_fields`` other than ``TransferRegion``'s eleven field names in order."""

# --- layout.c: C-owned value layouts (issue 5, representation change step 1) --------------

def value_base(name: str, fields: tuple[str, ...], /) -> type:
    """A new immutable C layout base type: instances hold one object per field in the order of
    ``fields`` (member descriptors; an empty field raises AttributeError). ``name`` and every
    field are identifiers (1 to 64 distinct fields, no dunders). A frozen dataclass derives from
    it with ``__slots__ = ("__weakref__",)`` (``mooncake_reshard/_layout.py``)."""

def layout_info(cls: object, /) -> Optional[tuple[type, tuple[str, ...]]]:
    """``(base, fields)`` when ``cls`` derives from a ``value_base`` type, else None."""

def layout_check(cls: object, n: int | tuple[str, ...], /) -> bool:
    """Test entry point: whether the C per-pass check accepts ``cls`` as a layout class of
    exactly ``n`` fields whose instances C may read by direct loads (``n`` may be the tuple of
    the expected field names in layout order)."""

def layout_read(objects: list[Any], cls: object, n: int, /) -> list[Optional[tuple[Any, ...]]]:
    """Test entry point: each object's ``n`` fields read by direct loads, or None where the
    reader declines (not exactly ``cls``, an empty field, ``cls`` failing the check)."""

def layout_new(cls: type, values: tuple[Any, ...], /) -> Any:
    """Test entry point: an instance of exactly ``cls`` built in C from ``values`` (no
    ``__init__``; untracked by the collector when every value is inert). TypeError when ``cls``
    is not a layout class of ``len(values)`` fields."""

def layout_builder(cls: type, fields: int | tuple[str, ...], /) -> Callable[..., Any]:
    """A callable building instances of exactly ``cls`` from its field values in layout order
    (stored directly: no ``__init__`` / ``__post_init__``; untracked by the collector when every
    value is inert). ``cls`` is checked once, here, against ``fields`` (its field names in
    layout order, or their count); TypeError when it is not such a layout class."""

@overload
def layout_storer(cls: type, fields: int | tuple[str, ...], /) -> Callable[..., None]:
    """A callable filling an instance of ``cls`` or of a subclass (a hand-written ``__init__``'s
    last step): ``storer(obj, v0, ..., vn-1)`` replaces obj's fields with the values in layout
    order (no validation) and, when obj is exactly ``cls`` and every value is inert, untracks it
    from the collector; TypeError (nothing stored) when obj is not an instance of ``cls``.
    ``cls`` is checked once, here, as by ``layout_builder``. With ``shared`` (field positions)
    and ``namespace`` (a dict holding ``SHARED``, a dict, and ``SHARED_MAX``, an int:
    ``mooncake_reshard._shared_tuples``), a value at a shared position that is an exact tuple of
    exact ints is replaced by the table's equal tuple, or entered as that tuple (the table
    emptied first when it holds ``SHARED_MAX`` entries; 0: sharing off)."""

@overload
def layout_storer(
    cls: type, fields: int | tuple[str, ...], shared: tuple[int, ...], namespace: dict[str, Any], /
) -> Callable[..., None]: ...

def layout_read_bench(objects: list[Any], cls: object, names: tuple[str, ...], mode: int, /) -> int:
    """Measurement entry point: a checksum of the fields ``names`` of every object, read by
    direct loads (mode 0; 1 prefetched) or through the instance dict (mode 2; 3 prefetched as
    ``revalidate_side`` does). ValueError when an object declines."""

"""Hypothesis strategies for weight placements (plain-data :class:`layout_model.Layout` values).

Composable pieces, from small to large:

* :func:`axis_sizes` -- ``(tp, pp, ep, dp)`` sizes of a small topology;
* :func:`participants_for` -- the selected participants of those sizes (every rank, or a single DP
  replica while ``dp_size`` is kept, spec 4.6);
* :func:`tensor_with_fragments` -- one tensor plus a valid, complete set of fragments for it: 1-D to
  4-D shapes, uneven splits, TP split on any dim, grouped experts (``SplitAxis("ep", 0)``),
  independent experts (``OwnershipAxis("ep")`` with an ``expert_id``), DP replicas or a DP owner, PP
  owners (possibly several complete owners), storage segmentation of a rank's box, an undeclared
  TP axis coupled to an EP split;
* :func:`valid_layouts` -- a complete placement that ``from_fragments`` must accept (several tensors,
  optional tied-weight alias pairs, optional pipeline stages, explicit or derived fragment ids;
  participants that receive no fragment are the "empty participants");
* :func:`partial_topology_layouts` -- layouts over an arbitrary subset of the ranks (non-Cartesian
  participant mappings; valid or not);
* :func:`mutated_layouts` -- a valid layout with one to three random mutations that usually break it
  (gaps, overlaps, out-of-bounds boxes, wrong ranks, changed axis semantics, removed or added
  participants); judge it with :func:`oracles.from_fragments_verdict`.

Everything is plain data; turn a layout into package values with ``layout_model.build_placement``.
Shapes stay small so that the cell-enumeration oracle remains cheap.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from hypothesis import strategies as st

from layout_model import KINDS, AxisSpec, Coord, FragmentSpec, Layout, TensorSpec, full_participants

Draw = Callable[[st.SearchStrategy], object]


@st.composite
def axis_sizes(draw: Draw, max_size: int = 3, max_world: int = 12) -> Tuple[int, int, int, int]:
    """``(tp, pp, ep, dp)``, each in ``1..max_size``, product at most ``max_world``."""
    while True:
        sizes = tuple(draw(st.integers(1, max_size)) for _ in range(4))
        if sizes[0] * sizes[1] * sizes[2] * sizes[3] <= max_world:
            return sizes  # type: ignore[return-value]
        # shrink towards small topologies instead of filtering
        max_size = max(1, max_size - 1)


@st.composite
def participants_for(draw: Draw, sizes: Tuple[int, int, int, int]) -> Tuple[Tuple[str, Coord], ...]:
    """Every rank, or (when ``dp > 1``) optionally only the ranks of one DP replica."""
    tp, pp, ep, dp = sizes
    everyone = full_participants(tp, pp, ep, dp)
    if dp > 1 and draw(st.booleans()):
        keep = draw(st.integers(0, dp - 1))
        return tuple((pid, c) for pid, c in everyone if c.dp == keep)
    return everyone


def uneven_cuts(draw: Draw, extent: int, pieces: int) -> List[Tuple[int, int]]:
    """Split ``[0, extent)`` into ``pieces`` non-empty intervals (uneven in general)."""
    points = sorted(draw(st.sets(st.integers(1, extent - 1), min_size=pieces - 1, max_size=pieces - 1))) if pieces > 1 else []
    bounds = [0, *points, extent]
    return [(bounds[i], bounds[i + 1]) for i in range(pieces)]


def segmented_boxes(draw: Draw, offset: Tuple[int, ...], shape: Tuple[int, ...], depth: int) -> List[Tuple[Tuple[int, ...], Tuple[int, ...]]]:
    """Optionally cut a box into disjoint sub-boxes (storage segmentation)."""
    dims = [d for d, s in enumerate(shape) if s >= 2]
    if depth <= 0 or not dims or not draw(st.integers(0, 3)) == 0:
        return [(offset, shape)]
    d = draw(st.sampled_from(dims))
    cut = draw(st.integers(1, shape[d] - 1))
    first_shape = shape[:d] + (cut,) + shape[d + 1:]
    second_offset = offset[:d] + (offset[d] + cut,) + offset[d + 1:]
    second_shape = shape[:d] + (shape[d] - cut,) + shape[d + 1:]
    return segmented_boxes(draw, offset, first_shape, depth - 1) + segmented_boxes(draw, second_offset, second_shape, depth - 1)


@st.composite
def tensor_with_fragments(
    draw: Draw,
    sizes: Tuple[int, int, int, int],
    participants: Tuple[Tuple[str, Coord], ...],
    tensor_id: str,
    max_ndim: int = 4,
) -> Tuple[TensorSpec, Tuple[FragmentSpec, ...]]:
    """One tensor and a complete, valid fragment set for it (fragment ids left as ``None``)."""
    tp, pp, ep, dp = sizes
    size = {"tp": tp, "pp": pp, "ep": ep, "dp": dp}
    ndim = draw(st.integers(1, max_ndim))
    choice: Dict[str, str] = {}
    for kind in KINDS:
        options = {
            "dp": ["replicated", "ownership"],
            "pp": ["ownership", "replicated"],
            "ep": ["split", "ownership", "replicated"],
            "tp": ["split", "replicated", "ownership"],
        }[kind]
        if size[kind] == 1:
            options = options + ["none"]
        choice[kind] = draw(st.sampled_from(options))
    if choice["ep"] == "split" and size["tp"] > 1 and size["tp"] == size["ep"] and draw(st.integers(0, 3)) == 0:
        choice["tp"] = "coupled"  # undeclared tp that follows the ep split rank (spec 11.5 rule 3)
    axes: List[AxisSpec] = []
    split_dim: Dict[str, int] = {}
    if choice["ep"] == "split":
        split_dim["ep"] = 0
    if choice["tp"] == "split":
        free = [d for d in range(ndim) if d not in split_dim.values()]
        if free:
            split_dim["tp"] = draw(st.sampled_from(free))
        else:
            choice["tp"] = "replicated"
    for kind in KINDS:
        if choice[kind] == "split":
            axes.append(AxisSpec("split", kind, split_dim[kind]))
        elif choice[kind] in ("replicated", "ownership"):
            axes.append(AxisSpec(choice[kind], kind))
    # shape: split dims need at least one element per rank
    max_extent = 5 if ndim <= 2 else 3
    shape = []
    for d in range(ndim):
        need = max([size[k] for k, sd in split_dim.items() if sd == d] + [1])
        shape.append(draw(st.integers(need, max(need, max_extent))))
    global_shape = tuple(shape)
    expert_id: Optional[int] = None
    if choice["ep"] != "split" and draw(st.booleans()):
        expert_id = draw(st.integers(0, 7))
    layer_id = draw(st.none() | st.integers(0, 3))
    dtype, itemsize = draw(st.sampled_from([("bfloat16", 2), ("float32", 4), ("int8", 1)]))
    tensor = TensorSpec(
        tensor_id=tensor_id,
        global_shape=global_shape,
        axes=tuple(draw(st.permutations(axes))),
        dtype=dtype,
        itemsize=itemsize,
        layer_id=layer_id,
        expert_id=expert_id,
    )
    own = tensor.kinds("ownership")
    rep = tensor.kinds("replicated")
    split_kinds = [k for k in KINDS if k in split_dim]
    pieces = {k: uneven_cuts(draw, global_shape[split_dim[k]], size[k]) for k in split_kinds}

    def key(c: Coord, kinds: Sequence[str]) -> Tuple[int, ...]:
        return tuple(c.get(k) for k in kinds)

    owners = sorted({key(c, own) for _, c in participants})
    chosen = draw(st.lists(st.sampled_from(owners), min_size=1, max_size=min(2, len(owners)), unique=True))
    fragments: List[FragmentSpec] = []
    for _, c in participants:
        if key(c, own) not in chosen:
            continue
        if choice["tp"] == "coupled" and c.tp != c.ep:
            continue
        offset = [0] * ndim
        extent = list(global_shape)
        for k in split_kinds:
            begin, end = pieces[k][c.get(k)]
            offset[split_dim[k]] = begin
            extent[split_dim[k]] = end - begin
        for box_offset, box_shape in segmented_boxes(draw, tuple(offset), tuple(extent), depth=2):
            fragments.append(FragmentSpec(tensor_id=tensor_id, offset=box_offset, shape=box_shape, rank=c))
    return tensor, tuple(fragments)


@st.composite
def partial_topology_layouts(draw: Draw, max_tensors: int = 2, max_ndim: int = 3) -> Layout:
    """Layouts over an arbitrary non-empty subset of the product ranks (non-Cartesian topologies).

    Fragments are generated as for :func:`valid_layouts`, but because selected participants may
    miss split or replica coordinates the result may be valid or not: judge it with the oracle.
    """
    sizes = draw(axis_sizes())
    everyone = list(full_participants(*sizes))
    participants = tuple(draw(st.lists(st.sampled_from(everyone), min_size=1, max_size=len(everyone), unique=True)))
    names = draw(st.lists(st.sampled_from(["a", "b.w", "c.bias"]), min_size=1, max_size=max_tensors, unique=True))
    tensors: List[TensorSpec] = []
    fragments: List[FragmentSpec] = []
    for name in names:
        t, frs = draw(tensor_with_fragments(sizes, participants, name, max_ndim=max_ndim))
        tensors.append(t)
        fragments.extend(frs)
    return Layout(sizes=sizes, participants=participants, tensors=tuple(tensors), fragments=tuple(fragments),
                  notes=("partial topology",))


@st.composite
def valid_layouts(draw: Draw, max_tensors: int = 3, max_ndim: int = 4, allow_aliases: bool = True) -> Layout:
    """A complete placement that ``WeightPlacementManifest.from_fragments`` must accept."""
    sizes = draw(axis_sizes())
    participants = draw(participants_for(sizes))
    n_tensors = draw(st.integers(1, max_tensors))
    names = draw(st.lists(
        st.sampled_from(["embed", "layers.0.qkv", "layers.1.o", "layers.2.experts.3.w1", "lm_head", "norm", "z.last", "Ä.non-ascii"]),
        min_size=n_tensors, max_size=n_tensors, unique=True,
    ))
    tensors: List[TensorSpec] = []
    fragments: List[FragmentSpec] = []
    for name in names:
        t, frs = draw(tensor_with_fragments(sizes, participants, name, max_ndim=max_ndim))
        tensors.append(t)
        fragments.extend(frs)
    if allow_aliases and draw(st.integers(0, 3)) == 0:
        base = draw(st.sampled_from(tensors))
        tied_id = base.tensor_id + ".tied"
        group = tuple(sorted((base.tensor_id, tied_id)))
        tied = dataclasses.replace(base, tensor_id=tied_id)
        tensors.append(tied)
        new_frags = []
        for f in fragments:
            if f.tensor_id == base.tensor_id:
                new_frags.append(dataclasses.replace(f, aliases=group))
                new_frags.append(dataclasses.replace(f, tensor_id=tied_id, aliases=group))
            else:
                new_frags.append(f)
        fragments = new_frags
    stage_mode = draw(st.sampled_from(["none", "pp", "virtual"]))
    if stage_mode != "none":
        fragments = [
            dataclasses.replace(f, pipeline_stage_id=f.rank.pp if stage_mode == "pp" else f.rank.pp * 2 + (i % 2))
            for i, f in enumerate(fragments)
        ]
    if draw(st.booleans()):
        fragments = [dataclasses.replace(f, fragment_id=f"frag-{i:03d}") for i, f in enumerate(fragments)]
    order = draw(st.permutations(range(len(fragments))))
    fragments = [fragments[i] for i in order]
    return Layout(
        sizes=sizes,
        participants=tuple(draw(st.permutations(participants))),
        tensors=tuple(draw(st.permutations(tensors))),
        fragments=tuple(fragments),
        weight_generation=draw(st.integers(0, 2**64 - 1) | st.integers(0, 9)),
        resource_id=draw(st.sampled_from(["model", "qwen3.5-0.8b", "modèle"])),
    )


# ----------------------------------------------------------------------------------------------
# Mutations


def _replace_fragment(layout: Layout, index: int, fragment: Optional[FragmentSpec]) -> Layout:
    frags = list(layout.fragments)
    if fragment is None:
        del frags[index]
    else:
        frags[index] = fragment
    return dataclasses.replace(layout, fragments=tuple(frags))


@st.composite
def mutation(draw: Draw, layout: Layout) -> Layout:
    """Apply one random, usually breaking, change to a layout (result may still be valid)."""
    kinds = ["drop", "move", "copy", "reshape", "shift", "axis", "remove_participant", "add_participant"]
    what = draw(st.sampled_from(kinds))
    note = what
    if what in ("drop", "move", "copy", "reshape", "shift") and layout.fragments:
        i = draw(st.integers(0, len(layout.fragments) - 1))
        f = layout.fragments[i]
        if what == "drop":
            new = _replace_fragment(layout, i, None)
        elif what in ("move", "copy"):
            others = [c for _, c in layout.participants if c != f.rank]
            if not others:
                return layout
            target = draw(st.sampled_from(others))
            moved = dataclasses.replace(f, rank=target)
            if what == "move":
                new = _replace_fragment(layout, i, moved)
            else:
                if moved.fragment_id is not None:
                    moved = dataclasses.replace(moved, fragment_id=moved.fragment_id + "-copy")
                new = dataclasses.replace(layout, fragments=layout.fragments + (moved,))
        else:
            d = draw(st.integers(0, len(f.shape) - 1))
            delta = draw(st.sampled_from([-1, 1]))
            if what == "reshape":
                shape = list(f.shape)
                shape[d] = max(1, shape[d] + delta)
                new = _replace_fragment(layout, i, dataclasses.replace(f, shape=tuple(shape)))
            else:
                offset = list(f.offset)
                offset[d] = max(0, offset[d] + delta)
                new = _replace_fragment(layout, i, dataclasses.replace(f, offset=tuple(offset)))
        note = f"{what} fragment {i} ({f.tensor_id} at {f.rank})"
    elif what == "axis":
        t = draw(st.sampled_from(layout.tensors))
        if not t.axes:
            return layout
        j = draw(st.integers(0, len(t.axes) - 1))
        a = t.axes[j]
        choice = draw(st.sampled_from(["drop", "replicated", "ownership"]))
        axes = list(t.axes)
        if choice == "drop":
            del axes[j]
        else:
            axes[j] = AxisSpec(choice, a.kind)
        changed = dataclasses.replace(t, axes=tuple(axes))
        tensors = []
        for u in layout.tensors:
            if u.tensor_id == t.tensor_id:
                tensors.append(changed)
            elif layout_aliases(layout, t.tensor_id) and u.tensor_id in layout_aliases(layout, t.tensor_id):
                tensors.append(dataclasses.replace(u, axes=tuple(axes)))  # keep alias descriptors equal
            else:
                tensors.append(u)
        new = dataclasses.replace(layout, tensors=tuple(tensors))
        note = f"axis {a} of {t.tensor_id} -> {choice}"
    elif what == "remove_participant":
        used = {f.rank for f in layout.fragments}
        empty = [p for p in layout.participants if p[1] not in used]
        if not empty or len(layout.participants) < 2:
            return layout
        gone = draw(st.sampled_from(empty))
        new = dataclasses.replace(layout, participants=tuple(p for p in layout.participants if p != gone))
        note = f"remove participant {gone[0]}"
    elif what == "add_participant":
        tp, pp, ep, dp = layout.sizes
        present = {c for _, c in layout.participants}
        missing = [p for p in full_participants(tp, pp, ep, dp) if p[1] not in present]
        if not missing:
            return layout
        extra = draw(st.sampled_from(missing))
        new = dataclasses.replace(layout, participants=layout.participants + (extra,))
        note = f"add participant {extra[0]}"
    else:
        return layout
    return dataclasses.replace(new, notes=layout.notes + (note,))


def layout_aliases(layout: Layout, tensor_id: str) -> Tuple[str, ...]:
    """The alias group declared by the fragments of ``tensor_id`` (``()`` if none)."""
    for f in layout.fragments:
        if f.tensor_id == tensor_id and f.aliases:
            return f.aliases
    return ()


@st.composite
def mutated_layouts(draw: Draw, max_mutations: int = 3, **kwargs: object) -> Layout:
    """A valid layout followed by ``1..max_mutations`` random mutations."""
    layout = draw(valid_layouts(**kwargs))  # type: ignore[arg-type]
    for _ in range(draw(st.integers(1, max_mutations))):
        layout = draw(mutation(layout))
    return layout


@st.composite
def any_layouts(draw: Draw, **kwargs: object) -> Layout:
    """Valid, mutated and partial-topology layouts (about 40/40/20)."""
    pick = draw(st.integers(0, 4))
    if pick < 2:
        return draw(valid_layouts(**kwargs))  # type: ignore[arg-type]
    if pick < 4:
        return draw(mutated_layouts(**kwargs))
    return draw(partial_topology_layouts())

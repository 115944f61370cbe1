"""Small placement builders for the planner tests (plain layouts -> package values)."""

from __future__ import annotations

import itertools
import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

from layout_model import AxisSpec, Coord, FragmentSpec, Layout, TensorSpec, build_placement, full_participants


def split(kind: str, dim: int) -> AxisSpec:
    return AxisSpec("split", kind, dim)


def rep(kind: str) -> AxisSpec:
    return AxisSpec("replicated", kind)


def own(kind: str) -> AxisSpec:
    return AxisSpec("ownership", kind)


def even(extent: int, pieces: int) -> List[Tuple[int, int]]:
    step = extent // pieces
    bounds = [i * step for i in range(pieces)] + [extent]
    return [(bounds[i], bounds[i + 1]) for i in range(pieces)]


def layout(
    name: str,
    sizes: Tuple[int, int, int, int],
    tensors: Sequence[TensorSpec],
    fragments: Sequence[FragmentSpec],
    *,
    participants: Optional[Sequence[Tuple[str, Coord]]] = None,
    **identity: Any,
) -> Layout:
    tp, pp, ep, dp = sizes
    parts = tuple(participants) if participants is not None else full_participants(tp, pp, ep, dp)
    named = [
        f if f.fragment_id is not None else FragmentSpec(
            f.tensor_id, f.offset, f.shape, f.rank,
            fragment_id=f"{name}-d{f.rank.dp}-p{f.rank.pp}-e{f.rank.ep}-t{f.rank.tp}-{f.tensor_id}-{i}",
            nbytes=f.nbytes, pipeline_stage_id=f.pipeline_stage_id, aliases=f.aliases,
        )
        for i, f in enumerate(fragments)
    ]
    return Layout(sizes=sizes, participants=parts, tensors=tuple(tensors), fragments=tuple(named),
                  placement_set_id=name, **identity)


def grid_fragments(
    tensor: TensorSpec,
    ranks: Sequence[Coord],
    split_of: Dict[str, int],
    sizes: Dict[str, int],
    *,
    stage: bool = False,
) -> List[FragmentSpec]:
    """One fragment per rank: the rank's box under even splits ``kind -> dim``."""
    out = []
    for c in ranks:
        offset = [0] * len(tensor.global_shape)
        shape = list(tensor.global_shape)
        for kind, dim in split_of.items():
            begin, end = even(tensor.global_shape[dim], sizes[kind])[c.get(kind)]
            offset[dim] = begin
            shape[dim] = end - begin
        out.append(FragmentSpec(tensor.tensor_id, tuple(offset), tuple(shape), c,
                                pipeline_stage_id=c.pp if stage else None))
    return out


def tp_placement(name: str, tensor: TensorSpec, tp: int, dim: int, *, dp: int = 1, **identity: Any) -> Any:
    """A TP-``tp`` x DP-``dp`` placement of one tensor split on ``dim`` (DP replicated)."""
    spec = TensorSpec(**{**tensor.__dict__, "axes": (rep("dp"), split("tp", dim)) if dp > 1 else (split("tp", dim),)})
    ranks = [Coord(dp=d, tp=t) for d in range(dp) for t in range(tp)]
    frags = grid_fragments(spec, ranks, {"tp": dim}, {"tp": tp})
    return build_placement(layout(name, (tp, 1, 1, dp), [spec], frags, **identity))


def cells(offset: Sequence[int], shape: Sequence[int]) -> set:
    return set(itertools.product(*(range(o, o + s) for o, s in zip(offset, shape))))


def volume(shape: Sequence[int]) -> int:
    return math.prod(shape)

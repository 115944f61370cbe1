"""The packed-table fast paths of §11.2 (target coverage, complete source DP replicas) decide
exactly like the exact per-group path: same result, same error, on accepted and rejected
layouts; and they really run (the exact path is not consulted when the table settles it)."""

from __future__ import annotations

from typing import Any, Callable, List

import pytest

import known_answers
from layout_model import Coord, FragmentSpec, TensorSpec, build_placement
from planner_helpers import layout, own, rep, tp_placement

from mooncake.reshard.weight._planner import ownership

T = TensorSpec("w", (8, 6))
U = TensorSpec("u", (4, 10))


def _outcome(call: Callable[[], Any]) -> Any:
    try:
        return ("ok", call())
    except ValueError as exc:
        return ("error", str(exc))


def _pp_segmented() -> Any:
    spec = TensorSpec(**{**T.__dict__, "axes": (rep("pp"),)})
    frags = [
        FragmentSpec("w", (0, 0), (4, 6), Coord(pp=0)),
        FragmentSpec("w", (4, 0), (4, 6), Coord(pp=0)),
        FragmentSpec("w", (0, 0), (8, 6), Coord(pp=1)),
    ]
    return build_placement(layout("seg", (1, 2, 1, 1), [spec], frags))


def _dp_owned(owners: List[int], segmented_tp: bool = False) -> Any:
    spec = TensorSpec(**{**T.__dict__, "axes": (own("dp"), rep("tp"))})
    frags = []
    for d in owners:
        for t in range(2):
            if segmented_tp and t == 1:
                frags.append(FragmentSpec("w", (0, 0), (4, 6), Coord(dp=d, tp=t)))
                frags.append(FragmentSpec("w", (4, 0), (4, 6), Coord(dp=d, tp=t)))
            else:
                frags.append(FragmentSpec("w", (0, 0), (8, 6), Coord(dp=d, tp=t)))
    return build_placement(layout("own", (2, 1, 1, 2), [spec], frags))


def _ep_owned(dp: int, ep: int) -> Any:
    # Two tensors owned by EP ranks, replicated over DP; each owner holds the whole tensor.
    specs = [TensorSpec(**{**s.__dict__, "axes": (rep("dp"), own("ep"))}) for s in (T, U)]
    frags = [
        FragmentSpec(s.tensor_id, (0, 0), s.global_shape, Coord(dp=d, ep=e))
        for s in specs for d in range(dp) for e in range(ep)
    ]
    return build_placement(layout("ep", (1, 1, ep, dp), specs, frags))


def _placements() -> List[Any]:
    out = [
        tp_placement("a", T, 1, 0),
        tp_placement("b", T, 2, 0),
        tp_placement("c", T, 3, 1, dp=2),
        _pp_segmented(),
        _dp_owned([1]),
        _dp_owned([0, 1]),
        _dp_owned([0], segmented_tp=True),
        _ep_owned(2, 2),
        _ep_owned(1, 3),
    ]
    for name in known_answers.case_names():
        for build in (known_answers.source_placement, known_answers.target_placement):
            try:
                out.append(build(name))
            except Exception:  # stored-source cases have no source placement
                continue
    return out


@pytest.mark.parametrize("index", range(len(_placements())))
def test_fast_paths_decide_like_the_exact_path(index: int) -> None:
    placement = _placements()[index]
    tensors = {tensor.tensor_id: tensor for tensor in placement.tensors}
    fragments = placement.fragments
    assert _outcome(lambda: ownership.check_target_coverage(tensors, fragments, placement)) == _outcome(
        lambda: ownership.check_target_coverage(tensors, fragments)
    )
    assert _outcome(lambda: ownership.complete_parallel_source_replicas(tensors, fragments, placement)) == _outcome(
        lambda: ownership.complete_parallel_source_replicas(tensors, fragments)
    )
    # The caller's tensor-id list (core.py passes the one it already read) decides alike.
    ids = [fragment.tensor_id for fragment in fragments]
    assert _outcome(lambda: ownership.check_target_coverage(tensors, fragments, placement, None, ids)) == _outcome(
        lambda: ownership.check_target_coverage(tensors, fragments)
    )
    # A list of the wrong length is ignored (the ids are read again), never trusted.
    assert _outcome(
        lambda: ownership.check_target_coverage(tensors, fragments, placement, None, ids[:-1])
    ) == _outcome(lambda: ownership.check_target_coverage(tensors, fragments))
    # A foreign fragment sequence or tensor map never takes the table path.
    assert _outcome(lambda: ownership.check_target_coverage(tensors, list(fragments), placement)) == _outcome(
        lambda: ownership.check_target_coverage(tensors, fragments)
    )


def test_fast_paths_run_without_the_exact_path(monkeypatch: pytest.MonkeyPatch) -> None:
    for placement in (tp_placement("c", T, 3, 1, dp=2), _ep_owned(2, 2), _dp_owned([1])):
        tensors = {tensor.tensor_id: tensor for tensor in placement.tensors}
        expected = ownership.complete_parallel_source_replicas(tensors, placement.fragments)
        with monkeypatch.context() as patch:
            patch.setattr(ownership, "_owner_boxes", None)  # any use of the exact path fails
            ownership.check_target_coverage(tensors, placement.fragments, placement)
            if not ownership.is_dp_owned(placement.tensors[0]):
                assert ownership.complete_parallel_source_replicas(tensors, placement.fragments, placement) == expected
            with pytest.raises(TypeError):
                ownership.check_target_coverage(tensors, placement.fragments)


def test_ep_owned_chosen_owner_is_the_minimum() -> None:
    placement = _ep_owned(2, 3)
    tensors = {tensor.tensor_id: tensor for tensor in placement.tensors}
    complete = ownership.complete_parallel_source_replicas(tensors, placement.fragments, placement)
    assert complete == {0: {"u": (("ep", 0),), "w": (("ep", 0),)}, 1: {"u": (("ep", 0),), "w": (("ep", 0),)}}


def test_target_coverage_uses_the_given_tensor_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    for placement in (tp_placement("c", T, 3, 1, dp=2), _ep_owned(2, 2), _dp_owned([1])):
        tensors = {tensor.tensor_id: tensor for tensor in placement.tensors}
        ids = [fragment.tensor_id for fragment in placement.fragments]
        with monkeypatch.context() as patch:
            patch.setattr(ownership, "_owner_boxes", None)  # the exact path is not consulted
            patch.setattr(ownership, "_tensor_id", None)  # nor is the fragments' tensor id re-read
            ownership.check_target_coverage(tensors, placement.fragments, placement, None, ids)
            with pytest.raises(TypeError):
                ownership.check_target_coverage(tensors, placement.fragments, placement)

"""Self-checks of the test helpers (no package code involved).

The strategies claim to generate valid layouts and the oracles claim to judge them; these tests
pin both claims against each other and against hand-made cases, so that a disagreement with the
package can be blamed on the package.
"""

from __future__ import annotations

from hypothesis import given

import oracles
from layout_model import AxisSpec, Coord, FragmentSpec, Layout, TensorSpec, full_participants
from strategies import mutated_layouts, valid_layouts


@given(valid_layouts())
def test_valid_layouts_are_accepted_by_the_oracle(layout: Layout) -> None:
    assert oracles.from_fragments_verdict(layout) is None, layout


@given(mutated_layouts())
def test_mutated_layout_verdicts_are_well_formed(layout: Layout) -> None:
    verdict = oracles.from_fragments_verdict(layout)
    assert verdict is None or (verdict and all(isinstance(m, str) and m for m in verdict))


def test_cell_oracles_on_hand_cases() -> None:
    assert not oracles.boxes_overlap([((0,), (2,)), ((2,), (2,))])
    assert oracles.boxes_overlap([((0,), (3,)), ((2,), (2,))])
    assert not oracles.boxes_overlap([((0, 0), (2, 2)), ((0, 2), (2, 2)), ((2, 0), (2, 4))])
    assert oracles.boxes_exactly_cover((0, 0), (4, 4), [((0, 0), (2, 4)), ((2, 0), (2, 4))])
    assert not oracles.boxes_exactly_cover((0, 0), (4, 4), [((0, 0), (2, 4))])
    assert not oracles.boxes_exactly_cover((0, 0), (4, 4), [])
    assert not oracles.boxes_exactly_cover((0,), (4,), [((0,), (4,)), ((0,), (4,))])


def _tp2(full_on_each_rank: bool) -> Layout:
    t = TensorSpec("w", (4, 4), (AxisSpec("split", "tp", 0),))
    frags = (
        FragmentSpec("w", (0, 0), (4, 4) if full_on_each_rank else (2, 4), Coord(tp=0)),
        FragmentSpec("w", (0, 0) if full_on_each_rank else (2, 0), (4, 4) if full_on_each_rank else (2, 4), Coord(tp=1)),
    )
    return Layout(sizes=(2, 1, 1, 1), participants=full_participants(2, 1, 1, 1), tensors=(t,), fragments=frags)


def test_oracle_hand_cases() -> None:
    assert oracles.from_fragments_verdict(_tp2(False)) is None
    # full copy on every split rank: no geometry collapsing (spec 11.5 rule 4)
    verdict = oracles.from_fragments_verdict(_tp2(True))
    assert verdict is not None and "global placement tensor is not fully covered: w" in verdict


def test_known_answer_identity_through_the_oracle() -> None:
    # spec 6.4 known answer, restated as a layout
    t = TensorSpec("layers.2.experts.3.w1", (4, 4), (AxisSpec("split", "tp", 0),), layout_fingerprint="test:qwen:bf16:v1", layer_id=2, expert_id=3)
    layout = Layout(
        sizes=(1, 1, 1, 1), participants=(("worker-0", Coord()),), tensors=(t,),
        fragments=(FragmentSpec(t.tensor_id, (0, 0), (4, 4), Coord(), fragment_id="placement-0"),),
        resource_id="model", revision="revision", weight_generation=7, placement_set_id="placement-set-7",
    )
    assert oracles.topology_id(layout) == "sha256:017d6c66843ba96ccd39ed1b118b7635fee56677a41dc3d39c48b7bb3ccccdf4"
    assert oracles.placement_id(layout) == "sha256:618f22d9994d8d327a7afd97f3cfcf1f6680a337d71ea3a8162a7827ed0346db"
    assert oracles.placement_digest(layout) == "a2ade0db5b17691e6a7c16d589d0498a64359eef91589addc870590899512d98"
    f = FragmentSpec("weight", (0, 0), (4, 4), Coord(tp=1))
    lay = Layout(sizes=(2, 1, 1, 1), participants=(), tensors=(TensorSpec("weight", (4, 4)),), fragments=(f,))
    assert oracles.fragment_id(lay, f) == "sha256:73b1b25fe8cf11d48697cfd441a400d57ef84d52583d392c09453b5b79a86035"

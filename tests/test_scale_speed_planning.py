"""Planning at scale: the coverage presence check without a tuple per fragment decides
exactly like the (tensor id, dp) pair set it replaces, and check_target_coverage with the
caller's distinct tensor ids decides like without them."""

from __future__ import annotations

from typing import Any, Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from test_planner_fastpaths import _placements

from mooncake.reshard.weight._planner import ownership

_NAMES = st.sampled_from(["a", "b", "c", "d"])


def _oracle(tensor_ids: list[str], dps: list[int], tensors: dict[str, Any]) -> bool:
    pairs = set(zip(tensor_ids, dps))
    return ownership._all_pairs_present(pairs, tensors, len({dp for _, dp in pairs}))


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(st.tuples(_NAMES, st.integers(0, 2)), min_size=1, max_size=12),
    known=st.sets(_NAMES, min_size=1),
)
def test_presence_equals_pair_set_oracle(rows: list[tuple[str, int]], known: set[str]) -> None:
    tensor_ids = [tid for tid, _ in rows]
    dps = [dp for _, dp in rows]
    tensors = {name: object() for name in sorted(known)}
    expected = _oracle(tensor_ids, dps, tensors)
    assert ownership._every_tensor_at_every_dp(tensor_ids, dps, tensors) is expected
    distinct = list(dict.fromkeys(tensor_ids))
    assert ownership._every_tensor_at_every_dp(tensor_ids, dps, tensors, distinct) is expected


def _outcome(call: Callable[[], Any]) -> Any:
    try:
        return ("ok", call())
    except ValueError as exc:
        return ("error", str(exc))


def test_coverage_with_distinct_ids_equals_without() -> None:
    for placement in _placements():
        tensors = {t.tensor_id: t for t in placement.tensors}
        fragments = placement.fragments
        ids = [f.tensor_id for f in fragments]
        dps = [f.rank.dp for f in fragments]
        distinct = list(dict.fromkeys(ids))
        for known in (tensors, {**tensors, "zz-missing": placement.tensors[0]}):
            exact = _outcome(lambda: ownership.check_target_coverage(known, fragments))
            for given_dps, given_distinct in ((dps, distinct), (dps, None), (None, distinct), (dps, (1,))):
                assert _outcome(
                    lambda: ownership.check_target_coverage(
                        known, fragments, placement, None, ids, given_dps, given_distinct  # type: ignore[arg-type]
                    )
                ) == exact


class _Desc:
    def __init__(self, axes: Any) -> None:
        self.parallel_axes = axes


class _StrSub(str):
    pass


class _EqAll(str):
    """A kind equal to every str (hostile __eq__): never shares a signature."""

    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = str.__hash__


def test_owner_signatures_shared_only_for_equal_exact_kinds() -> None:
    from mooncake.reshard import _native
    from mooncake.reshard.weight.types import OwnershipAxis, ReplicatedAxis

    own_dp, own_ep, rep = OwnershipAxis("dp"), OwnershipAxis("ep"), ReplicatedAxis("tp")
    odd = OwnershipAxis("ep")
    object.__setattr__(odd, "kind", _StrSub("ep"))
    weird = OwnershipAxis("ep")
    object.__setattr__(weird, "kind", _EqAll("zz"))
    number = OwnershipAxis("ep")
    object.__setattr__(number, "kind", 7)
    axes_cycle = [(own_ep, rep), (own_ep,), (own_dp, own_ep), (odd,), (odd,), (weird,), (own_ep,), (number,),
                  (number,), (), (), (rep, own_dp), (own_dp,)]
    tensors = {f"t{i}": _Desc(axes) for i, axes in enumerate(axes_cycle * 3)}
    native = _native.owner_signatures(tensors, OwnershipAxis)
    expected = ownership._tensor_signatures(tensors)  # type: ignore[arg-type]
    assert native == expected and list(native) == list(expected)
    for key, value in native.items():
        assert type(value[1]) is bool and value[1] is expected[key][1]
        assert [type(k) for k in value[0]] == [type(k) for k in expected[key][0]]
    # consecutive equal exact-str kinds share the signature object; others never
    assert native["t0"] is native["t1"]
    assert native["t3"] is not native["t2"] and native["t4"] is not native["t3"]
    assert native["t6"] is not native["t5"]

    class _Sub(dict):  # type: ignore[type-arg]
        pass

    assert _native.owner_signatures(_Sub(tensors), OwnershipAxis) is None
    assert ownership.tensor_signatures(_Sub(tensors)) == expected  # type: ignore[arg-type]


def test_fast_path_placement_needs_the_placement_catalog() -> None:
    for placement in _placements():
        catalog = placement.tensors
        planner_map = {t.tensor_id: t for t in catalog}
        assert ownership._fast_path_placement(placement, planner_map, placement.fragments)
        # the same pairs in another order: the lookups decide (same answer)
        assert ownership._fast_path_placement(placement, dict(reversed(planner_map.items())), placement.fragments)
        # copies of the ids (equal, not identical keys): the lookups decide alike
        copied = {"".join(list(tid)): t for tid, t in planner_map.items()}
        assert ownership._fast_path_placement(placement, copied, placement.fragments)
        # a foreign descriptor, a missing one, a foreign fragment sequence: never
        first = catalog[0]
        foreign = {**planner_map, first.tensor_id: type(first)(**{
            f: getattr(first, f) for f in first.__dataclass_fields__ if first.__dataclass_fields__[f].init
        })}
        assert not ownership._fast_path_placement(placement, foreign, placement.fragments)
        assert not ownership._fast_path_placement(placement, dict(list(planner_map.items())[1:]), placement.fragments)
        assert not ownership._fast_path_placement(placement, planner_map, list(placement.fragments))
        assert not ownership._fast_path_placement(None, planner_map, placement.fragments)
        # a str-subclass key equal to the id under its own descriptor: the lookups decide
        sub = {(_StrSub(tid) if i == 0 else tid): t for i, (tid, t) in enumerate(planner_map.items())}
        assert ownership._fast_path_placement(placement, sub, placement.fragments)


def _ranks_oracle(ids: list[Any]) -> bytes:
    from array import array

    ranks = {fid: i for i, fid in enumerate(sorted(ids))}
    return array("q", [ranks[fid] for fid in ids]).tobytes()


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=20),
            st.sampled_from(["", "a", "a\x00", "ab", "abcdefghij", "abcdefghik", "é", "\U0001f600", "z" * 30]),
        ),
        max_size=40,
    )
)
def test_sorted_ranks_equal_the_dict_of_the_sorted_ids(ids: list[str]) -> None:
    from mooncake.reshard.weight._planner import core

    assert core._sorted_ranks(ids) == _ranks_oracle(ids)
    distinct = list(dict.fromkeys(ids))
    assert core._sorted_ranks(distinct) == _ranks_oracle(distinct)


def test_sorted_ranks_odd_values() -> None:
    from mooncake.reshard.weight._planner import core

    for ids in (["b", _StrSub("a"), "c"], ["b", "\ud800", "a"], [3, 1, 2], ["x", "x"], [], ("b", "a")):
        assert core._sorted_ranks(ids) == _ranks_oracle(ids)  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=3), max_size=12, unique=True), st.data())
def test_used_ids_equal_the_indexed_rows(ids: list[str], data: Any) -> None:
    from mooncake.reshard.weight._planner import core

    rows = sorted(data.draw(st.sets(st.integers(0, max(len(ids) - 1, 0)), max_size=len(ids)))) if ids else []
    assert core._used_ids(ids, rows) == {ids[r] for r in rows}
    assert core._used_ids(ids, list(range(len(ids)))) == set(ids)

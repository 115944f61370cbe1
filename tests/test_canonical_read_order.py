"""Every canonical parts encoding reads the fragments (and their ranks) in list order.

The reference's ``part_object`` reads each fragment's ``__dict__`` in list order, and each
fragment's rank (``rank_object``: its ``__dict__``) when first met. A value whose reads run
Python code (a subclass with ``__getattribute__``) can observe the order, so every path of
``canonical_parts_json`` (plain, batched, fused, and the in-order fallback after a decline)
must read in that order; an earlier fast path read in memory-address order. Here subclasses
record every attribute read, the lists are shuffled (list order unrelated to address order),
and the recorded sequence is compared with the reference's, and the text with its text.
"""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from spec_helpers import field_state, store_state

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank, PlacementFragment, ReplicatedAxis, SplitAxis
from mooncake.reshard.weight import _canonical as canonical
from mooncake.reshard.weight.types import TensorDescriptor

_LOG: list[tuple[str, str, str]] = []


class _SpyRank(ParallelRank):
    """Records every attribute read (kind, label, name)."""

    def __getattribute__(self, name: str) -> Any:
        _LOG.append(("r", object.__getattribute__(self, "__dict__").get("_label", "?"), name))
        return super().__getattribute__(name)


class _SpyFragment(PlacementFragment):
    def __getattribute__(self, name: str) -> Any:
        _LOG.append(("f", object.__getattribute__(self, "__dict__").get("_label", "?"), name))
        return super().__getattribute__(name)


def _spy_rank(rank: ParallelRank, label: str) -> ParallelRank:
    spy = object.__new__(_SpyRank)
    state = object.__getattribute__(spy, "__dict__")
    state.update(field_state(rank))
    state["_label"] = label  # an extra state key: the encoders read the fields by name
    return spy


def _spy_fragment(fragment: PlacementFragment, label: str) -> PlacementFragment:
    spy = object.__new__(_SpyFragment)
    store_state(spy, field_state(fragment))  # the fields: in its C layout's slots
    object.__getattribute__(spy, "__dict__")["_label"] = label  # the subclass's own dict
    return spy


def _tensor(index: int) -> TensorDescriptor:
    return TensorDescriptor(
        f"t{index}", (64, 8), "bfloat16", 2, (0,), "fp", (ReplicatedAxis("dp"), SplitAxis("tp", 0))
    )


def _values(count: int, seed: int, spy_fragments: float, spy_ranks: float) -> list[PlacementFragment]:
    """count fragments over a few rank objects (some spies), some fragments spies; the list
    is shuffled after creation, so list order is unrelated to address order."""
    rng = random.Random(seed)
    ranks: list[ParallelRank] = []
    for index in range(6):
        rank = ParallelRank(dp=index % 2, tp=index // 2)
        ranks.append(_spy_rank(rank, f"r{index}") if rng.random() < spy_ranks else rank)
    out = []
    for index in range(count):
        rows = rng.randrange(1, 8)
        fragment = PlacementFragment(
            f"t{index % 5}",
            (rng.randrange(0, 7) * 8, 0),
            (rows, 8),
            rows * 8 * 2,
            rng.choice(ranks),
            pipeline_stage_id=None if index % 3 else index,
            aliases=() if index % 4 else (f"t{index % 5}", "t9"),
        )
        out.append(_spy_fragment(fragment, f"f{index}") if rng.random() < spy_fragments else fragment)
    rng.shuffle(out)
    return out


def _parts(fragments: list[PlacementFragment], nparts: int, as_list: bool) -> list[Any]:
    # part ranks are plain objects, distinct from the fragments' ranks (not recorded)
    return [
        SimpleNamespace(
            participant_id=f"p{k}",
            rank=ParallelRank(dp=k),
            fragments=list(fragments[k::nparts]) if as_list else tuple(fragments[k::nparts]),
        )
        for k in range(nparts)
    ]


def _first_reads(log: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """The log with a rank's repeated reads dropped: the reference caches rank objects per part,
    the C encoders per call; the first read of each rank, and every fragment read, must agree."""
    seen: set[str] = set()
    out = []
    for entry in log:
        if entry[0] == "r":
            if entry[1] in seen:
                continue
            seen.add(entry[1])
        out.append(entry)
    return out


def _recorded(call: Any) -> tuple[Any, list[tuple[str, str, str]]]:
    _LOG.clear()
    try:
        result: Any = ("ok", call())
    except Exception as error:  # the exact type and text are compared
        result = (type(error).__name__, str(error))
    log = list(_LOG)
    _LOG.clear()
    return result, log


def _reference_parts(parts: list[Any]) -> list[dict[str, Any]]:
    return [canonical.part_object(p.participant_id, p.rank, p.fragments) for p in parts]


def _list_order(parts: list[Any]) -> list[str]:
    order = []
    for part in parts:
        for fragment in part.fragments:
            label = object.__getattribute__(fragment, "__dict__").get("_label")
            if label is not None:
                order.append(label)
    return order


def _check(parts: list[Any]) -> None:
    # plain form (parts_json: batched when every value is exact, else in order)
    reference, reference_log = _recorded(lambda: _native.canonical_json(_reference_parts(parts)))
    outcome, log = _recorded(lambda: canonical.parts_json(parts))
    assert outcome == reference
    assert _first_reads(log) == _first_reads(reference_log)
    if reference[0] == "ok":
        # a fragment's state is its C layout's slots, read without any attribute read (no Python
        # code runs: no fragment read is observable); ranks are read through __dict__
        assert [label for kind, label, name in log if kind == "f"] == []
        assert {name for _, _, name in log} <= {"__dict__"}
    pairs = canonical._part_pairs(parts)
    for kwargs in ({}, {"types": canonical._TENSOR_TYPES}):
        for sha in (False, True):
            outcome, log = _recorded(
                lambda: _native.canonical_parts_json(pairs, prefix="[", suffix="]", sha256=sha, **kwargs)
            )
            if reference[0] == "ok":
                text = "[" + reference[1] + "]"
                assert outcome == ("ok", _native.sha256_hex(text.encode()) if sha else text)
            else:
                assert outcome == reference
            assert _first_reads(log) == _first_reads(reference_log)
    # the fused form (placement id and digest): the batched path or a decline that read nothing
    # observable, then the in-order fallback; the dict encoding reads the tensors, then the parts
    tensors = tuple(_tensor(k) for k in range(5))
    payload = {"schema": "x", "topology": {"tp_size": 2}}

    def dict_encoding(sha: bool) -> str:
        content = dict(payload)
        content["tensors"] = [canonical.tensor_object(t) for t in tensors]
        content["parts"] = _reference_parts(parts)
        return _native.canonical_sha256(content) if sha else _native.canonical_json(content)

    for sha in (False, True):
        reference_fused, reference_fused_log = _recorded(lambda: dict_encoding(sha))
        outcome, log = _recorded(
            lambda: canonical.canonical_json_with_parts(payload, parts, sha256=sha, tensors=tensors)
        )
        assert outcome == reference_fused
        assert _first_reads(log) == _first_reads(reference_fused_log)
        # without tensors
        outcome, log = _recorded(lambda: canonical.canonical_json_with_parts(payload, parts, sha256=sha))
        if reference[0] == "ok":
            assert outcome[0] == "ok"
        assert _first_reads(log) == _first_reads(reference_log)


@settings(max_examples=120, deadline=None)
@given(
    st.integers(0, 80),
    st.integers(0, 2**32),
    st.integers(1, 4),
    st.booleans(),
    st.sampled_from([0.0, 0.1, 1.0]),
    st.sampled_from([0.0, 0.5, 1.0]),
)
def test_reads_in_list_order(
    count: int, seed: int, nparts: int, as_list: bool, spy_fragments: float, spy_ranks: float
) -> None:
    _check(_parts(_values(count, seed, spy_fragments, spy_ranks), nparts, as_list))


def test_reads_in_list_order_many_batches() -> None:
    # more than one batch of the batched path, every fragment exact but some ranks spies (the
    # batched path declines at the first spy rank, having read nothing observable)
    for spy_fragments, spy_ranks in ((0.0, 1.0), (0.02, 0.0), (1.0, 0.0), (0.0, 0.3)):
        parts = _parts(_values(300, 7, spy_fragments, spy_ranks), 3, True)
        _check(parts)
        _, log = _recorded(lambda: canonical.parts_json(parts))
        if spy_fragments == 1.0:
            assert len([entry for entry in log if entry[0] == "f"]) == 0  # (slots: see _check)


def test_address_order_differs_from_list_order() -> None:
    # the premise of the tests above: the shuffled lists do not follow object addresses
    fragments = _values(200, 3, 1.0, 0.0)
    assert [id(f) for f in fragments] != sorted(id(f) for f in fragments)


class _Failing(PlacementFragment):
    """Raises on its n-th ``__dict__`` read (n counted over all instances)."""

    budget = [0]

    def __getattribute__(self, name: str) -> Any:
        if name == "__dict__":
            _Failing.budget[0] -= 1
            if _Failing.budget[0] < 0:
                raise RuntimeError("read budget exhausted")
        return super().__getattribute__(name)


@pytest.mark.parametrize("budget", [0, 1, 5, 17, 40])
def test_failing_read_is_the_reference_one(budget: int) -> None:
    base = _values(60, 11, 0.0, 0.0)
    fragments: list[PlacementFragment] = []
    for fragment in base:
        spy = object.__new__(_Failing)
        store_state(spy, field_state(fragment))  # (its C layout's slots: no __dict__ read)
        fragments.append(spy)
    parts = _parts(fragments, 2, False)
    _Failing.budget[0] = budget
    reference = _recorded(lambda: _native.canonical_json(_reference_parts(parts)))[0]
    # a fragment's state is its C layout's slots: neither the reference nor the encoders read a
    # fragment's __dict__ (the budget is never spent, nothing fails)
    _Failing.budget[0] = budget
    assert _recorded(lambda: canonical.parts_json(parts))[0] == reference
    _Failing.budget[0] = budget
    fused = _recorded(lambda: canonical.canonical_json_with_parts({"z": 1}, parts, sha256=True))[0]
    assert reference[0] == "ok" and fused[0] == "ok" and _Failing.budget[0] == budget

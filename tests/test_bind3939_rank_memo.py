"""BIND39: ``logical_target_cover``'s fragment pass keeps the route verdict of the rank object it
checked last (the fragments of a part share their rank). The fused answer must stay exactly the
separate calls' combination (``logical_target_cover`` then ``logical_routes_plain``) whatever
the ranks: shared and forged in place, one fragment's rank a forged copy, ranks alternating
between a genuine and a forged object, a rank whose instance dict is not plain."""

from __future__ import annotations

from typing import Any

import pytest

from test_native_binder_cover_routes import _agree, _world
from test_native_binder_routes import _copy


class _Key(str):
    __hash__ = str.__hash__


def _target_parts(logical: Any) -> Any:
    return logical.target_placement.parts


def _forge(logical: Any, forgery: str) -> None:
    parts = _target_parts(logical)
    frags = parts[0].fragments
    assert len(frags) >= 2 and all(f.rank is frags[0].rank for f in frags)  # the memo's case
    rank = frags[0].rank
    if forgery == "shared_rank_pp_str":
        object.__setattr__(rank, "pp", "0")
    elif forgery == "second_rank_copy_pp_str":
        object.__setattr__(frags[1], "rank", _copy(rank, pp="0"))
    elif forgery == "first_rank_copy_pp_str":
        object.__setattr__(frags[0], "rank", _copy(rank, pp="0"))
    elif forgery == "alternating":
        bad = _copy(rank, pp="0")
        for k, fragment in enumerate(frags):
            object.__setattr__(fragment, "rank", bad if k % 2 else rank)
    elif forgery == "alternating_good_copies":
        good = _copy(rank)
        for k, fragment in enumerate(frags):
            object.__setattr__(fragment, "rank", good if k % 2 else rank)
    elif forgery == "last_rank_nonplain":
        odd = _copy(rank)
        odd.__dict__[_Key("extra")] = 1
        object.__setattr__(frags[-1], "rank", odd)
    elif forgery == "shared_rank_nonplain":
        rank.__dict__[_Key("extra")] = 1
    elif forgery == "next_part_shares_forged_rank":
        bad = _copy(rank, pp="0")
        object.__setattr__(frags[-1], "rank", bad)
        other = parts[1].fragments
        object.__setattr__(other[0], "rank", bad)
    else:
        raise AssertionError(forgery)


FORGERIES = [
    "shared_rank_pp_str",
    "second_rank_copy_pp_str",
    "first_rank_copy_pp_str",
    "alternating",
    "alternating_good_copies",
    "last_rank_nonplain",
    "shared_rank_nonplain",
    "next_part_shares_forged_rank",
]


@pytest.mark.parametrize("parts", [2, 3])
@pytest.mark.parametrize("forgery", FORGERIES)
def test_rank_forgeries_agree_with_the_separate_calls(forgery: str, parts: int) -> None:
    logical, _, _ = _world(parts)
    _forge(logical, forgery)
    fused = _agree(logical)
    if forgery != "alternating_good_copies" and fused is not None:
        assert fused is False  # a forged rank on a referenced fragment: not plain


@pytest.mark.parametrize("parts", [2, 3])
def test_genuine_shared_ranks_stay_plain(parts: int) -> None:
    logical, _, _ = _world(parts)
    assert _agree(logical) is True

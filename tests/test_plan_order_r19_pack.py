"""``FragmentTable.pack_objects`` asks ahead for the next fragments and their field objects
(session 19): hints over borrowed pointers that must never read past a list that Python code run
by an earlier fragment's reads has shrunk, nor leave an exception behind. Outcomes stay those of
the generic reads (no fragment class)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import pytest

from spec_helpers import field_state

from mooncake.reshard import _native
from mooncake.reshard.weight import ParallelRank, PlacementFragment


def _fragment(k: int) -> PlacementFragment:
    return PlacementFragment(tensor_id="a", global_offset=(k,), local_shape=(1,), nbytes=4, rank=ParallelRank(tp=k),
                             placement_fragment_id=f"f{k:03d}")


class _Hostile:
    """A fragment whose state read (``__dict__``) runs Python code: it cuts ``victim``."""

    def __init__(self, victim: List[Any], keep: int, state: Dict[str, Any]) -> None:
        object.__setattr__(self, "_victim", victim)
        object.__setattr__(self, "_keep", keep)
        object.__setattr__(self, "_state", state)

    @property  # type: ignore[misc]
    def __dict__(self) -> Dict[str, Any]:  # type: ignore[override]
        victim = object.__getattribute__(self, "_victim")
        del victim[object.__getattribute__(self, "_keep"):]
        return dict(object.__getattribute__(self, "_state"))


def _outcome(fragments: List[Any], rows: Optional[List[int]], fragment_type: Any) -> Any:
    try:
        table, increasing, aliases = _native.FragmentTable.pack_objects([(64,)], {"a": 0}, fragments, rows,
                                                                         fragment_type)
    except Exception as exc:  # noqa: BLE001 - the outcome compared
        return (type(exc).__name__, str(exc))
    return (len(table), increasing, aliases)


@pytest.mark.parametrize("at", [0, 3, 10, 20, 39])
@pytest.mark.parametrize("keep_after", [0, 1, 5, 9, 17])
@pytest.mark.parametrize("with_rows", [False, True])
def test_a_list_cut_during_the_pass(at: int, keep_after: int, with_rows: bool) -> None:
    def build() -> List[Any]:
        fragments: List[Any] = [_fragment(k) for k in range(40)]
        fragments[at] = _Hostile(fragments, at + keep_after, field_state(_fragment(at)))
        return fragments

    rows = list(range(40)) if with_rows else None
    typed = _outcome(build(), rows, PlacementFragment)
    generic = _outcome(build(), rows, None)
    assert typed == generic
    if at < 39 and at + keep_after < 40:
        assert typed[0] == "IndexError"  # the next read past the cut fails, as before
    else:
        assert typed == (40, True, False)


def test_an_untouched_list_packs_as_the_generic_reads() -> None:
    fragments = [_fragment(k) for k in range(40)]
    for rows in (None, list(range(40)), list(reversed(range(40)))):
        assert _outcome(fragments, rows, PlacementFragment) == _outcome(fragments, rows, None)

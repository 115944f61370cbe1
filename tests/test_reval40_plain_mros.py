"""REVAL40: ``rs_class_attrs_known`` (the class proofs of ``revalidate_side`` and
``revalidate_coverage``) skips its walks of the class dicts' keys for an MRO tuple whose every
class was found plain before (``rs_plain_mros``, held). A class dict gets a key that is not an
exact str only when the class is made, so such a class enters an MRO only with a new MRO tuple:
here a view class found plain (remembered) is given, by ``__bases__`` assignment, a base whose
namespace holds str-subclass keys hashing as the view's field names. The pass must count the
reads as code again and decline, as for such a class met first (tests/test_lead31_view_class_keys).
Mutants: the memo keyed by the class (not its MRO tuple) and the memo always answering "plain"
fail the first case."""

from __future__ import annotations

from typing import Any

import pytest

from test_lead31_view_class_keys import _FIELDS, _ClassKey, _side_answers_of
from test_native_revalidate import _bound_plan
from test_reval29_view_reads import _Probed, _side_answers, _snapshot_copy

from mooncake.reshard.weight._planner import bound_contracts as bc


def _extra(view: Any) -> tuple[Any, ...]:
    return _snapshot_copy(view, str)


def test_a_remembered_view_class_given_a_keyed_base_counts_as_code(monkeypatch: pytest.MonkeyPatch) -> None:
    plan = _bound_plan(target_tp=4, shape=(4, 8))
    expected, _table = _side_answers(plan, _extra)
    plain_base = type("_PlainBase", (bc._AttestedView,), {"__slots__": ()})
    keyed_base = type(
        "_KeyedBase", (bc._AttestedView,), {"__slots__": (), **dict.fromkeys(_ClassKey(f"{n}~key") for n in _FIELDS)}
    )
    view_class = type("_AttestedView", (plain_base,), {"__slots__": (), "_edits": 0})
    # a first pass with the plain class: its MRO tuple is remembered plain, the answers kept
    _ClassKey.calls, _ClassKey.planted, _ClassKey.views, _ClassKey.cls = 0, 0, [], None
    answers, _table = _side_answers_of(view_class, plan, _extra, monkeypatch)
    assert answers == expected == [True, True]
    assert _ClassKey.calls == 0
    # the same class, a new MRO through the keyed base
    view_class.__bases__ = (keyed_base,)
    assert any(type(key) is _ClassKey for key in view_class.__mro__[1].__dict__)
    _ClassKey.calls, _ClassKey.planted, _ClassKey.views, _ClassKey.cls = 0, 0, [], view_class
    _Probed.calls = []
    try:
        answers, _table = _side_answers_of(view_class, plan, _extra, monkeypatch)
    finally:
        _ClassKey.cls = None
    assert _ClassKey.calls >= 2  # the base keys' __eq__ ran inside the pass
    assert _ClassKey.planted  # keys were planted in the views' tables
    assert _Probed.calls == []  # no planted key's __eq__ ran inside the pass
    assert answers[0] is None
    # back to the plain base: accepted again
    view_class.__bases__ = (plain_base,)
    answers, _table = _side_answers_of(view_class, plan, _extra, monkeypatch)
    assert answers == expected


def test_replace_twice_keeps_the_outcome() -> None:
    """The memo warm (second call) decides as the first call did, with the package's classes."""
    import dataclasses

    plan = _bound_plan(target_tp=4, shape=(4, 8))
    first = dataclasses.replace(plan)
    second = dataclasses.replace(plan)
    assert first == second == plan

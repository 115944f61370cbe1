"""A key that is not an exact str in the attested view class's dict (session 31, lead).

``revalidate_side`` reads a view's fields without counting the read as a point where Python code
may run only when the view's class is "inert" (``rs_view_inert``): every field a slot, found by
one walk of the class's MRO (``rs_slot_attrs``). The walk looks each field name up in each class
dict and refuses a class whose dict holds a key that is not an exact str (``rs_proxy_plain``): a
str subclass key hashing as a field name has its ``__eq__`` run by every lookup of that name in
that dict, the walk's own and each later generic attribute read (the interpreter's type-attribute
cache absorbs repeats only until the class is edited).

Such a class cannot reach ``revalidate_side`` through the package's own calls
(``revalidate_shapes`` declines any view whose class is not exactly ``_AttestedView``, whose dict
holds str keys only, as ``setattr`` on a class stores exact str keys), so these tests call the
pass directly, as ``test_reval29_view_reads`` does, with views of a subclass made by ``type()``
from a namespace holding such a key. Mutant checked by hand: ``rs_proxy_plain`` returning 1 (the
class taken for inert, the keys planted by the class key's ``__eq__`` probed inside the pass).
"""

from __future__ import annotations

from typing import Any

import pytest

from test_native_revalidate import _bound_plan
from test_reval29_view_reads import _Probed, _side_answers, _snapshot_copy

from mooncake.reshard.weight._planner import bound_contracts as bc


def _planted_in_front(table: Any) -> None:
    """A ``_Probed`` key in front of every key of a dict or set (in place): a probe for a key
    compares the planted one first."""
    if type(table) is dict:
        items = list(table.items())
        table.clear()
        for key, value in items:
            table[_Probed(f"{key}~planted")] = None
            table[key] = value
    elif type(table) is set:
        keys = list(table)
        table.clear()
        for key in keys:
            table.add(_Probed(f"{key}~planted"))
            table.add(key)


class _ClassKey(str):
    """``"<field>~key"`` in the view class's namespace: hashes as ``<field>``, so each lookup of
    that name in the class dict compares it (and finds nothing: ``__eq__`` is False). Each call
    edits the class: the type-attribute cache entries of the other fields' names go stale (the
    entry of the name being looked up is stored after the lookup, under the new version), so each
    next read of another field probes the dict again. The first call that finds object tables
    the pass has built (``views``' ``_objects_by_pfid``) plants ``_Probed`` keys in front of
    every key of each."""

    __slots__ = ()
    calls = 0
    planted = 0
    views: list[Any] = []
    cls: Any = None

    def __hash__(self) -> int:
        return hash(str.split(self, "~")[0])

    def __eq__(self, other: object) -> bool:
        _ClassKey.calls += 1
        if _ClassKey.cls is not None:
            type.__setattr__(_ClassKey.cls, "_edits", _ClassKey.calls)
            if not _ClassKey.planted:
                # (read through the slots: no lookup by name here)
                built = [_SLOT["_objects_by_pfid"].__get__(view) for view in _ClassKey.views]
                tables = [table for table in built if type(table) is dict and table]
                if tables:
                    for table in tables:
                        _planted_in_front(table)
                    _ClassKey.planted = len(tables)
                    _Probed.calls.clear()  # (the insertions above compare the keys there)
        return False

    __ne__ = str.__ne__


# the view fields revalidate_side reads (rs_view_slots)
_FIELDS = ("_objects_by_pfid", "objects_by_worker", "attested_pfids", "generation", "_rows")


_SLOT = {name: bc._AttestedView.__dict__[name] for name in _FIELDS}  # the member descriptors


def _keyed_class(*keys: Any) -> type:
    return type("_AttestedView", (bc._AttestedView,), {"__slots__": (), "_edits": 0, **dict.fromkeys(keys)})


def _side_answers_of(keyed: type, plan: Any, extra: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], dict[int, Any]]:
    """``_side_answers`` with its views made instances of ``keyed`` (a subclass of
    ``_AttestedView`` adding no slot: the same layout) and the class edited just before the pass
    (its first lookup of a field name probes the class dict)."""
    views_with = _side_answers.__globals__["_views_with"]

    def keyed_views(attested: dict[int, Any], extra: Any) -> dict[int, Any]:
        table = views_with(attested, extra)
        _ClassKey.views = [view for _p, _b, view in table.values()]
        for view in _ClassKey.views:
            view.__class__ = keyed
        type.__setattr__(keyed, "_edits", -1)
        return table

    with monkeypatch.context() as patch:
        patch.setitem(_side_answers.__globals__, "_views_with", keyed_views)
        return _side_answers(plan, extra)


def test_a_str_subclass_key_in_the_view_class_dict_counts_as_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """The class keys' ``__eq__`` runs inside the pass (its field reads look the names up in the
    class dict) and plants keys in the object tables the pass has built and checked: the reads
    count as code, the tables are checked again before their next probe, no planted key is
    compared, and the pass declines (the rules decide)."""
    plan = _bound_plan(target_tp=4, shape=(4, 8))
    keyed = _keyed_class(*(_ClassKey(f"{name}~key") for name in _FIELDS))
    assert any(type(key) is _ClassKey for key in keyed.__dict__)
    _ClassKey.calls, _ClassKey.planted, _ClassKey.views, _ClassKey.cls = 0, 0, [], keyed
    _Probed.calls = []

    def extra(view: Any) -> tuple[Any, ...]:
        return _snapshot_copy(view, str)

    try:
        answers, _table = _side_answers_of(keyed, plan, extra, monkeypatch)
    finally:
        _ClassKey.cls = None
    assert _ClassKey.calls >= 2  # the class keys' __eq__ ran inside the pass
    assert _ClassKey.planted  # keys were planted in the views' tables
    assert _Probed.calls == []  # no planted key's __eq__ ran inside the pass
    assert answers[0] is None


def test_an_int_key_in_the_view_class_dict_keeps_the_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """A key that is not a str at all (no ``__eq__`` of its own runs): the class is not inert,
    every field read counts as code, and the pass still accepts what it accepts with the
    package's own class."""
    plan = _bound_plan(target_tp=4, shape=(4, 8))

    def extra(view: Any) -> tuple[Any, ...]:
        return _snapshot_copy(view, str)

    expected, _table = _side_answers(plan, extra)
    answers, table = _side_answers_of(_keyed_class(7), plan, extra, monkeypatch)
    assert all(type(view).__dict__.get(7, 0) is None for _p, _b, view in table.values())
    assert answers == expected == [True, True]

"""Helpers of the F2-F5 reproducers: a small bound plan, its protocol-4 pickle record read
without running the restore, an edit, the record re-pickled and loaded for real."""

from __future__ import annotations

import os
import pickle
import sys
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pickle_cases  # noqa: E402


def plan(name: str = "tp2-to-tp3") -> Any:
    return dict(pickle_cases.seed_plans())[name]


def record(of: Any) -> list:
    """The compact record of ``of`` (protocol 4), as a list to edit."""
    split = pickle_cases.split_pickle(pickle.dumps(of, protocol=4))
    assert split is not None and split[0] == "_restore_transfer_plan"
    return list(split[1])


def forged(obj: Any, **fields: Any) -> Any:
    """A new instance of ``type(obj)`` whose dict differs in ``fields`` (what a forged
    default-pickled dict restores; ``None``-valued keys given as ``...`` are removed)."""
    clone = object.__new__(type(obj))
    if not hasattr(obj, "__dict__"):  # a value stored in a C layout: forged field by field
        for key, value in {**obj.__getstate__(), **fields}.items():
            if value is not ...:
                object.__setattr__(clone, key, value)
        return clone
    clone.__dict__.update(obj.__dict__)
    for key, value in fields.items():
        if value is ...:
            del clone.__dict__[key]
        else:
            clone.__dict__[key] = value
    return clone


def load_record(items: list, protocol: int = 4) -> Any:
    return pickle.loads(pickle_cases.repickle("_restore_transfer_plan", tuple(items), protocol))


def load_packed(items: list) -> Any:
    """The record packed as protocol 5 packs it (``_native.graph_pack``), then loaded."""
    from mooncake.reshard.weight._planner import bound_pickle

    packed = bound_pickle._graph_pack(tuple(items), bound_pickle._GRAPH_REGISTRY)
    assert packed is not None
    return pickle.loads(pickle_cases.repickle("_restore_packed_transfer_plan", packed, 5))


def load_field_state(state: dict) -> Any:
    """The field-state format (a new ``TransferPlan``, then ``TransferPlan.__setstate__``)."""
    from mooncake.reshard.weight import TransferPlan

    class _State:
        def __reduce__(self) -> Any:
            return (object.__new__, (TransferPlan,), state)

    return pickle.loads(pickle.dumps(_State(), protocol=4))


def outcome(label: str, load: Callable[[], Any]) -> str:
    try:
        load()
    except Exception as exc:  # noqa: BLE001
        import traceback

        last = traceback.extract_tb(exc.__traceback__)[-1]
        site = "/".join(last.filename.replace("\\", "/").split("/")[-2:])
        text = f"{label}: {type(exc).__name__}: {exc}  [{site}:{last.lineno} {last.name}]"
    else:
        text = f"{label}: accepted"
    print(text)
    return text.split("  [")[0]

"""The outcomes in tests/data/bound_forgeries_r16.json and the script that wrote them: a bound plan
(make_bound_pickles_r16.py) with one field of one bound fragment forged (set with
``object.__setattr__`` to a hostile or another fragment's value, or removed: its instance-dict key
deleted on the dict-backed class, its slot emptied on the C layout), for the first and last
operation's target and source, then copied, replaced and pickled. Written once by the build
before the layout change (``PYTHONPATH=tests python tests/data/make_bound_forgeries_r16.py OUT``);
tests/test_bound_fragment_layout.py imports ``outcomes`` and compares."""

import copy
import dataclasses
import importlib.util
import json
import pickle
import sys
from pathlib import Path
from typing import Any, Dict, List

_spec = importlib.util.spec_from_file_location("make_bound_pickles_r16", Path(__file__).parent / "make_bound_pickles_r16.py")
assert _spec is not None and _spec.loader is not None
_maker = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_maker)

NAMES = ("placement", "binding", "instance_id", "runtime_lease_id", "lease_generation", "owner", "attestation")
_GONE = object()
# (label, value); "other": the field of another operation's target
VALUES: List[Any] = [
    ("gone", _GONE), ("None", None), ("5", 5), ("2**64", 2**64), ("-1", -1), ("1.0", 1.0), ("True", True),
    ("''", ""), ("'x'", "x"), ("()", ()), ("[1]", [1]), ("object()", object()), ("other", None),
]


def _with_fragment(plan: Any, index: int, side: str, fragment: Any) -> Any:
    op = copy.copy(plan.operations[index])
    object.__setattr__(op, side, fragment)
    forged = copy.copy(plan)
    object.__setattr__(forged, "operations", plan.operations[:index] + (op,) + plan.operations[index + 1 :])
    return forged


def _outcome(function: Any) -> str:
    try:
        function()
    except Exception as exc:  # the outcome is recorded, whatever it is
        return f"{type(exc).__name__}: {exc}"
    return "accepted"


def outcomes() -> Dict[str, List[str]]:
    plan = _maker.bound_plan()
    other = plan.operations[1].target
    result: Dict[str, List[str]] = {}
    for side in ("target", "source"):
        for index in (0, len(plan.operations) - 1):
            for field in NAMES:
                for label, value in VALUES:
                    if label == "other":
                        value = getattr(other, field)
                    fragment = copy.copy(getattr(plan.operations[index], side))
                    if value is _GONE:
                        if hasattr(fragment, "__dict__"):
                            del fragment.__dict__[field]
                        else:
                            object.__delattr__(fragment, field)
                    else:
                        object.__setattr__(fragment, field, value)
                    forged = _with_fragment(plan, index, side, fragment)
                    result[f"{side}[{index}].{field}={label}"] = [
                        _outcome(lambda: copy.copy(forged)),
                        _outcome(lambda: dataclasses.replace(forged)),
                        _outcome(lambda: pickle.loads(pickle.dumps(forged))),
                    ]
    return result


if __name__ == "__main__":
    with open(sys.argv[1], "w", encoding="ascii") as handle:
        json.dump({"outcomes": outcomes(), "version": sys.version}, handle, indent=1)
    print("ok", sys.version)

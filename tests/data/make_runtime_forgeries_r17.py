"""The outcomes in tests/data/runtime_forgeries_r17.json and the script that wrote them: a bound plan
(make_bound_pickles_r16.py) whose first or last operation's target or source holds a runtime
binding with one field forged (set with ``object.__setattr__`` to a hostile value or another
fragment's, or removed: its instance-dict key deleted on the dict-backed RuntimeBindingFragment,
its slot emptied on the C layout), then copied, replaced and pickled. Written once by the build
before the layout change (``PYTHONPATH=tests python tests/data/make_runtime_forgeries_r17.py OUT``,
at ecb3f9d); tests/test_runtime_fragment_layout.py imports ``outcomes`` and compares."""

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

NAMES = (
    "placement_fragment_id", "fragment_id", "address", "nbytes", "worker_id", "endpoint", "device", "itemsize",
    "local_shape", "strides_bytes", "storage_address", "storage_nbytes", "storage_offset_bytes", "owner",
)
_GONE = object()
# (label, value); "other": the field of another operation's target binding
VALUES: List[Any] = [
    ("gone", _GONE), ("None", None), ("5", 5), ("2**64", 2**64), ("-1", -1), ("True", True),
    ("''", ""), ("'x'", "x"), ("()", ()), ("(1,)", (1,)), ("other", None),
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
    other = plan.operations[1].target.binding
    result: Dict[str, List[str]] = {}
    for side in ("target", "source"):
        for index in (0, len(plan.operations) - 1):
            for field in NAMES:
                for label, value in VALUES:
                    if label == "other":
                        value = getattr(other, field)
                    bound = getattr(plan.operations[index], side)
                    binding = copy.copy(bound.binding)
                    if value is _GONE:
                        if hasattr(binding, "__dict__"):
                            del binding.__dict__[field]
                        else:
                            object.__delattr__(binding, field)
                    else:
                        object.__setattr__(binding, field, value)
                    fragment = copy.copy(bound)
                    object.__setattr__(fragment, "binding", binding)
                    forged = _with_fragment(plan, index, side, fragment)
                    result[f"{side}[{index}].binding.{field}={label}"] = [
                        _outcome(lambda: copy.copy(forged)),
                        _outcome(lambda: dataclasses.replace(forged)),
                        _outcome(lambda: pickle.loads(pickle.dumps(forged))),
                    ]
    return result


if __name__ == "__main__":
    with open(sys.argv[1], "w", encoding="ascii") as handle:
        json.dump({"outcomes": outcomes(), "version": sys.version}, handle, indent=1)
    print("ok", sys.version)

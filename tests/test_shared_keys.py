"""Instance dicts filled by item (the C core's ``mr_new_instance`` + ``PyDict_SetItem``, and the
``self.__dict__[name] = value`` constructors) stay key-sharing on every supported CPython
(``mooncake_reshard/_shared_keys.py``).

On CPython 3.10 such a dict shares its class's keys only once the attribute path filled them
(``share_field_keys`` does so at import); before, every such dict was a combined dict with its own
key table (640 against 232 bytes for a TransferRegion). On CPython 3.11+ the helper does nothing
and the sizes are what they were. The same assertions run on both: a dict built by item in field
order is exactly as large as the dict ``__init__`` (``object.__setattr__`` per field) gives.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from mooncake.reshard._shared_keys import share_field_keys

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
PY310 = sys.version_info < (3, 11)


def _fresh_class(count: int, name: str = "Probe") -> Any:
    namespace = {"__annotations__": {f"f{i}": "int" for i in range(count)}, "__module__": __name__}
    return dataclasses.dataclass(frozen=True)(type(name, (), namespace))


def _names(cls: Any) -> List[str]:
    return [f.name for f in dataclasses.fields(cls)]


def _by_item(cls: Any, names: List[str], value: int = 7) -> Any:
    """What mr_new_instance + PyDict_SetItem do: the instance's own dict, filled key by key."""
    obj = object.__new__(cls)
    state = obj.__dict__  # PyObject_GenericGetDict
    for name in names:
        state[name] = value  # PyDict_SetItem
    return obj


def _by_attribute(cls: Any, names: List[str], value: int = 7) -> Any:
    """What a dataclass __init__ does: object.__setattr__ per field, in field order."""
    obj = object.__new__(cls)
    for name in names:
        object.__setattr__(obj, name, value)
    return obj


def _size(obj: Any) -> int:
    """Compare two of these only after both instances exist: on CPython 3.11+ the reported size
    of a key-sharing dict follows the class's shared keys, which shrink the values arrays of
    instances made later (one slot per new instance, down to a floor)."""
    return sys.getsizeof(obj.__dict__)


@pytest.mark.parametrize("count", [4, 6, 11, 16, 30])
def test_by_item_in_field_order_is_as_small_as_init(count: int) -> None:
    cls = _fresh_class(count)
    share_field_keys(cls)
    names = _names(cls)
    built = [_by_item(cls, names) for _ in range(3)]
    reference = cls(*([7] * count))
    assert _by_attribute(cls, names) == reference
    for obj in built:
        assert list(vars(obj)) == names
        assert obj == reference
        assert _size(obj) == _size(reference)


@pytest.mark.parametrize("count", [6, 11, 16])
def test_without_the_helper(count: int) -> None:
    """The mechanism: 3.10 shares by-item keys only after the attribute path filled them; 3.11+
    always does (the helper changes nothing there)."""
    cls = _fresh_class(count)
    names = _names(cls)
    cold = _by_item(cls, names)
    reference = cls(*([7] * count))
    after_init = _by_item(cls, names)
    assert cold == reference == after_init
    assert _size(after_init) == _size(reference)
    if PY310:
        assert _size(cold) > _size(reference)  # combined: its own key table
    else:
        assert _size(cold) == _size(reference)


def test_helper_is_idempotent_and_a_no_op_after_310() -> None:
    from mooncake.reshard import _shared_keys

    assert _shared_keys._NEEDED is PY310
    cls = _fresh_class(11)
    share_field_keys(cls)
    share_field_keys(cls)
    obj = _by_item(cls, _names(cls))
    reference = cls(*([7] * 11))
    assert _size(obj) == _size(reference)


def test_other_orders_extra_keys_and_subclasses_stay_correct() -> None:
    cls = _fresh_class(11, "Forgeable")
    share_field_keys(cls)
    names = _names(cls)
    reference = cls(*range(11))
    keep = [_by_item(cls, names) for _ in range(50)]  # instances sharing the keys stay alive
    reordered = object.__new__(cls)
    for name in reversed(names):
        reordered.__dict__[name] = names.index(name)
    assert reordered == reference and list(vars(reordered)) == names[::-1]
    # a forged extra attribute (attribute path and by item)
    forged = cls(*range(11))
    object.__setattr__(forged, "forged", 1)
    assert forged == reference and vars(forged)["forged"] == 1 and list(vars(forged))[:11] == names
    by_item = _by_item(cls, names + ["other"], 3)
    assert vars(by_item) == {**{n: 3 for n in names}, "other": 3}
    # many forged names: CPython 3.10 may stop sharing this class's keys; values stay exact
    for i in range(40):
        extra = cls(*range(11))
        object.__setattr__(extra, f"forged{i}", i)
        assert extra == reference and vars(extra)[f"forged{i}"] == i
    object.__delattr__(extra, "forged39")
    assert "forged39" not in vars(extra)
    later = _by_item(cls, names)
    assert later == cls(*([7] * 11)) and list(vars(later)) == names
    assert _size(later) <= _size(keep[0]) * 4
    assert all(list(vars(k)) == names for k in keep)

    class Sub(cls):  # type: ignore[misc, valid-type]
        pass

    sub_cold = _by_item(Sub, names)
    sub_init = Sub(*([7] * 11))
    assert type(sub_cold) is Sub and vars(sub_cold) == vars(sub_init)
    share_field_keys(Sub)
    assert vars(_by_item(Sub, names)) == vars(sub_init)


# ---- the package's own classes, through bind and pickle restore, in a fresh interpreter ---------

# Every class whose instances the pipeline (layers=1, experts=48) builds by item.
_CHECKED = (
    "PlacementFragment",
    "RuntimeBindingFragment",
    "TransferRegion",
    "PlacementExecutorPlan",
    "BoundWeightFragment",
    "RuntimeFragmentSnapshot",
    "ExecutorTransferPlan",
    "RuntimeBindingEvidence",
    "WeightPlacementPart",
    "ParallelTopology",
)

# Classes stored in a C-owned layout (``mooncake_reshard/_layout.py``): their instances are
# checked to have no dict and the size of an instance built by ``__init__``.
_LAYOUT_CLASSES = (
    "RuntimeFragmentSnapshot",
    "BoundWeightFragment",
    "TransferRegion",
    "PlacementFragment",
    "RuntimeBindingFragment",
)

_CHILD = r"""
import dataclasses, json, pickle, sys, types
sys.path.insert(0, BENCHMARKS)
import _workloads as w
from mooncake.reshard.weight import bind_logical_transfer_plan, plan_placement_transfer
from mooncake.reshard.weight._planner.contracts import PlanningLimits

inputs = w.independent_experts(layers=1, experts=48)
source, target = w.assemble(inputs.source), w.assemble(inputs.target)
logical = plan_placement_transfer(source, target, planning_limits=PlanningLimits())
source_bindings = w.bindings(source, prefix="src", window=0)
target_bindings = w.bindings(target, prefix="dst", window=4096)
plan = bind_logical_transfer_plan(logical, target_bindings, source_bindings=source_bindings)
restored = pickle.loads(pickle.dumps(plan, protocol=pickle.HIGHEST_PROTOCOL))

def state_of(obj):
    # a value stored in a C layout has no __dict__: its fields (pickle state) in order
    return obj.__dict__ if hasattr(obj, "__dict__") else obj.__getstate__()

def sizes(obj):
    probe = object.__new__(type(obj))  # what __init__ stores: the fields, in order, as attributes
    state = state_of(obj)
    for field in dataclasses.fields(obj):
        object.__setattr__(probe, field.name, state[field.name])
    if not hasattr(obj, "__dict__"):  # a C layout: the instance is all there is
        return sys.getsizeof(obj), sys.getsizeof(probe)
    # both measured after the probe exists: 3.11+ reports a shared-keys dict's size from the
    # class's current shared keys, which each new instance may shrink
    return sys.getsizeof(obj.__dict__), sys.getsizeof(probe.__dict__)

report = {}
for stage, roots in (("pipeline", [inputs, source, target, logical, source_bindings, target_bindings, plan]),
                     ("restored", [restored])):
    seen, stack, found = set(), list(roots), {}
    while stack:
        obj = stack.pop()
        if id(obj) in seen or obj is None or isinstance(obj, (str, int, float, bytes, type)):
            continue
        seen.add(id(obj))
        if isinstance(obj, (tuple, list, set, frozenset)):
            stack.extend(obj)
        elif isinstance(obj, (dict, types.MappingProxyType)):
            stack.extend(obj.keys()); stack.extend(obj.values())
        elif dataclasses.is_dataclass(obj):
            state = state_of(obj)
            names = [f.name for f in dataclasses.fields(obj)]
            if list(state) == names:  # built with exactly the fields (extra cached keys: not ours)
                entry = found.setdefault(type(obj).__name__, [0, [], hasattr(obj, "__dict__")])
                if entry[2] != hasattr(obj, "__dict__"):
                    entry[2] = None  # both layouts met
                entry[0] += 1
                size, expected = sizes(obj)
                if size != expected and len(entry[1]) < 3:
                    entry[1].append([size, expected])
            stack.extend(state.values())
    report[stage] = found
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def child_report() -> Dict[str, Dict[str, Tuple[int, List[List[int]]]]]:
    code = (
        f"BENCHMARKS = {str(BENCHMARKS)!r}\n" + _CHILD
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ), timeout=600
    )
    assert done.returncode == 0, done.stderr[-4000:]
    report: Dict[str, Dict[str, Tuple[int, List[List[int]]]]] = json.loads(done.stdout)
    return report


@pytest.mark.parametrize("stage", ["pipeline", "restored"])
@pytest.mark.parametrize("name", _CHECKED)
def test_pipeline_instances_are_as_small_as_init_built(
    child_report: Dict[str, Dict[str, Tuple[int, List[List[int]]]]], stage: str, name: str
) -> None:
    count, mismatches, with_dict = child_report[stage].get(name, (0, [], None))
    if stage == "pipeline" or name != "PlacementExecutorPlan":  # restored plans have no logical executors
        assert count > 0, sorted(child_report[stage])
        # RuntimeFragmentSnapshot, BoundWeightFragment, TransferRegion, PlacementFragment and
        # RuntimeBindingFragment are stored in their C layouts (no instance dict), the others in dicts
        assert with_dict is (name not in _LAYOUT_CLASSES), (name, with_dict)
    assert mismatches == [], f"{name}: {count} instances, sizes (by item, init-built): {mismatches}"

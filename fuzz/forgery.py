"""Forgery fuzzer: one field of one object in a public call's inputs replaced or removed.

Values restored by default pickling (spec §13) or forged in place (``object.__new__`` plus a
dict, ``object.__setattr__``) never ran their own checks. Every public call that reads them
must refuse them with ``ValueError`` (spec §1.4) or accept them; any other exception is a
finding (F10, F11 were found this way). One case picks a target, an object reachable from its
inputs, one of that object's fields and a hostile value (or removal), then makes the call:

* ``logical``: a ``LogicalTransferPlan`` through ``dataclasses.replace`` and its field-state
  pickle (``__setstate__`` then ``__post_init__``), forging anything in its state;
* ``bind``: ``bind_logical_transfer_plan`` with the logical plan (itself or anything it holds),
  a target or source binding manifest, or a runtime fragment forged;
* ``bindings``: a binding manifest restored from a damaged default pickle, through
  ``validate_runtime_binding(s)`` and ``resolve_executor_plan(s)``;
* ``plan``: the planning entry points with a placement (or anything it holds) forged.

One documented exception is not a finding: a plan container (``operations``, the executor and
tensor tuples) replaced by a value that is not iterable keeps Python's ``TypeError``, as the
constructor's ``tuple()`` step raises it (F11).

    python fuzz/forgery.py --seconds 600 [--seed N] [--target bind]
    python fuzz/forgery.py --case SEED            # replays one case, with its traceback

The object walk and the forging are ``tests/test_forged_properties.py``'s (its property tests
run these targets at small example counts in the default suite).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import pickle
import random
import sys
import time
import traceback
from typing import Any, Callable, Dict, List, Optional, Tuple

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(_HERE), "tests"))
sys.path.insert(0, os.path.join(_HERE, "findings"))
sys.path.insert(0, _HERE)

import test_forged_properties as F  # noqa: E402

TARGETS = ("logical", "bind", "bindings", "plan")


class _StrSubclass(str):
    pass


def hostile_values() -> List[Any]:
    from mooncake.reshard.weight import ParallelRank

    return [
        F._GONE, None, True, 0, -1, 1.5, float("inf"), 2**70, -(2**70), 2**63, 2**64, -(2**63) - 1, "", "x",
        b"x", (), (None,), ("x",), (1.5,), (2**70,), (0,), (1, 1), (-1,), ((0, 1),), [1], [], {}, {"a": 1},
        frozenset({1}), ParallelRank(), (ParallelRank(),), object, _StrSubclass("x"),
    ]


_KINDS = F._CLASSES | {"LogicalTransferPlan", "WeightRuntimeBindingManifest", "RuntimeBindingFragment"}
_CONTAINERS = ("operations", "source_executors", "target_executors", "source_tensors", "target_tensors")


class _World:
    """The inputs every target forges, built once per process."""

    def __init__(self) -> None:
        from memory_executor import tp_placement  # type: ignore[import-not-found]
        from test_binding_attacks import World  # type: ignore[import-not-found]

        self.world = World()
        self.plan = self.world.bind()
        self.placements = (tp_placement(2, prefix="s", dp=2), tp_placement(3, prefix="t"))


_WORLD: List[_World] = []


def _world() -> _World:
    if not _WORLD:
        _WORLD.append(_World())
    return _WORLD[0]


def _pick(rng: random.Random, roots: Tuple[Any, ...]) -> Optional[Tuple[Any, str, Any]]:
    """(object, field, hostile value) for one case, or None when the object has no field."""
    candidates = F._collect(roots, _KINDS, follow=_KINDS)
    obj = rng.choice(candidates)
    fields = [name for name in F._state(obj) if not name.startswith("_")]
    if not fields:
        return None
    return obj, rng.choice(fields), rng.choice(hostile_values())


def _substituted(roots: Tuple[Any, ...], obj: Any, forged: Any) -> List[Any]:
    memo: Dict[int, Any] = {}
    return [F._substitute(root, obj, forged, memo, attestations=False, follow=_KINDS) for root in roots]


def _calls(target: str, rng: random.Random) -> Tuple[str, List[Tuple[str, Callable[[], Any]]], Any, str]:
    """(label, [(call name, call)], forged object, forged field) of one case of ``target``."""
    w = _world()
    if target == "logical":
        from mooncake.reshard.weight import LogicalTransferPlan

        plan = w.world.logical
        state = {k: v for k, v in plan.__dict__.items() if k != "_operation_views"}
        names = tuple(state)
        picked = _pick(rng, tuple(state[name] for name in names))
        if picked is None:
            return "", [], None, ""
        obj, field, hostile = picked
        values = _substituted(tuple(state[name] for name in names), obj, F._forge(obj, field, hostile))
        changes = {n: v for n, v in zip(names, values) if v is not state[n]}
        forged_state = {**state, **changes}
        init = {f.name for f in dataclasses.fields(LogicalTransferPlan) if f.init}

        class _State:
            def __reduce__(self) -> Any:
                return (object.__new__, (LogicalTransferPlan,), forged_state)

        calls = [("field state", lambda: pickle.loads(pickle.dumps(_State(), protocol=4)))]
        replaced = {n: v for n, v in changes.items() if n in init}
        if replaced:
            calls.append(("replace", lambda: dataclasses.replace(plan, **replaced)))
        return f"{type(obj).__name__}.{field}={hostile!r}", calls, obj, field
    if target == "bind":
        roots = (w.world.logical, tuple(w.world.target_bindings), tuple(w.world.source_bindings))
        picked = _pick(rng, roots)
        if picked is None:
            return "", [], None, ""
        obj, field, hostile = picked
        logical, targets, sources = _substituted(roots, obj, F._forge(obj, field, hostile))
        calls = [("bind", lambda: w.world.bind(targets, logical=logical, source_bindings=sources))]
        return f"{type(obj).__name__}.{field}={hostile!r}", calls, obj, field
    if target == "bindings":
        from mooncake.reshard.weight import validate_runtime_binding, validate_runtime_bindings
        from mooncake.reshard.weight.planner import resolve_executor_plan, resolve_executor_plans

        side = rng.choice(("target", "source"))
        bindings = tuple(w.world.target_bindings if side == "target" else w.world.source_bindings)
        placement = w.world.target if side == "target" else w.world.source
        index = rng.randrange(len(bindings))
        binding = bindings[index]
        field = rng.choice(list(binding.__dict__))
        hostile = rng.choice(hostile_values())
        try:  # what a damaged default pickle restores
            restored = pickle.loads(pickle.dumps(F._forge(binding, field, hostile)))
        except Exception:  # noqa: BLE001 - the value cannot be pickled: nothing to restore
            return "", [], None, ""
        given = bindings[:index] + (restored,) + bindings[index + 1 :]
        calls = [
            ("validate_runtime_binding", lambda: validate_runtime_binding(placement, restored)),
            ("validate_runtime_bindings", lambda: validate_runtime_bindings(placement, given)),
            ("resolve_executor_plan", lambda: resolve_executor_plan(w.plan, placement, restored, side)),
            ("resolve_executor_plans", lambda: resolve_executor_plans(w.plan, placement, restored, side)),
        ]
        return f"{side} binding {field}={hostile!r}", calls, binding, field
    from mooncake.reshard.weight import plan_placement_transfer, plan_placement_transfer_to_local_target

    picked = _pick(rng, w.placements)
    if picked is None:
        return "", [], None, ""
    obj, field, hostile = picked
    source, target_placement = _substituted(w.placements, obj, F._forge(obj, field, hostile))
    participant = w.placements[1].parts[0].participant_id
    calls = [
        ("plan_placement_transfer", lambda: plan_placement_transfer(source, target_placement)),
        (
            "plan_placement_transfer_to_local_target",
            lambda: plan_placement_transfer_to_local_target(source, target_placement, participant),
        ),
    ]
    return f"{type(obj).__name__}.{field}={hostile!r}", calls, obj, field


def run_case(case_seed: int, targets: Tuple[str, ...] = TARGETS, verbose: bool = False) -> List[str]:
    """The findings of one case (each ``call: label: exception``)."""
    rng = random.Random(case_seed)
    target = rng.choice(targets)
    label, calls, obj, field = _calls(target, rng)
    findings = []
    for name, call in calls:
        try:
            call()
        except ValueError as exc:
            if type(exc) is ValueError:
                continue
            problem: BaseException = exc
        except pickle.PicklingError:
            continue  # the forged value cannot be written: nothing is restored
        except TypeError as exc:
            container = type(obj).__name__ == "LogicalTransferPlan" and field in _CONTAINERS
            if container and "not iterable" in str(exc):
                continue  # (the documented TypeError, F11)
            problem = exc
        except Exception as exc:  # noqa: BLE001 - every other exception is a finding
            problem = exc
        else:
            continue
        findings.append(f"{name}: {label}: {type(problem).__name__}: {problem}")
        if verbose:
            traceback.print_exception(problem)
    return findings


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--target", choices=TARGETS + ("all",), default="all")
    parser.add_argument("--case", type=int, default=None, help="replay one case seed, with tracebacks")
    args = parser.parse_args(argv)
    targets = TARGETS if args.target == "all" else (args.target,)
    if args.case is not None:
        findings = run_case(args.case, targets, verbose=True)
        print("\n".join(findings) or "no finding")
        return 1 if findings else 0
    seed = random.randrange(2**32) if args.seed is None else args.seed
    rng = random.Random(seed)
    deadline = time.monotonic() + args.seconds
    cases, seen = 0, set()
    while time.monotonic() < deadline:
        case_seed = rng.randrange(2**63)
        cases += 1
        for finding in run_case(case_seed, targets):
            key = finding.split(":")[:3]
            if tuple(key) not in seen:
                seen.add(tuple(key))
                print(f"FINDING (--case {case_seed}): {finding[:300]}", flush=True)
    print(f"forgery: {cases} cases, seed {seed}, " + (f"{len(seen)} findings" if seen else "no findings"))
    return 1 if seen else 0


if __name__ == "__main__":
    sys.exit(main())

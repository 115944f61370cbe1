"""Shared pieces of the forgery tests of the carried facts and the sealed gate (the session 22
and 23 audits): a small bound world, an outcome recorder, a hooked ``__getattribute__`` that
runs a forgery once from inside a bind call, and the runtime fragment edits step 6 proves."""

from __future__ import annotations

import copy
import dataclasses
import sys
from typing import Any, Callable

from memory_executor import HostMemory, host_bindings, tp_placement

from mooncake.reshard import _native
from mooncake.reshard.weight import bind_logical_transfer_plan, plan_placement_transfer


def world(names: tuple[str, ...] = ("wa", "wb")) -> tuple[Any, Any, Any, HostMemory]:
    """TP2 x DP2 -> TP2 over ``names`` (4x6 tensors): the logical plan, the target and source
    bindings (host memory, source filled) and the memory."""
    source = tp_placement(2, prefix="s", dp=2, shape=(4, 6), tensors=names)
    target = tp_placement(2, prefix="t", shape=(4, 6), tensors=names)
    memory = HostMemory()
    logical = plan_placement_transfer(source, target)
    return logical, host_bindings(target, memory, prefix="dst"), host_bindings(source, memory, prefix="src"), memory


def sized_world(tensors: int) -> tuple[Any, Any, Any, HostMemory]:
    """``world`` over ``tensors`` tensors named w000, w001, ..."""
    return world(tuple(f"w{index:03d}" for index in range(tensors)))


def bindings_sharing_instances(targets: Any, sources: Any, *, in_place: bool) -> tuple[Any, ...]:
    """The target bindings, each given the instance id of the source binding at its position;
    ``in_place``: each target fragment also bound to the storage, worker and device of the source
    fragment at its position (an in-place reshard, which spec §12.5 refuses)."""
    shared = []
    for mine, theirs in zip(targets, sources):
        fragments = mine.fragments
        if in_place:
            fragments = tuple(
                dataclasses.replace(
                    fragment,
                    address=other.address,
                    storage_address=other.storage_address,
                    storage_nbytes=other.storage_nbytes,
                    storage_offset_bytes=other.storage_offset_bytes,
                    worker_id=other.worker_id,
                    device=other.device,
                )
                for fragment, other in zip(mine.fragments, theirs.fragments)
            )
        shared.append(dataclasses.replace(mine, instance_id=theirs.instance_id, fragments=fragments))
    return tuple(shared)


def outcome(call: Callable[[], Any]) -> Any:
    """``call()``'s result, or ``(exception class name, message)``."""
    try:
        return call()
    except Exception as exc:
        return (type(exc).__name__, str(exc))


def profiled_outcome(hook: Callable[[Any, str, Any], Any], call: Callable[[], Any]) -> Any:
    """``outcome(call)`` with ``hook`` as this thread's profile function (the previous one
    restored afterwards)."""
    previous = sys.getprofile()
    sys.setprofile(hook)
    try:
        return outcome(call)
    finally:
        sys.setprofile(previous)


def tp3_bound_plan(tensors: tuple[str, ...]) -> tuple[Any, Any, HostMemory]:
    """TP2 x DP2 -> TP3 over ``tensors`` (4x6 each), bound to host memory: the logical plan,
    the bound plan and the memory (the bind_regions tests' world)."""
    source = tp_placement(2, prefix="s", dp=2, shape=(4, 6), tensors=tensors)
    target = tp_placement(3, prefix="t", shape=(4, 6), tensors=tensors)
    logical = plan_placement_transfer(source, target)
    memory = HostMemory()
    plan = bind_logical_transfer_plan(
        logical,
        host_bindings(target, memory, prefix="dst"),
        source_bindings=host_bindings(source, memory, prefix="src"),
    )
    return logical, plan, memory


def frame_named(frame: Any, name: str) -> Any:
    """The first frame from ``frame`` outwards running a function called ``name`` (or None)."""
    while frame is not None and frame.f_code.co_name != name:
        frame = frame.f_back
    return frame


def hooked_getattribute(table: dict[str, Any], field: str) -> Callable[[Any, str], Any]:
    """A ``__getattribute__`` whose read of ``field`` runs ``table['hook']()`` once, at the first
    read for which ``table['when'](caller's frame)`` is true (then sets ``table['done']``)."""

    def getattribute(self: Any, name: str) -> Any:
        if name == field:
            hook = table.get("hook")
            if hook is not None and table["when"](sys._getframe(1)):
                table["hook"] = None
                table["done"] = True
                hook()
        return object.__getattribute__(self, name)

    return getattribute


def first_target_runtime_fragment(bind_locals: dict[str, Any]) -> Any:
    """The first runtime fragment of the first target attestation in a bind call's frame (the
    adapter's own object, validated at step 6)."""
    return next(iter(bind_locals["target_attestations"].values())).evidence.fragments[0]


def storage_offset_moved(fragment: Any) -> None:
    object.__setattr__(fragment, "storage_offset_bytes", fragment.storage_offset_bytes + 2)


def strides_doubled(fragment: Any) -> None:
    object.__setattr__(fragment, "strides_bytes", tuple(2 * stride for stride in fragment.strides_bytes))


STORAGE_OFFSET_MESSAGE = "runtime address must equal storage_address plus storage_offset_bytes"


def strides_message(fragment_id: str) -> str:
    return f"runtime binding stride does not describe a canonical contiguous view: {fragment_id}"


def with_source_tensor_class(logical: Any, cls: type) -> Any:
    """A copy of ``logical`` whose ``source_tensors`` are copies made of class ``cls`` (same fields)."""
    plan = copy.copy(logical)
    tensors = []
    for tensor in logical.source_tensors:
        hooked = copy.copy(tensor)
        object.__setattr__(hooked, "__class__", cls)
        tensors.append(hooked)
    object.__setattr__(plan, "source_tensors", tuple(tensors))
    return plan


def run_armed(table: dict[str, Any], hook: Callable[[], None], when: Callable[[Any], bool], call: Callable[[], Any]) -> Any:
    """``call()`` with ``table`` armed (see ``hooked_getattribute``); asserts the hook ran, and
    disarms ``table`` whatever happens."""
    table.update(hook=hook, when=when, done=False)
    try:
        result = call()
    finally:
        done = table.pop("done")
        table.clear()
    assert done, "the hook did not run"
    return result


def maybe_profiled(profiled: bool, call: Callable[[], Any]) -> Any:
    """``call()``, under a no-op profile hook when ``profiled`` (which unseals a bind call or a
    restore: every rule runs again, no carried fact is taken)."""
    previous = sys.getprofile()
    if profiled:
        sys.setprofile(lambda frame, event, arg: None)
    try:
        return call()
    finally:
        sys.setprofile(previous)


# -- instance dicts re-keyed (MEMO36, FRAG37: the values a pass takes in the walk that checks a
# dict, by identity with the interned names, against the lookup of a name met otherwise) -------

COLLIDED_CALLS: list[int] = []


# Calls of LoudKey.__eq__ (clear before the call under test; an empty list after it: no key
# comparison ran).
EQ_CALLS: list[str] = []


class LoudKey(str):
    """A str subclass key whose comparison records that it ran (in ``EQ_CALLS``)."""

    def __eq__(self, other: object) -> bool:
        EQ_CALLS.append(str(self))
        return str.__eq__(self, other)

    __hash__ = str.__hash__


class CollidingKey(str):
    """A key equal to nothing, hashed as ``name``; its ``__eq__`` records (COLLIDED_CALLS) that
    it ran."""

    def __new__(cls, name: str) -> "CollidingKey":
        made = super().__new__(cls, "colliding-" + name)
        made._target = hash(name)  # type: ignore[attr-defined]
        return made

    def __hash__(self) -> int:
        return self._target  # type: ignore[attr-defined,no-any-return]

    def __eq__(self, other: object) -> bool:
        COLLIDED_CALLS.append(1)
        return False


def rekey_dict(obj: Any, fresh: bool, edit: Any = None, planted: Any = None) -> dict[Any, Any]:
    """Re-make obj's instance dict: keys as equal non-identical strs when fresh; edit = (name,
    value) set under that key; planted: an extra key. Returns the original items to restore."""
    d = obj.__dict__
    items = dict(d)
    d.clear()
    for key, value in items.items():
        new_key = "".join(list(key)) if fresh else key
        if fresh:
            assert new_key == key and new_key is not key
        if edit is not None and key == edit[0]:
            value = edit[1]
        d[new_key] = value
    if planted is not None:
        d[planted] = None
    return items


def restore_dict(obj: Any, items: dict[Any, Any]) -> None:
    d = obj.__dict__
    d.clear()
    d.update(items)


def rekeyed_answers(
    obj: Any,
    run: Callable[[], Any],
    rekey: Callable[..., dict[Any, Any]] = rekey_dict,
    edit: Any = None,
    planted: Any = None,
) -> list[Any]:
    """run()'s outcomes with obj's instance dict re-made by ``rekey`` (rekey_dict or a caller's
    variant; ``edit``, ``planted`` as there), first under its own keys, then under equal new ones;
    a planted CollidingKey's ``__eq__`` must never run."""
    answers = []
    for fresh in (False, True):
        items = rekey(obj, fresh, edit=edit, planted=planted)
        COLLIDED_CALLS.clear()  # (planting it compared it with the field's key)
        try:
            answers.append(run())
        finally:
            restore_dict(obj, items)
        if planted is not None:
            assert COLLIDED_CALLS == [], planted
    return answers


def replace_pass_arguments(plan: Any, name: str, replaces: int = 1) -> tuple[Any, ...]:
    """The arguments of the last ``_native.<name>`` call made by ``replaces`` runs of
    ``dataclasses.replace(plan)`` (the pass is spied on, then put back)."""
    seen: list[tuple[Any, ...]] = []
    real = getattr(_native, name)

    def spy(*args: Any) -> Any:
        seen.append(args)
        return real(*args)

    setattr(_native, name, spy)
    try:
        for _ in range(replaces):
            dataclasses.replace(plan)
    finally:
        setattr(_native, name, real)
    assert seen, f"the fast path calls {name}"
    return seen[-1]


def with_field(obj: Any, field: str, value: Any, call: Callable[[], Any]) -> Any:
    """``call()`` with ``obj.field`` set to ``value`` through ``object.__setattr__`` (the old
    value put back afterwards)."""
    old = getattr(obj, field)
    object.__setattr__(obj, field, value)
    try:
        return call()
    finally:
        object.__setattr__(obj, field, old)


def forked_answers(cases: Any, decide: Callable[[Any], Any]) -> dict[str, Any]:
    """Each case's ``decide(case)`` (JSON-able), computed in a forked child of this process so that
    nothing one case does (planted properties, warmed memos) reaches the next; keyed by
    ``"|".join(case)``. A child that raises reports ``["crash", repr(exc)]``."""
    import json
    import os

    answers = {}
    for case in cases:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover (the child)
            os.close(read)
            try:
                data = json.dumps(decide(case))
            except BaseException as exc:  # (reported, not raised, in the child)
                data = json.dumps(["crash", repr(exc)])
            os.write(write, data.encode())
            os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as pipe:
            answers["|".join(case)] = json.loads(pipe.read())
        os.waitpid(pid, 0)
    return answers


def fresh_interpreter_json(script: str) -> Any:
    """Runs the test module ``script`` as ``__main__`` in a fresh interpreter (its directory and
    this ``sys.path`` importable) and returns the JSON it prints: a cold-process oracle."""
    import json
    import os
    import subprocess

    here = os.path.dirname(script)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([here] + sys.path))
    done = subprocess.run([sys.executable, script], capture_output=True, text=True, env=env, cwd=here, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def memos_emptied() -> None:
    """Empties every per-call-site layout memo (csrc/layout.h ``mr_layout_memo``: entering cold
    mode from level 0 empties each memo that ever held a class; leaving it, level 0 again): the
    memos then stand as in a fresh process, for a cold oracle that must build bound plans first
    (bind's C steps fill the memos)."""
    assert _native.layout_memos_cold(1) == 1
    assert _native.layout_memos_cold(-1) == 0


def cold_summary(result: Any) -> list[str]:
    """A cold oracle's answer: ``[exception class, message]`` (object addresses masked), else
    ``["value", the result's class name]`` (values hold addresses of the process's memory)."""
    import re

    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], str) and result[0].endswith("Error"):
        return [result[0], re.sub(r"0x[0-9a-f]+", "0x?", result[1])]
    return ["value", type(result).__name__]


def rules_only(call: Callable[[], Any]) -> Any:
    """``outcome(call)`` with the fast revalidation off (``_fast_revalidate_live`` declines): the
    rule-by-rule path decides every ``TransferPlan`` revalidation it makes."""
    from mooncake.reshard.weight._planner import bound_contracts

    real = bound_contracts._fast_revalidate_live
    bound_contracts._fast_revalidate_live = lambda *args, **kwargs: False
    try:
        return outcome(call)
    finally:
        bound_contracts._fast_revalidate_live = real


def cold_oracle(script: str) -> Any:
    """A module-scoped pytest fixture (``cold = cold_oracle(__file__)`` in a test module): the
    JSON the module ``script`` prints when run in a fresh interpreter (``fresh_interpreter_json``),
    skipped where the oracle cannot fork."""
    import os

    import pytest

    @pytest.fixture(scope="module")
    def cold() -> Any:
        if not hasattr(os, "fork"):
            pytest.skip("the cold oracle forks")
        return fresh_interpreter_json(script)

    return cold

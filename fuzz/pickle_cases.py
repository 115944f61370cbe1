"""Fuzz engine for the unpickling of bound plans (``TransferPlan``, spec §13).

Shared by the atheris driver (``fuzz/atheris_pickle.py``), the hypothesis test
(``tests/test_pickle_fuzz_properties.py``) and the random runner (``python fuzz/pickle_cases.py``).

Everything a pickle carries is untrusted (spec §13: restore revalidates). Three levels of input:

* **raw bytes** (:func:`check_raw`): damaged pickle bytes, loaded with an unpickler that only
  resolves globals of the package (and a few builtins), so that damage can never call anything
  else. Pickle's own framing errors are allowed; any exception raised while *our* restore code
  runs (a traceback through ``mooncake_reshard``) must follow the structured contract below.
* **structured edits** (:func:`structured_case`): the outer reduce of a real pickle (protocol 4:
  ``(_restore_transfer_plan, record)``; protocol 5: ``(_restore_packed_transfer_plan, (codes,
  values))``) is read without running the restore (:func:`split_pickle`), one item is edited
  (an opcode byte, a leaf, a table entry, a field of a placement-graph object), the reduce is
  written again and loaded for real. Contract: ``ValueError``/``TypeError`` whose message starts
  with a spec message (``fuzz/spec_messages.txt``) or "transfer plan pickle state is invalid",
  or an accepted ``TransferPlan``.
* **direct decoder calls** (:func:`check_graph_unpack`): ``_native.graph_unpack(codes, values,
  registry)`` with mutated opcode strings and leaves. Contract: ``None``, a value, or the
  ``RuntimeBindingFragment`` constructor's own ``ValueError``/``TypeError``; no reference kept on
  the leaves after the call (a sentinel leaf's reference count is checked).

An accepted plan must equal ``dataclasses.replace(plan)`` (the constructor revalidates it) and
survive pickle protocols 4 and 5 unchanged. ``SystemError``, ``KeyError``, ``IndexError``,
``AttributeError``, ``RecursionError``, ``MemoryError`` or any other exception type, or a message
outside the list, is a :class:`pyfuzz.Finding`.

Hostile values are plain data only (ints at the int64/uint64 edges, strings, floats, bools,
bytes, containers, registered objects with a forged field): a pickle that names arbitrary
classes can run arbitrary code anyway, so behaviour-carrying objects prove nothing here.
"""

from __future__ import annotations

import copyreg
import dataclasses
import io
import os
import pickle
import random
import sys
import traceback
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
_ROOT = os.path.dirname(_HERE)
for _extra in (os.path.join(_ROOT, "tests"), os.path.join(_ROOT, "benchmarks")):
    if _extra not in sys.path:
        sys.path.append(_extra)

import pyfuzz  # noqa: E402

INVALID = "transfer plan pickle state is invalid"
RESTORE_NAMES = ("_restore_transfer_plan", "_restore_packed_transfer_plan")
# Exception types a hostile pickle may legitimately raise (with a spec message).
CONTRACT_TYPES = (ValueError, TypeError)
MAX_INPUT = 1 << 16  # bytes of one raw input (libFuzzer -max_len should not exceed it)


def _bp() -> Any:
    from mooncake.reshard.weight._planner import bound_pickle

    return bound_pickle


# --------------------------------------------------------------------------------------------
# seed plans


def _benchmark_plan() -> Any:
    import runtime_binding as rb
    from mooncake.reshard.weight import bind_logical_transfer_plan, plan_placement_transfer

    source, target = rb.contract_placements()
    logical = plan_placement_transfer(source, target)
    return bind_logical_transfer_plan(
        logical, rb._bindings(target, "target", 1 << 44), source_bindings=rb._bindings(source, "source", 1 << 40)
    )


_MEMORIES: List[Any] = []  # host buffers of the seed plans stay alive (their addresses are bound)


def _tp_dp_plan(src_tp: int, src_dp: int, dst_tp: int, *, tied: bool = False, shared: bool = False) -> Any:
    from memory_executor import HostMemory, host_bindings, tp_placement
    from mooncake.reshard.weight import bind_logical_transfer_plan, plan_placement_transfer

    tensors = ("a", "b") if tied else ("w",)
    source = tp_placement(src_tp, prefix="s", dp=src_dp, tensors=tensors, tied=tied)
    target = tp_placement(dst_tp, prefix="t", tensors=tensors, tied=tied)
    memory = HostMemory()
    _MEMORIES.append(memory)
    kwargs: Dict[str, Any] = {"shared": True} if shared else {}
    try:
        sources = host_bindings(source, memory, prefix="src", **kwargs)
        targets = host_bindings(target, memory, prefix="dst", **kwargs)
    except TypeError:
        sources = host_bindings(source, memory, prefix="src")
        targets = host_bindings(target, memory, prefix="dst")
    logical = plan_placement_transfer(source, target)
    return bind_logical_transfer_plan(logical, targets, source_bindings=sources)


def _stored_plan() -> Any:
    from test_binding_attacks import _stored_world  # type: ignore[import-not-found]
    from mooncake.reshard.weight import bind_logical_transfer_plan, plan_stored_transfer_to_target_placement

    target, manifest, targets, memory = _stored_world()
    _MEMORIES.append(memory)
    logical = plan_stored_transfer_to_target_placement(manifest, target)
    return bind_logical_transfer_plan(logical, targets, source_manifest=manifest)


_PLANS: Optional[List[Tuple[str, Any]]] = None


def seed_plans() -> List[Tuple[str, Any]]:
    """``(name, plan)`` for the seed layouts (built once per process)."""
    global _PLANS
    if _PLANS is None:
        plans = [
            ("benchmark", _benchmark_plan()),
            ("tp2-to-tp3", _tp_dp_plan(2, 1, 3)),
            ("tp2dp2-to-tp1", _tp_dp_plan(2, 2, 1)),
            ("tied-tp1-to-tp2", _tp_dp_plan(1, 1, 2, tied=True)),
        ]
        try:
            plans.append(("stored", _stored_plan()))
        except ImportError:  # tests/ not importable: the field-state seeds are optional
            pass
        _PLANS = plans
    return _PLANS


def seed_pickles() -> List[Tuple[str, bytes]]:
    """``(name, bytes)``: every seed plan pickled with protocols 4 and 5."""
    return [(f"{name}-p{protocol}", pickle.dumps(plan, protocol=protocol))
            for name, plan in seed_plans() for protocol in (4, 5)]


# --------------------------------------------------------------------------------------------
# reading and writing the outer reduce


class _Recorder:
    """Stands for a restore function while a pickle is read: records its arguments."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, *args: Any) -> Tuple[str, Tuple[Any, ...]]:
        return (self.name, args)


def _allowed(module: str, name: str) -> bool:
    if module.startswith("mooncake"):
        return True
    # no builtins: damage must not reach e.g. ``bytes(2**40)`` (a pickle-level hang, not ours)
    return module == "copyreg" and name in ("__newobj__", "__newobj_ex__")


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that resolves only the package's globals (and plain builtins): damaged bytes
    can never name anything else."""

    def find_class(self, module: str, name: str) -> Any:
        if not _allowed(module, name):
            raise pickle.UnpicklingError(f"fuzz: global {module}.{name} refused")
        return super().find_class(module, name)


class _SplitUnpickler(RestrictedUnpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module.endswith("bound_pickle") and name in RESTORE_NAMES:
            return _Recorder(name)
        return super().find_class(module, name)


def split_pickle(data: bytes) -> Optional[Tuple[str, Tuple[Any, ...]]]:
    """``(restore name, arguments)`` of a plan pickle's outer reduce, read without running the
    restore (inner objects are loaded as pickle loads them), or None for another format."""
    result = _SplitUnpickler(io.BytesIO(data)).load()
    if type(result) is tuple and len(result) == 2 and result[0] in RESTORE_NAMES:
        return result
    return None


class _Call:
    """Pickles as ``function(*args)`` for a restore function of bound_pickle."""

    def __init__(self, name: str, args: Tuple[Any, ...]) -> None:
        self.name = name
        self.args = args

    def __reduce__(self) -> Tuple[Any, ...]:
        return (getattr(_bp(), self.name), self.args)


def repickle(name: str, args: Tuple[Any, ...], protocol: int = 4) -> bytes:
    """The pickle of ``restore(*args)``."""
    return pickle.dumps(_Call(name, args), protocol=protocol)


# --------------------------------------------------------------------------------------------
# hostile values and edits

INT_EDGES = pyfuzz.INT_EDGES
STR_EDGES = tuple(s for s in pyfuzz.STR_EDGES if len(s) < 100)


def hostile_leaf(rng: random.Random, current: Any = None) -> Any:
    """A plain-data replacement for ``current``."""
    roll = rng.random()
    if isinstance(current, int) and not isinstance(current, bool) and roll < 0.35:
        return current + rng.choice((-1, 1, 2**32, -(2**32), 2**63, 2**64)) if rng.random() < 0.5 else rng.choice(INT_EDGES)
    if isinstance(current, str) and roll < 0.35:
        return rng.choice((current + "x", current[:-1], current.upper(), "")) if rng.random() < 0.6 else rng.choice(STR_EDGES)
    if isinstance(current, tuple) and roll < 0.5 and current:
        items = list(current)
        op = rng.randrange(5)
        if op == 0:
            del items[rng.randrange(len(items))]
        elif op == 1:
            items.append(rng.choice(items))
        elif op == 2:
            j = rng.randrange(len(items))
            items[j] = hostile_leaf(rng, items[j])
        elif op == 3:
            return list(current)
        else:
            rng.shuffle(items)
        return tuple(items)
    choices: Tuple[Any, ...] = (
        None, True, False, 0, -1, 1, 2**63, 2**64, -(2**63) - 1, 1.0, float("nan"), "", "x", "\x00", "\ud800",
        b"x", (), (1,), (0, 0), [], {}, frozenset(), (None,), ("x",), 10**30,
    )
    if rng.random() < 0.5:
        return rng.choice(INT_EDGES + STR_EDGES)
    return rng.choice(choices)


def _graph_classes() -> Tuple[type, ...]:
    return tuple(entry[0] for entry in _bp()._GRAPH_REGISTRY)


def _slots(node: Any, classes: Tuple[type, ...]) -> List[Tuple[str, Any]]:
    """Editable positions directly under ``node``: tuple items and registered-object fields."""
    if type(node) is tuple:
        return [("item", j) for j in range(len(node))]
    if isinstance(node, classes) and hasattr(node, "__dict__"):
        return [("field", k) for k in node.__dict__ if not k.startswith("_") or k == "_digest_cache"]
    return []


def _child(node: Any, slot: Tuple[str, Any]) -> Any:
    return node[slot[1]] if slot[0] == "item" else node.__dict__[slot[1]]


def _with(node: Any, slot: Tuple[str, Any], value: Any) -> Any:
    """A copy of ``node`` with ``slot`` replaced (objects: a new instance whose dict differs in
    one entry, i.e. what a forged default-pickled dict restores)."""
    if slot[0] == "item":
        items = list(node)
        items[slot[1]] = value
        return tuple(items)
    clone = object.__new__(type(node))
    clone.__dict__.update(node.__dict__)
    clone.__dict__[slot[1]] = value
    return clone


def _donors(node: Any, classes: Tuple[type, ...], out: List[Any], limit: int = 400) -> None:
    """Values found in the record (for type-confused replacements: another placement, rank...)."""
    stack = [node]
    seen = set()
    while stack and len(out) < limit:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        out.append(item)
        for slot in _slots(item, classes):
            stack.append(_child(item, slot))


def edit_record(record: Tuple[Any, ...], rng: random.Random) -> Tuple[Any, ...]:
    """One edit somewhere in a (compact) record: walk down a random path of tuple items and
    registered-object fields, replace the value there (hostile leaf, another value of the
    record, or a structural tuple edit) and rebuild the path."""
    classes = _graph_classes()
    path: List[Tuple[Any, Tuple[str, Any]]] = []
    node: Any = record
    while True:
        slots = _slots(node, classes)
        if not slots:
            break
        slot = rng.choice(slots)
        path.append((node, slot))
        child = _child(node, slot)
        if not _slots(child, classes) or rng.random() < 0.25:
            break
        node = child
    if not path:
        return record
    parent, slot = path[-1]
    current = _child(parent, slot)
    if rng.random() < 0.3:
        donors: List[Any] = []
        _donors(record, classes, donors)
        value = rng.choice(donors)
    else:
        value = hostile_leaf(rng, current)
    for parent, slot in reversed(path):
        value = _with(parent, slot, value)
    return value  # type: ignore[no-any-return]


def edit_packed(codes: bytes, values: Tuple[Any, ...], rng: random.Random) -> Tuple[Any, Any]:
    """One edit of a packed stream: an opcode byte, a leaf, or the shape of either."""
    if type(codes) is not bytes or type(values) is not tuple:
        return codes, values
    op = rng.randrange(10)
    raw = bytearray(codes)
    items = list(values)
    if op == 0 and raw:
        raw[rng.randrange(len(raw))] = rng.randrange(256)
    elif op == 1 and raw:
        raw[rng.randrange(len(raw))] = rng.randrange(7)
    elif op == 2:
        raw.insert(rng.randrange(len(raw) + 1), rng.randrange(256))
    elif op == 3 and raw:
        del raw[rng.randrange(len(raw))]
    elif op == 4 and raw:
        del raw[rng.randrange(len(raw)):]
    elif op == 5 and items:
        j = rng.randrange(len(items))
        items[j] = hostile_leaf(rng, items[j])
    elif op == 6 and items:
        items[rng.randrange(len(items))] = rng.choice(items)
    elif op == 7 and items:
        del items[rng.randrange(len(items))]
    elif op == 8:
        items.insert(rng.randrange(len(items) + 1), hostile_leaf(rng))
    else:
        # a small opcode run (a varint int, a ref, a tuple header) spliced in
        j = rng.randrange(len(raw) + 1)
        run = bytes(rng.choice((0, 1, 2, 3, 4, 5, 6, 0x7F, 0x80, 0xFF)) for _ in range(rng.randint(1, 4)))
        raw[j:j] = run
    codes_out: Any = bytes(raw)
    values_out: Any = tuple(items)
    if rng.random() < 0.02:
        codes_out = rng.choice((bytearray(raw), None, "x", list(raw)))
    if rng.random() < 0.02:
        values_out = rng.choice((list(items), None, {}, "x"))
    return codes_out, values_out


# --------------------------------------------------------------------------------------------
# checks


def _ours(exc: BaseException) -> bool:
    """True when the exception was raised while the package's code ran."""
    for frame, _ in traceback.walk_tb(exc.__traceback__):
        filename = frame.f_code.co_filename
        if "mooncake_reshard" in filename or "mooncake" + os.sep + "reshard" in filename:
            return True
    return False


def message_ok(exc: BaseException) -> bool:
    """A contract rejection: exactly ValueError/TypeError with a spec message (or the record's)."""
    if type(exc) not in CONTRACT_TYPES:
        return False
    text = str(exc)
    return text.startswith(INVALID) or pyfuzz.spec_message(text)


def check_plan(plan: Any, data: Any) -> None:
    """An accepted plan equals its revalidated rebuild and survives pickling again."""
    from mooncake.reshard.weight import TransferPlan

    if type(plan) is not TransferPlan:
        raise pyfuzz.Finding(f"restore returned {type(plan).__name__}, not TransferPlan", data)
    try:
        rebuilt = dataclasses.replace(plan)
    except Exception as exc:  # noqa: BLE001
        raise pyfuzz.Finding(
            f"restored plan rejected by its constructor: {type(exc).__name__}: {exc}", data
        ) from exc
    if _differs(rebuilt, plan, "replace(restored)", data):
        raise pyfuzz.Finding("replace(restored) != restored", data)
    for protocol in (4, 5):
        try:
            again = pickle.loads(pickle.dumps(plan, protocol=protocol))
        except Exception as exc:  # noqa: BLE001
            raise pyfuzz.Finding(
                f"restored plan does not pickle again (protocol {protocol}): {type(exc).__name__}: {exc}", data
            ) from exc
        if _differs(again, plan, f"the pickle round trip (protocol {protocol}) of restored", data):
            if _nan_inside(plan) and os.environ.get("MOONCAKE_FUZZ_KNOWN") != "1":
                return  # F5: a forged NaN field was accepted; NaN != NaN breaks the comparison
            raise pyfuzz.Finding(f"pickle round trip of the restored plan differs (protocol {protocol})", data)


def _differs(left: Any, right: Any, what: str, data: Any) -> bool:
    """``left != right``; any exception raised by the comparison (a ``RecursionError`` through a
    reference cycle an accepted plan holds, session 18's CI failure) is a :class:`pyfuzz.Finding`
    carrying the input, never an uncaught crash of the harness."""
    try:
        return bool(left != right)
    except Exception as exc:  # noqa: BLE001 - the point of the harness
        raise pyfuzz.Finding(f"comparing {what} with restored raised {type(exc).__name__}: {exc}", data) from exc


# Documented, open findings (fuzz/findings/F<n>-*.md): ``(id, exception types, package files
# whose code raises them)``. An exception is a known finding only when its type matches and the
# innermost frame of the package is in one of the files: anything raised by the restore layer
# itself (bound_pickle.py, the C decoder), SystemError, MemoryError, RecursionError, hangs,
# leaks and rejections with a non-spec message in any other place stay findings.
# F2, F3 and F4 are fixed (their filters are gone; tests/test_forged_*.py keep them fixed).
KNOWN_FINDINGS: Tuple[Tuple[str, Tuple[type, ...], Tuple[str, ...]], ...] = (
    ("F5", (), ()),  # accepted forged placement content: see _nan_inside / check_plan
)


def _package_site(exc: BaseException) -> Optional[str]:
    """``mooncake_reshard/<path>`` of the innermost package frame of the traceback."""
    site = None
    for frame, _ in traceback.walk_tb(exc.__traceback__):
        filename = frame.f_code.co_filename.replace(os.sep, "/")
        marker = filename.find("mooncake_reshard/")
        if marker < 0:
            marker = filename.find("mooncake/reshard/")
        if marker >= 0:
            site = "reshard/" + filename[marker + len("mooncake_reshard/"):]
    return site


def _nan_inside(value: Any, limit: int = 200000) -> bool:
    """True when a float NaN is reachable from ``value`` (tuples, lists, dicts, dataclass
    instance dicts): the marker of finding F5."""
    stack = [value]
    seen = set()
    while stack and len(seen) < limit:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if type(item) is float and item != item:
            return True
        if type(item) in (tuple, list):
            stack.extend(item)
        elif type(item) is dict:
            stack.extend(item.values())
        elif hasattr(item, "__dict__") and type(item).__module__.startswith("mooncake"):
            stack.extend(item.__dict__.values())
    return False


def known_finding(exc: BaseException) -> Optional[str]:
    """The id of a documented, open finding this exception is (None when new); see
    KNOWN_FINDINGS. ``MOONCAKE_FUZZ_KNOWN=1`` reports them all again."""
    if os.environ.get("MOONCAKE_FUZZ_KNOWN") == "1":
        return None
    site = _package_site(exc)
    if site is None:
        return None
    for ident, types, files in KNOWN_FINDINGS:
        if type(exc) in types and any(site.endswith(name) for name in files):
            return ident
    return None


# Fields the public ``TransferPlan`` constructor converts with a bare ``tuple(value)`` (spec:
# "operations, source_executors, target_executors are converted to tuples"): damaged bytes that
# REDUCE the class itself with a non-iterable there get Python's own TypeError, as from the
# reference (spec 1.4). ``__setstate__`` refuses the same value with INVALID instead.
TUPLE_CONVERTED_FIELDS = ("operations", "source_executors", "target_executors")


def constructor_tuple_conversion(exc: BaseException) -> bool:
    """True when ``exc`` is the TypeError of the constructor's own ``tuple(field)`` conversion:
    a package ``__init__`` frame below, and the innermost frame the line ``field = tuple(field)``
    of one of TUPLE_CONVERTED_FIELDS. Any other "not iterable" TypeError stays a finding."""
    if type(exc) is not TypeError or "is not iterable" not in str(exc):
        return False
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames or not _ours(exc):
        return False
    if not any(frame.name == "__init__" and "reshard" in frame.filename for frame in frames):
        return False
    line = (frames[-1].line or "").replace(" ", "")
    return any(line == f"{name}=tuple({name})" for name in TUPLE_CONVERTED_FIELDS)


def stored_digest_surrogate(exc: BaseException) -> bool:
    """A ``UnicodeEncodeError`` (a ``ValueError``) raised by ``StoredWeightManifest.to_json``:
    the manifest's digest is the SHA-256 of its canonical JSON with ``ensure_ascii=False``,
    encoded as UTF-8 (spec §6.5), so a str field holding a lone surrogate (pickle's unicode
    opcodes restore one) fails in the encoder, in its constructor and its ``__setstate__``
    alike, as in the reference. ``pyfuzz.check_constructor`` accepts the same error from the
    constructor; this is its pickle side (session 54, atheris_pickle)."""
    if not isinstance(exc, UnicodeEncodeError):
        return False
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ else []
    return any(
        frame.name == "to_json" and frame.filename.replace("\\", "/").endswith("weight/storage_manifest.py")
        for frame in frames
    )


def _judge(exc: BaseException, data: Any, structured: bool) -> None:
    if isinstance(exc, pyfuzz.Finding):
        raise exc
    if not structured and not isinstance(exc, SystemError) and not _ours(exc):
        return  # pickle's own framing / resolution errors on damaged bytes
    if message_ok(exc):
        return
    if constructor_tuple_conversion(exc):
        return  # the class REDUCEd as a constructor call: spec behaviour, see above
    if stored_digest_surrogate(exc):
        return  # (a lone surrogate in a stored manifest's string: see stored_digest_surrogate)
    if known_finding(exc) is not None:
        return
    where = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    site = f" at {where[0].filename}:{where[0].lineno} in {where[0].name}" if where else ""
    raise pyfuzz.Finding(f"unexpected {type(exc).__name__}: {exc}{site}", data) from exc


_MEMO_BOUND = 1 << 16


class _CUnpicklerReads:
    """The bytes CPython's C unpickler reads from an ``io.BytesIO`` (``_pickle.c``, 3.10-3.13:
    a file with ``read``, ``readline`` and ``readinto`` but no ``peek``), so that the opcodes it
    runs can be walked without running it.

    The unpickler reads from a buffer that holds the last chunk it took from the file: the
    current frame, or the last read that did not fit. A read that does not fit in the buffer's
    rest takes a new chunk of exactly its size from the file *and drops that rest*. So does a
    line with no newline in the buffer's rest, which takes the next line from the file.
    ``FRAME n`` reads its n bytes as one such read, then goes back to their start. A bytes
    payload (``_Unpickler_ReadInto``) is the exception: it takes the buffer's rest, then the file.

    So bytes that stop a frame early, such as a ``FRAME`` inside a frame whose length runs past
    it, make the unpickler skip the rest of the frame. ``pickletools.genops`` reads on through
    those bytes, so it sees other opcodes than the unpickler runs."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._file_at = 0  # bytes of data the file has handed out
        self._buffer = b""
        self._at = 0  # the buffer's next unread byte

    def _from_file(self, count: Optional[int]) -> bytes:
        """A new chunk from the file (count bytes, or with None one line), which becomes the
        buffer, the old buffer's rest dropped."""
        if count is None:
            newline = self._data.find(b"\n", self._file_at)
            count = len(self._data) - self._file_at if newline < 0 else newline + 1 - self._file_at
        chunk = self._data[self._file_at : self._file_at + count]
        self._file_at += len(chunk)
        self._buffer, self._at = chunk, len(chunk)
        return chunk

    def read(self, count: int) -> bytes:
        """``_Unpickler_Read``: count bytes (fewer at the end of the data: the unpickler stops)."""
        if count <= len(self._buffer) - self._at:
            self._at += count
            return self._buffer[self._at - count : self._at]
        return self._from_file(count)

    def readline(self) -> bytes:
        """``_Unpickler_Readline``: up to and including the next newline."""
        newline = self._buffer.find(b"\n", self._at)
        if newline >= 0:
            line, self._at = self._buffer[self._at : newline + 1], newline + 1
            return line
        return self._from_file(None)

    def read_into(self, count: int) -> bytes:
        """``_Unpickler_ReadInto`` (a bytes or bytearray payload): the buffer's rest, then the file."""
        head = self._buffer[self._at : self._at + count]
        self._at += len(head)
        tail = self._data[self._file_at : self._file_at + count - len(head)]
        self._file_at += len(tail)
        return head + tail

    def frame(self, count: int) -> bool:
        """``load_frame``: the frame's count bytes read, then read again from their start. False
        when the data ends first (the unpickler stops there)."""
        if len(self.read(count)) < count:
            return False
        self._at -= count
        return True


# pickletools' argument kinds whose payload the unpickler reads with _Unpickler_ReadInto, by the
# size of the length before it (SHORT_BINBYTES, BINBYTES, BINBYTES8, BYTEARRAY8)
_READ_INTO_LENGTH = {"bytes1": 1, "bytes4": 4, "bytes8": 8, "bytearray8": 8}


def c_unpickler_opcodes(data: bytes) -> Iterator[Tuple[str, Any]]:
    """(opcode name, argument) of each opcode CPython's C unpickler runs on
    ``io.BytesIO(data)``, in order (``_CUnpicklerReads``), up to ``STOP``, the end of the data,
    or an opcode it cannot decode. A counted item longer than the data left raises pickletools'
    ``ValueError`` ("... but only ... remain")."""
    import pickletools

    by_code = {opcode.code.encode("latin-1"): opcode for opcode in pickletools.opcodes}
    reads = _CUnpicklerReads(data)
    while True:
        opcode = by_code.get(reads.read(1))
        if opcode is None:
            return
        argument: Any = None
        if opcode.arg is not None and opcode.arg.name in _READ_INTO_LENGTH:
            width = _READ_INTO_LENGTH[opcode.arg.name]
            length_bytes = reads.read(width)
            if len(length_bytes) < width:
                return
            length = int.from_bytes(length_bytes, "little")
            argument = reads.read_into(length)
            if len(argument) < length:
                raise ValueError(f"expected {length} bytes in a {opcode.arg.name}, but only {len(argument)} remain")
        elif opcode.arg is not None:
            argument = opcode.arg.reader(reads)
        yield opcode.name, argument
        if opcode.name == "STOP" or (opcode.name == "FRAME" and not reads.frame(int(argument))):
            return


def pickle_level_hazard(data: bytes) -> bool:
    """True when damaged bytes would make pickle itself allocate far beyond the input (a
    ``LONG_BINPUT``/``PUT`` memo index far past the input: CPython's unpickler grows its memo
    array to that index; a counted string/bytes/bytearray longer than the input: CPython 3.11
    allocates it first, and for ``BYTEARRAY8`` prints "SystemError: deallocated bytearray object
    has exported buffers" while raising MemoryError). Not the package's business: such inputs
    are skipped. The opcodes looked at are those the C unpickler runs on ``io.BytesIO(data)``
    (``c_unpickler_opcodes``: damaged framing makes it skip bytes that ``pickletools`` would
    read), up to the first one it cannot decode (the unpickler stops there too)."""
    try:
        for name, argument in c_unpickler_opcodes(data):
            if name in ("PUT", "BINPUT", "LONG_BINPUT") and int(argument) > _MEMO_BOUND:
                return True
    except Exception as exc:  # noqa: BLE001 - damage: the unpickler stops at the same place
        return "but only" in str(exc)  # a counted item longer than the input
    return False


def check_loads(data: bytes, *, structured: bool) -> Optional[Any]:
    """Load ``data``; the plan (accepted), or None (rejected as the contract allows). Raises
    :class:`pyfuzz.Finding` otherwise."""
    if len(data) > MAX_INPUT or (not structured and pickle_level_hazard(data)):
        return None
    try:
        if structured:
            result = pickle.loads(data)
        else:
            result = RestrictedUnpickler(io.BytesIO(data)).load()
    except BaseException as exc:  # noqa: BLE001 - the point of the harness
        if isinstance(exc, (KeyboardInterrupt, pyfuzz.Hang)):
            raise
        _judge(exc, data, structured)
        return None
    from mooncake.reshard.weight import TransferPlan

    if not structured and type(result) is not TransferPlan:
        return None  # damage turned the outer object into something else: pickle's business
    if not structured and not vars(result):
        # NEWOBJ of the class and STOP before any BUILD: Python's bare ``cls.__new__(cls)``, as
        # for any picklable class (the reference's too); no restore path ran, and every field
        # read fails with AttributeError. A BUILD always reaches ``__setstate__``, which refuses
        # a state without the fields, so an empty instance dict means exactly this case.
        return None
    check_plan(result, data)
    return result


def _fresh(value: Any) -> Any:
    """A new object equal to ``value`` whose reference count is ours to watch (None when the
    value is shared by the interpreter: None, bools, small ints, one-character strings)."""
    kind = type(value)
    if kind is str and len(value) >= 2:
        return value.encode("utf-8", "surrogatepass").decode("utf-8", "surrogatepass")
    if kind is int and not -5 <= value <= 256:
        return int(str(value))
    if kind is float:
        return float.fromhex(value.hex())
    if kind is bytes and len(value) >= 2:
        return bytes(bytearray(value))
    if kind is tuple and value:
        return tuple(list(value))
    return None


def check_graph_unpack(codes: Any, values: Any, extra_leaf: bool = False) -> Any:
    """Direct decoder call: None, a value, or the runtime fragment constructor's rejection.
    Leak check: every leaf not shared by the interpreter is replaced by a fresh equal copy
    whose reference count must be unchanged once the result is dropped; with ``extra_leaf`` a
    sentinel leaf is appended (a stream that does not use it must be refused, and the
    sentinel released)."""
    bp = _bp()
    watched: List[Any] = []
    if type(values) is tuple:
        items = []
        for value in values:
            fresh = _fresh(value)
            if fresh is None:
                items.append(value)
            else:
                items.append(fresh)
                watched.append(fresh)
        if extra_leaf:
            items.append(object())
            watched.append(items[-1])
        values = tuple(items)
    before = [sys.getrefcount(v) for v in watched]
    try:
        result = bp._graph_unpack(codes, values, bp._GRAPH_REGISTRY)
    except BaseException as exc:  # noqa: BLE001
        if isinstance(exc, (KeyboardInterrupt, pyfuzz.Hang)):
            raise
        _judge(exc, (codes, values), True)
        result = None
    del result
    after = [sys.getrefcount(v) for v in watched]
    if after != before:
        diff = [(b, a) for b, a in zip(before, after) if a != b][:5]
        raise pyfuzz.Finding(f"graph_unpack changed leaf reference counts (before, after): {diff}", (codes, values))
    return None


_SPLITS: Optional[List[Tuple[str, str, Tuple[Any, ...]]]] = None


def seed_splits() -> List[Tuple[str, str, Tuple[Any, ...]]]:
    """``(seed name, restore name, arguments)`` of every seed pickle with a record format."""
    global _SPLITS
    if _SPLITS is None:
        splits = []
        for name, data in seed_pickles():
            split = split_pickle(data)
            if split is not None:
                splits.append((name, split[0], split[1]))
        _SPLITS = splits
    return _SPLITS


def structured_input(rng: random.Random) -> bytes:
    """Pickle bytes of one structured edit of a seed (1-2 edits)."""
    _, restore, args = rng.choice(seed_splits())
    for _ in range(1 if rng.random() < 0.8 else 2):
        if restore == "_restore_packed_transfer_plan" and len(args) == 2 and type(args[0]) is bytes:
            args = edit_packed(args[0], args[1], rng)
        else:
            args = edit_record(args, rng)
    return repickle(restore, args, protocol=rng.choice((4, 5)))


def structured_case(rng: random.Random) -> Optional[Any]:
    """One structured edit, loaded for real under the contract."""
    return check_loads(structured_input(rng), structured=True)


def graph_case(rng: random.Random) -> None:
    """One direct decoder call with an edited packed stream of a seed."""
    packed = [args for _, restore, args in seed_splits() if restore == "_restore_packed_transfer_plan"]
    codes, values = rng.choice(packed)
    for _ in range(rng.randint(1, 3)):
        codes, values = edit_packed(codes, values, rng)
    check_graph_unpack(codes, values, extra_leaf=rng.random() < 0.2)


def raw_case(rng: random.Random) -> Optional[Any]:
    """Byte-level damage of a seed pickle."""
    _, data = rng.choice(seed_pickles())
    raw = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(4)
        j = rng.randrange(len(raw))
        if op == 0:
            raw[j] = rng.randrange(256)
        elif op == 1:
            raw[j] ^= 1 << rng.randrange(8)
        elif op == 2:
            del raw[j : j + rng.randint(1, 8)]
        else:
            raw[j:j] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
    return check_loads(bytes(raw), structured=False)


CASES: Tuple[Callable[[random.Random], Any], ...] = (structured_case, graph_case, raw_case)


def run_case(case_seed: int) -> None:
    """Re-run one random-runner case by its seed."""
    rng = random.Random(case_seed)
    CASES[rng.randrange(len(CASES))](rng)


def main(argv: Sequence[str]) -> int:
    import argparse
    import time

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--case", type=int, default=None, help="replay one case")
    parser.add_argument("--case-timeout", type=float, default=10.0)
    parser.add_argument("--write-corpus", metavar="DIR", help="write the seed pickles as atheris corpus files")
    parser.add_argument("--survey", action="store_true", help="go on after findings; print one line per kind")
    args = parser.parse_args(argv)
    if args.write_corpus:
        os.makedirs(args.write_corpus, exist_ok=True)
        for name, data in seed_pickles():
            with open(os.path.join(args.write_corpus, f"seed-{name}"), "wb") as fh:
                fh.write(b"\x00" + data)
        packed = [args for _, restore, args in seed_splits() if restore == "_restore_packed_transfer_plan"]
        for index, (codes, _) in enumerate(packed):  # direct decoder calls (atheris_pickle.py)
            with open(os.path.join(args.write_corpus, f"graph-{index}"), "wb") as fh:
                fh.write(bytes([0xC0 + index]) + codes)
        for index in range(8):  # structured edits, by their seed bytes
            with open(os.path.join(args.write_corpus, f"structured-{index}"), "wb") as fh:
                fh.write(bytes([0x80]) + index.to_bytes(4, "little"))
        return 0
    if args.case is not None:
        run_case(args.case)
        print("case passed")
        return 0
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    seed_splits()
    deadline = time.monotonic() + args.seconds
    count = 0
    kinds: Dict[str, Tuple[int, int]] = {}
    case_seed = seed
    while time.monotonic() < deadline:
        case_seed = (case_seed * 6364136223846793005 + 1442695040888963407) % 2**64
        try:
            with pyfuzz.case_timeout(args.case_timeout):
                run_case(case_seed)
        except pyfuzz.Finding as finding:
            if args.survey:
                kind = str(finding).split("\n")[0][:160]
                seen, first = kinds.get(kind, (0, case_seed))
                kinds[kind] = (seen + 1, first)
                count += 1
                continue
            print(f"FINDING (reproduce: python fuzz/pickle_cases.py --case {case_seed}):\n{finding}", file=sys.stderr)
            return 1
        count += 1
    for kind, (seen, first) in sorted(kinds.items(), key=lambda item: -item[1][0]):
        print(f"{seen:6d}  --case {first}  {kind}")
    if kinds:
        return 1
    print(f"pickle_cases: {count} cases, seed {seed}, no findings")
    return 0


if __name__ == "__main__":
    sys.setrecursionlimit(10000)
    sys.exit(main(sys.argv[1:]))

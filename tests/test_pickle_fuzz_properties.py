"""Property tests of the unpickling of bound plans under hostile input (spec §13: everything a
pickle carries is untrusted; restore revalidates). Engine: ``fuzz/pickle_cases.py`` (also
driven coverage-guided by ``fuzz/atheris_pickle.py``).

Contract per input: no crash (this file also runs under ASan+UBSan, which checks the C decoder
``_native.graph_unpack``), no leaked reference on a leaf, and ``pickle.loads`` either returns a
``TransferPlan`` equal to ``dataclasses.replace`` of itself that pickles again to an equal plan,
or raises ``ValueError``/``TypeError`` with a spec message or "transfer plan pickle state is
invalid". Documented open findings (``fuzz/findings/F5`` only since F2-F4 were fixed) are
filtered by ``pickle_cases.known_finding``; everything else fails these tests.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import pickle
import random
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fuzz"))

import pickle_cases  # noqa: E402

from mooncake.reshard.weight._planner import bound_pickle  # noqa: E402

SEEDS = st.integers(min_value=0, max_value=2**64 - 1)


@pytest.fixture(scope="module", autouse=True)
def _seeds() -> None:
    pickle_cases.seed_splits()


def _packed() -> list:
    return [args for _, restore, args in pickle_cases.seed_splits() if restore == "_restore_packed_transfer_plan"]


def test_seed_pickles_round_trip() -> None:
    names = {name for name, _ in pickle_cases.seed_plans()}
    assert {"benchmark", "tp2-to-tp3", "tp2dp2-to-tp1", "tied-tp1-to-tp2"} <= names
    for (name, plan), protocol in [(p, proto) for p in pickle_cases.seed_plans() for proto in (4, 5)]:
        data = pickle.dumps(plan, protocol=protocol)
        restored = pickle_cases.check_loads(data, structured=True)
        assert restored == plan, name
    kinds = {restore for _, restore, _ in pickle_cases.seed_splits()}
    assert kinds == {"_restore_transfer_plan", "_restore_packed_transfer_plan"}


def test_split_and_repickle_is_faithful() -> None:
    """The structured path's read/write of the outer reduce changes nothing by itself."""
    for (name, plan), (_, restore, args) in zip(
        [(n, p) for n, p in pickle_cases.seed_plans() for _ in (4, 5)], _all_splits_in_seed_order()
    ):
        if args is None:
            continue
        assert pickle.loads(pickle_cases.repickle(restore, args)) == plan, name


def _all_splits_in_seed_order() -> list:
    out = []
    for name, data in pickle_cases.seed_pickles():
        split = pickle_cases.split_pickle(data)
        out.append((name, None, None) if split is None else (name, split[0], split[1]))
    return out


def test_truncated_packed_streams_are_refused() -> None:
    """Every proper prefix of a packed opcode string (and every leaf tuple one short) is not one
    complete graph: the decoder returns None and loading raises the record's message."""
    codes, values = _packed()[0]
    registry = bound_pickle._GRAPH_REGISTRY
    for cut in range(0, len(codes), max(1, len(codes) // 97)):
        assert bound_pickle._graph_unpack(codes[:cut], values, registry) is None
        with pytest.raises(ValueError, match="^transfer plan pickle state is invalid$"):
            pickle.loads(pickle_cases.repickle("_restore_packed_transfer_plan", (codes[:cut], values)))
    assert bound_pickle._graph_unpack(codes, values[:-1], registry) is None
    assert bound_pickle._graph_unpack(codes, values + ("extra",), registry) is None
    assert bound_pickle._graph_unpack(codes + b"\x06", values, registry) is None


def test_graph_unpack_hostile_arguments() -> None:
    codes, values = _packed()[0]
    registry = bound_pickle._GRAPH_REGISTRY
    for bad_codes in (None, "x", bytearray(codes), list(codes), 1):
        assert bound_pickle._graph_unpack(bad_codes, values, registry) is None
    for bad_values in (None, list(values), {}, "x"):
        assert bound_pickle._graph_unpack(codes, bad_values, registry) is None
    # varints at and beyond 63 bits, huge tuple counts, refs and classes out of range
    for stream in (
        b"\x01" + b"\xff" * 9 + b"\x7f",
        b"\x01" + b"\xff" * 12,
        b"\x01\xff\xff\xff\xff\x0f",
        b"\x02\x7f",
        b"\x02" + b"\xff" * 9 + b"\x01",
        b"\x03\x00",
        b"\x05\x00",
        b"\x04" + b"\xff" * 9 + b"\x01",
        b"\x04" + b"\xff" * 9 + b"\x02",
        b"\x04" + b"\x80" * 11,
        b"\x01\x01" * 200 + b"\x06",
        b"\x07",
        b"",
    ):
        pickle_cases.check_graph_unpack(stream, values)
    assert bound_pickle._graph_unpack(b"\x04" + b"\xfe" + b"\xff" * 8 + b"\x01", (), registry) == 2**63 - 1
    assert bound_pickle._graph_unpack(b"\x04" + b"\xff" * 9 + b"\x01", (), registry) == -(2**63)
    with pytest.raises(TypeError):
        bound_pickle._graph_unpack(codes, values)  # type: ignore[call-arg]


@settings(max_examples=150, deadline=None)
@given(SEEDS)
def test_graph_unpack_edited_streams(seed: int) -> None:
    pickle_cases.graph_case(random.Random(seed))


@settings(max_examples=80, deadline=None)
@given(SEEDS)
def test_structured_edits_follow_the_contract(seed: int) -> None:
    pickle_cases.structured_case(random.Random(seed))


@settings(max_examples=60, deadline=None)
@given(SEEDS)
def test_raw_damage_follows_the_contract(seed: int) -> None:
    pickle_cases.raw_case(random.Random(seed))


@settings(max_examples=40, deadline=None)
@given(st.binary(min_size=1, max_size=64), st.integers(min_value=0, max_value=7))
def test_graph_unpack_arbitrary_opcodes(codes: bytes, which: int) -> None:
    packed = _packed()
    pickle_cases.check_graph_unpack(codes, packed[which % len(packed)][1])


def _raised_in(path: str, exc: BaseException) -> BaseException:
    """``exc`` raised by code whose frame claims ``path`` as its file."""
    try:
        exec(compile("raise exc", path, "exec"), {"exc": exc})
    except BaseException as raised:  # noqa: BLE001
        return raised
    raise AssertionError("not raised")


def test_known_finding_filter_is_narrow(monkeypatch: pytest.MonkeyPatch) -> None:
    """The filter names a finding only for its exception types raised in its files: nothing
    raised by the restore layer, no SystemError/MemoryError/RecursionError, no ValueError."""
    monkeypatch.delenv("MOONCAKE_FUZZ_KNOWN", raising=False)
    root = "/x/mooncake_reshard/weight/"
    known = pickle_cases.known_finding
    # F2, F3 and F4 are fixed: their exceptions are findings again wherever they are raised.
    assert known(_raised_in(root + "binding.py", KeyError("w"))) is None
    assert known(_raised_in(root + "_planner/contracts.py", TypeError("t"))) is None
    assert known(_raised_in(root + "storage_manifest.py", AttributeError("a"))) is None
    assert [ident for ident, _, _ in pickle_cases.KNOWN_FINDINGS] == ["F5"]
    for path in (root + "_planner/bound_pickle.py", root + "_planner/fragments.py", "/x/elsewhere.py"):
        assert known(_raised_in(path, KeyError("k"))) is None
        assert known(_raised_in(path, TypeError("t"))) is None
    for exc in (SystemError("s"), MemoryError(), RecursionError(), ValueError("v"), IndexError("i")):
        assert known(_raised_in(root + "binding.py", exc)) is None
    assert not pickle_cases.message_ok(ValueError("not a spec message"))
    assert pickle_cases.message_ok(ValueError("transfer plan pickle state is invalid"))
    monkeypatch.setenv("MOONCAKE_FUZZ_KNOWN", "1")
    assert known(_raised_in(root + "binding.py", KeyError("w"))) is None


class _ConstructorCall:
    """Pickles as a REDUCE of ``factory(*args)``: damaged bytes can call a class directly."""

    def __init__(self, factory: object, args: tuple) -> None:
        self.factory, self.args = factory, args

    def __reduce__(self) -> tuple:
        return self.factory, self.args


def test_constructor_tuple_conversion_is_spec_behaviour() -> None:
    """A pickle that REDUCEs ``TransferPlan`` with a non-iterable executors field gets the spec's
    bare ``tuple(value)`` TypeError (session 50's CI finding, case 17356315377077054370): not a
    finding. The same message raised anywhere else, or from the restore paths, still is."""
    from mooncake.reshard.weight import TransferPlan

    plan = next(plan for _, plan in pickle_cases.seed_plans() if plan.target_executors)
    names = [field.name for field in dataclasses.fields(TransferPlan) if field.init]
    fields = [getattr(plan, name) for name in names]
    for index, name in enumerate(names):
        if name not in pickle_cases.TUPLE_CONVERTED_FIELDS:
            continue
        args = tuple(fields[:index]) + (5,) + tuple(fields[index + 1 :])
        with pytest.raises(TypeError, match="is not iterable") as raised:
            TransferPlan(*args)
        assert pickle_cases.constructor_tuple_conversion(raised.value), name
        data = pickle.dumps(_ConstructorCall(TransferPlan, args), protocol=4)
        assert pickle_cases.check_loads(data, structured=False) is None
    root = "/x/mooncake_reshard/weight/_planner/"
    for path in (root + "bound_contracts.py", root + "bound_pickle.py", "/x/elsewhere.py"):
        stray = _raised_in(path, TypeError("'int' object is not iterable"))
        assert not pickle_cases.constructor_tuple_conversion(stray)
        with pytest.raises(pickle_cases.pyfuzz.Finding):
            pickle_cases._judge(stray, b"", structured=True)
    # The state path refuses the same value with the restore message, not a TypeError.
    state = dict(plan.__getstate__(), source_executors=5)
    with pytest.raises(ValueError, match="transfer plan pickle state is invalid"):
        object.__new__(TransferPlan).__setstate__(state)


def test_stateless_new_object_is_pythons_own_creation() -> None:
    """NEWOBJ of ``TransferPlan`` and STOP before any BUILD (session 51's fuzz case
    2636912393250717263) gives Python's bare ``cls.__new__(cls)``: no restore path ran, so the
    harness does not judge it as a restored plan. Any BUILD reaches ``__setstate__``, which
    refuses a state without the fields, so such an instance's dict is always empty."""
    from mooncake.reshard.weight import TransferPlan

    module, name = TransferPlan.__module__.encode(), TransferPlan.__qualname__.encode()
    # PROTO 4, SHORT_BINUNICODE module and name, STACK_GLOBAL, EMPTY_TUPLE, NEWOBJ, STOP
    bare = b"\x80\x04\x8c" + bytes([len(module)]) + module + b"\x8c" + bytes([len(name)]) + name
    bare += b"\x93)\x81."
    loaded = pickle.loads(bare)
    assert type(loaded) is TransferPlan and vars(loaded) == {}
    with pytest.raises(AttributeError):
        loaded.resource_id  # noqa: B018
    assert pickle_cases.check_loads(bare, structured=False) is None
    with pytest.raises(ValueError, match="transfer plan pickle state is invalid"):
        object.__new__(TransferPlan).__setstate__({})


class _Name(str):
    pass


class _Disguised:
    """A key whose ``__class__`` claims str (isinstance would believe it)."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return str

    def __repr__(self) -> str:
        # (a fixed test id: pytest-xdist's workers must collect the same ids)
        return "_Disguised()"


@pytest.mark.parametrize("name", [("operations", 0), 7, None, _Disguised()], ids=repr)
def test_a_state_name_that_is_not_a_str_is_an_invalid_state(name: object) -> None:
    """F9 (session 53, ``fuzz/pickle_cases.py --case 3567611955570220973``): a plan state whose
    dict holds a key that is not a str reached ``object.__setattr__``, whose ``TypeError``
    ("attribute name must be string") escaped the restore. Such a state is damaged: the spec's
    ValueError, before anything is stored. A str subclass is a name ``object.__setattr__``
    stores, as the spec's ``__setstate__`` does."""
    from mooncake.reshard.weight._planner.bound_contracts import TransferPlan

    plan = next(plan for _, plan in pickle_cases.seed_plans() if plan.target_executors)
    state = plan.__getstate__()
    restored = object.__new__(TransferPlan)
    restored.__setstate__(dict(state))  # the state as it is: accepted
    assert restored == plan
    named = object.__new__(TransferPlan)
    named.__setstate__({**state, _Name("note"): 1})
    assert named == plan and getattr(named, "note") == 1
    state[name] = 1
    fresh = object.__new__(TransferPlan)
    with pytest.raises(ValueError, match="transfer plan pickle state is invalid"):
        fresh.__setstate__(state)
    assert vars(fresh) == {}


def test_stateless_attestation_attests_nothing() -> None:
    """An attestation whose state was never set (its reduce helper's object with the BUILD lost:
    session 51's atheris finding, ``KeyError: '_placement_dict'`` from ``validates``) validates
    no fragment, so a bound fragment or plan holding it gets a spec ValueError."""
    from mooncake.reshard.weight._planner.attestation import RuntimeBindingAttestation, _new_attestation

    plan = next(plan for _, plan in pickle_cases.seed_plans() if plan.target_executors)
    bare = _new_attestation(RuntimeBindingAttestation)
    target = plan.operations[0].target
    assert target.attestation is not None and target.attestation.validates(target.placement, target.binding)
    assert bare.validates(target.placement, target.binding) is False
    with pytest.raises(ValueError, match="bound fragment does not match its runtime binding attestation"):
        dataclasses.replace(target, attestation=bare)
    forged = copy.copy(target)
    object.__setattr__(forged, "attestation", bare)  # as default pickling restores it
    region = copy.copy(plan.operations[0])
    object.__setattr__(region, "target", forged)
    with pytest.raises(ValueError) as raised:
        dataclasses.replace(plan, operations=(region,) + plan.operations[1:])
    assert pickle_cases.message_ok(raised.value), raised.value


def _frame(body: bytes) -> bytes:
    return b"\x95" + len(body).to_bytes(8, "little") + body


def test_c_unpickler_opcodes_are_pickletools_opcodes_on_whole_frames() -> None:
    import pickletools

    def plain(value: object) -> object:
        return bytes(value) if isinstance(value, (bytes, bytearray)) else value

    for name, data in pickle_cases.seed_pickles():
        expected = [(opcode.name, plain(argument)) for opcode, argument, _ in pickletools.genops(data)]
        assert [(op, plain(arg)) for op, arg in pickle_cases.c_unpickler_opcodes(data)] == expected, name
        assert ("FRAME" in {op for op, _ in expected}) == (data[1] >= 4), name  # (framed from protocol 4 on)
        assert not pickle_cases.pickle_level_hazard(data), name


# Each case: bytes whose framing is damaged, what CPython's unpickler returns when it reads them
# from a file (the opcodes c_unpickler_opcodes walks), and whether pickletools reads the same
# opcodes and arguments.
_CUT_FRAMES = [
    # a FRAME inside a frame, longer than the frame's rest: the rest (BININT1 1, STOP) is
    # skipped, the inner frame's bytes come from after the outer frame
    (b"\x80\x04" + _frame(b"\x95" + (4).to_bytes(8, "little") + b"K\x01.") + b"K\x02\x85.", (2,), False),
    # a line (INT) running past the frame: the frame's rest ("1") dropped, the next line read
    (b"\x80\x04" + _frame(b"I1") + b"7\n.", 7, False),
    # a str payload running past the frame: dropped too, its 4 bytes read after the frame
    (b"\x80\x04" + _frame(b"\x8c\x04ab") + b"cdef.", "cdef", False),
    # a bytes payload running past the frame is the exception: the frame's rest, then the file
    (b"\x80\x04" + _frame(b"C\x04ab") + b"cd.", b"abcd", True),
]


@pytest.mark.parametrize("data, loaded, pickletools_agrees", _CUT_FRAMES)
def test_c_unpickler_opcodes_follow_cpythons_reads_when_a_frame_is_cut_short(
    data: bytes, loaded: object, pickletools_agrees: bool
) -> None:
    import io
    import pickletools

    assert pickle.load(io.BytesIO(data)) == loaded  # what the C unpickler runs
    walked = list(pickle_cases.c_unpickler_opcodes(data))
    assert walked[-1][0] == "STOP"
    # the value the walked opcodes build: the last one pushed before STOP (TUPLE1 wraps it)
    pushed = [argument for name, argument in walked if name in ("BININT1", "INT", "SHORT_BINUNICODE", "SHORT_BINBYTES")]
    assert ((pushed[-1],) if walked[-2][0] == "TUPLE1" else pushed[-1]) == loaded
    try:
        read_on = [(opcode.name, argument) for opcode, argument, _ in pickletools.genops(data)]
    except ValueError:
        read_on = None  # (pickletools may fail to read on through the damage)
    assert (read_on == walked) == pickletools_agrees


def test_a_memo_index_behind_a_cut_frame_is_a_pickle_level_hazard() -> None:
    import pickletools

    # the inner frame's bytes, read from after the outer frame: NONE, LONG_BINPUT 680825748 (the
    # unpickler would grow its memo array to 10 GB: libFuzzer's out-of-memory finding of
    # session 52), STOP; pickletools reads the outer frame's rest instead and sees no PUT
    inner = b"N" + b"r" + (680825748).to_bytes(4, "little") + b"."
    data = b"\x80\x04" + _frame(b"\x95" + len(inner).to_bytes(8, "little") + b"N.") + inner
    assert not any("PUT" in opcode.name for opcode, _, _ in pickletools.genops(data))
    assert ("LONG_BINPUT", 680825748) in list(pickle_cases.c_unpickler_opcodes(data))
    assert pickle_cases.pickle_level_hazard(data)
    assert pickle_cases.check_loads(data, structured=False) is None  # skipped, never loaded
    found = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fuzz", "corpus", "pickle",
                         "hazard-frame-cut-short")
    with open(found, "rb") as handle:
        assert pickle_cases.pickle_level_hazard(handle.read()[1:])  # (atheris input: mode byte first)


def test_a_lone_surrogate_in_a_stored_manifest_is_the_encoders_error() -> None:
    """Found by atheris_pickle in session 54 (``fuzz/corpus/pickle/f12-stored-surrogate-revision``,
    a stored-source plan whose ``revision`` holds ``"x\\udfffy"``): the stored manifest's digest
    encodes its canonical JSON as UTF-8 (spec §6.5, ``ensure_ascii=False``), so its
    ``__setstate__`` raises ``UnicodeEncodeError`` (a ``ValueError``), as its constructor does and
    as ``pyfuzz.check_constructor`` accepts. The harness judges the pickle side the same way;
    another ``UnicodeEncodeError`` stays a finding."""
    corpus = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fuzz", "corpus", "pickle")
    with open(os.path.join(corpus, "f12-stored-surrogate-revision"), "rb") as handle:
        data = handle.read()[1:]  # (the first byte is atheris_pickle's mode selector: raw)
    with pytest.raises(UnicodeEncodeError) as info:
        pickle.loads(data)
    assert pickle_cases.stored_digest_surrogate(info.value)
    pickle_cases.check_loads(data, structured=False)  # no Finding
    manifest = pickle_cases.seed_plans()[-1][1].source_manifest
    with pytest.raises(UnicodeEncodeError):
        dataclasses.replace(manifest, revision="x\udfffy")
    try:
        "\udfff".encode("utf-8")
    except UnicodeEncodeError as other:
        assert not pickle_cases.stored_digest_surrogate(other)

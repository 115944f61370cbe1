"""The revalidation passes a replace calls take their arguments as METH_FASTCALL
(common.h ``mr_parse_vector``): each rejection (argument count, an argument of the wrong type,
a 'p' argument whose truth test raises, keywords) is the TypeError text PyArg_ParseTuple gave
when the passes were METH_VARARGS (the expected texts are CPython's, built here from each
pass's format; checked equal to the METH_VARARGS build's on d53750c)."""

from __future__ import annotations

import gc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mooncake.reshard import _native

# name -> (format of the pass, as its PyArg_ParseTuple had it)
_FORMATS = {
    "revalidate_scan": "O!OOO!O!",
    "revalidate_scan_carried": "O!O!OOO!O!",
    "revalidate_fragments": "O!O!O!O!O!O!O!O|OOpOp",
    "revalidate_spaces": "O!OOOp|OO",
    "revalidate_coverage": "OO!OOO!O!O!|OO",
    "revalidate_views": "O!O!O!O!OOO!|OOpp",
    "revalidate_shapes": "OO!O!O!O!",
    "regions_canonical": "OOOO",
    "regions_canonical_carried": "O!O!O!O!O!",
}
_TYPES = {  # the 'O!' types, in each format's order
    "revalidate_scan": [tuple, type, type],
    "revalidate_scan_carried": [tuple, tuple, type, type],
    "revalidate_fragments": [list, type, type, type, type, type, tuple],
    "revalidate_spaces": [list],
    "revalidate_coverage": [list, list, dict, set],
    "revalidate_views": [tuple, tuple, list, list, type],
    "revalidate_shapes": [dict, tuple, tuple, tuple],
    "regions_canonical": [],
    "regions_canonical_carried": [tuple, tuple, type, type, type],
}


def _bounds(fmt: str) -> tuple[int, int]:
    count = sum(1 for c in fmt if c in "Op")
    head = fmt.split("|")[0]
    return sum(1 for c in head if c in "Op"), count


def _count_message(name: str, fmt: str, given_count: int) -> str:
    low, high = _bounds(fmt)
    if low == high:
        return f"{name}() takes exactly {low} argument{'s' if low != 1 else ''} ({given_count} given)"
    if given_count < low:
        return f"{name}() takes at least {low} argument{'s' if low != 1 else ''} ({given_count} given)"
    return f"{name}() takes at most {high} argument{'s' if high != 1 else ''} ({given_count} given)"


@pytest.mark.parametrize("name", sorted(_FORMATS))
def test_argument_counts_refused_with_the_varargs_text(name: str) -> None:
    fmt = _FORMATS[name]
    low, high = _bounds(fmt)
    for count in [*range(0, low), high + 1, high + 3]:
        with pytest.raises(TypeError) as info:
            getattr(_native, name)(*([None] * count))
        assert str(info.value) == _count_message(name, fmt, count)


@pytest.mark.parametrize("name", sorted(_FORMATS))
def test_keywords_refused_with_the_varargs_text(name: str) -> None:
    with pytest.raises(TypeError) as info:
        getattr(_native, name)(operations=())
    assert str(info.value) == f"{name}() takes no keyword arguments"


def _plain_args(name: str) -> list[object]:
    """Arguments each of the accepted type (not a valid call: only the parse is exercised)."""
    fmt, types = _FORMATS[name], iter(_TYPES[name])
    args: list[object] = []
    i = 0
    while i < len(fmt):
        c = fmt[i]
        if c == "O" and fmt[i + 1 : i + 2] == "!":
            args.append({tuple: (), list: [], dict: {}, set: set(), type: int}[next(types)])
            i += 2
            continue
        if c == "O":
            args.append(None)
        elif c == "p":
            args.append(False)
        i += 1
    return args


@pytest.mark.parametrize("name", sorted(_FORMATS))
def test_each_typed_argument_refused_with_the_varargs_text(name: str) -> None:
    fmt = _FORMATS[name]
    args = _plain_args(name)
    positions = []
    index = 0
    i = 0
    while i < len(fmt):
        if fmt[i] == "O":
            if fmt[i + 1 : i + 2] == "!":
                positions.append(index)
                i += 1
            index += 1
        elif fmt[i] == "p":
            index += 1
        i += 1
    expected_types = _TYPES[name]
    for position, expected in zip(positions, expected_types):
        bad = list(args)
        bad[position] = 1.5
        with pytest.raises(TypeError) as info:
            getattr(_native, name)(*bad)
        assert str(info.value) == f"{name}() argument {position + 1} must be {expected.__name__}, not float"


class _TruthRaises:
    def __bool__(self) -> bool:
        raise RuntimeError("truth test")


@pytest.mark.parametrize("name", ["revalidate_fragments", "revalidate_spaces", "revalidate_views"])
def test_a_flag_whose_truth_test_raises_propagates(name: str) -> None:
    fmt = _FORMATS[name]
    args = _plain_args(name)
    flag = [c for c in fmt if c in "Op"].index("p")
    args[flag] = _TruthRaises()
    with pytest.raises(RuntimeError, match="truth test"):
        getattr(_native, name)(*args)


@given(st.lists(st.sampled_from([None, 0, 1.5, (), [], {}, set(), int, True, False]), max_size=14))
@settings(max_examples=200, deadline=None)
def test_any_arguments_raise_like_the_varargs_parse(values: list[object]) -> None:
    """Whatever the arguments, a parse failure is the text the METH_VARARGS parse gave: the
    count first, then the first argument of a wrong type (PyArg_ParseTuple's order)."""
    for name, fmt in _FORMATS.items():
        low, high = _bounds(fmt)
        try:
            getattr(_native, name)(*values)
        except TypeError as error:
            text = str(error)
            if not low <= len(values) <= high:
                assert text == _count_message(name, fmt, len(values))
            elif text.startswith(f"{name}() argument "):
                position = int(text.split()[2]) - 1
                # the first mismatching typed argument
                kinds = iter(_TYPES[name])
                index, i, first = 0, 0, None
                while i < len(fmt) and index < len(values):
                    if fmt[i] == "O" and fmt[i + 1 : i + 2] == "!":
                        kind = next(kinds)
                        if first is None and not isinstance(values[index], kind):
                            first = index
                        i += 1
                        index += 1
                    elif fmt[i] in "Op":
                        index += 1
                    i += 1
                assert position == first
        except Exception:
            pass  # a pass's own check after the parse (not this test's subject)


def assert_collector_kept(calls: list[tuple[str, list[object]]]) -> None:
    """Each ``_native.<name>(*args)`` (raising or not) leaves the collector enabled."""
    was = gc.isenabled()
    gc.enable()
    try:
        for name, args in calls:
            try:
                getattr(_native, name)(*args)
            except Exception:
                pass
            assert gc.isenabled()
    finally:
        if not was:
            gc.disable()


def test_passes_keep_the_collector_state() -> None:
    assert_collector_kept([(name, _plain_args(name)) for name in _FORMATS])

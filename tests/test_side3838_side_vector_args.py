"""``revalidate_side`` takes its arguments as METH_FASTCALL (common.h ``mr_parse_vector``, as
the other revalidation passes since session 37): every rejection (argument count, an argument
of the wrong type, keywords) is the TypeError text its METH_VARARGS PyArg_ParseTuple gave, its
own checks after the parse keep their texts, a subclass of a typed argument's type is still
accepted, and the collector state is kept. The texts are built by test_glue37_vector_args'
helpers from the pass's format."""

from __future__ import annotations

import contextlib
from typing import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import test_glue37_vector_args as glue
from mooncake.reshard import _native

NAME = "revalidate_side"
FORMAT = "O!O!O!OO!O!O!O!O!O!O!|OO"
TYPES = [list, list, list, dict, list, dict, set, type, type, type]


@contextlib.contextmanager
def _side_only() -> Iterator[None]:
    """glue's tables holding this pass only (restored after)."""
    formats, types = dict(glue._FORMATS), dict(glue._TYPES)
    glue._FORMATS.clear()
    glue._TYPES.clear()
    glue._FORMATS[NAME], glue._TYPES[NAME] = FORMAT, TYPES
    try:
        yield
    finally:
        glue._FORMATS.clear()
        glue._TYPES.clear()
        glue._FORMATS.update(formats)
        glue._TYPES.update(types)


@pytest.fixture(autouse=True)
def _side_format() -> Iterator[None]:
    with _side_only():
        yield


def test_argument_counts_refused_with_the_varargs_text() -> None:
    glue.test_argument_counts_refused_with_the_varargs_text(NAME)


def test_keywords_refused_with_the_varargs_text() -> None:
    glue.test_keywords_refused_with_the_varargs_text(NAME)
    with pytest.raises(TypeError) as info:
        _native.revalidate_side(*glue._plain_args(NAME), row_of=None)
    assert str(info.value) == f"{NAME}() takes no keyword arguments"


def test_each_typed_argument_refused_with_the_varargs_text() -> None:
    glue.test_each_typed_argument_refused_with_the_varargs_text(NAME)


class _ListSub(list):  # type: ignore[type-arg]
    pass


class _DictSub(dict):  # type: ignore[type-arg]
    pass


def test_own_checks_after_the_parse_keep_their_texts() -> None:
    args = glue._plain_args(NAME)  # side_of None: the pass's own check
    with pytest.raises(TypeError, match=r"^revalidate_side: side_of must be a list or packed positions$"):
        _native.revalidate_side(*args)
    assert len(args) == 13  # (the two optional ones None)
    args[3] = []
    with pytest.raises(TypeError, match=r"^revalidate_side: placement_type must be a type or None$"):
        _native.revalidate_side(*args[:11], 1.5)
    with pytest.raises(TypeError, match=r"^revalidate_side: row_of must be a list or None$"):
        _native.revalidate_side(*args[:11], None, ())
    # a subclass of an 'O!' type passes the parse (as PyArg_ParseTuple's 'O!'): an empty side is
    # then decided by the pass itself
    sub = [_ListSub(), _ListSub(), _ListSub(), [], _DictSub(), _ListSub(), _DictSub(), set(), int, int, int]
    assert _native.revalidate_side(*sub) in (True, None)
    assert _native.revalidate_side(*args) is True  # nothing to check on an empty side


@given(st.lists(st.sampled_from([None, 0, 1.5, (), [], {}, set(), int, True, b""]), max_size=15))
@settings(max_examples=200, deadline=None)
def test_any_arguments_raise_like_the_varargs_parse(values: list[object]) -> None:
    with _side_only():
        glue.test_any_arguments_raise_like_the_varargs_parse.hypothesis.inner_test(values)


def test_the_pass_keeps_the_collector_state() -> None:
    with _side_only():
        calls = [(NAME, args) for args in (glue._plain_args(NAME), [1.5], [])]
    glue.assert_collector_kept(calls)
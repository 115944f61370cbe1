"""Seeing foreign code run inside the extension's C passes (the AUDIT5 tests, session 25).

``native_hits(call)`` runs ``call`` under a profile hook that keeps the stack of running
``_native`` functions with their calling frames. The ``Foreign*`` values record each dunder
call whose caller frame is the innermost native function's calling frame: that C function called
it itself (a compare, hash, length or iteration inside the pass). Calls made from Python code
(the package's or the test's) are not counted.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Optional

from mooncake.reshard import _native

_NATIVE = _native.__name__


class NativeWatch:
    """Profile hook: ``stack`` holds (function, calling frame) of the running ``_native`` calls;
    with ``under``, only those made from a frame of that function's name (and any below one)."""

    def __init__(self, under: Optional[str] = None) -> None:
        self.under = under
        self.stack: list[tuple[Any, Any]] = []
        self.hits: list[str] = []

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if event == "c_call":
            native = getattr(arg, "__module__", None) == _NATIVE or type(getattr(arg, "__self__", None)).__module__ == _NATIVE
            if native and (self.under is None or self.stack or frame.f_code.co_name == self.under):
                self.stack.append((arg, frame))
        elif event in ("c_return", "c_exception") and self.stack and self.stack[-1][0] is arg:
            self.stack.pop()


_ACTIVE: list[NativeWatch] = []


def record(what: str) -> None:
    """Called by a dunder: counts it when the innermost native function called it directly."""
    if _ACTIVE:
        watch = _ACTIVE[-1]
        if watch.stack and watch.stack[-1][1] is sys._getframe(2):
            watch.hits.append(f"{what} in {watch.stack[-1][0].__name__}")


def native_hits(call: Callable[[], Any], under: Optional[str] = None) -> list[str]:
    """The distinct dunder calls made by native functions while ``call()`` runs (its result or
    exception is ignored)."""
    watch = NativeWatch(under)
    _ACTIVE.append(watch)
    previous = sys.getprofile()
    sys.setprofile(watch)
    try:
        call()
    except Exception:
        pass
    finally:
        sys.setprofile(previous)
        _ACTIVE.pop()
    return sorted(set(watch.hits))


class ForeignStr(str):
    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        record("str.__eq__")
        return str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        record("str.__ne__")
        return str.__ne__(self, other)

    def __hash__(self) -> int:
        record("str.__hash__")
        return str.__hash__(self)


class ForeignInt(int):
    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        record("int.__eq__")
        return int.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        record("int.__ne__")
        return int.__ne__(self, other)

    def __hash__(self) -> int:
        record("int.__hash__")
        return int.__hash__(self)


class ForeignTuple(tuple):  # type: ignore[type-arg]
    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        record("tuple.__eq__")
        return tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        record("tuple.__ne__")
        return tuple.__ne__(self, other)

    def __hash__(self) -> int:
        record("tuple.__hash__")
        return tuple.__hash__(self)

    def __iter__(self) -> Any:
        record("tuple.__iter__")
        return tuple.__iter__(self)

    def __len__(self) -> int:
        record("tuple.__len__")
        return tuple.__len__(self)

"""The per-call proof that the C steps' layout memos may be trusted (AUDIT40)."""

from __future__ import annotations

import sys
from typing import Any, Callable, Optional, TypeVar

from . import _native

_T = TypeVar("_T")

# The package's layout value classes with their layout's field names (``_layout.layout_dataclass``
# registers each one): proved on every call whatever the memos hold at that moment (a nested
# cold call empties them).
_SPECS: tuple[tuple[type, tuple[str, ...]], ...] = ()


def register_layout(cls: type, names: tuple[str, ...]) -> None:
    """Add a layout value class (``_layout.layout_dataclass``) to the classes every proof covers."""
    global _SPECS
    _SPECS = _SPECS + ((cls, names),)


_MONITORING = getattr(sys, "monitoring", None)  # CPython 3.12+


def _quiet() -> bool:
    """No trace or profile function and no ``sys.monitoring`` tool is set (runs no Python code
    but this function's)."""
    if sys.gettrace() is not None or sys.getprofile() is not None:
        return False
    if _MONITORING is not None:
        for tool in range(6):
            if _MONITORING.get_tool(tool) is not None:
                return False
    return True


def memo_proved(call: Callable[[], _T], sealed: Optional[list[Any]] = None) -> _T:
    """``call()`` for a public entry point whose C steps check a value class's layout through
    per-call-site memos (csrc/layout.h ``mr_layout_memo``: a class accepted once is not checked
    again, so a field property planted on it later is not seen), while the steps they stand for
    are rules that read attributes (AUDIT40; tests/test_audit39_bind_warm_memo.py). The memos are
    trusted only when ``_native.layout_memos_unshadowed(_SPECS)`` holds before the call and again
    after it: ``mr_fields_unshadowed``, the revalidation's per-call proof, for the package's layout
    classes and for every class a memo holds (a user subclass a memo accepted as well), with its
    field names.
    Otherwise the call runs (again) in cold mode (``_native.layout_memos_cold``): every memo'd
    step checks its class in full, declines a shadowed one and leaves the decision to the rules,
    as in a fresh process.

    Why after, too: the steps run foreign Python code for inputs that are not of the exact classes
    or hold values that are not plain (a subclass's attribute read, a non-exact ``__eq__`` or
    ``__hash__`` in a snapshot comparison, a descriptor, a profile hook), and such code can plant a
    property after the first proof. A plant standing at the end is seen by the second proof (which
    also covers classes memos took during the call) and the call is decided again, cold, on the
    classes as they are then (its raise as well as its result: a refusal can come from a memo'd
    step too). One planted and removed again within the call is not seen (as for the
    revalidation, which proves before and after its passes). Both proofs run no Python code.

    ``sealed`` (opt-in; FRESH41): an empty list the call appends to when it returns a result it
    decided sealed, i.e. it proved that no code but this package's ran from its entry to its
    return (bind's ``_sealed``: no hook at its entry and at its end, or an untripped watch; the
    exact classes holding plain values; the collector paused; the values it releases from its
    inputs held in that very list, so they are released only after this decision). The proof
    after the call is then skipped, and only when no hook was set before the first proof either:
    from that proof to the call's entry only this function and the call's first lines run, so no
    code can have planted a property between the two (a hook that was set, planted and removed
    itself before the call's entry would be gone by its entry check: hence the check here,
    before the proof). A call that raised, or did not append, is proved after as before. Out of
    scope as for the sealed call itself: another thread, a signal handler, an audit hook."""
    quiet = sealed is not None and not sealed and _quiet()  # (before the proof: see above)
    if _native.layout_memos_unshadowed(_SPECS):
        try:
            result = call()
        except Exception:
            if _native.layout_memos_unshadowed(_SPECS):
                raise
        else:
            if (quiet and sealed) or _native.layout_memos_unshadowed(_SPECS):
                return result
            del result
    if sealed is not None:
        del sealed[:]  # (the cold call decides afresh; its own appends are not read)
    _native.layout_memos_cold(1)
    try:
        return call()
    finally:
        _native.layout_memos_cold(-1)


def memo_proved_once(call: Callable[[], _T], recheck: Callable[[_T], None]) -> _T:
    """``memo_proved`` for a call that consumes its input and cannot run again (a packed pickle
    restore empties its record as it goes, AUDIT41): proved before, it runs as is, else in cold
    mode. When the proof after it fails, ``recheck(result)`` re-decides the result in cold mode
    (every rule on the objects as they are then: ``TransferPlan.__post_init__``); a raise stands
    (the input is gone: a refusal by a memo'd step with a property planted during the call is
    not decided again)."""
    if not _native.layout_memos_unshadowed(_SPECS):
        _native.layout_memos_cold(1)
        try:
            return call()
        finally:
            _native.layout_memos_cold(-1)
    result = call()
    if not _native.layout_memos_unshadowed(_SPECS):
        _native.layout_memos_cold(1)
        try:
            recheck(result)
        finally:
            _native.layout_memos_cold(-1)
    return result


__all__ = ["memo_proved", "memo_proved_once"]

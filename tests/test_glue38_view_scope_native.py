"""``_ViewScope`` in C (csrc/view_scope.c): the saved fields come back in the Python class's
order (``held`` last, so what a revalidation held is released with the outer scope already
back), a scope cannot be left before it is entered, and an exception passes through."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest

from mooncake.reshard.weight._planner import bound_contracts as bc


class _Held:
    pass


def test_held_values_are_released_after_the_outer_scope_is_back() -> None:
    state = bc._VIEW_STATE
    seen: list[Any] = []
    with bc._ViewScope(built_now=True):
        outer = (state.scope, state.built_now, state.snapshots)
        with bc._ViewScope():
            item = _Held()
            state.held.append(item)
            ref = weakref.ref(item, lambda _: seen.append((state.scope, state.built_now, state.snapshots)))
            del item
            gc.collect()
            assert ref() is not None  # held by the inner scope's list
        assert ref() is None  # released when the inner scope was left
        assert len(seen) == 1 and all(a is b for a, b in zip(seen[0], outer))


def test_built_now_is_stored_as_given_and_restored() -> None:
    state = bc._VIEW_STATE
    before = (state.scope, state.built_now, state.held, state.snapshots)
    with bc._ViewScope(built_now=True):
        assert state.built_now is True
        assert state.scope == {} and state.held == [] and state.snapshots == {}
    with bc._ViewScope(True):
        assert state.built_now is True
    after = (state.scope, state.built_now, state.held, state.snapshots)
    assert all(a is b for a, b in zip(before, after))


def test_leaving_before_entering_is_refused() -> None:
    scope = bc._ViewScope()
    with pytest.raises(RuntimeError, match="left without being entered"):
        scope.__exit__(None, None, None)
    with scope:
        pass
    with pytest.raises(RuntimeError, match="left without being entered"):
        scope.__exit__(None, None, None)
    with pytest.raises(TypeError):
        bc._ViewScope(built_now=True, other=1)


def test_an_exception_passes_and_the_state_is_restored() -> None:
    state = bc._VIEW_STATE
    before = (state.scope, state.built_now, state.held, state.snapshots)
    with pytest.raises(LookupError):
        with bc._ViewScope():
            raise LookupError("kept")
    assert all(a is b for a, b in zip(before, (state.scope, state.built_now, state.held, state.snapshots)))

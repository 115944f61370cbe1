"""``_ViewScope`` on the thread's own field dict of ``_VIEW_STATE`` (``_ViewState.__init__`` sets
every field in each thread), as the attribute reads and writes it replaced."""

from __future__ import annotations

import threading

from mooncake.reshard.weight._planner import bound_contracts as bc


def test_view_scope_fields_per_thread_and_restored() -> None:
    """``_ViewScope`` reads and writes the thread's own dict of ``_VIEW_STATE``: a new thread
    starts from the defaults, attribute reads see what the scope wrote, and nested scopes
    restore the outer one's fields."""
    seen: dict[str, object] = {}

    def run() -> None:
        state = bc._VIEW_STATE
        seen["fresh"] = dict(state.__dict__)
        with bc._ViewScope(built_now=True):
            outer = (state.scope, state.built_now, state.held, state.snapshots)
            seen["outer"] = (type(outer[0]), outer[1], type(outer[2]), type(outer[3]))
            with bc._ViewScope():
                seen["inner_built_now"] = state.built_now
                seen["inner_fresh"] = state.scope is not outer[0] and state.held is not outer[2]
            seen["restored"] = all(a is b for a, b in zip(
                (state.scope, state.built_now, state.held, state.snapshots), outer))
        seen["after"] = (state.scope, state.built_now, state.held, state.snapshots)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert seen["fresh"] == {"scope": None, "built_now": False, "held": None, "snapshots": None}
    assert seen["outer"] == (dict, True, list, dict)
    assert seen["inner_built_now"] is False and seen["inner_fresh"] is True
    assert seen["restored"] is True
    assert seen["after"] == (None, False, None, None)

"""collector_paused: the collector is restored however users nest or interleave."""

import gc
import threading

import pytest

from mooncake.reshard._collector import collector_paused


def test_restores_enabled_and_disabled_states() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_restores_on_error_and_when_nested() -> None:
    with pytest.raises(RuntimeError):
        with collector_paused():
            with collector_paused():
                assert not gc.isenabled()
            assert not gc.isenabled()
            raise RuntimeError("boom")
    assert gc.isenabled()


def test_interleaved_threads_leave_the_collector_enabled() -> None:
    # A enters, B enters, A leaves, B leaves: a per-call save/restore would make B restore
    # the "disabled" state it found and leave the collector off for good.
    a_inside, b_inside, a_left = threading.Event(), threading.Event(), threading.Event()
    seen: list = []

    def thread_a() -> None:
        with collector_paused():
            a_inside.set()
            b_inside.wait(10)
        a_left.set()

    def thread_b() -> None:
        a_inside.wait(10)
        with collector_paused():
            b_inside.set()
            a_left.wait(10)
            seen.append(gc.isenabled())

    threads = [threading.Thread(target=thread_a), threading.Thread(target=thread_b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert seen == [False]
    assert gc.isenabled()


def test_binding_pauses_the_collector_and_restores_it() -> None:
    # bind_logical_transfer_plan pauses the collector while it builds the plan; the state the
    # caller had is back afterwards, also when binding fails.
    from memory_executor import HostWorld, tp_placement

    from mooncake.reshard.weight import _planner

    world = HostWorld(tp_placement(2, prefix="s", shape=(4, 6)), tp_placement(3, prefix="t", shape=(4, 6)))
    seen: list = []
    binding_module = _planner.binding
    original = binding_module._recheck_logical_target

    def spy(plan: object) -> None:
        seen.append(gc.isenabled())
        original(plan)

    binding_module._recheck_logical_target = spy
    try:
        world.bind()
        assert seen == [False] and gc.isenabled()
        with pytest.raises(ValueError):
            world.bind(world.target_bindings[:1])
        assert gc.isenabled()
        gc.disable()
        try:
            world.bind()
            assert not gc.isenabled()
        finally:
            gc.enable()
    finally:
        binding_module._recheck_logical_target = original


def test_the_pause_is_one_native_object_that_counts_its_users() -> None:
    from mooncake.reshard import _native

    pause = collector_paused()
    assert pause is collector_paused() is _native.collector_pause
    with pytest.raises(TypeError):
        type(pause)()  # one instance: the count is process-wide
    # Leaving more often than entering is refused and changes nothing.
    with pytest.raises(RuntimeError, match="left more often than entered"):
        pause.__exit__(None, None, None)
    assert gc.isenabled()
    with pytest.raises(TypeError, match="takes 3 arguments"):
        pause.__exit__(None)
    # Entered twice by hand: disabled until the second exit, then restored.
    pause.__enter__()
    pause.__enter__()
    pause.__exit__(None, None, None)
    assert not gc.isenabled()
    pause.__exit__(None, None, None)
    assert gc.isenabled()


def test_an_exception_passes_through_the_pause() -> None:
    with pytest.raises(KeyError):
        with collector_paused():
            raise KeyError("kept")
    assert gc.isenabled()

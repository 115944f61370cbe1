"""FRESH41: bind skips the layout memos' proof after the call (``_memo_proof.memo_proved``'s
``sealed``) when the call ran sealed to its end and no hook was set before the first proof; every
other call is proved after as before. A property planted by foreign code during (or just before)
the call must still be decided as a cold process decides it (the oracle of
tests/test_audit4040_bind_cold_memos.py)."""

from __future__ import annotations

import sys
from typing import Any, Callable

import pytest

from forge_helpers import profiled_outcome, sized_world

from mooncake.reshard import _memo_proof, _native

from test_audit4040_bind_cold_memos import MIDCALL, _bind, _plant, _summary, cold  # noqa: F401 (fixture)


def _proofs(call: Callable[[], Any]) -> tuple[Any, int]:
    """``call()``'s result and how many times it ran the memo proof."""
    real = _native.layout_memos_unshadowed
    count = [0]

    def spy(specs: Any) -> bool:
        count[0] += 1
        return real(specs)

    _native.layout_memos_unshadowed = spy
    try:
        result = call()
    finally:
        _native.layout_memos_unshadowed = real
    return result, count[0]


def test_a_sealed_bind_proves_the_memos_once():
    _bind(sized_world(2))
    world = sized_world(2)
    result, proofs = _proofs(lambda: _bind(world))
    assert _summary(result) == ["plan"]
    assert proofs == 1  # (the start build proved twice)


def test_a_bind_under_a_profile_hook_proves_after_it_too():
    _bind(sized_world(2))
    world = sized_world(2)
    result, proofs = _proofs(lambda: profiled_outcome(lambda *_: None, lambda: _bind(world)))
    assert _summary(result) == ["plan"]
    assert proofs > 1  # (the unsealed call's rechecks run nested proofs too)


def test_memo_proved_without_sealed_or_with_an_unsealed_call_proves_after():
    assert _proofs(lambda: _memo_proof.memo_proved(lambda: 7))[1] == 2
    assert _proofs(lambda: _memo_proof.memo_proved(lambda: 7, []))[1] == 2  # (the call did not append)
    seal: list[Any] = []
    assert _proofs(lambda: _memo_proof.memo_proved(lambda: seal.append(None), seal))[1] == 1
    # a list already holding a token when the call starts is no proof of this call
    assert _proofs(lambda: _memo_proof.memo_proved(lambda: 7, [None]))[1] == 2


def test_a_call_that_raises_is_proved_after_even_when_sealed():
    seal: list[Any] = []

    def call() -> None:
        seal.append(None)
        raise ValueError("refused")

    with pytest.raises(ValueError, match="refused"):
        _proofs(lambda: _memo_proof.memo_proved(call, seal))
    count = [0]
    real = _native.layout_memos_unshadowed

    def spy(specs: Any) -> bool:
        count[0] += 1
        return real(specs)

    _native.layout_memos_unshadowed = spy
    try:
        with pytest.raises(ValueError, match="refused"):
            _memo_proof.memo_proved(call, [])
    finally:
        _native.layout_memos_unshadowed = real
    assert count[0] == 2


def _bind_planted_by_hook(case: tuple[str, str, str, str], at_function: str) -> Any:
    """Bind's outcome (warm memos) while a profile hook, set before the call, plants ``case``'s
    property at ``at_function``'s call and removes itself; the plant is undone after the call."""
    _bind(sized_world(2))
    world = sized_world(2)
    undo: list[Callable[[], None]] = []

    def hook(frame: Any, event: str, _arg: Any) -> None:
        if event == "call" and frame.f_code.co_name == at_function and not undo:
            undo.append(_plant(case))
            sys.setprofile(None)

    previous = sys.getprofile()
    sys.setprofile(hook)
    try:
        return _bind(world)
    finally:
        sys.setprofile(previous)
        assert undo, "the hook did not plant"
        undo[0]()


@pytest.mark.parametrize("case", MIDCALL, ids=["-".join(case) for case in MIDCALL])
def test_a_hook_that_plants_and_removes_itself_before_bind_is_caught(case, cold):  # noqa: F811
    """A profile hook, set before the call, plants the property right after memo_proved's first
    proof (at ``_watched_bind``'s call) and removes itself: bind's entry sees no hook and the call
    runs sealed, but memo_proved saw the hook before its proof and proves after the call, which
    fails; the call is decided again, cold, as a cold process decides it with the property
    planted first."""
    result = _bind_planted_by_hook(case, "_watched_bind")
    assert _summary(result) == cold["|".join(case)]
    assert _summary(_bind(sized_world(2))) == ["plan"]


@pytest.mark.parametrize("case", MIDCALL, ids=["-".join(case) for case in MIDCALL])
def test_a_property_planted_mid_bind_by_a_hook_is_still_seen(case, cold):  # noqa: F811
    """As tests/test_audit4040's mid-call plant, with a hook that removes itself once it planted
    (at step 7-8's call): the call is unsealed at its end check or proved after it."""
    result = _bind_planted_by_hook(case, "_fused_steps_7_8")
    assert _summary(result) == cold["|".join(case)]


def test_instruction_counts_bind_fresh_loop_runs() -> None:
    """benchmarks/instruction_counts.py's bind_fresh stage (valgrind itself is not needed)."""
    import os
    import subprocess

    script = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "instruction_counts.py")
    for arguments in (("bind_fresh", "2", "3"), ("bind_fresh", "0", "2"), ("bind", "2")):
        completed = subprocess.run(
            [sys.executable, script, "--loop", *arguments], capture_output=True, text=True, timeout=300
        )
        assert completed.returncode == 0, completed.stderr

"""``_native.bind_side_ids``'s fragment loop asks for its lines in three stages (binder.c
``bd_side_prefetch``, ATTEST42: fragment i + 12's lines, fragment i + 6's id str, the id table's
home slot of fragment i + 3's id, whose hash is computed there when the str has none yet). Hints
only: checked against ``binding._bind_side_ids`` (the oracle) on sides long enough for every stage,
with what the hints read ahead forged at any position: a repeated id (equal, another object, never
hashed yet), a str subclass id, a non-str id, a fragment of a subclass, a fragment that is not a
runtime fragment."""

from __future__ import annotations

from typing import Any, List, Tuple

from hypothesis import given, settings
from hypothesis import strategies as st

from test_bind11_side_ids import _copy, _side
from test_bind_side import CLASSES, FragmentSub, StrSub, subclass_copy

from mooncake.reshard import _native
from mooncake.reshard.weight._planner import binding as binding_module

KINDS = ["repeat", "repeat-fresh", "str-sub", "int", "fragment-sub", "not-a-fragment"]


def oracle(bindings: Tuple[Any, ...]) -> Any:
    """The Python loop's outcome: its participants, or the error it raises (a fragment that is not
    a runtime fragment fails at its attribute read)."""
    try:
        return ("ok", binding_module._bind_side_ids("target", bindings))
    except (ValueError, AttributeError) as exc:
        return ("error", str(exc))


def _fresh(text: str) -> str:
    """An equal str that is another object, its hash not computed yet."""
    copy = "".join(list(text))
    assert copy == text and copy is not text
    return copy


def _forged(lengths: List[int], forgeries: List[Tuple[str, int, int]], prefix: str) -> Tuple[Any, ...]:
    ids = [[_fresh(f"{prefix}-{k}-{i}") for i in range(n)] for k, n in enumerate(lengths)]
    bindings = _side(ids)
    for kind, where, source in forgeries:
        k = where % len(lengths)
        fragments = list(bindings[k].fragments)
        if not fragments:
            continue
        at = (where // len(lengths)) % len(fragments)
        target = fragments[at]
        if not isinstance(target, CLASSES[1]):
            continue  # (an earlier forgery put something else here)
        if kind in ("repeat", "repeat-fresh"):
            donors = [f for b in bindings for f in b.fragments]
            text = getattr(donors[source % len(donors)], "fragment_id", "x")
            if not isinstance(text, str):
                continue
            fragments[at] = _copy(target, _fresh(str(text)) if kind == "repeat-fresh" else text)
        elif kind == "str-sub":
            fragments[at] = _copy(target, StrSub(f"{prefix}-sub-{source}"))
        elif kind == "int":
            fragments[at] = _copy(target, 1 << (70 + source % 8))  # type: ignore[arg-type]
        elif kind == "fragment-sub":
            fragments[at] = subclass_copy(target, FragmentSub)
        else:
            fragments[at] = ("not", "a", "fragment")
        object.__setattr__(bindings[k], "fragments", tuple(fragments))
    return bindings


def _decide(bindings: Tuple[Any, ...]) -> None:
    fast = _native.bind_side_ids(*CLASSES, bindings)
    expected = oracle(bindings)
    if fast is not None:
        assert expected == ("ok", fast)
    elif all(type(f) is CLASSES[1] and type(getattr(f, "fragment_id", None)) is str for b in bindings for f in b.fragments):
        # exact classes and exact str ids throughout: the C loop declines only where the rules fail
        assert expected[0] == "error"


@settings(max_examples=150, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 40), min_size=1, max_size=4),
    forgeries=st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, 400), st.integers(0, 400)), max_size=3),
    salt=st.integers(0, 10**9),
)
def test_side_ids_decide_as_the_loop_with_anything_forged_ahead(
    lengths: List[int], forgeries: List[Tuple[str, int, int]], salt: int
) -> None:
    _decide(_forged(lengths, forgeries, f"a42-{salt}"))


def test_a_repeat_inside_every_prefetch_window_declines() -> None:
    # the repeat placed 1..14 fragments after its first occurrence (within and past each stage)
    for gap in range(1, 15):
        ids = [[_fresh(f"w-{gap}-{i}") for i in range(30)]]
        ids[0][5 + gap] = _fresh(ids[0][5])
        bindings = _side(ids)
        assert oracle(bindings)[0] == "error"
        assert _native.bind_side_ids(*CLASSES, bindings) is None


def test_long_sides_of_fresh_ids_are_accepted() -> None:
    bindings = _side([[_fresh(f"long-{k}-{i}") for i in range(3000)] for k in range(4)])
    fast = _native.bind_side_ids(*CLASSES, bindings)
    assert fast is not None and oracle(bindings) == ("ok", fast)

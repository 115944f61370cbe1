"""``_native.project_attested``'s selection check reads an exact ``RuntimeBindingFragment``'s
``fragment_id`` from its C-owned layout slot (what ``getattr`` returns) instead of calling
``getattr``. Evidence fragments whose ``fragment_id`` was forged after attestation (removed,
not a str, empty, a str subclass, an equal str that is another object, another id) and
fragments of a subclass (read with ``getattr`` as before) must give what the Python loop gives:
the same executors, or ``None`` from the C call and the loop's own outcome."""

from __future__ import annotations

from typing import Any, List, Tuple

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from layout_model import Layout
from spec_helpers import field_state, forged_instance
from test_native_binder_project import _side, draw_selection, project
from test_planner_oracle import placement_pairs

from mooncake.reshard import _native
from mooncake.reshard.weight import RuntimeBindingFragment
from mooncake.reshard.weight._planner.binding import _build_executor_plans_with


class _Str(str):
    pass


class _Fragment(RuntimeBindingFragment):
    pass


def _outcome(placement: Any, kept: List[Any], attestations: Any, selected: Any, c: bool) -> Any:
    """The executors, or the first failure by type and message; c False: the C call switched
    off (the Python loop alone, the oracle)."""
    original = _native.project_attested
    if not c:
        _native.project_attested = lambda *args: None  # type: ignore[attr-defined]
    try:
        return _build_executor_plans_with((placement,), kept, "target", selected, attestations)
    except Exception as exc:  # forged values fail in several ways: the same one on both paths
        return (type(exc), str(exc))
    finally:
        _native.project_attested = original  # type: ignore[attr-defined]


FORGERIES = ["delete", "int", "empty", "str-subclass", "equal-copy", "other-id", "subclass"]


def _evidence_fragments(attestations: Any) -> List[Any]:
    return [f for attestation in attestations.values() for f in attestation.evidence.fragments]


def _forge(attestations: Any, index: int, forgery: str) -> None:
    fragments = _evidence_fragments(attestations)
    fragment = fragments[index % len(fragments)]
    old = fragment.fragment_id
    if forgery == "delete":
        object.__delattr__(fragment, "fragment_id")
    elif forgery == "int":
        object.__setattr__(fragment, "fragment_id", 7)
    elif forgery == "empty":
        object.__setattr__(fragment, "fragment_id", "")
    elif forgery == "str-subclass":
        object.__setattr__(fragment, "fragment_id", _Str(old))
    elif forgery == "equal-copy":
        object.__setattr__(fragment, "fragment_id", "".join(list(old)))
    elif forgery == "other-id":
        object.__setattr__(fragment, "fragment_id", old + "-moved")
    else:
        # the evidence holding a subclass instance in its place (read with getattr)
        for attestation in attestations.values():
            evidence = attestation.evidence
            if fragment in evidence.fragments:
                replaced = tuple(
                    forged_instance(_Fragment, field_state(f)) if f is fragment else f for f in evidence.fragments
                )
                object.__setattr__(evidence, "fragments", replaced)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(placement_pairs(), st.integers(0, 1000), st.sampled_from(FORGERIES), st.data())
def test_forged_evidence_ids_decide_as_the_python_loop(
    pair: Tuple[Layout, Layout], index: int, forgery: str, data: st.DataObject
) -> None:
    placement, kept, attestations = _side(pair, 0)
    assume(_evidence_fragments(attestations))
    ids = sorted(f.fragment_id for b in kept for f in b.fragments)
    selected = draw_selection(data, data.draw(st.sampled_from(["all", "subset", "extra"])), ids)
    _forge(attestations, index, forgery)
    expected = _outcome(placement, kept, attestations, selected, c=False)
    direct = project(placement, kept, attestations, selected)
    if direct is not None:
        assert not (isinstance(expected, tuple) and len(expected) == 2 and isinstance(expected[0], type))
        assert direct == expected
    assert _outcome(placement, kept, attestations, selected, c=True) == expected


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(placement_pairs(), st.data())
def test_genuine_evidence_is_decided_in_c(pair: Tuple[Layout, Layout], data: st.DataObject) -> None:
    placement, kept, attestations = _side(pair, 0)
    ids = sorted(f.fragment_id for b in kept for f in b.fragments)
    selected = draw_selection(data, data.draw(st.sampled_from(["all", "subset", "extra"])), ids)
    expected = _outcome(placement, kept, attestations, selected, c=False)
    direct = project(placement, kept, attestations, selected)
    if direct is not None:
        assert direct == expected
    assert _outcome(placement, kept, attestations, selected, c=True) == expected
    if selected == frozenset(ids):
        assert direct is not None  # (every part wholly selected, every id emitted: decided here)

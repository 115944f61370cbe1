"""``_native.bind_side_ids`` keeps the side's fragment ids in a table of its own (binder.c
``bd_idset``, session 31): sized for the side's fragment count up front, keyed by the str's hash,
an id that repeats found by ``==`` (not only by identity). Checked against ``binding._bind_side_ids``
(the oracle: a set) on sides of many fragments, with repeated ids that are equal but distinct
objects, and with ids whose hashes share their low bits (long probe runs in the table)."""

from __future__ import annotations

from typing import Any, List, Tuple

import pytest

from test_bind_side import CLASSES, fresh_side, oracle

from mooncake.reshard import _native
from mooncake.reshard.weight import RuntimeBindingFragment
from spec_helpers import field_state


def _copy(fragment: Any, fragment_id: str) -> Any:
    twin = object.__new__(RuntimeBindingFragment)
    for key, value in field_state(fragment).items():
        object.__setattr__(twin, key, value)
    object.__setattr__(twin, "fragment_id", fragment_id)
    return twin


def _side(ids_per_binding: List[List[str]]) -> Tuple[Any, ...]:
    """fresh_side's bindings, binding k holding one fragment per id of ids_per_binding[k]."""
    _, bindings = fresh_side()
    assert len(bindings) >= len(ids_per_binding)
    for binding, ids in zip(bindings, ids_per_binding):
        object.__setattr__(binding, "fragments", tuple(_copy(binding.fragments[0], i) for i in ids))
    return bindings


def _fresh(text: str) -> str:
    """An equal str that is another object."""
    copy = "".join(list(text))
    assert copy == text and copy is not text
    return copy


def _ids(count: int, prefix: str) -> List[List[str]]:
    per = count // 4
    return [[f"{prefix}-{k}-{i}" for i in range(per)] for k in range(4)]


@pytest.mark.parametrize("count", [4, 64, 4000])
def test_many_distinct_ids_decide_as_the_loop(count: int) -> None:
    bindings = _side(_ids(count, "f"))
    fast = _native.bind_side_ids(*CLASSES, bindings)
    assert fast is not None and oracle(bindings) == ("ok", fast)


@pytest.mark.parametrize("count", [8, 4000])
@pytest.mark.parametrize("where", ["within", "across", "last"])
def test_an_equal_copy_of_an_id_declines(count: int, where: str) -> None:
    ids = _ids(count, "f")
    if where == "within":
        ids[1][-1] = _fresh(ids[1][0])
    elif where == "across":
        ids[2][len(ids[2]) // 2] = _fresh(ids[0][-1])
    else:
        ids[3][-1] = _fresh(ids[3][len(ids[3]) // 3])
    bindings = _side(ids)
    assert oracle(bindings)[0] == "error"
    assert _native.bind_side_ids(*CLASSES, bindings) is None


def _low_bits_alike(count: int, bits: int) -> List[str]:
    """count distinct strs whose hashes agree in their low bits (this process's hash seed)."""
    found: List[str] = []
    k = 0
    while len(found) < count:
        text = f"c-{k}"
        if hash(text) & ((1 << bits) - 1) == 0:
            found.append(text)
        k += 1
    return found


def test_ids_in_one_probe_run_decide_as_the_loop() -> None:
    alike = _low_bits_alike(200, 6)  # (one home in any table of up to 64 slots, runs in larger ones)
    ids = [alike[k::4] for k in range(4)]
    bindings = _side(ids)
    fast = _native.bind_side_ids(*CLASSES, bindings)
    assert fast is not None and oracle(bindings) == ("ok", fast)
    for at in (0, 25, 49):
        repeated = [list(part) for part in ids]
        repeated[3][-1] = _fresh(ids[0][at])
        bindings = _side(repeated)
        assert oracle(bindings)[0] == "error"
        assert _native.bind_side_ids(*CLASSES, bindings) is None

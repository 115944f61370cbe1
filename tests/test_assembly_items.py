"""``placement._items`` (issue 5, round 15): the assembly's item check of its tensors and
fragments through one C pass (``_native.all_instances``) for tuples of more than 8 items. It must
be ``item_tuple`` exactly: the same accepted values (the very tuple returned), the same error,
and for hostile items the same ``isinstance`` calls (a ``__class__`` property's hook) in the
same order and number."""

from __future__ import annotations

from typing import Any, List

import pytest

from mooncake.reshard.contracts._checks import item_tuple
from mooncake.reshard.weight import placement
from mooncake.reshard.weight.types import ParallelRank, PlacementFragment


def _fragments(count: int) -> List[PlacementFragment]:
    rank = ParallelRank(tp=1)
    return [
        PlacementFragment(tensor_id="t", global_offset=(4 * i, 0), local_shape=(4, 8), nbytes=64, rank=rank)
        for i in range(count)
    ]


class _Sub(PlacementFragment):
    pass


def _outcome(function: Any, value: Any) -> Any:
    try:
        result = function(value, "placement fragments", PlacementFragment)
    except Exception as error:  # the error itself is the outcome
        return ("raised", type(error), str(error))
    same_items = len(result) == len(value) and all(r is v for r, v in zip(result, value))
    return ("returned", result is value, same_items)


def _both(make: Any) -> None:
    log_a: List[str] = []
    log_b: List[str] = []
    assert _outcome(placement._items, make(log_a)) == _outcome(item_tuple, make(log_b))
    assert log_a == log_b


def _claiming(log: List[str], answer: type) -> Any:
    class Claims:
        @property  # type: ignore[misc]
        def __class__(self) -> type:
            log.append("asked")
            return answer

    return Claims()


@pytest.mark.parametrize("count", [0, 1, 8, 9, 40])
def test_genuine_and_subclass_items(count: int) -> None:
    _both(lambda log: tuple(_fragments(count)))
    _both(lambda log: list(_fragments(count)))
    made = _fragments(count)
    if made:
        made[-1] = object.__new__(_Sub)
    _both(lambda log: tuple(made))


@pytest.mark.parametrize("position", [0, 5, 11])
def test_a_foreign_item_raises_the_same_error(position: int) -> None:
    def make(log: List[str]) -> Any:
        made: List[Any] = _fragments(12)
        made[position] = object()
        return tuple(made)

    _both(make)
    with pytest.raises(ValueError, match="placement fragments must contain PlacementFragment"):
        placement._items(make([]), "placement fragments", PlacementFragment)


@pytest.mark.parametrize("answer", [PlacementFragment, int])
def test_class_hooks_run_alike(answer: type) -> None:
    def make(log: List[str]) -> Any:
        made: List[Any] = _fragments(12)
        made[3] = _claiming(log, answer)
        made[7] = _claiming(log, answer)
        return tuple(made)

    _both(make)
    log: List[str] = []
    try:
        placement._items(make(log), "placement fragments", PlacementFragment)
    except ValueError:
        pass
    assert log == (["asked", "asked"] if answer is PlacementFragment else ["asked"])


def test_not_a_sequence_and_other_sequences() -> None:
    _both(lambda log: 5)
    _both(lambda log: range(3))
    _both(lambda log: "abc")

"""Pickle format of ``TransferPlan`` (spec §13): every restore revalidates the whole plan."""

from __future__ import annotations

import copyreg
from typing import Any


def reduce_transfer_plan(plan: Any) -> tuple[Any, ...]:
    """``TransferPlan.__reduce__``: the class, no arguments, and the plan's field state
    (restored through ``TransferPlan.__setstate__``, which revalidates)."""
    return (copyreg.__newobj__, (type(plan),), plan.__getstate__())


__all__ = ["reduce_transfer_plan"]

"""Strict JSON reading shared by the placement and stored-manifest decoders (spec §5.3, §7.2).

Duplicate keys are detected at any depth and non-finite numbers are refused while
parsing; every other schema rule is applied by the callers with their own labels.
"""

from __future__ import annotations

import json
from typing import Any, NoReturn, Union

__all__ = ["load_strict_json"]


class _RejectedDocument(Exception):
    """Raised by the parse hooks; converted to the contract's ``ValueError``."""


def _reject_constant(token: str) -> NoReturn:
    raise _RejectedDocument(f"non-finite JSON number is unsupported: {token}")


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _RejectedDocument(f"duplicate JSON field: {key}")
        result[key] = value
    return result


def load_strict_json(text: Union[str, bytes, bytearray], invalid_message: str) -> Any:
    """Parse ``text``; malformed input raises ``ValueError(invalid_message)``.

    Every parser failure (syntax, bad UTF-8, nesting depth, integers beyond the
    interpreter's digit limit) becomes that one plain ``ValueError``.
    """
    try:
        return json.loads(text, object_pairs_hook=_unique_object, parse_constant=_reject_constant)
    except _RejectedDocument as exc:
        raise ValueError(str(exc)) from None
    except (ValueError, RecursionError, TypeError):
        raise ValueError(invalid_message) from None

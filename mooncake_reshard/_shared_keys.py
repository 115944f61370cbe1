"""Key-sharing instance dicts on CPython 3.10 for classes whose instances are built by item.

The C core builds instances as ``object.__new__(cls)`` and then fills the instance's own dict
(``PyObject_GenericGetDict``) with ``PyDict_SetItem`` in the class's field order
(``mr_new_instance`` in ``csrc/common.h``); some ``__init__``/restore paths do the same from
Python (``self.__dict__[name] = value``). On CPython 3.11 and later that dict keeps sharing the
class's cached keys whatever stored them. On CPython 3.10 it does only while every key it
stores is already among the class's shared keys: 3.10 grows the shared keys past their first
five entries only on the attribute path (``object.__setattr__``: ``_PyObjectDict_SetItem``
rebuilds them after a resize), so while no instance of a class with six or more fields was
ever filled through ``__setattr__``, every instance dict built by item is a combined dict
with its own key table (measured on 3.10.13, ``sys.getsizeof(region.__dict__)``: 640 against
232 bytes for an 11-field TransferRegion; peak RSS by the end of bind 425 against 254 MiB at
74k operations).

:func:`share_field_keys` fills the shared keys once, at import, through the attribute path:
on a throwaway ``object.__new__(cls)`` it sets every field, in field order, with
``object.__setattr__`` (exactly what a dataclass ``__init__`` stores). Afterwards a dict
filled by item in field order finds each key already shared at its own position and stays
split. Nothing else changes: an instance dict still holds exactly the items stored, in store
order; a dict filled in another order, with an extra (forged) key, or an instance of a subclass
(which has its own shared keys) simply becomes a combined dict, as every such dict was before;
CPython 3.10 may stop sharing keys for a class altogether (e.g. after ``__delattr__`` or once
forged names overflow the shared table), which only costs memory.
"""

from __future__ import annotations

import sys
from dataclasses import fields
from typing import Tuple

__all__ = ["share_field_keys"]

# CPython 3.11+ adds keys to a class's shared keys on every insertion path (and keeps field
# values inline): nothing to do there, and doing nothing keeps those versions exactly as they
# were.
_NEEDED = sys.version_info < (3, 11)


def share_field_keys(cls: type, extra: Tuple[str, ...] = ()) -> None:
    """Fill ``cls``'s shared instance keys with its dataclass fields (then ``extra``), in order.

    Call it once, right after the class statement and before any instance exists (an earlier
    instance would have fixed the shared keys' order already). It is idempotent, builds no
    lasting instance and is a no-op on CPython 3.11 and later. ``extra`` names the keys some
    builders store after the fields (in that order), so that they are shared too.
    """
    if not _NEEDED:
        return
    probe = object.__new__(cls)
    store = object.__setattr__
    for field in fields(cls):
        store(probe, field.name, None)
    for name in extra:
        store(probe, name, None)

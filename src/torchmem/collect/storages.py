"""The distinct storages of a scan, keyed by identity (or by C++ address on old torch).

:class:`Storages` deduplicates the untyped storages a scan read off its tensors; it holds
storages, never tensors. :func:`storages_are_unique_objects` says which key it can use.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any

import torch

__all__ = ["Storages", "storages_are_unique_objects"]

_cdata = attrgetter("_cdata")
#: traits of this torch build, checked once per process
_TRAITS: dict[str, bool] = {}


def storages_are_unique_objects() -> bool:
    """Whether torch returns one Python object per live storage (storage PyObject
    preservation), so storages can be deduplicated by identity. Checked once."""
    ok = _TRAITS.get("storage_identity")
    if ok is None:
        base = torch.zeros(2)
        first = base.untyped_storage()
        ok = _TRAITS["storage_identity"] = first is base[1:].untyped_storage()
        del first, base
    return ok


class Storages:
    """The distinct storages of one scan, in first-seen order, keyed by identity.

    Where torch keeps one Python object per live storage (torch >= 2.1; checked by
    :func:`storages_are_unique_objects`) the key is the storage object itself and
    deduplication is one C-level ``dict.fromkeys``; otherwise the key is the address
    of the C++ storage (``_cdata``). Holds storages, never tensors.

    Attributes:
        keys: the key of each storage passed to the constructor (same order).
    """

    __slots__ = ("keys", "_index", "_by_object")

    def __init__(self, storages: list[Any]) -> None:
        self._by_object = storages_are_unique_objects()
        if self._by_object:
            self.keys: list[Any] = storages
            self._index: dict[Any, Any] = dict.fromkeys(storages)
        else:
            self.keys = list(map(_cdata, storages))
            self._index = dict(zip(self.keys, storages))

    def key(self, storage: Any) -> Any:
        """The key of ``storage``."""
        return storage if self._by_object else _cdata(storage)

    def add(self, storage: Any) -> Any:
        """Add ``storage`` if it is new; return its key."""
        key = self.key(storage)
        if key not in self._index:
            self._index[key] = None if self._by_object else storage
        return key

    def storage(self, key: Any) -> Any:
        """The storage of ``key``."""
        return key if self._by_object else self._index[key]

    def all_keys(self) -> list[Any]:
        """The key of every distinct storage, in first-seen order."""
        return list(self._index)

    def storages(self) -> list[Any]:
        """Every distinct storage."""
        return list(self._index) if self._by_object else list(self._index.values())

    def keep(self, keys: list[Any]) -> None:
        """Forget every storage but those of ``keys``."""
        self._index = {k: self._index[k] for k in keys}

    def clear(self) -> None:
        self._index.clear()

    def __contains__(self, key: Any) -> bool:
        return key in self._index

"""Which live tensor classes own memory, and the component tensors of sparse ones.

:func:`tensor_types` splits the tensor classes alive in this process into the plain ones
(read with batched C-level calls) and the special subclasses; :func:`sparse_parts` gives
the tensors that hold a sparse tensor's memory.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["sparse_parts", "tensor_types"]

#: classes whose instances own no memory of their own (tracing/compile-time tensors)
_NO_MEMORY_NAMES = frozenset({"FakeTensor", "FunctionalTensor", "FakeTensorWithNoData"})


def tensor_types() -> tuple[frozenset[type], frozenset[type]]:
    """All classes of live tensors, split into (plain, special).

    ``plain`` holds ``torch.Tensor``, ``nn.Parameter`` and ``nn.Buffer``: their storage
    can be read with batched C-level calls. ``special`` holds every other subclass
    (found through ``__subclasses__`` each call, so classes defined later are seen),
    except tensors that own no memory (fake/functional tensors).
    """
    plain: set[type] = {Tensor, torch.nn.Parameter}
    buffer_cls = getattr(torch.nn, "Buffer", None)
    if isinstance(buffer_cls, type):
        plain.add(buffer_cls)
    special: set[type] = set()
    stack: list[type] = [Tensor]
    sub: type
    while stack:
        cls = stack.pop()
        for sub in cls.__subclasses__():
            if sub in plain or sub in special:
                continue
            stack.append(sub)
            if not any(c.__name__ in _NO_MEMORY_NAMES for c in sub.__mro__):
                special.add(sub)
    return frozenset(plain), frozenset(special)


def sparse_parts(t: Tensor) -> list[Tensor]:
    """Component tensors (which do have storages) of a sparse tensor."""
    layout = t.layout
    try:
        if layout == torch.sparse_coo:
            return [t._indices(), t._values()]
        if layout in (torch.sparse_csr, torch.sparse_bsr):
            return [t.crow_indices(), t.col_indices(), t.values()]
        if layout in (torch.sparse_csc, torch.sparse_bsc):
            return [t.ccol_indices(), t.row_indices(), t.values()]
    except (RuntimeError, NotImplementedError):
        pass
    return []

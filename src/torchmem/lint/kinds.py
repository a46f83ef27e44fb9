"""The lattice of the data flow: what kind of value an expression holds (no torch).

A kind is a bit set. Value kinds (:data:`VALUE`) are tracked flow-sensitively and joined as
*must* facts: a name is a graph tensor after an ``if`` only when it is one on both paths.
Type kinds (:data:`TYPE`) are tracked flow-insensitively (a name that ever holds a model is a
model). :func:`meet` joins two environments at a merge point; a :data:`Shape` describes the
elements of an iterable (for ``for`` targets and tuple unpacking).
"""

from __future__ import annotations

from typing import Union

__all__ = [
    "GRAPH", "LEAF", "TENSOR", "MODEL", "OPTIM", "LOADER", "PINNED", "PARAMS", "MODULES",
    "NAMED", "LOOSE", "UNPINNED", "ACT", "TYPED", "CONTAINER", "VALUE", "TYPE", "BATCH",
    "BATCH_UNPINNED", "BATCH_PINNED", "Shape", "meet", "flatten", "held",
]

GRAPH = 1
LEAF = 2
TENSOR = 4
MODEL = 8
OPTIM = 16
LOADER = 32
PINNED = 64
PARAMS = 128
MODULES = 256
NAMED = 512
#: qualifier: a tensor only guessed from the structure of a batch (``for x, y in loader``)
LOOSE = 1024
#: qualifier: a CPU tensor known to be in pageable (not pinned) memory
UNPINNED = 2048
#: qualifier: the graph holds activations of a module's forward pass (not just parameters)
ACT = 4096
#: qualifier: the value is known to be a ``torch.Tensor`` itself (a torch function or tensor
#: method result, arithmetic on a tensor, a factory), not a tuple, dict or model-output
#: object that holds tensors; only such values get fixes that call tensor methods
TYPED = 8192
#: qualifier: a list, tuple, dict or set literal (or comprehension) holding such values:
#: it keeps them alive but is not itself a tensor (no in-place op, no ``.detach()``)
CONTAINER = 16384
VALUE = GRAPH | LEAF | TENSOR | LOOSE | UNPINNED | ACT | TYPED | CONTAINER
TYPE = MODEL | OPTIM | LOADER | PINNED | PARAMS | MODULES | NAMED
#: element of a loader: a tuple target gets (loose) tensors, a single name stays unknown
BATCH = -1
#: element of a loader built without ``pin_memory=True``
BATCH_UNPINNED = -2
#: element of a loader built with ``pin_memory=True``
BATCH_PINNED = -3
_BATCH_ELT = {BATCH: TENSOR | LOOSE, BATCH_UNPINNED: TENSOR | LOOSE | UNPINNED,
              BATCH_PINNED: TENSOR | LOOSE | PINNED}

#: an element kind, or a tuple of shapes for the elements of a tuple (``enumerate(loader)``)
Shape = Union[int, tuple["Shape", ...]]


def meet(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    """Join two environments at a merge point: value kinds must hold on both paths."""
    out: dict[str, int] = {}
    for key in a.keys() | b.keys():
        va, vb = a.get(key, 0), b.get(key, 0)
        v = (va & vb & VALUE) | ((va | vb) & TYPE)
        if v:
            out[key] = v
    return out


def flatten(shape: Shape) -> int:
    """The kind of any element of a value of ``shape``."""
    if isinstance(shape, tuple):
        out = 0
        for s in shape:
            out |= flatten(s)
        return out
    return _BATCH_ELT.get(shape, shape)


def held(kind: int) -> int:
    """The kind of a list/tuple/dict holding values of ``kind``: it keeps them (and their
    graphs) alive, but is not itself a tensor."""
    return kind | CONTAINER if kind & VALUE else kind

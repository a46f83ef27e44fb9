"""Private: how the storage engine treats each aten op, decided once from its schema.

:func:`op_info` reads an ``OpOverload``'s schema: views and in-place ops return
(aliases of) their inputs (``OP_SKIP``), functional ops may return new storages
(``OP_NEW``), ``out=`` variants and resize ops may reallocate a written argument
(``OP_SIZED``), and ``lift_fresh`` returns its input, newly allocated (``OP_FRESH``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["OP_SKIP", "OP_NEW", "OP_SIZED", "OP_FRESH", "OpInfo", "op_info"]

ALWAYS_NEW = {
    # torch.tensor(data) builds the tensor outside the dispatcher, then passes it through
    # lift_fresh: the output *is* the input, but its storage is newly allocated.
    "aten::lift_fresh",
    "aten::lift_fresh_copy",
}


# How the engine treats an op, decided once per OpOverload from its schema:
OP_SKIP = 0  # views and in-place ops: the outputs are (aliases of) inputs, never new storage
OP_NEW = 1  # functional ops: an output storage that is not an input's is new
OP_SIZED = 2  # out= variants and resize ops: a written argument's storage may be reallocated
OP_FRESH = 3  # lift_fresh: the output is the input, but a newly allocated one
RESIZING = {"aten::resize_", "aten::resize_as_", "aten::_resize_output_", "aten::set_"}
OpInfo = tuple  # (kind, written positions, written kwarg names)


def op_info(func: Any) -> OpInfo:
    """Classify ``func`` (see ``OP_SKIP``/``OP_NEW``/``OP_SIZED``/``OP_FRESH``) from its schema."""
    try:
        schema = func._schema
        name = schema.name
        arguments = schema.arguments
        returns = schema.returns
    except AttributeError:
        return (OP_NEW, (), ())
    if name in ALWAYS_NEW:
        return (OP_FRESH, (), ())
    positions: list[int] = []
    names: list[str] = []
    for i, arg in enumerate(arguments):
        info = arg.alias_info
        if info is not None and info.is_write:
            if arg.kwarg_only:
                names.append(arg.name)
            else:
                positions.append(i)
    if names or name in RESIZING:
        return (OP_SIZED, tuple(positions), tuple(names))
    if positions:
        return (OP_SKIP, (), ())  # in-place on its own inputs: storages unchanged
    if returns and all(r.alias_info is not None for r in returns):
        return (OP_SKIP, (), ())  # views
    return (OP_NEW, (), ())

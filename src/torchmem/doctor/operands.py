"""Whether a statement's value brings in anything besides the culprit's own old value.

A chain grows by one step's graph when the statement that rebinds it combines its old
value with something new that carries a graph (``h = cell(x, h)``,
``stat = stat * (1 - m) + var * m``). A statement that only transforms the old value
(``self.mean = self.mean.to(x.device)``) or adds detached data (``stat + var.data``)
cannot bring the graph of the step's forward pass into it. :func:`brings_other_value`
tells the two apart from the source alone, so that when the chain's graph reaches the
parameters (it holds forward passes), the statement named is one that can have linked
them. Pure :mod:`ast`; never imports torch.
"""

from __future__ import annotations

import ast
from typing import Callable

__all__ = ["brings_other_value"]

#: attributes that read metadata or the detached data, never a graph
_METADATA = frozenset({"data", "device", "shape", "dtype", "ndim", "is_cuda", "requires_grad",
                       "layout", "is_sparse"})
#: methods whose result carries no graph
_DETACHING = frozenset({"detach", "item", "tolist", "numpy", "size", "dim", "numel",
                        "data_ptr", "stride", "nelement", "element_size", "is_contiguous"})
#: builtins whose result carries no graph
_PLAIN_CALLS = frozenset({"len", "int", "float", "bool", "str", "isinstance", "range"})


def brings_other_value(node: ast.AST, is_culprit: Callable[[ast.AST], bool]) -> bool:
    """True when ``node`` reads a value other than the culprit (``is_culprit``) that may
    carry a graph: a name or attribute that is not metadata (``.shape``, ``.device``,
    ``.data``) nor the result of a detaching method (``.detach()``, ``.item()``).

    Example:
        >>> culprit = lambda n: isinstance(n, ast.Name) and n.id == "h"
        >>> brings_other_value(ast.parse("cell(x, h)", mode="eval").body, culprit)
        True
        >>> brings_other_value(ast.parse("h.to(x.device) + y.detach()", mode="eval").body, culprit)
        False
    """
    if isinstance(node, ast.Constant):
        return False
    if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)) and is_culprit(node):
        return False
    if isinstance(node, ast.Name):
        return True
    if isinstance(node, ast.Attribute):
        return node.attr not in _METADATA
    if isinstance(node, ast.Subscript):
        return brings_other_value(node.value, is_culprit)
    if isinstance(node, ast.Call):
        func = node.func
        args = [*node.args, *(k.value for k in node.keywords)]
        if isinstance(func, ast.Attribute):
            if func.attr in _DETACHING:
                return False
            args.insert(0, func.value)  # a method's receiver is an operand
        elif isinstance(func, ast.Name) and func.id in _PLAIN_CALLS:
            return False
        return any(brings_other_value(a, is_culprit) for a in args)
    return any(brings_other_value(child, is_culprit) for child in ast.iter_child_nodes(node))

"""Where a variable carried from one loop iteration to the next enters the iteration.

A graph chained across steps (``x = f(x)``) is cut by detaching the carried value. The
detach must come before the iteration's *first read* of it, not only before the statement
that rebinds it: in

.. code-block:: python

    for i in range(n_steps):
        x = x.repeat(2, 1)              # first read: the model's input hangs on the chain
        eps = model(x)
        x = x[:n] - eps                 # the rebinding

a ``x = x.detach()`` before the last line still leaves ``eps`` attached to the previous
steps through ``x.repeat``; before the first line it cuts the chain.
:func:`chain_entry` finds, in the innermost ``for``/``while`` loop around the rebinding,
the first statement of the loop's body (at the body's own level) that reads the value.
Never imports torch.
"""

from __future__ import annotations

import ast

__all__ = ["chain_entry"]


def _contains(parent: ast.AST, node: ast.AST) -> bool:
    return any(n is node for n in ast.walk(parent))


def _reads(stmt: ast.stmt, target: str) -> bool:
    """Whether ``stmt`` reads the expression ``target`` (a name or a dotted attribute)."""
    for node in ast.walk(stmt):
        if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load) \
                and ast.unparse(node) == target:
            return True
    return False


def chain_entry(tree: ast.AST, rebinding: ast.stmt, target: str) -> ast.stmt:
    """The statement before which ``target = target.detach()`` cuts the chain that
    ``rebinding`` carries: the first statement of the innermost loop's body that reads
    ``target``, when it comes before the one holding ``rebinding``; else ``rebinding``.

    Example:
        >>> src = "for i in range(3):\\n    y = x * 2\\n    z = y + 1\\n    x = z + x\\n"
        >>> tree = ast.parse(src)
        >>> rebinding = tree.body[0].body[2]
        >>> chain_entry(tree, rebinding, "x").lineno
        2
    """
    loops = [n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.AsyncFor, ast.While))
             and any(_contains(s, rebinding) for s in n.body)]
    if not loops:
        return rebinding
    loop = max(loops, key=lambda n: (n.lineno, n.col_offset))
    for stmt in loop.body:
        if _contains(stmt, rebinding):
            return rebinding
        if _reads(stmt, target):
            return stmt
    return rebinding

"""In-place writes into a tensor from a view of that same tensor, anywhere in the script.

``x[:, 5:] *= x[:, 4:5]`` with grad enabled saves the view ``x[:, 4:5]`` for backward;
the view keeps its base, and the base's ``grad_fn`` (the in-place write, recorded on the
base) leads back to the node that saved the view: a cycle inside autograd's C++, which
neither reference counting nor the cyclic collector frees. When the variable whose old
values autograd keeps alive is not the one written (a hook keeps each forward's output,
and a post-processing function writes into views of it), the write is elsewhere:
:func:`self_view_writes` lists the statements of the script that write into a tensor in
place (``n[...] op= ...``, ``n[...] = ...``, ``n[...].mul_(...)``) from a value that reads
the same name ``n``, outside ``no_grad``/``inference_mode`` blocks and functions. The
caller names one only when it is the only such statement, so the line is never a guess.

:func:`self_writes` lists the same for a whole tensor (``a += a * y``): the product saves
``a`` itself for backward, and the in-place add makes ``a`` the output of the graph that
saved it. Only a value that hands ``n`` to an operator that saves it counts (a product, a
quotient, a power, a matrix product; ``a += a`` saves nothing, and a call may save its
result rather than its input). The caller reads these
only when no statement writes from a view.
"""

from __future__ import annotations

import ast
from typing import Sequence

from torchmem.doctor.source import Statement, load_tree

__all__ = ["self_view_writes", "self_writes"]

_NO_GRAD = frozenset({"no_grad", "inference_mode"})


def _base(node: ast.AST) -> str | None:
    """``x`` of ``x[...]``/``x[...][...]`` (a name or a dotted attribute)."""
    while isinstance(node, ast.Subscript):
        node = node.value
    try:
        text = ast.unparse(node)
    except Exception:  # noqa: BLE001 - an odd node
        return None
    return text if isinstance(node, (ast.Name, ast.Attribute)) else None


def _reads(value: ast.AST, name: str) -> bool:
    return any(isinstance(n, (ast.Name, ast.Attribute)) and ast.unparse(n) == name
               for n in ast.walk(value))


def _no_grad(node: ast.AST) -> bool:
    """``torch.no_grad()``, ``no_grad()``, ``torch.inference_mode()`` (call or decorator)."""
    target = node.func if isinstance(node, ast.Call) else node
    name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", None)
    return name in _NO_GRAD


_SAVING = (ast.Mult, ast.Div, ast.MatMult, ast.Pow)


def _saved_operand(value: ast.AST, name: str) -> bool:
    """Whether ``value`` hands ``name`` itself to an operator whose backward needs it
    (``a * y``, ``y / a``, ``a ** 2``, ``a @ w``), not only to additions or to calls (a
    call may save its result instead of its input, as ``softmax`` does)."""
    for node in ast.walk(value):
        if isinstance(node, ast.BinOp) and isinstance(node.op, _SAVING) and any(
                isinstance(o, (ast.Name, ast.Attribute)) and ast.unparse(o) == name
                for o in (node.left, node.right)):
            return True
    return False


class _Finder(ast.NodeVisitor):
    def __init__(self, file: str, lines: Sequence[str]) -> None:
        self.file, self.lines = file, lines
        self.function = "<module>"
        self.found: list[Statement] = []
        #: in-place writes into a whole tensor from a value that saves it (:func:`self_writes`)
        self.whole: list[Statement] = []

    def _add(self, node: ast.AST, kind: str, target: str, whole: bool = False) -> None:
        line = getattr(node, "lineno", 0)
        code = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
        (self.whole if whole else self.found).append(Statement(
            file=self.file, line=line, code=code, kind=kind, function=self.function,
            in_loop=False, target=target))

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if any(_no_grad(d) for d in node.decorator_list):
            return
        saved, self.function = self.function, node.name
        self.generic_visit(node)
        self.function = saved

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def visit_With(self, node: ast.With) -> None:
        if not any(_no_grad(item.context_expr) for item in node.items):
            self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Subscript):
            name = _base(node.target)
            if name and _reads(node.value, name):
                self._add(node, "augassign", name)
        else:
            name = _base(node.target)
            if name and _saved_operand(node.value, name):
                self._add(node, "augassign", name, whole=True)
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript):
            name = _base(node.targets[0])
            if name and _reads(node.value, name):
                self._add(node, "setitem", name)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr.endswith("_") \
                and not func.attr.startswith("_") and isinstance(func.value, ast.Subscript):
            name = _base(func.value)
            if name and any(_reads(a, name) for a in node.args):
                self._add(node, "inplace", name)
        self.generic_visit(node)


def _find(files: Sequence[str]) -> list[_Finder]:
    out = []
    for file in dict.fromkeys(f for f in files if f):
        parsed = load_tree(file)
        if parsed is None:
            continue
        finder = _Finder(file, parsed[1])
        finder.visit(parsed[0])
        out.append(finder)
    return out


def self_writes(files: Sequence[str]) -> list[Statement]:
    """The in-place writes of ``files`` into a whole tensor from a value that saves it
    (``a += a * y``; see the module docstring), in file order.

    Example:
        >>> import tempfile, os
        >>> src = "def foo(y):\\n    a = y.new_ones(4)\\n    a += a * y\\n    a += a\\n"
        >>> with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        ...     _ = f.write(src)
        >>> [(s.line, s.target) for s in self_writes([f.name])]
        [(3, 'a')]
        >>> os.unlink(f.name)
    """
    return [s for finder in _find(files) for s in finder.whole]


def self_view_writes(files: Sequence[str]) -> list[Statement]:
    """The statements of ``files`` (see the module docstring), in file order; each one's
    ``target`` is the name written into.

    Example:
        >>> import tempfile, os
        >>> src = "def nms(x):\\n    x[:, 5:] *= x[:, 4:5]\\n    y = x.clone()\\n"
        >>> with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        ...     _ = f.write(src)
        >>> [(s.line, s.target) for s in self_view_writes([f.name])]
        [(2, 'x')]
        >>> os.unlink(f.name)
    """
    return [s for finder in _find(files) for s in finder.found]

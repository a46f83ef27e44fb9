"""What a rule handler sees: the current function, the loops around the node, the file.

:class:`Context` is created once per linted file by :mod:`torchmem.lint.engine` and passed
to every handler. It answers questions (``kind()`` of an expression, ``qualname()`` of an
imported name, which loops a container outlives) and records violations (``report()``).
No torch.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING, Any, Sequence

from torchmem.lint.knowledge import EVAL_FUNCTION
from torchmem.lint.violation import Edit, Fix, Violation

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.dataflow import Flow
    from torchmem.lint.facts import FunctionFacts, LoopFacts
    from torchmem.lint.registry import Rule
    from torchmem.lint.summaries import Summaries

__all__ = ["Context", "LoopState", "FunctionState"]

_LINE_SPLIT = re.compile(r"\r\n|\r|\n")


class LoopState:
    """A loop around the current node, as the rules see it.

    Attributes:
        node: the ``for``/``while`` node.
        facts: what its body does (:class:`~torchmem.lint.facts.LoopFacts`).
        no_grad: whether the loop itself runs with autograd recording disabled.
        cond_depth: the engine's conditional depth when the loop body starts; a node is
            executed on every iteration when ``ctx.cond_depth == loop.cond_depth``.
        loader: whether it iterates over batches (a ``DataLoader`` or ``*loader``).
        eval_loader: whether it iterates over evaluation batches (``val_loader``...).
    """

    __slots__ = ("node", "facts", "no_grad", "cond_depth", "loader", "eval_loader")

    def __init__(self, node: ast.AST, facts: LoopFacts, no_grad: bool, cond_depth: int,
                 loader: bool, eval_loader: bool) -> None:
        self.node = node
        self.facts = facts
        self.no_grad = no_grad
        self.cond_depth = cond_depth
        self.loader = loader
        self.eval_loader = eval_loader

    @property
    def training(self) -> bool:
        return self.facts.training


class FunctionState:
    """The function (or module top level) around the current node.

    Attributes:
        node: the ``FunctionDef`` (or ``Module``).
        name: the function name (``"<module>"`` at top level).
        facts: pre-gathered :class:`~torchmem.lint.facts.FunctionFacts`.
        flow: the data flow environment.
        no_grad: whether the whole function runs without autograd recording.
        class_name: the enclosing class, if the function is a method.
        eval_callers: every call of the function in its file is evaluation code
            (:func:`torchmem.lint.eval_callers.eval_functions`).
    """

    __slots__ = ("node", "name", "facts", "flow", "no_grad", "class_name", "_eval",
                 "_eval_named", "eval_callers")

    def __init__(self, node: ast.AST, name: str, facts: FunctionFacts, flow: Flow,
                 no_grad: bool, class_name: str | None) -> None:
        self.node = node
        self.name = name
        self.facts = facts
        self.flow = flow
        self.no_grad = no_grad
        self.class_name = class_name
        self._eval: bool | None = None
        self._eval_named: bool | None = None
        self.eval_callers = False

    def eval_named(self) -> bool:
        """Named like evaluation code (``evaluate``, ``validate``, ``predict``...)."""
        if self._eval_named is None:
            self._eval_named = bool(EVAL_FUNCTION.match(self.name))
        return self._eval_named

    def is_eval(self) -> bool:
        """Evaluation code: named like ``evaluate``/``predict``, or calls ``model.eval()``,
        or only ever called as evaluation code, and never ``backward()``/``step()``."""
        if self._eval is None:
            f = self.facts
            self._eval = (self.eval_named() or bool(f.eval_receivers) or self.eval_callers) \
                and not f.has_backward and not f.has_step
        return self._eval


class Context:
    """Everything a rule handler may ask about the current node.

    Attributes:
        path: the file name reported in violations.
        source: the text being linted.
        fn: the current :class:`FunctionState`.
        loops: the loops around the current node, innermost last.
        no_grad: > 0 while autograd recording is disabled at the current node.
        cond_depth: how many conditional blocks (``if``, ``except``...) surround the node.
        class_attrs: kinds of ``self.<attr>`` in the current class.
        in_module_class: whether the current class derives from an ``nn.Module``.
        module_classes: names of the classes of this file that derive from ``nn.Module``.
        torch_imported: whether the file imports torch.
    """

    def __init__(self, source: str, path: str) -> None:
        self.path = path
        self.source = source
        self.imports: dict[str, str] = {}
        self.torch_imported = False
        self.module_classes: set[str] = set()
        self.class_attrs: dict[str, int] | None = None
        self.in_module_class = False
        self.fn: FunctionState = None  # type: ignore[assignment]
        self.loops: list[LoopState] = []
        self.no_grad = 0
        self.cond_depth = 0
        #: > 0 inside an ``except`` handler (fallback code for older versions lives there)
        self.handler_depth = 0
        self.violations: list[Violation] = []
        #: per-file scratch space for rules (keyed by rule code)
        self.scratch: dict[str, Any] = {}
        self._lines: list[str] | None = None
        self._qual_cache: dict[int, str | None] = {}
        #: summaries of the functions of this file (set by the engine)
        self.summaries: Summaries | None = None
        #: ``id()`` of the functions every call of which, in this file, runs under
        #: ``no_grad`` (:func:`torchmem.lint.callers.no_grad_functions`)
        self.quiet_functions: frozenset[int] = frozenset()
        #: ``id()`` of the functions every call of which, in this file, is evaluation code
        #: (:func:`torchmem.lint.eval_callers.eval_functions`)
        self.eval_functions: frozenset[int] = frozenset()
        #: forward hooks of the file: id(function node) -> its output parameter
        self.hook_outputs: dict[int, str] = {}
        #: the parsed module (set by the engine), for file-wide facts that rules compute once
        self.tree: ast.Module | None = None

    # -- queries -------------------------------------------------------------------
    @property
    def flow(self) -> Flow:
        return self.fn.flow

    @property
    def loop(self) -> LoopState | None:
        """The innermost loop around the current node."""
        return self.loops[-1] if self.loops else None

    def kind(self, node: ast.AST) -> int:
        """Data-flow kind of an expression (see :mod:`torchmem.lint.dataflow`)."""
        return self.fn.flow.kind(node)

    def add_import(self, node: ast.stmt) -> None:
        """Record the names an ``import`` / ``from ... import`` statement binds."""
        if type(node) is ast.Import:
            for alias in node.names:  # type: ignore[attr-defined]
                if alias.asname:
                    self.imports[alias.asname] = alias.name
                else:
                    top = alias.name.partition(".")[0]
                    self.imports[top] = top
                if alias.name.partition(".")[0] == "torch":
                    self.torch_imported = True
        else:
            mod = node.module or ""  # type: ignore[attr-defined]
            if node.level:  # type: ignore[attr-defined]
                mod = "." * node.level + mod  # type: ignore[attr-defined]
            if mod.partition(".")[0] == "torch":
                self.torch_imported = True
            for alias in node.names:  # type: ignore[attr-defined]
                if alias.name != "*":
                    self.imports[alias.asname or alias.name] = f"{mod}.{alias.name}"

    def qualname(self, node: ast.AST) -> str | None:
        """Fully qualified name of an imported name or attribute chain, else ``None``.

        ``F.cross_entropy`` -> ``"torch.nn.functional.cross_entropy"`` after
        ``import torch.nn.functional as F``.
        """
        if type(node) is ast.Name:
            return self.imports.get(node.id)  # type: ignore[attr-defined]
        root = node
        while type(root) is ast.Attribute:
            root = root.value  # type: ignore[attr-defined]
        if type(root) is not ast.Name:
            return None
        base = self.imports.get(root.id)  # type: ignore[attr-defined]
        if base is None:
            return None
        parts: list[str] = []
        while type(node) is ast.Attribute:
            parts.append(node.attr)  # type: ignore[attr-defined]
            node = node.value  # type: ignore[attr-defined]
        parts.append(base)
        return ".".join(reversed(parts))

    def persistent_loops(self, key: str) -> list[LoopState]:
        """The loops (innermost last) across whose iterations the value of ``key``
        survives: those nested inside the innermost loop that resets it on every
        iteration (``acc = 0``, ``xs = []``; ``acc += x`` and ``xs.append(x)`` do not
        reset, nor does ``acc = 0`` under an ``if`` of the body)."""
        loops = self.loops
        for i in range(len(loops) - 1, -1, -1):
            if key in loops[i].facts.assigned and loops[i].facts.resets_each_iteration(key):
                return loops[i + 1:]
        return list(loops)

    def every_iteration(self, loop: LoopState) -> bool:
        """Whether the current node runs unconditionally on each iteration of ``loop``."""
        return self.cond_depth == loop.cond_depth

    # -- reporting -----------------------------------------------------------------
    def lines(self) -> list[str]:
        if self._lines is None:
            self._lines = _LINE_SPLIT.split(self.source)
        return self._lines

    def char_col(self, lineno: int, byte_col: int) -> int:
        """Convert ``ast``'s UTF-8 byte column to a character column."""
        lines = self.lines()
        if not 1 <= lineno <= len(lines):
            return byte_col
        line = lines[lineno - 1]
        if line.isascii():
            return byte_col
        return len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))

    def span(self, node: ast.AST) -> tuple[int, int, int, int]:
        """``(line, col, end_line, end_col)`` of a node, columns in characters."""
        line = node.lineno  # type: ignore[attr-defined]
        end_line = getattr(node, "end_lineno", None) or line
        end_col = getattr(node, "end_col_offset", None)
        col = self.char_col(line, node.col_offset)  # type: ignore[attr-defined]
        end = self.char_col(end_line, end_col) if end_col is not None else col
        return line, col, end_line, end

    def text(self, line: int, col: int, end_line: int, end_col: int) -> str:
        """The source text between two character positions."""
        lines = self.lines()
        if line == end_line:
            return lines[line - 1][col:end_col]
        chunk = [lines[line - 1][col:]] + lines[line:end_line - 1] + [lines[end_line - 1][:end_col]]
        return "\n".join(chunk)

    def edit(self, start: tuple[int, int], end: tuple[int, int], text: str) -> Edit:
        """An :class:`Edit` replacing ``start..end`` (character positions) by ``text``."""
        return Edit(start[0], start[1], end[0], end[1], text)

    def report(self, rule: type[Rule] | Rule, node: ast.AST, message: str,
               fix: Sequence[Edit] | None = None) -> None:
        """Record a violation of ``rule`` at ``node`` with an optional fix."""
        line, col, end_line, end_col = self.span(node)
        if rule.category == "hygiene":
            message = f"hygiene (not a memory problem): {message}"
        fx = None
        if fix and rule.fix_title and rule.fix_safety:
            fx = Fix(rule.fix_title, rule.fix_safety, tuple(fix))
        self.violations.append(Violation(self.path, line, col, end_line, end_col, rule.code,
                                         rule.name, message, fx))

"""The lint engine: parse once, walk once, dispatch every rule from that walk (no torch).

:func:`lint_source` parses the text with :func:`ast.parse`, then a single traversal visits
every statement in execution order and every expression once. While it walks, it keeps
the data flow of the current function (:mod:`torchmem.lint.dataflow`), the loops and
``with torch.no_grad()`` blocks around the current node, and calls the handlers of the
selected rules for each node type (``visit_Call``...) plus the ``enter_loop`` /
``leave_loop`` / ``leave_function`` hooks. Rules never walk the tree themselves.

Example:
    >>> from torchmem.lint.engine import lint_source
    >>> lint_source("import torch\\ntorch.ones(1).storage()\\n", select="TMM402")[0].code
    'TMM402'
"""

from __future__ import annotations

import ast
import gc
import re
import sys
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator

from torchmem.lint.callers import mentions_no_grad, no_grad_functions
from torchmem.lint.eval_callers import eval_functions, mentions_eval
from torchmem.lint.context import Context, FunctionState, LoopState
from torchmem.lint.hooks import forward_hooks
from torchmem.lint.registry import Rule, select_rules
from torchmem.lint.summaries import Summaries
from torchmem.lint.violation import LintSyntaxError, Violation
from torchmem.lint.walker import Walker

__all__ = ["Context", "FunctionState", "LoopState", "Walker", "lint_source", "parse"]

_Walker = Walker  # the name used before the walker had its own module

_NOQA = re.compile(r"#\s*noqa(?::[\s]?(?P<codes>[A-Z]+[0-9]*(?:[,\s]+[A-Z]+[0-9]*)*))?",
                   re.IGNORECASE)
_RECURSION_LIMIT = 12_000


# -- dispatch table ---------------------------------------------------------------------
_HOOKS = ("enter_loop", "leave_loop", "enter_function", "leave_function")
_TABLES: dict[tuple[str, ...], tuple[dict[type, list[Callable[..., None]]],
                                     dict[str, list[Callable[..., None]]]]] = {}


def _table(rules: list[type[Rule]]) -> tuple[dict[type, list[Callable[..., None]]],
                                             dict[str, list[Callable[..., None]]]]:
    key = tuple(r.code for r in rules)
    cached = _TABLES.get(key)
    if cached is not None:
        return cached
    nodes: dict[type, list[Callable[..., None]]] = {}
    hooks: dict[str, list[Callable[..., None]]] = {h: [] for h in _HOOKS}
    by_tail: dict[str, list[Callable[..., None]]] = {}
    for cls in rules:
        inst = cls()
        for attr in dir(cls):
            if attr == "visit_Call" and cls.call_tails:
                for tail in cls.call_tails:  # dispatched by the callee's name, below
                    by_tail.setdefault(tail, []).append(inst.visit_Call)  # type: ignore[attr-defined]
            elif attr.startswith("visit_"):
                node_type = getattr(ast, attr[6:], None)
                if node_type is None:
                    raise TypeError(f"{cls.code}: no ast node type for handler {attr}")
                nodes.setdefault(node_type, []).append(getattr(inst, attr))
            elif attr in hooks:
                hooks[attr].append(getattr(inst, attr))
    if by_tail:
        nodes.setdefault(ast.Call, []).append(_tail_dispatch(by_tail))
    _TABLES[key] = (nodes, hooks)
    return nodes, hooks


def _tail_dispatch(by_tail: dict[str, list[Callable[..., None]]]) -> Callable[..., None]:
    """One ``Call`` handler for the rules that declare ``call_tails``: it reads the callee's
    last name once (``cycle`` of ``itertools.cycle(...)``) and runs only the handlers that
    asked for it, instead of each rule testing every call of the file."""
    get = by_tail.get

    def dispatch(node: ast.Call, ctx: Any) -> None:
        func = node.func
        t = type(func)
        handlers = get(func.attr if t is ast.Attribute else func.id if t is ast.Name  # type: ignore[attr-defined]
                       else "")
        if handlers:
            for handler in handlers:
                handler(node, ctx)

    return dispatch



# -- public entry point -----------------------------------------------------------------
def _top_level(body: list[ast.stmt]) -> Iterable[ast.stmt]:
    """Import statements of the module top level (inside ``if``/``try`` too)."""
    for stmt in body:
        t = type(stmt)
        if t is ast.Import or t is ast.ImportFrom:
            yield stmt
        elif t is ast.If or t is ast.Try:
            for name in ("body", "orelse", "finalbody"):
                yield from _top_level(getattr(stmt, name, []))
            for handler in getattr(stmt, "handlers", []):
                yield from _top_level(handler.body)


def _noqa_filter(violations: list[Violation], ctx: Context) -> list[Violation]:
    if not violations:  # most files: no copy of the text made to look for a comment
        return violations
    if "noqa" not in ctx.source and "NOQA" not in ctx.source.upper():
        return violations
    lines = ctx.lines()
    kept: list[Violation] = []
    for v in violations:
        line = lines[v.line - 1] if v.line <= len(lines) else ""
        match = _NOQA.search(line) if "#" in line else None
        if match is None:
            kept.append(v)
            continue
        codes = match.group("codes")
        if not codes:
            continue  # bare "# noqa" silences everything on the line
        wanted = [c.upper() for c in re.split(r"[,\s]+", codes) if c]
        if not any(v.code.startswith(c) for c in wanted):
            kept.append(v)
    return kept


#: statements that Python 3.12 added (PEP 695): ``type X = ...``, ``def f[T](...)``,
#: ``class C[T]:``; read on the line a syntax error points at
_PEP695 = re.compile(r"\s*(?:type\s+[A-Za-z_]\w*\s*(?:\[[^\]]*\])?\s*="
                     r"|(?:async\s+)?def\s+[A-Za-z_]\w*\s*\[|class\s+[A-Za-z_]\w*\s*\[)")


def _newer_syntax(text: str, line: int, msg: str) -> str | None:
    """What newer syntax a syntax error of an older interpreter most likely is (a type
    parameter list or ``type`` statement, an f-string that nests its own quotes), or None
    on Python 3.12 and later or when the line shows neither."""
    if sys.version_info >= (3, 12):
        return None
    lines = text.splitlines()
    source = lines[line - 1] if 0 < line <= len(lines) else ""
    if _PEP695.match(source):
        return "type parameters or a `type` statement: Python 3.12 syntax"
    if msg.startswith("f-string"):
        return "if the f-string nests its own quotes or spans lines, that is Python 3.12 syntax"
    return None


def parse(text: str, path: str = "<string>") -> ast.Module:
    """Parse Python source, turning every failure into :class:`LintSyntaxError`."""
    try:
        return ast.parse(text, filename=path, type_comments=False)
    except SyntaxError as err:
        line = err.lineno or 1
        col = max((err.offset or 1) - 1, 0)
        msg = err.msg or "invalid syntax"
        newer = _newer_syntax(text, line, msg)
        if newer is not None:
            version = ".".join(map(str, sys.version_info[:2]))
            raise LintSyntaxError(
                f"{path}:{line}:{col + 1}: not valid Python {version}: {msg} ({newer})",
                path=path, line=line, col=col,
                tip="run torchmem lint with Python 3.12 or later to lint this file") from None
        raise LintSyntaxError(f"{path}:{line}:{col + 1}: not valid Python: {msg}", path=path,
                              line=line, col=col,
                              tip="fix the syntax error; the file was not linted") from None
    except (ValueError, TypeError) as err:  # e.g. null bytes on older Pythons
        raise LintSyntaxError(f"{path}: cannot be parsed as Python: {err}", path=path,
                              tip="is this a Python source file?") from None
    except (RecursionError, MemoryError):
        raise LintSyntaxError(f"{path}: expressions nested too deeply to parse", path=path,
                              tip="exclude this (probably generated) file") from None


def lint_source(text: str, path: str = "<string>", *, select: Iterable[str] | None = None,
                ignore: Iterable[str] | None = None,
                tree_files: tuple[str, ...] = ()) -> list[Violation]:
    """Lint one Python source string and return its violations, ordered by position.

    Args:
        text: the Python source.
        path: the file name used in the violations.
        select: rule codes, prefixes (``TMM1``) or ``ALL``; ``None`` means the default set
            (the memory and correctness rules: not the hygiene ``TMM401``/``TMM402``/
            ``TMM404``/``TMM603`` or the opinionated ``TMM9xx``).
        ignore: codes or prefixes to leave out (wins over ``select``).
        tree_files: the files of the linted tree, ``path`` among them: a top-level
            function holding a finding that the other files call only under ``no_grad``
            is analysed as ``no_grad`` (:mod:`torchmem.lint.tree_callers`).

    Returns:
        Violations sorted by line, column and code; ``# noqa`` comments already applied.

    Raises:
        LintSyntaxError: ``text`` is not valid Python (line and column attached).
        UsageError: ``select``/``ignore`` name an unknown code.

    Example:
        >>> lint_source("import torch\\nw = torch.zeros(2, requires_grad=True)\\nw.add_(1)\\n")[0].code
        'TMM403'
    """
    if isinstance(select, str):
        select = [select]
    if isinstance(ignore, str):
        ignore = [ignore]
    with fewer_collections():
        return _lint(text, path, select, ignore, tree_files)


#: cyclic-collector thresholds while a file is linted: its AST and the analysis's tables are
#: hundreds of thousands of objects, nearly all freed by reference counting (the walker
#: breaks its own cycles, see below), and at the default first-generation threshold (700)
#: the collector re-scans them hundreds of times per large file for nothing (about a tenth
#: of the CPU time of a lint; ``benchmarks/lint_speed.py``)
_LINT_GC_THRESHOLD = (100_000, 50, 100)


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Raise the cyclic collector's thresholds for the block, then restore the caller's:
    the linter may run inside another program, whose settings are left as they were."""
    before = gc.get_threshold()
    if before[0] == 0:  # automatic collection is off: leave it off
        yield
        return
    gc.set_threshold(*_LINT_GC_THRESHOLD)
    try:
        yield
    finally:
        gc.set_threshold(*before)


def _lint(text: str, path: str, select: Iterable[str] | None,
          ignore: Iterable[str] | None, tree_files: tuple[str, ...] = (),
          caller_no_grad: frozenset[str] = frozenset()) -> list[Violation]:
    rules = select_rules(list(select) if select is not None else None,
                         list(ignore) if ignore else None)
    if text.startswith("\ufeff"):
        text = text[1:]
    tree = parse(text, path)
    ctx = Context(text, path)
    ctx.tree = tree
    if not rules:
        return []
    nodes, hooks = _table(rules)
    walker = Walker(ctx, nodes, hooks)
    ctx.summaries = Summaries(tree, path)
    ctx.summaries.walker = walker
    for stmt in _top_level(tree.body):
        ctx.add_import(stmt)
    if caller_no_grad or mentions_no_grad(text):
        ctx.quiet_functions = no_grad_functions(tree, ctx.qualname, caller_no_grad)
    if mentions_eval(text):
        ctx.eval_functions = eval_functions(tree, ctx.qualname)
    if "register_forward_hook" in text:
        ctx.hook_outputs = forward_hooks(tree)
    limit = sys.getrecursionlimit()
    try:
        # anything ast.parse accepts (long operator chains) must not exhaust the default limit
        sys.setrecursionlimit(max(limit, _RECURSION_LIMIT))
        walker.function(tree, tree.body, "<module>", None)
    except RecursionError:
        raise LintSyntaxError(f"{path}: code nested too deeply to analyse", path=path,
                              tip="exclude this (probably generated) file") from None
    finally:
        sys.setrecursionlimit(limit)
        # the walker, the summaries and the context refer to each other: break the cycles
        # so that this file's tree is freed now (the cyclic collector would otherwise
        # spend a tenth of the run finding them)
        walker.close()
        ctx.summaries.walker = None
    found = _noqa_filter(ctx.violations, ctx)
    if found and tree_files and not caller_no_grad:
        quiet = _quiet_in_tree(tree, found, ctx.quiet_functions, path, tree_files)
        if quiet:  # judged again with those functions under no_grad
            return _lint(text, path, select, ignore, (), quiet)
    unique = {(v.line, v.col, v.code): v for v in found}
    return sorted(unique.values(), key=Violation.sort_key)


def _quiet_in_tree(tree: ast.Module, found: list[Violation], quiet: frozenset[int],
                   path: str, tree_files: tuple[str, ...]) -> frozenset[str]:
    """The top-level functions holding a finding, not ``no_grad`` in their file, that the
    other files of the tree call only under ``no_grad``."""
    from torchmem.lint.tree_callers import no_grad_callees

    lines = sorted({v.line for v in found})
    names = [stmt.name for stmt in tree.body
             if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))
             and id(stmt) not in quiet
             and any(stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno)
                     for line in lines)]
    return no_grad_callees(path, names, tree_files) if names else frozenset()


def _debug_kinds(text: str) -> dict[str, Any]:  # pragma: no cover - developer aid
    """Return the final environment of the module top level (for debugging rules)."""
    tree = parse(text)
    ctx = Context(text, "<string>")
    walker = Walker(ctx, {}, {h: [] for h in _HOOKS})
    captured: dict[str, Any] = {}

    def grab(state: FunctionState, c: Context) -> None:
        captured[state.name] = dict(state.flow.env)

    walker.hooks["leave_function"].append(grab)
    walker.function(tree, tree.body, "<module>", None)
    return captured

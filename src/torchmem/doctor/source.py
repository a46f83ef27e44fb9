"""Find, in the user's source, the statement that keeps adding to a culprit.

Given a culprit path such as ``losses``, ``self.history``, ``metrics['loss']``,
``hidden`` or ``model._forward_hooks``, parse the files involved with :mod:`ast` and
list the statements that grow or rebind it (which of them to name is
:mod:`torchmem.doctor.statement_rank`'s choice):

* ``<x>.append/extend/insert/add/update/setdefault/appendleft(...)`` calls,
* augmented assignments ``<x> += ...``,
* subscript assignments ``<x>[k] = ...``,
* rebinding assignments ``<x> = f(..., <x>, ...)`` (``h = model(x, h)``,
  ``out, (h, c) = lstm(x, (h, c))``, ``self.memory = self.memory * 0.9 + m``),
* in-place method calls on it ``<x>.mul_(m).add_(v)`` (a running statistic updated in
  place extends its graph),
* ``register_*_hook(...)`` calls for hook dicts.

Expressions are compared with subscripts removed and by their trailing names, so
``self.history`` in a method matches the culprit ``trainer.history`` found from the
caller, and ``metrics[name].append(loss)`` matches ``metrics['loss']``.

Never imports torch; parses each file once (cached by path and modification time).
"""

from __future__ import annotations

import ast
import linecache
import os
import types
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

from torchmem.doctor.hook_sites import HOOK_METHODS, matching_registrations
from torchmem.doctor.operands import brings_other_value
from torchmem.doctor.source_flow import derived_names, handed_parameters

__all__ = ["Statement", "find_statements", "stem", "parse_path", "load_tree", "frame_site"]

_ADDERS = frozenset({"append", "extend", "insert", "add", "update", "setdefault",
                     "appendleft", "extendleft", "put", "put_nowait", "__setitem__"})


#: in-place methods that reset or re-initialise a tensor rather than build on its value
_RESETS = frozenset({"zero_", "fill_", "detach_", "requires_grad_", "share_memory_", "normal_",
                     "uniform_", "random_", "bernoulli_", "exponential_", "resize_", "set_"})


def _in_place(method: str) -> bool:
    """A tensor method that updates its receiver in place from its old value (``add_``)."""
    return len(method) > 1 and method.endswith("_") and not method.startswith("_") \
        and method not in _RESETS


@dataclass(frozen=True)
class Statement:
    """A statement that grows or rebinds a culprit.

    Attributes:
        file, line: where it is (1-based line).
        code: the source line, stripped.
        kind: ``add`` (append-like call), ``augassign``, ``setitem``, ``assign``
            (rebinding that reads the old value), ``rebind`` (plain rebinding), ``inplace``
            (an in-place method call on it, ``x.mul_(m).add_(v)``) or ``hook``.
        function: the enclosing function (``<module>`` at top level).
        in_loop: the statement sits inside a ``for``/``while`` loop of its function.
        value: source text of what is added or assigned (``loss`` in ``losses.append(loss)``).
        target: source text of the culprit expression as written there.
        method: the method called for ``add``/``hook`` kinds (``append``, ``register_forward_hook``).
        brings: the value reads something besides the culprit's old value that may carry a
            graph (:func:`~torchmem.doctor.operands.brings_other_value`).
        key: for ``setitem``, the source text of the key written (``'last'`` in
            ``state['last'] = x``); None otherwise.
    """

    file: str
    line: int
    code: str
    kind: str
    function: str
    in_loop: bool
    value: str | None = None
    target: str | None = None
    method: str | None = None
    brings: bool = False
    key: str | None = None


def parse_path(path: str) -> list[str]:
    """Split a culprit path into names, dropping subscripts and closure markers; a path
    into what a C object references internally (``stream.<internal list>``) stops at the
    object: the script's statements reach it, not its insides.

    Example:
        >>> parse_path("self.metrics['loss']")
        ['self', 'metrics']
        >>> parse_path("make.<locals>.cb:out")
        ['out']
        >>> parse_path("self.stream.<internal list>")
        ['self', 'stream']
    """
    if ".<internal " in path:
        path = path[:path.index(".<internal ")]
    if ":" in path:
        path = path.rsplit(":", 1)[1]
    out: list[str] = []
    depth = 0
    current = ""
    for ch in path:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif depth == 0:
            if ch == ".":
                if current:
                    out.append(current)
                current = ""
            else:
                current += ch
    if current:
        out.append(current)
    return out


def stem(node: ast.AST) -> list[str] | None:
    """Names of an expression with subscripts removed (``a.b[k].c`` -> ``[a, b, c]``)."""
    names: list[str] = []
    while True:
        if isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Attribute):
            names.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Name):
            names.append(node.id)
            return names[::-1]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr",):
            return None
        else:
            return None


def _matches(expr: ast.AST, wanted: list[str]) -> bool:
    names = stem(expr)
    if not names or not wanted:
        return False
    if names == wanted:
        return True
    # trailing-name match: self.history ~ trainer.history; bare names must match exactly
    if len(wanted) >= 2 and len(names) >= 2:
        return names[-1] == wanted[-1]
    if len(wanted) >= 2 and len(names) == 1:
        return False
    return len(names) == 1 and names == wanted[-1:]


@lru_cache(maxsize=64)
def _parse(file: str, mtime: float) -> tuple[ast.Module, tuple[str, ...]] | None:
    try:
        with open(file, "rb") as fh:
            source = fh.read()
        tree = ast.parse(source, filename=file)
    except (OSError, SyntaxError, ValueError):
        return None
    text = source.decode("utf-8", errors="replace")
    return tree, tuple(text.splitlines())


def load_tree(file: str) -> tuple[ast.Module, tuple[str, ...]] | None:
    """The parsed module and source lines of ``file`` (cached; None when unreadable)."""
    try:
        mtime = os.path.getmtime(file)
    except OSError:
        return None
    return _parse(file, mtime)


def _reads(node: ast.AST, wanted: list[str], derived: frozenset[str] = frozenset()) -> bool:
    """Whether ``node`` reads the culprit, or a local name that :func:`_derived_names`
    found computed from it."""
    for sub in ast.walk(node):
        if isinstance(sub, (ast.Name, ast.Attribute, ast.Subscript)) and _matches(sub, wanted):
            return True
        if isinstance(sub, ast.Name) and sub.id in derived:
            return True
    return False


def _targets(target: ast.AST) -> list[ast.AST]:
    if isinstance(target, (ast.Tuple, ast.List)):
        out: list[ast.AST] = []
        for elt in target.elts:
            out.extend(_targets(elt.value if isinstance(elt, ast.Starred) else elt))
        return out
    return [target]


class _Finder(ast.NodeVisitor):
    def __init__(self, file: str, lines: tuple[str, ...], wanted: list[str], hook: bool,
                 handed: dict[int, set[str]] | None = None) -> None:
        self.file = file
        #: per function (its ``def`` line; 0: the module), parameters handed the culprit
        self.handed = handed or {}
        self.lines = lines
        self.wanted = wanted
        self.hook = hook
        self.function = "<module>"
        self.loops = 0
        self.found: list[Statement] = []
        self.aliases: set[str] = set()  # local names bound to the culprit in this function
        self.derived: frozenset[str] = frozenset()  # local names computed from the culprit
        self.inner: set[int] = set()  # calls inside an in-place chain already recorded

    def _hit(self, expr: ast.AST) -> bool:
        if _matches(expr, self.wanted):
            return True
        names = stem(expr)
        return names is not None and len(names) == 1 and names[0] in self.aliases

    @property
    def _own_name(self) -> str | None:
        return self.wanted[0] if len(self.wanted) == 1 else None

    def _reads_culprit(self, node: ast.AST, derived: frozenset[str]) -> bool:
        return _reads(node, self.wanted, derived)

    def _add(self, node: ast.AST, kind: str, value: ast.AST | None, target: ast.AST | None,
             method: str | None = None, key: ast.AST | None = None) -> None:
        line = getattr(node, "lineno", 0)
        code = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
        self.found.append(Statement(
            file=self.file, line=line, code=code, kind=kind, function=self.function,
            in_loop=self.loops > 0,
            value=ast.unparse(value) if value is not None else None,
            target=ast.unparse(target) if target is not None else None, method=method,
            brings=value is not None and brings_other_value(value, self._hit),
            key=ast.unparse(key) if key is not None else None))

    def visit_Module(self, node: ast.Module) -> None:
        self.derived = derived_names(node, self._reads_culprit, self._own_name)
        self.aliases = set(self.handed.get(0, ()))
        self.generic_visit(node)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        saved = self.function, self.loops, self.aliases, self.derived
        self.function, self.loops = node.name, 0
        self.aliases = set(self.handed.get(node.lineno, ()))  # parameters handed the culprit
        self.derived = derived_names(node, self._reads_culprit, self._own_name)
        self.generic_visit(node)
        self.function, self.loops, self.aliases, self.derived = saved

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        # inside `class C`, `obj.__cache` is written for the attribute `_C__cache`
        saved = self.wanted
        prefix = "_" + node.name.lstrip("_") + "__"
        self.wanted = [n[len(prefix) - 2:] if n.startswith(prefix) and not n.endswith("__") else n
                       for n in saved]
        self.generic_visit(node)
        self.wanted = saved

    def _loop(self, node: ast.AST) -> None:
        self.loops += 1
        self.generic_visit(node)
        self.loops -= 1

    visit_For = visit_While = visit_AsyncFor = _loop

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute):
            if self.hook and func.attr.startswith("register_") and func.attr.endswith("hook"):
                receiver = stem(func.value) or []
                owner = self.wanted[:-1]  # model._forward_hooks -> model
                if not owner or (receiver and receiver[-1] == owner[-1]) or receiver == owner \
                        or (receiver and owner and receiver[0] == owner[0] and set(receiver) <= set(owner)):
                    arg = node.args[0] if node.args else None
                    self._add(node, "hook", arg, func.value, func.attr)
            elif not self.hook and func.attr in _ADDERS and self._hit(func.value):
                arg = node.args[-1] if node.args else (node.keywords[0].value if node.keywords else None)
                self._add(node, "add", arg, func.value, func.attr)
            elif not self.hook and id(node) not in self.inner and _in_place(func.attr):
                receiver = func.value
                while isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Attribute) \
                        and _in_place(receiver.func.attr):
                    self.inner.add(id(receiver))  # `x.mul_(m).add_(v)`: one statement
                    receiver = receiver.func.value
                if self._hit(receiver):
                    self._add(node, "inplace", node, receiver, func.attr)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if not self.hook and self._hit(node.target):
            kind = "setitem" if isinstance(node.target, ast.Subscript) and stem(node.target) == self.wanted else "augassign"
            self._add(node, kind, node.value, node.target)
        self.generic_visit(node)

    def _assign(self, node: ast.AST, targets: Sequence[ast.AST], value: ast.AST | None) -> None:
        if self.hook or value is None:
            return
        for target in targets:
            for t in _targets(target):
                if isinstance(t, ast.Subscript) and self._hit(t.value):
                    self._add(node, "setitem", value, t.value, key=t.slice)
                elif not isinstance(t, ast.Subscript) and _matches(t, self.wanted):
                    reads = _reads(value, self.wanted, self.derived)
                    self._add(node, "assign" if reads else "rebind", value, t)

    def visit_Assign(self, node: ast.Assign) -> None:
        self._assign(node, node.targets, node.value)
        if (self.function != "<module>" and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, (ast.Attribute, ast.Subscript, ast.Name))
                and _matches(node.value, self.wanted)):
            # `summaries = self._summaries`: what is added through the alias below in
            # this function is added to the culprit
            self.aliases.add(node.targets[0].id)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._assign(node, [node.target], node.value)
        self.generic_visit(node)


def find_statements(path: str, files: list[str], *, hook: bool = False,
                    hook_names: Sequence[str] = (), hook_methods: Sequence[str] = (),
                    local_to: str | None = None) -> list[Statement]:
    """All statements in ``files`` that grow or rebind the culprit ``path``.

    Args:
        path: the culprit as reported (``self.history``, ``losses``...).
        files: source files to search (duplicates and unreadable files are skipped).
        hook: look for ``register_*_hook`` calls instead (``path`` names a hook dict).
        hook_names, hook_methods: for a hook dict, the functions it holds and the
            methods that can have filled it (:mod:`torchmem.doctor.hook_sites`): the
            registrations that pass another function or call another method are left out.
        local_to: for a plain name, the function whose local variable it is: only that
            function's calls hand it to a helper (see
            :func:`~torchmem.doctor.source_flow.handed_parameters`).

    Returns:
        Matching statements in file order.
    """
    wanted = parse_path(path)
    if hook and wanted and wanted[-1].startswith("_") and wanted[-1].endswith("hooks"):
        wanted = wanted[:-1] + ["hooks"]
    out: list[Statement] = []
    trees = {f: parsed[0] for f in dict.fromkeys(x for x in files if x)
             if (parsed := load_tree(f)) is not None}
    local = local_to if len(wanted) == 1 and local_to not in (None, "<module>") else None
    handed = {} if hook else handed_parameters(trees, lambda node: _matches(node, wanted), local)
    for file in dict.fromkeys(f for f in files if f):
        parsed = load_tree(file)
        if parsed is None:
            continue
        tree, lines = parsed
        finder = _Finder(file, lines, wanted, hook, handed.get(file))
        finder.visit(tree)
        out.extend(finder.found)
    if hook and out and (hook_names or hook_methods):
        # registrations through this name that cannot have filled this dict (another
        # method, another function of the script's) are not its sites
        out = matching_registrations(out, hook_names, hook_methods, _defined_functions(files))
    if hook and not out and len(wanted) > 1:
        # Registered through a helper (``def attach(layer): layer.register_forward_hook(f)``)
        # or a loop variable: the receiver's name differs. Accept a registration site only
        # when it is the one register_*_hook call in the user's files that can have filled
        # this dict (the method that fills it, ``register_forward_hook`` for
        # ``_forward_hooks``, with the function it holds), so the line is never a guess.
        anywhere = find_statements("hooks", files, hook=True)
        if len(_sites(anywhere)) > 1:
            methods = hook_methods or HOOK_METHODS.get(parse_path(path)[-1], ())
            anywhere = matching_registrations(anywhere, (), methods)
        if len(_sites(anywhere)) > 1 and hook_names:
            anywhere = matching_registrations(anywhere, hook_names, (), _defined_functions(files))
        if len(_sites(anywhere)) == 1:
            out = anywhere
    return out


def _sites(found: Sequence[Statement]) -> set[tuple[str, int]]:
    return {(s.file, s.line) for s in found}


def _defined_functions(files: Sequence[str]) -> frozenset[str]:
    """Names of the functions and methods the ``def`` statements of ``files`` define."""
    names: set[str] = set()
    for file in dict.fromkeys(f for f in files if f):
        parsed = load_tree(file)
        if parsed is not None:
            names.update(n.name for n in ast.walk(parsed[0])
                         if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
    return frozenset(names)


def frame_site(frame: types.FrameType | None) -> tuple[str, int, str] | None:
    """``(file, line, code)`` where ``frame`` is now (None without a frame)."""
    if frame is None:
        return None
    file, line = frame.f_code.co_filename, frame.f_lineno
    return file, line, linecache.getline(file, line).strip()

"""Which of the statements that add to a culprit to name (:func:`best_statement`).

:mod:`torchmem.doctor.source` lists every statement that grows or rebinds a culprit; this
module ranks them: the kind of statement the finding needs (an append for a container, a
rebinding that reads the old value for a chain, ``+=`` for a running sum), statements
that add rather than initialise, the one inside a loop over the one outside, a statement
that brings in another value for a graph of forward passes, the culprit's exact text, the
function that holds it.

Never imports torch.
"""

from __future__ import annotations

import ast
import functools

from torchmem.doctor.path_keys import writes_other_key
from torchmem.doctor.source import Statement, load_tree

__all__ = ["best_statement", "innermost_loop"]


#: values that initialise a variable rather than add to it
_INITIAL = frozenset({"None", "[]", "{}", "()", "0", "0.0", "dict()", "list()", "set()",
                      "tuple()", "deque()", "collections.deque()", "OrderedDict()",
                      "defaultdict(list)", "collections.defaultdict(list)"})

_PREFERENCE = {
    "container": ("add", "setitem", "augassign", "assign", "rebind"),
    # a plain rebinding reads nothing old: the last resort of a chain (`x[i] = v` writes
    # in place and keeps x's graph, `x = f()` does not)
    "chain": ("assign", "augassign", "inplace", "add", "setitem", "rebind"),
    "sum": ("augassign", "assign", "inplace", "add", "setitem", "rebind"),  # a running sum `x += loss`
    "hook": ("hook",),
}


def best_statement(statements: list[Statement], want: str = "container",
                   function: str | None = None, exact: str | None = None,
                   brings_graph: bool = False, near: tuple[str, int] | None = None,
                   replaced: bool = False) -> Statement | None:
    """Pick the statement most likely to keep adding to the culprit.

    Args:
        statements: candidates from :func:`find_statements`.
        want: ``container`` (prefer append-like), ``chain`` (prefer rebinding that reads
            the old value), ``sum`` (prefer ``+=``) or ``hook``.
        function: the function that holds the culprit, preferred when tied.
        exact: the culprit text; statements written exactly so are preferred, and
            statements that write another constant key of the same container
            (:func:`writes_other_key`) are left out.
        brings_graph: the culprit's graph holds forward passes through the parameters, so
            among statements of the same kind one whose value brings in another value
            (``Statement.brings``: ``stat * (1 - m) + var * m``) is preferred to one that
            only transforms the old value or adds detached data (``stat.to(x.device)``,
            ``stat + var.data``), which cannot have linked them.
        near: ``(file, line)`` where the steps ran (:attr:`Snapshot.site`): of statements
            of the same kind, one in the innermost loop around that line is preferred
            (``hidden = ...`` in the loop that calls the model at every step, not in a
            loop over a prompt's few characters before it).
        replaced: the culprit is a container that keeps as many items from step to step
            while what they reach grows: its items are replaced (``groups[i] = new``), so
            a statement that replaces one is preferred to one that appends (the append
            that filled it once, in a constructor).
    """
    order = _PREFERENCE.get(want, _PREFERENCE["container"])
    if replaced and "add" in order and "setitem" in order:
        order = tuple(k for k in order if k != "add")
        order = (*order[:order.index("setitem") + 1], "add", *order[order.index("setitem") + 1:])
    best: tuple[tuple[int, ...], Statement] | None = None
    if exact is not None:  # a statement that fills another constant key is not a candidate
        statements = [s for s in statements if not writes_other_key(_written(s), exact)]
    # a function that writes the culprit both inside a loop and outside every loop: the
    # statement outside runs once per call, the one inside once per iteration -- only the
    # latter can keep adding at every step (`x = torch.where(x == 0, c, x)` before the
    # loop, `x[i, j] = v` in it)
    looping = {(s.file, s.function) for s in statements
               if s.in_loop and s.kind in order and s.value not in _INITIAL}
    for s in statements:
        if s.kind not in order:
            continue
        kind = "rebind" if want == "chain" and s.kind == "assign" and reshapes_only(s) \
            else s.kind  # x = x.view(...) passes the graph on, links nothing new
        score = (
            0 if s.value in _INITIAL else 1,
            0 if not s.in_loop and (s.file, s.function) in looping else 1,
            -order.index(kind if kind in order else s.kind),
            1 if near is not None and same_loop(s, near) else 0,
            1 if brings_graph and s.brings else 0,
            1 if s.in_loop else 0,
            1 if exact is not None and s.target == exact else 0,
            1 if function is not None and s.function == function else 0,
            -s.line,
        )
        if best is None or score > best[0]:
            best = (score, s)
    return best[1] if best else None


#: tensor methods that give the same values in another shape, type or place
_RESHAPES = frozenset({"view", "reshape", "flatten", "squeeze", "unsqueeze", "permute",
                       "transpose", "contiguous", "float", "double", "half", "to", "view_as",
                       "reshape_as", "expand", "expand_as", "t", "movedim"})


def reshapes_only(s: Statement) -> bool:
    """Whether ``s`` rebinds its target to its own value in another shape or type
    (``self.state = self.state.view(n, -1)``): such a statement passes the old value's graph
    on but joins no other value to it."""
    if not s.value or not s.target:
        return False
    try:
        node = ast.parse(s.value, mode="eval").body
    except SyntaxError:
        return False
    if not isinstance(node, ast.Call):
        return False
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr in _RESHAPES:
        node = node.func.value
    return not isinstance(node, ast.Call) and ast.unparse(node) == s.target


def _written(s: Statement) -> str | None:
    """What ``s`` writes: its target, with the key for an item assignment
    (``state['last']`` for ``state['last'] = x``, whose target is ``state``)."""
    if s.kind == "setitem" and s.key is not None and s.target is not None:
        return f"{s.target}[{s.key}]"
    return s.target


def same_loop(stmt: Statement, site: tuple[str, int]) -> bool:
    """Whether ``stmt`` and the line ``site`` are in the same innermost ``for``/``while``
    loop of the same file (False when either is in no loop)."""
    if stmt.file != site[0]:
        return False
    here, there = innermost_loop(stmt.file, stmt.line), innermost_loop(*site)
    return here is not None and here == there


def innermost_loop(file: str, line: int) -> tuple[int, int] | None:
    """(first line, last line) of the innermost loop of ``file`` around ``line``."""
    parsed = load_tree(file)
    if parsed is None:
        return None
    best = None
    for span in _loop_spans(parsed[0]):
        if span[0] <= line <= span[1] and (best is None or span[0] >= best[0]):
            best = span
    return best


@functools.lru_cache(maxsize=64)
def _loop_spans(tree: ast.Module) -> tuple[tuple[int, int], ...]:
    """The loops of a parsed file (cached per tree: :func:`load_tree` parses a file again
    when it changes)."""
    return tuple((n.lineno, n.end_lineno or n.lineno) for n in ast.walk(tree)
                 if isinstance(n, (ast.For, ast.AsyncFor, ast.While)))

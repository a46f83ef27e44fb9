"""Whether a statement's target and a culprit path name different keys of one container.

``logs['avg_loss'] = ...`` does not add to the culprit ``logs['z']``: the statement fills
another constant entry. :func:`writes_other_key` compares the two expressions segment by
segment (names, constant keys, the constant start of an f-string key). Used by
:func:`torchmem.doctor.statement_rank.best_statement`. Never imports torch.
"""

from __future__ import annotations

import ast

__all__ = ["writes_other_key"]

_NO_KEY = object()
_PREFIX = object()


def _segments(text: str) -> list[object] | None:
    """The names and subscript keys of an expression, root first: ``logs['z'].a`` ->
    ``['logs', ('z',), 'a']``; an f-string key is ``(_PREFIX, its constant start)``, any
    other key that is not a constant ``(_NO_KEY,)``. None when
    the text is not an expression (closure paths, ``<locals>``)."""
    try:
        node: ast.AST = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError):
        return None
    out: list[object] = []
    while True:
        if isinstance(node, ast.Subscript):
            key = node.slice
            if isinstance(key, ast.Constant):
                out.append((key.value,))
            elif isinstance(key, ast.JoinedStr) and key.values and isinstance(key.values[0], ast.Constant):
                out.append((_PREFIX, key.values[0].value))  # f'norm_{name}': starts so
            else:
                out.append((_NO_KEY,))
            node = node.value
        elif isinstance(node, ast.Attribute):
            out.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Name):
            out.append(node.id)
            return out[::-1]
        else:
            return None


def writes_other_key(target: str | None, path: str | None) -> bool:
    """True when ``target`` (as written in a statement) and the culprit ``path`` name
    different constant keys of the same container (``logs['avg_loss']`` against the
    culprit ``logs['z']``): the statement fills another entry, not the culprit.

    The two are aligned at their root when it is the same name, else at their ends
    (``self.logs['z']`` against ``trainer.logs['z']``).
    """
    if not target or not path:
        return False
    a, b = _segments(target), _segments(path)
    if not a or not b:
        return False
    if a[0] != b[0]:
        n = min(len(a), len(b))
        a, b = a[len(a) - n:], b[len(b) - n:]
    for x, y in zip(a, b):
        if isinstance(x, tuple) and isinstance(y, tuple):
            if _NO_KEY in (x[0], y[0]) or (x[0] is _PREFIX and y[0] is _PREFIX):
                continue
            if x[0] is _PREFIX or y[0] is _PREFIX:
                prefix, key = (x[1], y[0]) if x[0] is _PREFIX else (y[1], x[0])
                if not (isinstance(key, str) and key.startswith(str(prefix))):
                    return True
            elif x != y:
                return True
        elif x != y and not (isinstance(x, str) and isinstance(y, str)):
            return False  # the structures part: nothing to compare
    return False

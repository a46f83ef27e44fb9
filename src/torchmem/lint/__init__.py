"""Static linter for PyTorch memory anti-patterns (``TMM`` rules); never imports torch.

Public API:

- :func:`lint_source` lints one string and returns :class:`Violation` records.
- :func:`lint_paths` lints files and directories (discovery, configuration, parallel).
- :data:`RULES` maps each rule code to its class (``--explain`` reads its docstring).

Example:
    >>> from torchmem.lint import lint_source
    >>> src = '''
    ... import torch
    ... def train(model, loader, opt, crit):
    ...     losses = []
    ...     for x, y in loader:
    ...         opt.zero_grad()
    ...         loss = crit(model(x), y)
    ...         loss.backward()
    ...         opt.step()
    ...         losses.append(loss)
    ... '''
    >>> [(v.line, v.code) for v in lint_source(src)]
    [(10, 'TMM101')]
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "lint_source",
    "lint_paths",
    "LintResult",
    "Violation",
    "Fix",
    "Edit",
    "LintSyntaxError",
    "RULES",
    "Rule",
    "select_rules",
]

_LAZY = {
    "lint_source": "torchmem.lint.engine",
    "Violation": "torchmem.lint.violation",
    "Fix": "torchmem.lint.violation",
    "Edit": "torchmem.lint.violation",
    "LintSyntaxError": "torchmem.lint.violation",
    "Rule": "torchmem.lint.registry",
    "select_rules": "torchmem.lint.registry",
    "lint_paths": "torchmem.lint.files",
    "LintResult": "torchmem.lint.files",
}


def __getattr__(name: str) -> Any:
    if name == "RULES":
        from torchmem.lint.registry import _load

        value: Any = _load()
    else:
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module 'torchmem.lint' has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

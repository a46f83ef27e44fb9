"""TMM115: memory that torch itself loses, for a known layout of a parameter.

Part of the TMM1xx family (memory kept alive longer than needed). Some leaks are inside
torch, where no Python object holds the memory and no rewrite of the user's loop frees it;
the only fix is to avoid the construct. One is read here: a parameter in the sparse CSR
layout, trained through ``torch.sparse.mm`` (PyTorch issue #109445, open): each backward
leaves about one gradient's worth of memory behind although ``zero_grad()`` runs, measured
with torch 2.13 on CPU, while the COO and strided layouts stay flat. Read from the file alone
(no torch).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.registry import Rule, register

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.context import Context

__all__ = ["SparseCsrParameter"]

_PARAMETER = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})
_CSR = frozenset({"to_sparse_csr"})


def _csr(value: ast.AST, ctx: Context) -> bool:
    """Whether ``value`` makes a sparse CSR tensor: ``x.to_sparse_csr()``,
    ``torch.sparse_csr_tensor(...)``, ``x.to_sparse(layout=torch.sparse_csr)``."""
    for node in ast.walk(value):
        if type(node) is not ast.Call:
            continue
        func = node.func
        if type(func) is ast.Attribute and func.attr in _CSR:
            return True
        if ctx.qualname(func) == "torch.sparse_csr_tensor":
            return True
        if any(k.arg == "layout" and ctx.qualname(k.value) == "torch.sparse_csr"
               for k in node.keywords):
            return True
    return False


@register
class SparseCsrParameter(Rule):
    """A trainable ``nn.Parameter`` in the sparse CSR layout.

    What:
        Flags ``nn.Parameter(x.to_sparse_csr())`` (also ``torch.sparse_csr_tensor(...)``
        and ``layout=torch.sparse_csr``) unless it is built with ``requires_grad=False``.

    Why:
        Backward through ``torch.sparse.mm`` with a sparse CSR parameter leaks inside
        torch: each backward leaves about one gradient's worth of memory that no Python
        object holds, although ``zero_grad()`` runs (PyTorch issue #109445, open; measured
        with torch 2.13 on CPU). Memory grows by one gradient per step until the process
        runs out; a tensor census sees nothing. The COO layout (``x.to_sparse()``) and
        dense parameters do not leak.

    Known problems:
        Whether the parameter is ever differentiated is not checked, nor the torch
        version: a release that fixes the issue makes the finding obsolete.

    Example:
        ```python
        import torch
        import torch.nn as nn

        class Propagate(nn.Module):
            def __init__(self, dense):
                super().__init__()
                self.adjacency = nn.Parameter(dense.to_sparse_csr())

            def forward(self, x):
                return torch.sparse.mm(self.adjacency, x)
        ```

    Use instead:
        ```python
        import torch
        import torch.nn as nn

        class Propagate(nn.Module):
            def __init__(self, dense):
                super().__init__()
                self.adjacency = nn.Parameter(dense.to_sparse())

            def forward(self, x):
                return torch.sparse.mm(self.adjacency, x)
        ```
    """

    code = "TMM115"
    name = "sparse-csr-parameter"
    summary = "trainable nn.Parameter in the sparse CSR layout: torch leaks a gradient per backward"
    call_tails = frozenset({"Parameter"})

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if not node.args or ctx.qualname(node.func) not in _PARAMETER:
            return
        if any(k.arg == "requires_grad" and type(k.value) is ast.Constant and
               k.value.value is False for k in node.keywords):
            return
        if len(node.args) > 1 and type(node.args[1]) is ast.Constant and \
                node.args[1].value is False:
            return
        if not _csr(node.args[0], ctx):
            return
        ctx.report(self, node, (
            "a trainable parameter in the sparse CSR layout: backward through "
            "torch.sparse.mm leaks about one gradient's worth of memory inside torch per step "
            "(PyTorch issue #109445, open; zero_grad() does not free it, and no Python object "
            "holds it); keep the parameter in the COO layout (.to_sparse()) or dense"))

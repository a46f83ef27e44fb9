"""``no_grad_functions`` skips its walk of every expression only when no function of the
file can be found quiet: these files each have one (no torch)."""

from __future__ import annotations

import ast
import textwrap

import pytest

from torchmem.lint.callers import no_grad_functions
from torchmem.lint.context import Context
from torchmem.lint.engine import _top_level

CASES = [
    # a decorated method's key stands for every method of that name, in every class
    ('''
    import torch
    class A:
        @torch.no_grad()
        def forward(self, x): return self.step(x)
        def step(self, x): return x
    class B:
        def forward(self, x): return self.other(x)
        def other(self, x): return x
    ''', ["other", "step"]),
    # a decorator of a decorated function runs as a call of it
    ('''
    import torch
    def mk(): return lambda f: f
    class A:
        @torch.no_grad()
        @mk()
        def run(self): pass
    ''', ["mk"]),
    ('''
    import torch
    def helper(x): return x
    with torch.no_grad():
        helper(1)
    ''', ["helper"]),
    ('''
    import torch
    def helper(x): return x
    def main():
        with torch.no_grad():
            def inner(): return helper(3)
            inner()
    ''', ["helper"]),
    # the context expressions themselves run with recording on
    ('''
    import torch
    def helper(x): return x
    def main():
        with torch.no_grad(), open(helper(1)):
            pass
    ''', []),
    ('''
    import torch
    def helper(x): return x
    @torch.no_grad()
    def main(): pass
    ''', []),
]


@pytest.mark.parametrize(("source", "quiet"), CASES)
def test_quiet_functions(source: str, quiet: list[str]) -> None:
    text = textwrap.dedent(source)
    tree = ast.parse(text)
    ctx = Context(text, "x.py")
    for stmt in _top_level(tree.body):
        ctx.add_import(stmt)
    ids = no_grad_functions(tree, ctx.qualname)
    assert sorted(n.name for n in ast.walk(tree) if id(n) in ids) == quiet  # type: ignore[attr-defined]

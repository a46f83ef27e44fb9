"""The fast walks of ``torchmem.lint.children`` and the statement-level shortcuts built on
them give what the slower generic walks they replace give (no torch)."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from torchmem.lint import joins
from torchmem.lint.children import FIELDS, all_statements, fields, walk
from torchmem.lint.facts import FunctionFacts, target_keys

SOURCE = textwrap.dedent('''
    import a.b as c
    from ..e import f as g, h
    x: int = 1
    def fn(a, /, b: int = 2, *args, c=3, d, **kw) -> None:
        global q
        def inner():
            nonlocal b
        lam = lambda x, y=1: x + y
        with open(a) as fh, open(b):
            fh.read().item()
        try:
            loss = 0.0
        except (ValueError, TypeError) as err:
            raise RuntimeError("x") from err
        else:
            loss += b
        finally:
            del a
        match b:
            case {"k": 1, **rest}:
                out, *tail = rest
            case Point(x=0, y=yy) | [1, 2, *others]:
                pass
            case None | True | False:
                pass
            case str() as s if s:
                pass
        x = f"{a!r:>{b}} {c=}"
        y = [i for i in range(3) if i] if 0 else {k: v for k, v in {}.items()}
        for i, (j, k) in enumerate(y):
            total = total + i
        while x:
            x -= 1
        a[1:2, ::3] = b @ c
        not a; -b; a < b <= c is not d in e
        yield from y
    async def af():
        async with a as b:
            await c
        async for i in j:
            yield i
    class K(Base, metaclass=M):
        attr: int
        @decorator(1)
        def m(self):
            return self
''')


def _trees() -> list[ast.Module]:
    trees = [ast.parse(SOURCE)]
    for path in sorted(Path(__file__).resolve().parents[2].joinpath("src").rglob("*.py"))[:25]:
        trees.append(ast.parse(path.read_text(encoding="utf-8")))
    return trees


@pytest.mark.parametrize("tree", _trees())
def test_walk_is_ast_walk(tree: ast.Module) -> None:
    assert [id(n) for n in walk(tree)] == [id(n) for n in ast.walk(tree)]


@pytest.mark.parametrize("tree", _trees())
def test_fields_hold_only_nodes(tree: ast.Module) -> None:
    """The walker visits these fields without checking their values' type."""
    for node in ast.walk(tree):
        for name in FIELDS.get(node.__class__) or fields(node.__class__):
            value = getattr(node, name)
            for item in value if isinstance(value, list) else [value]:
                assert item is None or isinstance(item, ast.AST), (type(node), name)


def test_all_statements_order() -> None:
    tree = ast.parse(SOURCE)
    found = [s for s in ast.walk(tree) if isinstance(s, ast.stmt)]
    assert sorted(map(id, all_statements(tree))) == sorted(map(id, found))


def _index_by_walk(body: list[ast.stmt]) -> dict[str, list[tuple[int, int]]]:
    """:func:`joins._index` with its full walk (the file has an assignment expression)."""
    fn = SimpleNamespace(node=ast.Module(body=body, type_ignores=[]))
    ctx = SimpleNamespace(source="(y := 1)", scratch={}, fn=fn)
    return joins._index(ctx)  # type: ignore[arg-type]


def test_statement_bindings_match_the_walk() -> None:
    tree = ast.parse(SOURCE)
    functions = [tree] + [n for n in ast.walk(tree)
                          if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for fn in functions:
        quick = joins._statement_bindings(fn.body)
        assert quick is not None
        full = _index_by_walk(fn.body)
        assert {k: sorted(v) for k, v in quick.items()} == \
            {k: sorted(v) for k, v in full.items()}


def test_target_keys() -> None:
    target = ast.parse("a, (b, *c), d.e, f[0] = x").body[0].targets[0]  # type: ignore[attr-defined]
    assert target_keys(target) == ["a", "b", "c", "d.e"]
    assert target_keys(ast.parse("w = 1").body[0].targets[0]) == ["w"]  # type: ignore[attr-defined]


def test_tensor_names_skip_nested_scopes() -> None:
    fn = ast.parse(textwrap.dedent('''
        def f(loss, out):
            loss.backward()
            g = lambda: out.item()
            def h(z):
                z.detach()
    ''')).body[0]
    facts = FunctionFacts()
    facts.body = fn.body  # type: ignore[attr-defined]
    assert facts.tensor_names() == {"loss"}

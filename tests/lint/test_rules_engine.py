"""The engine under the rules: one traversal, data flow kinds, noqa, positions, limits."""

from __future__ import annotations

import ast

import pytest

from torchmem.lint import LintSyntaxError, lint_source
from torchmem.lint.dataflow import ACT, GRAPH, LEAF, MODEL, OPTIM, TENSOR
from torchmem.lint.engine import Context, _table, _Walker
from torchmem.lint.registry import Rule

LEAK = """\
import torch
def train(model, loader, opt, crit):
    losses = []
    for x, y in loader:
        opt.zero_grad()
        loss = crit(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss){comment}
"""


def codes(text: str, **kw) -> list[tuple[int, str]]:
    return [(v.line, v.code) for v in lint_source(text, **kw)]


@pytest.mark.parametrize("comment, silenced", [
    ("", False),
    ("  # noqa", True),
    ("  # noqa: TMM101", True),
    ("  # NOQA:TMM1", True),
    ("  # noqa: TMM101, E501", True),
    ("  # noqa: TMM102", False),
    ("  # noqa: E501", False),
])
def test_noqa(comment, silenced):
    found = codes(LEAK.format(comment=comment))
    assert found == ([] if silenced else [(9, "TMM101")])


def test_select_and_ignore():
    text = LEAK.format(comment="")
    assert codes(text, select=["TMM1"]) == [(9, "TMM101")]
    assert codes(text, ignore=["TMM101"]) == []
    assert codes(text, select="TMM4") == []


def test_columns_are_characters_and_fix_lands_on_the_right_spot():
    text = "import torch\nw = torch.ones(2)\nnote = 'héllo wörld'; y = w.data\n"
    (v,) = lint_source(text, select="TMM401")
    line = text.splitlines()[2]
    assert (v.line, v.col) == (3, line.index("w.data"))
    (edit,) = v.fix.edits
    assert line[edit.col:edit.end_col] == ".data"


def test_syntax_error_has_position():
    with pytest.raises(LintSyntaxError) as info:
        lint_source("x = 1\ndef f(:\n    pass\n", "m.py")
    err = info.value
    assert (err.path, err.line) == ("m.py", 2) and err.col >= 0
    assert err.message.startswith("m.py:2:")


def test_null_bytes_and_bom():
    with pytest.raises(LintSyntaxError):
        lint_source("x = 1\x00\n")
    assert codes("\ufeffimport torch\nw = torch.ones(2)\ny = w.data\n", select="ALL") == [
        (3, "TMM401")]


def test_long_operator_chain_is_linted_not_rejected():
    chain = " + ".join(f"a{i}" for i in range(2500))
    text = f"x = {chain}\nfor b in loader:\n    ys.append(model(b))\n"
    assert codes(text) == [(3, "TMM101")]


def test_each_node_is_dispatched_exactly_once():
    seen: list[int] = []

    class Probe(Rule):
        code, name, summary = "TMM999", "probe", "counts visits"

        def visit_Call(self, node, ctx):
            seen.append(id(node))

        def visit_Name(self, node, ctx):
            seen.append(id(node))

    text = LEAK.format(comment="") + "\nclass M:\n    def f(self):\n        return [g(a) for a in h(b)]\n"
    tree = ast.parse(text)
    nodes, hooks = _table([Probe])
    walker = _Walker(Context(text, "<t>"), nodes, hooks)
    walker.function(tree, tree.body, "<module>", None)
    expected = [id(n) for n in ast.walk(tree) if isinstance(n, (ast.Call, ast.Name))]
    assert sorted(seen) == sorted(expected)


def kinds_at_end(text: str) -> dict[str, int]:
    from torchmem.lint.engine import _debug_kinds

    return _debug_kinds(text)["<module>"]


def test_flow_kinds():
    env = kinds_at_end("""\
import torch
from torch import nn
net = nn.Linear(2, 2)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
x = torch.randn(4, 2)
w = torch.zeros(2, requires_grad=True)
out = net(x)
val = out.item()
det = out.detach()
idx = out.argmax(1)
flag = (out > 0).sum()
mixed = out * 2 + det
with torch.no_grad():
    quiet = net(x)
if x.sum() > 0:
    either = out
else:
    either = det
""")
    assert env["net"] & MODEL and env["opt"] & OPTIM
    assert env["x"] & TENSOR and not env["x"] & GRAPH
    assert env["w"] & LEAF
    assert env["out"] & GRAPH and env["out"] & ACT
    assert "val" not in env
    assert env["det"] & TENSOR and not env["det"] & GRAPH
    assert not env.get("idx", 0) & GRAPH and not env.get("flag", 0) & GRAPH
    assert env["mixed"] & GRAPH
    assert not env["quiet"] & GRAPH
    assert not env.get("either", 0) & GRAPH  # a must-fact: graph on one path only


def test_loop_reset_semantics():
    text = """\
import torch
def f(model, loader, opt):
    for epoch in range(3):
        total = 0
        for x in loader:
            opt.zero_grad()
            loss = model(x).sum()
            loss.backward()
            opt.step()
            total += loss
"""
    assert codes(text) == [(10, "TMM101")]
    # reset inside the inner loop: nothing persists across a training iteration
    assert codes(text.replace("        total = 0\n", "").replace(
        "            opt.zero_grad()\n", "            opt.zero_grad()\n            total = 0\n")) == []

"""No edit detaches a value that the script later backpropagates through.

``losses.append(total)`` then ``losses[-1].backward(retain_graph=True)``: storing
``total.detach()`` would leave the backward nothing to differentiate, so the script would
raise. Such edits are refused (:mod:`torchmem.doctor.differentiated`); a backward from
another reference to the stored tensor (``loss.backward()``) keeps the edit.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from torchmem.doctor.differentiated import differentiating_call, tensor_method_call
from torchmem.doctor.edits import propose_edit
from torchmem.doctor.source import find_statements


def _proposal(tmp_path: Path, source: str, name: str, marker: str, cause: str = "retained_graph"):
    path = tmp_path / "s.py"
    text = textwrap.dedent(source)
    path.write_text(text, encoding="utf-8")
    line = next(i for i, code in enumerate(text.splitlines(), 1) if marker in code)
    (stmt,) = [s for s in find_statements(name, [str(path)]) if s.line == line]
    return propose_edit(cause, name, stmt, holds=("0-dim tensor",))


@pytest.mark.parametrize("backward", [
    "losses[-1].backward(retain_graph=True)",  # the kept value itself, read back
    "sum(losses).backward()",  # a sum of what is kept
    "torch.stack(losses).mean().backward()",
    "torch.autograd.backward(losses[-1])",
    "torch.autograd.grad(outputs=losses[-1], inputs=[w])",
    "last = losses[-1]\n    total = 2 * last\n    total.backward()",  # through local names
])
def test_detach_of_a_value_backpropagated_from_the_culprit_is_refused(tmp_path, backward):
    proposal = _proposal(tmp_path, f"""
    import torch
    w = torch.ones(3, requires_grad=True)
    losses = []
    for i in range(4):
        losses.append((w * i).sum())
        {backward}
    """, "losses", "losses.append(")
    assert proposal.edit is None
    assert "backpropagates through what `losses` keeps" in proposal.refusal


def test_attribute_culprit_backpropagated_in_another_method_is_refused(tmp_path):
    proposal = _proposal(tmp_path, """
    import torch
    class Trainer:
        def __init__(self):
            self.w = torch.ones(3, requires_grad=True)
            self.history = []
        def forward(self, i):
            self.history.append((self.w * i).sum())
        def update(self):
            self.history[-1].backward(retain_graph=True)
    """, "self.history", "self.history.append(")
    assert proposal.edit is None and "line 10" in proposal.refusal


def test_backward_from_the_stored_tensors_own_name_keeps_the_edit(tmp_path):
    # healthy twin: the same tensor is a backward root, but not read back from the list
    proposal = _proposal(tmp_path, """
    import torch
    w = torch.ones(3, requires_grad=True)
    losses = []
    for i in range(4):
        loss = (w * i).sum()
        losses.append(loss)
        loss.backward()
        print(losses[-1], len(losses))
    """, "losses", "losses.append(")
    assert [e.statement for e in proposal.edits] == ["losses.append(loss.item())",
                                                     "losses.append(loss.detach())"]


def test_near_misses_keep_the_edit(tmp_path):
    # another list's backward, a name bound from a number read off the culprit, and a
    # local of the same name in another function
    proposal = _proposal(tmp_path, """
    import torch
    w = torch.ones(3, requires_grad=True)

    def report():
        losses = [w.sum()]
        losses[-1].backward()

    def train():
        losses, others = [], []
        for i in range(4):
            n = len(losses)
            scale = float(losses[-1]) if len(losses) else 1.0
            others.append((w * (i + n) * scale).sum())
            losses.append((w * i).sum())
            others[-1].backward()
    """, "losses", "losses.append(")
    assert [e.statement for e in proposal.edits] == ["losses.append((w * i).sum().item())",
                                                     "losses.append((w * i).sum().detach())"]


def test_a_global_is_looked_up_in_every_function_a_local_only_in_its_own(tmp_path):
    path = tmp_path / "g.py"
    source = ("import torch\nkept = []\n\ndef step(x):\n    kept.append(x * 2)\n\n"
              "def update():\n    torch.autograd.grad(kept[0], [])\n")
    path.write_text(source, encoding="utf-8")
    (stmt,) = [s for s in find_statements("kept", [str(path)]) if s.kind == "add"]
    assert stmt.function == "step"  # a global appended to inside a function
    assert differentiating_call(stmt, "kept") == (8, "torch.autograd.grad(kept[0], [])")
    # near miss: `kept` is a local of `step`; `update` differentiates another `kept`
    path.write_text(source.replace("    kept.append", "    kept = []\n    kept.append"),
                    encoding="utf-8")
    (stmt,) = [s for s in find_statements("kept", [str(path)]) if s.kind == "add"]
    assert differentiating_call(stmt, "kept") is None


def test_doctor_offers_no_edit_that_would_break_a_retained_backward(doctor):
    # a list of summed losses, each backpropagated from the list with retain_graph=True
    source = """
    import torch
    torch.manual_seed(0)
    w = torch.randn(64, 64, requires_grad=True)
    opt = torch.optim.Adam([w])
    losses = []
    for it in range(60):
        opt.zero_grad()
        parts = [(w @ torch.randn(64, 16)).pow(2).mean(), 1e-4 * w.norm() ** 2]
        losses.append(parts[0] + parts[1])
        losses[-1].backward(retain_graph=True)
        opt.step()
    print("done")
    """
    capture, done = doctor.run(source, "--verify", compare_stdout=True)
    (finding,) = [f for f in capture["findings"]
                  if (f.get("culprit") or {}).get("name") == "losses"]
    assert finding["culprit"]["line"] == doctor.line(source, "losses.append(")
    assert finding["edit"] is None and finding["fix_kind"] == "advice"
    assert "backpropagates through what `losses` keeps" in finding["fix"]
    assert finding["verification"] is None  # nothing proposed, nothing re-run or withdrawn
    assert "fix withdrawn" not in done.stderr


@pytest.mark.parametrize("use, item", [
    ("return sum(kept).item()", False),  # a tensor method on what is read back: no .item()
    ("return kept[-1].cpu()", False),
    ("total = sum(kept)\n        return total.mean()", False),
    ("return sum(x.item() for x in kept)", False),  # through a comprehension's own name
    ("return sum(float(x) for x in kept)", True),  # twin: works on numbers too
    ("kept.clear()\n        return len(kept)", True),  # near miss: the list's own methods
])
def test_item_is_not_proposed_when_later_code_calls_tensor_methods_on_what_is_kept(
        tmp_path, use, item):
    path = tmp_path / "k.py"
    path.write_text(textwrap.dedent(f"""
    import torch
    def epoch(w):
        kept = []
        for i in range(4):
            loss = (w * i).sum()
            loss.backward()
            kept.append(loss)
        {use}
    """), encoding="utf-8")
    (stmt,) = [s for s in find_statements("kept", [str(path)]) if s.kind == "add"]
    statements = [e.statement for e in propose_edit("retained_graph", "kept", stmt,
                                                    holds=("0-dim tensor",)).edits]
    expected = (["kept.append(loss.item())"] if item else []) + ["kept.append(loss.detach())"]
    assert statements == expected
    assert (tensor_method_call(stmt, "kept") is None) == item


def test_a_comprehension_variable_does_not_carry_the_culprit_outside_it(tmp_path):
    # `[l[0] for losses in kept]` binds its own `losses`: the loop's `losses` (a fresh
    # loss, backpropagated) is another variable
    proposal = _proposal(tmp_path, """
    import torch
    w = torch.ones(3, requires_grad=True)
    kept = []
    for i in range(4):
        losses = (w * i).sum()
        losses.backward()
        kept.append(losses)
    print([float(losses) for losses in kept])
    """, "kept", "kept.append(")
    assert [e.statement for e in proposal.edits] == ["kept.append(losses.item())",
                                                     "kept.append(losses.detach())"]

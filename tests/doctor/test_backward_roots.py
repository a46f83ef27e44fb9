"""``backward_flags_graph`` only for what a retained backward started from: a kept tensor
that no ``backward(retain_graph=True)`` started from (a report loss computed after the
retained backwards) holds its graph because it is kept, and is ``retained_graph``.
Real torch, the real command line on real scripts."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

from torchmem.doctor.backward_roots import BackwardRoots

# three heads share a trunk: each head's loss needs retain_graph=True (they backpropagate
# through the same trunk graph); a report loss over all heads, never backpropagated, is
# kept with its graph every step
REPORT = """
import torch
from torch import nn

torch.manual_seed(0)
trunk = nn.Sequential(nn.Linear(16, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh())
heads = nn.ModuleList([nn.Linear(256, 4) for _ in range(3)])
opt = torch.optim.SGD(list(trunk.parameters()) + list(heads.parameters()), lr=0.01)
reports = []
for step in range(60):
    x = torch.randn(64, 16)
    y = torch.randint(0, 4, (64,))
    h = trunk(x)
    outs = [head(h) for head in heads]
    losses = [nn.functional.cross_entropy(o, y) for o in outs]
    opt.zero_grad()
    for loss in losses:
        loss.backward(retain_graph=True)
    opt.step()
    report = nn.functional.cross_entropy(torch.stack(outs).mean(0), y)
    reports.append(report)
print(round(float(torch.stack(reports).mean()), 4))
"""

# the same, keeping the tensor the first retained backward started from
ROOTS = REPORT.replace("reports.append(report)", "reports.append(losses[0])")


def test_roots_are_recorded_weakly_and_forgotten_when_they_die():
    roots = BackwardRoots()
    w = torch.randn(4, requires_grad=True)
    loss = (w * 2).sum()
    other = (w * 3).sum()
    roots.record(loss)
    roots.record([other, "not a tensor"])
    roots.record(None)
    assert roots.is_root(loss) and roots.is_root(other) and not roots.is_root(w)
    ref = weakref.ref(loss)
    samples = {"kept": [ref], "params": [weakref.ref(w)]}
    assert roots.count(samples) == {"kept": 1}
    del loss, samples
    gc.collect()
    assert ref() is None  # kept nothing alive
    assert len(roots) == 1  # the dead root's entry is gone


@pytest.mark.slow
def test_kept_report_loss_after_retained_backwards_is_retained_graph(doctor):
    data, done = doctor.run(REPORT, compare_stdout=True)
    causes = [f["cause"] for f in data["findings"]]
    assert "backward_flags_graph" not in causes, done.stderr
    f = next(f for f in data["findings"] if f["cause"] == "retained_graph")
    assert f["culprit"]["name"] == "reports"
    assert f["culprit"]["line"] == doctor.line(REPORT, "reports.append(report)")


@pytest.mark.slow
def test_kept_root_of_a_retained_backward_is_backward_flags_graph(doctor):
    data, done = doctor.run(ROOTS, compare_stdout=True)
    f = data["findings"][0]
    assert f["cause"] == "backward_flags_graph", done.stderr
    assert f["culprit"]["name"] == "reports"

"""Memory held where no variable grows, and consumed graphs that are not leaks.

Real scripts through the real command line (``python -m torchmem doctor --json``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

LEAF_CYCLE = """
import torch

def penalty(w):
    z = torch.randn(512, requires_grad=True)
    out = (z * w).tanh().sum()
    out.backward(create_graph=True)
    return z.grad.pow(2).sum().item()

w = torch.randn(512)
for i in range(150):
    p = penalty(w)
print("done")
"""

PARAM_GRAD_CHAIN = """
import torch

torch.manual_seed(0)
net = torch.nn.Linear(256, 1)
for i in range(80):
    x = torch.randn(16, 256)
    loss = net(x).pow(2).mean()
    loss.backward(create_graph=True)
print("done")
"""

JIT_TRACE_LOOP = """
import torch

torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(16, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                          torch.nn.ReLU(), torch.nn.Linear(256, 4))
example = torch.randn(1, 16)
for i in range(30):
    traced = torch.jit.trace(net, example)
print("done")
"""

SPARSE_CSR = """
import torch

class Propagate(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        dense = torch.rand(n, n) * (torch.rand(n, n) < 0.5)
        self.adjacency = torch.nn.Parameter(dense.to_sparse_csr())
        self.readout = torch.nn.Parameter(torch.rand(1, n))

    def forward(self, h):
        h = torch.sparse.mm(self.adjacency, torch.sparse.mm(self.adjacency, h))
        return torch.sparse.mm(self.readout, h)

torch.manual_seed(0)
model = Propagate(128)
for i in range(60):
    model.zero_grad()
    score = model(torch.randn(128, 1)).sum()
    score.backward()
print("done")
"""

EPISODES = """
import torch

torch.manual_seed(0)
policy = torch.nn.Sequential(torch.nn.Linear(4, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))
optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
saved_log_probs = []
for episode in range(40):
    for t in range(5 + episode):  # episodes get longer as the policy learns
        probs = torch.softmax(policy(torch.randn(4)), dim=-1)
        action = torch.multinomial(probs, 1)
        saved_log_probs.append(torch.log(probs[action]))
    loss = -torch.cat(saved_log_probs).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    del saved_log_probs[:]
print("done")
"""

REBOUND = """
import torch

torch.manual_seed(0)
gen = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16))
critic = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
opt_g = torch.optim.Adam(gen.parameters(), lr=1e-4)
opt_c = torch.optim.Adam(critic.parameters(), lr=1e-4)
for iteration in range(12):
    for p in critic.parameters():
        p.requires_grad = True
    for k in range(5):
        fake = gen(torch.randn(16, 8)).detach()
        c_fake = critic(fake).mean()
        opt_c.zero_grad()
        c_fake.backward()
        opt_c.step()
    for p in critic.parameters():
        p.requires_grad = False
    fake = gen(torch.randn(16, 8))
    G = critic(fake)
    G = G.mean()
    opt_g.zero_grad()
    G.backward()
    G_cost = -G
    opt_g.step()
print("done")
"""


def _doctor(tmp_path: Path, source: str, name: str = "script.py") -> tuple[dict, str]:
    script = tmp_path / name
    script.write_text(textwrap.dedent(source), encoding="utf-8")
    out = tmp_path / "capture.json"
    proc = subprocess.run([sys.executable, "-m", "torchmem", "doctor", "--interval", "0",
                           "--json", str(out), str(script)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "done\n"  # the script's own output, untouched
    return json.loads(out.read_text()), source


def _line(source: str, text: str) -> int:
    lines = textwrap.dedent(source).splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def test_leaf_kept_by_its_own_grad_is_named_with_the_backward_line(tmp_path):
    data, src = _doctor(tmp_path, LEAF_CYCLE)
    (finding,) = data["findings"]
    assert finding["cause"] == "backward_flags_graph"
    assert finding["culprit"]["name"] == "z.grad"
    assert finding["culprit"]["line"] == _line(src, "out.backward(create_graph=True)")
    assert "torch.autograd.grad(out, z, create_graph=True)" in finding["fix"]
    assert "z.grad = None" in finding["fix"]
    assert finding["data"]["grad_cycles"] >= 10


def test_parameter_grad_chained_by_create_graph(tmp_path):
    data, src = _doctor(tmp_path, PARAM_GRAD_CHAIN)
    names = [f["culprit"]["name"] for f in data["findings"]]
    assert names[0] == "net.weight.grad", names
    finding = data["findings"][0]
    assert finding["cause"] == "backward_flags_graph"
    assert finding["culprit"]["line"] == _line(src, "loss.backward(create_graph=True)")
    assert "net.weight.grad = None" in finding["fix"]
    assert any("`net.bias.grad`" in e for e in finding["evidence"])  # one finding, not two


def test_jit_trace_each_step_is_memory_no_variable_holds(tmp_path):
    data, src = _doctor(tmp_path, JIT_TRACE_LOOP)
    (finding,) = data["findings"]
    assert finding["cause"] == "untracked_growth"
    assert finding["culprit"]["name"] == "torch.jit.trace"
    assert finding["culprit"]["line"] == _line(src, "traced = torch.jit.trace(net, example)")
    assert any("live tensor storage stays flat" in e for e in finding["evidence"])
    assert finding["data"]["tensor_bytes_per_step"] < 0.1 * finding["data"]["heap_bytes_per_step"]


def test_sparse_gradient_lost_inside_torch_names_the_parameter(tmp_path):
    data, src = _doctor(tmp_path, SPARSE_CSR)
    (finding,) = data["findings"]
    assert finding["cause"] == "untracked_growth"
    assert finding["culprit"]["name"] == "model.adjacency"
    assert finding["culprit"]["line"] == _line(src, "score.backward()")
    assert finding["confidence"] == "low"


@pytest.mark.parametrize("source", [EPISODES, REBOUND], ids=["episode_list", "rebound_variable"])
def test_consumed_or_rebound_graphs_are_quiet(tmp_path, source):
    data, _ = _doctor(tmp_path, source)
    assert data["findings"] == []


HELD_LEAF_CYCLE = """
import torch


class Hyper:
    def __init__(self):
        self.params = {"lr": torch.tensor(0.01, requires_grad=True)}


def fit(xs):
    hyper = Hyper()
    w = torch.zeros(64)
    for x in xs:
        w = w.detach().requires_grad_()
        loss = ((w * x).sum() * hyper.params["lr"]) ** 2
        loss.backward(create_graph=True)
        g, w.grad = w.grad, None
        w = w - g.detach()


xs = [torch.randn(64) for _ in range(6)]
for run in range(10):
    fit(xs)
print("done")
"""


def test_leaf_held_below_a_local_is_named_by_its_path_and_grad(tmp_path):
    # the leaf is `hyper.params['lr']`, not a local of the frame that calls backward(): it
    # is named from the analysis snapshots, as its `.grad` (what a user would clear)
    data, src = _doctor(tmp_path, HELD_LEAF_CYCLE)
    finding = next(f for f in data["findings"] if f["cause"] == "backward_flags_graph")
    assert finding["culprit"]["name"] == "hyper.params['lr'].grad"
    assert finding["culprit"]["line"] == _line(src, "loss.backward(create_graph=True)")
    assert "hyper.params['lr'].grad = None" in finding["fix"]

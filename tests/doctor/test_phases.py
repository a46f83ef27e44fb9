"""Repeating units beyond the optimizer, evaluation passes and sawtooth growth, through the
real command line (``python -m torchmem doctor`` in a subprocess) on real scripts."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow

EVAL_SUM = """
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)

def validate(batches):
    model.eval()
    val_loss = 0.0
    for x, y in batches:
        out = model(x)
        loss = (out - y).pow(2).mean()
        val_loss += loss
    return val_loss / len(batches)

train = [(torch.randn(64, 32), torch.randn(64, 1)) for _ in range(6)]
val = [(torch.randn(64, 32), torch.randn(64, 1)) for _ in range(8)]
for epoch in range(3):
    model.train()
    for x, y in train:
        opt.zero_grad()
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        opt.step()
    score = validate(val)
    print(epoch, round(float(score), 3))
"""

EVAL_HEALTHY = """
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
train = [(torch.randn(64, 32), torch.randn(64, 1)) for _ in range(6)]
val = [(torch.randn(64, 32), torch.randn(64, 1)) for _ in range(8)]
for epoch in range(3):
    model.train()
    for x, y in train:
        opt.zero_grad()
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        opt.step()
    model.eval()
    total = 0.0
    for x, y in val:                      # grad enabled, but only numbers are kept
        total += (model(x) - y).pow(2).mean().item()
    preds = []
    with torch.no_grad():                 # predictions collected on purpose
        for x, _ in val:
            preds.append(model(x))
    print(epoch, round(total, 3), len(preds))
"""

LOOP_ONLY = """
import torch
kept = []
for i in range(40):
    kept.append(torch.empty(32 * 1024))
    print(i)
"""

SAWTOOTH = """
import torch
torch.manual_seed(0)
model = torch.nn.Linear(64, 64)
opt = torch.optim.SGD(model.parameters(), lr=0.01)

def run_epoch():
    running = torch.tensor(0.0)
    for _ in range(12):
        opt.zero_grad()
        loss = model(torch.randn(32, 64)).pow(2).mean()
        loss.backward()
        opt.step()
        running += loss
    return running

for epoch in range(4):
    running = run_epoch()
    print(epoch, round(float(running), 3))
"""

REINFORCE = """
import torch
torch.manual_seed(0)
policy = torch.nn.Sequential(torch.nn.Linear(4, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))
opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
for episode in range(30):
    log_probs, rewards = [], []
    state = torch.randn(4)
    for t in range(20):
        dist = torch.distributions.Categorical(logits=policy(state))
        action = dist.sample()
        log_probs.append(dist.log_prob(action))
        rewards.append(float(action))
        state = torch.randn(4)
    returns = torch.tensor(rewards)
    loss = -(torch.stack(log_probs) * (returns - returns.mean())).sum()
    opt.zero_grad(); loss.backward(); opt.step()
print("done")
"""


def test_validation_summing_losses_without_no_grad_is_an_eval_graph(doctor):
    data, done = doctor.run(EVAL_SUM, "--interval", "0")
    assert done.stdout.count("\n") == 3  # the script's own output, untouched
    found = [f for f in data["findings"] if f["cause"] == "eval_graph"]
    assert found, done.stderr
    culprit = found[0]["culprit"]
    assert culprit["name"] == "val_loss"
    assert culprit["line"] == doctor.line(EVAL_SUM, "val_loss += loss")
    kinds = {p["kind"]: p for p in data["phases"]}
    assert kinds["train"]["steps"] == 18 and kinds["train"]["passes"] == 4
    assert kinds["eval-grad"]["passes"] == 3 and kinds["eval-grad"]["steps"] == 24
    assert "per top-level module call in evaluation" in done.stderr
    assert "evaluation passes (grad enabled): 3 passes" in done.stderr


def test_healthy_evaluation_stays_quiet(doctor):
    data, done = doctor.run(EVAL_HEALTHY, "--interval", "0")
    assert data["findings"] == [], done.stderr
    kinds = {p["kind"] for p in data["phases"]}
    assert {"train", "eval-grad"} <= kinds


def test_a_loop_without_optimizer_backward_or_model_has_steps(doctor):
    data, done = doctor.run(LOOP_ONLY, "--interval", "0")
    assert done.stdout.splitlines()[-1] == "39"
    assert data["step_source"] == "loop"
    assert len(data["steps"]) >= 30
    (finding,) = data["findings"]
    assert finding["cause"] == "growing_container"
    assert finding["culprit"]["name"] == "kept"
    assert finding["culprit"]["line"] == doctor.line(LOOP_ONLY, "kept.append")


def test_sawtooth_accumulator_reset_each_epoch_names_its_statement(doctor):
    data, done = doctor.run(SAWTOOTH, "--interval", "0")
    (finding,) = data["findings"]
    assert finding["cause"] == "retained_graph", done.stderr
    assert finding["culprit"]["name"].startswith("running")
    assert finding["culprit"]["line"] == doctor.line(SAWTOOTH, "running += loss")


def test_reinforce_episode_loop_stays_quiet(doctor):
    data, done = doctor.run(REINFORCE, "--interval", "0")
    assert data["findings"] == [], done.stderr
    assert data["step_source"] == "optimizer"


LOOP_IN_FUNCTION = """
import torch

def collect(n):
    acc = []
    total = 0
    for i in range(n):
        acc.append(torch.ones(1000) * i)
        total += i
    return total, len(acc)

print(collect(20))
"""


def test_loop_steps_inside_a_function_keep_its_variables(doctor):
    # the analysis at a loop step reads the frame's locals from inside a trace function;
    # on Python < 3.13 CPython writes that frame's f_locals back afterwards
    data, done = doctor.run(LOOP_IN_FUNCTION, "--interval", "0")
    assert done.stdout == "(190, 20)\n"
    assert data["step_source"] == "loop"


LOOP_IN_FORWARD = """
import torch


class Hops(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(16, 16) * 0.1)

    def forward(self, x):
        for _ in range(3):
            x = torch.tanh(x @ self.w)
        return x.sum()


model = Hops()
for step in range(30):
    model.zero_grad()
    model(torch.randn(4, 16)).backward()
"""


def test_a_loop_inside_the_forward_does_not_outrank_backward(doctor):
    # The loop in forward() runs tensor work before the first forward returns; once it was
    # taken as the unit, the forward hooks were removed and backward() could not take over
    # (two loop steps per iteration, every per-step figure halved).
    capture, _ = doctor.run(LOOP_IN_FORWARD, "--interval", "0")
    assert capture["step_source"] == "backward"
    assert len(capture["steps"]) == 30

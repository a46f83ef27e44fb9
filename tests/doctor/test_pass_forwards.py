"""Evaluation passes that ``model.eval()`` does not announce, found by their top-level
forwards, through the real command line (``python -m torchmem doctor``) on real scripts:
leaky validation loops are found with their variable and line, and the shapes of training
that also run many forwards per backward stay quiet."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

from torchmem.doctor.pass_forwards import KEEP_FIRST, KEEP_LAST, Consumption, ForwardCount

VALIDATE_IN_FUNCTION = """
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
criterion = torch.nn.MSELoss()
opt = torch.optim.SGD(model.parameters(), lr=0.01)

def validate(batches):
    val_loss = 0.0
    for x, y in batches:
        out = model(x)
        loss = criterion(out, y)
        val_loss += loss
    return val_loss / len(batches)

train = [(torch.randn(64, 32), torch.randn(64, 1)) for _ in range(6)]
val = [(torch.randn(64, 32), torch.randn(64, 1)) for _ in range(8)]
for epoch in range(3):
    for x, y in train:
        opt.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        opt.step()
    score = validate(val)
    print(epoch, round(float(score), 3))
"""

# model.train() at each epoch's start ends the pass before the next step's forwards
VALIDATE_THEN_TRAIN_MODE = VALIDATE_IN_FUNCTION.replace(
    "for epoch in range(3):\n", "for epoch in range(3):\n    model.train()\n")

TEST_LOOP_AT_MODULE_LEVEL = """
import torch
import torch.nn.functional as F
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
train = [(torch.randn(32, 32), torch.randint(0, 10, (32,))) for _ in range(5)]
test = [(torch.randn(32, 32), torch.randint(0, 10, (32,))) for _ in range(12)]
for epoch in range(3):
    for x, y in train:
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    test_loss = 0
    correct = 0
    for x, y in test:
        logits = model(x)
        test_loss = test_loss + F.cross_entropy(logits, y)
        correct += (logits.argmax(1) == y).sum().item()
    print(epoch, round(float(test_loss) / len(test), 3), correct)
"""

FINAL_TEST_ONLY = """
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
crit = torch.nn.MSELoss()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(20):
    x, y = torch.randn(32, 32), torch.randn(32, 1)
    opt.zero_grad()
    crit(model(x), y).backward()
    opt.step()
total = 0
for i in range(30):                       # the final test, with grad still on
    x, y = torch.randn(32, 32), torch.randn(32, 1)
    total = total + crit(model(x), y)
print(round(float(total) / 30, 3))
"""

STREAM_STATE = """
import torch
torch.manual_seed(0)
rnn = torch.nn.GRU(16, 64, batch_first=True)
head = torch.nn.Linear(64, 1)
opt = torch.optim.Adam(list(rnn.parameters()) + list(head.parameters()), lr=1e-3)
for epoch in range(3):
    for i in range(6):
        x, y = torch.randn(8, 10, 16), torch.randn(8, 1)
        out, _ = rnn(x)
        loss = (head(out[:, -1]) - y).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
    hidden = torch.zeros(1, 8, 64)
    for i in range(12):                   # a stream evaluated chunk by chunk
        out, hidden = rnn(torch.randn(8, 10, 16), hidden)
        pred = head(out[:, -1])
    print(epoch, round(float(pred.mean()), 3))
"""

HEALTHY_EVALUATION = """
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1))
crit = torch.nn.MSELoss()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
train = [(torch.randn(16, 32), torch.randn(16, 1)) for _ in range(8)]
val = [(torch.randn(16, 32), torch.randn(16, 1)) for _ in range(10)]
for epoch in range(3):
    for x, y in train:
        opt.zero_grad(); loss = crit(model(x), y); loss.backward(); opt.step()
    with torch.no_grad():
        val_loss = sum(crit(model(x), y) for x, y in val) / len(val)
        preds = [model(x) for x, _ in val]   # predictions collected on purpose
    print(epoch, round(float(val_loss), 3), len(preds))
"""

ACCUMULATED_LOSS = """
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = [(torch.randn(16, 32), torch.randn(16, 1)) for _ in range(48)]
accum = 4
for epoch in range(2):
    total = 0.0
    for i, (x, y) in enumerate(data):
        total = total + (model(x) - y).pow(2).mean() / accum   # summed on purpose
        if (i + 1) % accum == 0:
            opt.zero_grad()
            total.backward()
            opt.step()
            total = 0.0
print("done")
"""

POLICY_GRADIENT = """
import torch
torch.manual_seed(0)
policy = torch.nn.Sequential(torch.nn.Linear(4, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))
opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
for episode in range(30):
    total_logp = 0.0
    rewards = []
    state = torch.randn(4)
    for t in range(60 if episode % 10 == 5 else 4):   # a long episode now and then
        dist = torch.distributions.Categorical(logits=policy(state))
        action = dist.sample()
        total_logp = total_logp + dist.log_prob(action)
        rewards.append(float(action))
        state = torch.randn(4)
    loss = -total_logp * (sum(rewards) / len(rewards) - 0.5)
    opt.zero_grad(); loss.backward(); opt.step()
print("done")
"""

GAN = """
import torch
torch.manual_seed(0)
G = torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16))
D = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
bce = torch.nn.BCEWithLogitsLoss()
opt_g = torch.optim.Adam(G.parameters(), lr=1e-3)
opt_d = torch.optim.Adam(D.parameters(), lr=1e-3)
fixed = torch.randn(32, 8)
for it in range(40):
    real = torch.randn(32, 16)
    fake = G(torch.randn(32, 8))
    d_loss = bce(D(real), torch.ones(32, 1)) + bce(D(fake.detach()), torch.zeros(32, 1))
    opt_d.zero_grad(); d_loss.backward(); opt_d.step()
    g_loss = bce(D(fake), torch.ones(32, 1))
    opt_g.zero_grad(); g_loss.backward(); opt_g.step()
    if it % 10 == 9:
        with torch.no_grad():
            samples = [G(fixed) for _ in range(8)]
print("done")
"""

SIAMESE = """
import torch
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16))
opt = torch.optim.SGD(net.parameters(), lr=0.01)
for step in range(40):
    a, b = torch.randn(16, 32), torch.randn(16, 32)
    same = torch.randint(0, 2, (16,)).float()
    dist = (net(a) - net(b)).pow(2).sum(1)
    loss = (same * dist + (1 - same) * torch.relu(1 - dist)).mean()
    opt.zero_grad(); loss.backward(); opt.step()
print("done")
"""

INFERENCE_ONLY = """
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
preds = []
with torch.no_grad():
    for i in range(40):
        preds.append(model(torch.randn(8, 32)).argmax(1))
print(len(preds))
"""


def _phases(data: dict) -> dict[str, tuple[int, int]]:
    return {p["kind"]: (p["passes"], p["steps"]) for p in data["phases"]}


@pytest.mark.slow
@pytest.mark.parametrize("source, cause, name, statement, passes, forwards", [
    # 8 batches of model + criterion per pass; the next epoch's first forwards, which its
    # backward goes through, are not counted in the pass
    (VALIDATE_IN_FUNCTION, "eval_graph", "val_loss", "val_loss += loss", 3, 48),
    (VALIDATE_THEN_TRAIN_MODE, "eval_graph", "val_loss", "val_loss += loss", 3, 48),
    (TEST_LOOP_AT_MODULE_LEVEL, "eval_graph", "test_loss",
     "test_loss = test_loss + F.cross_entropy", 3, 36),
    (FINAL_TEST_ONLY, "eval_graph", "total", "total = total + crit", 1, 60),
    (STREAM_STATE, "hidden_state_chain", "hidden", "out, hidden = rnn(", 3, 72),
], ids=["validate-function", "validate-then-train-mode", "test-loop-module-level", "final-test", "stream-state"])
def test_an_evaluation_loop_without_eval_that_keeps_graphs_is_found(
        doctor, source, cause, name, statement, passes, forwards):
    data, done = doctor.run(source, "--interval", "0", "--no-verify")
    found = [f for f in data["findings"] if f["cause"] == cause]
    assert found, done.stderr
    culprit = found[0]["culprit"]
    assert (culprit["name"], culprit["line"]) == (name, doctor.line(source, statement))
    assert any("no backward went through" in e for e in found[0]["evidence"])
    assert found[0]["data"]["phase"] == "eval-grad"
    assert _phases(data)["eval-grad"] == (passes, forwards)
    assert "evaluation passes (grad enabled)" in done.stderr


@pytest.mark.slow
def test_evaluation_under_no_grad_is_a_quiet_pass_of_its_own(doctor):
    data, done = doctor.run(HEALTHY_EVALUATION, "--interval", "0", "--no-verify")
    assert data["findings"] == [], done.stderr
    # 10 batches of model + criterion, then 10 predictions: 30 forwards per pass
    assert _phases(data) == {"train": (4, 24), "eval-no-grad": (3, 90)}


@pytest.mark.slow
@pytest.mark.parametrize("source, steps", [
    (ACCUMULATED_LOSS, 24), (POLICY_GRADIENT, 30), (GAN, 80), (SIAMESE, 40),
], ids=["accumulated-loss", "policy-gradient", "gan", "siamese"])
def test_many_forwards_per_backward_are_training_steps_not_passes(doctor, source, steps):
    data, done = doctor.run(source, "--interval", "0", "--no-verify")
    assert data["findings"] == [], done.stderr
    assert data["step_source"] == "optimizer"
    # the GAN's samples (8 forwards of G) are fewer than two steps' worth (5 + 2)
    assert _phases(data) == {"train": (1, steps)}


@pytest.mark.slow
def test_an_inference_script_has_no_passes(doctor):
    data, done = doctor.run(INFERENCE_ONLY, "--interval", "0", "--no-verify")
    assert data["findings"] == [], done.stderr
    assert _phases(data) == {"inference": (1, 40)}


def test_a_run_of_forwards_is_a_candidate_past_twice_the_most_a_step_had():
    count = ForwardCount()
    count.since = 50
    assert not count.exceeded()  # no step measured yet
    count.boundary(counted=False)  # the forwards of a pass are no step's
    assert count.usual is None
    for forwards in (2, 3, 2):
        count.since = forwards
        count.boundary()
    assert count.usual == 3
    count.since = 6
    assert not count.exceeded()
    count.since = 7
    assert count.exceeded()


def test_the_forwards_a_backward_went_through_are_told_apart():
    w = torch.randn(4, 4, requires_grad=True)
    consumption = Consumption()
    outputs = []
    for counter in range(1, 6):
        grad = counter != 2
        with torch.set_grad_enabled(grad):
            out = torch.randn(2, 4) @ w
        consumption.watch(counter, grad, {"logits": out} if counter == 3 else out)
        outputs.append(out)
    assert consumption.first_reached() is None
    (outputs[3] + outputs[4]).sum().backward()  # forwards 4 and 5: the next step's
    assert consumption.first_reached() == 4
    assert consumption.grad_forwards_from(3) == 3 and consumption.grad_forwards_from(4) == 2
    entries = list(consumption.entries)
    consumption.release()
    outputs[0].sum().backward()  # the hooks are gone: nothing is marked any more
    assert consumption.entries == [] and [e[2] for e in entries] == [False] * 3 + [True] * 2


def test_a_long_candidate_keeps_hooks_on_its_first_and_latest_forwards_only():
    w = torch.randn(4, 4, requires_grad=True)
    consumption = Consumption()
    outputs = [torch.randn(1, 4) @ w for _ in range(KEEP_FIRST + KEEP_LAST + 10)]
    for counter, out in enumerate(outputs, 1):
        consumption.watch(counter, True, out)
        if counter == KEEP_FIRST + 1:
            dropped = consumption.entries[-1]
    kept = [e[0] for e in consumption.entries]
    assert kept == [*range(1, KEEP_FIRST + 1), *range(KEEP_FIRST + 11, len(outputs) + 1)]
    torch.stack(outputs).sum().backward()
    assert consumption.first_reached() == 1 and all(e[2] for e in consumption.entries)
    assert dropped[2] is False  # its hook was removed when it left the window
    consumption.release()


_CHECKSUM = """
import hashlib
_flat = torch.cat([p.detach().flatten() for m in ({models}) for p in m.parameters()])
print("parameters", hashlib.sha256(" ".join(float.hex(v) for v in _flat.tolist()).encode()).hexdigest())
"""


@pytest.mark.parametrize("source, models, seen", [
    # a pass found by its forwards, hooks on its outputs
    (VALIDATE_IN_FUNCTION, "model,", "evaluation passes (grad enabled): 3 passes"),
    # candidates that a backward then goes through (no pass)
    (POLICY_GRADIENT, "policy,", "exit code 0"),
], ids=["validation-pass", "policy-gradient"])
def test_the_pass_watch_leaves_training_bit_identical(tmp_path, source, models, seen):
    """Differential: the counting ``__call__`` and the hooks on the candidates' outputs
    change nothing the script computes (parameters compared bit for bit after training)."""
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(source) + _CHECKSUM.format(models=models),
                      encoding="utf-8")
    runs = {}
    for name, prefix in (("plain", []), ("doctor", ["-m", "torchmem", "doctor", "--interval",
                                                      "0", "--no-verify"])):
        done = subprocess.run([sys.executable, *prefix, str(script)], capture_output=True,
                              text=True, timeout=600, check=False, cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        runs[name] = done
    assert "parameters" in runs["plain"].stdout
    assert runs["doctor"].stdout == runs["plain"].stdout
    assert seen in runs["doctor"].stderr  # the doctor did watch (the comparison covers it)

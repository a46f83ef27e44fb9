"""The doctor never changes what the script computes.

A training loop with dropout, a shuffling DataLoader, fresh random tensors every step and a
retained graph (so the doctor's deep analysis runs: object walks, graph walks, a private
``gc.collect``) prints each loss with ``float.hex``. Its stdout must be byte-identical when
run as ``python script.py``, under ``torchmem doctor`` and under ``torchmem doctor --json``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

SCRIPT = '''\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(1234)
data = TensorDataset(torch.randn(768, 64), torch.randint(0, 5, (768,)))
loader = DataLoader(data, batch_size=32, shuffle=True)
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Dropout(0.3), nn.Linear(256, 5))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
history = []
for epoch in range(2):
    for x, y in loader:
        noise = torch.randn_like(x) * 0.01
        loss = nn.functional.cross_entropy(model(x + noise), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        history.append(loss)
        print(float(loss).hex(), torch.rand(1).item().hex())
print("params", float(sum(p.double().sum() for p in model.parameters())).hex())
'''


@pytest.mark.slow
def test_losses_are_bit_identical_with_and_without_the_doctor(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT, encoding="utf-8")
    commands = {
        "plain": [sys.executable, "train.py"],
        "doctor": [sys.executable, "-m", "torchmem", "doctor", "train.py"],
        "json": [sys.executable, "-m", "torchmem", "doctor", "--json", "c.json", "train.py"],
    }

    def run(item):
        name, cmd = item
        return name, subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True,
                                    timeout=600)

    with ThreadPoolExecutor(max_workers=2) as pool:
        procs = dict(pool.map(run, commands.items()))
    for name, proc in procs.items():
        assert proc.returncode == 0, (name, proc.stderr[-2000:])
    plain = procs["plain"].stdout
    assert len(plain.splitlines()) == 2 * 24 + 1
    assert procs["doctor"].stdout == plain
    assert procs["json"].stdout == plain
    # the doctor did analyse this run (so the comparison covers its deep analysis)
    assert "retained" in procs["doctor"].stderr
    assert (tmp_path / "c.json").is_file()


TRACED = '''\
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4)).eval()
traced = torch.jit.trace(model, torch.rand(1, 3, 16, 16))   # checks the trace by re-tracing
scripted = torch.jit.script(nn.Linear(4, 2))
for i in range(12):
    out = scripted(traced(torch.rand(2, 3, 16, 16)))
    print(out.sum().item().hex())
'''


@pytest.mark.slow
def test_torch_jit_trace_runs_unchanged_under_the_doctor(tmp_path):
    """``torch.jit.trace`` runs the forward twice and compares the recorded graphs; the
    doctor must not count those forwards as steps nor analyse the heap inside them (it did,
    and the trace failed its sanity check with ``TracingCheckError``)."""
    (tmp_path / "traced.py").write_text(TRACED, encoding="utf-8")
    plain = subprocess.run([sys.executable, "traced.py"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=300)
    doctor = subprocess.run([sys.executable, "-m", "torchmem", "doctor", "traced.py"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert plain.returncode == 0, plain.stderr[-2000:]
    assert doctor.returncode == 0, doctor.stderr[-3000:]
    assert doctor.stdout == plain.stdout
    assert "exit code 0" in doctor.stderr


LOOP_ONLY = '''\
import torch

torch.manual_seed(0)


def simulate(steps):
    state = torch.zeros(64)
    history = []
    for i in range(steps):
        noise = torch.randn(64)
        state = 0.9 * state + noise
        history.append(state.clone())
        total = sum(h.sum() for h in history[-4:])
        print(i, float(total).hex())
    return state


print("final", float(simulate(40).sum()).hex())
'''


@pytest.mark.slow
def test_a_loop_only_script_runs_unchanged_under_the_doctor(tmp_path):
    """No optimizer, backward or model: the doctor's steps are loop iterations, found by a
    trace function that stays installed the whole run and analyses the heap inside the
    traced frame. Its output must not change (and its locals must survive the analysis)."""
    (tmp_path / "loop.py").write_text(LOOP_ONLY, encoding="utf-8")
    plain = subprocess.run([sys.executable, "loop.py"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=300)
    doctor = subprocess.run([sys.executable, "-m", "torchmem", "doctor", "--json", "c.json",
                             "loop.py"], cwd=tmp_path, capture_output=True, text=True,
                            timeout=300)
    assert plain.returncode == 0, plain.stderr[-2000:]
    assert doctor.returncode == 0, doctor.stderr[-3000:]
    assert doctor.stdout == plain.stdout
    capture = json.loads((tmp_path / "c.json").read_text(encoding="utf-8"))
    assert capture["step_source"] == "loop" and len(capture["steps"]) >= 39


ACCUMULATING = '''\
import torch
import torch.nn as nn

torch.manual_seed(7)
model = nn.Sequential(nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for step in range(40):
    for micro in range(2):  # gradient accumulation: .grad is added to between steps
        x, y = torch.randn(16, 32), torch.randint(0, 3, (16,))
        (nn.functional.cross_entropy(model(x), y) / 2).backward()
    total = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=False)  # cleared in place: the .grad tensors stay
    with torch.no_grad():
        for p in model.parameters():
            p.data.mul_(0.999)  # an update through .data, outside the version counter
    print(total.item().hex(), float(sum(p.double().sum() for p in model.parameters())).hex())
'''


@pytest.mark.slow
def test_gradient_checks_leave_accumulated_gradients_bit_identical(tmp_path):
    """The doctor's gradient checks (a one-shot hook on parameters, sampled values, version
    counters) must not change a gradient, a clipped norm or an update."""
    (tmp_path / "train.py").write_text(ACCUMULATING, encoding="utf-8")
    plain = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=600)
    doctor = subprocess.run([sys.executable, "-m", "torchmem", "doctor", "--no-verify",
                             "train.py"], cwd=tmp_path, capture_output=True, text=True,
                            timeout=600)
    assert plain.returncode == 0 and doctor.returncode == 0, doctor.stderr[-2000:]
    assert len(plain.stdout.splitlines()) == 40
    assert doctor.stdout == plain.stdout
    assert "40 steps" in doctor.stderr


TWO_OPTIMIZERS = '''\
import torch
from torch import nn

torch.manual_seed(7)
gen = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 16))
critic = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
opt_gen = torch.optim.Adam(gen.parameters(), lr=1e-3)
opt_critic = torch.optim.SGD(critic.parameters(), lr=1e-2, momentum=0.9)
for step in range(40):
    real = torch.randn(16, 16)
    fake = gen(torch.randn(16, 8))
    critic.zero_grad()
    c_loss = critic(fake.detach()).mean() - critic(real).mean()
    c_loss.backward()
    opt_critic.step()
    opt_gen.zero_grad()
    g_loss = -critic(fake).mean()
    g_loss.backward()
    opt_gen.step()
    print(float(c_loss).hex(), float(g_loss).hex())
print(float(sum(p.double().sum() for p in critic.parameters())).hex())
'''


@pytest.mark.slow
def test_gradient_checks_of_two_optimizers_leave_training_bit_identical(tmp_path):
    """One gradient check per optimizer (hooks on each one's parameters, the optimizer a
    `zero_grad()` clears, a module's `zero_grad()` included) changes no gradient or update."""
    (tmp_path / "train.py").write_text(TWO_OPTIMIZERS, encoding="utf-8")
    plain = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=600)
    doctor = subprocess.run([sys.executable, "-m", "torchmem", "doctor", "--no-verify",
                             "train.py"], cwd=tmp_path, capture_output=True, text=True,
                            timeout=600)
    assert plain.returncode == 0 and doctor.returncode == 0, doctor.stderr[-2000:]
    assert len(plain.stdout.splitlines()) == 41
    assert doctor.stdout == plain.stdout
    assert "grad_not_cleared" not in doctor.stderr  # each optimizer is cleared every step

"""Growth in the evaluation after the last training step: a container the training steps
keep level (a forward hook adds, a backward hook takes) grows in the ``no_grad`` loop that
follows, through the real command line on real scripts."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow

# per-sample-gradient style hooks: the forward hook keeps each layer's input, the backward
# hook uses and drops it; the evaluation never runs a backward
HOOKED = """
import torch
from torch import nn

class Recorder:
    def __init__(self, model):
        for layer in model:
            if isinstance(layer, nn.Linear):
                layer.inputs = []
                layer.register_forward_hook(self.keep)
                layer.register_full_backward_hook(self.use)

    def keep(self, layer, args, output):
        layer.inputs.append(args[0].detach())

    def use(self, layer, grad_input, grad_output):
        layer.inputs.pop()

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 256), nn.ReLU(), nn.Linear(256, 10))
recorder = Recorder(model)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(10):
    opt.zero_grad()
    loss = model(torch.randn(64, 32)).pow(2).mean()
    loss.backward()
    opt.step()
correct = 0
with torch.no_grad():
    for batch in range(40):
        out = model(torch.randn(256, 32))
        correct += int((out.argmax(1) == 0).sum())
print(correct)
"""

# the same evaluation collecting its predictions, and no hooks: what evaluation does
PREDICTIONS = """
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 256), nn.ReLU(), nn.Linear(256, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(10):
    opt.zero_grad()
    loss = model(torch.randn(64, 32)).pow(2).mean()
    loss.backward()
    opt.step()
predictions = []
with torch.no_grad():
    for batch in range(40):
        predictions.append(model(torch.randn(256, 32)))
print(torch.cat(predictions).argmax(1).bincount().tolist())
"""


def test_hook_container_growing_after_the_last_step_is_found(doctor):
    data, done = doctor.run(HOOKED, compare_stdout=True)
    phase = next(p for p in data["phases"] if p["kind"] == "eval-no-grad")
    assert phase["growth"]["verdict"] == "growing", phase
    found = [f for f in data["findings"] if f["cause"] == "growing_container"]
    assert found, done.stderr
    culprit = found[0]["culprit"]
    assert culprit["name"] == "model[2].inputs"
    assert culprit["line"] == doctor.line(HOOKED, "layer.inputs.append(")
    assert found[0]["data"]["phase"] == "eval-no-grad"


def test_predictions_collected_in_the_evaluation_stay_quiet(doctor):
    data, done = doctor.run(PREDICTIONS)
    assert data["findings"] == [], done.stderr
    phase = next(p for p in data["phases"] if p["kind"] == "eval-no-grad")
    assert phase["growth"]["verdict"] == "growing", phase  # measured, and not blamed

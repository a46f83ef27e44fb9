"""Growth verdicts the steps' line cannot give: growth that resets every epoch, growth
within every evaluation pass, and a process that grows while nothing is in use. Through
the real command line on real scripts, each next to a healthy twin that stays quiet."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow

# each epoch's losses kept with their graphs until the epoch ends (40 steps, 3 epochs):
# the last analysed step (96) falls just after the reset at step 80
EPOCH_LOSSES = """
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
batches = [torch.randn(32, 8) for _ in range(40)]
for epoch in range(3):
    losses = []
    for x in batches:
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        losses.append(loss)
    print(epoch, round(float(torch.stack(losses).mean()), 4))
"""

EPOCH_FLOATS = EPOCH_LOSSES.replace("losses.append(loss)", "losses.append(loss.detach())")

# a validation pass after each epoch keeps a large copy of every batch until the pass ends
DISPLAY = """
import torch
from torch import nn

torch.manual_seed(0)
net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 3, padding=1))
opt = torch.optim.SGD(net.parameters(), lr=0.01)
train = [torch.rand(4, 3, 32, 32) for _ in range(4)]
val = [torch.rand(8, 3, 32, 32) for _ in range(12)]
for epoch in range(3):
    net.train()
    for x in train:
        opt.zero_grad()
        net(x).pow(2).mean().backward()
        opt.step()
    net.eval()
    with torch.no_grad():
        shown = []
        for x in val:
            out = net(x)
            shown.append(nn.functional.interpolate(out, size=256, mode="bilinear"))
        print(epoch, len(shown), round(float(torch.cat(shown[:2]).mean()), 4))
"""

DISPLAY_SMALL = DISPLAY.replace('nn.functional.interpolate(out, size=256, mode="bilinear")',
                                "out.mean((1, 2, 3))")

# a model called on inputs whose width changes at every call: the C heap keeps the freed
# blocks, RSS climbs, and no tensor is kept
WIDTHS = """
import random
import torch
from torch import nn

random.seed(0)
torch.manual_seed(0)
torch.set_num_threads(1)
model = nn.Sequential(nn.Conv1d(64, 256, 5), nn.ReLU(), nn.Conv1d(256, 64, 5))


def score():
    signal = torch.randn(16, 64, random.randint(200, 6000))
    return float(model(signal).mean())


with torch.no_grad():
    total = 0.0
    for i in range(60):
        total += score()
print(round(total, 3))
"""

FIXED_WIDTH = WIDTHS.replace("random.randint(200, 6000)", "3000")

# a conv net run on images of a new height and width at every call: the C heap in use
# grows with RSS (native state kept per shape) while no tensor is kept; the loop's
# iterator keeps each image for one more step (enumerate's result tuple)
IMAGES = """
import random
import torch
from torch import nn

random.seed(0)
torch.manual_seed(0)
net = nn.Sequential(nn.Conv2d(3, 16, 7, 2, 3), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(3, 2, 1),
                    nn.Conv2d(16, 32, 3, 2, 1), nn.ReLU(), nn.Conv2d(32, 64, 3, 2, 1),
                    nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))
net.eval()


def images(n):
    for _ in range(n):
        yield torch.rand(1, 3, random.randint(64, 224), random.randint(64, 224))


total = 0.0
with torch.no_grad():
    for i, img in enumerate(images(100)):
        img = img.to("cpu")
        out = net(img)
        total += float(out.sum())
print(round(total, 3))
"""

FIXED_IMAGES = IMAGES.replace("random.randint(64, 224)", "160")


def test_list_emptied_each_epoch_is_found_after_a_reset(doctor):
    data, done = doctor.run(EPOCH_LOSSES, compare_stdout=True)
    found = [f for f in data["findings"] if f["cause"] == "retained_graph"]
    assert found, done.stderr
    culprit = found[0]["culprit"]
    assert culprit["name"] == "losses"
    assert culprit["line"] == doctor.line(EPOCH_LOSSES, "losses.append(loss)")
    assert any("emptied now and then" in e for e in found[0]["evidence"])
    # described where it was largest (a whole epoch's worth), not just after the reset
    assert found[0]["data"]["items"] >= 30


def test_detached_epoch_losses_stay_quiet(doctor):
    data, done = doctor.run(EPOCH_FLOATS, compare_stdout=True)
    assert data["findings"] == [], done.stderr


def test_container_filled_in_every_evaluation_pass_is_found(doctor):
    data, done = doctor.run(DISPLAY, compare_stdout=True)
    phase = next(p for p in data["phases"] if p["kind"] == "eval-no-grad")
    assert phase["growth"]["verdict"] == "growing", phase
    found = [f for f in data["findings"] if f["cause"] == "growing_container"]
    assert found, done.stderr
    f = found[0]
    assert f["culprit"]["name"] == "shown"
    assert f["culprit"]["line"] == doctor.line(DISPLAY, "shown.append(")
    assert f["data"]["released_after_pass"] is True
    assert f["data"]["passes_growing"] == 3
    assert f["confidence"] == "high"  # three passes seen
    assert f["fix_kind"] == "advice"
    assert any("let go between passes" in e for e in f["evidence"])


def test_small_summaries_collected_in_every_pass_stay_quiet(doctor):
    data, done = doctor.run(DISPLAY_SMALL, compare_stdout=True)
    assert data["findings"] == [], done.stderr


@pytest.mark.xfail(strict=False, reason=(
    "passes alone and with tests/doctor under -n 2, but failed in two full-suite runs "
    "(seeds 3981285722 and 1710143159): there the same script's heap readings come out "
    "identical and the RSS growth the fragmentation verdict needs is not found; the cause "
    "is not known yet"))
def test_varying_shapes_are_fragmentation_not_a_growing_variable(doctor):
    data, done = doctor.run(WIDTHS, compare_stdout=True)
    causes = [f["cause"] for f in data["findings"]]
    assert "growing_container" not in causes, done.stderr
    found = [f for f in data["findings"] if f["cause"] == "fragmentation"]
    assert found, done.stderr
    f = found[0]
    assert f["device"] == "cpu"
    assert f["culprit"]["name"] == "signal"
    assert f["culprit"]["line"] == doctor.line(WIDTHS, "signal = torch.randn(")
    assert f["data"]["shapes"] >= 3
    assert f["data"]["tensor_bytes_per_step"] < 0.25 * f["data"]["rss_bytes_per_step"]


def test_fixed_shapes_stay_quiet(doctor):
    data, done = doctor.run(FIXED_WIDTH, compare_stdout=True)
    assert data["findings"] == [], done.stderr


def test_heap_that_grows_with_each_new_shape_is_fragmentation(doctor):
    data, done = doctor.run(IMAGES, compare_stdout=True)
    causes = [f["cause"] for f in data["findings"]]
    assert causes == ["fragmentation"], done.stderr  # not untracked_growth
    f = data["findings"][0]
    assert f["data"]["heap_grows"] is True and f["data"]["shapes"] >= 3
    assert f["data"]["tensor_bytes_per_step"] < 0.25 * f["data"]["heap_bytes_per_step"]
    # rebound by the loop and again by `.to()`: named where the shapes enter the model
    assert f["culprit"]["name"] == "img"
    assert f["culprit"]["line"] == doctor.line(IMAGES, "out = net(img)")
    assert "ONEDNN_PRIMITIVE_CACHE_CAPACITY" in f["fix"]


def test_fixed_image_size_stays_quiet(doctor):
    data, done = doctor.run(FIXED_IMAGES, compare_stdout=True)
    assert data["findings"] == [], done.stderr

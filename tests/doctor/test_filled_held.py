"""Activations kept at every step of a stretch and held to the end (doctor/filled_held.py):
the steps' memory rises, then levels off, so no growth verdict sees it. Through the real
command line on real scripts, next to a twin that keeps detached copies and a near miss
that keeps two activations only; and the stretch rule on measured series."""

from __future__ import annotations

import pytest

from torchmem.doctor.filled_held import _stretch
from torchmem.doctor.pathstats import PathStats
from torchmem.units import KiB

# each batch's hidden activations kept, with their graph, over the first of two epochs
FIRST_PASS = """
import torch
from torch import nn

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 1))
opt = torch.optim.SGD(net.parameters(), lr=0.01)
batches = [torch.randn(256, 64) for _ in range(8)]
first_pass = []
for epoch in range(2):
    for x in batches:
        hidden = net[1](net[0](x))
        if epoch == 0:
            first_pass.append(hidden)
        loss = net[2](hidden).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(epoch, len(first_pass))
"""

# the same values kept detached: a cache the script keeps on purpose, no graph
FIRST_PASS_DETACHED = FIRST_PASS.replace("first_pass.append(hidden)",
                                         "first_pass.append(hidden.detach())")

# near miss: activations with graphs kept, but only those of the first two steps
FIRST_TWO = FIRST_PASS.replace("if epoch == 0:", "if epoch == 0 and len(first_pass) < 2:")


@pytest.mark.slow
def test_activations_kept_over_the_first_epoch_are_found_at_their_append(doctor):
    capture, _ = doctor.run(FIRST_PASS)
    assert capture["growth"][0]["verdict"] == "flat"  # rose, then levelled off
    found = [f for f in capture["findings"] if f["cause"] == "growing_container"]
    assert len(found) == 1, capture["findings"]
    f = found[0]
    assert f["culprit"]["name"] == "first_pass"
    assert f["culprit"]["line"] == doctor.line(FIRST_PASS, "first_pass.append(hidden)")
    assert f["data"]["tensors"] == 8 and f["data"]["grad_tensors"] == 8
    assert f["data"]["fill_steps"][1] == 8  # filled up to the last step of the first epoch
    assert f["fix_kind"] == "advice" and f["confidence"] == "low"
    assert any("not growth that continues" in e for e in f["evidence"])


@pytest.mark.slow
@pytest.mark.parametrize("source", [FIRST_PASS_DETACHED, FIRST_TWO], ids=["detached", "two-steps"])
def test_detached_cache_and_two_kept_steps_stay_quiet(doctor, source):
    capture, _ = doctor.run(source)
    assert capture["findings"] == []


def _stats(tensors: int, *, kb: int = 256, survived: float | None = 1.0,
           grad: bool = True) -> PathStats:
    return PathStats(path="kept", kind="local", type="list", depth=0, root="kept",
                     items=tensors, tensors=tensors, grad_tensors=tensors if grad else 0,
                     storage_bytes=tensors * kb * KiB, freed_nodes=3 * tensors,
                     survived=survived)


STEPS = (2, 3, 4, 6, 8, 12, 16)


def test_stretch_filled_then_level_to_the_end():
    series = [(s, _stats(n)) for s, n in zip(STEPS, (2, 3, 4, 6, 8, 8, 8))]
    assert _stretch(series) == (0, 4)


@pytest.mark.parametrize("counts, survived", [
    ((2, 3, 4, 6, 8, 10, 12), 1.0),  # still growing at the end: the steady-growth rule's
    ((2, 3, 4, 4, 4, 4, 4), 1.0),    # filled over two intervals only
    ((2, 3, 4, 6, 8, 8, 8), 0.5),    # items replaced: a buffer, not kept
    ((2, 3, 4, 6, 8, 8, 6), 1.0),    # released part of it at the end
], ids=["growing", "short", "replaced", "released"])
def test_stretch_rejects_near_misses(counts, survived):
    series = [(s, _stats(n, survived=survived if i else None))
              for i, (s, n) in enumerate(zip(STEPS, counts))]
    assert _stretch(series) is None

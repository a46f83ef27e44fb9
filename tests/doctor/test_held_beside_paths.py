"""Two mechanisms at once: a variable's finding and graphs only autograd keeps, each sized
by its own share of the heap's growth (:func:`torchmem.doctor.autograd_held.share_with_paths`).

A list keeps each step's report loss with its graph, and an in-place write of a value
computed from the step's losses into a weight vector closes a cycle inside autograd that
keeps every step's graph with no variable reaching it. Fixing the list alone leaves most
of the growth, so the doctor reports both, the larger first.
"""

from __future__ import annotations

import types

from torchmem.doctor.autograd_held import _written_from, share_with_paths
from torchmem.model.capture import Culprit, Finding, Growth

SCRIPT = """
import torch
torch.manual_seed(0)
torch.set_num_threads(1)
net = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
b = torch.tensor(0.9)
alpha = torch.ones(4)
kept = []
for step in range(300):
    out = net(torch.randn(8, 32))
    losses = [out[:, i].pow(2).mean() for i in range(4)]
    for i in range(4):
        losses[i].backward(retain_graph=True)
    with torch.no_grad():
        for p in net.parameters():
            p -= 0.01 * p.grad
            p.grad = None
    for i in range(4):
        alpha[i] *= torch.pow(b, losses[i])
    alpha = torch.nn.Parameter(alpha / alpha.sum(), requires_grad=False)
    kept.append((alpha * out).sum())
print("done")
"""


def _by_cause(capture: dict) -> dict[str, dict]:
    return {f["cause"]: f for f in capture["findings"]}


def test_list_and_autograd_cycle_are_both_reported_each_with_its_share(doctor):
    capture, _ = doctor.run(SCRIPT, compare_stdout=True)
    found = _by_cause(capture)
    kept, cycle = found["retained_graph"], found["reference_cycle"]
    assert kept["culprit"]["name"] == "kept"
    assert kept["culprit"]["line"] == doctor.line(SCRIPT, "kept.append(")
    assert kept["data"]["bytes_measure"] == "tensor_storage"  # its own share, not the heap's
    heap = capture["growth"][0]["bytes_per_step"]
    assert cycle["bytes_per_step"] > kept["bytes_per_step"]
    assert abs(cycle["bytes_per_step"] + kept["bytes_per_step"] - heap) < 0.01 * heap
    assert capture["findings"].index(cycle) < capture["findings"].index(kept)  # larger first
    assert any("this finding's share is the rest" in e for e in cycle["evidence"])


def test_without_the_cycle_the_list_alone_takes_the_heap_growth(doctor):
    # healthy twin of the cycle: the in-place write uses the loss detached
    twin = SCRIPT.replace("torch.pow(b, losses[i])", "torch.pow(b, losses[i].detach())")
    capture, _ = doctor.run(twin)
    assert [f["cause"] for f in capture["findings"]] == ["retained_graph"]
    (kept,) = capture["findings"]
    assert kept["culprit"]["name"] == "kept" and kept["data"]["bytes_measure"] == "heap"


def _finding(cause: str, name: str, rate: float, **data) -> Finding:
    return Finding(cause=cause, title=cause, bytes=int(rate * 100), bytes_per_step=rate,
                   culprit=Culprit(name=name), data=data, evidence=("x",))


def test_share_drops_a_cycle_named_on_a_paths_culprit_and_keeps_paths_alone():
    growth = Growth(device="cpu", verdict="growing", bytes_per_step=10_000.0, r2=1.0)
    path = _finding("retained_graph", "self.kept", 10_000.0, bytes_measure="heap",
                    tensor_bytes_per_step=400.0, own_bytes=40_000)
    # near miss: the cycle's culprit lies on the path's: the path's finding says it
    held, paths = share_with_paths([_finding("reference_cycle", "self.kept[0]", 10_000.0)],
                                   [path], growth)
    assert held == [] and paths == [path]
    held, paths = share_with_paths([], [path], growth)
    assert paths == [path]
    held, paths = share_with_paths([_finding("reference_cycle", "self.alpha", 10_000.0)],
                                   [path], growth)
    assert paths[0].bytes_per_step == 400.0 and paths[0].bytes == 40_000
    assert held[0].bytes_per_step == 9_600.0


def test_written_from_finds_the_in_place_write_of_a_value_computed_from_the_variable(tmp_path):
    path = tmp_path / "w.py"
    path.write_text("def update(self, losses):\n    n = len(losses)\n"
                    "    losses[0] += 1\n"  # near miss: writes into the variable itself
                    "    for i in range(n):\n"
                    "        self.alpha[i] *= torch.pow(self.b, losses[i])\n", encoding="utf-8")
    stats = types.SimpleNamespace(owner_file=None, file=str(path), function="update")
    stmt = _written_from("losses", stats)
    assert stmt is not None and stmt.line == 5 and stmt.target == "self.alpha[i]"
    assert _written_from("others", stats) is None

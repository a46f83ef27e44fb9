"""The graph part of the doctor's snapshot walk: what a graph keeps, read without unpacking."""

from __future__ import annotations

import torch

from torchmem.collect.graph import iter_nodes, read_saved
from torchmem.doctor import graph_walk
from torchmem.doctor.walker import _Walker


def _walk(root):
    w = _Walker(1, lambda f: True, 100_000, 100_000)
    counts = graph_walk.walk_graph(w, root)
    w.node_keep.clear()
    return counts


def _chain(n: int, w: torch.Tensor) -> torch.Tensor:
    h = torch.ones(4, 16)
    for _ in range(n):
        h = (h @ w).tanh()  # two nodes a link, both save tensors
    return h


def test_a_live_graph_reports_its_saved_bytes_and_nodes():
    w = torch.randn(16, 16, requires_grad=True)
    h = _chain(50, w)
    counts = _walk(h.grad_fn)
    assert counts.nodes == 101  # 50 mm + 50 tanh + w's AccumulateGrad
    assert counts.live == 100 and counts.freed == 0
    assert counts.saved_bytes >= 50 * 4 * 16 * 4  # each link's input (and tanh's result)
    assert counts.passes == 50  # fifty edges into w's AccumulateGrad


def test_a_freed_graph_is_counted_the_same_without_reading_every_node(monkeypatch):
    w = torch.randn(16, 16, requires_grad=True)
    h = _chain(200, w)
    h.sum().backward()
    nodes = [n for n in iter_nodes([h.grad_fn]) if type(n).__name__ != "AccumulateGrad"]
    truth = sum(read_saved(n).freed for n in nodes)  # every node read, as before
    reads = []
    real = graph_walk.read_saved

    def counting(node):
        reads.append(node)
        return real(node)

    monkeypatch.setattr(graph_walk, "read_saved", counting)
    counts = _walk(h.grad_fn)
    assert counts.nodes == len(nodes) + 1
    assert counts.freed == truth == 400  # 200 mm, 200 tanh: all freed by the backward
    assert counts.live == 0 and counts.saved_bytes == 0
    assert len(reads) <= 2, "nodes under a freed node are not read"

"""Learns the edge weights of a pruned graph: features propagated over a sparse CSR adjacency."""
import torch


class GraphPropagation(torch.nn.Module):
    def __init__(self, nodes, hops=2):
        super().__init__()
        dense = torch.rand(nodes, nodes) * (torch.rand(nodes, nodes) < 0.5)
        self.adjacency = torch.nn.Parameter(dense.to_sparse_csr())
        self.readout = torch.nn.Parameter(torch.rand(1, nodes))
        self.hops = hops

    def forward(self, features):
        for _ in range(self.hops):
            features = torch.sparse.mm(self.adjacency, features)
        return torch.sparse.mm(self.readout, features)


torch.manual_seed(0)
model = GraphPropagation(128)
for step in range(120):
    model.zero_grad()
    features = torch.randn(128, 1)
    score = model(features).sum()
    score.backward()
    with torch.no_grad():
        model.readout -= 0.001 * model.readout.grad
    if step % 40 == 0:
        print(f"step {step} score {score.item():.4f}")

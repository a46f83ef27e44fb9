"""The autograd graph walk counts exactly the tensors saved for backward."""

from __future__ import annotations

import gc
import weakref

import torch

from torchmem.collect.graph import storage_key, storage_nbytes, walk


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(100, 200), torch.nn.ReLU(), torch.nn.Linear(200, 10))


def test_saved_bytes_of_an_mlp_are_exact():
    model = mlp()
    x = torch.randn(32, 100)
    loss = model(x).sum()
    result = walk([loss])
    params = {storage_key(p) for p in model.parameters()}
    activations = result.saved_bytes(exclude=params)
    # Addmm #1 saves the input x; ReLU saves its result; Addmm #2 saves the ReLU output
    # (the same storage) and the weight of layer 2 (a parameter, excluded here).
    assert activations == x.numel() * 4 + 32 * 200 * 4
    assert set(result.leaves) == params
    assert result.node_types["AddmmBackward0"] == 2
    assert result.node_types["AccumulateGrad"] == 4


def test_after_backward_nothing_is_saved_but_nodes_remain():
    loss = mlp()(torch.randn(8, 100)).sum()
    loss.backward()
    result = walk([loss])
    assert result.saved == {} and result.nodes > 0


def test_retain_graph_keeps_saved_tensors():
    loss = mlp()(torch.randn(8, 100)).sum()
    loss.backward(retain_graph=True)
    assert walk([loss]).saved


def test_chained_graph_grows_with_each_step():
    cell = torch.nn.RNNCell(4, 8)
    h = torch.zeros(1, 8)
    sizes = []
    for _ in range(5):
        h = cell(torch.randn(1, 4), h)
        sizes.append(walk([h]).nodes)
    assert sizes == sorted(sizes) and len(set(sizes)) == 5


def test_custom_function_saved_tensors_are_found():
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 2 * x * grad

    x = torch.randn(50, requires_grad=True)
    y = Square.apply(x.exp())  # ExpBackward saves its result: the same storage
    assert sum(walk([y]).saved.values()) == 50 * 4


def test_limit_truncates():
    cell = torch.nn.RNNCell(2, 2)
    h = torch.zeros(1, 2)
    for _ in range(20):
        h = cell(torch.randn(1, 2), h)
    result = walk([h], limit=5)
    assert result.truncated and result.nodes == 5


def test_walk_keeps_nothing_alive():
    model = mlp()
    inp = torch.randn(4, 100)
    saved_input = weakref.ref(inp)
    loss = model(inp).sum()
    del inp  # now only the graph holds it
    assert saved_input() is not None
    walk([loss])
    del loss
    gc.collect()
    assert saved_input() is None


def test_storage_helpers():
    x = torch.zeros(10, 10)
    assert storage_key(x[2:4]) == storage_key(x)
    assert storage_nbytes(x[0, :1]) == 400
    assert storage_key(torch.zeros(2, 2).to_sparse()) is None
    assert storage_key(torch.empty(3, device="meta")) is None


class _Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 2


def test_freed_custom_function_nodes_never_raise():
    # hasattr(node, "saved_tensors") raises RuntimeError on a freed custom Function node
    x = torch.randn(16, requires_grad=True)
    y = _Scale.apply(x.exp())
    y.sum().backward()
    from torchmem.collect.graph import read_saved, saved_tensors

    assert saved_tensors(y.grad_fn) == []
    assert read_saved(y.grad_fn).freed
    result = walk([y])
    assert result.saved == {} and result.node_types["_ScaleBackward"] == 1


def test_checkpointed_graph_is_walked_without_recomputing():
    from torch.utils.checkpoint import checkpoint

    from torchmem.collect.graph import iter_nodes, read_saved

    calls = []
    layer = torch.nn.Linear(8, 8)

    def block(t):
        calls.append(1)
        return torch.relu(layer(t))

    out = checkpoint(block, torch.randn(4, 8, requires_grad=True), use_reentrant=False)
    assert len(calls) == 1
    hooked = sum(read_saved(n).hooked for n in iter_nodes([out.grad_fn]))
    result = walk([out])
    assert hooked >= 2 and result.nodes > 0
    assert len(calls) == 1  # reading the graph never called checkpoint's unpack hook
    out.sum().backward()  # the real backward still recomputes once and works
    assert len(calls) == 2


def test_hook_packed_tensors_are_counted_without_unpacking():
    unpacked = []

    def pack(t):
        return ("copy", t.clone())

    def unpack(packed):
        unpacked.append(1)
        return packed[1]

    x = torch.randn(100, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = x.exp()  # saves its result: packed as a 400-byte copy
    assert sum(walk([y]).saved.values()) == 400
    assert unpacked == []

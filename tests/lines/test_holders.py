"""Who keeps a storage: the path from the script's variables (the doctor's walk)."""

from __future__ import annotations

import sys

import torch

from torchmem.collect.graph import storage_key
from torchmem.doctor.holders import holder_paths


class Cache:
    def __init__(self) -> None:
        self.items: dict[str, torch.Tensor] = {}


def _everything(name: str) -> bool:
    return True


def test_paths_of_a_local_an_attribute_key_and_a_saved_tensor():
    kept = [torch.ones(10)]
    cache = Cache()
    cache.items["a"] = torch.ones(20)
    w = torch.ones(30, requires_grad=True)
    out = (w * 2).exp()  # exp saves its output; mul saves nothing new (a scalar)
    saved = out.grad_fn._saved_result
    keys = {storage_key(kept[0]): "kept", storage_key(cache.items["a"]): "cache.items['a']"}
    found = holder_paths(list(keys) + [storage_key(saved)], sys._getframe(), None, _everything)
    for key, path in keys.items():
        assert found[key] == path
    assert storage_key(saved) in found and found[storage_key(saved)] == "out"
    del out, saved


def test_a_storage_only_a_graph_keeps_is_named_by_the_graph_holder():
    x = torch.randn(8, 8, requires_grad=True)
    losses = [((x @ x).tanh()).sum()]  # tanh's saved output lives only in the graph
    node = losses[0].grad_fn.next_functions[0][0]  # TanhBackward0
    key = storage_key(node._saved_result)
    found = holder_paths([key], sys._getframe(), None, _everything)
    assert found[key] == "the autograd graph of losses"


def test_nothing_asked_nothing_walked():
    assert holder_paths([], sys._getframe(), None, _everything) == {}

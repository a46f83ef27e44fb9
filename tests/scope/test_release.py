"""torchmem.release: exact bytes freed, clear errors afterwards, refusal when shared."""

from __future__ import annotations

import pytest
import torch

import torchmem
from torchmem.errors import ReleasedTensorError, UsageError
from torchmem.scope._free import is_released


def test_release_tensor_returns_exact_bytes_and_later_use_raises() -> None:
    t = torch.empty(1000, dtype=torch.float64)
    name_kept_elsewhere = [t]
    assert torchmem.release(t) == 8000
    assert name_kept_elsewhere[0].__class__.__name__ == "ReleasedTensor"
    with pytest.raises(ReleasedTensorError, match=r"torchmem.release\(\) called at .*test_release.py"):
        t + 1
    assert torchmem.release(t) == 0  # releasing twice is a no-op


def test_release_views_together_counts_the_storage_once() -> None:
    base = torch.zeros(256)
    view = base[10:20]
    assert torchmem.release([base, view]) == 1024
    assert is_released(base) and is_released(view)


def test_release_refuses_storage_shared_with_unreachable_tensors() -> None:
    base = torch.zeros(64)
    view = base[:8]
    with pytest.raises(UsageError, match="still used by something outside"):
        torchmem.release(base)
    assert not is_released(base) and base.untyped_storage().nbytes() == 256  # untouched
    assert torchmem.release(base, force=True) == 256
    del view  # never used again: its memory is gone


def test_release_module_params_grads_and_buffers() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(10, 10), torch.nn.BatchNorm1d(10))
    model(torch.randn(4, 10)).sum().backward()
    params = (10 * 10 + 10) * 4 + 10 * 4 * 2
    grads = params
    buffers = 10 * 4 * 2 + 8
    assert torchmem.release(model) == params + grads + buffers
    with pytest.raises(ReleasedTensorError):
        model(torch.randn(4, 10))
    assert isinstance(model[0].weight, torch.nn.Parameter)  # still a Parameter


def test_release_optimizer_state() -> None:
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.Adam(model.parameters())
    model(torch.ones(4)).sum().backward()
    opt.step()
    # exp_avg + exp_avg_sq for weight (64 B) and bias (16 B), plus two 4-byte steps
    assert torchmem.release(opt) == 2 * (64 + 16) + 2 * 4
    assert model.weight.untyped_storage().nbytes() == 64  # parameters untouched
    with pytest.raises(ReleasedTensorError):
        opt.step()


def test_release_rejects_unsupported_objects() -> None:
    with pytest.raises(UsageError, match="expected a tensor"):
        torchmem.release(3)


def test_release_refuses_a_tensor_a_live_graph_saved_as_an_input() -> None:
    x = torch.randn(1000, requires_grad=True)
    h = x * 2
    loss = h.sin().sum()  # sin saved h itself (same tensor impl, no extra storage ref)
    with pytest.raises(UsageError, match="live autograd graph"):
        torchmem.release(h)
    assert not is_released(h)
    loss.backward()  # untouched: the gradient is right
    assert torch.equal(x.grad, 2 * torch.cos(2 * x.detach()))


def test_forced_release_of_a_saved_tensor_makes_backward_fail_cleanly() -> None:
    x = torch.randn(1000, requires_grad=True)
    h = x * 2
    out = h.exp()  # saves its output: a second tensor impl over the storage
    loss = (h.sin() + out).sum()
    torchmem.release([h, out], force=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()  # never reads the freed storage

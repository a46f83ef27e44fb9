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
    with pytest.raises(UsageError, match="shared with tensors outside"):
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

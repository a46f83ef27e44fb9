"""compare_modes: measured grad / no_grad / inference_mode rows, exact on CPU."""

from __future__ import annotations

import pytest
import torch

import torchmem
from torchmem.errors import UsageError
from torchmem.model.readings import ModeComparison


class TanhSum(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(128, 256))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x @ self.w).tanh().sum()


def test_rows_are_exact_for_a_known_graph() -> None:
    model = TanhSum()
    x = torch.randn(64, 128)
    act = 64 * 256 * 4  # one float32 activation
    cmp = torchmem.compare_modes(model, x)
    assert [r.mode for r in cmp.rows] == ["grad", "no_grad", "inference_mode"]
    assert cmp.device == "cpu" and cmp.source == "engine"
    grad, no_grad, inference = cmp.rows
    # grad: tanh saved its output for backward; the loss is a 4-byte scalar
    figures = (grad.peak_delta, grad.retained, grad.saved, grad.output_bytes)
    assert figures == (2 * act, act + 4, act, 4)
    # no_grad: the same transient peak (matmul result + tanh result), nothing retained
    assert (no_grad.peak_delta, no_grad.retained, no_grad.saved) == (2 * act, 4, 0)
    assert (inference.peak_delta, inference.retained, inference.saved) == (2 * act, 4, 0)
    assert "not gradients" in cmp.explanation
    assert model.w.grad is None  # nothing ran backward
    assert cmp.row("no_grad") is no_grad
    with pytest.raises(KeyError):
        cmp.row("eval")


def test_deep_mlp_no_grad_saves_the_activations_and_lowers_the_peak() -> None:
    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for _ in range(4):
        layers += [torch.nn.Linear(256, 256), torch.nn.Tanh()]
    model = torch.nn.Sequential(*layers)
    x = torch.randn(128, 256)
    cmp = torchmem.compare_modes(model, x)
    grad, no_grad, inference = cmp.rows
    act = 128 * 256 * 4
    assert grad.saved >= 3 * act  # each tanh output is saved; the last is the output
    assert grad.retained == grad.saved + grad.output_bytes
    assert no_grad.retained == no_grad.output_bytes == act
    assert no_grad.peak_delta < grad.peak_delta
    assert inference.retained == no_grad.retained
    again = ModeComparison.from_dict(cmp.to_dict())
    assert again == cmp


def test_tuple_and_dict_inputs_and_plain_functions() -> None:
    a = torch.randn(100, requires_grad=True)
    b = torch.randn(100)

    def f(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        return (p * q).exp().sin()

    by_tuple = torchmem.compare_modes(f, (a, b))
    by_dict = torchmem.compare_modes(f, {"p": a, "q": b})
    for cmp in (by_tuple, by_dict):
        grad, no_grad, _ = cmp.rows
        # mul saves its inputs (not new memory); exp saves its result, sin its input:
        # the same 400 bytes
        figures = (grad.output_bytes, grad.saved, grad.retained, grad.peak_delta)
        assert figures == (400, 400, 800, 800)
        assert (no_grad.retained, no_grad.peak_delta) == (400, 800)


def test_not_callable_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="callable"):
        torchmem.compare_modes(42, torch.randn(3))  # type: ignore[arg-type]


@pytest.mark.cuda
def test_cuda_rows_come_from_the_allocator() -> None:
    model = TanhSum().cuda()
    x = torch.randn(64, 128, device="cuda")
    cmp = torchmem.compare_modes(model, x)
    assert cmp.device == "cuda:0" and cmp.source == "allocator"
    grad, no_grad, _ = cmp.rows
    assert grad.saved == 64 * 256 * 4
    assert grad.retained - no_grad.retained >= 64 * 256 * 4

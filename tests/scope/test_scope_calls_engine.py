"""What the default ("calls") engine sees and does not see, and why that is safe.

It sees torch calls made from Python, not the aten ops inside them, so it must learn
about mutations from version counters, must not take gradients for tensors the scope
made, and must stop trusting dying graphs once a ``create_graph=True`` backward made
gradients it never saw. Each case is compared, bit for bit, with the same program
without a scope; both engines run every case (``scope_engine`` in conftest.py).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import torchmem
from torchmem.scope._free import is_released


def _grads(model: torch.nn.Module) -> list[torch.Tensor]:
    return [torch.zeros(0) if p.grad is None else p.grad.clone() for p in model.parameters()]


def _same(a: list[torch.Tensor], b: list[torch.Tensor]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert torch.equal(x, y)


def _both(program: Callable[[bool], list[torch.Tensor]]) -> None:
    torch.manual_seed(0)
    want = program(False)
    torch.manual_seed(0)
    got = program(True)
    _same(want, got)


class _NoScope:
    def __enter__(self) -> "_NoScope":
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def keep(self, obj: object) -> object:
        return obj


def _scope(scoped: bool) -> object:
    return torchmem.scope() if scoped else _NoScope()


def test_item_assignment_into_an_outside_buffer_keeps_the_graph() -> None:
    # `act` is still bound at the exit and its own node saved it; the buffer's graph
    # runs through that node, so only knowing that `buf` was mutated protects it
    def program(scoped: bool) -> list[torch.Tensor]:
        model = torch.nn.Linear(6, 3)
        buf = torch.zeros(4, 3)
        for i in range(4):
            with _scope(scoped):
                act = torch.tanh(model(torch.randn(6)))
                buf[i] = act
        buf.pow(2).sum().backward()
        return _grads(model)

    _both(program)


def test_in_place_copy_and_positional_inplace_into_an_outside_tensor() -> None:
    def program(scoped: bool) -> list[torch.Tensor]:
        model = torch.nn.Linear(5, 5)
        h = torch.zeros(2, 5)
        idx = torch.tensor([1, 0])
        with _scope(scoped):
            act = model(torch.randn(2, 5)).exp()
            h.index_copy_(0, idx, act)
            F.hardtanh(h, -2.0, 2.0, True)  # `inplace` given by position
        h.sum().backward()
        return _grads(model)

    _both(program)


def test_second_order_graph_through_a_node_it_does_not_save() -> None:
    # g = d(s * w)/dw = s: its graph runs through SumBackward and ExpBackward, which the
    # scope's own tensors reach too, and no new node saves `c`: only knowing that a
    # create_graph=True call ran stops the scope from freeing `c`
    def program(scoped: bool) -> list[torch.Tensor]:
        x = torch.randn(3, requires_grad=True)
        w = torch.randn(3, requires_grad=True)
        with _scope(scoped):
            c = x.exp()
            s = c.sum()
            g, = torch.autograd.grad((s * w).sum(), w, create_graph=True)
        g.pow(2).sum().backward()  # a gradient: neither engine frees it, nothing to keep
        return [x.grad.clone()]

    _both(program)


def test_gradient_penalty_with_create_graph_gives_the_same_gradients() -> None:
    def program(scoped: bool) -> list[torch.Tensor]:
        critic = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
        real, fake = torch.randn(6, 4), torch.randn(6, 4)
        penalties = []
        for _ in range(2):
            with _scope(scoped) as s:
                alpha = torch.rand(6, 1)
                point = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
                grad, = torch.autograd.grad(critic(point).sum(), point, create_graph=True)
                penalties.append(s.keep(((grad.norm(2, dim=1) - 1) ** 2).mean()))
        torch.stack(penalties).sum().backward()
        return _grads(critic) + [p.detach() for p in penalties]

    _both(program)


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
def test_backward_with_create_graph_inside_a_scope_then_a_second_order_step() -> None:
    def program(scoped: bool) -> list[torch.Tensor]:
        model = torch.nn.Linear(3, 1)
        with _scope(scoped):
            model(torch.randn(5, 3)).pow(2).sum().backward(create_graph=True)
        # the .grad fields carry graphs that reach the scope's saved tensors
        norm = sum(p.grad.pow(2).sum() for p in model.parameters())
        grads = torch.autograd.grad(norm, list(model.parameters()))
        return [g.clone() for g in grads]

    _both(program)


class _Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx: object, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)  # type: ignore[attr-defined]
        return x ** 3

    @staticmethod
    def backward(ctx: object, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors  # type: ignore[attr-defined]
        return 3 * x * x * grad


def test_custom_function_outputs_kept_across_the_scope() -> None:
    def program(scoped: bool) -> list[torch.Tensor]:
        model = torch.nn.Linear(4, 4)
        outs = []
        for _ in range(3):
            with _scope(scoped) as s:
                outs.append(s.keep(_Cube.apply(model(torch.randn(2, 4))).sum()))
        torch.stack(outs).sum().backward()
        return _grads(model)

    _both(program)


def test_gradients_read_inside_the_scope_are_not_freed() -> None:
    model = torch.nn.Linear(4, 2)
    model(torch.randn(3, 4)).sum().backward()
    with torchmem.scope():
        grads = [p.grad for p in model.parameters()]  # a property: nothing created
        sizes = [g.norm() for g in grads]
    assert all(not is_released(p.grad) for p in model.parameters())
    assert all(is_released(n) for n in sizes)  # what the scope made is freed
    assert model.weight.grad.abs().sum().item() > 0


def test_autograd_grad_results_are_gradients_not_scope_tensors() -> None:
    x = torch.randn(5, requires_grad=True)
    with torchmem.scope():
        g, = torch.autograd.grad(x.exp().sum(), x)
    assert not is_released(g)
    assert torch.equal(g, x.detach().exp())


def test_tensor_sharing_memory_with_numpy_is_never_freed() -> None:
    array = np.arange(6, dtype=np.float32)
    with torchmem.scope() as s:
        shared = torch.as_tensor(array)
        shared.add_(1)
    assert not is_released(shared) and s.report.released_bytes == 0
    assert array.tolist() == [1, 2, 3, 4, 5, 6] and shared.tolist() == array.tolist()


def test_unknown_engine_is_refused() -> None:
    from torchmem.errors import UsageError

    with pytest.raises(UsageError, match="unknown engine"):
        torchmem.scope(engine="magic")
    with pytest.raises(UsageError, match="unknown engine"):
        torchmem.scoped(engine="magic")


def test_an_optimizer_step_that_raises_does_not_stop_tracking_mutations() -> None:
    # the step counter stays up after the raise; mutations must still be seen
    class Boom(torch.optim.SGD):
        def step(self, closure=None):  # type: ignore[no-untyped-def,override]
            raise RuntimeError("boom")

    def program(scoped: bool) -> list[torch.Tensor]:
        model = torch.nn.Linear(4, 3)
        opt = Boom(model.parameters(), lr=0.1)
        buf = torch.zeros(2, 3)
        with _scope(scoped):
            with pytest.raises(RuntimeError, match="boom"):
                opt.step()
            act = torch.tanh(model(torch.randn(2, 4)))
            buf[0] = act[0]
        buf.sum().backward()
        return _grads(model)

    _both(program)

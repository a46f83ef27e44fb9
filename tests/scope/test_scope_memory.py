"""Oracles for torchmem.scope: exact bytes freed, flat memory under cycles and closures,
bit-identical results with and without scopes."""

from __future__ import annotations

import weakref

import pytest
import torch

import torchmem
from torchmem.collect.cpu import heap_available, heap_bytes
from torchmem.scope._free import is_released

MIB = 1 << 20


class _Holder:
    pass


def _leaky_step(x: torch.Tensor, sink: list, refs: list | None = None) -> torch.Tensor:
    """One step whose two 1 MiB temporaries stay alive in a cycle and a closure."""
    a = x * 2  # 1 MiB
    b = a + 1  # 1 MiB
    if refs is not None:
        refs.append(weakref.ref(a.untyped_storage()))
        refs.append(weakref.ref(b.untyped_storage()))
    node = _Holder()
    node.me = node  # reference cycle
    node.a = a
    sink.append(lambda: b)  # closure outliving the step
    return (b * 0).sum()  # 4 bytes


def _held(refs: list) -> int:
    return sum(st.nbytes() for st in (r() for r in refs) if st is not None)


@pytest.mark.usefixtures("no_gc")
def test_loop_with_cycles_grows_without_scope_and_is_flat_with_it() -> None:
    x = torch.ones(MIB // 4)  # 1 MiB of float32
    steps = 6

    # without a scope: every temporary survives, exactly 2 MiB + the 4-byte result
    sink: list = []
    refs: list = []
    for _ in range(steps):
        out = _leaky_step(x, sink, refs)
        del out
    assert _held(refs) == steps * 2 * MIB  # both temporaries of every step

    sink2: list = []
    refs2: list = []
    with torchmem.scope():  # warm up: the first dispatch mode imports torch._dynamo
        _leaky_step(x, [])
    h0 = heap_bytes()
    for _ in range(steps):
        with torchmem.scope() as s:
            out = s.keep(_leaky_step(x, sink2, refs2))
        assert out.item() == 0.0
        r = s.report
        assert r.released == 2 and r.released_bytes == 2 * MIB
        assert r.kept == 1 and r.kept_bytes == 4
        assert r.peak_bytes >= 2 * MIB
    assert _held(refs2) == 0
    assert all(is_released(f.__closure__[0].cell_contents) for f in sink2)
    if heap_available():
        grown = heap_bytes() - h0  # type: ignore[operator]
        assert grown < MIB // 2  # flat: far less than one step's 2 MiB
    del sink, sink2


@pytest.mark.skipif(not heap_available(), reason="needs glibc mallinfo2")
@pytest.mark.usefixtures("no_gc")
def test_heap_oracle_without_scope_grows_by_exact_step_size() -> None:
    x = torch.ones(MIB // 4)
    sink: list = []
    _leaky_step(x, sink)  # warm up allocator paths
    h0 = heap_bytes()
    for _ in range(4):
        _leaky_step(x, sink)
    grown = heap_bytes() - h0  # type: ignore[operator]
    assert 4 * 2 * MIB <= grown < 4 * 2 * MIB + MIB // 2


def _train(use_scope: bool, steps: int = 4) -> tuple[list[torch.Tensor], list[float], torch.Tensor]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16), torch.nn.Tanh(), torch.nn.Linear(16, 1)
    )
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    data = torch.randn(steps, 4, 8)
    target = torch.randn(steps, 4, 1)
    losses: list[float] = []
    out = torch.empty(0)
    for i in range(steps):
        opt.zero_grad()
        if use_scope:
            with torchmem.scope() as s:
                pred = model(data[i])
                loss = s.keep(torch.nn.functional.mse_loss(pred, target[i]))
                out = s.keep(pred.detach().sigmoid())
            loss.backward()  # after the scope: saved tensors were protected
        else:
            pred = model(data[i])
            loss = torch.nn.functional.mse_loss(pred, target[i])
            out = pred.detach().sigmoid()
            loss.backward()
        opt.step()
        losses.append(loss.item())
    state = [p.detach().clone() for p in model.parameters()] + [
        b.clone() for b in model.buffers()
    ]
    state += [p.grad.clone() for p in model.parameters()]
    return state, losses, out


def test_gradients_and_outputs_are_bit_identical_with_and_without_scope() -> None:
    ref_state, ref_losses, ref_out = _train(False)
    got_state, got_losses, got_out = _train(True)
    assert ref_losses == got_losses
    assert torch.equal(ref_out, got_out)
    assert len(ref_state) == len(got_state)
    for a, b in zip(ref_state, got_state):
        assert torch.equal(a, b)


def test_backward_inside_scope_and_optimizer_step_survive(scope_engine: str) -> None:
    torch.manual_seed(1)
    model = torch.nn.Linear(5, 3)
    opt = torch.optim.Adam(model.parameters())
    x = torch.randn(2, 5)
    with torchmem.scope() as s:
        model(x).pow(2).sum().backward()
        opt.step()
    r = s.report
    if scope_engine == "dispatch":
        # the calls engine registers neither gradients nor what a no_grad step makes
        assert r.protected.get("autograd", 0) >= 2  # weight.grad, bias.grad
        assert r.protected.get("optimizer_state", 0) >= 4  # exp_avg, exp_avg_sq per param
    for p in model.parameters():
        assert type(p.grad) is torch.Tensor and p.grad.untyped_storage().nbytes() == p.nbytes
        for v in opt.state[p].values():
            assert not is_released(v)
    opt.step()  # works again: the state is intact


def test_model_built_inside_scope_keeps_parameters_and_buffers() -> None:
    with torchmem.scope() as s:
        model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))
        model(torch.randn(3, 4))
        free = torch.nn.Parameter(torch.randn(7))  # not registered anywhere
    assert s.report.protected.get("module", 0) == 2 + 2 + 3
    assert s.report.protected.get("unseen_holder", 0) >= 1
    model(torch.randn(3, 4)).sum().backward()
    assert free.untyped_storage().nbytes() == 28 and free.sum().isfinite()


def test_pre_existing_tensors_views_and_in_place_updates_are_never_freed() -> None:
    base = torch.arange(10.0)
    bn = torch.nn.BatchNorm1d(2)
    mean_before = bn.running_mean.clone()
    with torchmem.scope() as s:
        v = base[2:5]
        v.mul_(2)
        d = base.detach()
        bn(torch.randn(4, 2))  # running stats updated in place
        tmp = base * 3
    assert s.report.released == 1 and s.report.released_bytes == 40
    assert is_released(tmp)
    assert not is_released(v) and not is_released(d)
    assert base[2].item() == 4.0 and v.sum().item() == 18.0
    assert not torch.equal(bn.running_mean, mean_before)


def test_data_assignment_inside_scope_is_protected() -> None:
    model = torch.nn.Linear(3, 3)
    with torchmem.scope() as s:
        model.double()  # param.data = param.data.to(float64): new storages
    assert s.report.protected.get("unseen_holder", 0) == 2
    assert model(torch.ones(3, dtype=torch.float64)).shape == (3,)


def test_requires_grad_leaf_created_inside_survives() -> None:
    with torchmem.scope() as s:
        w = torch.zeros(5, requires_grad=True)
        h = torch.ones(3).requires_grad_()
    assert s.report.protected == {"leaf_requires_grad": 2}
    assert (w + 1).sum().item() == 5 and h.sum().item() == 3

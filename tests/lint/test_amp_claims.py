"""The claims of the mixed-precision rules (TMM601, TMM602), checked against PyTorch."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


def _setup():
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    return model, opt, torch.ones(1, 2)


def test_step_without_any_scale_raises():
    """TMM601: a scaler whose scale() never ran refuses to step."""
    model, opt, x = _setup()
    scaler = torch.amp.GradScaler("cpu")
    model(x).sum().backward()
    with pytest.raises(AssertionError, match="_scale is None"):
        scaler.step(opt)


def test_step_after_unscaled_backward_divides_the_update_by_the_scale():
    """TMM601: once scale() has run, an unscaled backward gives a 65536 times smaller step."""
    model, opt, x = _setup()
    scaler = torch.amp.GradScaler("cpu")
    scaler.scale(model(x).sum()).backward()  # a first, correct iteration
    scaler.step(opt)
    scaler.update()
    opt.zero_grad()
    before = model.weight.detach().clone()
    model(x).sum().backward()  # the bug: not scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    step = (model.weight.detach() - before)
    assert scaler.get_scale() == 65536.0
    assert torch.allclose(step, torch.full_like(step, -1.0 / 65536.0))


def test_second_step_without_update_raises():
    """TMM602: step() twice without update() in between raises."""
    model, opt, x = _setup()
    scaler = torch.amp.GradScaler("cpu")
    for i in range(2):
        opt.zero_grad()
        scaler.scale(model(x).sum()).backward()
        if i == 0:
            scaler.step(opt)
        else:
            with pytest.raises(RuntimeError, match="since the last update"):
                scaler.step(opt)


def test_disabled_scaler_steps_without_scale_or_update():
    """The rules leave GradScaler(enabled=False) alone: it is a plain optimizer.step()."""
    model, opt, x = _setup()
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    for _ in range(2):
        opt.zero_grad()
        model(x).sum().backward()
        scaler.step(opt)

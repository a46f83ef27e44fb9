"""The top-level forwards of a training script are counted without touching its modules."""

from __future__ import annotations

import textwrap
from pathlib import Path

import torch
from torch.utils.checkpoint import checkpoint

from torchmem.doctor.runner import Target, run_script
from torchmem.doctor.steps import StepHooks, UserFrames


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())

    def forward(self, x):
        return self.inner(x)


def test_only_top_level_calls_after_the_first_step_are_reported_and_not_recomputations():
    reported: list[str] = []
    backwards: list[int] = []
    model, head = Block(), torch.nn.Linear(8, 1)
    opt = torch.optim.SGD([*model.parameters(), *head.parameters()], lr=0.1)
    hooks = StepHooks(lambda source, frame: None, lambda name, info: None, UserFrames(),
                      loops=False, after_backward=lambda: backwards.append(1),
                      on_top_forward=lambda frame, out: reported.append(
                          f"{type(out).__name__}@{frame.f_code.co_name}"))
    with hooks:
        for _ in range(4):
            x = torch.randn(4, 8, requires_grad=True)
            # checkpoint runs Block again inside backward() (and calls backward() there):
            # not a forward of the script
            loss = head(checkpoint(model, x, use_reentrant=True)).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        assert "__call__" in Block.__dict__ and "__call__" in torch.nn.Linear.__dict__
    # learned in the first step (Block, Linear), reported in the three after it; the
    # Linear layers inside Block are not top-level calls
    name = "test_only_top_level_calls_after_the_first_step_are_reported_and_not_recomputations"
    assert reported == [f"Tensor@{name}"] * 6
    assert len(backwards) == 4  # the script's backward() calls, not the checkpoint's
    assert "__call__" not in Block.__dict__ and "__call__" not in torch.nn.Linear.__dict__


SAVES = """
import copy, io, pickle
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 1)

    def forward(self, x):
        return self.fc(x)


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(6):
    opt.zero_grad()
    model(torch.randn(4, 8)).pow(2).mean().backward()
    opt.step()
buf = io.BytesIO()
torch.save(model, buf)
ema = copy.deepcopy(model)
scripted = torch.jit.script(model)
x = torch.ones(1, 8)
same = torch.equal(scripted(x), model(x)) and torch.equal(ema(x), model(x))
watched = "__call__" in Net.__dict__   # the class is watched while the doctor runs
print(watched, same, b"torchmem" in buf.getvalue(), b"torchmem" in pickle.dumps(model))
NET = Net
"""


def test_the_scripts_modules_save_copy_and_script_as_without_the_doctor(tmp_path: Path, capfd):
    path = tmp_path / "saves.py"
    path.write_text(textwrap.dedent(SAVES), encoding="utf-8")
    result = run_script(Target(path=str(path)), monitor_interval=None, keep_namespace=True)
    assert result.exit_code == 0 and result.step_source == "optimizer"
    assert capfd.readouterr().out.splitlines()[-1] == "True True False False"
    from torchmem.doctor.runner import _KEPT_NAMESPACES

    assert "__call__" not in _KEPT_NAMESPACES[-1].__dict__["NET"].__dict__


class _Frozen(type):
    def __setattr__(cls, name, value):
        raise TypeError(f"{cls.__name__} is frozen")


class FrozenNet(torch.nn.Linear, metaclass=_Frozen):
    pass


def test_a_class_that_cannot_be_given_a_call_is_left_alone():
    from torchmem.doctor.top_forwards import TopForwards

    top = TopForwards(lambda frame, output: None)
    top.learn(FrozenNet(2, 2))
    top.learn(Block())
    top.install()  # no exception: it is skipped, the others are watched
    try:
        assert "__call__" not in FrozenNet.__dict__ and "__call__" in Block.__dict__
        assert FrozenNet(2, 2)(torch.ones(1, 2)).shape == (1, 2)
    finally:
        top.uninstall()
    assert "__call__" not in Block.__dict__

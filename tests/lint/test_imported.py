"""Functions imported from other files of the linted tree are summarised like local ones."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from torchmem.lint.config import LintConfig
from torchmem.lint.files import lint_paths

STEPS = '''\
import torch


def train_one_batch(model, batch, optimizer, criterion):
    x, y = batch
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    return loss


def train_one_batch_item(model, batch, optimizer, criterion):
    x, y = batch
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()


def eval_step(model, batch):
    x, _ = batch
    return model(x).argmax(1)
'''

TRAIN = '''\
import torch

from .steps import eval_step, train_one_batch, train_one_batch_item


def fit(model, loader, val_loader, optimizer, criterion):
    total = 0.0
    for batch in loader:
        total += train_one_batch(model, batch, optimizer, criterion)
    model.eval()
    for batch in val_loader:
        eval_step(model, batch)
    return total


def fit_clean(model, loader, val_loader, optimizer, criterion):
    total = 0.0
    for batch in loader:
        total += train_one_batch_item(model, batch, optimizer, criterion)
    model.eval()
    with torch.no_grad():
        for batch in val_loader:
            eval_step(model, batch)
    return total
'''

SCRIPT = '''\
import steps


def fit(model, loader, optimizer, criterion):
    history = []
    for batch in loader:
        history.append(steps.train_one_batch(model, batch, optimizer, criterion))
    return history
'''


def make_package(root: Path) -> Path:
    pkg = root / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "steps.py").write_text(STEPS)
    (pkg / "train.py").write_text(TRAIN)
    return pkg


def found(paths: list[Path]) -> list[tuple[str, int, str]]:
    result = lint_paths([str(p) for p in paths], config=LintConfig(), jobs=1)
    assert not result.errors
    return [(Path(v.path).name, v.line, v.code) for v in result.violations]


def test_relative_import_helper_returning_the_loss_and_running_the_forward(tmp_path):
    pkg = make_package(tmp_path)
    # linting the one file reads the file it imports from
    assert found([pkg / "train.py"]) == [("train.py", 9, "TMM101"), ("train.py", 12, "TMM103")]


def test_module_import_in_a_script_directory(tmp_path):
    (tmp_path / "steps.py").write_text(STEPS)
    (tmp_path / "train.py").write_text(SCRIPT)
    proc = subprocess.run(
        [sys.executable, "-m", "torchmem", "lint", "--isolated", "train.py"], cwd=tmp_path,
        capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 1, proc.stderr
    assert "train.py:7:24: TMM101 " in proc.stdout
    assert "train_one_batch" in proc.stdout


def test_a_changed_helper_is_read_again(tmp_path):
    pkg = make_package(tmp_path)
    assert ("train.py", 9, "TMM101") in found([pkg / "train.py"])
    fixed = STEPS.replace("    optimizer.step()\n    return loss\n",
                          "    optimizer.step()\n    return loss.detach()\n", 1)
    assert fixed != STEPS
    (pkg / "steps.py").write_text(fixed)
    assert ("train.py", 9, "TMM101") not in found([pkg / "train.py"])


def test_unresolvable_imports_stay_unknown(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN.replace("from .steps", "from missing_pkg.steps"))
    assert found([tmp_path / "train.py"]) == []


EVAL_HELPERS = '''\
import torch


def eval_model(model, data):
    correct = 0
    for x, y in data:
        correct += (model(x).argmax(1) == y).sum().item()
    return correct


@torch.no_grad()
def eval_model_no_grad(model, data):
    correct = 0
    for x, y in data:
        correct += (model(x).argmax(1) == y).sum().item()
    return correct
'''

EVAL_CALLER = '''\
import torch

from .metrics import eval_model, eval_model_no_grad


def after_epoch(model, dev_data, test_data):
    model.eval()
    print(eval_model(model, dev_data))
    with torch.no_grad():
        print(eval_model(model, test_data))
    print(eval_model_no_grad(model, test_data))


def report(model, dev_data):
    print(eval_model(model, dev_data))  # neither after .eval() nor evaluation code
'''


def test_imported_helper_called_in_evaluation_code(tmp_path):
    # outside any loop: the helper's file is read because the call is after model.eval()
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "metrics.py").write_text(EVAL_HELPERS)
    (pkg / "run.py").write_text(EVAL_CALLER)
    assert found([pkg / "run.py"]) == [("run.py", 8, "TMM103")]


METERS = '''\
class AverageMeter:
    def __init__(self):
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.sum += val * n
        self.count += n


class Printer:
    def update(self, val, n=1):
        print(val, n)
'''

FIT_METER = '''\
from utils.meters import AverageMeter, Printer


def fit(model, loader, optimizer, criterion):
    losses = AverageMeter()
    shown = Printer()
    for x, y in loader:
        loss = criterion(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.update(loss, x.size(0))
        losses.update(loss.item(), x.size(0))
        shown.update(loss, x.size(0))
    return losses.sum / losses.count
'''


def test_method_of_a_class_imported_from_another_file(tmp_path):
    (tmp_path / "utils").mkdir()
    (tmp_path / "utils" / "meters.py").write_text(METERS)
    (tmp_path / "fit.py").write_text(FIT_METER)
    # only the meter that keeps its argument, given the loss itself; the finding names the
    # other file's line
    assert found([tmp_path / "fit.py"]) == [("fit.py", 12, "TMM101")]
    result = lint_paths([str(tmp_path / "fit.py")], config=LintConfig(), jobs=1)
    assert "(meters.py:7)" in result.violations[0].message


TRAINER = '''\
from utils.meters import AverageMeter


class Trainer:
    def __init__(self, model, loader, optimizer, criterion):
        self.model, self.loader = model, loader
        self.optimizer, self.criterion = optimizer, criterion
        self.losses = AverageMeter()
        self.shown = AverageMeter()
        self.other = AverageMeter()

    def reset(self):
        self.other = None  # not always a meter: its calls stay unknown

    def train_epoch(self):
        for x, y in self.loader:
            loss = self.criterion(self.model(x), y)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            self.losses.update(loss, x.size(0))
            self.shown.update(loss.item(), x.size(0))
            self.other.update(loss, x.size(0))
'''


def test_method_of_an_attribute_bound_to_an_imported_class(tmp_path):
    (tmp_path / "utils").mkdir()
    (tmp_path / "utils" / "meters.py").write_text(METERS)
    (tmp_path / "trainer.py").write_text(TRAINER)
    assert found([tmp_path / "trainer.py"]) == [("trainer.py", 21, "TMM101")]


RUNNER = '''\
from utils.meters import AverageMeter


class Runner:
    def __init__(self, model, optimizer, criterion):
        self.model, self.optimizer, self.criterion = model, optimizer, criterion
        self.losses = AverageMeter()
        self.shown = AverageMeter()

    def train_step(self, x, y):
        loss = self.criterion(self.model(x), y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.losses.update(loss, x.size(0))
        self.shown.update(loss.item(), x.size(0))

    def report(self, loss):
        self.losses.update(loss, 1)  # not a step: the imported class is not read here
'''


def test_imported_class_in_a_train_step_method_without_a_loop(tmp_path):
    # train_step runs once per step, like a loop's body: the meter's file is read there
    (tmp_path / "utils").mkdir()
    (tmp_path / "utils" / "meters.py").write_text(METERS)
    (tmp_path / "runner.py").write_text(RUNNER)
    assert found([tmp_path / "runner.py"]) == [("runner.py", 15, "TMM101")]


ENGINE = '''\
class Engine:
    def __init__(self, model, optimizer, criterion):
        self.model, self.optimizer, self.criterion = model, optimizer, criterion

    def train_step(self, x, y):
        self.optimizer.zero_grad()
        loss = self.criterion(self.model(x), y)
        loss.backward()
        self.optimizer.step()
        return loss

    def train_step_item(self, x, y):
        return self.train_step(x, y).item()
'''

RUN = '''\
from engine import Engine


def main(model, optimizer, criterion, loader):
    engine = Engine(model, optimizer, criterion)
    total = clean = 0
    for x, y in loader:
        total += engine.train_step(x, y)
        clean += engine.train_step_item(x, y)
    return total, clean
'''


def test_method_of_an_imported_class_returning_the_loss(tmp_path):
    (tmp_path / "engine.py").write_text(ENGINE)
    (tmp_path / "run.py").write_text(RUN)
    assert found([tmp_path / "run.py"]) == [("run.py", 8, "TMM101")]


SCALED_STEP = '''\
from utils.meters import AverageMeter


class Runner:
    def __init__(self, model, optimizer):
        self.model, self.optimizer = model, optimizer
        self.losses = AverageMeter()

    def train_step(self, x):
        loss = self.model(x).mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.losses.update(loss * 1000)
'''


def test_a_scaled_loss_is_parenthesised_in_the_suggested_fix(tmp_path):
    (tmp_path / "utils").mkdir()
    (tmp_path / "utils" / "meters.py").write_text(METERS)
    (tmp_path / "run.py").write_text(SCALED_STEP)
    result = lint_paths([str(tmp_path / "run.py")], config=LintConfig(), jobs=1)
    assert [(v.line, v.code) for v in result.violations] == [(14, "TMM101")]
    assert "pass (loss * 1000).detach() (or (loss * 1000).item()" in \
        result.violations[0].message

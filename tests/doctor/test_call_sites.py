"""From a statement inside a helper to the call that hands it the values (static)."""

from __future__ import annotations

import textwrap

import pytest

from torchmem.doctor.call_sites import caller_statement
from torchmem.doctor.source import find_statements
from torchmem.doctor.statement_rank import best_statement

SOURCE = '''
from collections import OrderedDict


class Meter:
    def update(self, val, n=1):
        self.sum = self.sum + val * n


class Summary:
    def __init__(self):
        self._parts = {}

    def add(self, d):
        parts = self._parts
        for k, v in d.items():
            parts[k].append(v)


class Model:
    def step(self, x):
        out = self.net(x)
        self.history.append(out)


def log_scalar(meters, key, value):
    meters[key].update(value, 1)


def train(model, meters, summary, loader):
    registry = OrderedDict()
    registry.update({"a": 1})
    for x in loader:
        loss = model.step(x)
        log_scalar(meters, "loss", loss * 2)
        summary.add({"out": loss})
'''


@pytest.fixture()
def source_file(tmp_path):
    path = tmp_path / "helpers_src.py"
    path.write_text(textwrap.dedent(SOURCE), encoding="utf-8")
    return str(path)


def _lift(path, want, file):
    stmt = best_statement(find_statements(path, [file]), want, exact=path)
    return stmt, caller_statement(stmt, [file])


def test_a_value_handed_through_two_helpers_is_lifted_to_the_call_that_makes_it(source_file):
    stmt, lifted = _lift("meters['loss'].sum", "sum", source_file)
    assert stmt.line == 7  # inside Meter.update
    call, through = lifted
    assert (call.line, call.function, call.value) == (35, "train", "loss * 2")
    assert [c.line for c in through] == [27]  # log_scalar passes `value` on unchanged


def test_a_container_filled_through_an_alias_is_lifted_to_the_method_call(source_file):
    stmt, lifted = _lift("summary._parts", "container", source_file)
    assert stmt.line == 17 and stmt.kind == "add"  # parts[k].append(v), parts = self._parts
    call, through = lifted
    assert (call.line, call.code, through) == (36, 'summary.add({"out": loss})', [])


def test_a_value_the_method_makes_itself_stays_on_its_line(source_file):
    stmt, lifted = _lift("model.history", "container", source_file)
    assert stmt.line == 23 and lifted is None


def test_ambiguous_or_foreign_call_sites_are_not_lifted(tmp_path):
    src = SOURCE + '''
def other(meters):
    for i in range(3):
        log_scalar(meters, "acc", i)
'''
    path = tmp_path / "two_callers.py"
    path.write_text(textwrap.dedent(src), encoding="utf-8")
    # log_scalar is now called from two loops: the line would be a guess
    stmt = best_statement(find_statements("meters['loss'].sum", [str(path)]), "sum")
    assert caller_statement(stmt, [str(path)]) is None


def test_a_helper_that_computes_with_a_method_call_keeps_the_line(tmp_path):
    # `z.detach()[::10]` is made in the helper: that is the statement to change
    src = '''
def keep(logs, z):
    logs["z"].append(z.detach()[::10])

def run(logs, batches):
    for z in batches:
        keep(logs, z)
'''
    path = tmp_path / "view_helper.py"
    path.write_text(textwrap.dedent(src), encoding="utf-8")
    stmt = best_statement(find_statements("logs['z']", [str(path)]), "container", exact="logs['z']")
    assert stmt.line == 3 and caller_statement(stmt, [str(path)]) is None


def test_a_value_made_by_calling_a_function_it_was_given_keeps_the_line(tmp_path):
    # `loss = loss_function(*tensors)` is made in optimize(): its caller only passes the
    # function, so the line to change is the append inside optimize()
    src = '''
from functools import reduce

def optimize(tensors, loss_function, steps=10):
    losses = []
    for _ in range(steps):
        loss = loss_function(*tensors)
        losses.append(reduce(lambda x, y: x + y, loss))
    return losses

def main(u, v, fn):
    optimize([u, v], fn)
'''
    path = tmp_path / "optimize_src.py"
    path.write_text(textwrap.dedent(src), encoding="utf-8")
    stmt = best_statement(find_statements("losses", [str(path)]), "container", exact="losses")
    assert stmt.line == 8 and caller_statement(stmt, [str(path)]) is None


def test_a_value_made_by_calling_an_object_the_module_made_keeps_the_line(tmp_path):
    # `criterion` and `model` are objects built at module level: `loss` is made inside
    # validate(), whose caller only hands it the batches
    src = '''
import torch

model = torch.nn.Linear(4, 1)
criterion = torch.nn.MSELoss()

def validate(batches):
    val_loss = 0.0
    for x, y in batches:
        loss = criterion(model(x), y)
        val_loss += loss
    return val_loss

score = validate([(torch.randn(2, 4), torch.randn(2, 1))])
'''
    path = tmp_path / "module_objects.py"
    path.write_text(textwrap.dedent(src), encoding="utf-8")
    stmt = best_statement(find_statements("val_loss", [str(path)]), "sum", exact="val_loss")
    assert stmt.line == 11 and caller_statement(stmt, [str(path)]) is None


def test_a_plain_function_of_the_module_still_hands_the_value_through(tmp_path):
    src = '''
def scale(v):
    return v * 2

def add(meter, val):
    meter.total = meter.total + scale(val)

def run(meter, batches):
    for b in batches:
        add(meter, b + 1)
'''
    path = tmp_path / "plain_function.py"
    path.write_text(textwrap.dedent(src), encoding="utf-8")
    stmt = best_statement(find_statements("meter.total", [str(path)]), "sum", exact="meter.total")
    call, _ = caller_statement(stmt, [str(path)])
    assert (stmt.line, call.line, call.value) == (6, 10, "b + 1")

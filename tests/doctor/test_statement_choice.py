"""Which statement names a chained running statistic or a name-mangled cache
(doctor/source.py, doctor/operands.py): an in-place update ``x.mul_(m).add_(v)`` is a
statement that extends the chain; of two statements that rebind the same attribute, the
one that brings in a value with a graph is named when the chain holds forward passes;
``obj.__cache`` inside ``class memoize`` is the attribute ``_memoize__cache``."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from torchmem.doctor.source import find_statements
from torchmem.doctor.statement_rank import best_statement

STATS = """
import torch
from torch import nn


class RunningNorm(nn.Module):
    def __init__(self, features, momentum=0.1, standing=False):
        super().__init__()
        self.momentum = momentum
        self.standing = standing
        self.register_buffer("running_var", torch.ones(features))

    def forward(self, x):
        var = x.var(0)
        self.running_var.mul_(1 - self.momentum).add_(var * self.momentum)
        return x / torch.sqrt(var + 1e-5)


torch.manual_seed(0)
net = nn.Sequential(nn.Linear(16, 64), RunningNorm(64), nn.Linear(64, 1))
opt = torch.optim.SGD(net.parameters(), lr=0.01)
for step in range(40):
    x = torch.randn(32, 16)
    loss = net(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(float(net[1].running_var.mean()))
"""

STATS_NO_GRAD = STATS.replace(
    "        self.running_var.mul_(1 - self.momentum).add_(var * self.momentum)\n",
    "        with torch.no_grad():\n"
    "            self.running_var.mul_(1 - self.momentum).add_(var * self.momentum)\n")

# two branches rebind the statistic; the first (not taken) adds detached data only
STATS_BRANCHES = STATS.replace(
    "        self.running_var.mul_(1 - self.momentum).add_(var * self.momentum)\n",
    "        if self.standing:\n"
    "            self.running_var[:] = self.running_var + var.data\n"
    "        else:\n"
    "            self.running_var[:] = self.running_var * (1 - self.momentum) + var * self.momentum\n")


@pytest.mark.slow
def test_in_place_update_of_a_running_statistic_is_the_culprit_line(doctor):
    capture, _ = doctor.run(STATS)
    f = capture["findings"][0]
    assert f["cause"] == "hidden_state_chain"
    assert f["culprit"]["name"] == "net[1].running_var"
    assert f["culprit"]["line"] == doctor.line(STATS, ".mul_(1 - self.momentum).add_(")


@pytest.mark.slow
def test_running_statistic_updated_under_no_grad_stays_quiet(doctor):
    capture, _ = doctor.run(STATS_NO_GRAD)
    assert capture["findings"] == []


@pytest.mark.slow
def test_of_two_branches_the_one_that_brings_the_graph_is_named(doctor):
    capture, _ = doctor.run(STATS_BRANCHES)
    f = capture["findings"][0]
    assert f["cause"] == "hidden_state_chain"
    assert f["culprit"]["line"] == doctor.line(STATS_BRANCHES, "var * self.momentum")


def _write(tmp_path: Path, source: str) -> str:
    path = tmp_path / "mod.py"
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return str(path)


def test_in_place_chain_is_one_statement_and_resets_are_not_updates(tmp_path):
    file = _write(tmp_path, """
        class Norm:
            def forward(self, var, m):
                self.stat.mul_(1 - m).add_(var * m)
                self.stat.zero_()
                self.other.add_(var)
    """)
    found = find_statements("net.stat", [file])
    assert [(s.kind, s.line) for s in found] == [("inplace", 4)]


BRANCHES = """
    class Norm:
        def forward(self, x, var, m):
            if self.stat.device != x.device:
                self.stat = self.stat.to(x.device)
            if self.standing:
                self.stat[:] = self.stat + var.data
            else:
                self.stat[:] = self.stat * (1 - m) + var * m
            y, self.stat = update(x, self.stat)
            return y
"""


def test_chain_holding_forward_passes_prefers_the_statement_that_brings_a_graph(tmp_path):
    file = _write(tmp_path, BRANCHES)
    found = find_statements("net.stat", [file])
    brings = {s.line: s.brings for s in found}
    assert brings == {5: False, 7: False, 9: True, 10: True}
    # assignments first (`y, self.stat = update(x, self.stat)`, not `.to(x.device)`)
    assert best_statement(found, "chain", function="forward", brings_graph=True).line == 10
    setitems = [s for s in found if s.kind == "setitem"]
    assert best_statement(setitems, "chain", function="forward", brings_graph=True).line == 9
    # without the evidence (no forward pass in the chain) the first rebinding that reads
    # the old value is named, though not `self.stat.to(x.device)`: a move links nothing
    assert best_statement(found, "chain", function="forward").line == 10
    assert best_statement(setitems, "chain", function="forward").line == 7


MANGLED = """
    class memoize:
        def __call__(self, obj, key):
            try:
                cache = obj.__cache
            except AttributeError:
                cache = obj.__cache = {}
            res = cache[key] = self.func(obj, key)
            return res


    class Other:
        def fill(self, obj, key):
            obj.__cache[key] = key
"""


def test_name_mangled_attribute_matches_inside_its_class_only(tmp_path):
    file = _write(tmp_path, MANGLED)
    found = find_statements("dataset._memoize__cache", [file])
    assert [s.line for s in found] == [7, 8]  # not `Other`'s `_Other__cache`
    assert best_statement(found, "container").line == 8


FRESH = """
    import random
    import torch


    def run(model):
        x = torch.randn(random.randint(10, 300), 64)
        x.clamp_(min=0)
        return model(x)
"""


def _fresh(file, **kw):
    from torchmem.doctor.fresh_values import rebound_fresh
    from torchmem.doctor.pathstats import PathStats

    fields = dict(path="x", kind="local", type="Tensor", depth=0, root="x", function="run",
                  file=file, tensors=1, storage_bytes=64 * 300 * 4, survived=0.0)
    return rebound_fresh(PathStats(**{**fields, **kw}), graphs=False)


def test_in_place_update_does_not_make_a_fresh_local_accumulate(tmp_path):
    assert _fresh(_write(tmp_path, FRESH))  # rebound each call; clamp_ changes that value only
    # near miss: in the loop that runs the steps, `x = torch.cat([x, new])` reads the value
    # an earlier iteration bound
    looped = FRESH.replace("    x = torch.randn(", "    for _ in range(9):\n            x = torch.cat([x, torch.randn(") \
        .replace(", 64)\n", ", 64)])\n")
    assert "for _ in range(9)" in looped
    (tmp_path / "looped").mkdir()  # another file: parsed trees are cached by path and mtime
    assert not _fresh(_write(tmp_path / "looped", looped))


CALLEE = """
    import torch


    def detect(image, model):
        image = image[None]
        return run(image, model)


    def run(x, model):
        x = x[:, [2, 1, 0]]
        return model(x)


    def relay(image, model):
        return run(image, model)


    def gather(feats, items):
        for item in items:
            feats = torch.cat([feats, item])
        return feats
"""


def test_a_local_started_afresh_by_each_call_does_not_accumulate(tmp_path):
    # `x = x[:, [2, 1, 0]]` outside any loop of its function reads the value bound earlier
    # in the same call (here the parameter), never an earlier step's; a parameter that its
    # function never rebinds is whatever each call hands in
    file = _write(tmp_path, CALLEE)
    assert _fresh(file)
    assert _fresh(file, path="image", root="image", function="detect")
    assert _fresh(file, path="image", root="image", function="relay")
    # near misses: a loop of the function carries `feats` from one iteration to the next;
    # a module-level variable lives across the steps; something it held is still alive; a
    # graph that grows is never a fresh value
    assert not _fresh(file, path="feats", root="feats", function="gather")
    assert not _fresh(file, function="<module>")
    assert not _fresh(file, survived=0.5)
    from torchmem.doctor.fresh_values import rebound_fresh
    from torchmem.doctor.pathstats import PathStats
    assert not rebound_fresh(PathStats(path="x", kind="local", type="Tensor", depth=0, root="x",
                                       function="run", file=file, survived=0.0), graphs=True)


def test_a_rebinding_through_a_temporary_reads_the_old_value(tmp_path):
    # `new = f(old)`, `new = g(new, old)`, `old = new`: `old = new` carries the old value
    # on, `old = base` only starts the chain; flow-insensitive but per function
    path = tmp_path / "chain.py"
    path.write_text(textwrap.dedent("""
        def attack(base, steps):
            old = base
            for i in range(steps):
                new = step(old)
                new = mix(new, old)
                old = new
            return old

        def other(new):
            old = new
    """))
    found = {s.line: s.kind for s in find_statements("old", [str(path)])}
    assert found == {3: "rebind", 7: "assign", 11: "rebind"}
    assert best_statement(find_statements("old", [str(path)]), "chain").line == 7


def test_a_container_whose_items_are_replaced_names_the_replacement(tmp_path):
    path = tmp_path / "groups.py"
    path.write_text(textwrap.dedent("""
        class Opt:
            def add(self, params):
                self.state.append(init(params))

            def step(self, loss):
                for i, s in enumerate(self.state):
                    self.state[i] = update(s, loss)
    """))
    found = find_statements("opt.state", [str(path)])
    assert best_statement(found, "chain").line == 4  # appends first, by default
    assert best_statement(found, "chain", replaced=True).line == 8


def test_a_rebinding_to_its_own_value_reshaped_links_nothing(tmp_path):
    # a player's state computed from the recurrent state, then viewed in another shape:
    # the view reads the old name but joins no other value; the statement before it, which
    # computes the state from the recurrent state, links the chain (sheeprl#198)
    path = tmp_path / "player.py"
    path.write_text(textwrap.dedent("""
        class Player:
            def act(self, obs):
                self.recurrent = self.rnn(self.stochastic, self.recurrent)
                _, self.stochastic = self.represent(self.recurrent, obs)
                self.stochastic = self.stochastic.view(*self.stochastic.shape[:-2], -1)
                self.hidden = self.hidden.view(1, -1) + self.encode(obs)
    """))
    found = find_statements("player.stochastic", [str(path)])
    assert {s.line: s.kind for s in found} == {5: "rebind", 6: "assign"}
    assert best_statement(found, "chain", function="act").line == 5
    # a value that adds another to the reshaped old value links it: still preferred
    hidden = find_statements("player.hidden", [str(path)])
    assert best_statement(hidden, "chain", function="act").line == 7

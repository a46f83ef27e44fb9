"""Diagnosis units: snapshots of live user state (exact bytes), source lookup, causes, fixes."""

from __future__ import annotations

import dataclasses
import gc
import sys
import textwrap
import weakref

import pytest
import torch
from torch import nn

from torchmem.doctor.causes import Evidence, GarbageRecord, GradCheck
from torchmem.doctor.diagnosis import diagnose
from torchmem.doctor.culprit import PathStats, Snapshot, take_snapshot
from torchmem.doctor.fixes import fix_for
from torchmem.doctor.path_keys import writes_other_key
from torchmem.doctor.source import find_statements, parse_path
from torchmem.doctor.statement_rank import best_statement

HERE = __file__


def user(filename: str) -> bool:
    return filename == HERE


def snap(step: int = 1) -> Snapshot:
    return take_snapshot(step, sys._getframe(1), None, user)


# -- snapshots: exact bytes of known tensors -------------------------------------------
def test_snapshot_counts_exact_storage_bytes_and_excludes_parameters():
    model = nn.Linear(256, 256)  # 263168 bytes of parameters: owned, never a culprit
    kept = [torch.zeros(1024) for _ in range(3)]  # 3 x 4096 bytes
    s = snap()
    assert s.paths["kept"].tensors == 3
    assert s.paths["kept"].storage_bytes == 3 * 4096
    assert s.paths["kept"].items == 3
    assert s.paths["model"].storage_bytes == 0
    assert s.owned_bytes == 256 * 256 * 4 + 256 * 4
    del model, kept


def test_snapshot_measures_saved_activations_of_a_kept_graph():
    lin = nn.Linear(256, 64)
    outs = [lin(torch.randn(8, 256))]  # AddmmBackward0 saves the 8x256 input (8192 bytes)
    s = snap()
    stats = s.paths["outs"]
    assert stats.grad_tensors == 1
    assert stats.storage_bytes == 8 * 64 * 4
    assert stats.saved_bytes == 8 * 256 * 4
    assert stats.live_nodes >= 1 and stats.freed_nodes == 0
    outs[0].sum().backward()
    s = snap()
    assert s.paths["outs"].saved_bytes == 0  # backward freed what the graph saved
    assert s.paths["outs"].freed_nodes >= 1
    del lin, outs


def test_snapshot_sees_view_pinning_and_attribute_paths():
    class Holder:
        def __init__(self) -> None:
            self.rows = {"first": torch.zeros(1000)[:10]}

    h = Holder()
    s = snap()
    stats = s.paths["h.rows['first']"]
    assert stats.storage_bytes == 4000 and stats.used_bytes == 40
    assert stats.pinned_bytes == 3960
    assert stats.owner_class == "Holder"
    del h


def test_snapshot_follows_closures_modules_and_hook_dicts():
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    acts = []
    handle = model[1].register_forward_hook(lambda m, i, o: acts.append(o))
    model.memory = torch.zeros(16)  # plain attribute on a module
    s = snap()
    assert s.paths["model[1]._forward_hooks"].hooks == 1
    assert s.paths["model"].hooks == 1
    assert s.paths["model.memory"].storage_bytes == 64
    handle.remove()
    del model


def test_snapshot_keeps_no_tensor_alive_and_leaves_no_stale_frame_locals():
    t = torch.zeros(4096)
    ref = weakref.ref(t)
    s = snap()
    assert s.paths["t"].storage_bytes == 16384
    t = None  # rebinding must free it: the walker may not leave a copy of the locals behind
    gc.collect()
    assert ref() is None
    for stats in s.paths.values():  # plain data only (PathStats has slots: read its fields)
        values = [getattr(stats, f.name) for f in dataclasses.fields(stats)]
        assert not any(isinstance(v, torch.Tensor) for v in values)


def test_chain_reaches_more_nodes_each_step():
    cell = nn.GRUCell(8, 8)
    h = torch.zeros(2, 8)
    counts = []
    for step in range(1, 4):
        h = cell(torch.randn(2, 8), h)
        counts.append(snap(step).paths["h"].graph_nodes)
    assert counts[0] < counts[1] < counts[2]
    assert counts[2] - counts[1] == counts[1] - counts[0]
    del cell, h


# -- source lookup -------------------------------------------------------------------------
SOURCE = '''
import torch

class Trainer:
    def __init__(self):
        self.history = []
        self.failure = None

    def step(self, out, loss, metrics):
        self.history.append(out)
        metrics["loss"].append(loss)

def train(model, loader, hidden):
    losses = []
    total = 0
    cache = {}
    for i, x in enumerate(loader):
        out, hidden = model(x, hidden)
        losses.append(out.sum())
        total += out.mean()
        cache[i] = out.detach()
        model.fc.register_forward_hook(lambda *a: None)
    return losses
'''


@pytest.fixture()
def source_file(tmp_path):
    path = tmp_path / "train_src.py"
    path.write_text(textwrap.dedent(SOURCE), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("path, want, line, kind", [
    ("losses", "container", 19, "add"),
    ("total", "container", 20, "augassign"),
    ("cache", "container", 21, "setitem"),
    ("hidden", "chain", 18, "assign"),
    ("trainer.history", "container", 10, "add"),  # trailing name: self.history in a method
    ("metrics['loss']", "container", 11, "add"),
    ("model.fc._forward_hooks", "hook", 22, "hook"),
])
def test_best_statement_finds_the_adding_line(source_file, path, want, line, kind):
    found = find_statements(path, [source_file], hook=want == "hook")
    best = best_statement(found, want)
    assert best is not None and (best.line, best.kind) == (line, kind)


def test_initialisation_is_not_the_adding_statement(source_file):
    found = find_statements("losses", [source_file])
    assert {s.line for s in found} >= {14, 19}
    assert best_statement(found, "chain").line == 19


LOGS = '''
def log(logs, z, loss, params):
    logs["z"].append(z.detach()[::10])
    for name, p in params:
        logs[f"norm_{name}"].append(p.norm().item())

def train(logs, batches):
    for z, loss in batches:
        log(logs, z, loss, [])
        logs["avg_loss"].append(loss.item())
        logs[key].append(loss)
'''


def test_statements_that_fill_another_key_are_not_the_culprits_line(tmp_path):
    # several statements feed one dict: the one that fills the culprit's key is chosen
    # even when others sit in a loop (another constant key, an f-string that cannot
    # spell it); a key that is not a constant may be it
    path = tmp_path / "logs_src.py"
    path.write_text(textwrap.dedent(LOGS), encoding="utf-8")
    found = find_statements("logs['z']", [str(path)])
    assert {s.line for s in found} == {3, 5, 10, 11}
    best = best_statement([s for s in found if s.line != 11], "container", exact="logs['z']")
    assert best.line == 3
    assert best_statement(found, "container", exact="logs['z']").line == 11
    assert best_statement(found, "container", exact="logs['avg_loss']").line == 10
    assert writes_other_key("logs[f'norm_{name}']", "logs['z']")
    assert not writes_other_key("logs[f'norm_{name}']", "logs['norm_fc']")
    assert writes_other_key("self.logs['a']", "trainer.logs['b']")
    assert not writes_other_key("self.sum", "meters['train']['loss'].sum")
    assert not writes_other_key("logs['z']", "logs")


def test_parse_path():
    assert parse_path("self.metrics['loss']") == ["self", "metrics"]
    assert parse_path("model[1]._forward_hooks") == ["model", "_forward_hooks"]
    assert parse_path("make.<locals>.cb:out") == ["out"]


# -- causes from synthetic evidence ----------------------------------------------------------
def stats(path, **kw):
    base = dict(path=path, kind="local", type="list", depth=0, root=path, function="main")
    base.update(kw)
    return PathStats(**base)


def snaps(path, per_step, steps=(4, 8, 16), **kw):
    out = []
    for step in steps:
        values = {k: (v(step) if callable(v) else v) for k, v in per_step.items()}
        out.append(Snapshot(step=step, paths={path: stats(path, **values, **kw)}))
    return out


def test_items_with_graphs_freed_by_backward_are_retained_graph():
    ev = Evidence(snapshots=snaps("losses", dict(items=lambda s: s, tensors=lambda s: s,
                                                  grad_tensors=lambda s: s, storage_bytes=lambda s: 4 * s,
                                                  used_bytes=lambda s: 4 * s, graph_nodes=lambda s: 5 * s,
                                                  freed_nodes=lambda s: 3 * s, example="() float32")),
                  steps=16)
    (f,) = diagnose(ev)
    assert f.cause == "retained_graph" and f.culprit.name == "losses"


def test_graphs_still_holding_saved_tensors_are_eval_graph_unless_backward_kept_them():
    per = dict(items=lambda s: s, tensors=lambda s: s, grad_tensors=lambda s: s,
               storage_bytes=lambda s: 4096 * s, used_bytes=lambda s: 4096 * s,
               saved_bytes=lambda s: 65536 * s, graph_nodes=lambda s: 5 * s, live_nodes=lambda s: 3 * s)
    (f,) = diagnose(Evidence(snapshots=snaps("preds", per), steps=16))
    assert f.cause == "eval_graph"
    # retained backwards leave the nodes they ran through holding their saved tensors: the
    # flag is the cause only for what a retained backward started from
    ev = Evidence(snapshots=snaps("preds", per), steps=16, backward_steps=16, retain_graph_steps=16,
                  retained_roots={"preds": 2})
    assert diagnose(ev)[0].cause == "backward_flags_graph"
    ev = Evidence(snapshots=snaps("preds", per), steps=16, backward_steps=16, retain_graph_steps=16)
    assert diagnose(ev)[0].cause == "retained_graph"
    ev = Evidence(snapshots=snaps("preds", per), steps=16, backward_steps=16, create_graph_steps=16)
    assert diagnose(ev)[0].cause == "backward_flags_graph"


def test_one_tensor_with_a_growing_graph_is_a_hidden_state_chain():
    per = dict(items=2, tensors=2, grad_tensors=2, storage_bytes=8192, used_bytes=8192,
               saved_bytes=lambda s: 40_000 * s, graph_nodes=lambda s: 15 * s,
               max_chain=lambda s: 15 * s, chain_numel=1024)
    (f,) = diagnose(Evidence(snapshots=snaps("state", per, type="tuple"), steps=16))
    assert f.cause == "hidden_state_chain"
    assert "tuple(t.detach() for t in state)" in f.fix


def test_detached_tensors_and_pinning_views():
    per = dict(items=lambda s: s, tensors=lambda s: s, storage_bytes=lambda s: 65536 * s,
               used_bytes=lambda s: 65536 * s)
    assert diagnose(Evidence(snapshots=snaps("memo", per, type="dict"), steps=16))[0].cause == "growing_container"
    per["used_bytes"] = lambda s: 16 * s
    assert diagnose(Evidence(snapshots=snaps("firsts", per), steps=16))[0].cause == "view_pins_storage"


def test_growth_that_stopped_is_quiet():
    # a cache that filled during the first 8 steps, then stopped (bounded)
    per = dict(items=lambda s: min(s, 8), tensors=lambda s: min(s, 8),
               storage_bytes=lambda s: 65536 * min(s, 8), used_bytes=lambda s: 65536 * min(s, 8))
    assert diagnose(Evidence(snapshots=snaps("cache", per, steps=(4, 8, 16, 32)), steps=32)) == []


def test_tiny_detached_scalars_and_float_lists_are_quiet():
    per = dict(items=lambda s: s, tensors=lambda s: s, storage_bytes=lambda s: 4 * s, used_bytes=lambda s: 4 * s)
    assert diagnose(Evidence(snapshots=snaps("recent", per), steps=16)) == []


def test_reference_cycle_and_grad_findings():
    anchors = [("closure Step.<lambda> (captures self)", "self.cb", "t.py", 8, "self.cb = lambda: self.out")]
    ev = Evidence(garbage=[GarbageRecord(8, 4, 30, 4 << 20, 4 << 20, anchors),
                           GarbageRecord(16, 8, 60, 8 << 20, 8 << 20, anchors)], steps=16)
    (f,) = diagnose(ev)
    assert f.cause == "reference_cycle" and f.culprit.line == 8 and f.culprit.name == "self.cb"
    assert f.bytes_per_step == pytest.approx((12 << 20) / 12)
    checks = [GradCheck(step=s, accumulated=True, zero_grad_calls=0, backward_calls=1, grad_bytes=100,
                        optimizer_name="opt", file="t.py", line=12, code="opt.step()") for s in range(4)]
    (g,) = diagnose(Evidence(grad_checks=checks, steps=16))
    assert g.cause == "grad_not_cleared" and g.bytes_per_step == 0 and g.culprit.name == "opt"
    checks[1] = GradCheck(step=1, accumulated=False, zero_grad_calls=1, backward_calls=1, grad_bytes=100)
    checks[2] = GradCheck(step=2, accumulated=False, zero_grad_calls=1, backward_calls=1, grad_bytes=100)
    assert diagnose(Evidence(grad_checks=checks, steps=16)) == []


def test_accumulated_gradients_that_no_update_applies_are_not_grad_not_cleared():
    # backward() in a loop with no update in between (gradients summed on purpose): the
    # same .grad storages accumulate, but nothing applies them
    def checks(updated):
        return [GradCheck(step=s, accumulated=True, zero_grad_calls=0, backward_calls=1,
                          grad_bytes=100, optimizer_name="model", manual=True, updated=updated,
                          file="t.py", line=9, code="loss.backward()") for s in range(2, 6)]

    assert diagnose(Evidence(grad_checks=checks(False), steps=16)) == []
    (f,) = diagnose(Evidence(grad_checks=checks(True), steps=16))
    assert f.cause == "grad_not_cleared" and f.culprit.name == "model"


def test_cache_thrash_needs_empty_cache_most_steps():
    ev = Evidence(empty_cache_steps=20, steps=20, empty_cache_site=("t.py", 30, "torch.cuda.empty_cache()"))
    (f,) = diagnose(ev)
    assert f.cause == "cache_thrash" and f.culprit.line == 30
    assert diagnose(Evidence(empty_cache_steps=2, steps=20)) == []


def test_fix_texts_are_built_from_the_line():
    from torchmem.doctor.source import Statement

    s = Statement("t.py", 9, "total += loss", "augassign", "main", True, "loss", "total")
    assert "`total += loss.item()`" in fix_for("retained_graph", "total", s, scalar=True)
    s = Statement("t.py", 9, "keep.append(x[0, :4])", "add", "main", True, "x[0, :4]", "keep", "append")
    assert "`keep.append(x[0, :4].clone())`" in fix_for("view_pins_storage", "keep", s, has_graph=False)


def test_fragmentation_from_allocator_evidence():
    ev = Evidence(steps=32, allocator={"cuda:0": {
        "verdict": "fragmented", "inactive_split": 300 << 20, "judged": 6, "fragmented": 5,
        "evidence": ["1.0 GiB reserved, 300.0 MiB in split free blocks"],
        "advice": ["Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"]}})
    (f,) = diagnose(ev)
    assert f.cause == "fragmentation" and f.device == "cuda:0" and f.bytes == 300 << 20
    assert "expandable_segments" in f.fix
    ev.allocator["cuda:0"]["verdict"] = "ok"
    assert diagnose(ev) == []

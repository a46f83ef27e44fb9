"""The doctor end to end on small scripts: cause, culprit and line; quiet on healthy ones.

Each script in ``scripts_unit/`` runs in-process under :func:`run_script` with a
:class:`DoctorProbe`, exactly as ``torchmem doctor`` runs it.
"""

from __future__ import annotations

import gc
import textwrap
from pathlib import Path

import pytest
import torch

from torchmem.doctor.probe import DoctorProbe, analysis_steps
from torchmem.doctor.runner import Target, run_script

SCRIPTS = Path(__file__).parent / "scripts_unit"


def doctor(path: str | Path, *args: str, max_steps: int | None = None) -> tuple[DoctorProbe, object]:
    # garbage left by earlier tests of this process, collected during the run, would lower
    # the C heap readings of scripts whose growth is seen only there (numpy_history.py)
    gc.collect()
    probe = DoctorProbe(census_at_end=False)
    result = run_script(Target(path=str(path), args=list(args)), [probe], monitor_interval=None,
                        max_steps=max_steps)
    return probe, result


@pytest.mark.parametrize("script, cause, culprit, line", [
    ("retained_list.py", "retained_graph", "outputs", 16),
    ("running_sum.py", "retained_graph", "total", 14),
    ("hidden_chain.py", "hidden_state_chain", "state", 23),
    # rebound in a loop over a prompt, then in the loop that calls the model at every
    # step: the statement in the loop the steps run in
    ("hidden_two_loops.py", "hidden_state_chain", "h", 12),
    ("eval_graph.py", "eval_graph", "self.predictions", 15),
    # a callback's predictions, with graphs, emptied before the pass is seen to end: what
    # it held at the pass's forwards is judged, not its state at the end
    ("eval_callback_emptied.py", "eval_graph", "callback.preds", 41),
    ("view_pins.py", "view_pins_storage", "firsts", 14),
    # scalar losses that are views of their elementwise buffer, kept with their graphs
    ("loss_log_dicts.py", "retained_graph", "outputs", 13),
    ("dict_keys_helper.py", "retained_graph", "history['probs']", 10),
    ("meter_helper.py", "retained_graph", "meters['loss'].total", 31),  # the call, not Meter.update
    ("recorder_alias.py", "retained_graph", None, 27),  # rec.add(...), not the alias's append
    # a dict of metrics handed to a helper that keeps each entry: the entry the kept key's
    # value came from, in the function that built the dict
    ("metrics_dict_handed_over.py", "retained_graph", "self.logged['penalty']", 19),
    ("detached_cache.py", "growing_container", "memo", 14),
    ("hooks_each_step.py", "growing_container", "model[1]._forward_hooks", 9),
    # the same hooks on every sub-module: the top hook dict, at its own register call
    ("hooks_per_module.py", "growing_container", "model._forward_hooks", 13),
    # a module three hops from the variable: its hook dict is still a path
    ("hooks_deep_module.py", "growing_container", "self.tools.model[1]._forward_hooks", 11),
    # stale hooks of earlier fits keep appending (registered now and then, not at every
    # interval): the list a stale hook appends to, at its append (test_stale_hooks.py)
    ("stale_extractor_hooks.py", "growing_container", None, 14),
    # registered through a loop variable, in the full branch of an if/else (the module
    # says which), not the hook registered once on another module: the dict's own call
    ("hooks_loop_branches.py", "growing_container", "model[1]._backward_hooks", 10),
    # the handles of the hooks are kept, their removal never runs: the list of handles
    ("hook_handles_not_removed.py", "growing_container", "probe.handles", 16),
    # of `insert(0, h)` and `append(h)` in two branches, the one at the end that grew
    ("handles_prepend_branch.py", "growing_container", "model[1].handles", 17),
    # written in place inside the loop, rebound once before it: the write is the line
    ("inplace_result_table.py", "hidden_state_chain", "table", 18),
    ("no_zero_grad.py", "grad_not_cleared", "opt", 7),  # the zero_grad() before the loop
    # ... in the function whose loop runs the steps, through two helpers
    ("zero_grad_before_loop.py", "grad_not_cleared", "self.optimizers", 30),
    ("manual_update_data.py", "grad_not_cleared", "net", 10),
    ("clip_no_zero_grad.py", "grad_not_cleared", "opt", 18),  # clip_grad_norm_ between backward and step
    ("cycle_closure.py", "reference_cycle", None, 8),
    ("exception_cycle.py", "reference_cycle", None, 12),
    ("ctx_keeps_output.py", "reference_cycle", "ctx.result", 8),  # a Function's ctx keeps its output
    ("closure_callback_cycle.py", "reference_cycle", "on_done", 13),  # where the closure is stored
    ("module_keeps_function_output.py", "reference_cycle", "Layer.cache", 20),  # ctx keeps a bound method
    ("cycle_stream.py", "growing_container", "stream.<internal list>", 16),  # cycle's own list
    ("numpy_history.py", "growing_container", "history['recon']", 19),  # numpy arrays, no tensor
    # numpy arrays that share the outputs' memory (`t.numpy()`): the tensors are their `.base`
    ("numpy_views_of_outputs.py", "growing_container", "features", 11),
    # every trained model's optimizer kept with it: the state each first step makes
    ("optimizers_kept_in_list.py", "growing_container", "trials", 17),
    # objects kept by a helper: its append, not the call that hands them over (a caller
    # can detach or reduce a tensor, not an object)
    ("objects_registry_helper.py", "growing_container", "registry.loaders", 10),
    # a loop over parameters before the optimizer exists is the first step source; the
    # parameters watched are found again among the optimizer's when the steps change
    ("freeze_loop_then_no_zero_grad.py", "grad_not_cleared", "opt", 14),
    # every model trained in turn stays a key of an unbounded cache, with its parameters:
    # dict keys are walked, and a module no top-level name owns counts its parameters
    ("cache_keyed_by_models.py", "growing_container", "layer_names", 7),
    # the same statistics rebound with graphs in two layers of one class: no one child of
    # `net` explains 70%, the largest of the attributes is named, at its class's statement
    ("stats_rebound_in_two_layers.py", "hidden_state_chain", "net.norm2.scale", 13),
    # the chain goes through a temporary (`candidate = f(current)`, `current = candidate`):
    # the rebinding in the loop, not `current = start` that begins each chain
    ("chain_through_temporary.py", "hidden_state_chain", "current", 23),
    # a list that keeps as many items while its graph grows: the statement that replaces
    # an item, not the append that filled it once in the constructor
    ("state_items_replaced.py", "retained_graph", "opt.velocities", 21),
    # an lru_cache under @property: the class is opened, the cache keyed on `self` keeps
    # every instance read; the line is the lru_cache decorator
    ("property_lru_cache.py", "growing_container", "Estimate.spread.fget", 11),
    # a cached closure over `self` stored on `self`: the statement that stores it closes
    # the cycle (the decorated def's first line is its decorator)
    ("cached_closure_on_self.py", "reference_cycle", "interval", 15),
    # a hook left registered by an explainer the script dropped appends at every forward
    # of a later no_grad pass: hooks are walked after the variables, so only the hook
    # reaches the list (healthy twins: the hook removed; the explainer kept and read);
    # the name, `model[2]._forward_hooks[N].activations`, has the process's hook counter
    ("stale_explainer_hook_in_eval.py", "growing_container", None, 12),
    # the top-level modules are called from two functions in turn: snapshots are taken at
    # the usual boundary (the same frames on the stack), and the dict handed to `decode`
    # is filled there
    ("two_call_sites_growing_state.py", "growing_container", "state['memory']", 13),
    # a buffer rebound with a graph in a norm layer three hops deep: the buffer is an
    # attribute that holds a graph, named with the statement that rebinds it
    ("buffer_rebound_deep.py", "hidden_state_chain", "net.stages[1][1].running_var", 13),
    # a perturbation differentiated at every attack iteration and updated by hand, whose
    # .grad nothing clears (the optimizer's zero_grad() does not): the line that reads it
    # (healthy twins: cleared after use; an unchanged input's gradients summed on purpose)
    ("input_attack_grad_summed.py", "grad_not_cleared", "delta.grad", 12),
    # a grad-enabled test pass runs straight into the next epoch's feature pass (one pass
    # for the doctor): `feats = []` made anew there is judged from its new start (healthy
    # twin: the features detached; collected in the script's own loop, not reported)
    ("eval_collection_made_anew.py", "eval_graph", "feats", 24),
    # one tensor whose own storage grows with its graph is every step's output joined on
    # (`bank = torch.cat([bank, out])`), not a hidden state of fixed size chained through
    # the steps: its graphs are evaluation graphs when no backward ran through them,
    # retained ones after a backward (hidden_chain.py above is the fixed-size twin)
    ("concat_outputs_eval.py", "eval_graph", "bank", 9),
    ("concat_logits_train.py", "retained_graph", "seen", 16),
])
def test_cause_culprit_and_line(script, cause, culprit, line, capsys):
    probe, result = doctor(SCRIPTS / script)
    assert result.exit_code == 0, result.error
    assert probe.findings, f"no finding for {script}; growth {probe.growth}"
    top = probe.findings[0]
    assert top.cause == cause
    if culprit is not None:
        assert top.culprit.name == culprit
    assert top.culprit.line == line
    assert top.fix
    assert not result.notes, result.notes  # no probe errors


def test_a_list_that_only_binds_what_grows_deeper_is_named_where_it_was_stored(tmp_path):
    # `items` stays 400 long; each item's dict gains a view of a batch output. The census
    # of the largest storages says which statement stored them (`self.vectors[name] =
    # vector`, in a helper that keeps what it is handed): the finding names the call that
    # hands the views over, not `items = [...]`. In a fresh process, as `torchmem doctor`
    # runs: in the test session the largest storages can be earlier tests' tensors.
    import json
    import subprocess
    import sys

    capture = tmp_path / "capture.json"
    proc = subprocess.run([sys.executable, "-m", "torchmem", "doctor", "--quiet", "--no-verify",
                           "--json", str(capture), str(SCRIPTS / "views_stored_deeper.py")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    top = json.loads(capture.read_text())["findings"][0]
    culprit = top["culprit"]
    assert (top["cause"], culprit["name"], culprit["line"]) == ("view_pins_storage", "items", 21)
    assert any("only makes `items`" in e and "items[" in e for e in top["evidence"])
    # the edit is where the view is stored (as for a helper's append): a copy of the piece
    assert top["fix_kind"] == "edit"
    assert top["edit"]["statement"] == "self.vectors[name] = vector.clone()"


def test_a_hook_that_holds_self_is_named_at_its_registration(tmp_path):
    # a tensor hook bound to the object that keeps the tensor closes a cycle through
    # autograd's C++ that no collector frees: in a fresh process, since the script's
    # tensors stay alive for good (in the test session they would crowd later censuses)
    import json
    import subprocess
    import sys

    capture = tmp_path / "capture.json"
    proc = subprocess.run([sys.executable, "-m", "torchmem", "doctor", "--quiet", "--no-verify",
                           "--json", str(capture), str(SCRIPTS / "self_hook_cycle.py")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    top = json.loads(capture.read_text())["findings"][0]
    culprit = top["culprit"]
    assert (top["cause"], culprit["name"], culprit["line"]) == (
        "reference_cycle", "self.save_gradient", 19)
    assert any("self -> tensor -> grad_fn -> hook -> self" in e for e in top["evidence"])


def test_evaluation_graphs_named_at_the_container_filled_not_the_object_above_it():
    # `self` gains `self.results_te` during each evaluation pass; that dict is only bound
    # to `tester.results`, which Tester.test fills at `results[i] = mse(...)` (line 30)
    probe, result = doctor(SCRIPTS / "tester_results_kept.py")
    assert result.exit_code == 0, result.error
    found = {f.culprit.name: f for f in probe.findings if f.data.get("phase") == "eval-grad"}
    assert "self" not in found, found.keys()
    kept = found["self.results_te"]
    assert kept.cause == "eval_graph"
    assert kept.culprit.line == 30
    assert any("only binds `self.results_te`" in e for e in kept.evidence)


@pytest.mark.parametrize("script", ["healthy_plateau.py", "healthy_accum.py",
                                    "healthy_fisher_no_update.py", "healthy_leaf_grad_sum.py",
                                    "healthy_clip_zero_inplace.py", "healthy_numpy_bounded.py",
                                    "healthy_trials_results_only.py",
                                    "healthy_cache_keyed_by_names.py",
                                    "healthy_chain_through_temporary.py",
                                    "healthy_property_lru_cache.py",
                                    "healthy_explainer_hook_removed.py",
                                    "healthy_explainer_kept_collects.py",
                                    "healthy_input_attack_grad_cleared.py",
                                    "healthy_input_grad_averaged.py",
                                    "healthy_eval_collection_detached.py",
                                    "healthy_eval_hidden_repackaged.py"])
def test_healthy_scripts_have_no_findings(script, tmp_path):
    # The growth verdict reads the whole process's heap, so this runs in a fresh process,
    # as `torchmem doctor` always does: inside the test session the heap also carries
    # whatever earlier tests left running.
    import json
    import subprocess
    import sys

    capture = tmp_path / "capture.json"
    proc = subprocess.run([sys.executable, "-m", "torchmem", "doctor", "--quiet", "--json",
                           str(capture), str(SCRIPTS / script)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(capture.read_text())
    assert data["findings"] == []
    assert all(g["verdict"] != "growing" for g in data["growth"]), data["growth"]


def test_bytes_are_exact_for_kept_views(capsys):
    probe, _ = doctor(SCRIPTS / "view_pins.py")
    f = probe.findings[0]
    # each kept view pins its whole 512x256 float32 batch
    per_item = 512 * 256 * 4
    assert f.data["storage_bytes"] == f.data["items"] * per_item
    assert f.data["used_bytes"] == f.data["items"] * 4 * 4


def test_script_output_is_unchanged_and_tensors_die(tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import sys, weakref, torch
        torch.manual_seed(0)
        model = torch.nn.Linear(32, 4)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        keep = []
        refs = sys.modules["tm_refs"] = []
        for i in range(20):
            x = torch.randn(64, 32)
            loss = model(x).pow(2).mean()
            opt.zero_grad(); loss.backward(); opt.step()
            keep.append(loss)
            refs.append(weakref.ref(x))
            print(f"{loss.item():.10f}")
    """), encoding="utf-8")
    import runpy
    import sys

    runpy.run_path(str(script), run_name="__main__")
    plain = capsys.readouterr().out
    sys.modules.pop("tm_refs", None)
    probe, result = doctor(script)
    out = capsys.readouterr().out
    assert out == plain
    refs = sys.modules.pop("tm_refs")
    del result
    gc.collect()
    assert all(r() is None for r in refs)  # nothing of the script survives the run
    assert probe.findings and probe.findings[0].culprit.name == "keep"


def test_findings_after_an_out_of_memory_error(tmp_path, capsys):
    script = tmp_path / "oom.py"
    script.write_text(textwrap.dedent("""
        import torch
        model = torch.nn.Linear(64, 64)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        history = []
        for i in range(40):
            out = model(torch.randn(256, 64))
            loss = out.pow(2).mean()
            opt.zero_grad(); loss.backward(); opt.step()
            history.append(out)
            if i == 30:
                raise MemoryError("simulated allocation failure")
    """), encoding="utf-8")
    probe = DoctorProbe(census_at_end=True)
    result = run_script(Target(path=str(script)), [probe], monitor_interval=None)
    assert result.outcome == "oom" and result.exit_code == 1
    assert probe.findings[0].cause == "retained_graph"
    assert probe.findings[0].culprit.name == "history"
    assert probe.census is not None and probe.census.total_bytes > 0


def test_max_steps_analyses_the_last_step(capsys):
    probe, result = doctor(SCRIPTS / "detached_cache.py", max_steps=20)
    assert result.outcome == "max_steps"
    assert probe.evidence.snapshots[-1].step == 20
    assert probe.findings[0].cause == "growing_container"


def test_analysis_schedule_is_sparse():
    steps = [s for s in range(1, 10_001) if analysis_steps(s)]
    assert steps[:8] == [2, 3, 4, 6, 8, 12, 16, 24]
    assert len(steps) <= 26


def test_unreached_schedule_measures_again_only_when_memory_grew():
    from torchmem.doctor.unreached import UnreachedSchedule

    schedule = UnreachedSchedule(4096, min_rise=64 * 1024)
    flat = {"cpu": 100 << 20}
    assert schedule.due(2, flat, False)  # the baseline
    assert not schedule.due(3, {"cpu": (100 << 20) + 1000}, False)  # noise
    assert not schedule.due(8, {"cpu": (100 << 20) + 20_000}, False)  # under min_rise
    assert schedule.due(12, {"cpu": (100 << 20) + 200_000}, False)  # 20 kB/step since 2
    assert not schedule.due(16, {"cpu": (100 << 20) + 200_000}, False)
    assert schedule.due(16, {"cpu": (100 << 20) + 200_000, "cuda:0": 1 << 20}, False) is False
    assert schedule.due(24, {"cpu": 100 << 20}, True)  # after backward(create_graph=True)
    schedule.reset()
    assert schedule.due(2, flat, False)


def test_garbage_inspection_stops_at_nodes_a_backward_freed(monkeypatch):
    """The young tensors' graphs are walked only where a backward has not freed them: a
    chain of 400 nodes that went through backward() costs one node read, and a cycle that
    holds a graph never backpropagated still counts the activations that graph saved."""
    from torchmem.doctor import garbage

    reads: list[str] = []
    real = garbage.read_saved

    def counting(node):
        reads.append(type(node).__name__)
        return real(node)

    monkeypatch.setattr(garbage, "read_saved", counting)
    gc.collect()
    w = torch.randn(64, 64, requires_grad=True)
    h = torch.randn(8, 64)
    for _ in range(200):
        h = (h @ w).tanh()
    h.sum().backward()
    record = garbage.inspect_garbage(1, 1, lambda f: False, generation=1)
    assert record.tensor_bytes == 0
    assert len(reads) <= 3, reads  # the chain's root, not its 400 nodes
    reads.clear()
    del h
    x = torch.randn(256, 256, requires_grad=True)
    cycle = {"out": (x * 2).sin()}  # sin saves its 256 KiB input, x * 2
    cycle["self"] = cycle
    del cycle
    record = garbage.inspect_garbage(2, 1, lambda f: False, generation=1)
    assert record.objects >= 1
    # the output, the saved input (and the 8-byte scalar that x * 2 saved); before the walk
    # ran in a function of its own, the loop's last tensor survived the collection
    assert 2 * 256 * 256 * 4 <= record.tensor_bytes <= 2 * 256 * 256 * 4 + 64
    assert reads, "the live graph was walked"


def test_numpy_outputs_an_inference_script_collects_are_a_note(doctor):
    # memory grows with the predictions the script is run to produce: no finding, and the
    # report says what it saw (the arrays share the outputs' memory: `t.numpy()`); the
    # `doctor` fixture runs the CLI in a fresh process (the heap verdict is the script's)
    data, _ = doctor.run_file(SCRIPTS / "healthy_numpy_predictions.py")
    assert data["findings"] == []
    assert any(n.startswith("`predictions` collects numpy arrays of the outputs")
               for n in data["notes"]), data["notes"]


def test_a_statement_that_rebinds_the_whole_container_gets_no_edit_of_its_value():
    # `tot = tot * 0.99 + info` keeps the loss's graph in `tot['loss']`, but binds the whole
    # metrics dict: `.detach()` of that value would raise AttributeError. The finding names
    # the entry at that line and says why no one-line edit is offered (before: the edit was
    # offered and only a re-run withdrew it; with --no-verify it would have been shown)
    probe, result = doctor(SCRIPTS / "decayed_tracker_dict.py")
    assert result.exit_code == 0, result.error
    top = probe.findings[0]
    assert (top.cause, top.culprit.name, top.culprit.line) == ("retained_graph", "tot['loss']", 30)
    assert top.fix_kind == "advice" and top.edit is None
    assert "rebinds `tot` (a Tracker) as a whole" in top.fix

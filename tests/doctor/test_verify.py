"""Fixes that are valid for what the culprit holds, proven by re-running the script edited.

Real scripts through the real CLI (``python -m torchmem doctor`` in a subprocess): the
doctor proposes an edit of the whole statement, re-runs the script with it, and records
verified / not verified / crashed / not checked on the finding.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from torchmem.doctor.edits import apply_edit, propose_edit
from torchmem.doctor.source import find_statements
from torchmem.model.capture import Capture

HEAD = """
import sys, torch
torch.manual_seed(0)
model = torch.nn.Linear(32, 32)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
"""


def _script(tmp_path: Path, body: str, name: str = "train.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(HEAD) + textwrap.dedent(body), encoding="utf-8")
    return path


def _doctor(script: Path, *args: str, cwd: Path | None = None) -> tuple[subprocess.CompletedProcess[str], dict]:
    capture = script.parent / "capture.json"
    proc = subprocess.run([sys.executable, "-m", "torchmem", "doctor", "--interval", "0",
                           "--json", str(capture), *args, str(script)],
                          capture_output=True, text=True, timeout=600, check=False,
                          cwd=cwd or script.parent)
    assert capture.exists(), proc.stderr
    return proc, json.loads(capture.read_text(encoding="utf-8"))


def _finding(data: dict, name: str) -> dict:
    found = [f for f in data["findings"] if (f.get("culprit") or {}).get("name") == name]
    assert found, [f.get("culprit") for f in data["findings"]]
    return found[0]


def test_scalar_loss_gets_item_on_the_whole_statement_and_verifies(tmp_path: Path):
    script = _script(tmp_path, """
    losses = []
    for step in range(60):
        loss = model(torch.randn(16, 32)).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        losses.append(
            loss
        )
    print("mean", round(sum(float(x) for x in losses) / len(losses), 1) >= 0)
    sys.exit(3)
    """)
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                           timeout=300, check=False)
    html = tmp_path / "report.html"
    proc, data = _doctor(script, "--html", str(html))  # verification on: a short run
    # the user's run is untouched: same stdout (nothing of the re-run), same exit code
    assert proc.returncode == plain.returncode == 3
    assert proc.stdout == plain.stdout == "mean True\n"
    f = _finding(data, "losses")
    assert f["fix_kind"] == "edit"
    edit = f["edit"]
    assert (edit["first_line"], edit["last_line"]) == (11, 13)  # the whole statement
    assert edit["statement"] == "losses.append(loss.item())"
    assert edit["replacement"] == "    losses.append(\n        loss.item()\n    )\n"
    assert "`losses.append(loss.item())`" in f["fix"]
    v = f["verification"]
    assert v["status"] == "verified", v
    assert v["exit_code_before"] == v["exit_code_after"] == 3
    assert v["bytes_per_step_after"] < v["bytes_per_step_before"]
    # the same growth number as the growth verdict, and the report says it
    assert v["bytes_per_step_before"] == data["growth"][0]["bytes_per_step"]
    assert "verified: growth fell from" in proc.stderr
    assert '<div class="verification">verified: growth fell from' in html.read_text(encoding="utf-8")


def test_non_scalar_tensors_get_detach(tmp_path: Path):
    script = _script(tmp_path, """
    outs = []
    for step in range(40):
        out = model(torch.randn(16, 32))
        loss = out.pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        outs.append(out)
    """)
    proc, data = _doctor(script, "--no-verify")
    f = _finding(data, "outs")
    assert f["fix_kind"] == "edit"
    assert f["edit"]["statement"] == "outs.append(out.detach())"
    assert ".item()" not in f["fix"]
    assert f["verification"] is None  # --no-verify: nothing re-run
    assert "re-running" not in proc.stderr


def test_dict_values_get_advice_not_item_or_detach(tmp_path: Path):
    script = _script(tmp_path, """
    history = []
    for step in range(60):
        loss = model(torch.randn(16, 32)).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        history.append({"loss": loss, "step": step})
    """)
    proc, data = _doctor(script, "--verify")
    f = _finding(data, "history")
    assert f["fix_kind"] == "advice" and f["edit"] is None
    assert ".item())" not in f["fix"] and ".detach())" not in f["fix"]
    assert "holds dict" in f["fix"]
    assert f["verification"] is None
    assert "advice: " in proc.stderr


def test_edit_that_crashes_falls_back_then_is_withdrawn(tmp_path: Path):
    # later code stacks what it kept (a use the edit's static checks do not see):
    # storing .item() crashes, .detach() works
    fallback = _script(tmp_path, """
    def epoch():
        kept = []
        for step in range(60):
            loss = model(torch.randn(16, 32)).pow(2).mean()
            opt.zero_grad(); loss.backward(); opt.step()
            kept.append(loss)
        return float(torch.stack(kept)[-1])
    print(epoch() >= 0)
    """, "fallback.py")
    proc, data = _doctor(fallback, "--verify")
    assert proc.returncode == 0 and proc.stdout == "True\n"
    f = _finding(data, "kept")
    v = f["verification"]
    assert v["status"] == "verified", v
    assert f["edit"]["statement"] == "kept.append(loss.detach())"
    assert "TypeError" in v["tried"][0]
    assert ".item())" not in f["fix"]

    # later code needs the graph of what was kept: every edit crashes -> withdrawn
    withdrawn = _script(tmp_path, """
    kept = []
    for step in range(60):
        loss = model(torch.randn(16, 32)).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        kept.append(loss)
    assert sum(kept).requires_grad
    print("end")
    """, "withdrawn.py")
    proc, data = _doctor(withdrawn, "--verify")
    assert proc.returncode == 0 and proc.stdout == "end\n"
    f = _finding(data, "kept")
    v = f["verification"]
    assert v["status"] == "crashed", v
    assert f["edit"] is None and f["fix_kind"] == "advice"
    assert "no edit proven" in f["fix"]
    assert "fix withdrawn" in proc.stderr


def test_rerun_keeps_sibling_imports_file_paths_and_cwd(tmp_path: Path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "helper.py").write_text("SCALE = 2\n", encoding="utf-8")
    (project / "steps.txt").write_text("60\n", encoding="utf-8")
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    (workdir / "cwd_marker.txt").write_text("here\n", encoding="utf-8")
    script = _script(project, """
    import os
    from helper import SCALE
    here = os.path.dirname(os.path.abspath(__file__))
    steps = int(open(os.path.join(here, "steps.txt")).read())
    assert open("cwd_marker.txt").read() == "here\\n"
    losses = []
    for step in range(steps):
        loss = model(torch.randn(16, 32)).pow(2).mean() * SCALE
        opt.zero_grad(); loss.backward(); opt.step()
        losses.append(loss)
    """)
    proc, data = _doctor(script, "--verify", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    v = _finding(data, "losses")["verification"]
    assert v["status"] == "verified", v
    assert v["steps_after"] == v["steps_before"] == 60


def test_hidden_state_is_detached_before_the_statement(tmp_path: Path):
    script = _script(tmp_path, """
    rnn = torch.nn.LSTM(16, 32)
    hidden = (torch.zeros(1, 32), torch.zeros(1, 32))
    for i in range(60):
        out, hidden = rnn(torch.rand(8, 16), hidden)
    print(out.shape[1])
    """)
    proc, data = _doctor(script, "--steps", "50", "--verify")
    assert proc.stdout == "" and proc.returncode == 0  # stopped at step 50, as asked
    f = _finding(data, "hidden")
    assert f["edit"]["statement"] == "hidden = tuple(t.detach() for t in hidden)"
    assert f["edit"]["replacement"].splitlines()[0] == "    hidden = tuple(t.detach() for t in hidden)"
    v = f["verification"]
    assert v["status"] == "verified", v
    assert v["steps_before"] == v["steps_after"] == 50  # the re-run stops where the run did


def _statement(path: Path, name: str, line: int):
    (stmt,) = [s for s in find_statements(name, [str(path)]) if s.line == line]
    return stmt


def test_no_edit_on_detached_lines_initialisations_or_non_tensors(tmp_path: Path):
    src = tmp_path / "s.py"
    src.write_text("kept = []\nfor x in range(3):\n    kept.append(x.detach())\n"
                   "total = 0\nnums = []\nnums.append(float(x))\n", encoding="utf-8")
    detached = propose_edit("retained_graph", "kept", _statement(src, "kept", 3),
                            holds=("0-dim tensor",))
    assert detached.edit is None and "already stores a value without graph" in detached.refusal
    init = propose_edit("retained_graph", "total", _statement(src, "total", 4),
                        holds=("0-dim tensor",))
    assert init.edit is None and "initialises" in init.refusal
    src.write_text("nums = []\nfor x in range(3):\n    nums.append(x)\n", encoding="utf-8")
    for holds in (("number",), ("dict",), ("0-dim tensor", "number"), ()):
        refused = propose_edit("retained_graph", "nums", _statement(src, "nums", 3), holds=holds)
        assert refused.edit is None, holds
    ok = propose_edit("retained_graph", "nums", _statement(src, "nums", 3), holds=("0-dim tensor",))
    assert [e.statement for e in ok.edits] == ["nums.append(x.item())", "nums.append(x.detach())"]


def test_edit_applies_to_the_whole_multiline_statement(tmp_path: Path):
    src = tmp_path / "m.py"
    text = ("feats = []\nfor b in range(3):\n    feats.append(\n        extract(\n"
            "            b, flatten=True\n        )\n    )  # keep\n")
    src.write_text(text, encoding="utf-8")
    proposal = propose_edit("view_pins_storage", "feats", _statement(src, "feats", 3),
                            holds=("tensor",), has_graph=False)
    edit = proposal.edit
    assert edit is not None and (edit.first_line, edit.last_line) == (3, 7)
    assert edit.statement == "feats.append(extract(b, flatten=True).clone())"
    edited = apply_edit(text, edit)
    assert edited.endswith("        ).clone()\n    )  # keep\n")
    compile(edited, "m.py", "exec")


def test_old_captures_without_verification_still_load(tmp_path: Path):
    old = {"schema_version": 1, "tool": "torchmem doctor", "version": "0.1.0", "argv": ["t.py"],
           "started_at": "2024-01-01T00:00:00+00:00", "duration_s": 1.0, "exit_code": 0,
           "outcome": "ok", "findings": [{"cause": "retained_graph", "title": "t",
                                          "fix": "store `.item()`"}]}
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old), encoding="utf-8")
    capture = Capture.load(path)
    (f,) = capture.findings
    assert f.edit is None and f.verification is None and f.fix_kind == ""
    proc = subprocess.run([sys.executable, "-m", "torchmem", "report", str(path)],
                          capture_output=True, text=True, timeout=120, check=False,
                          env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    assert "fix: store `.item()`" in proc.stdout + proc.stderr


def test_state_that_starts_as_none_is_detached_only_when_set(tmp_path: Path):
    src = tmp_path / "r.py"
    src.write_text("state = None\nfor x in range(3):\n    out, state = model(x, state)\n",
                   encoding="utf-8")
    (stmt,) = [s for s in find_statements("state", [str(src)]) if s.line == 3]
    proposal = propose_edit("hidden_state_chain", "state", stmt, holds=("tensor",),
                            culprit_type="tuple")
    assert proposal.edit is not None
    assert proposal.edit.statement == \
        "state = None if state is None else tuple(t.detach() for t in state)"


def test_chain_written_in_place_detaches_the_value_written(tmp_path: Path):
    # `table[i, j] = d` links table's graph to d's at every write: write d without graph
    src = tmp_path / "w.py"
    src.write_text("table = torch.zeros(2, 2)\nfor i in range(2):\n"
                   "    for j in range(2):\n        table[i, j] = model(x).sum()\n"
                   "kept = torch.zeros(2)\nkept[0] = d.detach()\n", encoding="utf-8")
    proposal = propose_edit("hidden_state_chain", "table", _statement(src, "table", 4),
                            holds=("tensor",), culprit_type="Tensor")
    assert proposal.edit is not None
    assert proposal.edit.statement == "table[i, j] = model(x).sum().detach()"
    assert (proposal.edit.first_line, proposal.edit.last_line) == (4, 4)
    done = propose_edit("hidden_state_chain", "kept", _statement(src, "kept", 6),
                        holds=("tensor",), culprit_type="Tensor")
    assert done.edit is None  # already stores a value without graph


def test_a_method_that_floats_go_through_too_is_fixed_at_the_call_that_hands_in_the_tensor(doctor):
    # `self.sum += val * n` keeps the loss's graph for `losses`, and also sums floats for
    # `step_time`: a `.detach()` there would raise for the floats. The edit goes at the
    # call on the culprit's object, where the tensor is handed in, and the re-run proves it
    script = Path(__file__).parent / "scripts_unit" / "meter_shared_with_floats.py"
    data, _ = doctor.run_file(script, "--verify")
    top = data["findings"][0]
    assert (top["cause"], top["culprit"]["name"], top["culprit"]["line"]) == (
        "retained_graph", "losses.sum", 32)
    assert top["edit"]["statement"] == "losses.update(loss.item(), x.size(0))"
    assert top["verification"]["status"] == "verified", top["verification"]


def test_a_setitem_every_column_goes_through_is_fixed_at_the_assignment_of_the_kept_key(doctor):
    # `self.columns[name].append(value)` keeps the loss under "loss" and ints under "step"
    # and "rows": `.detach()` there would raise for the ints. No edit is offered there;
    # the edit goes to `log["loss"] = loss`, the one assignment under the kept key
    script = Path(__file__).parent / "scripts_unit" / "collector_setitem_mixed_values.py"
    data, _ = doctor.run_file(script, "--verify")
    top = data["findings"][0]
    assert (top["cause"], top["culprit"]["name"], top["culprit"]["line"]) == (
        "retained_graph", "log.columns['loss']", 20)
    assert top["edit"]["first_line"] == 20
    assert top["edit"]["replacement"] == '    log["loss"] = loss.item()\n'
    assert top["verification"]["status"] == "verified", top["verification"]


def test_no_edit_of_a_statement_that_also_stores_numbers_into_a_sibling():
    from torchmem.doctor.pathstats import PathStats
    from torchmem.doctor.shared_targets import sibling_refusal
    from torchmem.doctor.source import Statement

    stmt = Statement("t.py", 10, "self.columns[name].append(value)", "add", "__setitem__",
                     False, "value", "self.columns[name]", "append")
    kept = PathStats(path="log.columns['loss']", kind="container", type="list", depth=2,
                     root="log", holds=("0-dim tensor",))
    rows = PathStats(path="log.columns['rows']", kind="container", type="list", depth=2,
                     root="log", holds=("number",))
    paths = {p.path: p for p in (kept, rows)}
    assert "`log.columns['rows']`" in sibling_refusal("log.columns['loss']", stmt, paths)
    # a constant key picks one entry: the statement stores into that entry alone
    const = Statement("t.py", 10, "self.columns['loss'].append(value)", "add", "f",
                      False, "value", "self.columns['loss']", "append")
    assert sibling_refusal("log.columns['loss']", const, paths) is None
    # siblings that hold tensors too: the edit is valid for every entry
    tensors = dict(paths, **{"log.columns['rows']": PathStats(
        path="log.columns['rows']", kind="container", type="list", depth=2, root="log",
        holds=("tensor",))})
    assert sibling_refusal("log.columns['loss']", stmt, tensors) is None

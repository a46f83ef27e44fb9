"""The runner executes scripts as ``python script.py`` would and finds their steps."""

from __future__ import annotations

import gc
import os
import sys
import textwrap
import weakref
from pathlib import Path

import pytest
import torch

from torchmem.doctor.runner import Probe, Target, run_script
from torchmem.errors import InputError, ScriptError

TRAIN = """
import sys, torch
torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range({steps}):
    x = torch.randn(16, 8)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def write(tmp_path: Path, source: str, name: str = "script.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return str(path)


def run(path: str, *args: str, probes=(), **kwargs):
    return run_script(Target(path=path, args=list(args)), probes, monitor_interval=None, **kwargs)


class Recorder(Probe):
    def __init__(self) -> None:
        self.steps: list[tuple[int, str | None, int | None]] = []
        self.events: list[tuple[str, dict]] = []
        self.finished = None

    def on_step(self, run, step, frame):
        self.steps.append((step, frame.f_code.co_filename if frame else None,
                           frame.f_lineno if frame else None))

    def on_event(self, run, name, info):
        if name == "step_source":  # steps are renumbered from the new source
            self.steps.clear()
        self.events.append((name, {k: v for k, v in info.items() if k != "frame"}))

    def on_finish(self, run, outcome):
        self.finished = (outcome.kind, outcome.exit_code)


def test_script_sees_argv_path0_and_main(tmp_path):
    out = tmp_path / "out.txt"
    path = write(tmp_path, f"""
        import sys, pickle
        class Point:
            pass
        data = pickle.dumps(Point())  # needs sys.modules['__main__'] to be this module
        with open({str(out)!r}, "w") as fh:
            fh.write(repr((sys.argv, sys.path[0], __name__, __file__)))
        """)
    saved_argv, saved_path0, saved_main = list(sys.argv), sys.path[0], sys.modules["__main__"]
    result = run(path, "--lr", "3")
    argv, path0, name, file = eval(out.read_text())
    assert argv == [path, "--lr", "3"]
    assert path0 == str(tmp_path)
    assert name == "__main__"
    assert file == path
    assert result.exit_code == 0 and result.outcome == "ok"
    assert sys.argv == saved_argv and sys.path[0] == saved_path0
    assert sys.modules["__main__"] is saved_main


def test_optimizer_steps_are_counted_and_frames_are_the_users(tmp_path):
    path = write(tmp_path, TRAIN.format(steps=7))
    rec = Recorder()
    result = run(path, probes=[rec])
    assert result.step_source == "optimizer"
    assert [s.step for s in result.steps] == list(range(1, 8))
    assert [s for s, _, _ in rec.steps] == list(range(1, 8))
    assert all(f == path for _, f, _ in rec.steps)
    assert {line for _, _, line in rec.steps} == {11}  # the opt.step() line
    names = [name for name, _ in rec.events]
    assert names.count("zero_grad") == 7 and names.count("backward") == 7
    assert all(s.used["cpu"] > 0 and s.rss > 0 for s in result.steps)


def test_backward_fallback_without_optimizer(tmp_path):
    path = write(tmp_path, """
        import torch
        w = torch.randn(4, requires_grad=True)
        for i in range(5):
            loss = (w * 2).sum()
            loss.backward(retain_graph=(i == 2))
            with torch.no_grad():
                w -= 0.1 * w.grad
                w.grad = None
        """)
    rec = Recorder()
    result = run(path, probes=[rec])
    assert result.step_source == "backward"
    assert len(result.steps) == 5
    flags = [info["retain_graph"] for name, info in rec.events if name == "backward"]
    assert flags == [False, False, True, False, False]


def test_forward_fallback_for_evaluation_scripts(tmp_path):
    path = write(tmp_path, """
        import torch
        model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
        with torch.no_grad():
            for _ in range(6):
                model(torch.randn(2, 4))
        """)
    result = run(path)
    assert result.step_source == "forward"
    assert len(result.steps) == 6  # top-level calls only, not the 3 submodules


def test_gradient_accumulation_counts_optimizer_steps(tmp_path):
    path = write(tmp_path, """
        import torch
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.Adam(model.parameters())
        for i in range(12):
            model(torch.randn(3, 4)).sum().backward()
            if (i + 1) % 4 == 0:
                opt.step()
                opt.zero_grad()
        """)
    rec = Recorder()
    result = run(path, probes=[rec])
    assert result.step_source == "optimizer"
    assert len(result.steps) == 3
    assert ("step_source", {"source": "optimizer", "previous": "backward"}) in rec.events


def test_max_steps_stops_cleanly_and_runs_finally(tmp_path):
    marker = tmp_path / "finally.txt"
    path = write(tmp_path, TRAIN.format(steps=50).replace(
        "for i in range(50):", f"try:\n  for i in range(50):").replace(
        "\n    ", "\n      ") + f"finally:\n  open({str(marker)!r}, 'w').write('ran')\n")
    result = run(path, max_steps=4)
    assert result.outcome == "max_steps" and result.exit_code == 0
    assert len(result.steps) == 4
    assert marker.read_text() == "ran"


def test_steps_stop_passes_through_except_exception(tmp_path):
    path = write(tmp_path, TRAIN.format(steps=30).replace(
        "    opt.step()", "    try:\n        opt.step()\n    except Exception:\n        pass"))
    result = run(path, max_steps=3)
    assert result.outcome == "max_steps" and len(result.steps) == 3


@pytest.mark.parametrize("tail, kind, code", [
    ("import sys; sys.exit(3)", "exit", 3),
    ("import sys; sys.exit()", "exit", 0),
    ("import sys; sys.exit('bad config')", "exit", 1),
    ("raise ValueError('boom')", "exception", 1),
    ("raise KeyboardInterrupt", "interrupt", 130),
    ("raise MemoryError('cannot allocate')", "oom", 1),
    ("raise torch.OutOfMemoryError('CUDA out of memory')", "oom", 1),
])
def test_every_ending_gives_a_result_with_the_scripts_exit_code(tmp_path, capfd, tail, kind, code):
    path = write(tmp_path, TRAIN.format(steps=3) + tail + "\n")
    rec = Recorder()
    result = run(path, probes=[rec])
    assert (result.outcome, result.exit_code) == (kind, code)
    assert rec.finished == (kind, code)
    assert len(result.steps) == 3
    err = capfd.readouterr().err
    if kind in ("exception", "oom"):
        assert "Traceback (most recent call last)" in err
        assert "runner.py" not in err  # torchmem's own frames are trimmed
        assert result.error and result.error.split(":")[0] in ("ValueError", "MemoryError", "OutOfMemoryError")
    if tail.endswith("'bad config')"):
        assert "bad config" in err


def test_hooks_and_patches_are_removed_after_the_run(tmp_path):
    backward, zero_grad = torch.autograd.backward, torch.optim.Optimizer.zero_grad
    module_zero_grad, empty_cache = torch.nn.Module.zero_grad, torch.cuda.empty_cache
    from torch.nn.modules import module as nn_module
    from torch.optim import optimizer as optim_module
    hooks_before = (len(nn_module._global_forward_hooks), len(nn_module._global_forward_pre_hooks),
                    len(optim_module._global_optimizer_post_hooks))
    run(write(tmp_path, TRAIN.format(steps=2) + "raise RuntimeError('x')\n"))
    assert torch.autograd.backward is backward
    assert torch.optim.Optimizer.zero_grad is zero_grad
    assert torch.nn.Module.zero_grad is module_zero_grad
    assert torch.cuda.empty_cache is empty_cache
    assert hooks_before == (len(nn_module._global_forward_hooks), len(nn_module._global_forward_pre_hooks),
                            len(optim_module._global_optimizer_post_hooks))


def test_the_scripts_tensors_die_when_the_run_ends(tmp_path):
    refs: list[weakref.ref] = []

    class Grab(Probe):
        def on_step(self, run, step, frame):
            refs.append(weakref.ref(frame.f_locals["loss"]))
            refs.append(weakref.ref(run.main_globals["model"].weight))

    run(write(tmp_path, TRAIN.format(steps=3)), probes=[Grab()])
    gc.collect()
    assert refs and all(r() is None for r in refs)


def test_a_failing_probe_never_breaks_the_script(tmp_path):
    class Broken(Probe):
        def on_step(self, run, step, frame):
            raise ZeroDivisionError("probe bug")

    result = run(write(tmp_path, TRAIN.format(steps=3)), probes=[Broken()])
    assert result.outcome == "ok" and len(result.steps) == 3
    assert any("ZeroDivisionError" in note for note in result.notes)


def test_module_target_runs_like_python_dash_m(tmp_path, monkeypatch):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    out = tmp_path / "out.txt"
    (pkg / "train.py").write_text(
        f"import sys\nopen({str(out)!r}, 'w').write(repr((sys.argv, __name__, __package__)))\n")
    monkeypatch.chdir(tmp_path)
    result = run_script(Target(module="pkg.train", args=["a"]), monitor_interval=None)
    argv, name, package = eval(out.read_text())
    assert result.exit_code == 0
    assert argv == [str(pkg / "train.py"), "a"] and name == "__main__" and package == "pkg"


@pytest.mark.parametrize("content, message", [
    (None, "script not found"),
    (b"for i in range(3)\n    pass\n", "syntax error in"),
    (b"x = '\xff\xfe caf\xe9'\n", "cannot decode"),
    (b"x = 1\x00\n", "not a Python source file"),
])
def test_bad_scripts_are_one_line_errors(tmp_path, content, message):
    path = tmp_path / "bad.py"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(InputError) as info:
        run(str(path))
    assert message in info.value.message
    assert "\n" not in info.value.message


def test_syntax_error_names_file_and_line(tmp_path):
    path = write(tmp_path, "x = 1\ny = (\n")
    with pytest.raises(InputError, match=r"bad\.py:2|script\.py:2"):
        run(path)


def test_pep263_coding_cookie_is_honoured(tmp_path):
    path = tmp_path / "latin.py"
    path.write_bytes("# -*- coding: latin-1 -*-\nname = 'café'\n".encode("latin-1"))
    assert run(str(path)).exit_code == 0


def test_unknown_module_and_directory_without_main(tmp_path):
    with pytest.raises(ScriptError, match="no module named|cannot find module"):
        run_script(Target(module="surely_not_a_module_xyz"), monitor_interval=None)
    with pytest.raises(InputError, match="without __main__.py"):
        run(str(tmp_path))


def test_directory_with_main_runs(tmp_path):
    (tmp_path / "__main__.py").write_text("import sys; sys.exit(4)\n")
    assert run(str(tmp_path)).exit_code == 4


def test_capture_roundtrip(tmp_path):
    from torchmem.model.capture import Capture

    result = run(write(tmp_path, TRAIN.format(steps=4)))
    capture = result.to_capture("torchmem run")
    saved = capture.save(tmp_path / "c.json")
    assert Capture.load(saved) == capture
    assert capture.environment["torch"] == torch.__version__
    assert os.path.basename(capture.argv[0]) == "script.py"


BARE = """
import torch
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
done = []
def train():
    try:
        for i in range(200):
            try:
                opt.zero_grad()
                model(torch.randn(2, 4)).sum().backward()
                opt.step()
            except:
                pass
            done.append(i)
    except:
        done.append("outer handler")
    finally:
        open({marker!r}, "w").write(repr(done))
    done.append("after")
train()
raise SystemExit(5)
"""


def test_steps_stop_sticks_through_bare_excepts(tmp_path):
    marker = tmp_path / "done.txt"
    result = run(write(tmp_path, BARE.format(marker=str(marker))), max_steps=3)
    assert result.outcome == "max_steps" and result.exit_code == 0
    assert len(result.steps) == 3
    # the stop escaped both bare excepts: the outer handler and the finally ran once,
    # nothing after them did, and no tracing is left behind
    assert marker.read_text() == "[0, 1, 'outer handler']"
    assert sys.gettrace() is None


def test_keep_namespace_keeps_the_scripts_globals(tmp_path):
    from torchmem.doctor import runner

    saved_main = sys.modules["__main__"]
    try:
        run(write(tmp_path, "import torch\nkept = torch.ones(3)\n"), keep_namespace=True)
        main = runner._KEPT_NAMESPACES[-1]
        assert torch.equal(main.kept, torch.ones(3))  # the script's globals live on
        # the caller's __main__ is back: a later multiprocessing spawn must not re-import
        # the script as its __main__ (it did, and ran the script again in each child)
        assert sys.modules["__main__"] is saved_main
    finally:
        sys.modules["__main__"] = saved_main
        runner._KEPT_NAMESPACES.clear()


def test_a_real_cpu_oom_is_an_oom(tmp_path, capfd):
    result = run(write(tmp_path, "import torch\ntorch.empty(2**62, dtype=torch.uint8)\n"))
    assert (result.outcome, result.exit_code) == ("oom", 1)
    assert "DefaultCPUAllocator" in result.error


def test_backward_twice_traceback_has_no_torchmem_frames(tmp_path, capfd):
    path = write(tmp_path, "import torch\nw = torch.randn(3, requires_grad=True)\n"
                           "loss = (w * w).sum()\nloss.backward()\nloss.backward()\n")
    result = run(path)
    err = capfd.readouterr().err
    assert result.outcome == "exception" and "second time" in result.error
    assert "torch/_tensor.py" in err.replace(os.sep, "/")  # torch's frames are kept
    frames = [line for line in err.splitlines() if line.strip().startswith("File ")]
    assert not [f for f in frames if f"torchmem{os.sep}" in f], err


def test_sys_exit_with_a_message(tmp_path, capfd):
    result = run(write(tmp_path, "import sys\nsys.exit('bad config')\n"))
    assert (result.outcome, result.exit_code, result.error) == ("exit", 1, "SystemExit: bad config")
    assert capfd.readouterr().err.count("bad config") == 1  # printed once, like Python


def test_step_log_keeps_short_runs_and_bounds_long_ones():
    from torchmem.doctor._steplog import CAPACITY, HEAD, TAIL, StepLog
    from torchmem.model.capture import StepRecord

    def feed(n: int) -> StepLog:
        log = StepLog()
        for i in range(1, n + 1):
            log.add(StepRecord(step=i, time=float(i), used={"cpu": 1000 + (i % 97)}, rss=1))
        return log

    short = feed(CAPACITY)
    assert [r.step for r in short.records] == list(range(1, CAPACITY + 1))
    assert short.note() is None
    for n in (CAPACITY + 1, 20_000, 100_000):
        log = feed(n)
        steps = [r.step for r in log.records]
        assert len(steps) <= CAPACITY and log.count == n
        assert steps[:HEAD] == list(range(1, HEAD + 1))
        assert steps[-TAIL:] == list(range(n - TAIL + 1, n + 1))
        middle = steps[HEAD:-TAIL]
        assert all(s % log.stride == 0 for s in middle) and middle == sorted(set(middle))
        assert log.peak == {"cpu": 1096} and "kept" in log.note()


def test_a_long_run_holds_a_bounded_number_of_step_records(tmp_path):
    from torchmem.doctor._steplog import CAPACITY

    path = write(tmp_path, """
        import torch
        w = torch.zeros(2, requires_grad=True)
        opt = torch.optim.SGD([w], lr=0.0)
        for i in range(6000):
            opt.step()
        """)
    result = run(path)
    assert len(result.steps) <= CAPACITY
    assert result.steps[0].step == 1 and result.steps[-1].step == 6000
    assert result.peak["cpu"] >= max(s.used["cpu"] for s in result.steps)
    assert any("kept" in note and "6000" in note for note in result.notes)


def test_a_long_runs_notes_count_steps_not_step_records(doctor):
    # the step records are thinned past CAPACITY; the census note, the final analysis and
    # the censuses of evaluation passes count the run's steps
    data, _ = doctor.run("""
        import torch
        w = torch.zeros(2, requires_grad=True)
        opt = torch.optim.SGD([w], lr=0.0)
        for i in range(6000):
            opt.step()
        """)
    notes = data["notes"]
    census = [n for n in notes if "census at step" in n]
    assert census and all(n.endswith(" of 6000") for n in census), notes


def test_modules_imported_before_an_in_process_run_are_walked_only_when_the_script_uses_them(
        tmp_path, monkeypatch):
    # A test session or a notebook runs the script in its own process: the modules it had
    # imported before are its own, not the script's. Their globals are walked only when the
    # script refers to them; the modules the script imports itself always are.
    from torchmem.doctor.culprit import take_snapshot

    for name in ("caller_state", "shared_state", "fresh_state"):
        (tmp_path / f"{name}.py").write_text("BANK = []\n", encoding="utf-8")
    (tmp_path / "statepkg").mkdir()
    (tmp_path / "statepkg" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "statepkg" / "sub.py").write_text("BANK = []\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("caller_state", "shared_state", "fresh_state", "statepkg", "statepkg.sub"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    import caller_state  # noqa: F401  (the caller's: imported before the run)
    import shared_state  # noqa: F401  (imported before the run, and by the script)
    import statepkg.sub  # noqa: F401  (imported before the run; the script binds `statepkg`)

    script = write(tmp_path, TRAIN.format(steps=4).replace(
        "import sys, torch", "import sys, torch, shared_state, fresh_state, statepkg.sub"))
    caller_state.BANK.append(torch.zeros(256))
    seen: list[set[str]] = []

    class Roots(Probe):
        def on_step(self, run, step, frame):
            shared_state.BANK.append(torch.zeros(256))
            sys.modules["fresh_state"].BANK.append(torch.zeros(256))
            statepkg.sub.BANK.append(torch.zeros(256))
            snap = take_snapshot(step, frame, run.main_globals, run.frames.is_user_file,
                                 unreached=False)
            seen.append({p for p in snap.paths if p.endswith(".BANK")})

    result = run(script, probes=[Roots()])
    assert result.exit_code == 0, result.error
    assert seen and seen[-1] == {"shared_state.BANK", "fresh_state.BANK", "statepkg.sub.BANK"}

"""The in-process doctor: ``torchmem.DoctorSession`` and ``torchmem.leak_check``.

Real torch, real training steps; the findings are the ones ``torchmem doctor`` gives a
script (cause, culprit, line of the statement, fix).
"""

from __future__ import annotations

import gc
import inspect
import weakref

import pytest
import torch

import torchmem
from torchmem.errors import UsageError

MODEL = torch.nn.Linear(32, 32)
OPT = torch.optim.SGD(MODEL.parameters(), lr=0.01)
HISTORY: list = []


def _loss() -> torch.Tensor:
    return MODEL(torch.randn(16, 32)).pow(2).mean()


def leaky_step() -> None:
    loss = _loss()
    OPT.zero_grad()
    loss.backward()
    OPT.step()
    HISTORY.append(loss)


def healthy_step() -> float:
    loss = _loss()
    OPT.zero_grad()
    loss.backward()
    OPT.step()
    return loss.item()


def _line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


@pytest.fixture(autouse=True)
def _empty_history():
    HISTORY.clear()
    yield
    HISTORY.clear()


def _hooks_state():
    from torch.optim import optimizer as _opt

    return (torch.autograd.backward, torch.optim.Optimizer.zero_grad, torch.nn.Module.zero_grad,
            len(_opt._global_optimizer_post_hooks), len(gc.callbacks))


def test_leaky_step_names_the_module_list_and_the_append_line():
    capture = torchmem.leak_check(leaky_step, steps=12)
    assert capture.findings, capture.notes
    top = capture.findings[0]
    assert top.cause == "retained_graph"
    assert top.culprit.name == "HISTORY"
    assert top.culprit.file == __file__
    assert top.culprit.line == _line_of(leaky_step, "HISTORY.append(loss)")
    assert "HISTORY.append(loss.item())" in top.fix
    assert capture.step_source == "session" and len(capture.steps) == 12
    assert capture.outcome == "ok" and capture.tool == "torchmem doctor"


def test_healthy_step_has_no_finding():
    capture = torchmem.leak_check(healthy_step, steps=12)
    assert capture.findings == ()
    assert not [n for n in capture.notes if n.startswith("analysis incomplete")], capture.notes
    assert len(capture.steps) == 12


def test_a_raising_step_propagates_unchanged_and_leaves_no_hook():
    before = _hooks_state()
    boom = ValueError("bad batch")
    calls = []

    def step():
        calls.append(1)
        leaky_step()
        if len(calls) == 5:
            raise boom

    with pytest.raises(ValueError) as info:
        torchmem.leak_check(step, steps=12)
    assert info.value is boom
    assert len(calls) == 5
    assert _hooks_state() == before
    # a later run in the same process is unaffected: healthy stays healthy
    HISTORY.clear()
    assert torchmem.leak_check(healthy_step, steps=8).findings == ()


def test_context_manager_records_the_exception_and_does_not_swallow_it():
    before = _hooks_state()
    with pytest.raises(KeyError, match="missing"):
        with torchmem.DoctorSession(label="ctx") as session:
            for _ in range(6):
                leaky_step()
                session.step()
            raise KeyError("missing")
    assert _hooks_state() == before
    capture = session.capture
    assert capture.outcome == "exception" and capture.error == "KeyError: 'missing'"
    assert capture.argv == ("ctx",) and len(capture.steps) == 6


def _cell(tmp_path) -> object:
    """A notebook-like namespace: a dict with ``__file__``, no module in sys.modules."""
    source = tmp_path / "cell.py"
    source.write_text(
        "import torch\n"
        "w = torch.randn(8, 8, requires_grad=True)\n"
        "kept = {}\n"
        "def step(i):\n"
        "    out = (w @ torch.randn(8, 8)).sum()\n"
        "    kept[i] = out\n"
    )
    namespace = {"__file__": str(source), "__name__": "cell"}
    exec(compile(source.read_text(), str(source), "exec"), namespace)
    return namespace["step"]


def test_namespace_is_where_culprits_are_searched(tmp_path):
    step = _cell(tmp_path)
    with torchmem.DoctorSession(namespace=step.__globals__) as session:
        for i in range(10):
            step(i)
            session.step()
    top = session.capture.findings[0]
    assert top.culprit.name == "kept" and top.culprit.line == 6
    assert top.culprit.file == step.__globals__["__file__"]
    assert top.cause == "eval_graph"  # graphs that no backward() ever used


def test_step_never_raises_and_failures_become_notes():
    session = torchmem.DoctorSession(label="broken")
    session.step()  # not started: nothing happens
    with session:
        def broken_reading():
            raise RuntimeError("reader failed")

        session._run.reading = broken_reading
        session.step()
        session.step()
    assert any("step: RuntimeError: reader failed" in n for n in session.capture.notes)
    session.step()  # finished: nothing happens
    assert session.finish() is session.capture


def test_lifecycle_misuse_is_a_clear_error():
    session = torchmem.DoctorSession()
    with pytest.raises(UsageError, match="never started"):
        session.finish()
    with session:
        with pytest.raises(UsageError, match="another session is active"):
            torchmem.DoctorSession().start()
        with pytest.raises(UsageError, match="runs once"):
            session.start()
    with pytest.raises(UsageError, match="steps must be an int >= 4"):
        torchmem.leak_check(healthy_step, steps=2)
    with pytest.raises(UsageError, match="namespace must be a dict"):
        torchmem.DoctorSession(namespace=[])  # type: ignore[arg-type]


def test_the_session_keeps_no_tensor_alive():
    kept = torch.randn(256, 256)
    ref = weakref.ref(kept)
    namespace = {"kept": kept, "__file__": __file__}
    del kept
    with torchmem.DoctorSession(namespace=namespace) as session:
        for _ in range(8):
            healthy_step()
            session.step()
    namespace.clear()
    gc.collect()
    assert ref() is None
    assert session.capture.top_storages  # the census ran while the tensor was alive
    # ...and named who held it then, as plain data that keeps nothing alive
    peak = next(m for m in session.capture.holders if m.when == "peak")
    held = [s for s in peak.storages if s.nbytes == 256 * 256 * 4]
    assert held and held[0].holders[0].path == "kept"


def test_interval_samples_a_timeline_and_stops_its_sampler():
    import threading
    import time

    before = threading.active_count()
    with torchmem.DoctorSession(interval=0.005, deep=False) as session:
        for _ in range(4):
            time.sleep(0.02)
            session.step()
    assert threading.active_count() == before
    timeline = session.capture.timeline
    assert len(timeline["cpu"]) >= 4 and len(timeline["t"]) == len(timeline["cpu"])
    assert session.capture.findings == () and len(session.capture.steps) == 4

"""The notebook magics in IPython's own shell: ``%load_ext torchmem``, ``%%torchmem`` and
``%torchmem_doctor`` run real cells with real torch in ``InteractiveShell``."""

from __future__ import annotations

import gc
import re
import subprocess
import sys
import textwrap

import pytest

import torchmem

pytest.importorskip("IPython")
torch = pytest.importorskip("torch")

from IPython.core.interactiveshell import InteractiveShell  # noqa: E402
from IPython.utils.capture import capture_output  # noqa: E402

MODEL_CELL = """\
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
"""

TRAIN_CELL = """\
losses = []
for step in range(STEPS):
    x = torch.randn(16, 32)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(KEPT)
"""


def _train(steps: int = 20, kept: str = "loss", fresh: bool = True) -> str:
    cell = TRAIN_CELL.replace("STEPS", str(steps)).replace("KEPT", kept)
    return cell if fresh else cell.replace("losses = []\n", "")


@pytest.fixture(scope="module")
def ipython(tmp_path_factory: pytest.TempPathFactory):
    import os

    from traitlets.config import Config

    old = os.environ.get("IPYTHONDIR")
    os.environ["IPYTHONDIR"] = str(tmp_path_factory.mktemp("ipython"))
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    main = sys.modules["__main__"]  # IPython installs its own (without __spec__)
    shell = InteractiveShell.instance(config=config)
    yield shell
    InteractiveShell.clear_instance()
    sys.modules["__main__"] = main  # else multiprocessing's spawn fails in later tests
    if old is None:
        os.environ.pop("IPYTHONDIR", None)
    else:
        os.environ["IPYTHONDIR"] = old


@pytest.fixture
def shell(ipython: InteractiveShell):
    """The shell with an empty namespace and a freshly loaded extension."""
    from torchmem.collect._engine import engine

    ipython.reset(new_session=False)
    ipython.run_line_magic("reload_ext", "torchmem")
    yield ipython
    ipython.reset(new_session=False)
    engine.forget()  # the exact trackers' ledger: no state for other tests


def run(shell: InteractiveShell, cell: str, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    result = shell.run_cell(cell, store_history=True)
    out = capsys.readouterr().out
    assert result.error_before_exec is None, out
    return out


def _line_of(cell: str, code: str) -> int:
    return next(i for i, ln in enumerate(cell.splitlines(), 1) if ln.strip() == code)


def test_import_torchmem_imports_no_host() -> None:
    code = ("import sys, torchmem; torchmem.load_ipython_extension; "
            "print([m for m in ('IPython', 'lightning', 'pytorch_lightning', 'transformers') "
            "if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_load_ext_registers_the_magics_and_unload_removes_them(ipython, capsys) -> None:
    ipython.run_line_magic("unload_ext", "torchmem")
    assert "torchmem" not in ipython.magics_manager.magics["cell"]
    assert "torchmem_doctor" not in ipython.magics_manager.magics["line"]
    run(ipython, "%load_ext torchmem", capsys)
    assert "torchmem" in ipython.magics_manager.magics["cell"]
    assert "torchmem_doctor" in ipython.magics_manager.magics["line"]


def test_doctor_names_the_list_that_keeps_every_graph(shell, capsys) -> None:
    gc.collect()  # garbage other tests left must not be collected between the two censuses
    # a module no notebook variable names (another test's, a replaced cell's) still holds
    # parameters: the doctor counts them as parameters, as torchmem.census() does
    unnamed = torch.nn.Linear(8, 8)
    run(shell, MODEL_CELL, capsys)
    train = _train(20)
    run(shell, train, capsys)
    number = shell.execution_count - 1
    out = run(shell, "%torchmem_doctor", capsys)
    line = _line_of(train, "losses.append(loss)")
    assert f"culprit: `losses` (list, In[{number}]:{line} `losses.append(loss)`)" in out
    assert "`losses` (list) holds 20 items" in out
    assert "reaches 20 tensors (20 with grad_fn)" in out
    assert "fix: store a number, not the graph: `losses.append(loss.item())`" in out
    assert "cause: retained_graph" in out
    assert "culprit: `model" not in out and "culprit: `opt" not in out
    # the census counts every live tensor of the process (a notebook is the process):
    # the 32-64-1 MLP's parameters and gradients, plus whatever other tests left alive
    params = (32 * 64 + 64 + 64 + 1) * 4
    assert params == 8708
    roles = torchmem.census().bytes_by_role()
    assert roles["parameter"] >= params and roles["gradient"] >= params
    assert f"parameter {torchmem.format_bytes(roles['parameter'])}" in out, out
    assert f"gradient {torchmem.format_bytes(roles['gradient'])}" in out, out
    del unnamed


def test_doctor_is_quiet_when_only_numbers_are_kept(shell, capsys) -> None:
    run(shell, MODEL_CELL, capsys)
    run(shell, _train(20, kept="loss.item()"), capsys)
    out = run(shell, "%torchmem_doctor", capsys)
    assert "no findings" in out
    assert "culprit" not in out
    assert not re.search(r"^\s+losses\s", out, re.M)  # a list of floats holds no tensor


def test_doctor_reports_growth_since_its_last_call(shell, capsys) -> None:
    run(shell, MODEL_CELL, capsys)
    run(shell, _train(10), capsys)
    run(shell, "%torchmem_doctor", capsys)
    first = shell.execution_count - 1
    run(shell, _train(5, fresh=False), capsys)
    out = run(shell, "%torchmem_doctor", capsys)
    since = f"since the last %torchmem_doctor (In[{first}])"
    assert f"`losses` (list) holds 15 items (+5 {since})" in out
    assert f"+20 B of tensor storage and saved activations {since}" in out  # 5 float32 scalars
    assert re.search(r"^\s+losses\s+list\s+15\s+15\s+15\s+60 B\s+\d+\s+\+20 B$", out, re.M), out


def test_doctor_names_the_output_cache_when_only_it_keeps_a_graph(shell, capsys) -> None:
    run(shell, textwrap.dedent("""\
        import torch
        net = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(),
                                  torch.nn.Linear(1024, 1))
        x = torch.randn(512, 512)
        """), capsys)
    run(shell, "net(x)", capsys)  # displayed: IPython keeps it in Out
    number = shell.execution_count - 1
    out = run(shell, "%torchmem_doctor", capsys)
    assert f"culprit: `Out[{number}]`" in out
    assert f"`del Out[{number}], _{number}`" in out
    assert "cause: eval_graph" in out
    # ReLU's output (512 x 1024 float32) is saved for the second Linear's backward
    assert "2.0 MiB of saved activations" in out


def test_cell_magic_measures_peak_and_growth_exactly(shell, capsys) -> None:
    run(shell, "import torch", capsys)
    out = run(shell, textwrap.dedent("""\
        %%torchmem --device cpu
        kept = torch.zeros(1024, 1024)
        temporary = torch.zeros(2048, 1024)
        del temporary
        """), capsys)
    assert "(+12.0 MiB above its start)" in out  # 4 MiB kept + 8 MiB temporary
    assert "growth: +4.0 MiB of live tensors after the cell" in out
    assert "no findings" in out
    assert shell.user_ns["kept"].shape == (1024, 1024)  # the cell ran in the namespace


def test_cell_magic_names_what_the_cell_added_to(shell, capsys) -> None:
    run(shell, MODEL_CELL, capsys)
    run(shell, _train(5, kept="loss.item()"), capsys)  # an earlier healthy list
    cell = "%%torchmem\n" + _train(12)
    out = run(shell, cell, capsys)
    number = shell.execution_count - 1
    assert re.search(rf"culprit: `losses` \(list, In\[{number}\]:\d+ `losses.append\(loss\)`\)",
                     out), out
    assert "`losses` (list) holds 12 items (+7 since the cell began)" in out
    assert "fix: store a number, not the graph: `losses.append(loss.item())`" in out


def test_cell_magic_html_displays_the_report_inline(shell, capsys) -> None:
    run(shell, MODEL_CELL, capsys)
    with capture_output() as captured:
        shell.run_cell("%%torchmem --html\n" + _train(8), store_history=True)
    pages = [o.data["text/html"] for o in captured.outputs if "text/html" in o.data]
    assert len(pages) == 1
    assert pages[0].startswith('<div class="torchmem-report"><iframe srcdoc="')
    assert "retained autograd graph" in pages[0]
    assert "&lt;!DOCTYPE html&gt;" in pages[0]  # the report, escaped into srcdoc
    assert "culprit: `losses`" in captured.stdout


def test_cell_magic_reports_after_the_cell_raises(shell, capsys) -> None:
    run(shell, "import torch", capsys)
    out = run(shell, "%%torchmem\nbig = torch.ones(256, 1024)\nraise ValueError('boom')", capsys)
    assert "ValueError" in out and "boom" in out  # IPython showed the traceback
    assert "(the cell raised ValueError)" in out
    assert "growth: +1.0 MiB of live tensors after the cell" in out


def test_bad_arguments_are_refused_before_the_cell_runs(shell, capsys) -> None:
    result = shell.run_cell("%%torchmem --device nope\nran = True", store_history=True)
    assert type(result.error_in_exec).__name__ == "UsageError"
    assert "unknown device" in str(result.error_in_exec)
    assert "ran" not in shell.user_ns
    result = shell.run_cell("%torchmem_doctor --top -1", store_history=True)
    assert "--top must be >= 0" in str(result.error_in_exec)

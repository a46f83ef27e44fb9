"""The live view (``--live``): the panel's rendering, the guarded streams, and the real CLI
on a pseudo-terminal (python's ``pty``): the script's stdout stays byte for byte what
``python script.py`` prints, the panel updates while it runs and is gone at the end."""

from __future__ import annotations

import io
import os
import re
import select
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from rich.console import Console

from torchmem.report.live import LiveState, _GuardedStream, _Screen, live_refusal, render_panel

pty = pytest.importorskip("pty")  # POSIX only

MiB = 1 << 20

SCRIPT = """
import sys, time, torch
torch.manual_seed(0)
model = torch.nn.Linear(64, 64)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
keep = []
for step in range(24):
    loss = model(torch.randn(32, 64)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    keep.append(torch.randn(256, 256))
    print(f"step {step} {loss.item():.6f}")
    time.sleep(0.06)
if "fail" in sys.argv:
    raise ValueError("boom")
"""


# -- rendering ------------------------------------------------------------------------------
def test_the_panel_shows_memory_growth_phase_and_holders():
    state = LiveState("torchmem doctor: train.py")
    state.step, state.elapsed, state.step_source = 11, 3.25, "optimizer"
    state.used = {"cpu": 130 * MiB}
    state.first = {"cpu": 120 * MiB}
    state.peak = {"cpu": 140 * MiB}
    state.history = {"cpu": [120 * MiB, 125 * MiB, 130 * MiB]}
    state.phase = "training; doctor: next deep analysis at step 12"
    state.holders = [("keep[3]", "other", 256 * 1024), ("fc.weight", "parameter", 16384)]
    state.holders_note = " (census at step 8)"
    console = Console(record=True, width=100, file=io.StringIO())
    console.print(render_panel(state))
    text = console.export_text()
    assert "torchmem doctor: train.py  step 11 (optimizer.step() calls), 3.2 s" in text
    row = next(line for line in text.splitlines() if line.startswith("cpu"))
    assert row.split()[:9] == ["cpu", "130.0", "MiB", "140.0", "MiB", "+10.0", "MiB",
                               "+1.0", "MiB"]
    assert row.endswith("▁▅█") and "last 3 steps" in text
    narrow = Console(record=True, width=70, file=io.StringIO())
    state.history = {"cpu": list(range(60))}
    narrow.print(render_panel(state, width=70))
    narrow_text = narrow.export_text()
    assert "last 12\n" in narrow_text  # the sparkline gets what is left of the line
    assert all(len(line) <= 70 for line in narrow_text.splitlines())
    assert "phase: training; doctor: next deep analysis at step 12" in text
    assert ("top holders (census at step 8): keep[3] (other) 256.0 KiB; fc.weight (parameter) "
            "16.0 KiB") in text


def test_the_panel_escapes_names_and_never_wraps():
    state = LiveState("t")
    state.step, state.used, state.first = 2, {"cpu": MiB}, {"cpu": MiB}
    state.holders = [("evil\x1b[2J" + "x" * 300, "other", 1)]
    console = Console(record=True, width=60, file=io.StringIO(), force_terminal=True)
    console.print(render_panel(state), crop=True)
    text = console.export_text()
    assert "\x1b[2J" not in text and "evil\\x1b[2J" in text
    assert all(len(line) <= 60 for line in text.splitlines())


def test_live_refusal():
    assert live_refusal(io.StringIO()) == "stderr is not a terminal"
    master, slave = pty.openpty()
    try:
        with open(slave, "w", closefd=False) as tty:
            env = os.environ.get("TERM")
            try:
                os.environ["TERM"] = "xterm"
                assert live_refusal(tty) is None
                os.environ["TERM"] = "dumb"
                assert live_refusal(tty) == "TERM is dumb (no cursor movement)"
            finally:
                if env is None:
                    os.environ.pop("TERM", None)
                else:
                    os.environ["TERM"] = env
    finally:
        os.close(master)
        os.close(slave)


def test_a_guarded_stream_erases_the_panel_and_passes_the_text_through():
    terminal, script_out = io.StringIO(), io.StringIO()
    screen = _Screen(terminal)
    guarded = _GuardedStream(script_out, screen)
    screen.draw("panel 1\npanel 2\n")
    assert screen.height == 2
    assert guarded.write("hello\n") == 6
    assert terminal.getvalue() == "panel 1\npanel 2\n\r\x1b[2A\x1b[J"
    guarded.write("partial")  # an unfinished line keeps the panel away
    screen.draw("panel\n")
    assert screen.height == 0 and terminal.getvalue().endswith("\x1b[J")
    guarded.writelines(["-line\n", "next\n"])
    screen.draw("panel\n", [guarded])
    assert terminal.getvalue().endswith("panel\n")
    assert script_out.getvalue() == "hello\npartial-line\nnext\n"
    assert guarded.getvalue() == script_out.getvalue()  # everything else is the stream's


def test_a_forked_child_writes_straight_through_while_the_refresh_thread_holds_the_lock():
    import signal
    import threading

    terminal, script_out = io.StringIO(), io.StringIO()
    screen = _Screen(terminal)
    guarded = _GuardedStream(script_out, screen)
    screen.draw("panel\n")
    held, release = threading.Event(), threading.Event()

    def refresh_thread() -> None:  # drawing when the script forks (a DataLoader worker)
        with screen.lock:
            held.set()
            release.wait(30)
    thread = threading.Thread(target=refresh_thread)
    thread.start()
    held.wait(10)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the lock's owner does not exist here
        try:
            guarded.write("from the child\n")
            os.write(w, script_out.getvalue().encode())
        finally:
            os._exit(0)
    os.close(w)
    release.set()
    thread.join()
    deadline = time.monotonic() + 20
    done = False
    while not done and time.monotonic() < deadline:
        done = os.waitpid(pid, os.WNOHANG) != (0, 0)
        time.sleep(0.05)
    if not done:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("the child blocked on the panel's lock")
    with os.fdopen(r) as child:
        assert child.read() == "from the child\n"
    assert script_out.getvalue() == "" and screen.height == 1  # the parent's are untouched


# -- the real CLI on a pseudo-terminal --------------------------------------------------------
def screen_of(data: str, width: int = 120) -> list[str]:
    """What a terminal shows after ``data``: text, CR, LF, cursor-up and erase-below
    (the sequences the panel uses); colours are dropped."""
    lines: list[list[str]] = [[]]
    row = col = 0
    sequence = re.compile(r"\x1b\[([0-9;]*)([A-Za-z])")
    i = 0
    while i < len(data):
        ch = data[i]
        if ch == "\x1b":
            m = sequence.match(data, i)
            if m:
                if m.group(2) == "A":
                    row = max(0, row - int(m.group(1) or 1))
                elif m.group(2) == "J":
                    del lines[row][col:]
                    del lines[row + 1:]
                i = m.end() if m else i + 1
                continue
        if ch == "\r":
            col = 0
        elif ch == "\n":
            row += 1
        else:
            if col >= width:
                row, col = row + 1, 0
            while len(lines) <= row:
                lines.append([])
            line = lines[row]
            line.extend(" " * (col - len(line)))
            line[col:col + 1] = [ch]
            col += 1
        while len(lines) <= row:
            lines.append([])
        i += 1
    return ["".join(line).rstrip() for line in lines]


def on_pty(args: list[str], cwd: Path, *, stdout_on_pty: bool) -> tuple[str, bytes, int]:
    """Run ``args`` with stderr (and stdout if asked) on a 120x40 pseudo-terminal."""
    import fcntl
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "120"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen(args, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=slave if stdout_on_pty else subprocess.PIPE, stderr=slave)
    os.close(slave)
    chunks = []
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child side closed
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    out = proc.stdout.read() if proc.stdout is not None else b""
    code = proc.wait(timeout=60)
    os.close(master)
    return b"".join(chunks).decode("utf-8", "replace"), out, code


@pytest.fixture()
def script(tmp_path: Path) -> Path:
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(SCRIPT).lstrip())
    return path


@pytest.mark.slow
def test_run_live_keeps_stdout_bit_identical_and_updates_the_panel(script, tmp_path):
    plain = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                           timeout=120)
    tty, out, code = on_pty([sys.executable, "-m", "torchmem", "run", "--live", "train.py"],
                            tmp_path, stdout_on_pty=False)
    assert code == 0, tty
    assert out == plain.stdout  # byte for byte
    steps = [int(n) for n in re.findall(r"step (\d+) \(optimizer\.step\(\) calls\)", tty)]
    assert len(set(steps)) >= 3 and steps == sorted(steps)  # it updated as the run went on
    assert "\x1b[J" in tty and re.search(r"last \d+ steps", tty)
    final = screen_of(tty)
    assert not any(re.search(r"last \d+ steps", line) for line in final)  # the panel is gone
    assert any(line.startswith("torchmem run: train.py: 24 steps") for line in final)


@pytest.mark.slow
def test_live_on_a_shared_terminal_keeps_every_line_and_the_traceback(script, tmp_path):
    tty, _, code = on_pty([sys.executable, "-m", "torchmem", "run", "--live", "train.py",
                           "fail"], tmp_path, stdout_on_pty=True)
    assert code == 1
    final = screen_of(tty)
    printed = [line for line in final if re.match(r"step \d+ -?\d", line)]
    assert [int(line.split()[1]) for line in printed] == list(range(24))
    assert "ValueError: boom" in final
    assert final.index("ValueError: boom") > final.index(printed[-1])
    assert not any(re.search(r"last \d+ steps", line) for line in final)
    assert any("the script raised ValueError: boom" in line for line in final)


@pytest.mark.slow
def test_doctor_live_shows_the_holders_of_its_last_census(script, tmp_path):
    tty, _, code = on_pty([sys.executable, "-m", "torchmem", "doctor", "--live", "train.py"],
                          tmp_path, stdout_on_pty=False)
    assert code == 0, tty
    assert re.search(r"top holders \(census at step \d+\): ", tty)
    assert "float32 (256, 256) (other) 256.0 KiB" in tty
    assert re.search(r"doctor: (next )?deep analysis at step \d+", tty)
    final = screen_of(tty)
    assert not any("top holders" in line for line in final)
    assert any("culprit: `keep`" in line for line in final)


@pytest.mark.slow
def test_live_is_off_with_a_note_when_stderr_is_not_a_terminal(script, tmp_path):
    plain = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                           timeout=120)
    proc = subprocess.run([sys.executable, "-m", "torchmem", "run", "--live", "train.py"],
                          cwd=tmp_path, capture_output=True, timeout=120)
    assert proc.returncode == 0
    err = proc.stderr.decode()
    assert err.startswith("torchmem run: note: --live is off: stderr is not a terminal\n")
    assert "\x1b[" not in err
    assert proc.stdout == plain.stdout

"""Shared fixtures of the doctor's tests: run ``torchmem doctor`` on a small script through
the real CLI, in a subprocess, and read its JSON capture."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest


class DoctorRun:
    """``run(source)`` writes ``source`` (dedented) to ``script.py`` in the test's temporary
    directory, runs ``torchmem doctor --json`` on it and returns ``(capture, process)``;
    ``line(source, text)`` is the 1-based line of the first line of ``source`` holding
    ``text``, as the doctor numbers the script's lines."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.script = tmp_path / "script.py"

    def run(self, source: str, *args: str, compare_stdout: bool = False
            ) -> tuple[dict, subprocess.CompletedProcess[str]]:
        """Diagnose ``source`` with the doctor's extra ``args`` (``--no-verify`` when none
        are given). The doctor must exit 0; with ``compare_stdout`` the script also runs
        alone and its own output must come through the doctor unchanged."""
        self.script.write_text(textwrap.dedent(source), encoding="utf-8")
        return self.run_file(self.script, *args, compare_stdout=compare_stdout)

    def run_file(self, script: Path, *args: str, compare_stdout: bool = False
                 ) -> tuple[dict, subprocess.CompletedProcess[str]]:
        """:meth:`run` on an existing script file (``scripts_unit/...``)."""
        capture = self.tmp_path / "capture.json"
        done = subprocess.run(
            [sys.executable, "-m", "torchmem", "doctor", *(args or ("--no-verify",)),
             "--json", str(capture), str(script)],
            capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stderr
        if compare_stdout:
            plain = subprocess.run([sys.executable, str(script)], capture_output=True,
                                   text=True, timeout=600, check=True)
            assert done.stdout == plain.stdout  # the script's own output, untouched
        return json.loads(capture.read_text(encoding="utf-8")), done

    @staticmethod
    def line(source: str, text: str) -> int:
        lines = textwrap.dedent(source).splitlines()
        return next(i for i, line in enumerate(lines, 1) if text in line)


@pytest.fixture
def doctor(tmp_path: Path) -> DoctorRun:
    return DoctorRun(tmp_path)

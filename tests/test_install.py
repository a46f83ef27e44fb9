"""What ``pip install -c constraints.txt -e .`` installs makes a quiet first run."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_numpy_is_a_dependency_and_pinned_for_every_supported_python() -> None:
    """Without numpy, ``import torch`` itself warns "Failed to initialize NumPy"."""
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    deps = pyproject.split("dependencies = [", 1)[1].split("]", 1)[0]
    assert re.search(r'"numpy[>=<~ ]', deps), "numpy must be in [project] dependencies"
    pins = (ROOT / "constraints.txt").read_text(encoding="utf-8")
    assert re.search(r'^numpy==\S+; python_version >= "3.11"$', pins, re.M)
    assert re.search(r'^numpy==\S+; python_version < "3.11"$', pins, re.M)


def test_importing_torch_and_torchmem_prints_nothing() -> None:
    proc = subprocess.run([sys.executable, "-W", "default", "-c", "import torch, torchmem"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0
    assert "Failed to initialize NumPy" not in proc.stderr, proc.stderr

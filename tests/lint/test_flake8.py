"""The flake8 plugin, run through the real flake8 command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("flake8")

TRAIN = '''\
import torch


def train(model, loader, optimizer, criterion):
    losses = []
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss)
        print(loss.item())
    return losses
'''


def flake8(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "flake8", "--isolated", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False)


def entry_point_registered() -> bool:
    from importlib.metadata import entry_points

    return any(ep.name == "TMM" and ep.value.endswith(":TorchmemFlake8")
               for ep in entry_points(group="flake8.extension"))


pytestmark = pytest.mark.skipif(not entry_point_registered(),
                                reason="torchmem is not installed (flake8 entry point)")


def test_flake8_reports_tmm_codes_at_the_same_position_as_torchmem(tmp_path):
    from torchmem.lint import lint_source

    (tmp_path / "train.py").write_text(TRAIN)
    proc = flake8("--select", "TMM", "train.py", cwd=tmp_path)
    expected = [f"train.py:{v.line}:{v.col + 1}: {v.code} {v.message}"
                for v in lint_source(TRAIN, "train.py")]
    assert expected and proc.stdout.splitlines() == expected
    assert proc.returncode == 1


def test_flake8_noqa_and_extend_ignore(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN.replace("losses.append(loss)",
                                                     "losses.append(loss)  # noqa: TMM101"))
    assert flake8("--select", "TMM", "train.py", cwd=tmp_path).stdout == ""
    (tmp_path / "train.py").write_text(TRAIN)
    proc = flake8("--select", "TMM", "--extend-ignore", "TMM101", "train.py", cwd=tmp_path)
    assert proc.stdout == ""


def test_opinionated_rules_only_when_selected_for_the_plugin(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    default = flake8("--select", "TMM", "train.py", cwd=tmp_path).stdout
    assert "TMM9" not in default
    opted = flake8("--select", "TMM", "--torchmem-select", "TMM,TMM901", "train.py",
                   cwd=tmp_path).stdout
    assert "TMM901" in opted and "TMM101" in opted
    bad = flake8("--select", "TMM", "--torchmem-select", "TMM9999", "train.py",
                 cwd=tmp_path).stdout
    assert "TMM000 torchmem configuration error" in bad


def test_flake8_reads_tool_torchmem_lint_from_pyproject(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "pyproject.toml").write_text('[tool.torchmem.lint]\nignore = ["TMM101"]\n')
    proc = subprocess.run([sys.executable, "-m", "flake8", "--select", "TMM", "train.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          check=False)
    assert "TMM101" not in proc.stdout


def test_flake8_syntax_error_is_flake8s_e999_not_a_crash(tmp_path):
    (tmp_path / "bad.py").write_text("def f(:\n")
    proc = flake8("bad.py", cwd=tmp_path)
    assert "E999" in proc.stdout and "Traceback" not in proc.stderr

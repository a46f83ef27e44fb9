"""Memory kept by a cycle inside autograd (no Python path, gc cannot free it), named by the
variable whose old values it keeps, through the real command line on real scripts.

Run in fresh processes: the verdict these findings need reads the whole process's heap.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPTS = Path(__file__).parent / "scripts_unit"


def _doctor(script: Path, tmp_path: Path) -> tuple[dict, subprocess.CompletedProcess]:
    capture = tmp_path / "capture.json"
    done = subprocess.run([sys.executable, "-m", "torchmem", "doctor", "--no-verify", "--json",
                           str(capture), str(script)],
                          capture_output=True, text=True, timeout=600, check=False)
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                           timeout=300, check=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == plain.stdout  # the script's own output, untouched
    return json.loads(capture.read_text()), done


def _line(script: Path, text: str) -> int:
    lines = script.read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


@pytest.mark.parametrize("script, culprit, marker, evidence", [
    # a pack hook that returns its input, inside a non-reentrant checkpoint
    ("pack_hook_identity.py", "batch", "saved_tensors_hooks(", "held by their own grad_fn"),
    # a target written in place from a view of itself while autograd records it
    ("inplace_from_own_view.py", "target", "target[t] =", "writes into `target` in place"),
    # ... in a post-processing function, while a dict keeps each step's features (which
    # the dict's item assignment does not write into): the script's one such write
    ("inplace_view_postprocess.py", "x", "x[:, 5:] *=", "the only such write in the script"),
    # a whole tensor written in place from a product that saved it (pytorch#105147's
    # `a += a * y`): the one such write, not the input whose old values the graphs keep
    ("inplace_scaled_by_itself.py", "weights", "weights += weights *",
     "computed from `weights` itself"),
])
def test_a_cycle_inside_autograd_is_named(script, culprit, marker, evidence, tmp_path: Path):
    path = SCRIPTS / script
    data, done = _doctor(path, tmp_path)
    assert data["findings"], done.stderr
    top = data["findings"][0]
    assert top["cause"] == "reference_cycle", done.stderr
    assert top["culprit"]["name"] == culprit
    assert top["culprit"]["line"] == _line(path, marker)
    assert any(evidence in e for e in top["evidence"]), top["evidence"]
    assert top["data"]["held_by"] == "autograd"

"""``torchmem lines`` on the doctor's corpus: on every leaky CPU script, the line that keeps
the leak alive ranks first.

Each script of ``tests/doctor_corpus`` whose ``manifest.json`` entry is a CPU leak runs
through the real CLI in a subprocess (two at a time), ``python -m torchmem lines --json
FILE script.py`` with the entry's options and arguments; the first line of the capture
must be in the script and be one of the entry's accepted ``line`` values.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

CORPUS = Path(__file__).resolve().parents[1] / "doctor_corpus"
MANIFEST = json.loads((CORPUS / "manifest.json").read_text(encoding="utf-8"))
# memory no Python variable holds (untracked_growth: inside torch or a C extension) has no
# line of the script that keeps it alive
LEAKS = [e for e in MANIFEST["scripts"] if e["cause"] not in ("healthy", "untracked_growth")
         and e["device"] == "cpu"]


def _run(entry: dict[str, Any]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="torchmem-lines-") as tmp:
        out = Path(tmp) / "capture.json"
        cmd = [sys.executable, "-m", "torchmem", "lines", "--quiet", "--json", str(out),
               *entry["doctor_args"], str(CORPUS / entry["script"]), *entry["script_args"]]
        env = dict(os.environ, PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1")
        proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=900,
                              env=env)
        capture = json.loads(out.read_text(encoding="utf-8")) if out.exists() else None
    return {"returncode": proc.returncode, "stderr": proc.stderr[-2000:], "capture": capture}


@pytest.fixture(scope="module")
def results(request):
    selected = {item.callspec.params["entry"]["script"] for item in request.session.items
                if getattr(item, "callspec", None) is not None
                and "entry" in item.callspec.params
                and item.module is not None and item.module.__name__ == __name__}
    entries = [e for e in LEAKS if e["script"] in selected]
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip((e["script"] for e in entries), pool.map(_run, entries)))


def test_the_corpus_has_leaks_with_lines():
    assert len(LEAKS) >= 15
    assert all(e["line"] for e in LEAKS)


@pytest.mark.slow
@pytest.mark.parametrize("entry", [pytest.param(e, id=e["script"]) for e in LEAKS])
def test_retaining_line_ranks_first(entry, results):
    result = results[entry["script"]]
    capture = result["capture"]
    assert capture is not None, result["stderr"]
    assert result["returncode"] == 0, result["stderr"]
    first = capture["lines"][0]
    assert Path(first["file"]).name == entry["script"], first
    assert first["line"] in entry["line"], (first, entry["line"])
    assert first["retains"], first

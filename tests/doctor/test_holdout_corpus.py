"""Integrity of the held-out corpus (``tests/doctor_corpus_holdout``), not the doctor's score.

Every script there is adapted from a public report (a GitHub issue, a repository at a given
commit) that was not used to tune the doctor, and says so in its header. This checks the
manifest and the files only: the manifest is valid and in the main corpus's format, every
listed script exists and compiles, names its source URL in its header, every expected line
points at code, and no source is shared with the public corpus. The scripts are not run
here (``python benchmarks/doctor_corpus.py --corpus tests/doctor_corpus_holdout`` runs the
doctor on them and prints its score).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from torchmem.model.capture import CAUSES

CORPUS = Path(__file__).resolve().parents[1] / "doctor_corpus_holdout"
PUBLIC = Path(__file__).resolve().parents[1] / "doctor_corpus_public"
MANIFEST = json.loads((CORPUS / "manifest.json").read_text(encoding="utf-8"))
ENTRIES = MANIFEST["scripts"]
URL = re.compile(r"https://(github\.com|discuss\.pytorch\.org|stackoverflow\.com|forums\.)\S+")
FIELDS = {"script", "cause", "culprit", "line", "also", "device", "doctor_args", "script_args",
          "source", "what", "fix", "note"}


def _header(path: Path) -> list[str]:
    """The leading comment block of a script."""
    lines = []
    for text in path.read_text(encoding="utf-8").splitlines():
        if not text.startswith("#"):
            break
        lines.append(text)
    return lines


def test_manifest_lists_every_script_once_with_enough_healthy_ones():
    assert MANIFEST["format"] == 1
    names = [e["script"] for e in ENTRIES]
    assert len(names) == len(set(names))
    assert set(names) == {p.name for p in CORPUS.glob("*.py")}
    assert len(ENTRIES) >= 27
    healthy = sum(e["cause"] == "healthy" for e in ENTRIES)
    assert healthy * 3 >= len(ENTRIES)


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["script"] for e in ENTRIES])
def test_entry_is_well_formed(entry):
    assert set(entry) <= FIELDS, set(entry) - FIELDS
    assert entry["cause"] in CAUSES or entry["cause"] == "healthy"
    assert set(entry.get("also", ())) <= set(CAUSES)
    assert entry["device"] in ("cpu", "cuda")
    assert all(isinstance(a, str) for a in entry["doctor_args"] + entry["script_args"])
    assert URL.fullmatch(entry["source"]), entry["source"]
    assert entry["what"].strip()
    if entry["cause"] != "healthy":
        assert entry["culprit"] and all(isinstance(c, str) and c for c in entry["culprit"])
        assert entry["line"] and all(isinstance(n, int) for n in entry["line"])
    else:
        assert "culprit" not in entry and "line" not in entry and "fix" not in entry
    if "fix" in entry:
        assert isinstance(entry["fix"]["line"], int)
        assert URL.fullmatch(entry["fix"]["from"]), entry["fix"]["from"]
        assert ("before" in entry["fix"] and "after" in entry["fix"]) or entry["fix"].get("change")


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["script"] for e in ENTRIES])
def test_script_compiles_and_names_its_source(entry):
    path = CORPUS / entry["script"]
    source = path.read_text(encoding="utf-8")
    compile(source, str(path), "exec")
    header = _header(path)
    assert header and header[0].startswith("# Source: "), entry["script"]
    assert entry["source"] in header[0]
    assert any(h.startswith("# Adapted: ") for h in header), entry["script"]
    lines = source.splitlines()
    for n in entry.get("line", ()):  # expected lines point at code, not at comments
        assert 1 <= n <= len(lines), (entry["script"], n)
        assert lines[n - 1].strip() and not lines[n - 1].lstrip().startswith("#")
    fix = entry.get("fix")
    if fix and "before" in fix:  # the public fix rewrites the statement it names
        assert lines[fix["line"] - 1].strip() == fix["before"], entry["script"]


def test_no_source_is_shared_with_the_public_corpus():
    public = json.loads((PUBLIC / "manifest.json").read_text(encoding="utf-8"))["scripts"]
    shared = {e["source"] for e in ENTRIES} & {e["source"] for e in public}
    assert not shared, shared
    assert not {e["script"] for e in ENTRIES} & {e["script"] for e in public}

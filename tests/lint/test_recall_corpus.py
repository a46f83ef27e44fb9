"""Integrity of the lint recall corpus (benchmarks/lint_recall): data only, not the linter's recall.

Each entry of ``commits.json`` names a real public fix commit, and its directory holds small
adapted excerpts of the file before and after the fix. These tests check that the corpus is
well-formed so that ``benchmarks/lint_recall.py`` measures what it claims: valid JSON, files
present and parseable, line numbers inside the files and on statements, links and full SHAs.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from torchmem.lint.registry import _load

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "benchmarks" / "lint_recall"
ENTRIES = json.loads((CORPUS / "commits.json").read_text(encoding="utf-8"))
IDS = [e.get("id", f"#{i}") for i, e in enumerate(ENTRIES)]
FIELDS = {"id": str, "repo": str, "commit": str, "parent": str, "url": str, "path": str,
          "fixed_lines": list, "also_lines": list, "after_lines": list, "pattern": str,
          "note": str}
SHA = re.compile(r"[0-9a-f]{40}")
MAX_EXCERPT_LINES = 200  # adapted excerpts, never whole third-party files


def _statement_lines(source: str) -> set[int]:
    """Lines covered by a statement (a fixed line must not be blank or a lone comment)."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.stmt) and node.end_lineno is not None:
            lines.update(range(node.lineno, node.end_lineno + 1))
    return lines


def test_corpus_is_a_list_of_at_least_40_distinct_commits():
    assert isinstance(ENTRIES, list)
    assert len(ENTRIES) >= 40
    assert len(set(IDS)) == len(IDS)
    assert len({e["commit"] for e in ENTRIES}) >= 40
    assert {p.name for p in CORPUS.iterdir() if p.is_dir()} == set(IDS)


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_entry_fields_links_and_shas(entry):
    for name, kind in FIELDS.items():
        assert isinstance(entry.get(name), kind), f"{name} missing or not a {kind.__name__}"
    assert re.fullmatch(r"[a-z0-9][a-z0-9._-]*", entry["id"])
    assert SHA.fullmatch(entry["commit"]) and SHA.fullmatch(entry["parent"])
    assert entry["commit"] != entry["parent"]
    assert re.fullmatch(r"[\w.-]+/[\w.-]+", entry["repo"])
    assert entry["url"] == f"https://github.com/{entry['repo']}/commit/{entry['commit']}"
    assert entry["path"].endswith(".py")
    rule = entry.get("expected_rule", "absent")
    assert rule is None or rule in _load(), f"expected_rule {rule!r} is not a rule code"
    assert entry["fixed_lines"] and entry["after_lines"]
    assert entry["note"].strip() and entry["pattern"].strip()


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_excerpts_compile_and_lines_point_at_statements(entry):
    for name, lines in (("before.py", entry["fixed_lines"] + entry["also_lines"]),
                        ("after.py", entry["after_lines"])):
        path = CORPUS / entry["id"] / name
        source = path.read_text(encoding="utf-8")
        compile(source, str(path), "exec")
        n_lines = len(source.splitlines())
        assert n_lines <= MAX_EXCERPT_LINES, f"{name}: {n_lines} lines is not a small excerpt"
        statements = _statement_lines(source)
        for line in lines:
            assert isinstance(line, int) and 1 <= line <= n_lines, f"{name}: line {line}"
            assert line in statements, f"{name}:{line} is not on a statement"
            assert not source.splitlines()[line - 1].lstrip().startswith("#"), (
                f"{name}:{line} is a comment line")


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_excerpts_carry_their_source_link(entry):
    for name, rev in (("before.py", entry["parent"]), ("after.py", entry["commit"])):
        head = (CORPUS / entry["id"] / name).read_text(encoding="utf-8").splitlines()[:3]
        assert head[0] == (f"# Source: https://github.com/{entry['repo']}/blob/{rev}/"
                           f"{entry['path']}"), f"{name}: first line must link the source file"
        assert "Adapted excerpt" in head[1] and entry["url"] in head[1]


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_before_and_after_differ(entry):
    before = (CORPUS / entry["id"] / "before.py").read_text(encoding="utf-8").splitlines()[3:]
    after = (CORPUS / entry["id"] / "after.py").read_text(encoding="utf-8").splitlines()[3:]
    assert before != after

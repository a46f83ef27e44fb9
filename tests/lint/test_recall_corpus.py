"""Integrity of the lint recall corpora: data only, not the linter's recall.

Seven corpora share one format: ``benchmarks/lint_recall`` (the rules were improved against
its commits), ``benchmarks/lint_recall_holdout`` (commits from other repositories, scored
once, then used to build mechanisms), ``benchmarks/lint_recall_holdout2``,
``benchmarks/lint_recall_holdout3`` and ``benchmarks/lint_recall_holdout4`` (commits from yet
other repositories, chosen without running the linter, scored once, then used) and
``benchmarks/lint_recall_holdout5`` and ``benchmarks/lint_recall_holdout6`` (the same again,
each to be scored once). Each entry of
``commits.json`` names a real public fix commit, and its directory holds small adapted
excerpts of the file before and after the fix, plus, where the buggy flow crosses files, the
``context_files`` the entry lists: excerpts of the modules ``before.py`` imports, at the
parent commit. These tests check that each corpus is well-formed so that
``benchmarks/lint_recall.py`` measures what it claims: valid JSON, files present and
parseable, line numbers inside the files and on statements, links and full SHAs, and no file
in a commit's directory that the entry does not name. They never run the linter, so they do
not score a corpus.
"""

from __future__ import annotations

import ast
import itertools
import json
import re
from pathlib import Path

import pytest

from torchmem.lint.registry import _load

ROOT = Path(__file__).resolve().parents[2]
#: corpus directory -> the fewest commits it must hold
CORPORA = {ROOT / "benchmarks" / "lint_recall": 40,
           ROOT / "benchmarks" / "lint_recall_holdout": 15,
           ROOT / "benchmarks" / "lint_recall_holdout2": 20,
           ROOT / "benchmarks" / "lint_recall_holdout3": 20,
           ROOT / "benchmarks" / "lint_recall_holdout4": 20,
           ROOT / "benchmarks" / "lint_recall_holdout5": 20,
           ROOT / "benchmarks" / "lint_recall_holdout6": 20}


def _entries(corpus: Path) -> list:
    return json.loads((corpus / "commits.json").read_text(encoding="utf-8"))


#: (corpus, entry) for every commit of every corpus
CASES = [(corpus, entry) for corpus in CORPORA for entry in _entries(corpus)]
CASE_IDS = [f"{corpus.name}/{entry.get('id', f'#{i}')}" for i, (corpus, entry) in enumerate(CASES)]
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


@pytest.mark.parametrize("corpus", list(CORPORA), ids=[c.name for c in CORPORA])
def test_corpus_is_a_list_of_enough_distinct_commits(corpus):
    entries, least = _entries(corpus), CORPORA[corpus]
    ids = [e.get("id") for e in entries]
    assert isinstance(entries, list)
    assert len(entries) >= least
    assert len(set(ids)) == len(ids)
    assert len({e["commit"] for e in entries}) >= least
    assert {p.name for p in corpus.iterdir() if p.is_dir()} == set(ids)


PAIRS = list(itertools.combinations(CORPORA, 2))


@pytest.mark.parametrize(("first", "second"), PAIRS,
                         ids=[f"{a.name}-{b.name}" for a, b in PAIRS])
def test_corpora_share_no_repository_or_commit(first, second):
    one, other = _entries(first), _entries(second)
    assert not {e["repo"].lower() for e in one} & {e["repo"].lower() for e in other}
    assert not {e["commit"] for e in one} & {e["commit"] for e in other}


@pytest.mark.parametrize(("corpus", "entry"), CASES, ids=CASE_IDS)
def test_entry_fields_links_and_shas(corpus, entry):
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


@pytest.mark.parametrize(("corpus", "entry"), CASES, ids=CASE_IDS)
def test_excerpts_compile_and_lines_point_at_statements(corpus, entry):
    for name, lines in (("before.py", entry["fixed_lines"] + entry["also_lines"]),
                        ("after.py", entry["after_lines"])):
        path = corpus / entry["id"] / name
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


@pytest.mark.parametrize(("corpus", "entry"), CASES, ids=CASE_IDS)
def test_excerpts_carry_their_source_link(corpus, entry):
    for name, rev in (("before.py", entry["parent"]), ("after.py", entry["commit"])):
        head = (corpus / entry["id"] / name).read_text(encoding="utf-8").splitlines()[:3]
        assert head[0] == (f"# Source: https://github.com/{entry['repo']}/blob/{rev}/"
                           f"{entry['path']}"), f"{name}: first line must link the source file"
        assert "Adapted excerpt" in head[1] and entry["url"] in head[1]


@pytest.mark.parametrize(("corpus", "entry"), CASES, ids=CASE_IDS)
def test_before_and_after_differ(corpus, entry):
    before = (corpus / entry["id"] / "before.py").read_text(encoding="utf-8").splitlines()[3:]
    after = (corpus / entry["id"] / "after.py").read_text(encoding="utf-8").splitlines()[3:]
    assert before != after


def _context_files(entry: dict) -> list:
    return entry.get("context_files", [])


@pytest.mark.parametrize(("corpus", "entry"), CASES, ids=CASE_IDS)
def test_context_files_are_listed_relative_paths_that_exist(corpus, entry):
    context = _context_files(entry)
    assert isinstance(context, list), "context_files must be a list (or absent)"
    assert len(set(context)) == len(context)
    for rel in context:
        assert isinstance(rel, str) and rel.endswith(".py"), rel
        assert not Path(rel).is_absolute() and ".." not in Path(rel).parts and "\\" not in rel
        assert rel not in ("before.py", "after.py")
        assert (corpus / entry["id"] / rel).is_file(), f"{rel}: listed but missing"


@pytest.mark.parametrize(("corpus", "entry"), CASES, ids=CASE_IDS)
def test_commit_directory_holds_only_the_named_files(corpus, entry):
    directory = corpus / entry["id"]
    present = {p.relative_to(directory).as_posix() for p in directory.rglob("*")
               if p.is_file() and "__pycache__" not in p.parts}
    assert present == {"before.py", "after.py", *_context_files(entry)}


CONTEXT_CASES = [(corpus, entry, rel) for corpus, entry in CASES for rel in _context_files(entry)]
CONTEXT_IDS = [f"{c.name}/{e['id']}/{rel}" for c, e, rel in CONTEXT_CASES]


@pytest.mark.parametrize(("corpus", "entry", "rel"), CONTEXT_CASES, ids=CONTEXT_IDS)
def test_context_files_are_small_linked_excerpts_at_the_parent(corpus, entry, rel):
    path = corpus / entry["id"] / rel
    source = path.read_text(encoding="utf-8")
    compile(source, str(path), "exec")
    lines = source.splitlines()
    assert len(lines) <= MAX_EXCERPT_LINES, f"{rel}: {len(lines)} lines is not a small excerpt"
    prefix = f"# Source: https://github.com/{entry['repo']}/blob/{entry['parent']}/"
    assert lines[0].startswith(prefix) and lines[0].endswith(".py"), (
        f"{rel}: first line must link the file at the parent commit")
    assert "Adapted excerpt" in lines[1] and entry["url"] in lines[1]


@pytest.mark.parametrize("name", ["lint_recall_holdout3", "lint_recall_holdout4",
                                  "lint_recall_holdout5", "lint_recall_holdout6"])
def test_later_corpora_have_multi_file_commits(name):
    entries = _entries(ROOT / "benchmarks" / name)
    assert any(_context_files(e) for e in entries)


def test_recall_leaves_out_findings_identical_before_and_after_the_fix(load_benchmark):
    """A finding with the same rule and message on the fixed statement before and after the
    fix (another ``.item()`` on the same line) is about code the fix left alone: it neither
    flags the commit nor keeps it flagged; a changed message still counts on both sides."""
    changed = load_benchmark("lint_recall")._changed
    item = {"code": "TMM901", "message": "'x.item()' on every training step"}
    graph = {"code": "TMM101", "message": "'loss' carries an autograd graph"}
    assert changed([graph, item], [item]) == (["TMM101"], [])
    assert changed([item], [item]) == ([], [])
    moved = {"code": "TMM901", "message": "'x.item()' on every training step (line 9)"}
    assert changed([graph, item], [moved]) == (["TMM101", "TMM901"], ["TMM901"])
    assert changed([item], [item, item]) == ([], ["TMM901"])  # one for one

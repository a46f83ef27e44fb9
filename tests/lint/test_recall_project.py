"""``benchmarks/lint_recall_project.py`` on small git repositories built here.

Each test makes a real repository in ``tmp_path`` (a helper module returning a loss, a
training file adding it into a running total) and scores fix commits with the real CLI over
the whole extracted tree: the helper lives in another module, so only the project sees the
graph. Nothing is fetched.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

HELPER = '''import torch


def train_step(model, opt, x, y):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss
'''

TRAIN = '''from pkg.losses import train_step


def train(model, opt, loader):
    total = 0.0
    for x, y in loader:
        total += train_step(model, opt, x, y)
    print("epoch done")
    return total
'''

ACCUMULATED = "        total += train_step(model, opt, x, y)\n"


@pytest.fixture(scope="module")
def lrp(load_benchmark):
    return load_benchmark("lint_recall_project")


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                           "-c", "commit.gpgsign=false", *args],
                          capture_output=True, text=True, check=True).stdout.strip()


def _commit(repo: Path, files: dict[str, str]) -> str:
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text, encoding="utf-8")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "change")
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path):
    path = tmp_path / "owner+project"
    path.mkdir()
    _git(path, "init", "-q")
    parent = _commit(path, {"pkg/__init__.py": "", "pkg/losses.py": HELPER,
                            "pkg/train.py": TRAIN})
    return path, parent


def _entry(parent: str, commit: str) -> dict:
    return {"id": "t", "repo": "owner/project", "parent": parent, "commit": commit,
            "path": "pkg/train.py", "expected_rule": "TMM101"}


def test_a_fix_of_a_loss_from_another_module_is_caught_in_the_project(lrp, repo):
    path, parent = repo
    fix = _commit(path, {"pkg/train.py": TRAIN.replace(
        ACCUMULATED, "        total += train_step(model, opt, x, y).item()\n")})
    result = lrp.evaluate_commit(_entry(parent, fix), path / ".git")
    assert result.status == "caught"
    assert result.outcome.before_codes == ["TMM101"] and result.outcome.after_codes == []
    assert (result.files, result.missing_blobs, result.changed) == (3, 0, (1, 1))


def test_the_same_file_alone_has_no_finding(lrp, tmp_path):
    """The project is what catches it: the training file alone does not say graph."""
    alone = tmp_path / "train.py"
    alone.write_text(TRAIN, encoding="utf-8")
    run = lrp.lint_project(tmp_path, "ALL")
    assert run.found[alone.resolve()] == []


def test_a_fix_elsewhere_in_the_file_is_missed(lrp, repo):
    """Near miss: the bug is there, but the commit changed another statement."""
    path, parent = repo
    other = _commit(path, {"pkg/train.py": TRAIN.replace('"epoch done"', '"done"')})
    result = lrp.evaluate_commit(_entry(parent, other), path / ".git")
    assert result.status == "missed"
    assert result.outcome.before_total == 1  # the finding exists, off the changed lines


def test_a_fix_that_keeps_the_graph_is_flagged_after_fix(lrp, repo):
    path, parent = repo
    scaled = _commit(path, {"pkg/train.py": TRAIN.replace(
        ACCUMULATED, "        total += train_step(model, opt, x, y) * 2\n")})
    result = lrp.evaluate_commit(_entry(parent, scaled), path / ".git")
    assert result.status == "flagged after fix"


def test_no_repository_or_unknown_commit_is_kept_as_no_checkout(lrp, repo):
    path, parent = repo
    assert lrp.evaluate_commit(_entry(parent, parent), None).status == "no checkout"
    result = lrp.evaluate_commit(_entry(parent, "0" * 40), path / ".git")
    assert result.status == "no checkout" and result.reason.startswith("git ")


def test_missing_blobs_are_skipped_and_counted(lrp, repo, tmp_path):
    path, parent = repo
    sha = _git(path, "rev-parse", f"{parent}:pkg/losses.py")
    (path / ".git" / "objects" / sha[:2] / sha[2:]).unlink()
    tree = lrp.extract_tree(path / ".git", parent, tmp_path / "out")
    assert (tree.files, tree.missing_blobs) == (2, 1)
    assert (tmp_path / "out" / "pkg" / "train.py").read_text(encoding="utf-8") == TRAIN
    assert not (tmp_path / "out" / "pkg" / "losses.py").exists()


def test_changed_lines_of_a_pure_insertion_are_the_lines_around_it(lrp, repo):
    path, parent = repo
    guarded = _commit(path, {"pkg/train.py": TRAIN.replace(
        "    total = 0.0\n", "    total = 0.0\n    torch.set_grad_enabled(False)\n")})
    before, after = lrp.changed_lines(path / ".git", parent, guarded, "pkg/train.py", 9, 10)
    assert (before, after) == ([5, 6], [6])


def test_mirrors_are_found_in_a_folder_or_a_json_map(lrp, repo, tmp_path):
    path, _ = repo
    assert lrp.find_git_dir("owner/project", path.parent) == path / ".git"
    bare = tmp_path / "mirrors" / "owner+bare"
    subprocess.run(["git", "clone", "-q", "--bare", str(path), str(bare)], check=True)
    assert lrp.find_git_dir("owner/bare", tmp_path / "mirrors") == bare
    mapping = tmp_path / "map.json"
    mapping.write_text(json.dumps({"owner/bare": str(bare)}), encoding="utf-8")
    assert lrp.find_git_dir("owner/bare", mapping) == bare
    assert lrp.find_git_dir("owner/absent", mapping) is None
    assert lrp.find_git_dir("owner/absent", tmp_path / "mirrors") is None


def test_render_keeps_no_checkout_rows_and_names_the_changed_commits(lrp, repo):
    path, parent = repo
    fix = _commit(path, {"pkg/train.py": TRAIN.replace(
        ACCUMULATED, "        total += train_step(model, opt, x, y).item()\n")})
    caught = lrp.evaluate_commit(_entry(parent, fix), path / ".git", corpus="c")
    caught.excerpt = "missed"
    absent = lrp.evaluate_commit({**_entry(parent, fix), "id": "gone"}, None, corpus="c")
    absent.excerpt = "missed"
    text = lrp.render([caught, absent])
    assert "gone" in text and "no checkout (no repository)" in text
    assert "c/t: missed in the excerpt, caught in the project" in text


EVALUATE = '''import torch


def evaluate(model, loader):
    model.eval()
    outs = []
    for x in loader:
        outs.append(model(x))
    return outs
'''
HEADER = ("# Source: https://example.invalid/owner/project/blob/0/ev.py\n"
          "# Adapted excerpt\n# (trimmed to the code the fix touches; omitted lines are marked).\n")


def _excerpt(directory: Path, name: str, real: str) -> None:
    """An excerpt in the corpus format: header, then the real file less lines 2-3."""
    lines = real.splitlines(keepends=True)
    directory.mkdir(exist_ok=True)
    (directory / name).write_text(HEADER + lines[0] + "# ... (lines 2-3 omitted)\n"
                                  + "".join(lines[3:]), encoding="utf-8")


def test_the_excerpts_fixed_lines_score_a_decorator_fix(lrp, tmp_path):
    """The fix adds ``@torch.no_grad()`` above the ``def``: the diff holds only the new line,
    the bug is the forward pass in the body, which the entry's fixed line names. Scored on
    the diff alone the commit is missed; with the excerpt's lines carried it is caught."""
    path = tmp_path / "owner+project"
    path.mkdir()
    _git(path, "init", "-q")
    parent = _commit(path, {"ev.py": EVALUATE})
    fixed = EVALUATE.replace("def evaluate", "@torch.no_grad()\ndef evaluate")
    fix = _commit(path, {"ev.py": fixed})
    excerpts = tmp_path / "corpus" / "t"
    excerpts.mkdir(parents=True)
    _excerpt(excerpts, "before.py", EVALUATE)
    _excerpt(excerpts, "after.py", fixed)
    entry = {**_entry(parent, fix), "path": "ev.py", "fixed_lines": [10], "also_lines": [],
             "after_lines": [11], "expected_rule": "TMM103"}
    assert lrp.evaluate_commit(entry, path / ".git").status == "missed"
    result = lrp.evaluate_commit(entry, path / ".git", excerpts=excerpts)
    assert result.status == "caught" and result.outcome.before_codes == ["TMM103"]
    assert result.carried == (2, 0)


def test_excerpt_lines_are_placed_by_omission_markers_then_text(lrp):
    excerpt = (HEADER + "import torch\n# ... (lines 2-40 omitted)\nx = f()\n"
               "y = g()\n").splitlines()
    assert lrp.excerpt_position(excerpt, 4) == 1  # before the first marker
    assert lrp.excerpt_position(excerpt, 6) == 41
    real = "import torch\n" + "x = f()\n" * 3 + "\n" * 36 + "x = f()\ny = g()\n"
    # "x = f()" is on lines 2, 3, 4 and 41: the marker places it at 41
    assert lrp.map_excerpt_lines("\n".join(excerpt), [6, 7], real) == ([41, 42], 0)
    assert lrp.map_excerpt_lines("\n".join(excerpt), [6], "z = 1\n") == ([], 1)

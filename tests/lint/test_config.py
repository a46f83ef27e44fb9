"""[tool.torchmem.lint] configuration: parsing, discovery of pyproject.toml, merging."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from torchmem.errors import UsageError
from torchmem.lint.config import (
    LintConfig,
    find_config_file,
    glob_to_regex,
    load_config,
    parse_config,
)

DATA_CODE = "import torch\nw = torch.ones(2)\nv = w.data\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_parse_accepts_kebab_and_snake_case_keys():
    cfg = parse_config({"select": ["TMM1"], "extend_select": "TMM901", "ignore": ["TMM102"],
                        "exclude": ["gen/**"], "per-file-ignores": {"tests/*": ["TMM101"]},
                        "respect-gitignore": False}, root="/p")
    assert cfg.select == ("TMM1",)
    assert cfg.extend_select == ("TMM901",)
    assert cfg.ignore == ("TMM102",)
    assert cfg.exclude == ("gen/**",)
    assert cfg.per_file_ignores == (("tests/*", ("TMM101",)),)
    assert cfg.respect_gitignore is False


@pytest.mark.parametrize("section, needle", [
    ({"selct": ["TMM1"]}, "unknown key 'selct'"),
    ({"ignore": [1]}, "must be a list of strings"),
    ({"per-file-ignores": ["x"]}, "per-file-ignores must be a table"),
    ({"respect-gitignore": "no"}, "respect-gitignore must be true or false"),
])
def test_parse_rejects_bad_tables(section, needle):
    with pytest.raises(UsageError) as info:
        parse_config(section)
    assert needle in info.value.message
    assert info.value.exit_code == 2


def test_effective_select_adds_extend_select_to_the_default_set():
    assert LintConfig().effective_select() is None
    assert LintConfig(extend_select=("TMM901",)).effective_select() == ["TMM", "TMM901"]
    assert LintConfig(select=("TMM1",), extend_select=("TMM4",)).effective_select() == \
        ["TMM1", "TMM4"]


def test_merged_cli_select_replaces_and_ignore_adds():
    cfg = LintConfig(select=("TMM1",), ignore=("TMM102",), exclude=("a",))
    m = cfg.merged(select=["TMM4"], ignore=["TMM103"], exclude=["b"], respect_gitignore=False)
    assert m.select == ("TMM4",)
    assert m.ignore == ("TMM102", "TMM103")
    assert m.exclude == ("a", "b")
    assert m.respect_gitignore is False
    assert cfg.merged().select == ("TMM1",)


def test_find_config_file_walks_up_and_skips_pyprojects_without_our_table(tmp_path):
    write(tmp_path / "pyproject.toml", """
        [tool.torchmem.lint]
        ignore = ["TMM401"]
    """)
    write(tmp_path / "pkg" / "pyproject.toml", """
        [project]
        name = "pkg"
    """)
    src = write(tmp_path / "pkg" / "src" / "m.py", "x = 1\n")
    assert find_config_file(src) == tmp_path / "pyproject.toml"
    cfg = load_config(src)
    assert cfg.ignore == ("TMM401",)
    assert Path(cfg.root) == tmp_path


def test_per_file_ignores_match_relative_globs_and_basenames(tmp_path):
    cfg = LintConfig(per_file_ignores=(("tests/**", ("TMM101",)), ("conftest.py", ("TMM4",))),
                     root=str(tmp_path))
    assert cfg.ignored_for(str(tmp_path / "tests" / "a" / "t.py")) == ("TMM101",)
    assert cfg.ignored_for(str(tmp_path / "src" / "conftest.py")) == ("TMM4",)
    assert cfg.ignored_for(str(tmp_path / "src" / "train.py")) == ()


def test_exclude_matches_directories_and_names(tmp_path):
    cfg = LintConfig(exclude=("third_party", "*_pb2.py", "gen/**"), root=str(tmp_path))
    assert cfg.is_excluded(str(tmp_path / "third_party"))
    assert cfg.is_excluded(str(tmp_path / "a" / "x_pb2.py"))
    assert cfg.is_excluded(str(tmp_path / "gen" / "deep" / "f.py"))
    assert not cfg.is_excluded(str(tmp_path / "src" / "train.py"))


@pytest.mark.parametrize("glob, path, hit", [
    ("*.py", "a.py", True), ("*.py", "d/a.py", False), ("**/*.py", "d/e/a.py", True),
    ("**/gen_*.py", "gen_x.py", True), ("build", "build/x.py", True), ("a?c", "abc", True),
    ("[!x]y", "ay", True), ("[!x]y", "xy", False),
])
def test_glob_to_regex(glob, path, hit):
    assert bool(glob_to_regex(glob).match(path)) is hit


def test_invalid_toml_is_a_usage_error_with_a_tip(tmp_path):
    write(tmp_path / "pyproject.toml", "[tool.torchmem.lint\nselect = \n")
    with pytest.raises(UsageError) as info:
        load_config(tmp_path, config_file=tmp_path / "pyproject.toml")
    assert "not valid TOML" in info.value.message
    assert "--isolated" in (info.value.tip or "")


def test_isolated_ignores_configuration(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.torchmem.lint]\nignore = ["TMM401"]\n')
    assert load_config(tmp_path, isolated=True).ignore == ()


def test_missing_config_file_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="no such file"):
        load_config(tmp_path, config_file=tmp_path / "nope.toml")


def test_configuration_changes_what_lint_paths_reports(tmp_path):
    from torchmem.lint.files import lint_paths

    f = write(tmp_path / "m.py", DATA_CODE)
    # .data is a hygiene rule: off by default, on when selected
    assert lint_paths([str(f)], config=LintConfig()).violations == ()
    write(tmp_path / "pyproject.toml", '[tool.torchmem.lint]\nextend-select = ["TMM401"]\n')
    (v,) = lint_paths([str(f)]).violations
    assert v.code == "TMM401" and v.message.startswith("hygiene (not a memory problem): ")
    write(tmp_path / "pyproject.toml",
          '[tool.torchmem.lint]\nextend-select = ["TMM401"]\nignore = ["TMM4"]\n')
    assert lint_paths([str(f)]).violations == ()
    write(tmp_path / "pyproject.toml",
          '[tool.torchmem.lint]\nextend-select = ["TMM401"]\n'
          'per-file-ignores = { "m.py" = ["TMM401"] }\n')
    assert lint_paths([str(f)]).violations == ()


def test_unknown_code_in_configuration_is_a_usage_error(tmp_path):
    from torchmem.lint.files import lint_paths

    f = write(tmp_path / "m.py", DATA_CODE)
    write(tmp_path / "pyproject.toml", '[tool.torchmem.lint]\nignore = ["TMM999x"]\n')
    with pytest.raises(UsageError, match="unknown rule code"):
        lint_paths([str(f)])

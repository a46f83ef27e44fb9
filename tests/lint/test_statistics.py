"""``--statistics`` marks with ``[*]`` only the rules that ``--fix`` would actually fix."""

from __future__ import annotations

from torchmem.cli.lint import main
from torchmem.lint.formats import format_statistics
from torchmem.lint.registry import _load
from torchmem.lint.violation import Edit, Fix, Violation


def _violation(code: str, safety: str | None) -> Violation:
    fix = None if safety is None else Fix("fix it", safety, (Edit(1, 0, 1, 1, "y"),))
    return Violation("a.py", 1, 0, 1, 1, code, "name", "msg", fix)


def test_marker_follows_each_rules_fix_safety_in_the_registry():
    rules = _load()
    table = format_statistics([_violation(code, r.fix_safety) for code, r in rules.items()])
    for code, rule in rules.items():
        row = next(line for line in table.splitlines() if f" {code} " in line)
        assert ("[*]" in row) == (rule.fix_safety == "safe"), row


def test_cli_statistics_does_not_promise_unsafe_fixes(tmp_path, capsys, monkeypatch):
    (tmp_path / "m.py").write_text("import torch\nx = torch.ones(1)\ny = x.data\n")
    monkeypatch.chdir(tmp_path)
    assert main([".", "--isolated", "--extend-select", "TMM401", "--statistics"]) == 1
    out = capsys.readouterr().out
    assert out.split() == ["1", "TMM401", "[-]", "tensor-data"]

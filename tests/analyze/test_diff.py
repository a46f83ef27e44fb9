"""``torchmem.analyze.diff``: figures side by side and the explanations, on captures built
by hand with known numbers (the real scripts are in tests/cli/test_diff.py)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from torchmem.analyze.diff import (
    Limit,
    Row,
    diff_captures,
    listed_elsewhere,
    module_of,
    over_limits,
    parse_limit,
)
from torchmem.model.capture import Capture, Culprit, Finding, Growth, StepRecord, StorageSummary
from torchmem.model.lines import LineRecord

MiB = 1 << 20
STATE = {"parameter": 8 * MiB, "buffer": 0, "gradient": 8 * MiB, "optimizer_state": 16 * MiB}


def capture(*, peak: int = 200 * MiB, roles: dict[str, int] | None = None, step_s: float = 0.1,
            steps: int = 20, growth: float = 0.0, findings: tuple[Finding, ...] = (),
            storages: tuple[StorageSummary, ...] = (), devices: tuple[str, ...] = ("cpu",),
            **fields: Any) -> Capture:
    records = tuple(StepRecord(step=i, time=step_s * i,
                               used={d: 100 * MiB + int(growth * i) for d in devices})
                    for i in range(1, steps + 1))
    verdicts = tuple(Growth(device=d, verdict="growing" if growth else "flat",
                            bytes_per_step=growth, r2=1.0 if growth else 0.1, first_step=3,
                            last_step=steps) for d in devices)
    return Capture(tool="torchmem doctor", version="0", argv=("train.py",),
                   started_at="2026-01-01T00:00:00Z", duration_s=step_s * steps, exit_code=0,
                   outcome="ok", step_source="optimizer", devices=devices, steps=records,
                   peak={d: peak for d in devices}, growth=verdicts, findings=findings,
                   top_storages=storages,
                   bytes_by_role=dict(STATE if roles is None else roles), **fields)


def storage(name: str, nbytes: int, role: str = "parameter", shape: tuple[int, ...] = (4, 4),
            dtype: str = "float32") -> StorageSummary:
    return StorageSummary(nbytes=nbytes, device="cpu", dtype=dtype, shape=shape, role=role,
                          name=name)


def kinds(diff: Any) -> list[str]:
    return [e.kind for e in diff.explanations]


def test_identical_captures_have_nothing_to_explain():
    a = capture()
    diff = diff_captures(a, a, a_label="a.json", b_label="b.json")
    assert diff.explanations == ()
    assert [r.change for r in diff.peak] == [0]
    assert over_limits(diff, [parse_limit("0%"), parse_limit("growth=0B")]) == []


def test_a_larger_batch_is_read_from_inputs_and_shapes_scaling_with_model_state_unchanged():
    a = capture(peak=150 * MiB, roles={**STATE, "other": 1 * MiB},
                storages=(storage("x", 1 * MiB, "other", (1024, 256)),))
    b = capture(peak=180 * MiB, roles={**STATE, "other": 2 * MiB},
                storages=(storage("x", 2 * MiB, "other", (2048, 256)),))
    diff = diff_captures(a, b, a_label="b1024.json", b_label="b2048.json")
    assert kinds(diff)[0] == "batch_size"
    text = diff.explanations[0].text
    assert "a larger batch, about ×2.00" in text
    assert "other bytes 1.0 MiB -> 2.0 MiB" in text and "`x` (1024, 256) -> (2048, 256)" in text
    assert "peak on cpu +30.0 MiB" in text
    reverse = diff_captures(b, a)
    assert "a smaller batch, about ×0.50" in reverse.explanations[0].text


def test_inputs_that_scale_unevenly_are_not_called_a_batch_change():
    a = capture(roles={**STATE, "other": 1 * MiB, "activation": 10 * MiB})
    b = capture(roles={**STATE, "other": 2 * MiB, "activation": 10 * MiB})
    assert "batch_size" not in kinds(diff_captures(a, b))


def test_other_tensors_kept_by_a_new_holder_are_not_a_batch_change():
    leak = Finding(cause="retained_graph", title="retained autograd graph", bytes=140 * 1024,
                   bytes_per_step=40 * 1024, culprit=Culprit(name="outputs"))
    a = capture(roles={**STATE, "other": 536 * 1024})
    b = capture(roles={**STATE, "other": 676 * 1024}, growth=40 * 1024, findings=(leak,))
    assert kinds(diff_captures(a, b)) == ["new_holder", "growth"]


def test_checkpointing_from_activations_that_fell_and_slower_steps():
    a = capture(roles={**STATE, "other": MiB, "activation": 60 * MiB}, step_s=0.100)
    b = capture(roles={**STATE, "other": MiB, "activation": 15 * MiB}, step_s=0.130)
    diff = diff_captures(a, b, a_label="a.json", b_label="ckpt.json")
    assert kinds(diff) == ["checkpointing"]
    text = diff.explanations[0].text
    assert text.startswith("activation checkpointing added in ckpt.json: activation bytes "
                           "60.0 MiB -> 15.0 MiB (-45.0 MiB, -75.0%)")
    assert "time per step ×1.30 (100.0 ms -> 130.0 ms)" in text and "recomputed" in text
    back = diff_captures(b, a)
    assert back.explanations[0].text.startswith("activation checkpointing removed")


def test_a_lower_peak_without_timing_evidence_is_named_as_shrunk_activations_not_checkpointing():
    a = capture(peak=196 * MiB, roles={**STATE, "other": 2 * MiB}, step_s=0.40)
    b = capture(peak=172 * MiB, roles={**STATE, "other": 2 * MiB}, step_s=0.34)
    diff = diff_captures(a, b)
    assert kinds(diff) == ["activations"]
    assert "the activations at the peak shrank: the peak on cpu 196.0 MiB -> 172.0 MiB" in (
        diff.explanations[0].text)
    assert "autocast" in diff.explanations[0].text


def test_a_checkpoint_call_in_the_per_line_data_is_evidence_enough():
    line = LineRecord(file="/x/train.py", line=20, code="x = checkpoint(block, x)",
                      allocated_bytes=4 * MiB, alive_bytes=0, peak_share=0.1)
    a = capture(roles={**STATE, "other": MiB, "activation": 60 * MiB}, step_s=0.1)
    b = capture(roles={**STATE, "other": MiB, "activation": 20 * MiB}, step_s=0.1,
                lines=(line,))
    diff = diff_captures(a, b, b_label="b.json")
    assert kinds(diff)[0] == "checkpointing"
    assert "a line calling checkpoint appears" in diff.explanations[0].text
    assert diff.lines[0].where == "train.py:20" and diff.lines[0].allocated_a is None


def test_lines_match_by_code_when_a_commit_shifts_line_numbers():
    def rec(line: int, code: str, alive: int) -> LineRecord:
        return LineRecord(file="/x/train.py", line=line, code=code, allocated_bytes=alive,
                          alive_bytes=alive)
    a = capture(lines=(rec(30, "logits = model(x)", 8 * MiB), rec(31, "h.append(y)", 0)))
    b = capture(lines=(rec(33, "logits = model(x)", 8 * MiB), rec(34, "h.append(y)", 40 * MiB)))
    diff = diff_captures(a, b)
    assert [(r.where, r.alive_a, r.alive_b) for r in diff.lines] == [
        ("train.py:34", 0, 40 * MiB), ("train.py:33", 8 * MiB, 8 * MiB)]
    line = [e for e in diff.explanations if e.kind == "line"]
    assert line and line[0].text.startswith("train.py:34 `h.append(y)`: allocated 0 B -> 40.0 MiB")


def test_line_records_as_plain_dicts_are_read_too():
    class Loaded:  # anything with a capture's attributes: a snapshot import, a dict...
        def __init__(self, base: Capture, lines: list[dict[str, Any]]) -> None:
            self._base, self.lines = base, lines

        def __getattr__(self, name: str) -> Any:
            return getattr(self._base, name)

    rec = {"file": "t.py", "line": 3, "code": "y = f(x)", "allocated_bytes": 5 * MiB,
           "alive_bytes": MiB, "peak_share": 0.5}
    diff = diff_captures(capture(), Loaded(capture(), [rec]))
    assert [(r.where, r.allocated_b, r.alive_b, r.share_b) for r in diff.lines] == [
        ("t.py:3", 5 * MiB, MiB, 0.5)]


def test_new_and_vanished_findings_are_holders_with_their_numbers():
    leak = Finding(cause="retained_graph", title="retained autograd graph", bytes=12 * MiB,
                   bytes_per_step=256 * 1024,
                   culprit=Culprit(name="losses", file="/x/train.py", line=36))
    a = capture()
    b = capture(growth=256 * 1024, findings=(leak,))
    diff = diff_captures(a, b, a_label="a.json", b_label="b.json")
    assert [c.status for c in diff.findings] == ["new"]
    assert diff.explanations[0].text == (
        "new holder in b.json: `losses` (train.py:36) keeps a retained autograd graph: "
        "12.0 MiB at the end, +256.0 KiB/step")
    growth = [e.text for e in diff.explanations if e.kind == "growth"]
    assert growth == ["memory grows on cpu in b.json by 256.0 KiB/step (a.json: flat)"]
    gone = diff_captures(b, a, a_label="b.json", b_label="a.json")
    assert gone.explanations[0].kind == "vanished_holder"
    assert "`losses` (train.py:36) no longer keeps a retained autograd graph" in (
        gone.explanations[0].text)


def test_model_optimizer_and_dtype_changes():
    a = capture(storages=(storage("fc.weight", 4 * MiB), storage("fc.bias", 1 * MiB)))
    half = {**STATE, "parameter": 4 * MiB, "gradient": 4 * MiB, "optimizer_state": 8 * MiB}
    b = capture(roles=half, storages=(storage("fc.weight", 2 * MiB, dtype="bfloat16"),
                                      storage("fc.bias", 1 * MiB)))
    diff = diff_captures(a, b)
    assert set(kinds(diff)) >= {"dtype", "model_size"}
    dtype = next(e.text for e in diff.explanations if e.kind == "dtype")
    assert dtype == "1 listed storage changed dtype float32 -> bfloat16 (e.g. `fc.weight`)"
    sgd = capture(roles={**STATE, "optimizer_state": 0})
    opt = diff_captures(sgd, a)
    text = next(e.text for e in opt.explanations if e.kind == "optimizer_state")
    assert "optimizer state 0 B -> 16.0 MiB with the same parameters: 0.00× -> 2.00×" in text


def test_a_large_new_storage_is_a_new_holder_only_when_the_other_list_would_show_it():
    a = capture(storages=(storage("fc.weight", 4 * MiB), storage("fc.bias", 2 * MiB)))
    big = storage("cache", 64 * MiB, "other", (4096, 4096))
    small = storage("tmp", MiB, "other", (512, 512))
    b = capture(storages=(big, storage("fc.weight", 4 * MiB), small))
    assert listed_elsewhere(big, a.top_storages) is False
    assert listed_elsewhere(small, a.top_storages) is None  # a's list may have been cut
    assert listed_elsewhere(storage("fc.weight", 4 * MiB), a.top_storages) is True
    texts = [e.text for e in diff_captures(a, b, b_label="b.json").explanations]
    assert "new storage in b.json: `cache` (other, 64.0 MiB, (4096, 4096) float32)" in texts
    assert not any("`tmp`" in t for t in texts)


def test_modules_from_listed_storages_count_only_what_both_lists_can_say():
    a = capture(storages=(storage("enc.fc.weight", 4 * MiB), storage("grad of enc.fc.weight",
                                                                     4 * MiB, "gradient"),
                          storage("head.weight", MiB)))
    b = capture(storages=(storage("enc.fc.weight", 4 * MiB), storage("x", 2 * MiB, "other"),
                          storage("grad of enc.fc.weight", 4 * MiB, "gradient")))
    diff = diff_captures(a, b)
    # head.weight (1 MiB) is below b's smallest listed storage: unknown there, not counted
    assert {r.key: (r.a, r.b) for r in diff.modules} == {"enc.fc": (8 * MiB, 8 * MiB)}


@pytest.mark.parametrize("name, role, module", [
    ("blocks.0.fc1.weight", "parameter", "blocks.0.fc1"),
    ("grad of head.bias", "gradient", "head"),
    ("exp_avg_sq of enc.layers.3.w", "optimizer_state", "enc.layers.3"),
    ("weight", "parameter", "(model)"),
    ("saved by AddmmBackward0", "activation", None),
    ("x", "other", None),
    (None, "parameter", None),
])
def test_module_of(name, role, module):
    assert module_of(name, role) == module


@pytest.mark.parametrize("text, limit", [
    ("10%", Limit("peak", 0.10, True, "10%")),
    ("peak=5%", Limit("peak", 0.05, True, "peak=5%")),
    ("50MiB", Limit("peak", 50 * MiB, False, "50MiB")),
    ("growth=64KiB", Limit("growth", 65536, False, "growth=64KiB")),
    (" growth = 1% ", Limit("growth", 0.01, True, "growth = 1%")),
])
def test_parse_limit(text, limit):
    assert parse_limit(text) == limit


@pytest.mark.parametrize("text", ["", "%", "-5%", "nan%", "ten", "memory=5%", "1.5", "peak="])
def test_parse_limit_refuses_what_it_cannot_read(text):
    with pytest.raises(ValueError, match="expected a percentage or a byte quantity"):
        parse_limit(text)


def test_limits_on_peak_and_growth():
    rise = Row("cpu", 100 * MiB, 111 * MiB)
    assert parse_limit("10%").exceeded(rise) and not parse_limit("12%").exceeded(rise)
    assert parse_limit("10MiB").exceeded(rise) and not parse_limit("11MiB").exceeded(rise)
    assert not parse_limit("0%").exceeded(Row("cpu", 100 * MiB, 90 * MiB))  # fell
    # a baseline that does not grow has no percentage: any growth is over it
    assert parse_limit("growth=50%").exceeded(Row("cpu", 0.0, 4096.0))
    a, b = capture(), capture(peak=230 * MiB, growth=8192)
    lines = over_limits(diff_captures(a, b), [parse_limit("10%"), parse_limit("growth=4KiB")])
    assert lines == [
        "peak on cpu rose from 200.0 MiB to 230.0 MiB: +30.0 MiB (+15.0%), over the "
        "--fail-over 10% limit",
        "growth on cpu rose from 0 B/step to 8.0 KiB/step: +8.0 KiB/step, over the "
        "--fail-over growth=4KiB limit"]


def test_run_captures_get_growth_verdicts_from_their_steps():
    base = capture(growth=64 * 1024)
    run = dataclasses.replace(base, tool="torchmem run", growth=())
    diff = diff_captures(capture(), run)
    assert diff.growth[0].b == pytest.approx(64 * 1024, rel=0.01)
    assert diff.b.verdict == {"cpu": "growing"}


def test_the_diff_round_trips_to_json_data():
    import json

    leak = Finding(cause="growing_container", title="container grows", bytes=MiB,
                   culprit=Culprit(name="keep"))
    diff = diff_captures(capture(), capture(findings=(leak,), growth=4096))
    data = json.loads(json.dumps(diff.to_dict(), allow_nan=False))
    assert data["peak"][0] == {"key": "cpu", "a": 200 * MiB, "b": 200 * MiB}
    assert data["findings"][0]["status"] == "new" and data["findings"][0]["holder"] == "keep"
    assert [e["kind"] for e in data["explanations"]] == kinds(diff)

"""The summary line says how the script ended, with the numbers the run really had."""

from __future__ import annotations

import io

from torchmem.model.capture import StepRecord
from torchmem.report.html import render_html
from torchmem.report.terminal import render_capture


def _text(capture) -> str:
    out = io.StringIO()
    render_capture(capture, file=out, width=120)
    return out.getvalue()


def test_sys_exit_with_a_message_is_summarised_with_the_message_and_real_exit_code(make_capture) -> None:
    capture = make_capture(outcome="exit", exit_code=1, error="SystemExit: bad config")
    text = _text(capture)
    assert "sys.exit with a message: exit code 1" in text
    assert "sys.exit(1)" not in text and "bad config" not in text  # Python printed it once


def test_sigterm_has_its_own_words_in_text_and_html(make_capture) -> None:
    capture = make_capture(outcome="terminated", exit_code=143)
    assert "stopped by SIGTERM" in _text(capture)
    assert "stopped by SIGTERM" in render_html(capture)


def test_a_thinned_step_record_still_counts_every_step(make_capture) -> None:
    # long runs keep the first, last and a sample of the middle steps
    kept = [1, 2, 3, 5000, 9998, 9999, 10000]
    steps = tuple(StepRecord(step=i, time=0.01 * i, used={"cpu": 1 << 20}) for i in kept)
    capture = make_capture(steps=0, outcome="max_steps")
    capture = type(capture).from_dict({**capture.to_dict(),
                                       "steps": [s.to_dict() for s in steps]})
    text = _text(capture)
    assert "10000 steps" in text and "after 10000 steps" in text

"""The SVG charts are total: any numbers give a chart (or "no data") quickly, never a hang."""

from __future__ import annotations

import dataclasses
import math
import time
import xml.etree.ElementTree as ET

import pytest

from torchmem.model.capture import StepRecord
from torchmem.report.html import render_html
from torchmem.report.svg import MAX_TICKS, Series, _byte_ticks, line_chart, nice_ticks

INF, NAN = math.inf, math.nan

RANGES = [
    (0.0, INF), (-INF, 0.0), (NAN, 1.0), (1.0, NAN), (-INF, INF),
    (-1e308, 1e308), (0.0, 1.7e308), (5.0, 5.0), (10.0, 0.0), (0.0, 1e-300),
    (9e18, 9e18 + 10), (1e20, 1e20 + 1000), (2.0**63 - 5, 2.0**63), (-(2.0**63), 2.0**63),
    (0.0, 1.0), (1e-9, 2e-9),
    # a step below half the float spacing: a float accumulator never advances
    (1e20, 1e20 + 16384), (9e18, 9e18 + 4096),
]


@pytest.mark.parametrize("low, high", RANGES)
@pytest.mark.parametrize("ticks", [_byte_ticks, nice_ticks])
def test_tick_functions_are_total(ticks, low, high):
    started = time.perf_counter()
    values = ticks(low, high)
    assert time.perf_counter() - started < 0.5
    assert len(values) <= MAX_TICKS
    assert all(math.isfinite(v) for v in values)
    assert values == sorted(set(values))


def test_usual_ticks_are_unchanged():
    assert _byte_ticks(0, 1024) == [0, 256, 512, 768, 1024]
    assert nice_ticks(0, 10) == [0, 2, 4, 6, 8, 10]


@pytest.mark.parametrize("xs, ys", [
    ([1, 2, 3], [INF, 1, 2]),
    ([1, 2, 3], [NAN, NAN, NAN]),
    ([INF, 2, 3], [1, 2, 3]),
    ([1, 2], [-1e308, 1e308]),
    ([9e18], [2.0**62]),
    ([9e18, 9e18 + 1], [0, 1]),
    ([0, 1], [0, 1.7e308]),
    ([], []),
    ([1, 2, 3], [1, 2]),
])
def test_line_chart_is_total(xs, ys):
    started = time.perf_counter()
    svg = line_chart([Series("s", xs, ys, points=True)], y_format=str)
    assert time.perf_counter() - started < 0.5
    ET.fromstring(svg)
    assert "nan" not in svg.lower() and "inf" not in svg.lower()


@pytest.mark.parametrize("first, last", [(2**63 - 2, 2**63 - 1), (9 * 10**18, 9 * 10**18 + 4096)])
def test_page_renders_with_extreme_but_valid_numbers(make_capture, first, last):
    big = 2**63 - 1
    steps = (StepRecord(step=first, time=0.0, used={"cpu": 0}),
             StepRecord(step=last, time=1e18, used={"cpu": big}, reserved={"cpu": big}))
    cap = make_capture(steps=2, timeline={"t": [0.0, 1e18], "cpu": [0.0, float(big)]})
    cap = dataclasses.replace(cap, steps=steps)
    started = time.perf_counter()
    page = render_html(cap)
    assert time.perf_counter() - started < 2.0
    assert page.startswith("<!DOCTYPE html>")

"""Inline SVG line charts for the HTML report (no JavaScript, no external files).

:func:`line_chart` draws one or more series against a shared x axis with labelled axes,
an optional dashed trend line, and ``<title>`` tooltips on the points. Every piece of
text that reaches the SVG is XML-escaped here, so callers may pass user strings. This
module never imports torch.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from html import escape
from typing import Callable, Sequence

__all__ = ["Series", "line_chart", "nice_ticks", "PALETTE"]

#: Colours of successive series (colour-blind friendly, readable on white).
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf")


@dataclass(frozen=True)
class Series:
    """One line of a chart.

    Attributes:
        label: legend text (escaped when drawn).
        x: x values (e.g. step numbers).
        y: y values (e.g. bytes), same length as ``x``.
        dashed: draw the line dashed (used for fitted trends and secondary series).
        points: draw a dot with a tooltip at each point (only for short series).
    """

    label: str
    x: Sequence[float]
    y: Sequence[float]
    dashed: bool = False
    points: bool = False
    color: str | None = None
    extra: dict[str, str] = field(default_factory=dict)


#: Most ticks an axis gets, whatever its range (a bound on every tick loop).
MAX_TICKS = 50


def _ticks_on(low: float, high: float, step: float) -> list[float]:
    """Multiples of ``step`` within ``[low, high]``, computed by index (never a float
    accumulator that may stop advancing), at most :data:`MAX_TICKS` of them."""
    if not (step > 0 and math.isfinite(step)):
        return []
    first = math.ceil(low / step - 1e-9)
    ticks: list[float] = []
    for i in range(MAX_TICKS + 1):
        value = (first + i) * step
        if value > high + step * 1e-9 or not math.isfinite(value):
            break
        if ticks and value <= ticks[-1]:  # the step is below float resolution here
            continue
        ticks.append(value)
    return ticks if len(ticks) <= MAX_TICKS else ticks[:: -(-len(ticks) // MAX_TICKS)]


def _finite_range(low: float, high: float) -> tuple[float, float] | None:
    if not (math.isfinite(low) and math.isfinite(high)):
        return None
    if high < low:
        low, high = high, low
    if not math.isfinite(high - low):
        return None
    return low, high


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About ``count`` round tick values covering ``[low, high]`` (1, 2, 2.5 or 5 x 10^k steps).

    Total on any input: non-finite bounds give ``[]``, and at most :data:`MAX_TICKS` ticks
    are returned.
    """
    span = _finite_range(low, high)
    if span is None:
        return []
    low, high = span
    if high == low:
        return [low]
    raw = (high - low) / max(1, count)
    if raw <= 0:  # the span underflowed
        return [low]
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    return sorted({round(t, 10) for t in _ticks_on(low, high, step)})


def _byte_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Ticks on binary-friendly steps (multiples of KiB/MiB/GiB powers of two).

    Total on any input: non-finite bounds give ``[]``, and at most :data:`MAX_TICKS` ticks
    are returned.
    """
    span_ = _finite_range(low, high)
    if span_ is None:
        return []
    low, high = span_
    span = max(high - low, 1.0)
    raw = span / max(1, count)
    step = 2.0 ** max(0, math.floor(math.log2(raw))) if raw >= 1 else 1.0
    if step * 1.5 < raw:
        step *= 2
    return _ticks_on(low, high, step)


def _empty(width: int) -> str:
    return ('<svg xmlns="http://www.w3.org/2000/svg" class="chart empty" width="100%" '
            f'viewBox="0 0 {width} 40" role="img"><text x="8" y="24">no data</text></svg>')


def _finite(s: Series) -> Series:
    """``s`` without the points that are not finite numbers (they cannot be drawn)."""
    points = []
    for x, y in zip(s.x, s.y):
        try:
            fx, fy = float(x), float(y)
        except (TypeError, ValueError, OverflowError):
            continue
        if math.isfinite(fx) and math.isfinite(fy):
            points.append((fx, fy))
    return dataclasses.replace(s, x=[p[0] for p in points], y=[p[1] for p in points])


def line_chart(series: Sequence[Series], *, width: int = 760, height: int = 260,
               x_label: str = "step", y_format: Callable[[float], str] = str,
               bytes_axis: bool = True, title: str = "") -> str:
    """Return an ``<svg>`` element drawing ``series``.

    Args:
        series: the lines to draw; empty or single-point series are skipped.
        width: drawing width in px (the SVG scales to its container).
        height: drawing height in px.
        x_label: caption of the x axis.
        y_format: formats a y value for tick labels and tooltips (e.g. ``format_bytes``).
        bytes_axis: place y ticks on powers of two (bytes) instead of decimal steps.
        title: accessible title of the chart.

    Returns:
        The SVG markup (a string; every text inside it is escaped).

    Example:
        >>> svg = line_chart([Series("cpu", [1, 2, 3], [10, 20, 30])], y_format=str)
        >>> svg.startswith("<svg")
        True
    """
    drawn = [_finite(s) for s in series if len(s.x) == len(s.y)]
    drawn = [s for s in drawn if len(s.x) >= 1]
    xs = [v for s in drawn for v in s.x]
    ys = [v for s in drawn for v in s.y]
    if not drawn or not math.isfinite(max(xs) - min(xs)) or not math.isfinite(max(ys) - min(ys)):
        return _empty(width)
    left, right, top, bottom = 86, 16, 14, 40
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys), max(ys)
    if y1 == y0:
        pad = max(abs(y1) * 0.05, 1.0)
        y0, y1 = y0 - pad, y1 + pad
    else:
        pad = (y1 - y0) * 0.06
        y0, y1 = y0 - pad, y1 + pad
    if x1 == x0:
        pad = max(1.0, abs(x0) * 1e-6)
        x0, x1 = x0 - pad, x1 + pad
    if not all(math.isfinite(v) and v > 0 for v in (x1 - x0, y1 - y0)):
        return _empty(width)
    plot_w, plot_h = width - left - right, height - top - bottom

    def px(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * plot_w

    def py(y: float) -> float:
        return top + (1 - (y - y0) / (y1 - y0)) * plot_h

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="100%" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">']
    if title:
        parts.append(f"<title>{escape(title)}</title>")
    parts.append(f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" '
                 'fill="#fafafa" stroke="#ccc"/>')
    y_ticks = _byte_ticks(y0, y1) if bytes_axis else nice_ticks(y0, y1)
    for t in y_ticks:
        y = py(t)
        parts.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" '
                     'stroke="#e4e4e4"/>')
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" class="tick">'
                     f"{escape(y_format(t))}</text>")
    for t in nice_ticks(x0, x1, 8):
        x = px(t)
        label = f"{t:g}"
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top + plot_h}" '
                     f'y2="{top + plot_h + 4}" stroke="#888"/>')
        parts.append(f'<text x="{x:.1f}" y="{top + plot_h + 16}" text-anchor="middle" '
                     f'class="tick">{escape(label)}</text>')
    parts.append(f'<text x="{left + plot_w / 2:.1f}" y="{height - 6}" text-anchor="middle" '
                 f'class="axis">{escape(x_label)}</text>')
    for i, s in enumerate(drawn):
        color = s.color or PALETTE[i % len(PALETTE)]
        coords = " ".join(f"{px(float(x)):.1f},{py(float(y)):.1f}" for x, y in zip(s.x, s.y))
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        parts.append(f'<polyline fill="none" stroke="{escape(color)}" stroke-width="2"{dash} '
                     f'points="{coords}"><title>{escape(s.label)}</title></polyline>')
        if s.points and len(s.x) <= 400:
            for x, y in zip(s.x, s.y):
                parts.append(f'<circle cx="{px(float(x)):.1f}" cy="{py(float(y)):.1f}" r="2.2" '
                             f'fill="{escape(color)}"><title>{escape(s.label)} '
                             f'{escape(x_label)} {float(x):g}: {escape(y_format(float(y)))}'
                             "</title></circle>")
    legend_x = left + 8
    for i, s in enumerate(drawn):
        color = s.color or PALETTE[i % len(PALETTE)]
        y = top + 14 + 16 * i
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        parts.append(f'<line x1="{legend_x}" x2="{legend_x + 18}" y1="{y - 4}" y2="{y - 4}" '
                     f'stroke="{escape(color)}" stroke-width="2"{dash}/>')
        parts.append(f'<text x="{legend_x + 24}" y="{y}" class="legend">{escape(s.label)}</text>')
    parts.append("</svg>")
    return "".join(parts)

"""The HTML report: self-contained, escaped, and drawing the real numbers of the capture."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest

from torchmem.model.capture import Capture, Culprit, Finding
from torchmem.report.html import render_html, write_html
from torchmem.report.svg import Series, line_chart, nice_ticks

EVIL = "<script>alert('x')</script>"
MiB = 1 << 20


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += attrs


def _tags(page: str) -> _Tags:
    parser = _Tags()
    parser.feed(page)
    return parser


def _svgs(page: str) -> list[ET.Element]:
    return [ET.fromstring(m) for m in re.findall(r"<svg.*?</svg>", page, flags=re.S)]


def test_page_is_self_contained_and_has_no_script(capture):
    page = render_html(capture)
    parsed = _tags(page)
    assert page.startswith("<!DOCTYPE html>")
    assert "script" not in parsed.tags
    assert "link" not in parsed.tags and "img" not in parsed.tags and "iframe" not in parsed.tags
    assert not any(name in ("src", "href") for name, _ in parsed.attrs)
    # the only URL is the SVG namespace, which is a name, not a fetch
    assert set(re.findall(r"https?://[^\s\"'<>]+", page)) == {"http://www.w3.org/2000/svg"}
    assert "@import" not in page and "url(" not in page


def test_user_strings_are_escaped_everywhere(make_capture):
    culprit = Culprit(name=EVIL, kind="local", file=f"/tmp/{EVIL}.py", line=3, code=EVIL,
                      function=EVIL, type=EVIL)
    finding = Finding(cause="growing_container", title=EVIL, bytes=MiB, bytes_per_step=1.0,
                      culprit=culprit, evidence=(EVIL,), data={EVIL: EVIL}, fix=EVIL)
    cap = make_capture(argv0=f"{EVIL}.py", findings=(finding,), error=EVIL, notes=(EVIL,),
                       outcome="exception", environment={EVIL: EVIL})
    page = render_html(cap)
    assert "<script" not in page.lower()
    assert "script" not in _tags(page).tags
    assert page.count("&lt;script&gt;") >= 10
    for svg in _svgs(page):  # the charts stay well-formed XML
        assert svg.tag.endswith("svg")


def test_svg_in_page_is_well_formed_and_plots_every_step(capture):
    page = render_html(capture)
    svgs = _svgs(page)
    assert svgs, "no chart"
    ns = "{http://www.w3.org/2000/svg}"
    step_chart = svgs[0]
    lines = step_chart.findall(f"{ns}polyline")
    measured = [pl for pl in lines if "C heap" in (pl.findtext(f"{ns}title") or "")]
    assert len(measured) == 1
    pts = [tuple(map(float, p.split(","))) for p in measured[0].get("points").split()]
    assert len(pts) == len(capture.steps) == 20
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    assert xs == sorted(xs) and len(set(xs)) == 20       # one point per step, left to right
    assert ys == sorted(ys, reverse=True)                # memory grows, so y goes up the page
    # equal byte steps give equal pixel steps (a linear axis)
    gaps = [round(ys[i] - ys[i + 1], 1) for i in range(19)]
    assert max(gaps) - min(gaps) <= 0.2
    # the fitted growth line is drawn, dashed, from first_step to last_step
    fit = [pl for pl in lines if "fit" in (pl.findtext(f"{ns}title") or "")]
    assert len(fit) == 1 and fit[0].get("stroke-dasharray")
    fx = [float(p.split(",")[0]) for p in fit[0].get("points").split()]
    assert fx[0] == pytest.approx(xs[2], abs=0.11) and fx[1] == pytest.approx(xs[-1], abs=0.11)


def test_page_shows_the_numbers_and_fix(capture):
    page = render_html(capture)
    assert "retained autograd graph" in page
    assert "losses.append(loss)" in page
    assert "train.py:41" in page
    assert "+1.0 MiB/step" in page or "+1 MiB/step" in page
    assert "losses.append(loss.item())" in page
    assert "4.0 MiB" in page            # the top storage
    assert "(1024, 1024)" in page
    assert "activation" in page and "parameter" in page


def test_findings_are_ranked_by_bytes(make_capture):
    small = Finding(cause="growing_container", title="small one", bytes=1 * MiB)
    large = Finding(cause="eval_graph", title="large one", bytes=9 * MiB)
    page = render_html(make_capture(findings=(small, large)))
    assert page.index("large one") < page.index("small one")
    assert 'id="finding-1"' in page and 'id="finding-2"' in page


def test_healthy_doctor_capture_says_nothing_was_found(make_capture):
    cap = make_capture(findings=(), per_step=0)
    page = render_html(cap)
    assert "No cause of memory growth or misuse was found" in page


def test_run_capture_without_steps_renders(make_capture):
    cap = make_capture(tool="torchmem run", steps=0, findings=(), growth=(), devices=(),
                       peak={}, top_storages=(), bytes_by_role={})
    page = render_html(cap)
    assert "No training steps were found" in page
    assert "Findings" not in page


def test_sampled_timeline_is_drawn_when_present(make_capture):
    t = [0.0, 0.05, 0.1, 0.15]
    cap = make_capture(timeline={"t": t, "step": [0, 0, 1, 1], "cpu": [1.0, 2.0, 3.0, 2.0]})
    page = render_html(cap)
    assert "Sampled timeline" in page
    assert len(_svgs(page)) == 2


def test_render_is_deterministic_and_survives_a_json_round_trip(capture, tmp_path):
    path = capture.save(tmp_path / "c.json")
    assert render_html(Capture.load(path)) == render_html(capture)


def test_write_html_is_atomic(capture, tmp_path):
    out = write_html(capture, tmp_path / "sub" / "r.html")
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(OSError):
        write_html(capture, blocker / "r.html")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "sub"]
    assert [p.name for p in (tmp_path / "sub").iterdir()] == ["r.html"]


def test_line_chart_maps_extremes_to_the_plot_box():
    svg = ET.fromstring(line_chart([Series("a", [0, 10], [0, 100], points=True)], width=400,
                                   height=200, bytes_axis=False))
    ns = "{http://www.w3.org/2000/svg}"
    pts = [tuple(map(float, p.split(","))) for p in svg.find(f"{ns}polyline").get("points").split()]
    box = svg.find(f"{ns}rect")
    left, top = float(box.get("x")), float(box.get("y"))
    right, bottom = left + float(box.get("width")), top + float(box.get("height"))
    assert pts[0][0] == pytest.approx(left) and pts[1][0] == pytest.approx(right)
    assert top < pts[1][1] < pts[0][1] < bottom          # padded inside the box
    assert len(svg.findall(f"{ns}circle")) == 2


def test_line_chart_escapes_labels_and_handles_no_data():
    svg = line_chart([Series(EVIL, [1, 2], [3, 4])])
    assert "<script" not in svg and "&lt;script&gt;" in svg
    ET.fromstring(svg)
    assert "no data" in line_chart([])


@pytest.mark.parametrize("low, high, expected", [
    (0, 10, [0, 2, 4, 6, 8, 10]),
    (0, 1, [0, 0.2, 0.4, 0.6, 0.8, 1.0]),
    (3, 3, [3]),
    (0, 100, [0, 20, 40, 60, 80, 100]),
])
def test_nice_ticks(low, high, expected):
    assert nice_ticks(low, high) == pytest.approx(expected)


def test_template_ships_with_the_package():
    from torchmem.report import html

    assert (Path(html.__file__).parent / "templates" / "report.html.j2").is_file()

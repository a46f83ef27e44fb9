"""torchmem's pytest plugin, run by pytest itself (pytester): markers, fixture, baseline.

The plugin is the one installed through the ``pytest11`` entry point, as a user gets it.
Expected byte counts come from the shapes the test files allocate (float32: 4 bytes).
"""

from __future__ import annotations

import importlib.util
import json
import textwrap

import pytest

pytest_plugins = ["pytester"]

MiB = 1 << 20
NO_RANDOM = ("-p", "no:randomly")


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(*NO_RANDOM, *args)


@pytest.fixture(scope="module", autouse=True)
def _imported_before_pytester():
    """In-process pytester runs drop the modules each run imported; torch cannot import
    its dispatch-mode machinery twice, so the plugin's first use happens out here."""
    import torch

    from torchmem._pytest_peak import PeakWatch
    from torchmem.doctor.session import leak_check
    from torchmem.report.findings import findings_text  # noqa: F401

    with PeakWatch("cpu", limit=0, levels=True):
        torch.ones(2).sum()
    leak_check(lambda: torch.ones(2, requires_grad=True).sum().backward(), steps=4)


def test_loading_the_plugin_imports_no_torch_and_registers_the_marker(pytester):
    pytester.makepyfile(test_light="""
        import sys

        def test_nothing_heavy_is_imported():
            heavy = [m for m in ("torch", "rich", "jinja2") if m in sys.modules]
            assert heavy == []
    """)
    result = pytester.runpytest_subprocess("--strict-markers")
    result.assert_outcomes(passed=1)
    markers = pytester.runpytest_subprocess("--markers")
    markers.stdout.fnmatch_lines(["@pytest.mark.torchmem(peak=None, device=None, no_leak=False*"])


PEAK_TESTS = """
    import pytest
    import torch

    KEPT = torch.zeros(2048, 1024)  # 8 MiB alive before every test: not the body's

    @pytest.mark.torchmem(peak="6 MiB", device="cpu")
    def test_too_big():
        weights = torch.zeros(1024, 1024)            # 4 MiB
        acts = []
        for _ in range(4):  # 2 MiB each
            acts.append(torch.ones(512, 1024))
        del acts

    @pytest.mark.torchmem(peak="{limit}")
    def test_fits():
        a = torch.zeros(1024, 1024)
        b = a * 2
        del a, b
        c = torch.zeros(1024, 1024)
"""


def test_peak_gate_fails_with_the_peak_and_who_holds_the_storages(pytester):
    path = pytester.makepyfile(test_peak=PEAK_TESTS.format(limit=8 * MiB))
    line = 1 + path.read_text().splitlines().index(
        "        acts.append(torch.ones(512, 1024))")
    # a fresh process: the census lists every live storage, the outer session's too
    result = pytester.runpytest_subprocess(*NO_RANDOM)
    result.assert_outcomes(passed=1, failed=1)
    # 4 MiB + 4 x 2 MiB: the exact tensor peak of the body; KEPT is not counted
    result.stdout.fnmatch_lines([
        "torchmem: tensor peak of the test body is 12.0 MiB, above the limit of 6.0 MiB on "
        "cpu (live tensor bytes above the 8.0 MiB live when the body began*",
        "largest live storages when the body went above the limit (at 8.0 MiB, ones at "
        f"test_peak.py:{line} `acts.append(torch.ones(512, 1024))`):",
        "*8.0 MiB  float32 (2048, 1024)  other: `KEPT` (global of test_peak)  ?alive before "
        "the test?",
        "*4.0 MiB  float32 (1024, 1024)  other: `weights` (local of test_too_big)",
    ])
    result.stdout.fnmatch_lines_random([  # two storages of 2 MiB: either order
        "*2.0 MiB  float32 (512, 1024)  other: the result of ones, the op that went above",
        "*2.0 MiB  float32 (512, 1024)  other: `acts?0?` (local of test_too_big)",
        "bytes by role of the storages the body created then: other 8.0 MiB",
    ])
    assert "test_fits" not in result.stdout.str().split("short test summary")[-1]


@pytest.mark.parametrize("limit, passes", [("8 MiB", True), ("8388607", False),
                                           ("0.5GB", True), ("7.9MiB", False)])
def test_peak_limits_are_sizes_or_bytes(pytester, limit, passes):
    # test_fits peaks at exactly 8 MiB (a and b alive together)
    pytester.makepyfile(test_peak=PEAK_TESTS.format(limit=limit))
    result = run(pytester, "-k", "test_fits")
    result.assert_outcomes(passed=1 if passes else 0, failed=0 if passes else 1)
    if not passes:
        result.stdout.fnmatch_lines(["torchmem: tensor peak of the test body is 8.0 MiB, *"])


def test_bad_marker_arguments_fail_the_test_with_one_line(pytester):
    pytester.makepyfile(test_bad="""
        import pytest

        @pytest.mark.torchmem(peak="lots")
        def test_unit(): pass

        @pytest.mark.torchmem(peek="1 MiB")
        def test_typo(): pass

        @pytest.mark.torchmem(no_leak=True, steps=2)
        def test_steps(): pass

        @pytest.mark.torchmem(peak="1 MiB", device="tpu")
        def test_device(): pass
    """)
    result = run(pytester)
    result.assert_outcomes(failed=4)
    result.stdout.fnmatch_lines_random([
        "torchmem marker: peak='lots': expected a byte quantity such as *",
        "torchmem marker: expected keyword arguments peak, device, no_leak, steps; got peek=",
        "torchmem marker: steps must be an int >= 4; got 2",
        "torchmem: *tpu*",
    ])
    assert "During handling" not in result.stdout.str()


LEAK_TESTS = """
    import pytest
    import torch

    MODEL = torch.nn.Linear(16, 16)
    LOSSES = []
    CALLS = []

    @pytest.fixture
    def batch():
        CALLS.append("setup")
        return torch.randn(8, 16)

    @pytest.mark.torchmem(no_leak=True, steps=8)
    def test_leaky(batch):
        loss = MODEL(batch).pow(2).mean()
        loss.backward()
        LOSSES.append(loss)

    @pytest.mark.torchmem(no_leak=True, steps=8)
    def test_healthy(batch):
        loss = MODEL(batch).pow(2).mean()
        loss.backward()
        MODEL.zero_grad()
        CALLS.append(loss.item())

    def test_fixture_was_set_up_once_per_test():
        # test_healthy ran 8 times with one fixture set-up
        assert CALLS.count("setup") == 2 and len(CALLS) == 10

    def test_leak_check_fixture(torchmem_leak_check):
        history = {}

        def step(i=[0]):
            i[0] += 1
            history[i[0]] = MODEL(torch.randn(4, 16)).sum()

        torchmem_leak_check(step, steps=8)

    def test_leak_check_fixture_passes(torchmem_leak_check):
        capture = torchmem_leak_check(lambda: MODEL(torch.randn(4, 16)).sum().item(), steps=8)
        assert capture.findings == () and len(capture.steps) == 8
"""


def test_no_leak_marker_and_fixture_fail_with_the_doctors_finding(pytester):
    path = pytester.makepyfile(test_leaks=LEAK_TESTS)
    lines = path.read_text().splitlines()
    append = 1 + next(i for i, line in enumerate(lines) if "LOSSES.append(loss)" in line)
    keep = 1 + next(i for i, line in enumerate(lines) if "history[i[0]] =" in line)
    result = run(pytester)
    result.assert_outcomes(passed=3, failed=2)
    result.stdout.fnmatch_lines_random([
        "torchmem: the test test_leaky accumulates memory across 8 calls",
        f"    culprit: `LOSSES` (list, test_leaks.py:{append} `LOSSES.append(loss)`)",
        "    fix: store a number, not the graph: `LOSSES.append(loss.item())`*",
        "    cause: retained_graph, confidence medium",
        "torchmem: test_leak_check_fixture.<locals>.step() accumulates memory across 8 calls",
        f"    culprit: `step:history` (dict, test_leaks.py:{keep} *",
        "    cause: eval_graph, confidence medium",
    ])


def test_an_exception_in_a_no_leak_test_is_the_tests_own(pytester):
    pytester.makepyfile(test_raises="""
        import pytest, torch

        @pytest.mark.torchmem(no_leak=True, steps=6)
        def test_boom():
            torch.randn(3).sum()
            raise ValueError("the test's own error")

        def test_after_is_unaffected():
            assert torch.autograd.backward.__module__ == "torch.autograd"
    """)
    result = run(pytester)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["E       ValueError: the test's own error"])


BASELINE_TESTS = """
    import torch

    def test_model():
        model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(),
                                    torch.nn.Linear(256, 256))
        x = torch.randn(1024, 256)
        extra = [torch.zeros(256, 256) for _ in range({extra})]
        model(x).sum().backward()

    def test_small():
        torch.ones(256, 256).sum()
"""


def _baseline(path) -> dict:
    return json.loads(path.read_text())["tests"]


@pytest.mark.slow
def test_baseline_records_then_fails_a_grown_peak_and_names_the_role(pytester):
    pytester.makepyfile(test_base=BASELINE_TESTS.format(extra=1))
    base = pytester.path / "peaks.json"
    first = run(pytester, f"--torchmem-baseline={base}")
    first.assert_outcomes(passed=2)
    first.stdout.fnmatch_lines([f"torchmem: baseline written: {base} (2 test peaks)"])
    recorded = _baseline(base)
    # the ones and, while they are alive, their float32 sum
    assert recorded["test_base.py::test_small"]["peak"] == 256 * 256 * 4 + 4
    model = recorded["test_base.py::test_model"]
    assert model["roles"]["parameter"] == 2 * (256 * 256 + 256) * 4

    again = run(pytester, f"--torchmem-baseline={base}")
    again.assert_outcomes(passed=2)
    again.stdout.fnmatch_lines([f"torchmem: 2 test peaks compared with {base} (tolerance 10%), "
                                "0 grew"])

    pytester.makepyfile(test_base=BASELINE_TESTS.format(extra=8))  # +7 x 256 KiB in `extra`
    grown = run(pytester, f"--torchmem-baseline={base}")
    grown.assert_outcomes(passed=1, failed=1)
    grown.stdout.fnmatch_lines([
        "torchmem: tensor peak of the test body grew *: * baseline * on cpu (tolerance 10%*",
        "largest bytes per role of the storages the body created (baseline -> now):",
        "  other  *+1.8 MiB)",  # the only role that changed
        "the other bytes grew most",
        "if the new peak is expected, record it again: --torchmem-baseline-update",
        f"torchmem: 2 test peaks compared with {base} (tolerance 10%), 1 grew",
    ])
    assert _baseline(base) == recorded  # a comparing run never writes

    loose = run(pytester, f"--torchmem-baseline={base}", "--torchmem-tolerance=200%")
    loose.assert_outcomes(passed=2)

    update = run(pytester, f"--torchmem-baseline={base}", "--torchmem-baseline-update")
    update.assert_outcomes(passed=2)
    update.stdout.fnmatch_lines([f"torchmem: baseline updated: {base} (2 test peaks)"])
    new = _baseline(base)["test_base.py::test_model"]
    assert new["peak"] - model["peak"] == 7 * 256 * 256 * 4


@pytest.mark.parametrize("content, message", [
    ("{not json", "is not a torchmem baseline; expected JSON, got a parse error*"),
    ('{"tests": {}}', "is not a torchmem baseline; expected an object with 'torchmem_baseline'*"),
    ('{"torchmem_baseline": 9, "tests": {}}', "has format 9; this torchmem reads 1..1"),
    ('{"torchmem_baseline": 1, "tests": {"t": {"device": "cpu", "peak": -1}}}',
     "is not a valid torchmem baseline: tests?'t'?.peak: expected a non-negative integer*"),
])
def test_a_broken_baseline_is_one_line_and_a_usage_error(pytester, content, message):
    pytester.makepyfile(test_x="def test_x(): pass")
    base = pytester.path / "peaks.json"
    base.write_text(content)
    result = run(pytester, f"--torchmem-baseline={base}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: torchmem: --torchmem-baseline: {base} {message}"])
    assert base.read_text() == content


def test_bad_options_are_usage_errors(pytester):
    pytester.makepyfile(test_x="def test_x(): pass")
    result = run(pytester, "--torchmem-tolerance=lots")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: torchmem: --torchmem-tolerance: expected a fraction *"])
    result = run(pytester, "--torchmem-baseline-update")
    result.stderr.fnmatch_lines(["ERROR: torchmem: --torchmem-baseline-update needs *"])


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("xdist") is None, reason="needs pytest-xdist")
def test_baseline_under_xdist_is_written_by_the_controller_alone(pytester):
    tests = {f"test_w{i}": textwrap.dedent(f"""
        import torch

        def test_{i}():
            torch.zeros({i + 1}, 1024, 256).sum()
    """) for i in range(4)}
    pytester.makepyfile(**tests)
    base = pytester.path / "peaks.json"
    base.write_text(json.dumps({"torchmem_baseline": 1, "tests": {
        "test_w2.py::test_2": {"device": "cpu", "peak": 2 * MiB, "roles": {}},
        "gone.py::test_not_run": {"device": "cpu", "peak": 7, "roles": {}}}}))
    # workers compare (test_2 grew from 2 MiB to 3 MiB) and the controller counts it
    result = pytester.runpytest_subprocess(*NO_RANDOM, "-n", "2", f"--torchmem-baseline={base}")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines([
        "*torchmem: tensor peak of the test body grew 50%: 3.0 MiB, baseline 2.0 MiB on cpu*",
        f"torchmem: 1 test peaks compared with {base} (tolerance 10%), 1 grew; 3 tests have no "
        "baseline entry (record them: --torchmem-baseline-update)",
    ])
    result = pytester.runpytest_subprocess(*NO_RANDOM, "-n", "2", f"--torchmem-baseline={base}",
                                           "--torchmem-baseline-update")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines([f"torchmem: baseline updated: {base} (4 test peaks)"])
    recorded = _baseline(base)
    # each worker's measurements, merged by the controller; the entry of a test not run stays
    assert {k: v["peak"] for k, v in recorded.items()} == {
        **{f"test_w{i}.py::test_{i}": (i + 1) * MiB + 4 for i in range(4)},  # + the sum
        "gone.py::test_not_run": 7}
    assert not [p for p in pytester.path.iterdir() if p.name.startswith(".peaks.json")]


@pytest.mark.cuda
def test_cuda_peak_is_the_allocators(pytester):
    pytester.makepyfile(test_gpu="""
        import pytest, torch

        @pytest.mark.torchmem(peak="12 MiB", device="cuda")
        def test_gpu_too_big():
            a = torch.zeros(1024, 1024, device="cuda")
            b = torch.zeros(2048, 1024, device="cuda")
            c = torch.zeros(1024, 1024, device="cuda")

        @pytest.mark.torchmem(peak="16 MiB", device="cuda")
        def test_gpu_fits():
            a = torch.zeros(1024, 1024, device="cuda")
            del a
            b = torch.zeros(2048, 1024, device="cuda")
    """)
    result = run(pytester)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "torchmem: tensor peak of the test body is 16.0 MiB, above the limit of 12.0 MiB on "
        "cuda:0 (allocator bytes above the *",
    ])

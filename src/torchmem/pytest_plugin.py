"""torchmem's pytest plugin: memory gates for tests (see ``docs/pytest.md``).

Installed with torchmem (the ``pytest11`` entry point) and inert until used:

* ``@pytest.mark.torchmem(peak="200 MiB", device="cpu")`` fails the test when the tensor
  peak of its body goes above the limit: exact live tensor bytes on the CPU, the caching
  allocator's peak on CUDA, counted above what was live when the body began. The
  message gives the peak, the largest live storages when the body went above the limit,
  their roles and who holds them.
* ``@pytest.mark.torchmem(no_leak=True, steps=20)`` calls the test function ``steps``
  times (its fixtures are set up once) under a :class:`torchmem.DoctorSession`, one step
  per call, and fails with the doctor's finding (cause, culprit, ``file:line``, fix) when
  something accumulates across calls. The ``torchmem_leak_check(fn, steps=20)`` fixture
  does the same for any step function.
* ``--torchmem-baseline FILE`` measures the peak of every test body: the first run
  writes FILE, later runs fail a test whose peak grew more than
  ``--torchmem-tolerance`` (default 10%) and say which role grew;
  ``--torchmem-baseline-update`` records the new peaks instead of failing. Under
  pytest-xdist each worker measures its tests and only the controller writes the file.

Loading the plugin imports neither torch nor rich: they are imported when a marked test
runs (or, with a baseline, when the first test runs).
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass, field
from typing import Any, Callable

import pytest

__all__ = ["LEAK_CAUSES"]

MARKER = "torchmem"
_MARKER_HELP = (
    "torchmem(peak=None, device=None, no_leak=False, steps=20): fail the test when the "
    "tensor peak of its body goes above `peak` (\"200 MiB\", \"1.5GB\" or bytes), or, with "
    "no_leak=True, when calling it `steps` times accumulates memory (torchmem doctor's "
    "finding as the message)"
)
_KWARGS = ("peak", "device", "no_leak", "steps")
#: finding causes that mean memory accumulates across steps (a no_leak failure)
LEAK_CAUSES = frozenset({
    "retained_graph", "hidden_state_chain", "backward_flags_graph", "eval_graph",
    "view_pins_storage", "reference_cycle", "growing_container", "untracked_growth",
})
_DEFAULT_STEPS = 20
_DEFAULT_TOLERANCE = 0.10


# -- options ------------------------------------------------------------------------------
def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("torchmem", "torchmem: memory gates for tests")
    group.addoption("--torchmem-baseline", metavar="FILE", default=None,
                    help="measure the tensor peak of every test body; write FILE when it "
                         "does not exist, else fail tests whose peak grew more than the "
                         "tolerance")
    group.addoption("--torchmem-tolerance", metavar="FRACTION", default=None,
                    help="growth allowed over the baseline peak: 0.1 or 10%% (default 10%%)")
    group.addoption("--torchmem-baseline-update", action="store_true", default=False,
                    help="record this run's peaks in the baseline FILE instead of failing")
    group.addoption("--torchmem-device", metavar="DEVICE", default=None,
                    help="device measured by --torchmem-baseline and by markers without "
                         "device= (default: cpu)")


def _tolerance(text: str | None) -> float:
    if text is None:
        return _DEFAULT_TOLERANCE
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise pytest.UsageError(f"torchmem: --torchmem-tolerance: expected a fraction such "
                                f"as 0.1 or a percentage such as 10%; got {text!r}")
    return value


@dataclass
class _Baseline:
    """The baseline of this run (controller and workers alike)."""

    path: str  # resolved against the invocation directory
    shown: str  # as given on the command line
    tolerance: float
    update: bool
    device: str
    entries: Any  # dict[str, Entry] | None (None: no file yet, this run records it)
    measured: dict[str, Any] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    regressed: list[str] = field(default_factory=list)
    written: bool = False


_BASELINE = pytest.StashKey["_Baseline | None"]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", _MARKER_HELP)
    path = config.getoption("--torchmem-baseline", None)
    update = bool(config.getoption("--torchmem-baseline-update", False))
    tolerance = _tolerance(config.getoption("--torchmem-tolerance", None))
    if update and not path:
        raise pytest.UsageError("torchmem: --torchmem-baseline-update needs "
                                "--torchmem-baseline FILE")
    state = None
    if path:
        from torchmem._pytest_baseline import BaselineError, load

        shown = path
        path = str(config.invocation_params.dir / path) if not _isabs(path) else path
        try:
            entries = load(path, shown)
        except BaselineError as err:
            raise pytest.UsageError(f"torchmem: --torchmem-baseline: {err}") from None
        state = _Baseline(path=path, shown=shown, tolerance=tolerance, update=update,
                          device=config.getoption("--torchmem-device", None) or "cpu",
                          entries=entries)
    config.stash[_BASELINE] = state


def _isabs(path: str) -> bool:
    import os

    return os.path.isabs(path)


# -- the marker ---------------------------------------------------------------------------
@dataclass
class _Options:
    peak: int | None = None
    device: str | None = None
    no_leak: bool = False
    steps: int = _DEFAULT_STEPS


def _options(item: pytest.Item) -> _Options | None:
    """The marker's arguments, checked; fails the test with one line when they are wrong."""
    marker = item.get_closest_marker(MARKER)
    if marker is None:
        return None
    bad = [k for k in marker.kwargs if k not in _KWARGS]
    if marker.args or bad:
        got = f"positional arguments {marker.args!r}" if marker.args else f"{bad[0]}="
        pytest.fail(f"torchmem marker: expected keyword arguments {', '.join(_KWARGS)}; "
                    f"got {got}", pytrace=False)
    opts = _Options()
    peak = marker.kwargs.get("peak")
    if peak is not None:
        from torchmem.units import parse_bytes

        problem = None
        try:
            opts.peak = parse_bytes(peak)
        except (ValueError, TypeError) as err:
            problem = str(err)
        if problem is not None:
            pytest.fail(f"torchmem marker: peak={peak!r}: {problem}", pytrace=False)
    device = marker.kwargs.get("device")
    if device is not None and not isinstance(device, str):
        pytest.fail(f"torchmem marker: device must be a string such as 'cpu' or 'cuda:0'; "
                    f"got {device!r}", pytrace=False)
    opts.device = device
    opts.no_leak = bool(marker.kwargs.get("no_leak", False))
    steps = marker.kwargs.get("steps", _DEFAULT_STEPS)
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 4:
        pytest.fail(f"torchmem marker: steps must be an int >= 4; got {steps!r}", pytrace=False)
    opts.steps = steps
    if opts.peak is None and not opts.no_leak:
        pytest.fail("torchmem marker: nothing to check; expected peak=... or no_leak=True",
                    pytrace=False)
    return opts


# -- leaks --------------------------------------------------------------------------------
def _leak_failure(capture: Any, what: str, steps: int) -> str | None:
    """The failure message for a capture with a leak finding, else None."""
    leaks = [f for f in capture.findings if f.cause in LEAK_CAUSES]
    if not leaks:
        return None
    from dataclasses import replace

    from torchmem.report.findings import findings_text

    shown = replace(capture, findings=tuple(leaks))
    lines = [f"torchmem: {what} accumulates memory across {steps} calls"]
    lines += findings_text(shown)[1:]
    return "\n".join(lines).rstrip()


def _run_leak_check(fn: Callable[..., Any], steps: int, what: str, **kwargs: Any) -> Any:
    from torchmem.doctor.session import leak_check

    capture = leak_check(fn, steps, **kwargs)
    message = _leak_failure(capture, what, steps)
    if message is not None:
        pytest.fail(message, pytrace=False)
    return capture


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """``no_leak=True``: the test function is the step function, called ``steps`` times."""
    if pyfuncitem.get_closest_marker(MARKER) is None:
        return None
    opts = _options(pyfuncitem)
    if opts is None or not opts.no_leak:
        return None
    fn = pyfuncitem.obj
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        pytest.fail("torchmem marker: no_leak needs a plain test function; got a coroutine "
                    "function", pytrace=False)
    names = pyfuncitem._fixtureinfo.argnames
    kwargs = {name: pyfuncitem.funcargs[name] for name in names}
    # the test function is not on the stack between calls: no frame of its callers
    # (pytest's) is the code under analysis
    _run_leak_check(fn, opts.steps, f"the test {pyfuncitem.name}", kwargs=kwargs, frames=False)
    return True


@pytest.fixture
def torchmem_leak_check() -> Callable[..., Any]:
    """``torchmem_leak_check(fn, steps=20, *, args=(), kwargs=None, namespace=None)``:
    call ``fn`` ``steps`` times under the doctor and fail the test with its finding when
    memory accumulates across calls; returns the capture otherwise."""

    def check(fn: Callable[..., Any], steps: int = _DEFAULT_STEPS, *, args: tuple[Any, ...] = (),
              kwargs: dict[str, Any] | None = None, namespace: dict[str, Any] | None = None) -> Any:
        name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
        return _run_leak_check(fn, steps, f"{name}()", args=args, kwargs=kwargs,
                               namespace=namespace)

    return check


# -- peaks --------------------------------------------------------------------------------
@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    state = item.config.stash.get(_BASELINE, None)
    marked = item.get_closest_marker(MARKER) is not None
    if not marked and (state is None or not isinstance(item, pytest.Function)):
        return (yield)
    opts = _options(item) if marked else None
    limit = opts.peak if opts is not None else None
    if limit is None and state is None:
        return (yield)
    try:
        from torchmem._pytest_peak import PeakWatch
    except ImportError:  # no torch here: nothing to measure
        PeakWatch = None  # type: ignore[assignment,misc]  # noqa: N806
    if PeakWatch is None:
        if limit is not None:
            pytest.fail("torchmem marker: peak= needs torch, which cannot be imported here",
                        pytrace=False)
        return (yield)
    from torchmem.errors import TorchmemError

    device = (opts.device if opts is not None else None) or (
        state.device if state is not None else None) or "cpu"
    problem: str | None = None
    try:
        watch = PeakWatch(device, limit=limit, levels=state is not None)
    except TorchmemError as err:
        problem = str(err)
    if problem is not None:
        pytest.fail(f"torchmem: {problem}", pytrace=False)
    with watch:
        result = yield
    measured = watch.result
    assert measured is not None
    failures = []
    if limit is not None and measured.peak_delta > limit:
        from torchmem._pytest_holders import peak_failure

        failures.append(peak_failure(measured, limit, item.nodeid))
    if state is not None:
        message = _compare(state, item.nodeid, measured)
        if message:
            failures.append(message)
    if failures:
        pytest.fail("\n\n".join(failures), pytrace=False)
    return result


def _compare(state: _Baseline, nodeid: str, measured: Any) -> str | None:
    from torchmem._pytest_baseline import Entry, regression

    entry = Entry(device=measured.device, peak=measured.peak_delta,
                  roles=dict(measured.role_peaks))
    state.measured[nodeid] = entry
    if state.entries is None or state.update:
        return None
    old = state.entries.get(nodeid)
    if old is None:
        state.missing.append(nodeid)
        return None
    message = regression(nodeid, old, entry, state.tolerance)
    if message:
        state.regressed.append(nodeid)
    return message


# -- the end of the session (and xdist) -------------------------------------------------
def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """pytest-xdist: take the measurements a worker sends back."""
    state = node.config.stash.get(_BASELINE, None)
    raw = getattr(node, "workeroutput", {}).get("torchmem_baseline")
    if state is None or not raw:
        return
    from torchmem._pytest_baseline import _entry

    data = json.loads(raw)
    for nodeid, entry in data["measured"].items():
        state.measured[nodeid] = _entry(nodeid, entry)
    state.missing.extend(data["missing"])
    state.regressed.extend(data["regressed"])


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    state = config.stash.get(_BASELINE, None)
    if state is None:
        return
    if _is_worker(config):
        config.workeroutput["torchmem_baseline"] = json.dumps({  # type: ignore[attr-defined]
            "measured": {k: v.to_json() for k, v in state.measured.items()},
            "missing": state.missing, "regressed": state.regressed})
        return
    if (state.entries is None or state.update) and state.measured:
        from torchmem._pytest_baseline import save

        merged = dict(state.entries or {})
        merged.update(state.measured)
        try:
            save(state.path, merged)
            state.written = True
        except OSError as err:
            config.stash[_WRITE_ERROR] = f"cannot write {state.shown}: {err.strerror or err}"
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR


_WRITE_ERROR = pytest.StashKey[str]()


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(_BASELINE, None)
    if state is None or _is_worker(config):
        return
    write = terminalreporter.write_line
    error = config.stash.get(_WRITE_ERROR, None)
    if error:
        write(f"torchmem: error: {error}", red=True)
    elif state.written:
        verb = "updated" if state.entries is not None else "written"
        write(f"torchmem: baseline {verb}: {state.shown} ({len(state.measured)} test peaks)")
    else:
        compared = len(state.measured) - len(state.missing)
        text = (f"torchmem: {compared} test peaks compared with {state.shown} (tolerance "
                f"{state.tolerance * 100:g}%), {len(state.regressed)} grew")
        if state.missing:
            text += (f"; {len(state.missing)} tests have no baseline entry (record them: "
                     "--torchmem-baseline-update)")
        write(text)

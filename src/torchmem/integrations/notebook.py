"""IPython/Jupyter magics: ``%load_ext torchmem``, ``%%torchmem`` and ``%torchmem_doctor``.

``%%torchmem`` runs its cell under an exact tracker (:func:`torchmem.track` with
``exact=True``) and prints the cell's peak of live tensor bytes, what the cell left alive
(tensor bytes after vs before) and its findings: the variables of the notebook that gained
autograd graphs during the cell, with the statement that adds to them and the fix.
``%%torchmem --html`` also displays the HTML report inline.

``%torchmem_doctor`` analyses the notebook's own namespace: a census of the live tensors,
the variables that hold tensors (``losses``, ``trainer.history``, ``Out[3]``: IPython's
output cache is walked last, so it is named only when it alone keeps a tensor), the graphs
they keep alive, and what changed since the previous ``%torchmem_doctor``. Findings are
rendered like the CLI's (see :mod:`torchmem.integrations._namespace` for the rules).

Cost: ``%%torchmem`` adds one Python call per aten op while the cell runs on the CPU (the
tracker's engine; on CUDA the allocator's counters cost nothing per op) and one walk of
the namespace before and after the cell; ``%torchmem_doctor`` costs one walk and one
census (milliseconds for a small notebook).

Known limitations:
    * The walk attributes each tensor to the first variable that reaches it; a tensor held
      by two variables is reported under one.
    * Memory kept by objects the namespace does not reach (a library's cache, a thread) is
      counted by the tracker and the census, but no variable is named for it.
    * A ``torch.compile``'d function run in a ``%%torchmem`` cell on the CPU falls back to
      eager while the tracker's dispatch mode is active.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from IPython.core import magic_arguments
from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class

from torchmem.integrations import _capture, _namespace
from torchmem.units import format_bytes, format_delta

__all__ = ["TorchmemMagics", "load_ipython_extension", "unload_ipython_extension"]


def _is_cell(filename: str) -> bool:
    return filename.startswith("<ipython-input-")


class _UserFiles:
    """Cells and the user's own files are user code; torch, torchmem, the stdlib and
    installed packages are not."""

    def __init__(self, shell: Any) -> None:
        from torchmem.doctor.steps import UserFrames

        self._frames = UserFrames()
        self._cells = getattr(getattr(shell, "compile", None), "_filename_map", {})

    def __call__(self, filename: str) -> bool:
        return filename in self._cells or _is_cell(filename) or self._frames.is_user_file(filename)


def _cells(shell: Any) -> list[_namespace.CellSource]:
    """The executed cells, from the source IPython registered for each, newest first (a
    statement found in several cells is named where it ran last)."""
    import linecache

    names = dict(getattr(getattr(shell, "compile", None), "_filename_map", {}) or {})
    out = []
    for filename, number in sorted(names.items(), key=lambda kv: -(kv[1] or 0)):
        text = "".join(linecache.getlines(filename))
        if text:
            out.append(_namespace.CellSource(filename, f"In[{number}]", text))
    return out


def _device(requested: str | None) -> str:
    from torchmem.collect.readings import default_device, resolve_device
    from torchmem.errors import TorchmemError

    try:
        return resolve_device(requested) if requested else default_device()
    except TorchmemError as err:
        raise UsageError(str(err)) from None


def _display_html(capture: Any) -> None:
    from IPython.display import HTML, display

    display(HTML(_capture.html_frame(capture)))


@magics_class
class TorchmemMagics(Magics):
    """The ``%%torchmem`` cell magic and the ``%torchmem_doctor`` line magic."""

    shell: Any

    def __init__(self, shell: Any = None) -> None:
        super().__init__(shell)
        self._previous: Any = None  # the last %torchmem_doctor measurement
        self._previous_label: str | None = None
        self._previous_total: int | None = None

    def _label(self) -> str:
        return f"In[{self.shell.execution_count}]"

    def _measure(self) -> Any:
        roots = _namespace.namespace_roots(self.shell.user_ns, self.shell.user_ns_hidden)
        try:
            return _namespace.measure(roots, _UserFiles(self.shell))
        finally:
            roots.clear()

    # -- %%torchmem ----------------------------------------------------------------------
    @magic_arguments.magic_arguments()
    @magic_arguments.argument("--html", action="store_true",
                              help="also display the HTML report inline")
    @magic_arguments.argument("--device", default=None,
                              help="device to track (default: the current accelerator if "
                                   "one is initialised, else cpu)")
    @cell_magic
    def torchmem(self, line: str, cell: str) -> None:
        """Run the cell under exact tracking; print its peak, growth and findings."""
        args = magic_arguments.parse_argstring(self.torchmem, line)
        device = _device(args.device)
        from torchmem.collect.tracker import Tracker

        started, started_at = time.perf_counter(), _capture.now_iso()
        notes: list[str] = []
        before = after = None
        try:
            before = self._measure()
        except Exception as err:  # noqa: BLE001 - never stop the user's cell
            notes.append(f"analysis incomplete: namespace before the cell: {err!r}")
        tracker: Tracker | None = Tracker(device, exact=not device.startswith(("cuda", "xpu")))
        try:
            tracker.__enter__()  # type: ignore[union-attr]
        except Exception as err:  # noqa: BLE001
            notes.append(f"analysis incomplete: tracker: {err!r}")
            tracker = None
        try:
            result = self.shell.run_cell(cell, store_history=False)
        finally:
            if tracker is not None:
                tracker.__exit__(None, None, None)
        error = result.error_in_exec or result.error_before_exec
        try:
            after = self._measure()
        except Exception as err:  # noqa: BLE001
            notes.append(f"analysis incomplete: namespace after the cell: {err!r}")
        findings: list[Any] = []
        if before is not None and after is not None:
            try:
                findings = _namespace.findings(after, _cells(self.shell), previous=before,
                                               since="the cell began", changed_only=True,
                                               device=device)
            except Exception as err:  # noqa: BLE001
                notes.append(f"analysis incomplete: findings: {err!r}")
        lines, peak = _cell_lines(tracker, device, error)
        lines.extend(notes)
        if findings:
            lines.extend(_capture.findings_lines(findings))
        elif before is not None and after is not None:
            lines.append("no findings: no variable of the notebook gained tensors that keep "
                         "autograd graphs alive during this cell")
        print("\n".join(lines), file=sys.stdout)
        if args.html:
            capture = _capture.make_capture(
                "torchmem notebook", ["%%torchmem", *line.split()], started=started,
                started_at=started_at, outcome="exception" if error else "ok",
                error=f"{type(error).__name__}: {error}" if error else None,
                devices=(device,), peak={device: peak} if peak is not None else {},
                findings=findings, notes=lines[:1] + notes)
            _display_html(capture)

    # -- %torchmem_doctor ----------------------------------------------------------------
    @magic_arguments.magic_arguments()
    @magic_arguments.argument("--html", action="store_true",
                              help="also display the HTML report inline")
    @magic_arguments.argument("--top", type=int, default=8,
                              help="how many variables to list (default: 8)")
    @line_magic
    def torchmem_doctor(self, line: str = "") -> None:
        """Analyse the notebook's namespace: live tensors, who holds them, graphs kept alive."""
        args = magic_arguments.parse_argstring(self.torchmem_doctor, line)
        if args.top < 0:
            raise UsageError(f"--top must be >= 0; got {args.top}")
        started, started_at = time.perf_counter(), _capture.now_iso()
        label = self._label()
        previous, since = self._previous, self._previous_label
        notes: list[str] = []
        census = snap = None
        try:
            snap = self._measure()
        except Exception as err:  # noqa: BLE001
            notes.append(f"analysis incomplete: namespace: {err!r}")
        try:
            census = _census()
        except Exception as err:  # noqa: BLE001
            notes.append(f"analysis incomplete: census: {err!r}")
        findings: list[Any] = []
        if snap is not None:
            try:
                findings = _namespace.findings(snap, _cells(self.shell), previous=previous,
                                               since=since)
            except Exception as err:  # noqa: BLE001
                notes.append(f"analysis incomplete: findings: {err!r}")
        lines = _doctor_lines(snap, census, previous, since, self._previous_total, args.top)
        lines.extend(notes)
        if findings:
            lines.extend(_capture.findings_lines(findings))
        elif snap is not None:
            lines.append("no findings: no variable of the notebook keeps several autograd "
                         "graphs, or a graph with saved activations, alive")
        print("\n".join(lines), file=sys.stdout)
        if snap is not None:
            self._previous, self._previous_label = snap, f"the last %torchmem_doctor ({label})"
            self._previous_total = census.total_bytes if census is not None else None
        if args.html:
            capture = _capture.make_capture(
                "torchmem notebook", ["%torchmem_doctor", *line.split()], started=started,
                started_at=started_at, findings=findings, census=census,
                devices=tuple(census.bytes_by_device()) if census is not None else (),
                notes=lines[:2] + notes)
            _display_html(capture)


def _census() -> Any:
    """The process-wide census, the same numbers as ``torchmem.census()``.

    A notebook is the process: a module that no variable names any more (one a cell
    replaced, or one a closure keeps) still holds parameters, and they are counted as
    such, not as ``other``.
    """
    from torchmem.collect.census import census

    return census()


def _cell_lines(tracker: Any, device: str, error: Any) -> tuple[list[str], int | None]:
    """The cell's headline: peak, before, after, kept; and the absolute peak."""
    if tracker is None:
        return ["torchmem: the cell ran without tracking"], None
    before, after, peak = _capture.tracked_bytes(tracker)
    what = "allocated" if tracker.source == "allocator" else "live tensors"
    ended = f" (the cell raised {type(error).__name__})" if error else ""
    return [f"torchmem: peak {format_bytes(peak)} of {what} on {device} during the cell "
            f"({format_delta(peak - before)} above its start){ended}",
            f"growth: {format_delta(after - before)} of {what} after the cell "
            f"({format_bytes(before)} before, {format_bytes(after)} after)"], peak


def _doctor_lines(snap: Any, census: Any, previous: Any, since: str | None,
                  previous_total: int | None, top: int) -> list[str]:
    lines = []
    if census is not None:
        roles = ", ".join(f"{role} {format_bytes(n)}" for role, n in census.bytes_by_role().items()
                          if n)
        change = (f"; {format_delta(census.total_bytes - previous_total)} since {since}"
                  if previous_total is not None and since else "")
        lines.append(f"torchmem doctor: {format_bytes(census.total_bytes)} of live tensors in "
                     f"{census.n_storages} storages{': ' + roles if roles else ''}{change}")
    if snap is None:
        return lines
    rows = _namespace.holders(snap, previous, limit=top)
    if not rows:
        lines.append("no variable of the notebook holds tensors besides parameters, gradients "
                     "and optimizer state")
        return lines
    held = sum(h.bytes for h in _namespace.holders(snap, limit=10**9))
    lines.append(f"variables holding tensors (besides parameters, gradients and optimizer "
                 f"state): {format_bytes(held)}")
    header = ("variable", "type", "items", "tensors", "with grad_fn", "bytes", "graph nodes",
              "change")
    table = [header] + [(h.path, h.type, "" if h.items is None else str(h.items), str(h.tensors),
                         str(h.grad_tensors), format_bytes(h.bytes), str(h.graph_nodes),
                         "new" if h.change is None and previous is not None else
                         "" if h.change is None else format_delta(h.change)) for h in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for r in table:
        cells = [r[0].ljust(widths[0]), r[1].ljust(widths[1])]
        cells += [c.rjust(w) for c, w in zip(r[2:], widths[2:])]
        lines.append("  " + "  ".join(cells).rstrip())
    return lines


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext torchmem``: register the magics on ``ipython``."""
    ipython.register_magics(TorchmemMagics)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext torchmem``: remove the magics again."""
    manager = ipython.magics_manager
    for kind, names in (("cell", ("torchmem",)), ("line", ("torchmem_doctor",))):
        for name in names:
            manager.magics[kind].pop(name, None)
    manager.registry.pop("TorchmemMagics", None)

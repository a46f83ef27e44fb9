"""A run's capture: what ``torchmem run`` and ``torchmem doctor`` record, as plain data.

Record once, render many: a :class:`Capture` is written as versioned JSON (``--json``)
and rendered again later by ``torchmem report``. This module never imports torch.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torchmem.errors import CaptureError
from torchmem.model._serde import Record

__all__ = [
    "SCHEMA_VERSION",
    "CAUSES",
    "StepRecord",
    "Growth",
    "Culprit",
    "Finding",
    "StorageSummary",
    "Capture",
]

#: Version of the JSON capture format. Bump on any incompatible change.
SCHEMA_VERSION = 1

#: Cause classes a finding can carry, in the order reports list them when bytes tie.
CAUSES: tuple[str, ...] = (
    "retained_graph",
    "hidden_state_chain",
    "backward_flags_graph",
    "eval_graph",
    "view_pins_storage",
    "reference_cycle",
    "growing_container",
    "grad_not_cleared",
    "fragmentation",
    "cache_thrash",
)


@dataclass(frozen=True)
class StepRecord(Record):
    """Memory at the end of one training step.

    Attributes:
        step: 1-based index of the step (the n-th ``optimizer.step()``, or the n-th
            ``backward()`` when the script has no optimizer).
        time: seconds since the script started.
        used: device -> primary bytes in use at the step boundary (CUDA: bytes
            allocated by the caching allocator; CPU: C-heap bytes in use).
        reserved: device -> reserved bytes where the device has a caching allocator.
        peak: device -> peak bytes seen since the previous step, where known.
        rss: the process resident set size at the step boundary.
    """

    step: int
    time: float
    used: dict[str, int] = field(default_factory=dict)
    reserved: dict[str, int] = field(default_factory=dict)
    peak: dict[str, int] = field(default_factory=dict)
    rss: int | None = None


@dataclass(frozen=True)
class Growth(Record):
    """The verdict of growth detection for one device's per-step series.

    Attributes:
        device: device string such as ``"cpu"`` or ``"cuda:0"``.
        verdict: ``"growing"``, ``"flat"`` or ``"undecided"``.
        bytes_per_step: fitted slope over the analysed steps.
        r2: goodness of the linear fit (1.0 is a perfect line).
        first_step: first step of the analysed window (warm-up skipped).
        last_step: last step analysed.
        total_growth: bytes gained from ``first_step`` to ``last_step``.
        reason: one sentence saying why the verdict was reached.
    """

    device: str
    verdict: str
    bytes_per_step: float = 0.0
    r2: float = 0.0
    first_step: int = 0
    last_step: int = 0
    total_growth: int = 0
    reason: str = ""


@dataclass(frozen=True)
class Culprit(Record):
    """What keeps the memory alive, as the user wrote it.

    Attributes:
        name: the expression as written, e.g. ``losses``, ``self.history``, ``cache['x']``.
        kind: ``local``, ``global``, ``attribute``, ``container``, ``closure``,
            ``hook``, ``cycle`` or ``unknown``.
        file: source file of the statement that keeps adding to it (None if unknown).
        line: 1-based line of that statement.
        code: the source text of that line, stripped.
        function: the function that holds the culprit (``<module>`` for globals).
        type: the Python type name of the culprit object, e.g. ``list``.
    """

    name: str
    kind: str = "unknown"
    file: str | None = None
    line: int | None = None
    code: str | None = None
    function: str | None = None
    type: str | None = None


@dataclass(frozen=True)
class Finding(Record):
    """One diagnosed cause of memory growth or misuse, with its proof and its fix.

    Attributes:
        cause: one of :data:`CAUSES`.
        title: short human title, e.g. ``"retained autograd graph"``.
        device: the device whose memory is affected.
        bytes: bytes at stake at the end of the run (or at the failure).
        bytes_per_step: growth attributed to this cause, per step.
        culprit: what holds the memory, with file:line, if it could be named.
        evidence: sentences proving the diagnosis (counts, node types, shapes).
        data: the same evidence as numbers, for tools (e.g. ``{"items": 200,
            "graph_nodes": 800, "saved_bytes": 12345}``).
        fix: the change to make, specific to the code.
        confidence: ``"high"``, ``"medium"`` or ``"low"``.
    """

    cause: str
    title: str
    device: str = "cpu"
    bytes: int = 0
    bytes_per_step: float = 0.0
    culprit: Culprit | None = None
    evidence: tuple[str, ...] = ()
    data: dict[str, Any] = field(default_factory=dict)
    fix: str = ""
    confidence: str = "high"


@dataclass(frozen=True)
class StorageSummary(Record):
    """One of the largest live storages, as listed in a capture (no tensor data)."""

    nbytes: int
    device: str
    dtype: str
    shape: tuple[int, ...]
    role: str
    name: str | None = None


@dataclass(frozen=True)
class Capture(Record):
    """Everything a run recorded, ready to be saved as JSON and rendered later.

    Attributes:
        schema_version: the format version (:data:`SCHEMA_VERSION`).
        tool: ``"torchmem run"`` or ``"torchmem doctor"``.
        version: the torchmem version that wrote it.
        argv: the script's ``sys.argv`` (script path first).
        started_at: ISO-8601 UTC time the run started.
        duration_s: wall time of the run.
        exit_code: the script's exit code.
        outcome: ``ok``, ``exception``, ``exit``, ``interrupt``, ``oom`` or ``max_steps``.
        error: one line describing the exception, if the script raised.
        step_source: what counted as a step: ``optimizer``, ``backward``, ``forward``, ``none``.
        devices: devices that held memory during the run.
        steps: one record per step.
        peak: device -> peak bytes over the whole run.
        timeline: optional sampled series, ``{"t": [...], "step": [...], "<device>": [...]}``.
        growth: growth verdict per device.
        findings: diagnosed causes, largest first.
        top_storages: largest live storages at the end of the run (or at the failure).
        bytes_by_role: role -> bytes at the end of the run (or at the failure).
        notes: extra sentences for the report (e.g. why a verdict is undecided).
        environment: python/torch versions, platform, device names.
    """

    tool: str
    version: str
    argv: tuple[str, ...]
    started_at: str
    duration_s: float
    exit_code: int
    outcome: str
    schema_version: int = SCHEMA_VERSION
    error: str | None = None
    step_source: str = "none"
    devices: tuple[str, ...] = ()
    steps: tuple[StepRecord, ...] = ()
    peak: dict[str, int] = field(default_factory=dict)
    timeline: dict[str, list[float]] = field(default_factory=dict)
    growth: tuple[Growth, ...] = ()
    findings: tuple[Finding, ...] = ()
    top_storages: tuple[StorageSummary, ...] = ()
    bytes_by_role: dict[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    environment: dict[str, str] = field(default_factory=dict)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write this capture as JSON, atomically (a failed write leaves no partial file)."""
        target = Path(path)
        text = json.dumps(self.to_dict(), indent=1, sort_keys=False, allow_nan=False)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".torchmem-", suffix=".json", dir=target.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text + "\n")
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return target

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "Capture":
        """Read a capture written by :meth:`save`.

        Raises:
            CaptureError: the file is missing, not JSON, truncated, not a torchmem
                capture, or of a newer schema version.
        """
        p = Path(path)
        try:
            raw = p.read_bytes()
        except FileNotFoundError:
            raise CaptureError(f"capture not found: {p}", tip="pass a file written by --json") from None
        except OSError as err:
            raise CaptureError(f"cannot read capture {p}: {err.strerror}") from None
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise CaptureError(
                f"{p} is not a valid torchmem capture; expected JSON, got a parse error ({err})",
                tip="the file may be truncated; re-run with --json to record it again",
            ) from None
        return cls.from_json_dict(data, source=str(p))

    @classmethod
    def from_json_dict(cls, data: Any, source: str = "capture") -> "Capture":
        """Validate and build a capture from parsed JSON (see :meth:`load`)."""
        if not isinstance(data, dict) or "schema_version" not in data or "tool" not in data:
            raise CaptureError(f"{source} is not a torchmem capture; expected an object "
                               "with 'schema_version' and 'tool'")
        version = data["schema_version"]
        if not isinstance(version, int) or version > SCHEMA_VERSION or version < 1:
            raise CaptureError(
                f"{source} has schema_version {version!r}; this torchmem reads 1..{SCHEMA_VERSION}",
                tip="upgrade torchmem to read captures from newer versions",
            )
        try:
            return cls.from_dict(data)
        except (ValueError, TypeError, KeyError, AttributeError) as err:
            raise CaptureError(f"{source} is a corrupted torchmem capture: {err}") from None

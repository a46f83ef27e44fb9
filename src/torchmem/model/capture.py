"""A run's capture: what ``torchmem run`` and ``torchmem doctor`` record, as plain data.

Record once, render many: a :class:`Capture` is written as versioned JSON (``--json``)
and rendered again later by ``torchmem report``. This module never imports torch.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torchmem._files import write_file
from torchmem.errors import CaptureError
from torchmem.model._serde import Record
from torchmem.model.holders import HoldersMoment
from torchmem.model.findings import (
    CAUSES,
    VERIFICATION_STATUSES,
    Culprit,
    FixEdit,
    Finding,
    Verification,
)
from torchmem.model.lines import LineProfile, LineRecord
from torchmem.model.schema import NON_NEGATIVE, SchemaError, bounds, describe, validate

__all__ = [
    "SCHEMA_VERSION",
    "CAUSES",
    "StepRecord",
    "Growth",
    "Culprit",
    "FixEdit",
    "Verification",
    "VERIFICATION_STATUSES",
    "Finding",
    "StorageSummary",
    "Phase",
    "Capture",
    "MAX_CAPTURE_BYTES",
]

#: Version of the JSON capture format. Bump on any incompatible change.
SCHEMA_VERSION = 1

#: Largest capture file :meth:`Capture.load` reads (a run of millions of steps fits).
MAX_CAPTURE_BYTES = 256 * 1024 * 1024

#: Most devices, and most keys of a per-device object, a capture may list.
_DEVICES = bounds(min=0, max_items=1024)
#: Most entries of the capture's other lists (findings, notes, evidence...).
_MANY = bounds(max_items=100_000)

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

    step: int = field(metadata=NON_NEGATIVE)
    time: float = field(metadata=NON_NEGATIVE)
    used: dict[str, int] = field(default_factory=dict, metadata=_DEVICES)
    reserved: dict[str, int] = field(default_factory=dict, metadata=_DEVICES)
    peak: dict[str, int] = field(default_factory=dict, metadata=_DEVICES)
    rss: int | None = field(default=None, metadata=NON_NEGATIVE)


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
        total_growth: bytes gained from ``first_step`` to ``last_step`` (of one
            stretch, for a sawtooth).
        reason: one sentence saying why the verdict was reached.
        stretches: for a sawtooth (memory rises steadily, falls back, rises again), the
            number of rising stretches judged; ``bytes_per_step`` and ``r2`` are then the
            medians within them. 0 for a verdict on one line.
    """

    device: str
    verdict: str
    bytes_per_step: float = 0.0
    r2: float = 0.0
    first_step: int = field(default=0, metadata=NON_NEGATIVE)
    last_step: int = field(default=0, metadata=NON_NEGATIVE)
    total_growth: int = 0
    reason: str = ""
    stretches: int = field(default=0, metadata=NON_NEGATIVE)


@dataclass(frozen=True)
class StorageSummary(Record):
    """One of the largest live storages, as listed in a capture (no tensor data)."""

    nbytes: int = field(metadata=NON_NEGATIVE)
    device: str
    dtype: str
    shape: tuple[int, ...] = field(metadata=bounds(min=0, max_items=64))
    role: str
    name: str | None = None


@dataclass(frozen=True)
class Phase(Record):
    """One kind of phase of a run, with its own growth verdict.

    Attributes:
        kind: ``train`` (optimizer or backward steps), ``eval-grad``/``eval-no-grad``
            (top-level forwards between ``model.eval()`` and the next ``model.train()``
            or training step, grad enabled or not), ``inference`` (top-level forwards of
            a script that never trains), ``loop`` (iterations of the user's loop) or
            ``session``.
        passes: separate stretches of this phase (evaluation passes; for ``train``, the
            stretches between evaluation passes: epochs, when the script evaluates once
            per epoch).
        steps: steps of this phase (for evaluation passes, their top-level forwards).
        first_step, last_step: the training steps the phase ran between (0: none).
        growth: the phase's growth verdict on the CPU heap (None when not judged).
    """

    kind: str
    passes: int = field(default=0, metadata=NON_NEGATIVE)
    steps: int = field(default=0, metadata=NON_NEGATIVE)
    first_step: int = field(default=0, metadata=NON_NEGATIVE)
    last_step: int = field(default=0, metadata=NON_NEGATIVE)
    growth: Growth | None = None


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
        step_source: what counted as a step: ``optimizer``, ``backward``, ``forward``,
            ``loop`` (iterations of the user's loop), ``session`` or ``none``.
        devices: devices that held memory during the run.
        steps: one record per step.
        peak: device -> peak bytes over the whole run.
        timeline: optional sampled series, ``{"t": [...], "step": [...], "<device>": [...]}``.
        growth: growth verdict per device.
        findings: diagnosed causes, largest first.
        top_storages: largest live storages at the end of the run (or at the failure).
        bytes_by_role: role -> bytes at the end of the run (or at the failure).
        bytes_by_module: module path -> bytes of the parameters, buffers, gradients and
            optimizer state it owns, from the same census (``(model)``: the model's own).
        notes: extra sentences for the report (e.g. why a verdict is undecided).
        environment: python/torch versions, platform, device names.
        lines: memory per source line (``torchmem lines``), ranked: the line that keeps
            a leak alive first, then by growth per step and bytes at the peak.
        line_profile: how ``lines`` were measured (profiled steps, peak) and the
            allocation sites of the largest storages; None without ``torchmem lines``.
        phases: the run's phases (training, evaluation passes...), each with its own
            growth verdict; empty in captures written before phases were recorded.
        holders: who holds the largest storages at the run's peak, at an
            out-of-memory error or other exception, and at the end (``torchmem doctor``);
            empty in captures written before they were recorded.
    """

    tool: str
    version: str
    argv: tuple[str, ...] = field(metadata=_MANY)
    started_at: str
    duration_s: float
    exit_code: int
    outcome: str
    schema_version: int = SCHEMA_VERSION
    error: str | None = None
    step_source: str = "none"
    devices: tuple[str, ...] = field(default=(), metadata=_DEVICES)
    steps: tuple[StepRecord, ...] = ()
    peak: dict[str, int] = field(default_factory=dict, metadata=_DEVICES)
    timeline: dict[str, list[float]] = field(default_factory=dict,
                                             metadata=bounds(max_items=1024))
    growth: tuple[Growth, ...] = field(default=(), metadata=bounds(max_items=1024))
    findings: tuple[Finding, ...] = field(default=(), metadata=_MANY)
    top_storages: tuple[StorageSummary, ...] = field(default=(), metadata=_MANY)
    bytes_by_role: dict[str, int] = field(default_factory=dict,
                                          metadata=bounds(min=0, max_items=100_000))
    bytes_by_module: dict[str, int] = field(default_factory=dict,
                                            metadata=bounds(min=0, max_items=100_000))
    notes: tuple[str, ...] = field(default=(), metadata=_MANY)
    environment: dict[str, str] = field(default_factory=dict, metadata=_MANY)
    lines: tuple[LineRecord, ...] = field(default=(), metadata=_MANY)
    line_profile: LineProfile | None = None
    phases: tuple[Phase, ...] = field(default=(), metadata=bounds(max_items=64))
    holders: tuple[HoldersMoment, ...] = field(default=(), metadata=bounds(max_items=16))

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write this capture as JSON, atomically (a failed write leaves no partial file),
        with the mode ``open(path, "w")`` would give, through symlinks; return the path
        written."""
        text = json.dumps(self.to_dict(), indent=1, sort_keys=False, allow_nan=False)
        return Path(write_file(path, (text + "\n").encode("utf-8")))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Capture":
        """Validate ``data`` against the capture schema, then build the capture.

        Raises:
            SchemaError: (a ``ValueError``) the first value that does not match, with its
                path, e.g. ``steps[3].time: expected a finite number, got "abc"``.
        """
        validate(cls, data)
        return super().from_dict(data)

    @classmethod
    def load(cls, path: str | os.PathLike[str], *,
             max_bytes: int | None = None) -> "Capture":
        """Read and validate a capture written by :meth:`save`.

        Args:
            path: the JSON file.
            max_bytes: refuse files larger than this (default :data:`MAX_CAPTURE_BYTES`).

        Raises:
            CaptureError: the file is missing, unreadable, too large, not UTF-8, not JSON,
                not a torchmem capture, of a newer schema version, or any value in it
                does not match the schema (one message naming the first bad value).
        """
        p = Path(path)
        if max_bytes is None:
            max_bytes = MAX_CAPTURE_BYTES
        try:
            with p.open("rb") as fh:
                raw = fh.read(max_bytes + 1)
        except FileNotFoundError:
            raise CaptureError(f"capture not found: {p}", tip="pass a file written by --json") from None
        except OSError as err:
            raise CaptureError(f"cannot read capture {p}: {err.strerror or err}") from None
        except MemoryError:
            raise CaptureError(f"cannot read capture {p}: out of memory") from None
        if len(raw) > max_bytes:
            raise CaptureError(
                f"{p} is not a valid torchmem capture; expected at most {max_bytes} bytes, "
                "got a larger file", tip="pass a file written by --json")
        return cls.loads(raw, source=str(p))

    @classmethod
    def loads(cls, raw: bytes | str, source: str = "capture") -> "Capture":
        """Parse and validate a capture from its JSON text (see :meth:`load`).

        Raises:
            CaptureError: as :meth:`load`.
        """
        bad = f"{source} is not a valid torchmem capture"
        retry = "the file may be truncated or damaged; re-run with --json to record it again"
        if isinstance(raw, bytes):
            try:
                raw = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise CaptureError(f"{bad}; expected UTF-8 JSON text, got an undecodable byte "
                                   f"at offset {err.start}", tip=retry) from None
        if not raw.strip():
            raise CaptureError(f"{bad}; expected JSON, got an empty file", tip=retry)
        try:
            data = json.loads(raw, parse_constant=_reject_constant)
        except RecursionError:
            raise CaptureError(f"{bad}; expected JSON nested a few levels deep, got deeper "
                               "nesting than the parser allows", tip=retry) from None
        except json.JSONDecodeError as err:
            raise CaptureError(f"{bad}; expected JSON, got a parse error ({err})",
                               tip=retry) from None
        except (ValueError, MemoryError) as err:
            raise CaptureError(f"{bad}; {err}", tip=retry) from None
        return cls.from_json_dict(data, source=source)

    @classmethod
    def from_json_dict(cls, data: Any, source: str = "capture") -> "Capture":
        """Validate and build a capture from parsed JSON (see :meth:`load`)."""
        if not isinstance(data, dict) or "schema_version" not in data or "tool" not in data:
            got = describe(data) if not isinstance(data, dict) else "an object without them"
            raise CaptureError(f"{source} is not a torchmem capture; expected an object "
                               f"with 'schema_version' and 'tool', got {got}")
        version = data["schema_version"]
        if (isinstance(version, bool) or not isinstance(version, int)
                or version > SCHEMA_VERSION or version < 1):
            raise CaptureError(
                f"{source} has schema_version {describe(version)}; this torchmem reads "
                f"1..{SCHEMA_VERSION}",
                tip="upgrade torchmem to read captures from newer versions",
            )
        try:
            return cls.from_dict(data)
        except SchemaError as err:
            raise CaptureError(f"{source} is not a valid torchmem capture: {err}",
                               tip="the file was damaged or edited; re-run with --json "
                                   "to record it again") from None
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError,
                OverflowError) as err:  # pragma: no cover - validate() lets none through
            raise CaptureError(f"{source} is a corrupted torchmem capture: "
                               f"{describe(str(err))}") from None


def _reject_constant(name: str) -> float:
    """``json.loads`` hook: ``NaN``/``Infinity`` are not JSON and never valid in a capture."""
    raise ValueError(f"expected JSON numbers, got the non-standard literal {name}")

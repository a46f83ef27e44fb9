"""Plain-data summaries of a run for its :class:`RunResult`: peaks, the sampled timeline,
the environment. Split from :mod:`torchmem.doctor.runner`."""

from __future__ import annotations

import os
import platform
from typing import Any, Sequence

import torch

from torchmem import __version__

__all__ = ["census_summary", "cuda_devices", "environment", "peaks", "timeline_series"]


def cuda_devices() -> list[int]:
    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return []
    return list(range(torch.cuda.device_count()))


def environment() -> dict[str, str]:
    env = {"python": platform.python_version(), "torch": torch.__version__,
           "platform": platform.platform(terse=True), "torchmem": __version__}
    for index in cuda_devices():
        env[f"cuda:{index}"] = torch.cuda.get_device_name(index)
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):  # set by torchrun
        if os.environ.get(name):
            env[name.lower()] = os.environ[name]
    if os.environ.get("TORCHELASTIC_RUN_ID"):  # tells the ranks of one torchrun job
        env["run_id"] = os.environ["TORCHELASTIC_RUN_ID"]
    return env


def peaks(run: Any) -> dict[str, int]:
    peak: dict[str, int] = dict(run.step_log.peak)  # every step, thinned ones included
    for timeline in run.timelines:
        value = timeline.peak_used
        if value is not None:
            peak[timeline.device] = max(peak.get(timeline.device, 0), int(value))
    for index in cuda_devices():
        name = f"cuda:{index}"
        peak[name] = max(peak.get(name, 0), int(torch.cuda.max_memory_allocated(index)))
    return peak


def timeline_series(timelines: Sequence[Any]) -> dict[str, list[float]]:
    """Flatten the CPU timeline (and per-device ones) into plain series for the capture."""
    series: dict[str, list[float]] = {}
    for timeline in timelines:
        samples = [s for s in timeline.samples if s.used is not None]
        if not samples:
            continue
        if "t" not in series:
            t0 = samples[0].time
            series["t"] = [round(s.time - t0, 4) for s in samples]
            series["step"] = [float(s.step if s.step is not None else 0) for s in samples]
            series[timeline.device] = [float(s.used) for s in samples]
        else:  # other devices: their own sampling times are close enough to share the axis
            series[timeline.device] = [float(s.used) for s in samples][: len(series["t"])]
    return series


def census_summary(census: Any, top: int = 10) -> tuple[tuple[Any, ...], dict[str, int],
                                                       dict[str, int]]:
    """The capture's ``top_storages``, ``bytes_by_role`` and ``bytes_by_module`` from a
    census (or nothing)."""
    from torchmem.model.capture import StorageSummary

    if census is None:
        return (), {}, {}
    rows = []
    for entry in census.top(top):
        rows.append(StorageSummary(nbytes=entry.nbytes, device=entry.device, dtype=entry.dtype,
                                   shape=tuple(entry.shapes[0]) if entry.shapes else (),
                                   role=entry.role, name=entry.name))
    return tuple(rows), dict(census.bytes_by_role()), census.bytes_by_module()

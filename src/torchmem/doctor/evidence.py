"""The doctor's evidence as plain data: what the probe gathered while the script ran.

:class:`Evidence` is filled by :class:`torchmem.doctor.probe.DoctorProbe`: per-path
snapshots at a few step boundaries (:mod:`torchmem.doctor.culprit`), the backward flags
seen each step, gradient checks between optimizer steps (:class:`GradCheck`), what private
garbage collections found (:class:`GarbageRecord`), ``empty_cache`` calls and allocator
statistics. It holds strings and numbers only, never a tensor of the script.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torchmem.doctor.culprit import Snapshot

__all__ = ["Evidence", "GarbageRecord", "GradCheck"]


@dataclass
class GarbageRecord:
    """What one private ``gc.collect()`` at a boundary found in cyclic garbage."""

    step: int
    steps_since: int
    objects: int
    tensor_bytes: int
    freed_heap: int
    anchors: list[tuple[str, str, str | None, int | None, str | None]] = field(default_factory=list)
    # (description, culprit name, file, line, code) of user objects in the garbage


@dataclass
class GradCheck:
    """Gradient bookkeeping between two optimizer steps."""

    step: int
    accumulated: bool  # same .grad storages, version advanced only by backward passes
    zero_grad_calls: int
    backward_calls: int
    grad_bytes: int
    optimizer_name: str | None = None
    manual: bool = False  # no optimizer: parameters updated by hand
    # the watched parameters changed between the two boundaries (their version counters
    # advanced or their values moved): an update ran; None when it was not measured
    updated: bool | None = None
    file: str | None = None
    line: int | None = None
    code: str | None = None
    # (file, line, code, function) of a zero_grad() that ran before the loop of the steps,
    # in the function that runs that loop (:mod:`torchmem.doctor.zero_grad_site`)
    zero_site: tuple[str, int, str, str] | None = None


@dataclass
class Evidence:
    """Everything the probe gathered, as plain data."""

    snapshots: list[Snapshot] = field(default_factory=list)
    backward_steps: int = 0
    retain_graph_steps: int = 0
    create_graph_steps: int = 0
    backward_site: tuple[str, int, str] | None = None
    create_graph_site: tuple[str, int, str] | None = None
    # path -> the most of its sampled tensors that a backward(retain_graph=True) started
    # from, at one snapshot (see torchmem.doctor.backward_roots)
    retained_roots: dict[str, int] = field(default_factory=dict)
    native_call_steps: dict[str, int] = field(default_factory=dict)
    native_call_sites: dict[str, tuple[str, int, str]] = field(default_factory=dict)
    grad_checks: list[GradCheck] = field(default_factory=list)
    # (file, function, name) -> a local leaf tensor's gradient at backward calls
    # (see torchmem.doctor.leaf_grads)
    leaf_grads: dict[tuple[str, str, str], Any] = field(default_factory=dict)
    garbage: list[GarbageRecord] = field(default_factory=list)
    empty_cache_steps: int = 0
    empty_cache_site: tuple[str, int, str] | None = None
    steps: int = 0
    allocator: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: what the diagnosis saw and did not report, in words, for the report's notes
    notes: list[str] = field(default_factory=list)
